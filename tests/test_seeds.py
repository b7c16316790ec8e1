"""The five-seed section's statistic: a run's score S and two arms' bootstrap difference, against hand-computed
values and the exact bootstrap distribution of small samples."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rlhelpers.report.seeds import difference, seed_score
from rlhelpers.runner.records import RunRecord


def run(means: list[float], every: int = 100, stop: float = 18.0) -> RunRecord:
    history = [{"step": i * every, "returns": [m - 1, m + 1]} for i, m in enumerate(means)]
    return RunRecord.from_dict({"run_name": "a2c_seed-200", "history": history,
                                "config": {"eval_interval": every, "stop_return": stop}})


def test_the_score_averages_the_evaluations_up_to_its_step_and_holds_a_stopped_run() -> None:
    assert seed_score(run([-21.0, -15.0, -3.0, 5.0, 20.0]), until=300) == pytest.approx((-21 - 15 - 3 + 5) / 4)
    assert seed_score(run([-21.0, 19.0]), until=300) == pytest.approx((-21 + 19 * 3) / 4)  # stopped at 100, held
    assert seed_score(run([-21.0, -15.0, -3.0]), until=300) is None  # still training, not at step 300 yet


def test_the_difference_of_two_small_arms_matches_the_exact_bootstrap() -> None:
    # x resampled: mean 0 (1/4), 1 (1/2), 2 (1/4); y is constant: the 2.5% and 97.5% points are 0 and 2
    found = difference([0.0, 2.0], [0.0])
    assert (found.delta, found.low, found.high, found.p_greater) == (1.0, 0.0, 2.0, 0.5)
    assert not found.above_zero


def test_the_interval_holds_95_percent_of_the_exact_bootstrap_distribution() -> None:
    x, y = [1.0, 2.0, 4.0, 8.0], [0.0, 3.0, 5.0]
    exact = np.array([np.mean(a) - np.mean(b) for a in itertools.product(x, repeat=4)
                      for b in itertools.product(y, repeat=3)])  # every resample, each equally likely
    found = difference(x, y)
    assert found.delta == pytest.approx(np.mean(x) - np.mean(y))
    assert np.mean(exact < found.low) <= 0.025 + 0.005 and np.mean(exact <= found.low) >= 0.025 - 0.005
    assert np.mean(exact > found.high) <= 0.025 + 0.005 and np.mean(exact >= found.high) >= 0.025 - 0.005
    assert found.p_greater == pytest.approx(7 / 12)  # 1>0; 4>0,3; 8>0,3,5; 2>0: 7 of the 12 pairs
    assert difference(x, y) == found and difference(x, y, seed=1) != found  # a fixed generator seed


def test_separated_arms_lie_above_zero_and_equal_ones_do_not() -> None:
    assert difference([5.0, 6.0, 7.0, 8.0, 9.0], [-3.0, -2.0, 0.0, 1.0, 2.0]).above_zero
    same = difference([1.0, 2.0, 3.0, 4.0, 5.0], [1.0, 2.0, 3.0, 4.0, 5.0])
    assert same.low < 0 < same.high and same.p_greater == pytest.approx(10 / 25)
