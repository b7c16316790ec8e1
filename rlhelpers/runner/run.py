"""One run end to end: its directory, lock, resume, W&B run, metrics log, record and schedule, and what it shows.

``train`` trains or resumes the run (arm, seed) in ``<runs_dir>/<arm>_seed-<seed>``: it takes the run's lock,
restores the newest checkpoint, and drives ``Trainer`` in one loop that evaluates, logs, checkpoints and snapshots
on schedule, shows a progress bar and stops cleanly on SIGTERM or Ctrl-C (``StopRequest``). The algorithm itself
is ``rlhelpers.core.trainer``'s; what a run keeps beside it (its evaluations, the provenance of each session, its
W&B id) is its ``RunRecord``, saved with its training time in the same checkpoint.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from rlhelpers.core.config import resolve_device
from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.trainer import Trainer
from rlhelpers.runner.config import TrainConfig, exceeds, validate
from rlhelpers.runner.runlock import RunLock
from rlhelpers.runner.store import (
    Provenance,
    RunDirectory,
    RunRecord,
    append_metrics,
    check_resumable,
    drop_metrics_after,
)
from rlhelpers.runner.tracking import Tracker, new_run_id, resolve_wandb_mode

LOG_INTERVAL = 10_000  # environment steps between two lines of training metrics (whole updates)
PACKAGE_DIR = Path(__file__).resolve().parent


def progress_bar(**options: Any) -> tqdm:
    """A tqdm bar on stderr (``options`` are tqdm's). In a notebook every refresh is kept in the saved output,
    so outside a terminal it refreshes every 30 s at most (tqdm's monitor would otherwise force one every 10 s)."""
    interval = 1.0 if sys.stderr.isatty() else 30.0
    return tqdm(mininterval=interval, maxinterval=interval, file=sys.stderr, **options)


def say(line: str) -> None:
    """Print a line of a long job's log. In a terminal, above the progress bar; elsewhere plainly, as in a
    notebook, where tqdm's clearing and redrawing of the bar around each line is stored as output after output."""
    if sys.stderr.isatty():
        tqdm.write(line)
    else:
        print(line, flush=True)


class StopRequest:
    """While entered, ``signals`` (SIGTERM and SIGINT by default) set ``requested`` instead of ending the process;
    a second SIGINT (Ctrl-C pressed again while the first one waits to be acted on) raises KeyboardInterrupt at once.

    Handlers can only be installed from the main thread; elsewhere the signals keep their handlers and
    ``requested`` stays False.
    """

    def __init__(self, signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)) -> None:
        self.signals = signals
        self.received: signal.Signals | None = None  # the signal that asked to stop
        self._previous: dict[signal.Signals, Any] = {}

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._handle) for sig in self.signals}
        return self

    @property
    def requested(self) -> bool:
        """Whether one of the signals arrived."""
        return self.received is not None

    def _handle(self, signum: int, frame: Any) -> None:
        if signum == signal.SIGINT == self.received:
            raise KeyboardInterrupt
        self.received = signal.Signals(signum)

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)  # None: set outside Python
        self._previous = {}


def _version(package: str) -> str | None:
    with contextlib.suppress(metadata.PackageNotFoundError):
        return metadata.version(package)
    return None


def git_commit(path: Path = PACKAGE_DIR) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git checkout holding ``path``; (None, None) outside one (e.g. a wheel install).

    ``dirty`` is True when tracked files differ from that commit.
    """
    try:
        commit = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        changes = subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
                                 capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None, None
    return commit, bool(changes)


def device_name(device: torch.device) -> str:
    """What trains on ``device``: the GPU's name on CUDA, else the CPU's model (``cpu_model``)."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model()


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what ``platform`` knows."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def session_provenance(device: torch.device, env_threads: int, start_step: int) -> Provenance:
    """One training session's record: from which step, with which code, libraries, hardware and numerics."""
    commit, dirty = git_commit()
    return Provenance(
        start_step=start_step, start_time=time.time(), rlhelpers=_version("rlhelpers"), git_commit=commit,
        git_dirty=dirty, python=platform.python_version(), torch=str(torch.__version__),
        gymnasium=_version("gymnasium"), ale_py=_version("ale-py"), numpy=_version("numpy"), device=str(device),
        device_name=device_name(device),
        cpu_count=os.cpu_count(), torch_threads=torch.get_num_threads(),
        float32_matmul_precision=torch.get_float32_matmul_precision(),  # "highest": fp32, "high": TF32 on a GPU
        cudnn_tf32=torch.backends.cudnn.allow_tf32,  # convolutions in TF32 on a GPU of Ampere or later
        env_threads=env_threads)


