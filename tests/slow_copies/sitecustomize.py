"""Slow file copies for the crash tests' child processes, as on a Google Drive mount: with this folder on
``PYTHONPATH`` and ``SLOW_COPY_S`` set (``builders.slow_copies``), every ``shutil.copyfileobj`` (the copy of a
verified checkpoint or snapshot to its run directory) writes half the file, flushes, waits that many seconds, then
writes the rest, so that a kill can land mid-write."""

import os
import shutil
import time
from typing import Any

_delay = float(os.environ.get("SLOW_COPY_S") or 0)
_copy = shutil.copyfileobj


def _slow_copy(src: Any, dst: Any, length: int = 0) -> None:
    dst.write(src.read(os.fstat(src.fileno()).st_size // 2))
    dst.flush()
    time.sleep(_delay)
    _copy(src, dst, length)


if _delay > 0:
    shutil.copyfileobj = _slow_copy  # type: ignore[assignment]  # bytes only, where shutil's is generic
