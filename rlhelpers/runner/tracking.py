"""Weights & Biases logging for one run, against the environment step.

Metrics are logged with ``global_step`` as their x axis (``define_metric``), never through
``wandb.log(step=...)``: after a resume from an older checkpoint the environment step goes back a
little, which W&B's own step counter would silently drop, while a ``global_step`` value is kept.
Training (``Tracker``) and ``publish`` open runs the same way, through ``init_run``.
"""

from __future__ import annotations

import configparser
import netrc
import os
import secrets
import shlex
import string
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import wandb

from rlhelpers.core.errors import RLHelpersError
from rlhelpers.runner.config import TrainConfig
from rlhelpers.runner.metrics_log import MetricsLog


def wandb_host() -> str:
    """The W&B server's host: that of ``WANDB_BASE_URL``, else of the ``base_url`` that ``wandb login --host``
    saved in wandb's settings file (in ``WANDB_CONFIG_DIR``, default ~/.config/wandb), else api.wandb.ai."""
    url = os.environ.get("WANDB_BASE_URL")
    if not url:
        settings = configparser.ConfigParser()
        settings.read(Path(os.environ.get("WANDB_CONFIG_DIR") or "~/.config/wandb").expanduser() / "settings")
        url = settings.get("default", "base_url", fallback="https://api.wandb.ai")
    return urlsplit(url).netloc


def has_wandb_key() -> bool:
    """True if an API key is available: ``WANDB_API_KEY``, or a ``wandb login`` entry for ``wandb_host()`` in
    the netrc file that wandb reads (``NETRC``, default ~/.netrc)."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        entry = netrc.netrc(os.path.expanduser(os.environ.get("NETRC") or "~/.netrc")).authenticators(wandb_host())
    except (OSError, netrc.NetrcParseError):
        return False
    return bool(entry and entry[2])  # (login, account, password): the password is the key


def resolve_wandb_mode(mode: str | None) -> str:
    """The requested mode, or ``online`` when a key is available and ``offline`` otherwise. An explicit
    ``online`` without a key raises ``RLHelpersError`` (W&B would prompt for one, or fail without a terminal)."""
    if mode == "online" and not has_wandb_key():
        raise RLHelpersError("wandb_mode 'online' needs an API key: set WANDB_API_KEY or run `wandb login` (on Colab, "
                             "add the secret WANDB_API_KEY and rerun the set-up cells), or use wandb_mode 'offline'")
    if mode is not None:
        return mode
    return "online" if has_wandb_key() else "offline"


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
    """A W&B run named ``<algo>_seed-<seed>`` that is resumed under its stored id; every record also goes
    to the local ``metrics_log`` when one is given."""

    def __init__(self, config: TrainConfig, run_id: str, metrics_log: MetricsLog | None = None) -> None:
        self.metrics_log = metrics_log
        mode = resolve_wandb_mode(config.wandb_mode)
        if mode == "offline" and config.wandb_mode is None:
            print("W&B: no API key found, so nothing is uploaded; the run's metrics.jsonl keeps every record. "
                  f"Publish later, with a key: `{publish_command(config.runs_dir)}`", file=sys.stderr)
        self.run = init_run(config.wandb_project, config.wandb_entity, config.run_name, run_id, config.to_dict(),
                            mode)

    @property
    def url(self) -> str | None:
        """Web address of the run (None offline or disabled)."""
        return getattr(self.run, "url", None) or None

    def log(self, metrics: dict[str, Any], step: int) -> None:
        """Log ``metrics`` at environment step ``step`` (to W&B and to the local metrics log)."""
        if self.metrics_log is not None:
            self.metrics_log.append(metrics, step)
        self.run.log({**metrics, "global_step": step})

    def finish(self, exit_code: int = 0) -> None:
        """Close the W&B run; a non-zero ``exit_code`` marks this session as failed."""
        self.run.finish(exit_code=exit_code)
