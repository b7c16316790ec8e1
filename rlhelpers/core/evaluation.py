"""Evaluation: complete episodes with the stochastic policy on a separate vector env, and the
statistics that every reader of an evaluation history (``{"step", "returns", "lengths"}`` records)
computes from it."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from gymnasium.vector import VectorEnv

from rlhelpers.core.networks import ActorCritic, sample_actions


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
    on_episode: Callable[[], None] | None = None,
) -> tuple[list[float], list[int]]:
    """Play ``n_episodes`` complete episodes with actions sampled from pi(.|s); return true scores and lengths.

    ``env`` must be an env from ``make_vec_env``; it is reset with ``seed``. Episodes are counted
    per env up to ``episode_targets``, in the order they finish; ``on_episode`` is called after each.
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
                    if on_episode is not None:
                        on_episode()
    return returns, lengths


def mean_and_sem(returns: list[float]) -> tuple[float, float]:
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


# Helpers on raw eval_history.json dicts, kept only because report/results.py and report/findings.py import
# them from here: rlhelpers.report.records.RunRecord's stopped_early() and finished() replace the first two.
# Once those modules read RunRecords, delete these three (history_divergence moving to records.py).

def stopped_early(record: dict[str, Any], stop_return: float | None = None) -> bool:
    """Whether an eval_history.json record's last evaluation exceeded ``stop_return`` (default: the
    record's own): the run stopped there and its policy is frozen."""
    history = record.get("history") or []
    stop = stop_return if stop_return is not None else record.get("config", {}).get("stop_return")
    return bool(history) and stop is not None and mean_return(history[-1]) > stop


def history_finished(record: dict[str, Any], total_timesteps: int | None = None,
                     stop_return: float | None = None) -> bool:
    """Whether an eval_history.json record shows its run done: the budget ``total_timesteps`` is spent
    or it stopped early at ``stop_return`` (both default to the record's own config)."""
    history = record.get("history") or []
    total = total_timesteps if total_timesteps is not None else record.get("config", {}).get("total_timesteps")
    return bool(history) and (stopped_early(record, stop_return)
                              or (total is not None and history[-1]["step"] >= total))


def history_divergence(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Where two eval_history.json records part: the last step up to which every common evaluation holds
    identical returns, and at each later common step the absolute gap between the two mean returns and
    the standard error of that gap, sqrt(se_1^2 + se_2^2)."""
    a = {p["step"]: p["returns"] for p in first["history"]}
    b = {p["step"]: p["returns"] for p in second["history"]}
    common = sorted(set(a) & set(b))
    last_identical = None
    for step in common:
        if a[step] != b[step]:
            break
        last_identical = step
    gap, gap_sem = {}, {}
    for step in (s for s in common if last_identical is None or s > last_identical):
        (mean_a, sem_a), (mean_b, sem_b) = mean_and_sem(a[step]), mean_and_sem(b[step])
        gap[int(step)], gap_sem[int(step)] = abs(mean_a - mean_b), math.hypot(sem_a, sem_b)
    return {"last_identical_step": last_identical, "identical_steps": sum(a[s] == b[s] for s in common),
            "common_steps": len(common), "mean_gap": gap, "gap_sem": gap_sem}
