"""An arm's runs and the statistics read from their evaluations: the curve over seeds and each run's held returns
(a run that stopped early above its stop return holds its last evaluation), shared by the figures and the claims."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from rlhelpers.core.evaluation import Evaluation, mean_and_sem
from rlhelpers.runner.store import RunRecord


@dataclass
class ArmCurve:
    """One arm's curve over its seeds, with held evaluations of the seeds that stopped early."""

    steps: np.ndarray
    means: np.ndarray
    sems: np.ndarray


def arm_curve(records: Sequence[RunRecord]) -> ArmCurve:
    """Mean and standard error (std with ddof=1 over the pooled episodes / sqrt(n)) over the pooled
    episodes of all seeds at each evaluation step; for one run, its own curve.

    A seed that stopped early keeps contributing its last evaluation at later steps (its policy no
    longer changes), and a step that not every seed evaluated (seeds trained with different
    evaluation intervals) is left out, so no point silently becomes the mean of fewer seeds. The curve
    ends at the last step that every seed still training has reached.
    """
    stopped = {r.name: r.last.step for r in records if r.last is not None and r.stopped_early()}
    ends = [r.last.step for r in records if r.last is not None and r.name not in stopped]
    end = min(ends) if ends else max(stopped.values())
    all_steps = sorted({e.step for r in records for e in r.evaluations if e.step <= end})
    seed_returns = [held_returns(record, all_steps) for record in records]
    by_step = {step: [ret for returns in seed_returns for ret in returns[step]] for step in all_steps
               if all(step in returns for returns in seed_returns)}
    stats = [mean_and_sem(pooled) for pooled in by_step.values()]
    return ArmCurve(np.array(list(by_step)), np.array([m for m, _ in stats]), np.array([e for _, e in stats]))


def last_evaluation(record: RunRecord) -> Evaluation:
    """The run's newest evaluation: the curves and tables take runs that have one (``runs_by_arm``)."""
    if record.last is None:
        raise ValueError(f"run {record.name} has no evaluation yet")
    return record.last


def runs_by_arm(records: Iterable[RunRecord], arms: Iterable[str]) -> dict[str, list[RunRecord]]:
    """The runs of each of ``arms`` (an algorithm, or ``<algo>-<variant>``) among ``records`` that have an
    evaluation, by seed: the seeds of a curve."""
    evaluated = [r for r in records if r.evaluations]
    return {arm: sorted((r for r in evaluated if r.arm == arm), key=lambda r: r.seed) for arm in arms}


def held_returns(record: RunRecord, steps: Iterable[int]) -> dict[int, tuple[float, ...]]:
    """One run's evaluation returns at each of ``steps`` that it evaluated, and, once it stopped early,
    its last evaluation held at the later ones (its policy no longer changes)."""
    points = {e.step: e.returns for e in record.evaluations}
    held = record.last if record.stopped_early() else None
    returns = {}
    for step in map(int, steps):
        if step in points:
            returns[step] = points[step]
        elif held is not None and step > held.step:
            returns[step] = held.returns
    return returns


def mean_of_means(record: RunRecord, steps: Sequence[int]) -> float | None:
    """The mean of the run's evaluation means at ``steps`` (``held_returns``: a run that stopped early
    holds its last evaluation); None unless it has one at each of them."""
    held = held_returns(record, steps)
    if len(held) < len(steps):
        return None
    return float(np.mean([np.mean(returns) for returns in held.values()]))
