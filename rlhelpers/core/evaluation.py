"""Evaluation: complete episodes with the stochastic policy (or its greedy actions) on a separate vector env, and
one typed ``Evaluation`` of them that runs save and every reader of a run's history reads."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
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
    greedy: bool = False,
) -> tuple[list[float], list[int]]:
    """Play ``n_episodes`` complete episodes with actions sampled from pi(.|s), or with ``greedy`` the most likely
    action; return true scores and lengths.

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
        logits = model(torch.as_tensor(obs, device=device))[0]
        actions = logits.argmax(-1) if greedy else sample_actions(logits)
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


@dataclass(frozen=True)
class Evaluation:
    """One evaluation: the returns and lengths of its complete episodes at environment step ``step``, and once a
    run has saved it the wall-clock ``time`` and the training seconds spent before it (None in runs saved by
    versions that did not keep them)."""

    step: int
    returns: tuple[float, ...]
    lengths: tuple[int, ...] = ()
    time: float | None = None
    train_seconds: float | None = None

    @classmethod
    def from_dict(cls, point: dict[str, Any]) -> Evaluation:
        """An entry of a run's history, as ``to_dict`` writes it."""
        return cls(int(point["step"]), tuple(float(r) for r in point["returns"]),
                   tuple(int(n) for n in point.get("lengths", ())), point.get("time"), point.get("train_seconds"))

    def to_dict(self) -> dict[str, Any]:
        """The entry of a run's history: lists for the episodes, without the fields a run did not save."""
        return {name: list(value) if isinstance(value, tuple) else value
                for name, value in asdict(self).items() if value is not None}

    @property
    def mean(self) -> float:
        """Mean return over the episodes."""
        return mean_and_sem(self.returns)[0]

    @property
    def sem(self) -> float:
        """Standard error of the mean return: std with ddof=1 over sqrt(n) (0 for a single episode)."""
        return mean_and_sem(self.returns)[1]

    def metrics(self) -> dict[str, float]:
        """What the evaluation contributes to W&B and metrics.jsonl: mean, std (ddof 0) and mean length."""
        return {"eval/mean_return": self.mean, "eval/std_return": float(np.std(self.returns)),
                "eval/mean_length": float(np.mean(self.lengths))}
