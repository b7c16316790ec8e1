"""What a notebook that trains needs, on Colab and off it: its papermill parameters checked, where the runs live,
how W&B is set up, and the package's errors shown as one line. On Colab the runs go to a Google Drive folder and
the key comes from a Colab secret; elsewhere, ``runs`` and the key of the environment or ``wandb login``.

Colab-only code is confined to ``_colab_drive`` and ``_colab_secret``; everything else runs, and is tested,
on any machine.
"""

from __future__ import annotations

import ast
import difflib
import os
import sys
from typing import Any

from rlhelpers.core.errors import RLHelpersError
from rlhelpers.runner.config import DEFAULT_RUNS_DIR
from rlhelpers.runner.tracking import WANDB_KEY, resolve_wandb_mode, upload_notice

COLAB_DRIVE = "/content/drive"
COLAB_RUNS_DIR = f"{COLAB_DRIVE}/MyDrive/rlhelpers/runs"


def on_colab() -> bool:
    """True inside a Google Colab notebook (its kernel imports ``google.colab`` at start-up)."""
    return "google.colab" in sys.modules


def _colab_drive() -> Any:
    """Colab's Google Drive module: ``mount`` (asks the user for permission in the Colab UI) and
    ``flush_and_unmount``."""
    from google.colab import drive

    return drive


def _colab_secret(name: str) -> str | None:
    """A Colab secret's value, or None when it is missing or the notebook may not read it."""
    from google.colab import userdata

    try:
        return userdata.get(name)
    except Exception as exc:  # SecretNotFoundError, NotebookAccessError, or no Colab UI (e.g. under papermill)
        print(f"Colab secret {name} not available ({type(exc).__name__})")
        return None


def _on_drive(runs_dir: str) -> bool:
    return on_colab() and str(runs_dir).startswith(COLAB_DRIVE)


def resolve_runs_dir(runs_dir: str | None) -> str:
    """``runs_dir`` when given; otherwise a Google Drive folder on Colab and ``runs`` elsewhere.

    On Colab, Drive is mounted whenever the runs directory lies on it.
    """
    if not runs_dir:
        runs_dir = COLAB_RUNS_DIR if on_colab() else DEFAULT_RUNS_DIR
    if _on_drive(runs_dir):
        _colab_drive().mount(COLAB_DRIVE)
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
    if _on_drive(runs_dir) and os.path.ismount(COLAB_DRIVE):
        _colab_drive().flush_and_unmount()  # writes everything pending to Drive first
        print(f"Google Drive flushed and unmounted: {runs_dir} is complete on Drive. Run all again to mount it again.")


def setup_wandb(mode: str | None, runs_dir: str = DEFAULT_RUNS_DIR) -> str:
    """Choose the W&B mode and say which one is used.

    On Colab the secret ``WANDB_API_KEY`` is copied into the environment (child processes inherit
    it). ``mode`` None means online with a key and offline without one; an explicit ``online``
    without a key is refused with an ``RLHelpersError`` instead of W&B's prompt. Without uploads the
    message says how to publish the runs of ``runs_dir`` later.
    """
    if on_colab() and not os.environ.get(WANDB_KEY) and (key := _colab_secret(WANDB_KEY)):
        os.environ[WANDB_KEY] = key
    resolved = resolve_wandb_mode(mode)
    print("W&B: online" if resolved == "online" else upload_notice(resolved, runs_dir, on_colab(), _on_drive(runs_dir)))
    return resolved


def check_parameters(executed_cells: list[str], names: tuple[str, ...], flags: dict[str, object]) -> None:
    """Stop on what papermill lets through: a ``-p`` name that is not one of the notebook's parameter ``names``
    (papermill only warns, and the default stays in force) and text for a flag of ``flags`` (name and value: ``-r``
    passes text, and any text is true). ``executed_cells`` are the kernel's cell sources (IPython's ``In``);
    papermill's injected cell is the one that starts with ``# Parameters``."""
    for source in (cell for cell in executed_cells if cell.startswith("# Parameters\n")):
        for node in ast.parse(source).body:
            for target in getattr(node, "targets", []):
                if (isinstance(target, ast.Name) and target.id not in names
                        and not target.id.startswith("PAPERMILL_")):  # --inject-paths adds these
                    close = difflib.get_close_matches(target.id, names, n=1)
                    raise RLHelpersError(f"unknown parameter {target.id!r}"
                                         + (f": did you mean {close[0]!r}?" if close else "")
                                         + f" The parameters are {', '.join(names)}")
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise RLHelpersError(f"{name} must be True or False, got {value!r} (papermill's -r passes text: use -p)")


def show_errors_briefly(shell: Any) -> None:
    """Show the package's own errors (``RLHelpersError``: a mistaken parameter, a run another process trains) in
    the IPython ``shell`` as their one-line message, which says what to change; any other exception keeps its
    traceback."""
    def one_line(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: int | None = None) -> list[str]:
        shown = [f"{etype.__name__}: {value}"]
        shell._showtraceback(etype, value, shown)  # IPython leaves showing it to the handler (7.x to 9.x)
        return shown

    shell.set_custom_exc((RLHelpersError,), one_line)
