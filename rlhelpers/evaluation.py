"""Evaluation: complete episodes with the stochastic policy on a separate vector env."""

from __future__ import annotations

import numpy as np
import torch
from gymnasium.vector import VectorEnv

from rlhelpers.networks import ActorCritic, sample_actions


def episode_targets(n_episodes: int, n_envs: int) -> np.ndarray:
    """Episodes each env must finish so that the total is ``n_episodes`` and counts differ by at most one.

    Fixing the count per env in advance (rather than taking the first episodes to finish) keeps
    the sample from favouring short episodes.
    """
    return np.array([(n_episodes + i) // n_envs for i in range(n_envs)])


@torch.inference_mode()
def evaluate_policy(
    model: ActorCritic,
    env: VectorEnv,
    n_episodes: int,
    seed: int,
    device: torch.device,
) -> tuple[list[float], list[int]]:
    """Play ``n_episodes`` complete episodes with actions sampled from pi(.|s); return true scores and lengths.

    ``env`` must be an env from ``make_vec_env``; it is reset with ``seed``. Episodes are counted
    per env up to ``episode_targets``, in the order they finish.
    """
    targets = episode_targets(n_episodes, env.num_envs)
    counts = np.zeros(env.num_envs, dtype=np.int64)
    returns: list[float] = []
    lengths: list[int] = []
    obs, _ = env.reset(seed=seed)
    while (counts < targets).any():
        logits, _ = model(torch.as_tensor(obs, device=device))
        actions = sample_actions(logits)
        obs, _, _, _, info = env.step(actions.cpu().numpy())
        if "episode" in info:
            for i in np.flatnonzero(info["_episode"]):
                if counts[i] < targets[i]:
                    counts[i] += 1
                    returns.append(float(info["episode"]["r"][i]))
                    lengths.append(int(info["episode"]["l"][i]))
    return returns, lengths
