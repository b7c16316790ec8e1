"""Evaluation plays a fixed number of episodes on every env (so that short episodes are not favoured), samples
its actions from the policy, and seeds its own envs afresh each time."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from rlhelpers.core.envs import make_vec_env
from rlhelpers.core.evaluation import evaluate_policy
from rlhelpers.core.networks import build_model
from rlhelpers.core.trainer import Trainer
from rlhelpers.runner.config import EVAL_SEED_OFFSET, TrainConfig
from rlhelpers.runner.run import resolve_config


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
# gymnasium's EnvCreator protocol admits only factories of **kwargs, not an env class with fixed parameters, which
# gym.make calls with the registered kwargs alone: a valid entry point that its types refuse.
gym.register(TWO_SPEED_ENV, entry_point=TwoSpeedEnv)  # type: ignore[arg-type]  # EnvCreator wants **kwargs


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


def test_evaluation_splits_the_episodes_evenly_the_later_envs_taking_the_extra_ones() -> None:
    """Envs 0 and 2 play 2-step episodes, envs 1 and 3 12-step ones: 7 episodes are 1, 2, 2 and 2 of them."""
    env = make_vec_env(TWO_SPEED_ENV, 4)
    try:
        _, lengths = evaluate_policy(build_model((1,), 2, "a2c"), env, n_episodes=7, seed=0, device=torch.device("cpu"))
    finally:
        env.close()
    assert sorted(lengths) == [2, 2, 2, 12, 12, 12, 12]


class ActionRewardEnv(gym.Env):
    """One-step episodes whose reward is the action taken (0 or 1); every seeded reset is logged in ``seeds``."""

    observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)
    seeds: list[int] = []

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if seed is not None:
            ActionRewardEnv.seeds.append(seed)
        return np.zeros(1, np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        return np.zeros(1, np.float32), float(action), True, False, {}


ACTION_REWARD_ENV = "rlhelpers-test/ActionReward-v0"
gym.register(ACTION_REWARD_ENV, entry_point=ActionRewardEnv)  # type: ignore[arg-type]  # EnvCreator wants **kwargs


def action_reward_returns(greedy: bool) -> list[float]:
    """400 episodes of ``ACTION_REWARD_ENV`` with pi(1|s) = 0.75: each return is the action taken."""
    torch.manual_seed(0)
    model = build_model((1,), 2, "a2c")
    head = model.policy_head
    assert isinstance(head, torch.nn.Linear)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.copy_(torch.tensor([0.0, np.log(3.0)]))
    env = make_vec_env(ACTION_REWARD_ENV, 4)
    try:
        returns, _ = evaluate_policy(model, env, n_episodes=400, seed=0, device=torch.device("cpu"), greedy=greedy)
    finally:
        env.close()
    assert len(returns) == 400
    return returns


def test_evaluation_samples_actions_from_the_policy() -> None:
    """pi(1|s) = 0.75: sampled actions score 0.75 on average; the greedy action would score 1 every time."""
    assert 0.68 < np.mean(action_reward_returns(greedy=False)) < 0.82  # 0.75 ± 3 standard errors


def test_greedy_evaluation_plays_the_most_likely_action() -> None:
    assert action_reward_returns(greedy=True) == [1.0] * 400


def test_each_evaluation_plays_newly_seeded_episodes_on_its_own_envs() -> None:
    """Evaluation seeds start at EVAL_SEED_OFFSET, move on with every evaluation and never touch the training envs."""
    trainer = Trainer(*resolve_config(TrainConfig(algo="a2c", env_id=ACTION_REWARD_ENV, seed=7, n_envs=4,
                                                  n_eval_envs=2, n_eval_episodes=2, device="cpu",
                                                  wandb_mode="disabled")))
    try:
        assert ActionRewardEnv.seeds[-4:] == [7, 8, 9, 10]  # the training envs
        ActionRewardEnv.seeds.clear()
        trainer.evaluate(0)
        trainer.evaluate(1)
        assert trainer.eval_env not in trainer.envs
    finally:
        trainer.close()
    first = 7 + EVAL_SEED_OFFSET
    assert ActionRewardEnv.seeds == [first, first + 1, first + 2, first + 3]  # no training env was reset
