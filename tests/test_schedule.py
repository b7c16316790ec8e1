"""When a run evaluates, checkpoints, snapshots and logs, pinned as a trace of events: what an evaluation step saves,
what a stop signal saves before the run returns, and when a timed checkpoint is put off."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from rlhelpers.core.trainer import Trainer
from rlhelpers.runner import run
from rlhelpers.runner.config import TrainConfig
from rlhelpers.runner.store import RunDirectory
from rlhelpers.runner.tracking import Tracker

# 4 envs x 5 steps: 20 steps an update. Evaluations every 100 steps, snapshots every 60, a log line every 40.
SETTINGS: dict[str, Any] = dict(algo="a2c", env_id="CartPole-v1", n_envs=4, eval_interval=100, n_eval_episodes=1,
                                n_eval_envs=1, snapshot_interval=60, wandb_mode="disabled", device="cpu",
                                stop_return=1e9)


def traced(monkeypatch: pytest.MonkeyPatch, stop_at: int | None = None) -> list[tuple[str, int]]:
    """The events of the next ``train`` in order, each with the trainer's step; ``stop_at``: SIGTERM arrives during
    the update that reaches that step."""
    events: list[tuple[str, int]] = []
    steps = {"now": 0}

    def record(name: str, original: Any) -> Any:
        def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
            events.append((name, steps["now"]))
            return original(self, *args, **kwargs)
        return wrapped

    iteration = Trainer.train_iteration

    def train_iteration(self: Trainer) -> dict[str, float]:
        stats = iteration(self)
        steps["now"] = self.num_timesteps
        if stop_at is not None and self.num_timesteps == stop_at:
            os.kill(os.getpid(), signal.SIGTERM)
        return stats

    monkeypatch.setattr(Trainer, "train_iteration", train_iteration)
    monkeypatch.setattr(run.Session, "evaluate", record("evaluate", run.Session.evaluate))
    monkeypatch.setattr(run.Session, "checkpoint", record("checkpoint", run.Session.checkpoint))
    monkeypatch.setattr(RunDirectory, "save_snapshot", record("snapshot", RunDirectory.save_snapshot))
    original_log = Tracker.log

    def log(self: Tracker, metrics: dict[str, Any], step: int) -> None:
        events.append(("eval log" if "eval/mean_return" in metrics else "log", step))
        original_log(self, metrics, step)

    monkeypatch.setattr(Tracker, "log", log)
    monkeypatch.setattr(run, "LOG_INTERVAL", 40)
    return events


def train(tmp_path: Path, checkpoint_interval_s: float) -> run.RunResult:
    config = TrainConfig(total_timesteps=200, runs_dir=str(tmp_path), checkpoint_interval_s=checkpoint_interval_s,
                         **SETTINGS)
    return run.train(config, show_progress=False)


def test_an_evaluation_step_evaluates_logs_and_checkpoints_after_the_steps_snapshot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = traced(monkeypatch)
    assert train(tmp_path, checkpoint_interval_s=1e9).stop_reason == "total_timesteps"
    assert events == [
        ("snapshot", 0), ("evaluate", 0), ("eval log", 0), ("checkpoint", 0),
        ("log", 40), ("snapshot", 60), ("log", 80),
        ("evaluate", 100), ("eval log", 100), ("checkpoint", 100),
        ("log", 120), ("snapshot", 120), ("log", 160), ("snapshot", 180), ("log", 200),
        ("evaluate", 200), ("eval log", 200), ("checkpoint", 200),
        ("snapshot", 200),  # the final weights, off the snapshot grid
    ]


def test_a_timed_checkpoint_follows_each_update_but_one_that_an_evaluation_follows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = traced(monkeypatch)
    train(tmp_path, checkpoint_interval_s=1e-9)  # a timed checkpoint is due after every update
    checkpoints = [step for event, step in events if event == "checkpoint"]
    assert checkpoints == [0, 20, 40, 60, 80, 100, 120, 140, 160, 180, 200]  # each step once: at 100 and 200 the
    assert events[events.index(("checkpoint", 80)) - 1:events.index(("checkpoint", 100)) + 1] == [  # evaluation's
        ("log", 80), ("checkpoint", 80), ("evaluate", 100), ("eval log", 100), ("checkpoint", 100)]


def test_a_stop_signal_checkpoints_and_returns_without_a_final_snapshot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = traced(monkeypatch, stop_at=140)
    result = train(tmp_path, checkpoint_interval_s=1e9)
    assert (result.stop_reason, result.num_timesteps) == ("stopped by SIGTERM", 140)
    assert events[-4:] == [("checkpoint", 100), ("log", 120), ("snapshot", 120), ("checkpoint", 140)]
    run_dir = RunDirectory(tmp_path / "a2c_seed-0")
    assert sorted(step for step, _ in run_dir.checkpoints()) == [0, 100, 140]
    assert sorted(step for step, _ in run_dir.snapshots()) == [0, 60, 120]
