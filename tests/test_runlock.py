"""The run lock across hosts, as after a Colab reconnect (two hosts are simulated through the lock's host field),
and between processes that meet one dead owner's lock at the same moment."""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rlhelpers.core.errors import RLHelpersError
from rlhelpers.runner.runlock import RunLock
from rlhelpers.runner.store import LOCK_FILE

STALE_S = 1.5  # stands for the 300 s of a real run


def make_lock(run_dir: Path, host: str | None = None, **timing: float) -> RunLock:
    """A lock of ``run_dir`` held as if by a process on ``host`` (None: this host), with ``timing``
    (``stale_after_s``, ``beat_every_s``) in place of a real run's."""
    lock = RunLock(run_dir)
    lock.owner["host"] = host or lock.owner["host"]
    vars(lock).update(timing)
    return lock


def holder(run_dir: Path) -> dict:
    return json.loads((run_dir / LOCK_FILE).read_text())


def test_reconnect_waits_for_a_stale_heartbeat_then_takes_over(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The new VM meets the lock of the session before the disconnect, whose VM is gone: wait, then take over."""
    run_dir = tmp_path / "a2c_seed-0"
    run_dir.mkdir()
    old = make_lock(run_dir, "colab-vm-old", beat_every_s=0.0)
    old.acquire()
    new = make_lock(run_dir, stale_after_s=STALE_S)

    started = time.monotonic()
    new.acquire()
    waited = time.monotonic() - started

    assert STALE_S - 0.2 <= waited < STALE_S + 5.0  # generous above: a loaded machine oversleeps
    err = capsys.readouterr().err
    assert re.search(r"^taking over run a2c_seed-0 from dead owner \(host colab-vm-old, "
                     rf"pid {os.getpid()}, last heartbeat \d+ s ago\)$", err, re.M)  # one plain line, no warning
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
    alive = make_lock(tmp_path, "colab-vm-1", beat_every_s=0.0)
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
            make_lock(tmp_path, stale_after_s=30.0).acquire()
        assert time.monotonic() - started < 10.0  # far below the 30 s it would wait for a dead owner
    finally:
        stop.set()
        beating.join()
    assert holder(tmp_path)["host"] == "colab-vm-1"


def test_stale_owner_is_taken_over_at_once_and_a_released_lock_is_simply_taken(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    lock_path = tmp_path / LOCK_FILE
    written = time.time()
    lock_path.write_text(json.dumps({"host": "colab-vm-1", "pid": 4242, "heartbeat": written - 301}))
    lock = make_lock(tmp_path, stale_after_s=300)
    started = time.monotonic()
    lock.acquire()
    err = capsys.readouterr().err
    assert re.search(r"from dead owner .*colab-vm-1.*last heartbeat \d+ s ago", err)
    # 301 s, plus the seconds it took to get here (several on a loaded machine), rounded to whole seconds
    match = re.search(r"last heartbeat (\d+) s ago", err)
    assert match is not None
    age = int(match.group(1))
    assert 301 <= age <= 301 + (time.time() - written) + 0.5
    assert time.monotonic() - started < 5.0  # no wait, where a live-looking owner would cost 300 s
    assert holder(tmp_path)["pid"] == os.getpid()
    lock.release()

    # An owner that ends normally while the new host waits: its lock is gone, the new host takes it, no warning.
    leaving = make_lock(tmp_path, "colab-vm-2")
    leaving.acquire()
    threading.Timer(0.3, leaving.release).start()
    arriving = make_lock(tmp_path, stale_after_s=30.0)
    arriving.acquire()
    assert holder(tmp_path)["host"] == arriving.owner["host"]
    arriving.release()


# Each contender holds what it acquires (it never releases), so a second owner can only come from the race.
CONTENDER = """
import sys, time, warnings
from rlhelpers.core.errors import RLHelpersError
from rlhelpers.runner.runlock import RunLock
warnings.simplefilter("ignore")
held = []
for line in sys.stdin:
    path, start = line.split()
    lock = RunLock(path)
    while time.time() < float(start):  # all start at once
        pass
    try:
        lock.acquire()
    except RLHelpersError:
        print("refused", flush=True)
    else:
        held.append(lock)
        print("owner", flush=True)
"""


def test_processes_that_find_one_dead_owner_together_make_exactly_one_owner(tmp_path: Path) -> None:
    """Four processes meet the lock of a dead process of this host at the same moment, 40 times over: each time
    exactly one of them owns the run afterwards (the others are refused)."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    contenders = [subprocess.Popen([sys.executable, "-c", CONTENDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, text=True) for _ in range(4)]
    owners = []
    try:
        for trial in range(40):
            run_dir = tmp_path / f"trial-{trial}"
            run_dir.mkdir()
            (run_dir / LOCK_FILE).write_text(json.dumps({"host": socket.gethostname(), "pid": dead.pid,
                                                         "heartbeat": time.time()}))  # as older versions wrote it
            start = time.time() + 0.1
            for proc in contenders:
                assert proc.stdin is not None  # a pipe
                proc.stdin.write(f"{run_dir} {start}\n")
                proc.stdin.flush()
            answers = []
            for proc in contenders:
                assert proc.stdout is not None  # a pipe
                answers.append(proc.stdout.readline())
            owners.append(sum(answer == "owner\n" for answer in answers))
            assert holder(run_dir)["pid"] in {proc.pid for proc in contenders}
    finally:
        for proc in contenders:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=30)
    assert owners == [1] * 40, f"{sum(n != 1 for n in owners)} of 40 trials had {owners} owners"


def test_bidders_that_died_holding_their_bids_do_not_block_the_takeover_of_an_unreadable_lock(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A lock file cut short by a crash, and two takers that died while bidding for it (one before writing its
    bid's record): the next process still takes the run over, and removes the dead bids."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    raw = b'{"host": "colab-vm-1", "pi'
    (tmp_path / LOCK_FILE).write_bytes(raw)
    bid = f"{LOCK_FILE}.{hashlib.sha1(raw).hexdigest()[:16]}"
    (tmp_path / f"{bid}-0").write_text(json.dumps({"host": socket.gethostname(), "pid": dead.pid,
                                                     "heartbeat": time.time()}))
    (tmp_path / f"{bid}-1").write_text("")
    RunLock(tmp_path).acquire()
    assert re.search("taking over run .*: its lock file is unreadable", capsys.readouterr().err)
    assert holder(tmp_path)["pid"] == os.getpid()
    assert [p.name for p in tmp_path.iterdir()] == [LOCK_FILE]
