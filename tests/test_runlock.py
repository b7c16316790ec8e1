"""The run lock across hosts, as after a Colab reconnect: two hosts are simulated through the lock's host field."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path

import pytest

from rlhelpers.core.errors import RLHelpersError
from rlhelpers.runner.files import LOCK_FILE
from rlhelpers.runner.runlock import RunLock

STALE_S = 1.5  # stands for the 300 s of a real run


def lock_on(run_dir: Path, host: str, **kwargs: float) -> RunLock:
    """A lock of ``run_dir`` held as if by a process on ``host``."""
    lock = RunLock(run_dir, **kwargs)
    lock.owner["host"] = host
    return lock


def holder(run_dir: Path) -> dict:
    return json.loads((run_dir / LOCK_FILE).read_text())


def test_reconnect_waits_for_a_stale_heartbeat_then_takes_over(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The new VM meets the lock of the session before the disconnect, whose VM is gone: wait, then take over."""
    run_dir = tmp_path / "a2c_seed-0"
    run_dir.mkdir()
    old = lock_on(run_dir, "colab-vm-old", beat_every_s=0.0)
    old.acquire()
    new = RunLock(run_dir, stale_after_s=STALE_S)

    started = time.monotonic()
    with pytest.warns(UserWarning, match=r"taking over run a2c_seed-0 from dead owner \(host colab-vm-old, "
                                         rf"pid {os.getpid()}, last heartbeat \d+ s ago\)"):
        new.acquire()
    waited = time.monotonic() - started

    assert STALE_S - 0.2 <= waited < STALE_S + 5.0  # generous above: a loaded machine oversleeps
    err = capsys.readouterr().err
    assert re.search(r"run a2c_seed-0 is locked by host colab-vm-old, pid \d+, last heartbeat 0 s ago\. "
                     r"After a Colab reconnect .* this takes the run over in [12] s", err)
    assert holder(run_dir)["host"] == new.owner["host"]
    # The old owner, were it still alive, learns at its next heartbeat that it must stop; it leaves the lock alone.
    with pytest.raises(RLHelpersError, match=f"run a2c_seed-0 was taken over by host {new.owner['host']}"):
        old.heartbeat()
    old.release()
    assert holder(run_dir)["host"] == new.owner["host"]
    new.release()
    assert not (run_dir / LOCK_FILE).exists()


def test_owner_on_another_host_whose_heartbeat_moves_is_refused(tmp_path: Path) -> None:
    alive = lock_on(tmp_path, "colab-vm-1", beat_every_s=0.0)
    alive.acquire()
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(0.3):
            alive.heartbeat()

    beating = threading.Thread(target=beat)
    beating.start()
    try:
        started = time.monotonic()
        with pytest.raises(RLHelpersError, match=r"being trained by another process \(host colab-vm-1, .*\): "
                                                 "its lock changed while this one waited, so it is alive"):
            RunLock(tmp_path, stale_after_s=30.0).acquire()
        assert time.monotonic() - started < 10.0  # far below the 30 s it would wait for a dead owner
    finally:
        stop.set()
        beating.join()
    assert holder(tmp_path)["host"] == "colab-vm-1"


def test_stale_owner_is_taken_over_at_once_and_a_released_lock_is_simply_taken(tmp_path: Path) -> None:
    lock_path = tmp_path / LOCK_FILE
    lock_path.write_text(json.dumps({"host": "colab-vm-1", "pid": 4242, "heartbeat": time.time() - 301}))
    lock = RunLock(tmp_path, stale_after_s=300)
    started = time.monotonic()
    with pytest.warns(UserWarning, match="from dead owner .*colab-vm-1.*last heartbeat 301 s ago"):
        lock.acquire()
    assert time.monotonic() - started < 5.0  # no wait, where a live-looking owner would cost 300 s
    assert holder(tmp_path)["pid"] == os.getpid()
    lock.release()

    # An owner that ends normally while the new host waits: its lock is gone, the new host takes it, no warning.
    leaving = lock_on(tmp_path, "colab-vm-2")
    leaving.acquire()
    threading.Timer(0.3, leaving.release).start()
    arriving = RunLock(tmp_path, stale_after_s=30.0)
    arriving.acquire()
    assert holder(tmp_path)["host"] == arriving.owner["host"]
    arriving.release()
