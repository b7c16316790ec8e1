"""Stop signals become a flag while a StopRequest is entered, and the handlers before it come back after."""

from __future__ import annotations

import os
import signal
import time

from rlhelpers.runner.run import StopRequest


def test_stop_request_turns_signals_into_a_flag_and_restores_the_handlers() -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    with StopRequest((signal.SIGTERM, signal.SIGINT)) as stop:
        assert not stop.requested
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, as the campaign gets it
        deadline = time.monotonic() + 5
        while not stop.requested and time.monotonic() < deadline:
            time.sleep(0.01)
        assert stop.requested
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_a_handler_installed_outside_python_is_restored_as_the_default() -> None:
    """signal.signal returns None for a handler not installed from Python; restoring None would raise."""
    original = signal.getsignal(signal.SIGTERM)
    try:
        with StopRequest((signal.SIGTERM,)) as stop:
            stop._previous = {signal.SIGTERM: None}  # as signal.signal reports such a handler
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, original)
