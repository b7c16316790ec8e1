"""Weights & Biases logging for one run, against the environment step.

Metrics are logged with ``global_step`` as their x axis (``define_metric``), never through
``wandb.log(step=...)``: after a resume from an older checkpoint the environment step goes back a
little, which W&B's own step counter would silently drop, while a ``global_step`` value is kept.
Training (``Tracker``) and ``publish`` open runs the same way, through ``init_run``.
"""

from __future__ import annotations

import secrets
import shlex
import string
import sys
from typing import Any

import wandb

from rlhelpers.runner.config import TrainConfig, has_wandb_key
from rlhelpers.runner.metrics_log import MetricsLog


def new_run_id() -> str:
    """A fresh W&B run id, stored with the run so every resume continues the same W&B run."""
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))


def publish_command(runs_dir: str) -> str:
    """The command that uploads every run of ``runs_dir`` from its local files (see ``rlhelpers.runner.publish``)."""
    return f"python -m rlhelpers publish --runs-dir {shlex.quote(str(runs_dir))}"


def init_run(project: str, entity: str | None, name: str, run_id: str, config: dict[str, Any],
             mode: str) -> Any:
    """Create or resume the W&B run ``run_id`` with ``global_step`` as the x axis of every metric."""
    run = wandb.init(project=project, entity=entity, name=name, id=run_id, resume="allow", config=config,
                     mode=mode)
    run.define_metric("global_step")
    run.define_metric("*", step_metric="global_step")
    return run


class Tracker:
    """A W&B run named ``<algo>_seed-<seed>`` that is resumed under its stored id, in the mode of ``config``
    as ``resolve_config`` settled it; every record also goes to the run's local ``metrics_log``."""

    def __init__(self, config: TrainConfig, run_id: str, metrics_log: MetricsLog) -> None:
        self.metrics_log = metrics_log
        if config.wandb_mode == "offline" and not has_wandb_key():
            print("W&B: no API key found, so nothing is uploaded; the run's metrics.jsonl keeps every record. "
                  f"Publish later, with a key: `{publish_command(config.runs_dir)}`", file=sys.stderr)
        self.run = init_run(config.wandb_project, config.wandb_entity, config.run_name, run_id, config.to_dict(),
                            config.wandb_mode)

    @property
    def url(self) -> str | None:
        """Web address of the run (None offline or disabled)."""
        return getattr(self.run, "url", None) or None

    def log(self, metrics: dict[str, Any], step: int) -> None:
        """Log ``metrics`` at environment step ``step`` (to W&B and to the local metrics log)."""
        self.metrics_log.append(metrics, step)
        self.run.log({**metrics, "global_step": step})

    def finish(self, exit_code: int = 0) -> None:
        """Close the W&B run; a non-zero ``exit_code`` marks this session as failed."""
        self.run.finish(exit_code=exit_code)