def resolve_config(config: TrainConfig) -> tuple[TrainConfig, torch.device]:
    """Validate ``config`` and resolve it for this machine: the config with ``wandb_mode`` set to the mode
    W&B runs in (``resolve_wandb_mode``: online with an API key, else offline), and the torch device. ``device``
    stays as given, so a saved run keeps ``auto``."""
    config = dataclasses.replace(validate(config), wandb_mode=resolve_wandb_mode(config.wandb_mode))
    return config, resolve_device(config.device)


@dataclass(frozen=True)
class RunResult:
    """What ``train`` leaves behind: the run's record as its files now hold it, and how it ended."""

    record: RunRecord
    run_dir: Path
    num_timesteps: int
    stop_reason: str
    wandb_url: str | None


def finite_means(updates: list[dict[str, float]]) -> dict[str, float]:
    """Each metric's mean over ``updates`` of its finite values, by name; NaN for a metric without any.

    A NaN (the explained variance of a constant target) is left out of its metric's mean instead of
    turning the whole mean into NaN.
    """
    means = {}
    for key in sorted({key for update in updates for key in update}):
        values = [update[key] for update in updates if key in update and math.isfinite(update[key])]
        means[key] = sum(values) / len(values) if values else math.nan
    return means


def _report_without_checkpoint(saved: RunRecord, run_dir: RunDirectory) -> RunResult:
    """A run with evaluations and no checkpoint: reported as it is if its history shows it finished (committed
    results come without checkpoints), refused otherwise (it cannot go on)."""
    last = saved.evaluations[-1]
    if not saved.finished():
        raise RLHelpersError(
            f"{run_dir.history_path} has evaluation results up to step {last.step:,} but no checkpoint "
            "was found; restore the checkpoint files, train your own run in another runs directory (--runs-dir, "
            "or runs_dir in the notebook), or delete this run directory to start over")
    print(f"{run_dir.path.name} is finished (evaluated up to step {last.step:,}, last evaluation "
          f"{last.mean:.2f}); its checkpoints are not here, so it is reported as it is", file=sys.stderr)
    return RunResult(saved, run_dir.path, last.step, "finished earlier", None)


def _resumed_record(config: TrainConfig, run_dir: RunDirectory, state: dict[str, Any] | None,
                    saved: RunRecord | None) -> RunRecord:
    """The record the run goes on with: the checkpoint's (None: a new run), under this config (a session may change
    what is not the run's identity), with the W&B id of the run's history when the checkpoint has none."""
    record = RunRecord.from_checkpoint(state, run_dir.path) if state is not None else RunRecord(run_dir.path.name,
                                                                                                run_dir.path)
    wandb_run_id = record.wandb_run_id or (saved.wandb_run_id if saved is not None else None) or new_run_id()
    return dataclasses.replace(record, config=config, config_shape=None, wandb_run_id=wandb_run_id)


