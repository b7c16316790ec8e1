"""The training games a run logs, by env, on a game with lives (SpaceInvaders: three, a lost life ending a training
episode): games.jsonl holds every whole game once, at the step a log line or checkpoint saw it end, and the metrics'
``charts/reward_mean_100`` (each env's mean over its last 100 games, then the mean over the envs) is recomputed from
it exactly, also across a resume."""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path

import builders
import numpy as np
import pytest

from rlhelpers.core.trainer import Trainer
from rlhelpers.runner import run
from rlhelpers.runner.config import TrainConfig, validate

SPACE_INVADERS = "SpaceInvadersNoFrameskip-v4"
LIVES = 3


def space_invaders(runs_dir: Path, total_timesteps: int) -> TrainConfig:
    return TrainConfig(env_id=SPACE_INVADERS, life_loss=True, n_envs=2, total_timesteps=total_timesteps,
                       eval_interval=10**7, n_eval_episodes=1, n_eval_envs=1, wandb_mode="disabled", device="cpu",
                       torch_threads=1, runs_dir=str(runs_dir))


def course_figure(games_log: list[dict], step: int, n_envs: int) -> float:
    """The course's reward_mean_100 at ``step``, from games.jsonl alone."""
    last_100: list[deque[float]] = [deque(maxlen=100) for _ in range(n_envs)]
    for line in games_log:
        if line["global_step"] <= step:
            for env, game_return, _ in line["games"]:
                last_100[env].append(game_return)
    return float(np.mean([np.mean(returns) for returns in last_100]))


def test_games_are_counted_whole_and_by_env_while_each_lost_life_ends_a_training_episode() -> None:
    trainer = Trainer(validate(space_invaders(Path("unused"), 10_000)))
    terminations = 0
    try:
        for _ in range(300):  # 1,500 steps per env: a game of an untrained policy lasts about 700
            trainer.collect_rollout()
            terminations += int(trainer.buffer.terminated.sum())
    finally:
        trainer.close()
    games = trainer.take_games()
    assert trainer.take_games() == []  # each game is handed over once
    assert {env for env, _, _ in games} == {0, 1}
    assert terminations >= LIVES * len(games)  # a training episode per life, a game per three
    assert sorted(r for env, r, _ in games) == sorted(r for returns in trainer.env_game_returns for r in returns)
    per_env = [np.mean([r for env, r, _ in games if env == i]) for i in (0, 1)]
    assert trainer.reward_mean_100() == pytest.approx(np.mean(per_env), rel=1e-12)


def test_the_logged_games_give_the_metrics_reward_mean_100_exactly_also_after_a_resume(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run, "LOG_INTERVAL", 500)
    run.train(space_invaders(tmp_path, 3_000), show_progress=False)
    run_dir = tmp_path / "a2c_seed-0"
    games_path = run_dir / "games.jsonl"
    # What a process killed after its last checkpoint (at 3,000, the final evaluation's) would have left behind.
    with open(games_path, "a") as f:
        f.write(json.dumps({"global_step": 3_500, "time": 0.0, "games": [[0, 12345.0, 1]]}) + "\n")
    run.train(space_invaders(tmp_path, 6_000), show_progress=False)
    games_log = builders.logged(games_path)
    games = [game for line in games_log for game in line["games"]]
    assert [0, 12345.0, 1] not in games
    assert all(length > LIVES for _, _, length in games) and {env for env, _, _ in games} == {0, 1}
    steps = [line["global_step"] for line in games_log]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    checked = 0
    for line in builders.logged(run_dir / "metrics.jsonl"):
        if "charts/reward_mean_100" in line:
            assert line["charts/reward_mean_100"] == course_figure(games_log, line["global_step"], 2)
            checked += 1
    assert checked >= 3
