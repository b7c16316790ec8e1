"""A run's training games (games.jsonl), scored as a course grades them: ``reward_mean_100``, each env's mean over
its last 100 games averaged over the envs, beside the mean of the last 100 games pooled over the envs."""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

import numpy as np

from rlhelpers.runner.store import GAMES_FILE, RunRecord, read_metrics

LAST_GAMES = 100


class TrainingScore(NamedTuple):
    """The training score at ``step``: ``reward_mean_100`` (by env, then averaged over the envs) and ``pooled`` (the
    last 100 games of all envs), from the ``games`` games that had ended by then."""

    step: int
    reward_mean_100: float
    pooled: float
    games: int


def training_score(record: RunRecord, step: int | None = None) -> TrainingScore | None:
    """The run's training score at ``step`` (default: its last logged games), from its games.jsonl alone; None
    without one, or before each of its ``n_envs`` envs has ended a game."""
    lines = [line for line in read_metrics(record.path / GAMES_FILE) if step is None or line["global_step"] <= step] \
        if record.path is not None else []
    games = [(int(env), float(score)) for line in lines for env, score, _ in line["games"]]
    by_env: list[deque[float]] = [deque(maxlen=LAST_GAMES) for _ in range(record.config.get("n_envs") or 0)]
    for env, score in games:
        by_env[env].append(score)
    if not by_env or not all(by_env):
        return None
    pooled = [score for _, score in games[-LAST_GAMES:]]
    return TrainingScore(lines[-1]["global_step"], float(np.mean([np.mean(scores) for scores in by_env])),
                         float(np.mean(pooled)), len(games))
