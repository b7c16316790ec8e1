"""What produced a run: code version, library versions, hardware and numerics of one training session."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

PACKAGE_DIR = Path(__file__).resolve().parent


def _version(package: str) -> str | None:
    with contextlib.suppress(metadata.PackageNotFoundError):
        return metadata.version(package)
    return None


def git_commit(path: Path = PACKAGE_DIR) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git checkout holding ``path``; (None, None) outside one (e.g. a wheel install).

    ``dirty`` is True when tracked files differ from that commit.
    """
    try:
        commit = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        changes = subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
                                 capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None, None
    return commit, bool(changes)


def device_name(device: torch.device) -> str:
    """What trains on ``device``: the GPU's name on CUDA, else the CPU's model (``cpu_model``)."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model()


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what ``platform`` knows."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def session_provenance(device: torch.device, env_threads: int, start_step: int) -> dict[str, Any]:
    """One training session's record: from which step, with which code, libraries, hardware and numerics."""
    commit, dirty = git_commit()
    return {
        "start_step": start_step,
        "start_time": time.time(),
        "rlhelpers": _version("rlhelpers"),
        "git_commit": commit,
        "git_dirty": dirty,
        "python": platform.python_version(),
        "torch": str(torch.__version__),
        "gymnasium": _version("gymnasium"),
        "ale_py": _version("ale-py"),
        "numpy": _version("numpy"),
        "device": str(device),
        "device_name": device_name(device),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),  # "highest": fp32, "high": TF32 on a GPU
        "cudnn_tf32": torch.backends.cudnn.allow_tf32,  # convolutions in TF32 on a GPU of Ampere or later
        "env_threads": env_threads,
    }
