"""The run around the algorithm: the per-metric running means it logs, and a config resolved once."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rlhelpers import config, run, trainer
from rlhelpers.config import TrainConfig
from rlhelpers.run import RunningMeans, train


def test_running_means_average_the_finite_values_of_each_metric() -> None:
    means = RunningMeans()
    means.add({"explained_variance": math.nan, "entropy": 1.0})
    means.add({"explained_variance": 0.5, "entropy": 2.0})
    means.add({"explained_variance": 0.25, "entropy": math.inf})
    assert means.pop() == {"entropy": 1.5, "explained_variance": 0.375}  # NaN and inf left out, not spread
    means.add({"explained_variance": math.nan})
    (only,) = means.pop().values()  # the window started afresh: nothing finite in it
    assert math.isnan(only)
    assert means.pop() == {}


def test_config_is_validated_and_its_device_resolved_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"validate": 0, "resolve_device": 0}
    for name in calls:
        original = getattr(config, name)

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
