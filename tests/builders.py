"""What the tests build and read back: CartPole runs small enough to train in seconds, their command lines, and the
records of made-up runs. Every test that needs a run or a history builds it here, through the package's own
``RunRecord``, so that the layout of what a run keeps on disk is written in one place."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlhelpers.core.evaluation import Evaluation
from rlhelpers.runner.config import TrainConfig
from rlhelpers.runner.store import HISTORY_FILE, RunDirectory, RunRecord


def cartpole(runs_dir: Path, total_timesteps: int = 1_000, **overrides: Any) -> TrainConfig:
    """A task1 CartPole run on the CPU in ``runs_dir``, W&B disabled, evaluated every 200 steps on 2 episodes."""
    values: dict[str, Any] = {"algo": "task1", "env_id": "CartPole-v1", "total_timesteps": total_timesteps,
                              "eval_interval": 200, "n_eval_episodes": 2, "n_eval_envs": 2, "runs_dir": str(runs_dir),
                              "wandb_mode": "disabled", "device": "cpu"}
    return TrainConfig(**{**values, **overrides})


def cartpole_args(runs_dir: Path, steps: int = 2_000, *extra: str) -> list[str]:
    """The command-line options of a small CartPole run in ``runs_dir`` (evaluated every 1,000 steps)."""
    return ["--env-id", "CartPole-v1", "--total-timesteps", str(steps), "--eval-interval", "1000",
            "--n-eval-episodes", "2", "--n-eval-envs", "2", "--runs-dir", str(runs_dir), "--wandb-mode", "disabled",
            "--device", "cpu", *extra]


def evaluations(means: list[float], every: int = 500, spread: float = 1.0,
                lengths: tuple[int, ...] = ()) -> tuple[Evaluation, ...]:
    """One evaluation of two episodes (mean ± ``spread``) per mean, at steps 0, ``every``, 2 ``every``, ..."""
    return tuple(Evaluation(i * every, (m - spread, m + spread), lengths) for i, m in enumerate(means))


def write_run(run_path: Path, means: list[float], config: dict[str, Any] | None = None, every: int = 500,
              **fields: Any) -> RunRecord:
    """Write the eval_history.json of a made-up run in ``run_path`` (its name is the directory's) with one
    evaluation per mean (``evaluations``) and ``config``; ``fields`` set the record's other fields."""
    record = RunRecord(run_path.name, run_path, config or {}, evaluations(means, every), **fields)
    run_path.mkdir(parents=True, exist_ok=True)
    RunDirectory(run_path).write_record(record)
    return record


def saved(run_path: Path) -> dict[str, Any]:
    """The eval_history.json of a run as it is on disk ({} before it has one)."""
    path = run_path / HISTORY_FILE
    return json.loads(path.read_text()) if path.exists() else {}
