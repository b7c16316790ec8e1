"""Where the notebook's runs live and how W&B is set up: on Colab, a Google Drive folder and the key from
a Colab secret; elsewhere, ``runs`` and the key of the environment or ``wandb login``.

Colab-only code is confined to ``_colab_mount_drive``, ``_colab_secret`` and
``_colab_flush_and_unmount``; everything else runs, and is tested, on any machine.
"""

from __future__ import annotations

import os
import sys

from rlhelpers.core.errors import RLHelpersError
from rlhelpers.runner.files import DEFAULT_RUNS_DIR
from rlhelpers.runner.tracking import WANDB_KEY, resolve_wandb_mode, upload_notice

COLAB_DRIVE = "/content/drive"
COLAB_RUNS_DIR = f"{COLAB_DRIVE}/MyDrive/rlhelpers/runs"


def on_colab() -> bool:
    """True inside a Google Colab notebook (its kernel imports ``google.colab`` at start-up)."""
    return "google.colab" in sys.modules


def _colab_mount_drive() -> None:
    """Mount Google Drive at /content/drive (asks the user for permission in the Colab UI)."""
    from google.colab import drive

    drive.mount(COLAB_DRIVE)


def _colab_secret(name: str) -> str | None:
    """A Colab secret's value, or None when it is missing or the notebook may not read it."""
    from google.colab import userdata

    try:
        return userdata.get(name)
    except Exception as exc:  # SecretNotFoundError, NotebookAccessError, or no Colab UI (e.g. under papermill)
        print(f"Colab secret {name} not available ({type(exc).__name__})")
        return None


def _colab_flush_and_unmount() -> None:
    """Write everything pending to Google Drive and unmount it."""
    from google.colab import drive

    drive.flush_and_unmount()


def _on_drive(runs_dir: str) -> bool:
    return on_colab() and str(runs_dir).startswith(COLAB_DRIVE)


def resolve_runs_dir(runs_dir: str | None) -> str:
    """``runs_dir`` when given; otherwise a Google Drive folder on Colab and ``runs`` elsewhere.

    On Colab, Drive is mounted whenever the runs directory lies on it.
    """
    if not runs_dir:
        runs_dir = COLAB_RUNS_DIR if on_colab() else DEFAULT_RUNS_DIR
    if _on_drive(runs_dir):
        _colab_mount_drive()
    return str(runs_dir)


def require_drive(runs_dir: str) -> None:
    """On Colab with the runs on Google Drive, raise ``RLHelpersError`` unless Drive is mounted: after the
    last cell unmounts it, a rerun training cell would otherwise write to the VM's own disk."""
    if _on_drive(runs_dir) and not os.path.ismount(COLAB_DRIVE):
        raise RLHelpersError(f"Google Drive is not mounted (the notebook's last cell unmounts it), so {runs_dir} "
                             "is not on Drive now: rerun the set-up cell first, or Run all")


def flush_drive(runs_dir: str) -> None:
    """On Colab with the runs on Google Drive: flush and unmount Drive, so that the last checkpoint and
    history reach it before the runtime is deleted (Drive uploads in the background). Elsewhere nothing."""
    if not (_on_drive(runs_dir) and os.path.ismount(COLAB_DRIVE)):
        return
    _colab_flush_and_unmount()
    print(f"Google Drive flushed and unmounted: {runs_dir} is complete on Drive. Run all again to mount it again.")


def setup_wandb(mode: str | None, runs_dir: str = DEFAULT_RUNS_DIR) -> str:
    """Choose the W&B mode and say which one is used.

    On Colab the secret ``WANDB_API_KEY`` is copied into the environment (child processes inherit
    it). ``mode`` None means online with a key and offline without one; an explicit ``online``
    without a key is refused with an ``RLHelpersError`` instead of W&B's prompt. Without uploads the
    message says how to publish the runs of ``runs_dir`` later.
    """
    if on_colab() and not os.environ.get(WANDB_KEY):
        key = _colab_secret(WANDB_KEY)
        if key:
            os.environ[WANDB_KEY] = key
    resolved = resolve_wandb_mode(mode)
    print("W&B: online" if resolved == "online" else upload_notice(resolved, runs_dir, on_colab(), _on_drive(runs_dir)))
    return resolved
