"""What the tests build and read back: CartPole runs small enough to train in seconds, their command lines, the
records of made-up runs and a slow disk for child processes. Every test that needs a run or a history builds it
here, through the package's own ``RunRecord``, so that the layout of what a run keeps on disk is written in one
place."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlhelpers.core.evaluation import Evaluation
from rlhelpers.runner.campaign import command_line
from rlhelpers.runner.config import TrainConfig
from rlhelpers.runner.store import HISTORY_FILE, RunDirectory, RunRecord, read_metrics

# A CartPole run small enough to train in seconds: 4 envs, evaluated every 1,000 steps on 2 episodes, never stopped
# early, on the CPU, W&B disabled. A test changes what it needs.
CARTPOLE: dict[str, Any] = {"env_id": "CartPole-v1", "n_envs": 4, "eval_interval": 1_000, "n_eval_episodes": 2,
                            "n_eval_envs": 2, "stop_return": 1e9, "wandb_mode": "disabled", "device": "cpu"}


def cartpole(runs_dir: Path, total_timesteps: int = 1_000, **overrides: Any) -> TrainConfig:
    """The config of a ``CARTPOLE`` run in ``runs_dir`` with the test's ``overrides``."""
    return TrainConfig(**{**CARTPOLE, "total_timesteps": total_timesteps, "runs_dir": str(runs_dir), **overrides})


def cartpole_args(**overrides: Any) -> list[str]:
    """The command-line options of a ``CARTPOLE`` run with the test's ``overrides`` (``runs_dir`` among them)."""
    return command_line({**CARTPOLE, **overrides})


def evaluations(means: Sequence[float], every: int = 500, lengths: tuple[int, ...] = (),
                steps: Sequence[int] | None = None) -> tuple[Evaluation, ...]:
    """One evaluation per mean of two episodes, one below and one above it, at ``steps`` (by default 0, ``every``,
    2 ``every``, ...), each episode of ``lengths``."""
    steps = steps if steps is not None else [i * every for i in range(len(means))]
    return tuple(Evaluation(step, (m - 1, m + 1), lengths) for step, m in zip(steps, means, strict=True))


def made_up_run(name: str, history: tuple[Evaluation, ...], config: dict[str, Any] | None = None,
                **fields: Any) -> RunRecord:
    """The record of a run ``name`` with the evaluations ``history`` and ``config``; ``fields`` set the others."""
    return RunRecord(name, config=TrainConfig.from_dict(config or {}), evaluations=history, **fields)


def write_run(run_path: Path, history: tuple[Evaluation, ...], config: dict[str, Any] | None = None,
              **fields: Any) -> RunRecord:
    """Write the eval_history.json of a ``made_up_run`` in ``run_path`` (named after it) and return its record."""
    record = made_up_run(run_path.name, history, config, **fields)
    save(run_path.parent, record)
    return record


def checkpoint(run_path: Path) -> dict[str, Any]:
    """The newest checkpoint of the run in ``run_path`` that loads, which the test expects it to have."""
    state = RunDirectory(run_path).load_latest_checkpoint()
    assert state is not None, f"no checkpoint in {run_path}"
    return state


def save(runs_dir: Path, record: RunRecord) -> Path:
    """Write ``record`` as the eval_history.json of its run in ``runs_dir``; return the run's directory."""
    run_path = runs_dir / record.name
    run_path.mkdir(parents=True, exist_ok=True)
    RunDirectory(run_path).write_record(record)
    return run_path


def logged(path: Path) -> list[dict[str, Any]]:
    """The lines of a metrics log as the file holds them (``MetricsLine.to_dict``): what a test looks up by key."""
    return [line.to_dict() for line in read_metrics(path)]


def saved(run_path: Path) -> dict[str, Any]:
    """The eval_history.json of a run as it is on disk ({} before it has one)."""
    path = run_path / HISTORY_FILE
    return json.loads(path.read_text()) if path.exists() else {}


def slow_copies(env: dict[str, str], seconds: float) -> dict[str, str]:
    """``env`` for a child process whose checkpoint and snapshot copies pause ``seconds`` halfway
    (``slow_copies/sitecustomize.py``), as a slow Drive mount would."""
    path = os.pathsep.join(filter(None, [str(Path(__file__).parent / "slow_copies"), env.get("PYTHONPATH")]))
    return {**env, "PYTHONPATH": path, "SLOW_COPY_S": str(seconds)}
