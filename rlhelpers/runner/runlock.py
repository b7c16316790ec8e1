"""One writer per run: a lock file with the owner's host, pid and a heartbeat.

An owner on this host is alive while its pid is. An owner on another host can only be judged by its
heartbeat (machines share the run directory through Google Drive): it counts as dead once the
heartbeat is ``stale_after_s`` old. After a Colab reconnect the new VM has another host name, so
``acquire`` meets the previous session's lock: it waits until that heartbeat is stale and then takes
over with a warning. If the heartbeat moves while it waits, the owner is alive and ``acquire``
refuses. An owner whose lock was taken over learns it at its next ``heartbeat`` (an
``RLHelpersError``), so two processes never keep writing one run.

Taking a dead owner's lock over is atomic, though it uses only what a synced folder such as Google Drive
guarantees: create-exclusive (``O_EXCL``) and rename. Every record holds a random token, so a lock file's
bytes never recur; each version of the file is unique. To replace a version V, a process must hold a bid
on it: the file ``<lock>.<hash of V>-0``, created with ``O_EXCL``, which one process gets and the others
find existing. Holding it, the process re-reads the lock and only if it is still V writes its own record to
a temporary file and renames that over the lock. Nothing can change V between that re-read and the rename:
V's owner is dead (on another host: stale, trusted to be gone), a fresh owner needs the lock file gone, and
another taker needs the bid. So V is replaced at most once, by a live owner, and every other contender
then finds that owner and is refused (or waits, as for any live owner). A bid file is a record like the
lock's: a bidder that dies holding it is judged dead as an owner is, and the next bid, ``-1``, is
contended for in the same way. Once V is gone its bids can never matter again, and whoever gets past them
removes them. Records of older versions, without a token, are unique by their pid and heartbeat.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import secrets
import socket
import sys
import time
from pathlib import Path

from rlhelpers.core.errors import RLHelpersError, write_error
from rlhelpers.runner.store import LOCK_FILE, write_atomically

POLL_S = 0.05  # between two looks at a bid that another process holds


def _pid_alive(pid: int) -> bool:
    if pid <= 0:  # os.kill(0 or -1, 0) would probe process groups, not a process
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read(path: Path) -> tuple[bytes | None, dict | None]:
    """The bytes and record of a lock or bid file, (None, None) if there is none; the record is {} if it stays
    unreadable.

    Such a file is created with its content in one write, so an empty or partial read can only be a
    creation in progress (retried briefly) or a file damaged by a crash or a sync.
    """
    raw = b""
    for attempt in range(5):
        try:
            raw = path.read_bytes()
            record = json.loads(raw)
        except FileNotFoundError:
            return None, None
        except (OSError, ValueError):
            time.sleep(0.05 * (attempt + 1))
            continue
        return raw, record if isinstance(record, dict) else {}
    return raw, {}


def _age(owner: dict) -> float:
    """Seconds since the heartbeat of a lock record (by this host's clock)."""
    return time.time() - float(owner.get("heartbeat", 0.0))


def holder(owner: dict) -> str:
    """How messages name the process of a lock record: ``host <host>, pid <pid>``."""
    return f"host {owner.get('host')}, pid {owner.get('pid')}"


def _describe(owner: dict) -> str:
    return f"{holder(owner)}, last heartbeat {_age(owner):.0f} s ago"


class RunLock:
    """Exclusive ownership of a run directory, refreshed by ``heartbeat()`` while training."""

    stale_after_s = 300.0  # an owner on another host counts as dead once its heartbeat is this old
    beat_every_s = 30.0  # seconds between two writes of the heartbeat

    def __init__(self, run_dir: str | os.PathLike, file_name: str = LOCK_FILE, what: str | None = None) -> None:
        self.path = Path(run_dir) / file_name
        self.what = what or f"run {self.path.parent.name}"  # how messages name the lock
        self.owner = {"host": socket.gethostname(), "pid": os.getpid(), "token": secrets.token_hex(8)}
        self._last_beat = 0.0

    def _owner_alive(self, owner: dict) -> bool:
        if not owner:
            return False
        if owner.get("host") == self.owner["host"]:
            return _pid_alive(int(owner.get("pid", -1)))
        return _age(owner) < self.stale_after_s

    def _is_self(self, owner: dict) -> bool:
        return owner.get("pid") == self.owner["pid"] and owner.get("host") == self.owner["host"]

    def live_owner(self) -> dict | None:
        """The record (host, pid, heartbeat) of another process that holds this lock and is alive, else None."""
        owner = _read(self.path)[1] or {}
        return owner if not self._is_self(owner) and self._owner_alive(owner) else None

    def _record(self) -> bytes:
        self._last_beat = time.time()
        return json.dumps(dict(self.owner, heartbeat=self._last_beat)).encode()

    def _write(self) -> None:
        try:  # a temporary file of this process's own, as two processes may write a lock at once
            write_atomically(self.path, self._record(), self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp"))
        except OSError as exc:
            raise write_error(str(self.path), exc) from exc

    def _refusal(self, owner: dict, why: str) -> RLHelpersError:
        return RLHelpersError(f"{self.what} is being trained by another process "
                              f"({_describe(owner)}){why}; stop that one first")

    def _wait_until_stale(self, owner: dict) -> bool:
        """Wait until the heartbeat of ``owner`` (on another host) is stale, checking the lock every second.

        True once it is; False if the lock file disappeared meanwhile (try again). Raises if the lock
        changed, which means its owner is alive. The wait never exceeds ``stale_after_s``, even when the
        two hosts' clocks disagree.
        """
        wait_s = self.stale_after_s - max(_age(owner), 0.0)
        print(f"{self.what} is locked by {_describe(owner)}. After a Colab reconnect that is "
              "this run's previous session, on a machine that is gone: it counts as dead once its heartbeat is "
              f"{self.stale_after_s:.0f} s old, so this takes the run over in {wait_s:.0f} s (interrupt to stop).",
              file=sys.stderr, flush=True)
        deadline = time.monotonic() + wait_s
        while (left := deadline - time.monotonic()) > 0:
            time.sleep(min(1.0, left))
            current = _read(self.path)[1]
            if current is None:
                return False
            if current and current != owner:
                raise self._refusal(current, ": its lock changed while this one waited, so it is alive")
        return True

    def _create(self, path: Path) -> bool:
        """Create ``path`` holding this process's record, unless it exists (then False)."""
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        except OSError as exc:
            raise RLHelpersError(f"cannot write in run directory {self.path.parent}: {exc.strerror}; "
                                 "choose a writable --runs-dir") from exc
        try:
            os.write(fd, self._record())
        except OSError:
            path.unlink(missing_ok=True)
            raise
        finally:
            os.close(fd)
        return True

    def _take_over(self, raw: bytes) -> bool:
        """Replace the lock file holding ``raw``, whose owner is dead, by this process's record under a bid
        (see the module docstring); False if the lock changed first."""
        key = hashlib.sha1(raw).hexdigest()[:16]
        bids: list[Path] = []
        try:
            for n in itertools.count():
                bids.append(self.path.with_name(f"{self.path.name}.{key}-{n}"))
                while not self._create(bids[-1]):
                    bidder = _read(bids[-1])[1]
                    if bidder is not None and not self._owner_alive(bidder):
                        break  # its bidder died: contend for the next bid
                    if _read(self.path)[0] != raw:
                        return False
                    time.sleep(POLL_S)
                else:
                    break
            if _read(self.path)[0] != raw:
                return False
            self._write()
            return True
        finally:  # the version ``raw`` is gone now, so its bids can never matter again
            for bid in bids:
                bid.unlink(missing_ok=True)

    def acquire(self) -> None:
        """Take the lock, waiting for an owner on another host to go stale (see the module docstring).

        A live owner on this host, or one on another host whose heartbeat moves, is refused with an
        ``RLHelpersError`` naming it.
        """
        while True:
            if self._create(self.path):
                return
            raw, owner = _read(self.path)
            if raw is None or owner is None:
                continue  # released between the two calls
            if self._is_self(owner):
                self._write()
                return
            if self._owner_alive(owner):
                if owner.get("host") == self.owner["host"]:
                    raise self._refusal(owner, "")
                if not self._wait_until_stale(owner):
                    continue
            if self._take_over(raw):  # one plain line: what happened is expected after a reconnect
                print(f"taking over {self.what} from dead owner ({_describe(owner)})" if owner
                      else f"taking over {self.what}: its lock file is unreadable", file=sys.stderr, flush=True)
                return

    def heartbeat(self) -> None:
        """Refresh the heartbeat if ``beat_every_s`` has passed since the last one.

        Raises ``RLHelpersError`` if another process has taken the lock over (it judged this one dead):
        this process must stop writing the run.
        """
        if time.time() - self._last_beat < self.beat_every_s:
            return
        owner = _read(self.path)[1]
        if owner and not self._is_self(owner):
            raise RLHelpersError(f"{self.what} was taken over by {holder(owner)}, which found this process's "
                                 "heartbeat stale; this process stops and leaves the run to it")
        self._write()

    def release(self) -> None:
        """Give the lock up if this process still holds it."""
        if self._is_self(_read(self.path)[1] or {}):
            self.path.unlink(missing_ok=True)
