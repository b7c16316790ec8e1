"""The campaign as submitit jobs: through submitit's local executor (real processes, no SLURM) the jobs train
CartPole runs, a job interrupted as SLURM interrupts one (time limit, preemption) checkpoints, and the next
submission resumes it; without submitit the cluster path refuses clearly."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import builders
import pytest
import waiting
from builders import saved

from rlhelpers.cli import main
from rlhelpers.runner.campaign import CampaignRun
from rlhelpers.runner.config import TrainConfig
from rlhelpers.runner.store import TRAIN_LOG

CARTPOLE: dict[str, Any] = {**builders.CARTPOLE, "eval_interval": 500, "stop_return": 1000.0}
CARTPOLE_ARGS = builders.cartpole_args(**CARTPOLE)
NEEDS_SUBMITIT = "the cluster extra (submitit) is not installed: pip install -e '.[cluster]'"


@pytest.fixture(autouse=True)
def sigint_interrupts() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt here and is not ignored by the processes started from here, as in a
    terminal. A shell without job control starts background commands with SIGINT ignored, and Python then
    leaves it ignored: a suite started that way would wait forever for a job that SIGINT should stop (the
    tests' own SIGINT, and submitit's local cancel)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


wait_for = functools.partial(waiting.wait_for, timeout_s=180.0, poll_s=0.5)


def last_step(run: Path) -> int:
    evaluations = saved(run).get("history") or [{"step": -1}]
    return evaluations[-1]["step"]



def finished(run: Path, step: int) -> bool:
    return last_step(run) >= step and not (run / "owner.json").exists()


def test_the_campaign_trains_two_runs_as_submitit_jobs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("submitit", reason=NEEDS_SUBMITIT)
    runs = tmp_path / "runs"
    args = ["campaign", "--cluster", "local", "--arms", "a2c", "--seeds", "0", "100", "--runs-dir", str(runs),
            "--total-timesteps", "1000", "--time-min", "10", *CARTPOLE_ARGS]
    assert main(args) == 0
    assert "a2c_seed-0: submitted as job" in capsys.readouterr().out
    names = ["a2c_seed-0", "a2c_seed-100"]
    wait_for(lambda: all(finished(runs / n, 1000) for n in names), "both jobs to train their runs to step 1,000")
    for name in names:
        assert [p["step"] for p in saved(runs / name)["history"]] == [0, 500, 1000]
        assert "campaign: " in (runs / name / TRAIN_LOG).read_text()
    assert main(args) == 0  # everything is finished: nothing is submitted
    out = capsys.readouterr().out
    assert "a2c_seed-0: finished, skipped" in out and "nothing to submit" in out


def test_a_cancelled_job_checkpoints_and_the_next_submission_resumes_it(tmp_path: Path) -> None:
    pytest.importorskip("submitit", reason=NEEDS_SUBMITIT)
    from rlhelpers.runner.campaign import campaign_runs
    from rlhelpers.runner.cluster import submit_campaign, submit_runs

    runs = tmp_path / "runs"
    options = dict(CARTPOLE, runs_dir=str(runs), total_timesteps=10_000_000)
    run = runs / "task1_seed-0"
    [job] = submit_runs(TrainConfig(**options, algo="task1"), [*CARTPOLE_ARGS, "--total-timesteps", "10000000"],
                        [CampaignRun("task1", "", 0)], time_min=10, cluster="local")
    wait_for(lambda: last_step(run) >= 1000, "two evaluations")
    # scancel: SLURM sends SIGTERM to every process of the job, the training included
    os.kill(json.loads((run / "owner.json").read_text())["pid"], signal.SIGTERM)
    job.cancel()
    wait_for(lambda: not (run / "owner.json").exists(), "the cancelled run to stop")
    assert "(stopped by SIGTERM)" in (run / TRAIN_LOG).read_text()
    stopped_at = builders.checkpoint(run)["num_timesteps"]

    budget = stopped_at + 1000
    assert submit_campaign(dict(options, total_timesteps=budget), campaign_runs(("task1",), (0, 100)), time_min=10,
                           cluster="local") == 0
    both = [run, runs / "task1_seed-100"]  # the other seed is submitted too, from step 0
    wait_for(lambda: all(finished(r, budget) for r in both), "both runs to finish")
    assert [s["start_step"] for s in saved(run)["provenance"]] == [0, stopped_at]


def test_an_interrupted_job_stops_its_training_which_checkpoints(tmp_path: Path) -> None:
    """submitit cancels a local job with SIGINT: the job, interrupted while it waits, stops its run with
    SIGTERM and waits for it, so the run checkpoints and no training goes on past the job."""
    pytest.importorskip("submitit", reason=NEEDS_SUBMITIT)
    import threading

    from rlhelpers.runner.cluster import TrainJob

    runs = tmp_path / "runs"
    run = runs / "a2c_seed-0"
    job = TrainJob(CampaignRun("a2c", "", 0), str(runs), [*CARTPOLE_ARGS, "--total-timesteps", "10000000"])

    def interrupt_after_two_evaluations() -> None:
        wait_for(lambda: last_step(run) >= 1000, "two evaluations")
        os.kill(os.getpid(), signal.SIGINT)  # KeyboardInterrupt in the main thread, where the job waits
        process = job.process
        assert process is not None  # started before the run's first evaluation
        with contextlib.suppress(AssertionError):  # a SIGINT that did not interrupt fails the test, not hangs it
            wait_for(lambda: process.poll() is not None, "the job to stop its training", timeout_s=120)
        if process.poll() is None:
            process.kill()

    interrupter = threading.Thread(target=interrupt_after_two_evaluations, daemon=True)
    interrupter.start()
    with pytest.raises(KeyboardInterrupt):
        job()
    interrupter.join()
    assert job.process is not None and job.process.poll() is not None  # the training ended with the job
    assert not (run / "owner.json").exists()
    assert "(stopped by SIGTERM)" in (run / TRAIN_LOG).read_text()
    assert builders.checkpoint(run)["num_timesteps"] >= 1000


def test_a_job_at_its_time_limit_is_requeued_and_resumes(tmp_path: Path) -> None:
    """A 1-minute job is signalled 30 s before its limit, whatever the machine's speed: the run checkpoints,
    submitit requeues the job, and the new session resumes from that checkpoint."""
    pytest.importorskip("submitit", reason=NEEDS_SUBMITIT)
    from rlhelpers.runner.cluster import submit_runs

    runs = tmp_path / "runs"
    run = runs / "a2c_seed-0"
    options = dict(CARTPOLE, runs_dir=str(runs), total_timesteps=10_000_000)
    [job] = submit_runs(TrainConfig(**options, algo="a2c"), [*CARTPOLE_ARGS, "--total-timesteps", "10000000"],
                        [CampaignRun("a2c", "", 0)], time_min=1, cluster="local")

    def resumed() -> bool:
        sessions = saved(run).get("provenance", [])
        return len(sessions) >= 2 and last_step(run) > sessions[1]["start_step"]

    try:
        wait_for(resumed, "the job, requeued at its time limit, to train on", timeout_s=180)
    finally:
        job.cancel()
    wait_for(lambda: not (run / "owner.json").exists(), "the cancelled run to stop")
    starts = [s["start_step"] for s in saved(run)["provenance"]]
    assert starts[0] == 0 < starts[1]
    assert "(stopped by SIGTERM)" in (run / TRAIN_LOG).read_text()


def test_without_submitit_the_cluster_campaign_refuses_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "submitit", None)  # what `import submitit` meets when it is not installed
    monkeypatch.delitem(sys.modules, "rlhelpers.runner.cluster", raising=False)
    assert main(["campaign", "--cluster", "slurm", "--runs-dir", str(tmp_path / "runs"), *CARTPOLE_ARGS]) == 2
    assert 'pip install -e ".[cluster]"' in capsys.readouterr().err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_without_slurm_the_cluster_campaign_says_so(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("submitit", reason=NEEDS_SUBMITIT)
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch nor srun, as on a machine outside any cluster
    assert main(["campaign", "--cluster", "slurm", "--runs-dir", str(tmp_path / "runs"), *CARTPOLE_ARGS]) == 2
    assert "--cluster local" in capsys.readouterr().err
