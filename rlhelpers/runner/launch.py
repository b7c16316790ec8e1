"""One run's training as a child process, the one way the campaign and a SLURM job start and stop it.

``start_training`` runs ``python -m rlhelpers train`` for a ``CampaignRun``, appending its output to
``<runs_dir>/<run>/train.log``; on Linux the child gets SIGTERM when its parent dies. ``stop_training``
sends it SIGTERM (it checkpoints and exits) and waits for it.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

from rlhelpers.runner.config import arm_name, format_run_name
from rlhelpers.runner.store import TRAIN_LOG

PR_SET_PDEATHSIG = 1


class CampaignRun(NamedTuple):
    """One run a campaign trains: an algorithm, its variant ("" for none) and a seed."""

    algo: str
    variant: str
    seed: int

    @property
    def name(self) -> str:
        return format_run_name(arm_name(self.algo, self.variant), self.seed)


def _die_with_parent() -> None:
    """In the child before exec: ask Linux to send SIGTERM when the parent dies (no-op elsewhere)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def start_training(run: CampaignRun, runs_dir: Path, train_args: list[str]) -> subprocess.Popen:
    """Start training ``run`` in ``runs_dir`` with the shared ``train_args``, logging to its train.log."""
    run_path = runs_dir / run.name
    run_path.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "rlhelpers", "train", "--algo", run.algo, "--seed", str(run.seed),
               *(["--variant", run.variant] if run.variant else []), "--runs-dir", str(runs_dir), *train_args]
    with open(run_path / TRAIN_LOG, "ab") as log:
        log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} campaign: {' '.join(command)}\n".encode())
        log.flush()
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=_die_with_parent)


def stop_training(processes: list[subprocess.Popen]) -> None:
    """Send SIGTERM to each of ``processes`` still running (each checkpoints and exits), then wait for all."""
    for process in processes:
        process.send_signal(signal.SIGTERM)  # Popen skips a process that has ended
    for process in processes:
        process.wait()
