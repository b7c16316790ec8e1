"""Crash safety of a run: kills at any moment, broken or foreign checkpoints, a second writer, a bad disk.

The fault-injection test drives the real CLI in a subprocess and SIGKILLs it on a fixed-seed
schedule; the other tests call ``train`` in-process on tiny CartPole runs.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from functools import partial
from pathlib import Path

import builders
import pytest
import torch
from builders import saved

from rlhelpers.core.errors import RLHelpersError
from rlhelpers.runner.run import train
from rlhelpers.runner.store import (
    LOCK_FILE,
    METRICS_FILE,
    RunDirectory,
    checkpoint_name,
    load_model,
)

EVAL_INTERVAL = 200  # a multiple of the batch (4 envs x 5 steps), so evaluations land exactly on it
RESUME_LINE = re.compile(r"\S+: resuming from step ([\d,]+)")


@pytest.fixture(autouse=True)
def _wandb_dir_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline W&B runs of a test land in ``tmp_path/wandb-dir/wandb``, where the test can inspect them.

    conftest's ``wandb_sandbox`` has already torn W&B down, so it reads this WANDB_DIR afresh.
    """
    (tmp_path / "wandb-dir").mkdir()
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb-dir"))


# A tiny a2c run that evaluates every EVAL_INTERVAL steps (whole batches) and never checkpoints on the clock.
cartpole = functools.partial(builders.cartpole, total_timesteps=400, eval_interval=EVAL_INTERVAL,
                             checkpoint_interval_s=3600.0)



def history_steps(run_dir: RunDirectory) -> list[int]:
    return [record["step"] for record in saved(run_dir.path)["history"]]


def load_all(run_dir: RunDirectory) -> dict[int, dict]:
    """Every step-numbered checkpoint, loaded with weights_only=True (fails the test if one does not load)."""
    return {step: torch.load(path, weights_only=True) for step, path in run_dir.checkpoints()}


def resumed_from(stderr: str) -> int | None:
    match = RESUME_LINE.search(stderr)
    return None if match is None else int(match.group(1).replace(",", ""))


# ---------------------------------------------------------------- fault injection: SIGKILL at random moments

KILLS = 21
FI_EVAL_INTERVAL = 100
# A killed life advances at most one evaluation interval (see the cap below), so 21 kills always fall
# before the end: after them the run is at most at step 2000 of 2200, on a slow or a fast machine.
TOTAL_STEPS = 2200
KEEP = 3
WRITE_DELAY_S = 0.2


def _wait(condition, proc: subprocess.Popen, timeout: float) -> bool:  # noqa: ANN001
    """Poll ``condition()`` every 5 ms until it holds (True), the process exits or ``timeout`` passes (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if condition():
            return True
        time.sleep(0.005)
    return False


def _owned_by(run_path: Path, pid: int) -> bool:
    try:
        return json.loads((run_path / LOCK_FILE).read_text()).get("pid") == pid
    except (OSError, ValueError):
        return False


def _writing(run_path: Path) -> bool:
    return any(run_path.glob("checkpoint-*.pt.tmp"))


def _either(first, second):  # noqa: ANN001, ANN202
    """A condition that holds when ``first()`` or ``second()`` does."""
    return lambda: first() or second()


def _training(log: Path) -> bool:
    """The trainer's progress bar is up: resume and W&B set-up are done, the training loop runs."""
    return "%|" in log.read_text()


def _advanced(run_dir: RunDirectory, since: int | None) -> bool:
    """A complete checkpoint newer than step ``since`` (any checkpoint if None) is on disk."""
    return any(since is None or step > since for step, _ in run_dir.checkpoints())


