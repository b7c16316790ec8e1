"""The campaign on a SLURM cluster, through submitit (the optional extra ``pip install -e ".[cluster]"``).

Each unfinished run becomes one job of a SLURM job array. A job runs the same resumable
``python -m rlhelpers train`` as a local campaign, into the shared runs directory, logging to
``<runs_dir>/<run>/train.log``. Near its time limit, or when it is preempted, SLURM signals the job;
submitit then calls ``TrainJob.checkpoint``, which stops the training with SIGTERM (it checkpoints and
exits) and hands submitit the same job to requeue, which resumes from that checkpoint. Each run's lock
keeps two jobs off one run: a job that finds its run trained by another says so in its log and ends. Jobs that
SLURM would refuse, or keep pending for ever (a bad partition, more CPUs than a node has), are refused before
anything is submitted (``sbatch --test-only``). What SLURM and submitit do (queueing, requeueing, arrays), this
module calls; it schedules nothing itself.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import submitit

from rlhelpers.core.errors import RLHelpersError
from rlhelpers.runner import campaign
from rlhelpers.runner.campaign import CampaignRun, start_training, stop_training
from rlhelpers.runner.config import TrainConfig
from rlhelpers.runner.runlock import RunLock, holder
from rlhelpers.runner.store import TRAIN_LOG

SLURM_FOLDER = "slurm"  # submitit's job files and logs, in the runs directory


class TrainJob(submitit.helpers.Checkpointable):
    """One run's training as a SLURM job: ``python -m rlhelpers train`` for ``run`` with ``train_args``."""

    def __init__(self, run: CampaignRun, runs_dir: str, train_args: list[str]) -> None:
        self.run, self.runs_dir, self.train_args = run, runs_dir, train_args
        self.process: subprocess.Popen | None = None

    def __call__(self) -> None:
        # SLURM sends its warning before a time limit or a preemption (USR2) to every process of the job: the
        # training would die of it and lose its steps since the last checkpoint. Blocked while the training
        # starts, the signal stays blocked in it, and reaches submitit's handler here once unblocked.
        unblocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
        try:
            self.process = start_training(self.run, Path(self.runs_dir), self.train_args)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
        # Polled, not wait()ed: ``checkpoint`` runs in a signal handler and must be able to wait for the process
        # itself (a wait() interrupted there would still hold the process's lock).
        try:
            while (code := self.process.poll()) is None:
                time.sleep(1.0)
        finally:  # a cancelled job (SIGINT in submitit's local jobs) stops its run (it checkpoints on SIGTERM)
            stop_training([self.process])
        if code == 0:
            return
        owner = RunLock(Path(self.runs_dir) / self.run.name).live_owner()
        if owner is None:
            raise RLHelpersError(f"{self.run.name} ended with exit code {code}: see "
                                 f"{Path(self.runs_dir) / self.run.name / TRAIN_LOG}")
        print(f"{self.run.name}: trained by another process ({holder(owner)}); this job leaves it alone")

    def checkpoint(self, *args: Any, **kwargs: Any) -> submitit.helpers.DelayedSubmission:
        """Time limit or preemption: stop the training if it runs (it checkpoints on SIGTERM), then requeue a
        fresh job."""
        stop_training([self.process] if self.process is not None else [])
        return submitit.helpers.DelayedSubmission(TrainJob(self.run, self.runs_dir, self.train_args))


def submit_campaign(options: dict[str, Any], runs: list[CampaignRun], parallel: int | None = None,
                    **slurm: Any) -> int:
    """``campaign.train_campaign``'s runs as SLURM jobs (``submit_runs``, with its ``slurm`` settings), ``parallel``
    of them running at once (default: as many as SLURM allows); returns 0 once the runs are submitted."""
    options, config, _ = campaign.check_options(options, runs)
    submit_runs(config, campaign.train_arguments(options), campaign.ready_runs(runs, config, set(), "left alone"),
                parallel=parallel, **slurm)
    return 0


def submit_runs(config: TrainConfig, train_args: list[str], runs: list[CampaignRun], partition: str | None = None,
                time_min: int = 240, gpus: int = 0, cpus: int = 2, parallel: int | None = None,
                max_requeues: int = 30, cluster: str | None = "slurm") -> list[submitit.Job]:
    """Submit each of ``runs`` as one job of a SLURM job array and return the jobs.

    ``partition``, ``time_min`` (minutes per job), ``gpus`` and ``cpus`` per job are SLURM's settings;
    ``parallel`` caps the jobs running at once; a job is requeued at most ``max_requeues`` times at its time
    limit. ``cluster`` is submitit's executor: ``slurm``, or ``local`` for local processes (tests).
    """
    if not runs:
        print("nothing to submit: every run is finished or being trained")
        return []
    if cluster == "slurm":
        _check_request(partition, time_min, gpus, cpus)
    runs_dir = Path(config.runs_dir).resolve()
    try:
        executor = submitit.AutoExecutor(folder=runs_dir / SLURM_FOLDER, cluster=cluster,
                                         slurm_max_num_timeout=max_requeues)
    except RuntimeError as exc:  # submitit's "Could not detect srun"
        raise RLHelpersError(f"{exc}: submit from a node of the cluster, or try the jobs here with --cluster local") \
            from exc
    # No GPU request at all rather than --gpus-per-node=0, which clusters without GPUs may refuse.
    executor.update_parameters(name="rlhelpers", timeout_min=time_min, gpus_per_node=gpus or None, cpus_per_task=cpus,
                               slurm_partition=partition, slurm_array_parallelism=parallel)
    with executor.batch():
        jobs = [executor.submit(TrainJob(run, str(runs_dir), train_args)) for run in runs]
    for run, job in zip(runs, jobs, strict=True):
        print(f"{run.name}: submitted as job {job.job_id}")
    print(f"submitit's files: {runs_dir / SLURM_FOLDER}; `python -m rlhelpers status --runs-dir {runs_dir}` "
          "shows the runs")
    return jobs


def _check_request(partition: str | None, time_min: int, gpus: int, cpus: int) -> None:
    """Ask SLURM whether it would run one job of the request (``sbatch --test-only``, which submits nothing):
    a bad partition or more than a node has is refused here, rather than submitted to pend for ever."""
    request = [*([f"--partition={partition}"] if partition else []), f"--time={time_min}", f"--cpus-per-task={cpus}",
               *([f"--gpus-per-node={gpus}"] if gpus else [])]
    try:
        test = subprocess.run(["sbatch", "--test-only", *request, "--wrap=true"], capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RLHelpersError(f"sbatch did not answer ({exc}): submit from a node of the cluster, or try the jobs "
                             "here with --cluster local") from exc
    if test.returncode != 0:
        reason = test.stderr.strip().splitlines()[-1] if test.stderr.strip() else f"exit code {test.returncode}"
        raise RLHelpersError(f"SLURM would not run these jobs: {reason} (--partition {partition or '(default)'} "
                             f"--cpus-per-job {cpus} --gpus-per-job {gpus} --time-min {time_min}); `sinfo` lists the "
                             "partitions and their nodes")
