"""A set of runs as one job: train or resume them N at a time, and report their state.

``run_campaign`` starts each unfinished run as its own ``python -m rlhelpers train``
process, logging to ``<runs_dir>/<run>/train.log``, and starts the next one when one ends. A run
that another live process trains (such as a child of a killed campaign, still checkpointing) is waited
for and then trained if it is still unfinished. A second campaign on the same runs directory exits at
once, so starting the campaign twice is harmless (one of another host, as before a Colab reconnect, is
waited for until its heartbeat is stale). SIGTERM or Ctrl-C stops the campaign: it passes SIGTERM to its
children, which checkpoint and exit; after Ctrl-C it raises KeyboardInterrupt. On Linux the children
also get SIGTERM if the campaign itself is killed. It returns 0 only when every run it was asked for is
over (finished, or stopped early above its stop return); otherwise it names the runs that are not and
returns 1, or 128 + the signal that stopped it. ``train_campaign`` is the entry of the CLI and of the
notebook's ``algo = "all"``: it checks the shared options once, then trains here (``cluster.submit_campaign``
submits the runs to SLURM instead). Each run trains as a child process (``start_training``,
``stop_training``), the one way the campaign and a SLURM job start and stop it.

``run_status`` reads only files (history, metrics log, lock), so it works beside a running campaign.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch
from tqdm import tqdm

from rlhelpers.core.envs import usable_cpus
from rlhelpers.core.errors import RLHelpersError
from rlhelpers.runner.config import GAME_SETTINGS, TrainConfig, arm_name, format_run_name
from rlhelpers.runner.run import StopRequest, device_name, progress_bar, resolve_config, say
from rlhelpers.runner.runlock import RunLock, holder
from rlhelpers.runner.store import CAMPAIGN_LOCK, TRAIN_LOG, MetricsLine, Provenance, RunRecord, read_run, run_dirs

RATE_WINDOW_S = 900.0  # status: steps/s over the last 15 minutes of logged metrics
WAIT_FOR_HOLDER = "waiting until it stops, then training it if it is unfinished"  # said of a run another process trains
PR_SET_PDEATHSIG = 1


class CampaignRun(NamedTuple):
    """One run a campaign trains: an algorithm, its variant ("" for none), a seed, and the hyperparameters the
    variant sets (``TrainConfig`` fields and values, in the order given)."""

    algo: str
    variant: str
    seed: int
    changes: tuple[tuple[str, Any], ...] = ()

    @property
    def name(self) -> str:
        return format_run_name(arm_name(self.algo, self.variant), self.seed)


def campaign_runs(arms: tuple[str, ...], seeds: tuple[int, ...],
                  changes: Mapping[str, Mapping[str, Any]] | None = None) -> list[CampaignRun]:
    """The runs of every arm (``<algo>`` or ``<algo>-<variant>``) with every seed, seed by seed, so that the runs
    finished at any time cover the arms evenly; ``changes``: the hyperparameters of each arm with a variant. An
    arm's algo and variant are checked with the rest of each run's config (``check_options``)."""
    if len(set(seeds)) != len(seeds) or len(set(arms)) != len(arms):
        raise RLHelpersError(f"each arm and seed once, got arms {' '.join(arms)} and seeds {' '.join(map(str, seeds))}")
    return [CampaignRun(algo, variant, seed, tuple((changes or {}).get(arm, {}).items())) for seed in seeds
            for arm in arms for algo, _, variant in [arm.partition("-")]]


def campaign_parallel(device: torch.device, n_runs: int, parallel: int | None = None) -> tuple[int, int]:
    """Runs trained at once and torch threads per run (0: the trainer's own choice) for ``n_runs`` runs on
    ``device``, with this process's usable cores (``usable_cpus``); a given ``parallel`` is kept.

    One run per core, at most the runs: two runs on 2 cores train faster together than one run with both, on a CPU
    (one torch thread each, the cores shared out) and beside a GPU that they share (bench/results.md,
    bench/results/)."""
    if parallel is not None and parallel < 1:
        raise RLHelpersError(f"parallel must be a positive integer, got {parallel!r}")
    cpus = usable_cpus()
    if parallel is None:
        parallel = max(1, min(cpus, n_runs))
    return parallel, max(1, cpus // parallel) if device.type == "cpu" and parallel > 1 else 0


@dataclass(frozen=True)
class RunStatus:
    """What the files of one run say about it: its record, and what the campaign makes of it."""

    record: RunRecord
    steps: int
    steps_per_s: float | None  # over the last RATE_WINDOW_S of its metrics
    eta_s: float | None  # seconds to the budget at that rate, while the run is running
    state: str
    over: bool  # done: its budget spent, or stopped early above its stop return (``RunRecord.finished``)


def _recent_rate(metrics: list[MetricsLine], session: Provenance | None) -> float | None:
    """Environment steps per second over the last RATE_WINDOW_S of the latest ``session``: from its start (its step
    and time) or a later line to its newest line. Lines before it, of an earlier session, do not count: between the
    two the run did not train."""
    start = [] if session is None else [MetricsLine(session.start_step, session.start_time, {})]
    lines = start + [line for line in metrics if session is None or line.global_step > session.start_step]
    if len(lines) < 2:
        return None
    first = last = lines[-1]
    for line in reversed(lines[:-1]):
        if line.global_step >= first.global_step or last.time - line.time > RATE_WINDOW_S:
            break  # a step that goes back is the start of a resumed session
        first = line
    elapsed = last.time - first.time
    return (last.global_step - first.global_step) / elapsed if elapsed > 0 else None


def run_status(run_dir: str | Path, total_timesteps: int | None = None, stop_return: float | None = None) -> RunStatus:
    """State of one run from its files: ``running``, ``finished``, ``stopped at > X``, ``paused`` or
    ``not started``. ``total_timesteps`` and ``stop_return`` default to the run's saved config."""
    path = Path(run_dir)
    record = read_run(path) or RunRecord(path.name, path)
    metrics = record.metrics()
    total, stop = record.setting("total_timesteps", total_timesteps), record.setting("stop_return", stop_return)
    steps = max([e.step for e in record.evaluations[-1:]] + [m.global_step for m in metrics[-1:]] + [0])
    over = record.finished(total, stop)
    if path.is_dir() and RunLock(path).live_owner() is not None:
        state = "running"
    elif record.stopped_early(stop):
        state = f"stopped at > {stop:g}"
    elif over:
        state = "finished"
    elif record.evaluations or metrics:
        state = "paused"
    else:
        state = "not started"
    rate = _recent_rate(metrics, record.sessions[-1] if record.sessions else None)
    eta = max(total - steps, 0) / rate if state == "running" and rate and total is not None else None
    return RunStatus(record, steps, rate, eta, state, over and state != "running")


def status_table(runs_dir: str | Path) -> str:
    """One line per run present: steps, last evaluation (mean ± s.e.), best, steps/s, ETA, state, and the game
    settings of any that has them. A ``runs_dir`` that does not exist is refused: a typo would read as no runs."""
    if not Path(runs_dir).is_dir():
        raise RLHelpersError(f"no runs directory {runs_dir}: pass the --runs-dir you trained in")
    names = [path.name for path in run_dirs(runs_dir)]
    width = max([15, *map(len, names)])
    lines = [f"{'run':<{width}} {'steps':>11} {'last eval':>14} {'best':>7} {'steps/s':>8} {'ETA':>7}  state"]
    for name in names:
        s = run_status(Path(runs_dir) / name)
        last = f"{s.record.last.mean:.2f} ± {s.record.last.sem:.2f}" if s.record.last is not None else "-"
        best = f"{s.record.best.mean:.2f}" if s.record.best is not None else "-"
        settings = [setting for setting in GAME_SETTINGS if getattr(s.record.config, setting)]
        rate = f"{s.steps_per_s:.0f}" if s.steps_per_s is not None and s.state == "running" else "-"
        eta = f"{int(s.eta_s) // 3600}h{int(s.eta_s) % 3600 // 60:02d}m" if s.eta_s is not None else "-"
        lines.append(f"{name:<{width}} {s.steps:>11,} {last:>14} {best:>7} {rate:>8} {eta:>7}  {s.state}"
                     + (f" ({', '.join(settings)})" if settings else ""))
    return "\n".join(lines)


def _die_with_parent() -> None:
    """In the child before exec: ask Linux to send SIGTERM when the parent dies (no-op elsewhere)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def start_training(run: CampaignRun, runs_dir: Path, train_args: list[str]) -> subprocess.Popen:
    """Start training ``run`` in ``runs_dir`` with the shared ``train_args``, logging to its train.log."""
    run_path = runs_dir / run.name
    run_path.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "rlhelpers", "train", "--algo", run.algo, "--seed", str(run.seed),
               *(["--variant", run.variant] if run.variant else []), "--runs-dir", str(runs_dir), *train_args,
               *command_line(dict(run.changes))]
    with open(run_path / TRAIN_LOG, "ab") as log:
        log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} campaign: {' '.join(command)}\n".encode())
        log.flush()
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=_die_with_parent)


def stop_training(processes: list[subprocess.Popen]) -> None:
    """Send SIGTERM to each of ``processes`` still running (each checkpoints and exits), then wait for all."""
    for process in processes:
        process.send_signal(signal.SIGTERM)  # Popen skips a process that has ended
    for process in processes:
        process.wait()


def _reap_ended(running: dict[CampaignRun, subprocess.Popen], runs_dir: Path, stopping: bool, failed: list[str],
                queue: list[CampaignRun]) -> None:
    """Forget the runs whose process ended, saying how. Add those that failed (not counting a stop) to ``failed``;
    put those whose process failed because another live process holds the run now back at the front of
    ``queue``, to be waited for."""
    for run, process in list(running.items()):
        if process.poll() is not None:
            del running[run]
            say(f"{run.name}: ended with exit code {process.returncode} (log: {runs_dir / run.name / TRAIN_LOG})")
            if process.returncode != 0 and not stopping:
                if RunLock(runs_dir / run.name).live_owner() is not None:
                    queue.insert(0, run)
                else:
                    failed.append(run.name)


def _statuses(config: TrainConfig, runs: list[CampaignRun]) -> list[RunStatus]:
    """``run_status`` of each of the campaign's ``runs``, against the campaign's budget and stop return."""
    return [run_status(Path(config.runs_dir) / run.name, config.total_timesteps, config.stop_return) for run in runs]


def ready_runs(queue: list[CampaignRun], config: TrainConfig, told: set[str], held_note: str) -> list[CampaignRun]:
    """Those of ``queue`` to start now, in order: neither over nor trained by another live process. Runs that are
    over leave the queue, said once; each run that another live process trains is said once (``told``), with
    ``held_note`` (what becomes of it)."""
    ready = []
    for run, status in zip(list(queue), _statuses(config, queue), strict=True):
        if status.over:
            queue.remove(run)
            say(f"{run.name}: {status.state}, skipped")
        elif status.state != "running":
            ready.append(run)
        elif run.name not in told and (owner := RunLock(Path(config.runs_dir) / run.name).live_owner()) is not None:
            told.add(run.name)
            say(f"{run.name}: trained by another process ({holder(owner)}); {held_note}")
    return ready


def _progress(config: TrainConfig, runs: list[CampaignRun]) -> tuple[int, str]:
    """The campaign bar's count and postfix: the environment steps done by ``runs`` (a run that is over counts
    as its whole budget), and how many are over."""
    statuses = _statuses(config, runs)
    done = sum(config.total_timesteps if s.over else min(s.steps, config.total_timesteps) for s in statuses)
    return done, f"{sum(s.over for s in statuses)}/{len(runs)} runs finished"


def _show_progress(bar: tqdm, config: TrainConfig, runs: list[CampaignRun]) -> None:
    if not bar.disable:
        done, postfix = _progress(config, runs)
        bar.set_postfix_str(postfix, refresh=False)
        bar.update(done - bar.n)


def _outcome(config: TrainConfig, runs: list[CampaignRun], failed: list[str], signum: int | None) -> int:
    """Say which runs are not over and return the exit code: 0 if all are, 128 + ``signum`` after a stop
    (KeyboardInterrupt after Ctrl-C), else 1."""
    left = ", ".join(f"{s.record.name} ({'trained by another process' if s.state == 'running' else s.state}, "
                     f"step {s.steps:,})" for s in _statuses(config, runs)
                     if not s.over and s.record.name not in failed)
    if signum is not None:
        say(f"stopped by {signal.Signals(signum).name}" +
             (f"; not finished: {left}; the same command resumes them" if left else ""))
        if signum == signal.SIGINT:  # Ctrl-C, or a notebook's interrupt: stop what would come next, too
            raise KeyboardInterrupt
        return 128 + signum
    if failed:
        print(f"failed: {', '.join(failed)}; see their train.log", file=sys.stderr)
    if left:
        print(f"not finished: {left}", file=sys.stderr)
    return 1 if failed or left else 0


def run_campaign(config: TrainConfig, runs: list[CampaignRun], train_args: list[str], parallel: int,
                 poll_s: float = 5.0, show_progress: bool = False) -> int:
    """Train or resume every one of ``runs`` that is not finished, ``parallel`` at a time, in their order; a run
    that another live process trains is waited for.

    ``config`` holds the options every run shares (its algo, variant and seed are ignored); ``train_args`` are
    the same options as command-line arguments for the children. With
    ``show_progress``, one bar counts the environment steps of all the runs and the runs finished.
    Returns 0 when every run is over, 128 + the signal after SIGTERM (KeyboardInterrupt after Ctrl-C),
    else 1, naming the runs that failed or are not over.
    """
    runs_dir = Path(config.runs_dir).resolve()
    runs_dir.mkdir(parents=True, exist_ok=True)
    lock = RunLock(runs_dir, file_name=CAMPAIGN_LOCK, what=f"the campaign lock of {runs_dir}")
    try:
        lock.acquire()  # a campaign of another host (a Colab VM before a reconnect) is waited for until it is stale
    except RLHelpersError:
        owner = lock.live_owner()
        if owner is None:
            raise
        print(f"a campaign is already running on {runs_dir} ({holder(owner)}); `python -m rlhelpers status` shows its "
              "runs")
        return _outcome(config, runs, [], None)
    queue = list(runs)
    running: dict[CampaignRun, subprocess.Popen] = {}
    failed: list[str] = []
    told: set[str] = set()
    try:
        # One bar over all the runs; what was done before this session is its starting point, so that its speed and
        # ETA are this session's.
        done, postfix = _progress(config, runs) if show_progress else (0, "")
        bar = progress_bar(total=len(runs) * config.total_timesteps, initial=done, desc="campaign", unit="step",
                           unit_scale=True, disable=not show_progress, postfix=postfix)
        with StopRequest((signal.SIGTERM, signal.SIGINT)) as stop, bar:
            while (queue and not stop.requested) or running:
                _reap_ended(running, runs_dir, stop.requested, failed, queue)
                ready = [] if stop.requested else ready_runs(queue, config, told, WAIT_FOR_HOLDER)
                for run in ready[:parallel - len(running)]:
                    queue.remove(run)
                    running[run] = start_training(run, runs_dir, train_args)
                    say(f"{run.name}: started (pid {running[run].pid})")
                if stop.requested:  # the children checkpoint and exit on SIGTERM
                    stop_training(list(running.values()))
                    continue
                lock.heartbeat()
                _show_progress(bar, config, runs)
                time.sleep(poll_s)
            _show_progress(bar, config, runs)
    finally:
        lock.release()
    return _outcome(config, runs, failed, stop.received)


def command_line(options: dict[str, Any]) -> list[str]:
    """``options`` (``TrainConfig`` fields) as ``train``'s command-line options: ``--n-envs 4``, ``--no-life-loss``."""
    return [part for name, value in options.items() for part in
            ((f"--{'' if value else 'no-'}{name.replace('_', '-')}",) if isinstance(value, bool)
             else (f"--{name.replace('_', '-')}", str(value)))]


