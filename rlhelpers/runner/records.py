"""A run's records, read the one way that the plots, the status table, the re-score and publishing share.

``rlhelpers.runner.run`` writes them in the run directory: ``eval_history.json`` (run name, W&B run id,
config, provenance of each session and every evaluation) and ``metrics.jsonl`` (see
``rlhelpers.runner.metrics_log``). ``read_run`` and ``read_runs`` read back what the plots, tables and
publishing use of them as a ``RunRecord``: immutable, typed, and tolerant of runs saved by older versions (no
variant, no training seconds). The provenance and each evaluation's wall-clock ``time`` stay in the JSON.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlhelpers.core.evaluation import mean_and_sem
from rlhelpers.runner.checkpoint import RunDirectory
from rlhelpers.runner.config import parse_run_name
from rlhelpers.runner.files import HISTORY_FILE, METRICS_FILE
from rlhelpers.runner.metrics_log import read_metrics


@dataclass(frozen=True)
class Evaluation:
    """One evaluation of a history: the returns and lengths of its complete episodes at environment step
    ``step`` and the training seconds spent before it (None when the run was saved without them)."""

    step: int
    returns: tuple[float, ...]
    lengths: tuple[int, ...] = ()
    train_seconds: float | None = None

    @classmethod
    def from_dict(cls, point: dict[str, Any]) -> Evaluation:
        """An entry of eval_history.json's ``history``."""
        return cls(int(point["step"]), tuple(float(r) for r in point["returns"]),
                   tuple(int(n) for n in point.get("lengths", ())), point.get("train_seconds"))

    @property
    def mean(self) -> float:
        """Mean return over the episodes."""
        return mean_and_sem(self.returns)[0]

    @property
    def sem(self) -> float:
        """Standard error of the mean return: std with ddof=1 over sqrt(n) (0 for a single episode)."""
        return mean_and_sem(self.returns)[1]


@dataclass(frozen=True)
class RunRecord:
    """What a run's files say about it. ``config`` is the saved config as a dict (a run saved by an older
    version may lack fields); ``path`` is None for a record built from a dict alone."""

    name: str
    path: Path | None = None
    config: dict[str, Any] = field(default_factory=dict)
    evaluations: tuple[Evaluation, ...] = ()
    wandb_run_id: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any], path: str | os.PathLike | None = None) -> RunRecord:
        """The record of an eval_history.json's contents; its name defaults to the directory's."""
        path = Path(path) if path is not None else None
        return cls(name=data.get("run_name") or (path.name if path is not None else ""), path=path,
                   config=dict(data.get("config") or {}), wandb_run_id=data.get("wandb_run_id"),
                   evaluations=tuple(Evaluation.from_dict(point) for point in data.get("history") or []))

    @property
    def label(self) -> str:
        """What the run is a seed of: its algorithm, or ``<algo>-<variant>`` (its name without the seed)."""
        return parse_run_name(self.name)[0]

    @property
    def seed(self) -> int:
        """The run's seed, from its name."""
        return parse_run_name(self.name)[1]

    @property
    def last(self) -> Evaluation | None:
        """The newest evaluation, None before the first."""
        return self.evaluations[-1] if self.evaluations else None

    @property
    def best(self) -> Evaluation | None:
        """The evaluation with the highest mean return (the first of equals), None before the first."""
        return max(self.evaluations, key=lambda e: e.mean, default=None)

    def first_step_above(self, level: float) -> int | None:
        """The first evaluation step whose mean exceeds ``level``, None if none does."""
        return next((e.step for e in self.evaluations if e.mean > level), None)

    def stopped_early(self, stop_return: float | None = None) -> bool:
        """Whether the last evaluation exceeded ``stop_return`` (default: the run's own): the run stopped
        there and its policy is frozen."""
        stop = stop_return if stop_return is not None else self.config.get("stop_return")
        return self.last is not None and stop is not None and self.last.mean > stop

    def finished(self, total_timesteps: int | None = None, stop_return: float | None = None) -> bool:
        """Whether the run is done: its budget ``total_timesteps`` is spent or it stopped early at
        ``stop_return`` (both default to the run's own config)."""
        total = total_timesteps if total_timesteps is not None else self.config.get("total_timesteps")
        return self.last is not None and (self.stopped_early(stop_return)
                                          or (total is not None and self.last.step >= total))

    def metrics(self) -> list[dict[str, Any]]:
        """Every complete record of the run's metrics.jsonl, in file order ([] when there is none)."""
        return read_metrics(self.path / METRICS_FILE) if self.path is not None else []


def run_dirs(runs_dir: str | os.PathLike) -> list[Path]:
    """Every sub-directory of ``runs_dir`` that holds an eval_history.json, in name order."""
    return sorted(path.parent for path in Path(runs_dir).glob(f"*/{HISTORY_FILE}"))


def read_run(path: str | os.PathLike) -> RunRecord | None:
    """The record of the run directory ``path``, or None if it has no eval_history.json yet. An unreadable
    one raises ``RLHelpersError`` naming it and the remedy."""
    data = RunDirectory(path).read_history()
    return None if data is None else RunRecord.from_dict(data, path)


def read_runs(runs_dir: str | os.PathLike, seeds: Collection[int] | None = None) -> list[RunRecord]:
    """The records of every run directory under ``runs_dir`` (``run_dirs``), in name order; with ``seeds``,
    only the runs of those seeds (the report's prescribed parts use its own two)."""
    records = [read_run(path) for path in run_dirs(runs_dir)]
    return records if seeds is None else [record for record in records if record.seed in seeds]