def _check_after_kill(run_dir: RunDirectory) -> int | None:
    """Invariants that must hold whenever the trainer has just died; returns the newest checkpoint's step."""
    checkpoints = load_all(run_dir)
    assert len(checkpoints) <= KEEP + 1  # one more if the kill fell between the rename and the pruning
    if not checkpoints:
        assert saved(run_dir.path).get("history", []) == [], "evaluation history without any checkpoint"
        return None
    newest = checkpoints[max(checkpoints)]
    record = saved(run_dir.path)
    assert record["wandb_run_id"] == newest["wandb_run_id"]
    # eval_history.json may lag the checkpoint by the one point being saved, never lead or differ from it.
    kept, written = newest["eval_history"], record["history"]
    assert written == kept[:len(written)] and len(kept) - len(written) <= 1
    return max(checkpoints)


def test_sigkill_at_random_moments_loses_nothing(tmp_path: Path) -> None:
    runs, tmpdir = tmp_path / "runs", tmp_path / "tmp"
    tmpdir.mkdir()
    run_dir = RunDirectory(runs / "a2c_seed-0")
    command = [sys.executable, "-m", "rlhelpers", "train", "--env-id", "CartPole-v1", "--n-envs", "4",
               "--total-timesteps", str(TOTAL_STEPS), "--eval-interval", str(FI_EVAL_INTERVAL),
               "--n-eval-episodes", "2", "--n-eval-envs", "2", "--stop-return", "1e9",
               "--checkpoint-interval-s", "1", "--keep-checkpoints", str(KEEP), "--runs-dir", str(runs),
               "--wandb-mode", "offline", "--device", "cpu"]
    env = builders.slow_copies(dict(os.environ, TMPDIR=str(tmpdir), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1"),
                               WRITE_DELAY_S)
    rng = random.Random(20240605)
    started = time.monotonic()
    kills = kills_mid_write = lives = 0
    resumes: list[int] = []
    while True:
        newest_before = _check_after_kill(run_dir)
        log = tmp_path / f"life-{lives}.log"
        with open(log, "w") as err:
            proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=err,
                                    text=True, start_new_session=True)
        lives += 1
        if kills < KILLS:
            # Whatever the schedule says, kill once this life has saved a checkpoint past its start (the cap).
            advanced = partial(_advanced, run_dir, newest_before)
            mode = rng.choices(["start-up", "training", "mid-write", "after-checkpoint"], weights=[1, 1, 2, 1])[0]
            if mode == "start-up":  # imports, lock, resume, W&B init or the first steps, whatever runs then
                _wait(advanced, proc, rng.uniform(0.2, 5.0))
            elif mode == "training" and _wait(partial(_training, log), proc, 60):
                _wait(advanced, proc, rng.uniform(0.0, 1.0))
            elif mode == "mid-write" and _wait(partial(_owned_by, run_dir.path, proc.pid), proc, 60):
                _wait(lambda: not _writing(run_dir.path), proc, 30)  # the previous life's leftovers are gone
                if _wait(_either(partial(_writing, run_dir.path), advanced), proc, 30) and not advanced():
                    time.sleep(rng.uniform(0.0, WRITE_DELAY_S / 4))  # the copy is paused halfway, for WRITE_DELAY_S
                    kills_mid_write += _writing(run_dir.path)
            elif mode == "after-checkpoint":  # right after the rename, before eval_history.json is rewritten
                _wait(advanced, proc, 60)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)  # the trainer and its W&B service, like a VM that dies
                kills += 1
        out, _ = proc.communicate(timeout=240)
        stderr = log.read_text()
        resumed = resumed_from(stderr)
        if resumed is not None:
            resumes.append(resumed)
            assert resumed == newest_before, f"life {lives} resumed from {resumed}, newest checkpoint {newest_before}"
        if proc.returncode != -signal.SIGKILL:
            break
    elapsed = time.monotonic() - started

    assert proc.returncode == 0, stderr
    assert f"stopped at step {TOTAL_STEPS:,} (total_timesteps)" in out
    assert newest_before is None or resumed == newest_before  # the last life resumed, never started over
    assert kills >= 20 and kills_mid_write >= 5
    assert resumes == sorted(resumes) and len(resumes) >= 10 and resumes[-1] > 0
    record = saved(run_dir.path)
    steps = [point["step"] for point in record["history"]]
    expected = list(range(0, TOTAL_STEPS + 1, FI_EVAL_INTERVAL))
    assert steps == expected  # strictly increasing, no duplicates, no gaps, nothing lost
    assert all(len(point["returns"]) == 2 for point in record["history"])
    checkpoints = load_all(run_dir)
    assert max(checkpoints) == TOTAL_STEPS and len(checkpoints) <= KEEP
    assert checkpoints[TOTAL_STEPS]["eval_history"] == record["history"]
    assert not list(run_dir.path.glob("*.tmp")) and not (run_dir.path / LOCK_FILE).exists()
    assert not any((tmpdir / "rlhelpers-staging").glob("*/*"))
    # The local metrics log holds every evaluation exactly once, whatever was logged before a kill.
    metrics = builders.logged(run_dir.path / METRICS_FILE)
    assert [m["global_step"] for m in metrics if "eval/mean_return" in m] == expected
    run_id = record["wandb_run_id"]
    wandb_runs = list((tmp_path / "wandb-dir" / "wandb").glob("offline-run-*"))
    assert wandb_runs and all(p.name.endswith(f"-{run_id}") for p in wandb_runs)
    print(f"\nfault injection: {kills} SIGKILLs survived ({kills_mid_write} during a checkpoint write), "
          f"{len(resumes)} resumes (from steps {resumes[0]}..{resumes[-1]}), {lives} processes, "
          f"{len(steps)} evaluation points, {len(set(expected) - set(steps))} lost, "
          f"{len(wandb_runs)} W&B sessions under one id; {elapsed:.0f} s")


