"""A run directory's layout and the one way to write a file into it.

``<runs_dir>/<algo>_seed-<seed>/``::

    checkpoint-000000300000.pt        full training state (``checkpoint``)
    eval_history.json                 config, provenance, W&B run id and every evaluation
    metrics.jsonl                     every metric sent to W&B (``metrics_log``)
    snapshots/model-000001000000.pt   model weights only, for the analysis
    owner.json                        the single-writer lock (``runlock``)
    train.log                         the output of a run that the campaign started
    policy.pt, policy_rescore.json    the exported float16 policy and its re-score (``report.playback``)

``write_atomically`` writes to a temporary file, fsyncs it and renames it over the target, so a kill at
any moment leaves either the old file or the new one, never a partial file under the target's name.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import IO

DEFAULT_RUNS_DIR = "runs"  # the committed runs, and the default of every command and of the notebook off Colab
HISTORY_FILE = "eval_history.json"
METRICS_FILE = "metrics.jsonl"
LOCK_FILE = "owner.json"
TRAIN_LOG = "train.log"
POLICY_FILE = "policy.pt"
RESCORE_FILE = "policy_rescore.json"
SNAPSHOT_DIR = "snapshots"
CAMPAIGN_LOCK = "campaign.json"  # in the runs directory: one campaign at a time
TMP_SUFFIX = ".tmp"
CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d{12})\.pt$")
SNAPSHOT_PATTERN = re.compile(r"^model-(\d{12})\.pt$")
# Temporary files of write_atomically (checkpoints, snapshots, history, metrics) and RunLock (owner.json.<pid>.tmp).
STALE_TMP_PATTERN = re.compile(rf"^(checkpoint-\d{{12}}\.pt|model-\d{{12}}\.pt|{re.escape(HISTORY_FILE)}|"
                               rf"{re.escape(METRICS_FILE)}|{re.escape(LOCK_FILE)}\.\d+)\.tmp$")


def checkpoint_name(step: int) -> str:
    """File name of the checkpoint taken at environment step ``step``."""
    return f"checkpoint-{step:012d}.pt"


def snapshot_name(step: int) -> str:
    """File name of the model snapshot taken at environment step ``step``."""
    return f"model-{step:012d}.pt"


def write_atomically(path: str | os.PathLike, content: bytes | Callable[[IO[bytes]], object],
                     tmp: str | os.PathLike | None = None) -> None:
    """Write ``content`` (bytes, or a function that writes into the open file) to ``tmp`` (default:
    ``path`` + ``.tmp``), fsync, then rename it onto ``path``. On failure the temporary file is removed and
    ``path`` is left as it was."""
    path = Path(path)
    tmp = Path(tmp) if tmp is not None else path.with_name(path.name + TMP_SUFFIX)
    try:
        with open(tmp, "wb") as f:
            content(f) if callable(content) else f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):  # the rename made durable, where a directory can be opened and fsynced
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
