"""Plumbing on the real PongNoFrameskip-v4: shapes, dtypes, score ranges (not learning)."""

import json

import numpy as np
import pytest
import torch

from rlhelpers.config import TrainConfig, resolve_config
from rlhelpers.run import train
from rlhelpers.trainer import Trainer


def test_pong_env_and_buffer_shapes() -> None:
    trainer = Trainer(*resolve_config(TrainConfig(algo="task1", n_envs=2, device="cpu")))
    try:
        assert trainer.env.single_observation_space.shape == (4, 84, 84)
        assert trainer.n_actions == 6
        trainer.train_iteration()
        obs = trainer.buffer.observations
        assert obs.dtype == torch.uint8 and obs.shape == (5, 2, 4, 84, 84)
        assert obs.max() > 0  # real frames, not zeros
        assert set(trainer.buffer.rewards.unique().tolist()) <= {-1.0, 0.0, 1.0}
    finally:
        trainer.close()


@pytest.mark.parametrize("algo", ["a2c", "task1", "task2"])
def test_pong_smoke_run(algo: str, tmp_path) -> None:
    config = TrainConfig(algo=algo, total_timesteps=2_000, n_envs=4, eval_interval=2_000, n_eval_episodes=1,
                         n_eval_envs=1, runs_dir=str(tmp_path), wandb_mode="offline", device="cpu")
    result = train(config, show_progress=False)
    assert result.num_timesteps == 2_000
    saved = json.loads((tmp_path / f"{algo}_seed-0" / "eval_history.json").read_text())
    assert [p["step"] for p in saved["history"]] == [0, 2_000]
    for point in saved["history"]:
        assert len(point["returns"]) == 1
        score = point["returns"][0]
        assert -21 <= score <= 21 and score == int(score)  # a true game score, not a clipped sum
        assert score < 0  # an untrained policy loses a game of Pong
        assert point["lengths"][0] > 0
    assert np.isfinite([p["returns"] for p in saved["history"]]).all()
