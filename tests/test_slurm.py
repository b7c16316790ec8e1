"""The campaign on a real SLURM: a one-node cluster (tests/slurm.py) runs CartPole runs as sbatch jobs, and the
tests reach its time limit, preempt, cancel and double-submit them, and submit what it must refuse.

The cluster starts where ``CI`` or ``RLHELPERS_SLURM=1`` asks for it, as root; elsewhere these tests skip with
the reason. Under CI a cluster that cannot start fails them.

Where a test interrupts a run, it first holds the training still (SIGSTOP), so that the run stops at a step the
test knows however fast the machine is; SLURM's own SIGCONT (scancel, some updates), or the test's, lets it go
on.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import slurm
from builders import saved
from test_cluster import CARTPOLE_ARGS, finished, last_step, wait_for

from rlhelpers.cli import main
from rlhelpers.runner.cluster import SLURM_FOLDER
from rlhelpers.runner.store import LOCK_FILE, TRAIN_LOG

OPT_IN = "RLHELPERS_SLURM"
BUDGET = 3000  # steps of each run; evaluations every 500 (CARTPOLE_ARGS)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[dict[str, str]]:
    """The environment (``SLURM_CONF``) of a one-node SLURM started for this session (one per pytest-xdist
    worker that runs these tests, each with its own ports, munge socket and state)."""
    if not (os.environ.get("CI") or os.environ.get(OPT_IN)):
        pytest.skip(f"set {OPT_IN}=1 to run these tests against a one-node SLURM started here (as root; "
                    "docs/cluster.md)")
    with contextlib.ExitStack() as stack:
        try:
            import submitit  # noqa: F401

            env = stack.enter_context(slurm.one_node_cluster())
        except (ImportError, slurm.SlurmUnavailable) as exc:
            (pytest.fail if os.environ.get("CI") else pytest.skip)(f"no SLURM to test against: {exc}")
        yield env


@pytest.fixture
def cluster(slurm_cluster: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This test submits to the session's cluster, whose queue is empty again at the test's end."""
    monkeypatch.setenv("SLURM_CONF", slurm_cluster["SLURM_CONF"])
    yield
    slurm_cli("scancel", f"--partition={slurm.PARTITION}")
    wait_for(lambda: not queue(), "the test's jobs to leave the queue", timeout_s=60)


def slurm_cli(*command: str) -> str:
    """The output of a SLURM command (squeue, scontrol, scancel) that must succeed."""
    return subprocess.run(command, capture_output=True, text=True, check=True, timeout=30).stdout


def queue() -> dict[str, str]:
    """Job id -> state (``PD``, ``R``, ``CG``...) of the jobs in the queue."""
    return dict(line.split() for line in slurm_cli("squeue", "--noheader", "--format=%i %t").splitlines())


def campaign(runs: Path, capsys: pytest.CaptureFixture, *options: str,
             seeds: tuple[str, ...] = ("0",)) -> dict[str, str]:
    """Submit the a2c runs of ``seeds`` with ``options`` as ``campaign --cluster slurm`` does, 1 CPU per job; return
    run name -> job id of what it submitted."""
    assert main(["campaign", "--cluster", "slurm", "--arms", "a2c", "--seeds", *seeds, "--runs-dir", str(runs),
                 "--cpus-per-job", "1", "--total-timesteps", str(BUDGET), *CARTPOLE_ARGS, *options]) == 0
    return dict(re.findall(r"^(\S+): submitted as job (\S+)$", capsys.readouterr().out, re.MULTILINE))


def job_log(runs: Path, job_id: str) -> str:
    """What submitit and the job wrote to its stdout log."""
    path = runs / SLURM_FOLDER / f"{job_id}_0_log.out"
    return path.read_text() if path.exists() else ""


