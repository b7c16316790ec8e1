"""Waiting, in tests, for what another process does: a condition polled until it holds or time runs out."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float, poll_s: float = 0.2) -> None:
    """Poll ``condition`` every ``poll_s`` seconds until it holds; fail the test naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(poll_s)
