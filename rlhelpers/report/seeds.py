"""Do the report's answers hold on five seeds? Each run's score S and two arms' difference of mean scores,
with a percentile-bootstrap interval over seeds, as the five-seed section's predictions define them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rlhelpers.report.plotting import held_returns
from rlhelpers.runner.records import RunRecord

SCORE_UNTIL = 7_200_000  # the last step every run of the report reaches (a2c_seed-0 stopped there)
RESAMPLES = 10_000
BOOTSTRAP_SEED = 0


def seed_score(record: RunRecord, until: int = SCORE_UNTIL) -> float | None:
    """S: the mean of the run's evaluation means at every evaluation step from 0 to ``until`` (a run that
    stopped early above its stop return holds its last evaluation); None while the run has not got there."""
    steps = range(0, until + 1, int(record.config["eval_interval"]))
    held = held_returns(record, steps)
    if len(held) < len(steps):
        return None
    return float(np.mean([np.mean(returns) for returns in held.values()]))


@dataclass(frozen=True)
class Difference:
    """Δ(X, Y), the difference of two arms' mean scores, its bootstrap interval [low, high], and
    ``p_greater``, the share of seed pairs (one of X, one of Y) in which X scores higher."""

    delta: float
    low: float
    high: float
    p_greater: float

    @property
    def above_zero(self) -> bool:
        """Whether the whole interval lies above 0."""
        return self.low > 0


def difference(x: Sequence[float], y: Sequence[float], resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED,
               level: float = 0.95) -> Difference:
    """Δ(X, Y) of the seed scores ``x`` and ``y`` with its ``level`` percentile-bootstrap interval: each of
    ``resamples`` draws resamples each arm's seeds with replacement (a generator seeded with ``seed``)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    rng = np.random.default_rng(seed)
    deltas = (rng.choice(x, size=(resamples, len(x))).mean(axis=1)
              - rng.choice(y, size=(resamples, len(y))).mean(axis=1))
    low, high = np.quantile(deltas, [(1 - level) / 2, (1 + level) / 2])
    return Difference(float(x.mean() - y.mean()), float(low), float(high),
                      float(np.mean(x[:, None] > y[None, :])))
