"""n-step returns against values computed by hand."""

import torch

from rlhelpers.core.buffer import RolloutBuffer


def n_step_returns(rewards: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor,
                   truncation_values: torch.Tensor, last_values: torch.Tensor, gamma: float) -> torch.Tensor:
    """The returns of a buffer holding this (n_steps, n_envs) rollout."""
    n_steps, n_envs = rewards.shape
    buffer = RolloutBuffer(n_steps, n_envs, (1,), torch.uint8, torch.device("cpu"))
    buffer.rewards.copy_(rewards)
    buffer.terminated.copy_(terminated)
    buffer.truncated.copy_(truncated)
    buffer.truncation_values.copy_(truncation_values)
    return buffer.returns(last_values, gamma)


def test_n_step_returns_hand_computed() -> None:
    gamma = 0.9
    # 4 steps, 3 envs. env 0: no episode end; env 1: terminates at t=1; env 2: truncated at t=2.
    rewards = torch.tensor([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0], [3.0, 3.0, 3.0], [4.0, 4.0, 4.0]])
    terminated = torch.zeros(4, 3, dtype=torch.bool)
    truncated = torch.zeros(4, 3, dtype=torch.bool)
    terminated[1, 1] = True
    truncated[2, 2] = True
    truncation_values = torch.zeros(4, 3)
    truncation_values[2, 2] = 10.0  # V(s_final) of the timed-out episode
    last_values = torch.tensor([5.0, 6.0, 7.0])

    returns = n_step_returns(rewards, terminated, truncated, truncation_values, last_values, gamma)

    g = gamma
    expected = torch.tensor([
        # env 0: plain 4-step returns bootstrapped from V(s_4) = 5
        [1 + g * 2 + g**2 * 3 + g**3 * 4 + g**4 * 5, 1 + g * 2, 1 + g * 2 + g**2 * 3 + g**3 * 10],
        [2 + g * 3 + g**2 * 4 + g**3 * 5, 2.0, 2 + g * 3 + g**2 * 10],
        # env 1 restarted after t=1 and env 2 after t=2: their new episodes bootstrap from V(s_4)
        [3 + g * 4 + g**2 * 5, 3 + g * 4 + g**2 * 6, 3 + g * 10],
        [4 + g * 5, 4 + g * 6, 4 + g * 7],
    ])
    torch.testing.assert_close(returns, expected)


def test_termination_wins_over_truncation() -> None:
    ones = torch.ones(1, 1)
    flag = torch.ones(1, 1, dtype=torch.bool)
    returns = n_step_returns(ones, flag, flag, torch.full((1, 1), 100.0), torch.full((1,), 50.0), 0.99)
    torch.testing.assert_close(returns, ones)


def test_buffer_keeps_uint8_observations_and_computes_returns() -> None:
    buffer = RolloutBuffer(5, 2, (4, 84, 84), torch.uint8, torch.device("cpu"))
    assert buffer.observations.dtype == torch.uint8
    assert buffer.observations.shape == (5, 2, 4, 84, 84)
    buffer.rewards.fill_(1.0)
    returns = buffer.returns(torch.zeros(2), gamma=0.5)
    torch.testing.assert_close(returns[:, 0], torch.tensor([1.9375, 1.875, 1.75, 1.5, 1.0]))
