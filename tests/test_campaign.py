"""The campaign trains every report run N at a time and leaves others' work alone; status reads the files."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import builders
import pytest
import torch
from builders import saved

from allaction.cli import main
from allaction.experiment import PONG
from rlhelpers.cli import main as helper_main
from rlhelpers.core.errors import RLHelpersError
from rlhelpers.runner import campaign
from rlhelpers.runner.campaign import (
    campaign_parallel,
    campaign_runs,
    run_campaign,
    run_status,
    status_table,
    stop_training,
)
from rlhelpers.runner.config import TrainConfig
from rlhelpers.runner.run import session_provenance
from rlhelpers.runner.store import (
    CAMPAIGN_LOCK,
    LOCK_FILE,
    METRICS_FILE,
    TRAIN_LOG,
)

PONG_RUNS = campaign_runs(PONG.arms, PONG.seeds)
RUN_NAMES = [run.name for run in PONG_RUNS]
CARTPOLE = builders.cartpole_args(eval_interval=500, stop_return=1000)


@pytest.fixture
def live_pid() -> Iterator[int]:
    """The pid of a live process on this host that is not the test itself."""
    proc = subprocess.Popen(["sleep", "300"])
    yield proc.pid
    proc.kill()
    proc.wait()


def hold_lock(path: Path, pid: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"host": socket.gethostname(), "pid": pid, "heartbeat": time.time()}))




def write_history(run_path: Path, means: list[float], total: int = 1_000, stop: float = 18.0) -> None:
    builders.write_run(run_path, builders.evaluations(means, every=500, lengths=(1, 1)),
                       {"total_timesteps": total, "stop_return": stop})


def test_status_names_every_state(tmp_path: Path, live_pid: int) -> None:
    write_history(tmp_path / "a2c_seed-0", [-21.0, -5.0, 3.0])  # steps 0..1000 = the budget
    write_history(tmp_path / "task1_seed-0", [-21.0, 19.0])
    write_history(tmp_path / "task2_seed-0", [-21.0])
    write_history(tmp_path / "a2c_seed-100", [-21.0])
    hold_lock(tmp_path / "a2c_seed-100" / LOCK_FILE, live_pid)
    # Records 4 s apart (appended in one go they can share a millisecond, and then no rate shows).
    start = time.time() - 8
    lines = [json.dumps({"global_step": step, "time": start + step / 100, "charts/fps": 1.0}) for step in (0, 400, 800)]
    (tmp_path / "a2c_seed-100" / METRICS_FILE).write_text("\n".join(lines) + "\n")
    states = {name: run_status(tmp_path / name).state for name in RUN_NAMES}
    assert states == {"a2c_seed-0": "finished", "task1_seed-0": "stopped at > 18", "task2_seed-0": "paused",
                      "a2c_seed-100": "running", "task1_seed-100": "not started", "task2_seed-100": "not started"}
    running = run_status(tmp_path / "a2c_seed-100")
    assert running.steps == 800 and running.steps_per_s == pytest.approx(100.0)
    assert running.steps_per_s is not None and running.eta_s == pytest.approx(200 / running.steps_per_s)
    finished = run_status(tmp_path / "a2c_seed-0")
    last, best = finished.record.last, finished.record.best
    assert last is not None and best is not None
    assert last.mean == 3.0 and last.sem == pytest.approx(1.0) and best.mean == 3.0
    table = status_table(tmp_path).splitlines()
    assert [line.split()[0] for line in table[1:]] == ["a2c_seed-0", "a2c_seed-100", "task1_seed-0", "task2_seed-0"]
    assert table[1].split()[:5] == ["a2c_seed-0", "1,000", "3.00", "±", "1.00"]  # the runs present, no others


def test_the_rate_after_a_resume_counts_the_new_session_only(tmp_path: Path, live_pid: int) -> None:
    """Resumed after a pause, a run's steps/s is its new session's: the lines kept from before the pause (up to the
    checkpoint the session resumed from) do not stretch the window over the hours the run did not train."""
    paused_at = time.time() - 610  # the first session logged 100 steps/s up to step 20,000, then the run paused
    session = session_provenance(torch.device("cpu"), 1, 0)
    sessions = tuple(dataclasses.replace(session, start_step=step, start_time=start)
                     for step, start in ((0, paused_at - 200), (20_000, paused_at + 600)))
    builders.write_run(tmp_path / "a2c_seed-0", builders.evaluations([-21.0]), {"total_timesteps": 100_000},
                       sessions=sessions)
    lines = [{"global_step": step, "time": paused_at - (20_000 - step) / 100} for step in (10_000, 20_000)]
    lines.append({"global_step": 30_000, "time": paused_at + 610})  # 10,000 steps in the 10 s since the resume
    (tmp_path / "a2c_seed-0" / METRICS_FILE).write_text("".join(json.dumps(line) + "\n" for line in lines))
    hold_lock(tmp_path / "a2c_seed-0" / LOCK_FILE, live_pid)
    status = run_status(tmp_path / "a2c_seed-0")
    assert status.state == "running" and status.steps_per_s == pytest.approx(1_000.0)
    assert status.eta_s == pytest.approx(70.0)


def test_campaign_trains_all_runs_skips_finished_and_waits_for_held_ones(tmp_path: Path, live_pid: int,
                                                                         capsys: pytest.CaptureFixture,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that another live process holds is left alone while it is held, and trained once it is released."""
    monkeypatch.setattr(campaign, "usable_cpus", lambda: 2)  # two runs on 2 cores: one torch thread each
    runs = tmp_path / "runs"
    held = runs / "a2c_seed-0" / LOCK_FILE
    hold_lock(held, live_pid)
    untouched_while_held = []

    def release_once_the_others_are_over() -> None:
        deadline = time.monotonic() + 300
        while not all(run_status(runs / name).over for name in RUN_NAMES[1:]) and time.monotonic() < deadline:
            time.sleep(0.2)
        untouched_while_held.append(not (runs / "a2c_seed-0" / "eval_history.json").exists() and held.exists())
        held.unlink()

    releasing = threading.Thread(target=release_once_the_others_are_over, daemon=True)
    releasing.start()
    args = ["campaign", "--runs-dir", str(runs), "--total-timesteps", "1000", "--parallel", "2", *CARTPOLE]
    assert main(args) == 0
    releasing.join()
    out = capsys.readouterr().out
    assert out.startswith("campaign: 6 runs, 2 at a time on cpu (")  # the device the runs got, said first
    assert f"a2c_seed-0: trained by another process (host {socket.gethostname()}, pid {live_pid}); waiting" in out
    assert untouched_while_held == [True]
    assert "a2c_seed-0: started" in out  # the released run is trained now
    for name in RUN_NAMES:
        record = saved(runs / name)
        assert [p["step"] for p in record["history"]] == [0, 500, 1_000], name
        session = record["provenance"][0]
        assert (record["config"]["torch_threads"], session["env_threads"]) == (1, 0)  # the CPU campaign's defaults
        assert "campaign: " in (runs / name / TRAIN_LOG).read_text()
    starts = sorted((saved(runs / n)["provenance"][0]["start_time"],
                     saved(runs / n)["history"][-1]["time"]) for n in RUN_NAMES)
    for i, (start, _) in enumerate(starts):  # never more than two runs at once
        assert sum(s <= start < end for s, end in starts[:i]) <= 1
    assert not (runs / CAMPAIGN_LOCK).exists()

    assert main(args[:-len(CARTPOLE)] + CARTPOLE + ["--total-timesteps", "500"]) == 0
    out = capsys.readouterr().out
    assert all(f"{name}: finished, skipped" in out for name in RUN_NAMES)