class Session:
    """One training session of a run: its trainer, record, files, lock and W&B run, and the clock of its
    training time (``train_seconds`` counts on from the saved total, evaluations included)."""

    def __init__(self, trainer: Trainer, record: RunRecord, run_dir: RunDirectory, lock: RunLock, tracker: Tracker,
                 train_seconds: float) -> None:
        self.trainer, self.record, self.run_dir, self.lock, self.tracker = trainer, record, run_dir, lock, tracker
        self.config: TrainConfig = trainer.config  # type: ignore[assignment]  # a run's trainer has its TrainConfig
        self.clock_origin = time.monotonic() - train_seconds

    def log_games(self) -> None:
        """Append the training games ended since the last call to games.jsonl, as one line at this step: ``games``
        lists them as [env, return, length]."""
        if games := self.trainer.take_games():
            append_metrics(self.run_dir.games_path, {"games": [list(game) for game in games]},
                           self.trainer.num_timesteps)

    def checkpoint(self) -> float:
        """Save the training state and the record, with the training time up to now, then eval_history.json (the
        history may lag the checkpoint, never lead it); return the time the save ended. The games ended up to now
        are logged first, so that games.jsonl holds every game that the checkpoint counts."""
        self.log_games()
        entries = {**self.record.checkpoint_entries(), "train_seconds": time.monotonic() - self.clock_origin}
        self.run_dir.save_checkpoint({**self.trainer.state_dict(), **entries}, self.trainer.num_timesteps,
                                     self.config.keep_checkpoints)
        self.run_dir.write_record(self.record)
        self.lock.heartbeat()
        return time.monotonic()

    def snapshot(self) -> None:
        """Save the model's weights at this step (snapshots/, for the analysis)."""
        self.run_dir.save_snapshot(self.trainer.snapshot(), self.trainer.num_timesteps)

    def log(self, window: list[dict[str, float]], seconds: float) -> None:
        """Log a line of training metrics: the mean of each update statistic over ``window``, the steps per second
        over the ``seconds`` it took, the training games' scores; then the games that ended, and a heartbeat."""
        trainer = self.trainer
        metrics = {f"losses/{key}": value for key, value in finite_means(window).items()}
        metrics["charts/fps"] = len(window) * self.config.batch_size / max(seconds, 1e-9)
        if trainer.episode_returns:
            metrics["charts/episode_return"] = float(np.mean(trainer.episode_returns))
            metrics["charts/episode_length"] = float(np.mean(trainer.episode_lengths))
        if (reward_mean_100 := trainer.reward_mean_100()) is not None:
            metrics["charts/reward_mean_100"] = reward_mean_100
        self.tracker.log(metrics, trainer.num_timesteps)
        self.log_games()
        self.lock.heartbeat()

    def evaluate(self) -> float:
        """Evaluate the policy, add the evaluation to the record, log it and checkpoint; return its mean return."""
        seconds = round(time.monotonic() - self.clock_origin, 3)  # trained before this evaluation
        evaluation = dataclasses.replace(self.trainer.evaluate(len(self.record.evaluations)),
                                         time=round(time.time(), 3), train_seconds=seconds)
        self.record = dataclasses.replace(self.record, evaluations=self.record.evaluations + (evaluation,))
        self.tracker.log(evaluation.metrics(), self.trainer.num_timesteps)
        return evaluation.mean


