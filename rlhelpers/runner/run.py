"""One run end to end: its directory, lock, resume, W&B run, metrics log, bookkeeping and schedule.

``train`` trains or resumes the run (algo, seed) in ``<runs_dir>/<algo>_seed-<seed>``: it takes the
run's lock, restores the newest checkpoint, and drives ``Trainer`` in one loop that evaluates, logs,
checkpoints and snapshots on schedule, shows a progress bar and stops cleanly on SIGTERM or Ctrl-C. The
algorithm itself is ``rlhelpers.core.trainer``'s; what a run keeps beside it (its evaluations, the
provenance of each session, its training time and W&B id) is its bookkeeping, saved in the same
checkpoint.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.evaluation import evaluation_metrics, mean_return
from rlhelpers.core.trainer import Trainer
from rlhelpers.runner.checkpoint import RunDirectory, check_resumable
from rlhelpers.runner.config import TrainConfig, resolve_config
from rlhelpers.runner.console import progress_bar
from rlhelpers.runner.files import METRICS_FILE
from rlhelpers.runner.metrics_log import MetricsLog
from rlhelpers.runner.provenance import session_provenance
from rlhelpers.runner.records import RunRecord
from rlhelpers.runner.runlock import RunLock
from rlhelpers.runner.stopping import StopRequest
from rlhelpers.runner.tracking import Tracker, new_run_id

LOG_INTERVAL = 10_000  # environment steps between two lines of training metrics (whole updates)


@dataclass
class RunResult:
    """What ``train`` leaves behind: where the run lives and how it ended."""

    run_dir: Path
    num_timesteps: int
    eval_history: list[dict[str, Any]]
    stop_reason: str
    wandb_url: str | None
    wandb_run_id: str


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


def _report_without_checkpoint(saved_record: dict[str, Any], run_dir: RunDirectory) -> RunResult:
    """A run with evaluations and no checkpoint: reported as it is if its history shows it finished (committed
    results come without checkpoints), refused otherwise (it cannot go on)."""
    history = saved_record["history"]
    if not RunRecord.from_dict(saved_record, run_dir.path).finished():
        raise RLHelpersError(
            f"{run_dir.history_path} has evaluation results up to step {history[-1]['step']:,} but no checkpoint "
            "was found; restore the checkpoint files, train your own run in another runs directory (--runs-dir, "
            "or runs_dir in the notebook), or delete this run directory to start over")
    print(f"{run_dir.path.name} is finished (evaluated up to step {history[-1]['step']:,}, last evaluation "
          f"{mean_return(history[-1]):.2f}); its checkpoints are not here, so it is reported as it is", file=sys.stderr)
    return RunResult(run_dir.path, int(history[-1]["step"]), history, "finished earlier", None,
                     saved_record.get("wandb_run_id", ""))


def _bookkeeping(state: dict[str, Any] | None, saved_record: dict[str, Any] | None) -> dict[str, Any]:
    """What the run machinery keeps of a run beside the learner's state, under the names its checkpoint saves
    them: the W&B run id, every evaluation, the provenance of each training session and the wall-clock seconds
    trained so far (evaluations included). Restored from the checkpoint ``state`` (None: a new run), with the
    W&B id of the run's history when the checkpoint has none."""
    state = state or {}
    return {"wandb_run_id": state.get("wandb_run_id") or (saved_record or {}).get("wandb_run_id") or new_run_id(),
            "eval_history": list(state.get("eval_history", [])), "sessions": list(state.get("sessions", [])),
            "train_seconds": float(state.get("train_seconds", 0.0))}


def _history_record(config: TrainConfig, book: dict[str, Any]) -> dict[str, Any]:
    """The contents of eval_history.json."""
    return {"run_name": config.run_name, "wandb_run_id": book["wandb_run_id"], "config": config.to_dict(),
            "provenance": book["sessions"], "history": book["eval_history"]}


def _checkpoint(trainer: Trainer, book: dict[str, Any], run_dir: RunDirectory, lock: RunLock,
                clock_origin: float) -> float:
    """Save the training state and the bookkeeping, its training time counted up to now from ``clock_origin``,
    then eval_history.json (the history may lag the checkpoint, never lead it); return the time the save ended."""
    book["train_seconds"] = time.monotonic() - clock_origin
    run_dir.save_checkpoint({**trainer.state_dict(), **book}, trainer.num_timesteps, trainer.config.keep_checkpoints)
    run_dir.write_history(_history_record(trainer.config, book))
    lock.heartbeat()
    return time.monotonic()


def _above(score: float, stop_return: float | None) -> bool:
    """Whether an evaluation's mean ``score`` stops the run (None: no early stop)."""
    return stop_return is not None and score > stop_return


