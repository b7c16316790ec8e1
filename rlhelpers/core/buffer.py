"""Rollout storage of shape (n_steps, n_envs, ...) on the training device, and n-step returns."""

from __future__ import annotations

import torch
from torch import Tensor


class RolloutBuffer:
    """Preallocated tensors for one rollout; observations keep their env dtype (uint8 for Atari)."""

    def __init__(
        self,
        n_steps: int,
        n_envs: int,
        obs_shape: tuple[int, ...],
        obs_dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        shape = (n_steps, n_envs)
        self.observations = torch.zeros(shape + tuple(obs_shape), dtype=obs_dtype, device=device)
        self.actions = torch.zeros(shape, dtype=torch.long, device=device)
        self.rewards = torch.zeros(shape, device=device)
        self.terminated = torch.zeros(shape, dtype=torch.bool, device=device)
        self.truncated = torch.zeros(shape, dtype=torch.bool, device=device)
        self.truncation_values = torch.zeros(shape, device=device)

    def returns(self, last_values: Tensor, gamma: float) -> Tensor:
        """n-step returns R_t of the stored rollout, computed backwards over its (n_steps, n_envs) steps.

        R_t = r_t + gamma * 0              if the episode terminated at t (a real end: nothing follows),
        R_t = r_t + gamma * V(s_final)     if it was truncated at t (a timeout: the critic stands in for
                                           the rest of the episode; ``truncation_values`` holds V(s_final)),
        R_t = r_t + gamma * R_{t+1}        otherwise, with R_n = ``last_values`` = V(s_n) after the rollout.
        """
        returns = torch.empty_like(self.rewards)
        next_return = last_values
        for t in reversed(range(self.rewards.shape[0])):
            continuation = torch.where(self.truncated[t], self.truncation_values[t], next_return)
            continuation = torch.where(self.terminated[t], torch.zeros_like(continuation), continuation)
            next_return = self.rewards[t] + gamma * continuation
            returns[t] = next_return
        return returns
