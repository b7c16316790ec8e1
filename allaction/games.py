"""A run's training games (games.jsonl), scored as a course grades them: ``reward_mean_100``, each env's mean over
its last 100 games averaged over the envs, beside the mean of the last 100 games pooled over the envs; and the third
game's figure, its evaluations beside that training score and the course's bar."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from allaction.experiment import COURSE_FULL_MARK, COURSE_GOOD, PUBLISHED_SPACE_INVADERS
from allaction.results import markdown_table
from rlhelpers.plots import label_steps, save_figure
from rlhelpers.runner.store import GAMES_FILE, RunRecord, read_metrics

LAST_GAMES = 100


class TrainingScore(NamedTuple):
    """The training score at ``step``: ``reward_mean_100`` (by env, then averaged over the envs) and ``pooled`` (the
    last 100 games of all envs), from the ``games`` games that had ended by then."""

    step: int
    reward_mean_100: float
    pooled: float
    games: int


def training_scores(record: RunRecord) -> list[TrainingScore]:
    """The run's training score at each line of its games.jsonl from the first at which each of its ``n_envs`` envs
    has ended a game ([] without one)."""
    by_env: list[deque[float]] = [deque(maxlen=LAST_GAMES) for _ in range(record.config.n_envs or 0)]
    pooled: deque[float] = deque(maxlen=LAST_GAMES)
    scores, games = [], 0
    for line in read_metrics(record.path / GAMES_FILE) if record.path is not None else []:
        for env, score, _ in line.values["games"]:
            by_env[env].append(score)
            pooled.append(score)
            games += 1
        if all(by_env):
            scores.append(TrainingScore(line.global_step, float(np.mean([np.mean(s) for s in by_env])),
                                        float(np.mean(pooled)), games))
    return scores


def training_score(record: RunRecord, step: int | None = None) -> TrainingScore | None:
    """The run's training score at ``step`` (default: its last logged games), from its games.jsonl alone; None
    before each of its envs has ended a game."""
    return next((s for s in reversed(training_scores(record)) if step is None or s.step <= step), None)


def plot_third_game(records: Sequence[RunRecord], out: str | Path | None = None) -> Figure:
    """Each run's evaluation means (30 whole games) and its training score ``reward_mean_100`` against environment
    steps, with the course's two bars and a published A2C figure."""
    fig, ax = plt.subplots(figsize=(9, 4.2))
    for i, record in enumerate(records):
        color = f"C{i}"
        ax.plot([e.step for e in record.evaluations], [e.mean for e in record.evaluations], "o-", color=color,
                markersize=3, linewidth=1, label=f"{record.name}: evaluation (30 games)")
        scores = training_scores(record)
        ax.plot([s.step for s in scores], [s.reward_mean_100 for s in scores], "-", color=color, alpha=0.5,
                linewidth=1.5, label=f"{record.name}: reward_mean_100 (training)")
    value, source = PUBLISHED_SPACE_INVADERS
    for level, text, style in ((COURSE_FULL_MARK, "the course's full mark", "--"), (COURSE_GOOD, "its good", ":"),
                               (value, f"published A2C at 10M ({source})", "-.")):
        ax.axhline(level, color="0.35", linestyle=style, linewidth=0.9, label=f"{level:g}: {text}")
    label_steps(ax)
    ax.set_ylabel("game score")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title("SpaceInvadersNoFrameskip-v4: A2C, whole games in true points", fontsize=10)
    save_figure(fig, out, bottom=0.09, caption="Evaluation: the mean of 30 complete games with the stochastic policy. "
                "reward_mean_100: each training env's mean over its last 100 complete games, averaged over the envs.")
    return fig


def third_game_markdown(records: Sequence[RunRecord]) -> str:
    """Each run's steps, last evaluation, and training score at its last logged games: ``reward_mean_100`` as the
    course grades it and the pooled mean of the last 100 games, over how many games."""
    rows = []
    for record in records:
        score, last = training_score(record), record.last
        rows.append({"run": record.name, "steps": f"{last.step:,}" if last else "–",
                     "last evaluation (30 games)": f"{last.mean:.1f} ± {last.sem:.1f}" if last else "–",
                     "reward_mean_100": f"{score.reward_mean_100:.1f}" if score else "–",
                     "last 100 games, pooled": f"{score.pooled:.1f}" if score else "–",
                     "games": f"{score.games:,}" if score else "–"})
    return markdown_table(None, rows, empty="*No SpaceInvaders runs yet: they train after the Pong runs.*")
