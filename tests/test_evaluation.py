"""Evaluation plays a fixed number of episodes on every env, so that short episodes are not favoured."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from rlhelpers.envs import make_vec_env
from rlhelpers.evaluation import episode_targets, evaluate_policy
from rlhelpers.networks import build_model


class TwoSpeedEnv(gym.Env):
    """Reward 1 per step; a seeded reset fixes the episode length: 2 steps for an even seed, 12 for an odd one."""

    observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)
    length = 2

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if seed is not None:
            self.length = 2 if seed % 2 == 0 else 12
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return np.zeros(1, np.float32), 1.0, self.t >= self.length, False, {}


TWO_SPEED_ENV = "rlhelpers-test/TwoSpeed-v0"
gym.register(TWO_SPEED_ENV, entry_point=TwoSpeedEnv)


def test_episode_targets_split_the_episodes_evenly() -> None:
    assert episode_targets(7, 3).tolist() == [2, 2, 3] and episode_targets(6, 2).tolist() == [3, 3]


def test_evaluation_takes_a_fixed_number_of_episodes_per_env() -> None:
    """Env 0 plays 2-step episodes, env 1 12-step ones: the first six to finish would all be short."""
    torch.manual_seed(0)
    env = make_vec_env(TWO_SPEED_ENV, 2)
    try:
        returns, lengths = evaluate_policy(build_model((1,), 2, "a2c"), env, n_episodes=6, seed=0,
                                           device=torch.device("cpu"))
    finally:
        env.close()
    assert sorted(lengths) == [2, 2, 2, 12, 12, 12]
    assert returns == [float(n) for n in lengths]