def held_at(run: Path, step: int) -> int:
    """Wait until ``run`` has evaluated at ``step`` or later, then stop its training (SIGSTOP); return its pid."""
    wait_for(lambda: last_step(run) >= step and (run / LOCK_FILE).exists(), f"an evaluation at step {step}",
             poll_s=0.05)  # well before the next evaluation, 500 steps later
    pid = json.loads((run / LOCK_FILE).read_text())["pid"]
    os.kill(pid, signal.SIGSTOP)
    return pid


def go_on(pid: int) -> None:
    """Let a held training go on (SIGCONT), unless it has ended: SLURM continues a job's processes too, before
    some of its signals and when it updates the job."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)


def assert_resumed_once(run: Path) -> None:
    """The run ended at its budget after two sessions, the second from the first's checkpoint; the evaluations,
    one per 500 steps, are neither lost nor repeated."""
    record = saved(run)
    assert [e["step"] for e in record["history"]] == list(range(0, BUDGET + 1, 500))
    starts = [s["start_step"] for s in record["provenance"]]
    assert len(starts) == 2 and starts[0] == 0 < 500 <= starts[1] < BUDGET
    assert "(stopped by SIGTERM)" in (run / TRAIN_LOG).read_text()


def test_a_campaign_trains_two_runs_as_a_job_array(tmp_path: Path, cluster: None,
                                                   capsys: pytest.CaptureFixture) -> None:
    runs = tmp_path / "runs"
    jobs = campaign(runs, capsys, seeds=("0", "100"))
    assert sorted(jobs) == ["a2c_seed-0", "a2c_seed-100"]
    assert len({job.split("_")[0] for job in jobs.values()}) == 1  # one array
    wait_for(lambda: all(finished(runs / name, BUDGET) for name in jobs) and not queue(), "both runs to finish")
    for name in jobs:
        assert [e["step"] for e in saved(runs / name)["history"]] == list(range(0, BUDGET + 1, 500))
    assert main(["status", "--runs-dir", str(runs)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert sorted(line.split()[0] for line in table[1:] if line.split()[-1] == "finished") == sorted(jobs)
    assert campaign(runs, capsys, seeds=("0", "100")) == {}  # nothing is left to submit
    assert not queue()


def interrupt_and_resume(runs: Path, capsys: pytest.CaptureFixture, time_min: int,
                         send: Callable[[str], object]) -> str:
    """Submit one run with a ``time_min`` limit; once it has trained, hold it, ``send`` the job SLURM's warning
    (USR2) and let the run go on once submitit caught it; wait until the requeued job has finished the run.
    Return the job's log."""
    run = runs / "a2c_seed-0"
    [job] = campaign(runs, capsys, "--time-min", str(time_min)).values()
    pid = held_at(run, 500)
    try:
        send(job)
        wait_for(lambda: "Caught signal SIGUSR2" in job_log(runs, job), "submitit to catch SLURM's signal")
        # While submitit's handler waits for the training, the job runs: it gets its whole limit back, which it
        # keeps when requeued.
        slurm_cli("scontrol", "update", f"JobId={job}", f"TimeLimit={time_min}")
    finally:
        go_on(pid)  # the SIGTERM of submitit's checkpoint is waiting in it
    wait_for(lambda: finished(run, BUDGET) and job not in queue(), "the requeued job to finish the run")
    assert_resumed_once(run)
    return job_log(runs, job)


def test_a_job_at_its_time_limit_checkpoints_is_requeued_and_resumes(tmp_path: Path, cluster: None,
                                                                   capsys: pytest.CaptureFixture) -> None:
    """SLURM warns a job (USR2, ``--signal``) at its next time-limit check (every 30 s) once the limit is less than
    submitit's 90 s plus that check away. The job is submitted with 10 minutes; once the run has trained, its limit
    is cut to a minute or two past its age, so the warning comes in at most 30 s, not after 8.5 minutes."""
    started = time.monotonic()

    def reach_the_limit(job: str) -> None:
        slurm_cli("scontrol", "update", f"JobId={job}", f"TimeLimit={math.ceil((time.monotonic() - started) / 60) + 1}")

    log = interrupt_and_resume(tmp_path / "runs", capsys, 10, reach_the_limit)
    assert "this job is timed-out" in log and "(29 remaining timeouts)" in log  # counted against --max-requeues