def _next_multiple(step: int, interval: int) -> int:
    """The first multiple of ``interval`` after ``step``."""
    return (step // interval + 1) * interval


def train(config: TrainConfig, show_progress: bool = True) -> RunResult:
    """Train (or resume) the run (config.algo, config.seed) in ``<runs_dir>/<algo>_seed-<seed>``.

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
    check_resumable(run_dir.saved_config(), config, run_dir.path)
    run_dir.create()
    lock = RunLock(run_dir.path)
    lock.acquire()
    with contextlib.ExitStack() as cleanup:  # undone in the reverse order, whether the session ends or fails
        cleanup.callback(lock.release)
        state, saved_record = run_dir.resume(config)
        if state is None and saved_record is not None and saved_record.get("history"):
            return _report_without_checkpoint(saved_record, run_dir)
        book = _bookkeeping(state, saved_record)
        trainer = Trainer(config, device)
        cleanup.callback(trainer.close)
        if state is not None:
            trainer.load_state_dict(state)
        session = session_provenance(device, config.env_threads, trainer.num_timesteps)
        book["sessions"].append(session)
        start = f"resuming from step {trainer.num_timesteps:,}" if state is not None else "starting"
        print(f"{config.run_name}: {start} on {device} ({session['device_name']})", file=sys.stderr)
        metrics_log = MetricsLog(run_dir.path / METRICS_FILE)
        # Lines logged after the checkpoint belong to work that is about to be redone.
        metrics_log.drop_after(trainer.num_timesteps if state is not None else -1)
        run_dir.write_history(_history_record(config, book))
        tracker = Tracker(config.run_name, book["wandb_run_id"], config.to_dict(), config.runs_dir, metrics_log)
        # A session that ends in an exception shows as failed in W&B; one stopped by Ctrl-C does not.
        cleanup.push(lambda failure, *_: tracker.finish(exit_code=int(failure not in (None, KeyboardInterrupt))))
        bar = progress_bar(total=config.total_timesteps, initial=min(trainer.num_timesteps, config.total_timesteps),
                           desc=config.run_name, unit="step", unit_scale=True, disable=not show_progress)
        if book["eval_history"]:
            bar.set_postfix_str(f"eval {mean_return(book['eval_history'][-1]):.1f}", refresh=False)
        with StopRequest() as stop, bar:
            stop_reason = _train_loop(trainer, book, run_dir, lock, tracker, bar, stop)  # a stop signal: checkpoint
        if stop_reason == "stopped by SIGINT":  # Ctrl-C, or a notebook's interrupt: stop what would come next, too
            raise KeyboardInterrupt(f"{config.run_name}: stopped and saved at step {trainer.num_timesteps:,}")
        return RunResult(run_dir.path, trainer.num_timesteps, book["eval_history"], stop_reason, tracker.url,
                         book["wandb_run_id"])


def _train_loop(trainer: Trainer, book: dict[str, Any], run_dir: RunDirectory, lock: RunLock, tracker: Tracker,
                bar: tqdm, stop: StopRequest) -> str:
    """Train until the budget is spent, an evaluation exceeds ``stop_return`` or a stop signal; return why."""
    cfg, history = trainer.config, book["eval_history"]
    if history and _above(mean_return(history[-1]), cfg.stop_return):
        return "stop_return"
    next_eval = _next_multiple(history[-1]["step"], cfg.eval_interval) if history else 0
    next_snapshot = _next_multiple(trainer.num_timesteps - 1, cfg.snapshot_interval)
    snapshot_step = None  # the step of this session's newest snapshot
    log_every = max(1, LOG_INTERVAL // cfg.batch_size)
    window: list[dict[str, float]] = []  # the statistics of the updates since the last log line
    # train_seconds counts on from the saved total: it is the time since this (shifted) origin.
    clock_origin = time.monotonic() - book["train_seconds"]
    last_save = log_time = time.monotonic()
    log_steps = trainer.num_timesteps
    while True:
        if trainer.num_timesteps >= next_snapshot:
            run_dir.save_snapshot(trainer.snapshot(), trainer.num_timesteps)
            snapshot_step, next_snapshot = trainer.num_timesteps, _next_multiple(trainer.num_timesteps,
                                                                                 cfg.snapshot_interval)
        budget_spent = trainer.num_timesteps >= cfg.total_timesteps
        if trainer.num_timesteps >= next_eval or (budget_spent and history[-1]["step"] != trainer.num_timesteps):
            seconds = round(time.monotonic() - clock_origin, 3)  # trained before this evaluation
            record = trainer.evaluate(len(history))
            record.update(time=round(time.time(), 3), train_seconds=seconds)
            history.append(record)
            next_eval = _next_multiple(trainer.num_timesteps, cfg.eval_interval)
            score = mean_return(record)
            tracker.log(evaluation_metrics(record), trainer.num_timesteps)
            last_save = _checkpoint(trainer, book, run_dir, lock, clock_origin)
            bar.set_postfix_str(f"eval {score:.1f}", refresh=False)
            if _above(score, cfg.stop_return):
                stop_reason = "stop_return"
                break
        if budget_spent:
            stop_reason = "total_timesteps"
            break
        window.append(trainer.train_iteration())
        bar.update(cfg.batch_size)
        if trainer.n_updates % log_every == 0:
            now = time.monotonic()
            metrics = {f"losses/{key}": value for key, value in finite_means(window).items()}
            window = []
            metrics["charts/fps"] = (trainer.num_timesteps - log_steps) / max(now - log_time, 1e-9)
            if trainer.episode_returns:
                metrics["charts/episode_return"] = float(np.mean(trainer.episode_returns))
                metrics["charts/episode_length"] = float(np.mean(trainer.episode_lengths))
            tracker.log(metrics, trainer.num_timesteps)
            log_time, log_steps = now, trainer.num_timesteps
            lock.heartbeat()
        # A timed save is skipped when an evaluation (which checkpoints) comes next at this very step:
        # rewriting checkpoint-<step>.pt in place is what a synced folder such as Drive may lose.
        evaluates_next = trainer.num_timesteps >= min(next_eval, cfg.total_timesteps)
        if stop.requested or (time.monotonic() - last_save >= cfg.checkpoint_interval_s and not evaluates_next):
            last_save = _checkpoint(trainer, book, run_dir, lock, clock_origin)
            if stop.requested:
                return f"stopped by {stop.received.name}"
    if snapshot_step != trainer.num_timesteps:  # the final weights, unless the schedule just saved them
        run_dir.save_snapshot(trainer.snapshot(), trainer.num_timesteps)
    return stop_reason