def _next_multiple(step: int, interval: int) -> int:
    """The first multiple of ``interval`` after ``step``."""
    return (step // interval + 1) * interval


@dataclass
class Cadence:
    """Something a run does every ``interval`` steps (or updates): due once the count reaches ``next``."""

    interval: int
    next: int

    def due(self, count: int) -> bool:
        return count >= self.next

    def done(self, count: int) -> None:
        """Done at ``count``: due again at the next multiple of the interval."""
        self.next = _next_multiple(count, self.interval)


@dataclass
class Timer:
    """Something a run does every ``interval_s`` seconds of wall-clock time, counted from when it was last done."""

    interval_s: float
    last: float = dataclasses.field(default_factory=time.monotonic)

    def due(self) -> bool:
        return time.monotonic() - self.last >= self.interval_s


def train(config: TrainConfig, show_progress: bool = True) -> RunResult:
    """Train (or resume) the run (arm, seed) of ``config`` in ``<runs_dir>/<arm>_seed-<seed>``.

    Evaluates at step 0 and every ``eval_interval`` steps and at the end of the budget, checkpoints
    after each evaluation and every ``checkpoint_interval_s`` seconds, and stops at
    ``total_timesteps`` or once the mean evaluation return exceeds ``stop_return``. Saves the model
    weights every ``snapshot_interval`` steps and at the end. SIGTERM checkpoints and returns; SIGINT (Ctrl-C)
    checkpoints and raises KeyboardInterrupt, naming the step (a second one raises it at once). Its first line on
    stderr names the device; torch's thread count and float32 precision are as they were when it returns (the
    trainer's close gives them back).
    """
    # Bad values, W&B 'online' without a key and another config than the saved one fail here: before anything
    # is written.
    config, device = resolve_config(config)
    run_dir = RunDirectory(Path(config.runs_dir) / config.run_name)
    check_resumable(run_dir.saved_record(), config, run_dir.path)
    run_dir.create()
    lock = RunLock(run_dir.path)
    lock.acquire()
    with contextlib.ExitStack() as cleanup:  # undone in the reverse order, whether the session ends or fails
        cleanup.callback(lock.release)
        state, saved = run_dir.resume(config)
        if state is None and saved is not None and saved.evaluations:
            return _report_without_checkpoint(saved, run_dir)
        record = _resumed_record(config, run_dir, state, saved)
        trainer = Trainer(config, device)
        cleanup.callback(trainer.close)
        if state is not None:
            trainer.load_state_dict(state)
        provenance = session_provenance(device, config.env_threads, trainer.num_timesteps)
        record = dataclasses.replace(record, sessions=record.sessions + (provenance,))
        start = f"resuming from step {trainer.num_timesteps:,}" if state is not None else "starting"
        print(f"{config.run_name}: {start} on {device} ({provenance.device_name})", file=sys.stderr)
        # Lines logged after the checkpoint belong to work that is about to be redone.
        for log in (run_dir.metrics_path, run_dir.games_path):
            drop_metrics_after(log, trainer.num_timesteps if state is not None else -1)
        run_dir.write_record(record)
        tracker = Tracker(config.run_name, record.wandb_run_id or "", config.to_dict(), config.runs_dir,
                          run_dir.metrics_path)
        # A session that ends in an exception shows as failed in W&B; one stopped by Ctrl-C does not.
        cleanup.push(lambda failure, *_: tracker.finish(exit_code=int(failure not in (None, KeyboardInterrupt))))
        session = Session(trainer, record, run_dir, lock, tracker, float((state or {}).get("train_seconds", 0.0)))
        bar = progress_bar(total=config.total_timesteps, initial=min(trainer.num_timesteps, config.total_timesteps),
                           desc=config.run_name, unit="step", unit_scale=True, disable=not show_progress,
                           postfix=f"eval {record.last.mean:.1f}" if record.last is not None else None)
        with StopRequest() as stop, bar:
            stop_reason = _train_loop(session, bar, stop)  # a stop signal: checkpointed
        if stop_reason == "stopped by SIGINT":  # Ctrl-C, or a notebook's interrupt: stop what would come next, too
            raise KeyboardInterrupt(f"{config.run_name}: stopped and saved at step {trainer.num_timesteps:,}")
        return RunResult(session.record, run_dir.path, trainer.num_timesteps, stop_reason, tracker.url)


def _train_loop(session: Session, bar: tqdm, stop: StopRequest) -> str:
    """Train until the budget is spent, an evaluation exceeds ``stop_return`` or a stop signal; return why.

    Each step, in this order: a snapshot when one is due; an evaluation when one is due, or once the budget is spent,
    then a checkpoint; an update; a line of metrics every ``LOG_INTERVAL`` steps (in whole updates); a timed checkpoint
    every ``checkpoint_interval_s``, put off when an evaluation comes next (rewriting checkpoint-<step>.pt in place is
    what a synced folder such as Drive may lose). A stop signal checkpoints and returns at once."""
    trainer, cfg, last = session.trainer, session.config, session.record.last
    if last is not None and exceeds(last.mean, cfg.stop_return):
        return "stop_return"
    assert cfg.eval_interval is not None  # the run's default, set by TrainConfig.__post_init__
    evaluations = Cadence(cfg.eval_interval, _next_multiple(last.step, cfg.eval_interval) if last is not None else 0)
    snapshots = Cadence(cfg.snapshot_interval, _next_multiple(trainer.num_timesteps - 1, cfg.snapshot_interval))
    log_every = max(1, LOG_INTERVAL // cfg.batch_size)  # in updates
    logs = Cadence(log_every, _next_multiple(trainer.n_updates, log_every))
    checkpoints = Timer(cfg.checkpoint_interval_s)
    snapshot_step = None  # the step of this session's newest snapshot
    window: list[dict[str, float]] = []  # the statistics of the updates since the last log line
    window_start = time.monotonic()

    def evaluation_due() -> bool:
        evaluated = session.record.last is not None and session.record.last.step == trainer.num_timesteps
        return evaluations.due(trainer.num_timesteps) or (budget_spent() and not evaluated)

    def budget_spent() -> bool:
        return trainer.num_timesteps >= cfg.total_timesteps

    while True:
        if snapshots.due(trainer.num_timesteps):
            session.snapshot()
            snapshot_step = trainer.num_timesteps
            snapshots.done(trainer.num_timesteps)
        if evaluation_due():
            mean_return = session.evaluate()
            evaluations.done(trainer.num_timesteps)
            checkpoints.last = session.checkpoint()
            bar.set_postfix_str(f"eval {mean_return:.1f}", refresh=False)
            if exceeds(mean_return, cfg.stop_return):
                stop_reason = "stop_return"
                break
        if budget_spent():
            stop_reason = "total_timesteps"
            break
        window.append(trainer.train_iteration())
        bar.update(cfg.batch_size)
        if logs.due(trainer.n_updates):
            session.log(window, time.monotonic() - window_start)
            window, window_start = [], time.monotonic()
            logs.done(trainer.n_updates)
        evaluates_next = trainer.num_timesteps >= min(evaluations.next, cfg.total_timesteps)
        if stop.requested or (checkpoints.due() and not evaluates_next):
            checkpoints.last = session.checkpoint()
            if stop.requested and stop.received is not None:
                return f"stopped by {stop.received.name}"
    if snapshot_step != trainer.num_timesteps:  # the final weights, unless the schedule just saved them
        session.snapshot()
    return stop_reason