def test_a_preempted_job_checkpoints_is_requeued_and_resumes(tmp_path: Path, cluster: None,
                                                             capsys: pytest.CaptureFixture) -> None:
    """``scancel --signal=USR2`` is what SLURM sends a job it preempts. A job younger than its limit's guaranteed
    part (submitit: 20 minutes less 10) counts it as a preemption, not against --max-requeues."""
    log = interrupt_and_resume(tmp_path / "runs", capsys, 20,
                               lambda job: slurm_cli("scancel", "--signal=USR2", job))
    assert "this job is preempted" in log and "(30 remaining timeouts)" in log


def test_a_cancelled_job_leaves_its_run_resumable(tmp_path: Path, cluster: None,
                                                  capsys: pytest.CaptureFixture) -> None:
    runs = tmp_path / "runs"
    run = runs / "a2c_seed-0"
    [job] = campaign(runs, capsys).values()
    held_at(run, 500)
    slurm_cli("scancel", job)  # SIGCONT, then SIGTERM to every process of the job
    wait_for(lambda: job not in queue() and not (run / LOCK_FILE).exists(), "the cancelled job to end")
    assert not finished(run, BUDGET)
    [resubmitted] = campaign(runs, capsys).values()
    wait_for(lambda: finished(run, BUDGET) and resubmitted not in queue(), "the next submission to finish the run")
    assert_resumed_once(run)


def test_two_jobs_of_one_run_never_train_it_at_once(tmp_path: Path, cluster: None,
                                                    capsys: pytest.CaptureFixture) -> None:
    """Two submissions queued while the partition is down both pass the campaign's check (nothing trains the run
    yet) and start together once it is up: the run's lock lets one train, and the other job says so and ends."""
    runs = tmp_path / "runs"
    run = runs / "a2c_seed-0"
    slurm_cli("scontrol", "update", f"PartitionName={slurm.PARTITION}", "State=DOWN")
    try:
        jobs = [*campaign(runs, capsys).values(), *campaign(runs, capsys).values()]
    finally:
        slurm_cli("scontrol", "update", f"PartitionName={slurm.PARTITION}", "State=UP")
    assert len(jobs) == 2
    pid = held_at(run, 0)  # the winner waits until the other job has given up
    try:
        wait_for(lambda: any("trained by another process" in job_log(runs, job) for job in jobs),
                 "one job to leave the run to the other")
    finally:
        go_on(pid)
    wait_for(lambda: finished(run, BUDGET) and not set(jobs) & set(queue()), "the other job to finish the run")
    [loser] = [job for job in jobs if "trained by another process" in job_log(runs, job)]
    assert f"a2c_seed-0: trained by another process (host {socket.gethostname()}, pid {pid}); this job leaves it " \
           "alone" in job_log(runs, loser)
    record = saved(run)
    assert [s["start_step"] for s in record["provenance"]] == [0]  # one session trained it
    assert [e["step"] for e in record["history"]] == list(range(0, BUDGET + 1, 500))


@pytest.mark.parametrize("request_", [("--partition", "nosuch"), ("--cpus-per-job", str(slurm.NODE_CPUS + 1))],
                         ids=["bad partition", "more CPUs than the node has"])
def test_a_request_slurm_cannot_run_fails_at_submission(tmp_path: Path, cluster: None, capsys: pytest.CaptureFixture,
                                                        request_: tuple[str, str]) -> None:
    runs = tmp_path / "runs"
    assert main(["campaign", "--cluster", "slurm", "--arms", "a2c", "--seeds", "0", "--runs-dir", str(runs),
                 *request_, *CARTPOLE_ARGS]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    [line] = err.splitlines()
    assert line.startswith("error: SLURM would not run these jobs: ") and " ".join(request_) in line
    assert not queue() and not runs.exists()