def check_options(options: dict[str, Any],
                  runs: list[CampaignRun]) -> tuple[dict[str, Any], TrainConfig, torch.device]:
    """Check the shared ``options`` (``TrainConfig`` fields) for every one of ``runs`` before anything starts:
    one error for a bad value, not one failed run after another. Returns the options every run shares (None
    leaves a field at its default; each run sets its own algo, variant, seed and changes), and the last run's
    resolved config and device (``resolve_config``)."""
    options = {name: value for name, value in options.items() if value is not None and name not in CampaignRun._fields}
    for run in runs:
        config, device = resolve_config(TrainConfig(**{**options, **dict(run.changes)}, algo=run.algo,
                                                    variant=run.variant, seed=run.seed))
    return options, config, device


def train_campaign(options: dict[str, Any], runs: list[CampaignRun], parallel: int | None = None,
                   show_progress: bool = False) -> int:
    """Train or resume every unfinished one of ``runs`` (``campaign_runs``), in their order, with the shared
    ``options`` (``TrainConfig`` fields, checked for every run before
    anything starts: ``check_options``), ``parallel`` at a time on this machine (default and torch threads per
    run: ``campaign_parallel``). Returns ``run_campaign``'s exit code. ``cluster.submit_campaign`` submits the
    same runs to SLURM instead.
    """
    options, config, device = check_options(options, runs)
    runs_at_once, torch_threads = campaign_parallel(device, len(runs), parallel)
    if torch_threads:
        options.setdefault("torch_threads", torch_threads)
    say(f"campaign: {len(runs)} runs, {runs_at_once} at a time on {device} ({device_name(device)})")
    return run_campaign(config, runs, train_arguments(options), runs_at_once, show_progress=show_progress)


def train_arguments(options: dict[str, Any]) -> list[str]:
    """The shared ``options`` as each run's ``train`` arguments; the runs directory goes to the children as an
    absolute path, apart."""
    return command_line({name: value for name, value in options.items() if name != "runs_dir"})