def test_second_campaign_is_harmless(tmp_path: Path, live_pid: int, capsys: pytest.CaptureFixture) -> None:
    """It exits at once, and with 1, naming the runs that are not over: it did not finish what it was asked to."""
    hold_lock(tmp_path / CAMPAIGN_LOCK, live_pid)
    assert main(["campaign", "--runs-dir", str(tmp_path), "--total-timesteps", "1000", *CARTPOLE]) == 1
    out, err = capsys.readouterr()
    assert (f"a campaign is already running on {tmp_path} (host {socket.gethostname()}, pid {live_pid}); "
            "`python -m rlhelpers status` shows its runs") in out
    assert err == "not finished: " + ", ".join(f"{name} (not started, step 0)" for name in RUN_NAMES) + "\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [CAMPAIGN_LOCK]


@pytest.mark.parametrize(("stop", "returncode"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_stopping_the_campaign_checkpoints_and_stops_its_children(tmp_path: Path, stop: signal.Signals,
                                                                  returncode: int) -> None:
    """SIGTERM or Ctrl-C: every run checkpoints and exits, and the campaign exits with 128 + the signal, naming the
    runs left unfinished; Ctrl-C (a notebook's interrupt) also ends the campaign as interrupted, so that nothing
    after it runs."""
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "allaction", "campaign", "--runs-dir", str(runs),
                             "--total-timesteps", "10000000", "--parallel", "2", "--checkpoint-interval-s", "3600",
                             *CARTPOLE], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first_two = [runs / name for name in RUN_NAMES[:2]]
    deadline = time.monotonic() + 120
    while not all(any(m["global_step"] >= 10_000 for m in builders.logged(p / METRICS_FILE)) for p in first_two):
        assert time.monotonic() < deadline and proc.poll() is None, "the first two runs never reached step 10,000"
        time.sleep(0.2)
    children = [json.loads((p / LOCK_FILE).read_text())["pid"] for p in first_two]
    proc.send_signal(stop)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == returncode, out
    stopped = [line for line in out.splitlines() if line.startswith("stopped by ")]
    assert stopped == [f"stopped by {stop.name}; not finished: " + ", ".join(
        f"{name} ({'paused' if i < 2 else 'not started'}, step {run_status(runs / name).steps:,})"
        for i, name in enumerate(RUN_NAMES)) + "; the same command resumes them"], out
    for path, pid in zip(first_two, children, strict=True):
        assert builders.checkpoint(path)["num_timesteps"] >= 10_000
        assert "(stopped by SIGTERM)" in (path / TRAIN_LOG).read_text()
        assert not (path / LOCK_FILE).exists()
        with pytest.raises(ProcessLookupError):
            import os

            os.kill(pid, 0)
    assert not (runs / RUN_NAMES[2]).exists()  # nothing new was started while stopping


def test_a_failing_run_fails_the_campaign_by_name(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A history whose checkpoints are gone cannot be resumed: that child exits with an error, the campaign goes
    on with the other runs and returns 1 naming the failed ones."""
    runs = tmp_path / "runs"
    failing = RUN_NAMES[:2]
    for name in RUN_NAMES:
        write_history(runs / name, [-21.0] if name in failing else [-21.0, -5.0, 3.0])  # paused or finished
    config = TrainConfig(env_id="CartPole-v1", total_timesteps=1_000, runs_dir=str(runs))
    assert run_campaign(config, PONG_RUNS, ["--total-timesteps", "1000", *CARTPOLE], parallel=2, poll_s=0.1) == 1
    out, err = capsys.readouterr()
    assert all(f"{name}: ended with exit code 2" in out for name in failing)
    assert all(f"{name}: finished, skipped" in out for name in RUN_NAMES[2:])
    assert err.startswith("failed: ") and sorted(err.split("; ")[0][len("failed: "):].split(", ")) == sorted(failing)
    assert "error: " in (runs / failing[0] / TRAIN_LOG).read_text()


@pytest.mark.parametrize(("device", "n_runs", "cpus", "parallel", "expected"), [
    ("cpu", 6, 2, None, (2, 1)),  # a 2-core CPU: two runs at once, one torch thread each
    ("cpu", 6, 16, None, (6, 2)),  # a 16-core CPU: every run at once, the cores shared out
    ("cpu", 1, 2, None, (1, 0)),  # one run alone keeps torch's default threads
    ("cpu", 6, 4, 3, (3, 1)),  # a given --parallel is kept, and the threads follow it
    ("cuda", 6, 2, None, (2, 0)),  # Colab: 2 cores, one GPU; the trainer takes one torch thread with CUDA
    ("cuda", 6, 16, None, (6, 0)),  # a 16-core workstation with one GPU
    ("cuda", 6, 16, 2, (2, 0)),
    ("mps", 6, 8, None, (6, 0)),
])
def test_the_runs_at_once_follow_the_resolved_device_and_the_usable_cores(
        device: str, n_runs: int, cpus: int, parallel: int | None, expected: tuple[int, int],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(campaign, "usable_cpus", lambda: cpus)
    assert campaign_parallel(torch.device(device), n_runs, parallel) == expected


def test_the_campaign_chooses_by_the_device_its_runs_use_not_by_whether_cuda_is_present(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a 16-core machine with a GPU, ``--device cpu`` trains its runs on the CPU cores (one per core, threads
    shared out), and the default device trains several at once on the GPU; the usable cores are the process's
    (its affinity mask), not the machine's. Nothing is trained: the campaign's choice is captured."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "a GPU")  # named by the first line
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    chosen = []
    monkeypatch.setattr(campaign, "run_campaign", lambda config, runs, train_args, parallel, **kwargs: chosen.append(
        (parallel, train_args[train_args.index("--torch-threads") + 1] if "--torch-threads" in train_args else None)))
    options = dict(env_id="CartPole-v1", runs_dir=str(tmp_path), wandb_mode="disabled")
    for extra in ({"device": "cpu"}, {"device": "auto"}, {"device": "cpu", "torch_threads": 4}):  # a count given: kept
        campaign.train_campaign({**options, **extra}, PONG_RUNS)
    assert chosen == [(6, "2"), (6, None), (6, "4")]
    with pytest.raises(RLHelpersError, match="parallel must be a positive integer, got 0"):
        campaign_parallel(torch.device("cpu"), 6, 0)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(("args", "error"), [(["--parallel", "0"], "parallel must be a positive integer, got 0"),
                                             (["--wandb-mode", "online"], "wandb_mode 'online' needs an API key")])
def test_bad_campaign_options_start_nothing(tmp_path: Path, capsys: pytest.CaptureFixture, args: list[str],
                                           error: str) -> None:
    assert main(["campaign", "--runs-dir", str(tmp_path), *CARTPOLE, *args]) == 2
    assert error in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_a_campaign_of_other_seeds_and_a_variant_trains_them_seed_by_seed_under_their_own_names(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    runs = tmp_path / "runs"
    write_history(runs / "task1_seed-0", [-21.0])  # a paused report run: not this campaign's business
    args = ["campaign", "--runs-dir", str(runs), "--algos", "a2c", "task1-pg1", "--seeds", "200", "300",
            "--parallel", "1", "--total-timesteps", "500", *CARTPOLE]  # --algos: the old name of --arms
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert err.splitlines()[0] == "--algos is now --arms"
    started = [line.split(":")[0] for line in out.splitlines() if ": started (pid" in line]
    assert started == ["a2c_seed-200", "task1-pg1_seed-200", "a2c_seed-300", "task1-pg1_seed-300"]
    assert sorted(p.name for p in runs.iterdir()) == sorted([*started, "task1_seed-0"])
    for name in started:
        config = saved(runs / name)["config"]
        variant = "pg1" if "-pg1" in name else ""
        assert (config["variant"], config["seed"], config["pg_coef"]) == (variant, int(name[-3:]), 1.0)
    assert helper_main(["status", "--runs-dir", str(runs)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in table[1:]] == sorted([*started, "task1_seed-0"])
    assert [line.split()[-1] for line in table[1:]] == ["finished"] * 4 + ["paused"]


@pytest.mark.parametrize(("args", "error"), [(["--arms", "a2c-pg1"], "invalid choice: 'a2c-pg1'"),
                                             (["--seeds", "0", "0"], "each arm and seed once"),
                                             (["--variant", "pg1"], "unrecognized arguments: --variant"),
                                             (["--arms", "task1-pg1", "--pg-coef", "0.5"],
                                              "variant pg1 means pg_coef 1, got 0.5")])
def test_a_campaign_refuses_an_arm_that_is_no_variant_and_a_seed_twice(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                                      args: list[str], error: str) -> None:
    with contextlib.suppress(SystemExit):  # argparse's errors exit with 2
        assert main(["campaign", "--runs-dir", str(tmp_path), *CARTPOLE, *args]) == 2
    assert error in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_a_campaign_of_another_host_is_waited_out_not_taken_for_a_live_one(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture) -> None:
    """After a Colab reconnect the previous VM's campaign lock still has a fresh heartbeat: the new campaign
    waits until it is stale (5 minutes), then takes over, instead of reporting a campaign already running."""
    for name in RUN_NAMES:
        write_history(tmp_path / name, [-21.0, -5.0, 3.0])  # all finished: nothing to train
    (tmp_path / CAMPAIGN_LOCK).write_text(json.dumps({"host": "gone-vm", "pid": 1, "heartbeat": time.time() - 298}))
    config = TrainConfig(env_id="CartPole-v1", total_timesteps=1_000, runs_dir=str(tmp_path))
    assert run_campaign(config, PONG_RUNS, CARTPOLE, parallel=2, poll_s=0.1) == 0
    out, err = capsys.readouterr()
    assert f"taking over the campaign lock of {tmp_path} from dead owner" in err
    assert "already running" not in out and "gone-vm" in err
    assert all(f"{name}: finished, skipped" in out for name in RUN_NAMES)
    assert not (tmp_path / CAMPAIGN_LOCK).exists()


def test_a_campaign_restarted_while_the_killed_ones_runs_still_checkpoint_finishes_them(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The campaign is killed; its children get SIGTERM and checkpoint, slowly (builders.slow_copies, as on
    Drive). A campaign restarted at once finds those runs held by live processes: it waits for them, then trains
    them, and ends with 0 only when every run is over (or it names the unfinished runs and fails)."""
    runs = tmp_path / "runs"
    args = ["campaign", "--runs-dir", str(runs), "--arms", "a2c", "task1", "task2", "--seeds", "0",
            "--parallel", "2", *CARTPOLE, "--total-timesteps", "4000", "--eval-interval", "2000"]
    first = subprocess.Popen([sys.executable, "-m", "rlhelpers", *args], cwd=tmp_path, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=builders.slow_copies(dict(os.environ), 8))
    first_two = [runs / name for name in ("a2c_seed-0", "task1_seed-0")]
    deadline = time.monotonic() + 120
    while not all(builders.logged(p / METRICS_FILE) for p in first_two):  # both are training, inside a slow save
        assert time.monotonic() < deadline and first.poll() is None, "the first two runs never started training"
        time.sleep(0.2)
    first.kill()
    first.wait()
    code = main(args)
    out, err = capsys.readouterr()
    statuses = {name: run_status(runs / name) for name in ("a2c_seed-0", "task1_seed-0", "task2_seed-0")}
    unfinished = [name for name, status in statuses.items() if not status.over]
    assert code == 0 and not unfinished or code != 0 and unfinished and all(name in err for name in unfinished), \
        (code, {name: status.state for name, status in statuses.items()}, out, err)
    assert code == 0  # the children stop within seconds: the restarted campaign waits for them
    assert "a2c_seed-0: trained by another process" in out


def test_a_run_stopped_from_outside_is_named_and_the_campaign_fails(tmp_path: Path) -> None:
    """A run's process stopped by someone else checkpoints and exits 0, but the run is not finished: the campaign,
    which was asked to finish it, names it and exits with 1."""
    runs = tmp_path / "runs"
    run = runs / "a2c_seed-0"
    proc = subprocess.Popen([sys.executable, "-m", "rlhelpers", "campaign", "--runs-dir", str(runs), "--arms", "a2c",
                             "--seeds", "0", "--total-timesteps", "10000000", *CARTPOLE], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not any(m["global_step"] >= 10_000 for m in builders.logged(run / METRICS_FILE)):
        assert time.monotonic() < deadline and proc.poll() is None, "the run never reached step 10,000"
        time.sleep(0.2)
    os.kill(json.loads((run / LOCK_FILE).read_text())["pid"], signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, (out, err)
    assert builders.checkpoint(run)["num_timesteps"] >= 10_000
    assert err.splitlines()[-1] == f"not finished: a2c_seed-0 (paused, step {run_status(run).steps:,})"


def test_outside_a_terminal_the_campaign_lines_do_not_clear_and_redraw_the_bar(tmp_path: Path,
                                                                              capsys: pytest.CaptureFixture) -> None:
    """In a notebook each clear and redraw of the progress bar around a line is stored as an output of its own,
    dozens of blank ones per campaign: outside a terminal the lines are printed plainly."""
    for name in RUN_NAMES:  # one run paused without its checkpoints (its child fails at once), five finished
        write_history(tmp_path / name, [-21.0] if name == RUN_NAMES[0] else [-21.0, -5.0, 3.0])
    config = TrainConfig(env_id="CartPole-v1", total_timesteps=1_000, runs_dir=str(tmp_path))
    assert run_campaign(config, PONG_RUNS, CARTPOLE, parallel=2, poll_s=0.1, show_progress=True) == 1
    out, err = capsys.readouterr()
    assert sorted(line.split(" (")[0] for line in out.splitlines()) == sorted([
        f"{RUN_NAMES[0]}: started", *(f"{name}: finished, skipped" for name in RUN_NAMES[1:]),
        f"{RUN_NAMES[0]}: ended with exit code 2"])
    assert [part for part in err.split("\r") if not part.strip()] == [""]  # only before the bar's first line


def test_stop_training_sends_sigterm_to_the_running_and_leaves_the_ended_alone() -> None:
    """Each run gets SIGTERM only while it runs: one that has ended (reaped or not) is skipped, never an error."""
    running = subprocess.Popen(["sleep", "300"])
    ended, reaped = subprocess.Popen(["true"]), subprocess.Popen(["true"])
    reaped.wait()
    time.sleep(0.5)  # `ended` exits, but nothing has reaped it yet
    stop_training([running, ended, reaped])
    assert (running.returncode, ended.returncode, reaped.returncode) == (-signal.SIGTERM, 0, 0)


def test_a_campaign_passes_the_game_settings_to_its_runs(tmp_path: Path) -> None:
    """True/False options reach each run as flags (``--life-loss``, ``--no-fire-reset``), not as text."""
    args = ["campaign", "--runs-dir", str(tmp_path), "--arms", "a2c", "--seeds", "0", "--parallel", "1",
            "--env-id", "BreakoutNoFrameskip-v4", "--life-loss", "--no-fire-reset", "--n-envs", "2",
            "--total-timesteps", "20", "--n-eval-episodes", "1", "--n-eval-envs", "1", "--wandb-mode", "disabled"]
    assert main(args) == 0
    config = saved(tmp_path / "a2c_seed-0")["config"]
    assert (config["env_id"], config["life_loss"], config["fire_reset"]) == ("BreakoutNoFrameskip-v4", True, False)
    assert status_table(tmp_path).splitlines()[1].endswith("finished (life_loss)")  # status shows them


def test_a_campaign_of_an_experiment_trains_its_runs_with_its_settings(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``--experiment breakout`` trains Breakout's nine runs with its game settings, evaluation interval and no early
    stop; the default, Pong, stops at 18; an option given overrides the experiment's."""
    started = []
    monkeypatch.setattr(campaign, "run_campaign", lambda config, runs, train_args, parallel, **kwargs: started.append(
        (config, [run.name for run in runs])))
    for args in (["--experiment", "breakout"], [], ["--experiment", "breakout", "--no-fire-reset"]):
        assert main(["campaign", "--runs-dir", str(tmp_path), "--wandb-mode", "disabled", *args]) in (0, None)
    (breakout, names), (pong, pong_names), (changed, _) = started
    assert (breakout.env_id, breakout.life_loss, breakout.fire_reset) == ("BreakoutNoFrameskip-v4", True, True)
    assert (breakout.eval_interval, breakout.stop_return, breakout.wandb_project) == (500_000, None,
                                                                                     "breakout-actor-critic")
    assert names == [f"{arm}_seed-{seed}" for seed in (0, 100, 200) for arm in ("a2c", "task1", "task1-pg1")]
    assert (pong.env_id, pong.stop_return, pong.life_loss, pong.wandb_project) == ("PongNoFrameskip-v4", 18.0, False,
                                                                                  "pong-actor-critic")
    assert pong_names == [f"{arm}_seed-{seed}" for seed in (0, 100) for arm in ("a2c", "task1", "task2")]
    assert changed.fire_reset is False and changed.life_loss is True
