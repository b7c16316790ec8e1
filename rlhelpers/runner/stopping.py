"""Turning a stop signal into a flag that a loop checks between steps of work, so that it can finish
cleanly (checkpoint, pass the signal on) instead of dying where it stands."""

from __future__ import annotations

import signal
import threading
from typing import Any


class StopRequest:
    """While entered, ``signals`` (SIGTERM and SIGINT by default) set ``requested`` instead of ending the process;
    a second SIGINT (Ctrl-C pressed again while the first one waits to be acted on) raises KeyboardInterrupt at once.

    Handlers can only be installed from the main thread; elsewhere the signals keep their handlers and
    ``requested`` stays False.
    """

    def __init__(self, signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)) -> None:
        self.signals = signals
        self.received: signal.Signals | None = None  # the signal that asked to stop
        self._previous: dict[signal.Signals, Any] = {}

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._handle) for sig in self.signals}
        return self

    @property
    def requested(self) -> bool:
        """Whether one of the signals arrived."""
        return self.received is not None

    def _handle(self, signum: int, frame: Any) -> None:
        if signum == signal.SIGINT == self.received:
            raise KeyboardInterrupt
        self.received = signal.Signals(signum)

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)  # None: set outside Python
        self._previous = {}
