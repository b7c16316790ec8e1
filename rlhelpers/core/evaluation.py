"""Evaluation: complete episodes with the stochastic policy on a separate vector env, and the
statistics that every reader of an evaluation history (``{"step", "returns", "lengths"}`` records)
computes from it."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from gymnasium.vector import VectorEnv

from rlhelpers.core.networks import ActorCritic, sample_actions


@torch.inference_mode()
def evaluate_policy(
    model: ActorCritic,
    env: VectorEnv,
    n_episodes: int,
    seed: int,
    device: torch.device,
    on_episode: Callable[[], object] | None = None,
) -> tuple[list[float], list[int]]:
    """Play ``n_episodes`` complete episodes with actions sampled from pi(.|s); return true scores and lengths.

    ``env`` must be an env from ``make_vec_env``; it is reset with ``seed``. Each env finishes a number of
    episodes fixed in advance, so that the total is ``n_episodes`` and the counts differ by at most one (the
    later envs take the extra ones): taking the first episodes to finish would favour short episodes. They
    are counted in the order they finish; ``on_episode`` is called after each.
    """
    targets = np.array([(n_episodes + i) // env.num_envs for i in range(env.num_envs)])
    counts = np.zeros(env.num_envs, dtype=np.int64)
    returns, lengths = [], []
    obs, _ = env.reset(seed=seed)
    while (counts < targets).any():
        actions = sample_actions(model(torch.as_tensor(obs, device=device))[0])
        obs, _, _, _, info = env.step(actions.cpu().numpy())
        for i in np.flatnonzero(info.get("_episode", ())):  # the envs whose episode ended at this step
            if counts[i] < targets[i]:
                counts[i] += 1
                returns.append(float(info["episode"]["r"][i]))
                lengths.append(int(info["episode"]["l"][i]))
                if on_episode is not None:
                    on_episode()
    return returns, lengths


def mean_and_sem(returns: Sequence[float]) -> tuple[float, float]:
    """Mean of ``returns`` and its standard error (std with ddof=1 over sqrt(n); 0 for a single value)."""
    values = np.asarray(returns, dtype=float)
    sem = values.std(ddof=1) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return float(values.mean()), float(sem)


def mean_return(evaluation: dict[str, Any]) -> float:
    """Mean return of one evaluation (``{"step", "returns", "lengths", ...}``, an entry of a history)."""
    return float(np.mean(evaluation["returns"]))


def evaluation_metrics(evaluation: dict[str, Any]) -> dict[str, float]:
    """What one evaluation contributes to W&B and metrics.jsonl: mean, std (ddof 0) and mean length."""
    return {"eval/mean_return": mean_return(evaluation), "eval/std_return": float(np.std(evaluation["returns"])),
            "eval/mean_length": float(np.mean(evaluation["lengths"]))}
