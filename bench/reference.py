"""The reference design: A2C on Pong written the way a course notebook does it.

Not part of ``rlhelpers``: a yardstick for ``bench.throughput``. gymnasium's ``AsyncVectorEnv`` of
``gym.make`` + ``AtariPreprocessing`` + ``FrameStackObservation`` envs (one process each), a
forward pass per step to pick actions, per-env Python lists as the rollout buffer stacked at the
end, a per-env Python loop for the n-step returns, then one A2C update with ``torch.optim.RMSprop``
(a second forward pass over the whole rollout). On a GPU (``device``) it moves each batch there as such a
notebook does, and reads every value back as it is needed.

It measures speed only; do not learn from it. It keeps gymnasium's default NEXT_STEP autoreset and
stores the reset step after an episode end (last observation, ignored action, reward 0) as if it were
a transition, and its frame stack pads with copies rather than zeros: the course-notebook pitfalls
that ``rlhelpers.core.envs`` avoids.
"""

from __future__ import annotations

from typing import cast

import ale_py
import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation
from torch import nn

gym.register_envs(ale_py)


def make_env(env_id: str) -> gym.Env:
    """One preprocessed Atari env: no-op starts, frame skip 4 with max-pooling, 84x84 grey, 4 frames."""
    env = gym.make(env_id)
    env = AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84, terminal_on_life_loss=False)
    return FrameStackObservation(env, 4)


class ReferenceNet(nn.Module):
    """Nature-DQN encoder with a policy head and a value head, default PyTorch initialisation."""

    def __init__(self, n_actions: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(4, 32, 8, stride=4), nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(),
            nn.Flatten(), nn.Linear(64 * 7 * 7, 512), nn.ReLU(),
        )
        self.policy = nn.Linear(512, n_actions)
        self.value = nn.Linear(512, 1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits and V(s) of uint8 frames."""
        features = self.body(obs.float() / 255.0)
        return self.policy(features), self.value(features).squeeze(-1)


class ReferenceA2C:
    """The straightforward learner: collect ``n_steps`` in every env, then one update."""

    def __init__(self, env_id: str, n_envs: int, n_steps: int, seed: int = 0, device: str = "cpu") -> None:
        self.env = gym.vector.AsyncVectorEnv([lambda: make_env(env_id) for _ in range(n_envs)])
        self.n_envs, self.n_steps, self.gamma, self.device = n_envs, n_steps, 0.99, torch.device(device)
        torch.manual_seed(seed)
        self.net = ReferenceNet(int(cast(gym.spaces.Discrete, self.env.single_action_space).n)).to(self.device)
        self.optimizer = torch.optim.RMSprop(self.net.parameters(), lr=7e-4, alpha=0.99, eps=1e-5)
        self.obs, _ = self.env.reset(seed=seed)

    def train_iteration(self) -> float:
        """Collect one rollout and update on it; returns the loss."""
        obs_lists: list[list[np.ndarray]] = [[] for _ in range(self.n_envs)]
        action_lists: list[list[np.int64]] = [[] for _ in range(self.n_envs)]
        reward_lists: list[list[np.float64]] = [[] for _ in range(self.n_envs)]
        done_lists: list[list[np.bool_]] = [[] for _ in range(self.n_envs)]
        for _ in range(self.n_steps):
            with torch.no_grad():
                logits, _ = self.net(torch.tensor(self.obs, device=self.device))
            actions = torch.distributions.Categorical(logits=logits).sample().cpu().numpy()
            next_obs, rewards, terminated, truncated, _ = self.env.step(actions)
            for i in range(self.n_envs):
                obs_lists[i].append(self.obs[i])
                action_lists[i].append(actions[i])
                reward_lists[i].append(np.sign(rewards[i]))
                done_lists[i].append(terminated[i] or truncated[i])
            self.obs = next_obs
        with torch.no_grad():
            _, last_values = self.net(torch.tensor(self.obs, device=self.device))
        return_list: list[float] = []
        for i in range(self.n_envs):
            running = float(last_values[i])
            env_returns = [0.0] * self.n_steps
            for t in reversed(range(self.n_steps)):
                running = reward_lists[i][t] + self.gamma * running * (1.0 - done_lists[i][t])
                env_returns[t] = running
            return_list.extend(env_returns)
        obs = torch.tensor(np.array([o for env_obs in obs_lists for o in env_obs]), device=self.device)
        actions = torch.tensor(np.array([a for env_actions in action_lists for a in env_actions]), device=self.device)
        returns = torch.tensor(return_list, dtype=torch.float32, device=self.device)
        logits, values = self.net(obs)
        log_probs = F.log_softmax(logits, dim=-1)
        advantages = (returns - values).detach()
        policy_loss = -(advantages * log_probs.gather(1, actions.unsqueeze(1)).squeeze(1)).mean()
        value_loss = F.mse_loss(values, returns)
        entropy = -(log_probs.exp() * log_probs).sum(-1).mean()
        loss = policy_loss + 0.25 * value_loss - 0.01 * entropy
        self.optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.net.parameters(), 0.5)
        self.optimizer.step()
        return loss.item()

    def close(self) -> None:
        """Stop the env worker processes."""
        self.env.close()
