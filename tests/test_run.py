"""The run around the algorithm: the per-metric means it logs, a config resolved once, and when it stops."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from test_trainer import EPISODE_STEPS, TERMINATING_ENV

from rlhelpers.core import trainer
from rlhelpers.runner import config, run
from rlhelpers.runner.config import TrainConfig
from rlhelpers.runner.run import finite_means, train


def test_finite_means_average_the_finite_values_of_each_metric() -> None:
    updates = [{"explained_variance": math.nan, "entropy": 1.0}, {"explained_variance": 0.5, "entropy": 2.0},
               {"explained_variance": 0.25, "entropy": math.inf}]
    assert finite_means(updates) == {"entropy": 1.5, "explained_variance": 0.375}  # NaN and inf left out, not spread
    (only,) = finite_means([{"explained_variance": math.nan}]).values()  # nothing finite in the window
    assert math.isnan(only)
    assert finite_means([]) == {}


def test_config_is_validated_and_its_device_resolved_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"validate": 0, "resolve_device": 0}
    for name in calls:
        original = getattr(config if name == "validate" else run, name)

        def counted(*args: object, _name: str = name, _original=original) -> object:  # noqa: ANN001
            calls[_name] += 1
            return _original(*args)

        for module in (config, trainer, run):  # wherever the name is bound
            if hasattr(module, name):
                monkeypatch.setattr(module, name, counted)
    result = train(TrainConfig(env_id="CartPole-v1", total_timesteps=40, n_envs=2, eval_interval=40, n_eval_episodes=1,
                               n_eval_envs=1, runs_dir=str(tmp_path), wandb_mode="disabled", device="auto"),
                   show_progress=False)
    assert result.num_timesteps == 40
    assert calls == {"validate": 1, "resolve_device": 1}


CARTPOLE: dict[str, Any] = dict(algo="a2c", env_id="CartPole-v1", n_envs=4, eval_interval=200, n_eval_episodes=2,
                                n_eval_envs=2, wandb_mode="disabled", device="cpu")


def test_a_run_that_passed_its_stop_return_is_not_trained_further(tmp_path: Path) -> None:
    """Its policy is what the report holds for the later steps; a larger budget must not move it."""
    settings = dict(CARTPOLE, stop_return=5.0, runs_dir=str(tmp_path))
    first = train(TrainConfig(total_timesteps=400, **settings), show_progress=False)
    assert (first.stop_reason, first.num_timesteps) == ("stop_return", 0)  # a random policy scores above 5
    again = train(TrainConfig(total_timesteps=2_000, **settings), show_progress=False)
    assert (again.stop_reason, again.num_timesteps, len(again.record.evaluations)) == ("stop_return", 0, 1)


def test_a_budget_off_the_evaluation_grid_still_ends_with_an_evaluation(tmp_path: Path) -> None:
    """As the report's 10M budget against evaluations every 300k: the last point is at the budget."""
    result = train(TrainConfig(total_timesteps=500, stop_return=1e9, runs_dir=str(tmp_path), **CARTPOLE),
                   show_progress=False)
    assert [e.step for e in result.record.evaluations] == [0, 200, 400, 500]


SCORE = EPISODE_STEPS  # reward 1 per step of episodes that end after EPISODE_STEPS steps: every mean is SCORE


@pytest.mark.parametrize(("stop_return", "expected"), [(SCORE - 0.5, ("stop_return", 0)),
                                                      (SCORE, ("total_timesteps", 400))])
def test_a_run_stops_once_its_mean_return_exceeds_stop_return_not_when_it_equals_it(
        tmp_path: Path, stop_return: float, expected: tuple[str, int]) -> None:
    settings = dict(CARTPOLE, env_id=TERMINATING_ENV, stop_return=stop_return, runs_dir=str(tmp_path))
    result = train(TrainConfig(total_timesteps=400, **settings), show_progress=False)
    assert (result.stop_reason, result.num_timesteps) == expected


def test_train_names_its_device_first_and_gives_torchs_thread_count_back(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """In a notebook's kernel the run's thread setting (one thread, say) must not slow the cells that follow."""
    torch.set_num_threads(2)
    try:
        train(TrainConfig(total_timesteps=40, torch_threads=1, runs_dir=str(tmp_path), **CARTPOLE), show_progress=False)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(1)
    first, where = capsys.readouterr().err.splitlines()[:2]
    assert first.startswith("a2c_seed-0: starting on cpu (")
    assert where.startswith(f"a2c_seed-0: {tmp_path / 'a2c_seed-0'}; W&B: disabled")  # the tracker's one line