# ---------------------------------------------------------------- broken, missing and foreign checkpoints

def test_truncated_checkpoint_falls_back_to_previous_one(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    config = cartpole(tmp_path, total_timesteps=400)
    train(config, show_progress=False)
    run_dir = RunDirectory(Path(config.runs_dir) / config.run_name)
    newest = run_dir.path / checkpoint_name(400)
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    broken = newest.read_bytes()
    capsys.readouterr()

    names_at_save = []
    real_save = RunDirectory.save_checkpoint

    def recording_save(self: RunDirectory, state: dict, step: int, keep: int) -> None:
        names_at_save.append((step, (self.path / checkpoint_name(step)).exists()))
        real_save(self, state, step, keep)

    with monkeypatch.context() as patch:
        patch.setattr(RunDirectory, "save_checkpoint", recording_save)
        with pytest.warns(UserWarning, match=f"{newest.name} does not load.*falling back"):
            result = train(cartpole(tmp_path, total_timesteps=600), show_progress=False)

    assert (400, False) in names_at_save  # the broken file was set aside, not overwritten under its name
    err = capsys.readouterr().err
    assert resumed_from(err) == 200 and f"moved the broken {newest.name} aside as {newest.name}.broken" in err
    assert (run_dir.path / f"{newest.name}.broken").read_bytes() == broken
    assert [e.step for e in result.record.evaluations] == [0, 200, 400, 600]
    assert history_steps(run_dir) == [0, 200, 400, 600]
    assert sorted(load_all(run_dir)) == [200, 400, 600]  # a good 400 was written in its place


def test_a_read_error_is_not_taken_for_a_broken_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An I/O error (a Drive mount that dropped) stops the resume; the checkpoint is neither skipped nor set aside."""
    config = cartpole(tmp_path)
    train(config, show_progress=False)
    run_dir = RunDirectory(Path(config.runs_dir) / config.run_name)
    real_read = Path.read_bytes

    def flaky_read(path: Path) -> bytes:
        if path.name == checkpoint_name(400):
            raise OSError(errno.ENOTCONN, "Transport endpoint is not connected")
        return real_read(path)

    monkeypatch.setattr(Path, "read_bytes", flaky_read)
    with pytest.raises(OSError, match="Transport endpoint"):
        train(cartpole(tmp_path, total_timesteps=600), show_progress=False)
    monkeypatch.undo()
    assert sorted(load_all(run_dir)) == [0, 200, 400] and history_steps(run_dir) == [0, 200, 400]


def test_no_loadable_checkpoint_with_history_is_an_error(tmp_path: Path) -> None:
    config = cartpole(tmp_path)
    train(config, show_progress=False)
    run_dir = RunDirectory(Path(config.runs_dir) / config.run_name)
    history = run_dir.history_path.read_bytes()
    for _, path in run_dir.checkpoints():
        path.write_bytes(b"")

    with pytest.raises(RLHelpersError, match="no checkpoint in .* loads"), pytest.warns(UserWarning):
        train(config, show_progress=False)
    for _, path in run_dir.checkpoints():
        path.unlink()
    finished = train(config, show_progress=False)  # its history shows it done: reported, not an error
    assert finished.stop_reason == "finished earlier" and finished.num_timesteps == 400
    assert [e.to_dict() for e in finished.record.evaluations] == json.loads(history)["history"]
    unfinished = json.loads(history)
    unfinished["config"]["total_timesteps"] = 800  # a run stopped before its budget
    run_dir.history_path.write_text(json.dumps(unfinished))
    with pytest.raises(RLHelpersError, match="has evaluation results up to step 400 but no checkpoint"):
        train(config, show_progress=False)

    assert json.loads(run_dir.history_path.read_text()) == unfinished and not run_dir.checkpoints()
    assert not (run_dir.path / LOCK_FILE).exists()


def test_an_unreadable_history_is_rebuilt_from_the_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """As after a Drive upload cut short: the checkpoints hold the whole history, so nothing is lost."""
    config = cartpole(tmp_path)
    train(config, show_progress=False)
    run_dir = RunDirectory(Path(config.runs_dir) / config.run_name)
    run_dir.history_path.write_text('{"history": [')
    with pytest.raises(RLHelpersError, match="is unreadable .*training the run again .* rebuilds it"):
        run_dir.read_record()
    capsys.readouterr()

    result = train(cartpole(tmp_path, total_timesteps=600), show_progress=False)

    assert "eval_history.json is unreadable" in capsys.readouterr().err
    assert [e.step for e in result.record.evaluations] == [0, 200, 400, 600]
    assert history_steps(run_dir) == [0, 200, 400, 600]
    run_dir.history_path.write_text('{"history": [')
    with pytest.raises(RLHelpersError, match="holds a run with a different config .*lr: saved"):
        train(cartpole(tmp_path, total_timesteps=600, lr=1e-3), show_progress=False)  # the checkpoint's is checked
    assert run_dir.history_path.read_text() == '{"history": ['
    for _, path in run_dir.checkpoints():
        path.unlink()
    run_dir.history_path.write_text('{"history": [')
    with pytest.raises(RLHelpersError, match="is unreadable .*restore it or delete the run directory"):
        train(config, show_progress=False)  # nothing to rebuild it from: an error, not a fresh start
    assert run_dir.history_path.read_text() == '{"history": ['


def test_a_damaged_snapshot_is_a_clear_error(tmp_path: Path) -> None:
    config = cartpole(tmp_path, snapshot_interval=200)
    train(config, show_progress=False)
    run_dir = RunDirectory(Path(config.runs_dir) / config.run_name)
    _, newest = run_dir.snapshots()[-1]
    assert load_model(newest)[2] == 400
    newest.write_bytes(newest.read_bytes()[:100])
    with pytest.raises(RLHelpersError, match=f"{newest.name} does not load .*delete it, or restore it"):
        load_model(newest)


def test_foreign_config_is_refused_naming_the_field(tmp_path: Path) -> None:
    config = cartpole(tmp_path)
    assert config.lr is not None  # the algo's value, filled in
    train(config, show_progress=False)
    with pytest.raises(RLHelpersError, match=re.escape(f"lr: saved {config.lr!r} != requested {config.lr * 2!r}")):
        train(cartpole(tmp_path, lr=config.lr * 2), show_progress=False)

    # A checkpoint folder copied under another run's name (no eval_history.json): the checkpoint says who it is.
    foreign = Path(config.runs_dir) / "task1_seed-0"
    foreign.mkdir()
    shutil.copy(Path(config.runs_dir) / config.run_name / checkpoint_name(400), foreign)
    with pytest.raises(RLHelpersError, match="algo: saved 'a2c' != requested 'task1'"):
        train(cartpole(tmp_path, algo="task1"), show_progress=False)
    assert [p.name for p in foreign.iterdir()] == [checkpoint_name(400)]


# ---------------------------------------------------------------- one writer per run

def test_second_process_is_refused_while_the_first_lives_and_takes_over_after_a_kill(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    config = cartpole(tmp_path, total_timesteps=1_000_000, checkpoint_interval_s=0.5)
    run_dir = RunDirectory(Path(config.runs_dir) / config.run_name)
    first = subprocess.Popen(
        [sys.executable, "-m", "rlhelpers", "train", "--env-id", "CartPole-v1", "--n-envs", "4",
         "--total-timesteps", "1000000", "--eval-interval", str(EVAL_INTERVAL), "--n-eval-episodes", "2",
         "--n-eval-envs", "2", "--stop-return", "1e9", "--checkpoint-interval-s", "0.5",
         "--runs-dir", config.runs_dir, "--wandb-mode", "disabled", "--device", "cpu"],
        env=dict(os.environ, OMP_NUM_THREADS="1"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert _wait(lambda: _owned_by(run_dir.path, first.pid) and any(s > 0 for s, _ in run_dir.checkpoints()),
                     first, 120), "the first process never started training"
        with pytest.raises(RLHelpersError) as refused:
            train(config, show_progress=False)
        message = str(refused.value)
        assert f"host {socket.gethostname()}" in message and f"pid {first.pid}" in message
        assert re.search(r"last heartbeat \d+ s ago", message)
        assert _owned_by(run_dir.path, first.pid)
    finally:
        first.kill()
        first.wait()
    newest = max(step for step, _ in run_dir.checkpoints())
    capsys.readouterr()

    result = train(cartpole(tmp_path, total_timesteps=newest, checkpoint_interval_s=0.5), show_progress=False)

    err = capsys.readouterr().err
    assert re.search(f"taking over run a2c_seed-0 from dead owner .*pid {first.pid}", err)
    assert resumed_from(err) == newest and result.num_timesteps == newest
    assert not (run_dir.path / LOCK_FILE).exists()


# ---------------------------------------------------------------- read-only and full disks

def test_runs_dir_that_cannot_be_created_is_a_clear_error(tmp_path: Path) -> None:
    # chmod does not stop root, but nothing can create a directory under a regular file.
    (tmp_path / "not-a-dir").write_text("")
    with pytest.raises(RLHelpersError, match="cannot create run directory .*choose a writable --runs-dir"):
        train(cartpole(tmp_path / "not-a-dir" / "runs"), show_progress=False)


def test_read_only_run_directory_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = cartpole(tmp_path)
    train(config, show_progress=False)
    run_dir = RunDirectory(Path(config.runs_dir) / config.run_name)
    before = {path: path.read_bytes() for path in run_dir.path.rglob("*") if path.is_file()}
    real_open = os.open

    def read_only_open(path, flags, *args, **kwargs):  # noqa: ANN001, ANN202 -- a read-only mount, even for root
        if str(path).startswith(str(run_dir.path)) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only_open)
    with pytest.raises(RLHelpersError, match="cannot write in run directory .*Read-only file system"):
        train(cartpole(tmp_path, total_timesteps=800), show_progress=False)
    assert {path: path.read_bytes() for path in run_dir.path.rglob("*") if path.is_file()} == before


def test_disk_full_during_a_checkpoint_write_keeps_the_previous_one(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    config = cartpole(tmp_path)
    train(config, show_progress=False)
    run_dir = RunDirectory(Path(config.runs_dir) / config.run_name)
    before = {path.name: path.read_bytes() for _, path in run_dir.checkpoints()}

    def disk_fills_up(src, dst, length: int = 0) -> None:  # noqa: ANN001 -- half the bytes land, then ENOSPC
        dst.write(src.read(1000))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("rlhelpers.runner.store.shutil.copyfileobj", disk_fills_up)
    with pytest.raises(RLHelpersError, match=r"checkpoint-000000000600\.pt: No space left on device.*intact"):
        train(cartpole(tmp_path, total_timesteps=800), show_progress=False)

    assert {path.name: path.read_bytes() for _, path in run_dir.checkpoints()} == before
    assert not list(run_dir.path.glob("*.tmp")) and not (run_dir.path / LOCK_FILE).exists()
    assert history_steps(run_dir) == [0, 200, 400]  # the lost point at 600 is not claimed
    monkeypatch.undo()
    result = train(cartpole(tmp_path, total_timesteps=800), show_progress=False)
    assert [e.step for e in result.record.evaluations] == [0, 200, 400, 600, 800]


@pytest.mark.parametrize("full", ["run directory", "local staging"])
def test_real_enospc_from_dev_full(tmp_path: Path, full: str) -> None:
    """A write that hits /dev/full gets the kernel's ENOSPC, for root too."""
    run_dir = RunDirectory(tmp_path / "run")
    run_dir.create()
    state = {"num_timesteps": 100, "weights": torch.zeros(10_000)}
    run_dir.save_checkpoint(state, 100, keep=2)
    good = (run_dir.path / checkpoint_name(100)).read_bytes()
    if full == "run directory":
        trap = run_dir.path / (checkpoint_name(200) + ".tmp")
    else:
        run_dir.staging_path.mkdir(parents=True, exist_ok=True)
        trap = run_dir.staging_path / checkpoint_name(200)
    trap.symlink_to("/dev/full")

    with pytest.raises(RLHelpersError, match=r"cannot write checkpoint .*checkpoint-000000000200\.pt.*intact"):
        run_dir.save_checkpoint(dict(state, num_timesteps=200), 200, keep=2)

    assert [step for step, _ in run_dir.checkpoints()] == [100]
    assert (run_dir.path / checkpoint_name(100)).read_bytes() == good
    assert not trap.is_symlink()  # the temporary name was cleaned up


# ---------------------------------------------------------------- leftovers, pruning, W&B resume

def test_leftovers_of_a_killed_writer_are_removed_on_start(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    config = cartpole(tmp_path)
    train(config, show_progress=False)
    run_dir = RunDirectory(Path(config.runs_dir) / config.run_name)
    good = (run_dir.path / checkpoint_name(400)).read_bytes()
    leftovers = [run_dir.path / (checkpoint_name(600) + ".tmp"), run_dir.path / "eval_history.json.tmp",
                 run_dir.path / "owner.json.999999.tmp", run_dir.path / "snapshots" / "model-000000000600.pt.tmp"]
    leftovers[0].write_bytes(good[: len(good) // 3])
    leftovers[1].write_text('{"history": [')
    leftovers[2].write_text("")
    leftovers[3].write_bytes(good[:10])
    run_dir.staging_path.mkdir(parents=True, exist_ok=True)
    leftovers.append(run_dir.staging_path / checkpoint_name(580))
    leftovers[4].write_bytes(good[:10])
    (run_dir.path / "notes.tmp").write_text("not ours")
    capsys.readouterr()

    result = train(cartpole(tmp_path, total_timesteps=600), show_progress=False)

    assert resumed_from(capsys.readouterr().err) == 400
    assert [e.step for e in result.record.evaluations] == [0, 200, 400, 600]
    assert not any(path.exists() for path in leftovers)
    assert (run_dir.path / "notes.tmp").exists()


def test_pruning_keeps_the_newest_and_never_the_new_one_out(tmp_path: Path) -> None:
    run_dir = RunDirectory(tmp_path / "run")
    run_dir.create()
    for step in (100, 200, 300):
        run_dir.save_checkpoint({"num_timesteps": step}, step, keep=2)
    assert [step for step, _ in run_dir.checkpoints()] == [300, 200]
    # A broken checkpoint newer than the one resumed from must not push new checkpoints out.
    (run_dir.path / checkpoint_name(900)).write_bytes(b"truncated")
    with pytest.warns(UserWarning, match="falling back"):
        fallen_back_to = run_dir.load_latest_checkpoint()
        assert fallen_back_to is not None and fallen_back_to["num_timesteps"] == 300
    run_dir.save_checkpoint({"num_timesteps": 400}, 400, keep=2)
    assert [step for step, _ in run_dir.checkpoints()] == [900, 400, 300]


def test_each_checkpoint_that_does_not_load_is_one_short_line_and_so_is_the_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without torch's paragraphs of advice (weights_only, "file an issue"), and without a promise of an older
    checkpoint when none is left; the staging folders of the saves are not left in the temp directory."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    run_dir = RunDirectory(tmp_path / "run")
    run_dir.create()
    for step in (100, 200, 300):
        run_dir.save_checkpoint({"num_timesteps": step}, step, keep=3)
    assert not any((tmp_path / "tmp" / "rlhelpers-staging").iterdir())
    paths = [path for _, path in run_dir.checkpoints()]
    paths[0].write_bytes(bytes(paths[0].stat().st_size))  # zeros: torch's weights_only unpickler refuses them
    paths[1].write_bytes(paths[1].read_bytes()[:100])
    paths[2].write_bytes(b"")
    with warnings.catch_warnings(record=True) as caught, pytest.raises(RLHelpersError) as error:
        warnings.simplefilter("always")
        run_dir.load_latest_checkpoint()
    lines = [str(w.message) for w in caught if str(run_dir.path) in str(w.message)]
    assert [line.split(" does not load (")[0] for line in lines] == [f"checkpoint {path}" for path in paths]
    assert all("\n" not in line and "weights_only" not in line and len(line) < len(str(paths[0])) + 160
               for line in lines), lines
    assert [line.endswith("; falling back to an older checkpoint") for line in lines] == [True, True, False]
    assert str(error.value) == (f"no checkpoint in {run_dir.path} loads ({', '.join(p.name for p in paths)}); "
                                "restore one from a backup or delete the run directory to start over")


def test_no_checkpoint_name_is_written_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A timed checkpoint due on the update that reaches an evaluation is left to the evaluation's own
    checkpoint: on Drive a file rewritten under the same name may sync late or never."""
    saved_steps = []
    real_save = RunDirectory.save_checkpoint

    def recording_save(self: RunDirectory, state: dict, step: int, keep: int) -> None:
        saved_steps.append(step)
        real_save(self, state, step, keep)

    monkeypatch.setattr(RunDirectory, "save_checkpoint", recording_save)
    train(cartpole(tmp_path, checkpoint_interval_s=1e-9, keep_checkpoints=100), show_progress=False)
    assert saved_steps == sorted(set(saved_steps))  # every update saved once, in order
    assert {0, EVAL_INTERVAL, 2 * EVAL_INTERVAL} <= set(saved_steps)
    assert len(saved_steps) == 400 // 20 + 1  # step 0 and every update of 4 envs x 5 steps


def test_pruned_checkpoints_are_emptied_before_deletion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a Drive mount a deleted file sits in the Trash, at its full size, for 30 days: pruning empties it first."""
    run_dir = RunDirectory(tmp_path / "run")
    run_dir.create()
    size_when_deleted = {}
    real_unlink = Path.unlink

    def recording_unlink(path: Path, missing_ok: bool = False) -> None:
        if path.parent == run_dir.path and path.exists():
            size_when_deleted[path.name] = path.stat().st_size
        real_unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", recording_unlink)
    for step in (100, 200, 300, 400):
        run_dir.save_checkpoint({"num_timesteps": step, "weights": torch.ones(10_000)}, step, keep=2)

    assert size_when_deleted == {checkpoint_name(100) + ".tmp": 0, checkpoint_name(200) + ".tmp": 0}
    assert [step for step, _ in run_dir.checkpoints()] == [400, 300]
    assert all(state["weights"].sum() == 10_000 for state in load_all(run_dir).values())


def test_a_kill_while_pruning_leaves_no_empty_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kill between emptying a pruned checkpoint and deleting it leaves a .tmp file, never an empty
    file under a checkpoint's name; the next writer clears it."""
    run_dir = RunDirectory(tmp_path / "run")
    run_dir.create()
    for step in (100, 200):
        run_dir.save_checkpoint({"num_timesteps": step}, step, keep=2)

    real_unlink = Path.unlink

    def killed(path: Path, missing_ok: bool = False) -> None:
        if path.parent == run_dir.path:
            raise KeyboardInterrupt  # the process dies after emptying the pruned checkpoint
        real_unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", killed)
    with pytest.raises(KeyboardInterrupt):
        run_dir.save_checkpoint({"num_timesteps": 300}, 300, keep=2)
    monkeypatch.undo()

    assert [step for step, _ in run_dir.checkpoints()] == [300, 200]
    assert sorted(load_all(run_dir)) == [200, 300]
    assert (run_dir.path / (checkpoint_name(100) + ".tmp")).exists()
    run_dir.remove_stale_files()
    assert sorted(path.name for path in run_dir.path.iterdir()) == [checkpoint_name(200), checkpoint_name(300)]


def test_wandb_resume_reuses_the_run_id_and_logs_the_redone_steps_again(tmp_path: Path) -> None:
    """A resume from an older checkpoint continues the same W&B run and logs the redone steps again, below
    the steps logged before. The local metrics log shows what was logged; that W&B keeps such rows (they
    carry global_step as a value) is read back from W&B's own records in test_publish."""
    config = cartpole(tmp_path, total_timesteps=600, wandb_mode="offline")
    first = train(config, show_progress=False)
    run_dir = RunDirectory(first.run_dir)
    states = load_all(run_dir)
    assert {state["wandb_run_id"] for state in states.values()} == {first.record.wandb_run_id}
    assert saved(run_dir.path)["wandb_run_id"] == first.record.wandb_run_id
    before = builders.logged(run_dir.path / METRICS_FILE)
    assert max(m["global_step"] for m in before) == 600
    # The process died after logging up to step 600 but the checkpoints after 200 never reached the disk.
    for step in (400, 600):
        (run_dir.path / checkpoint_name(step)).unlink()

    second = train(config, show_progress=False)

    assert second.record.wandb_run_id == first.record.wandb_run_id
    sessions = sorted((tmp_path / "wandb-dir" / "wandb").glob("offline-run-*"))
    # offline-run-<time>-<id>, and -1 after it when both sessions start within one second
    assert len(sessions) == 2 and all(re.fullmatch(rf"offline-run-[0-9_]+-{first.record.wandb_run_id}(-1)?", s.name)
                                      for s in sessions)
    metrics = builders.logged(run_dir.path / METRICS_FILE)
    assert [m["global_step"] for m in metrics if "eval/mean_return" in m] == [0, 200, 400, 600]  # each once
    first_session_end = max(m["time"] for m in before)
    redone = [m for m in metrics if m["global_step"] > 200]
    assert [m["global_step"] for m in redone] == [400, 600]
    assert all(m["time"] > first_session_end for m in redone)  # logged again by the resumed session
    assert all(m["time"] < first_session_end for m in metrics if m["global_step"] <= 200)  # kept from the first
    assert history_steps(run_dir) == [0, 200, 400, 600]
