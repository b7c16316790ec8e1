"""One writer per run: a lock file with the owner's host, pid and a heartbeat.

A second process that opens a run whose owner is alive is refused with the owner's details. The
owner counts as dead when it ran on this host and its pid is gone, or when its heartbeat is older
than ``stale_after_s`` (the only test possible across machines sharing a Drive folder); a dead
owner's lock is taken over with a warning.
"""

from __future__ import annotations

import json
import os
import socket
import time
import warnings
from pathlib import Path

from rlhelpers.errors import RLHelpersError

LOCK_FILE = "owner.json"


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


class RunLock:
    """Exclusive ownership of a run directory, refreshed by ``heartbeat()`` while training."""

    def __init__(self, run_dir: str | os.PathLike, stale_after_s: float = 300.0, beat_every_s: float = 30.0,
                 file_name: str = LOCK_FILE) -> None:
        self.path = Path(run_dir) / file_name
        self.stale_after_s = stale_after_s
        self.beat_every_s = beat_every_s
        self.owner = {"host": socket.gethostname(), "pid": os.getpid()}
        self._last_beat = 0.0

    def _read(self) -> dict | None:
        """The lock's record, None if there is no lock file, {} if it stays unreadable.

        A lock file is created with its content in one write, so an empty or partial read can only
        be a creation in progress (retried briefly) or a file damaged by a crash or a sync.
        """
        for attempt in range(5):
            try:
                record = json.loads(self.path.read_text())
            except FileNotFoundError:
                return None
            except (OSError, json.JSONDecodeError):
                time.sleep(0.05 * (attempt + 1))
                continue
            return record if isinstance(record, dict) else {}
        return {}

    def _owner_alive(self, owner: dict) -> bool:
        if not owner:
            return False
        if owner.get("host") == self.owner["host"]:
            return _pid_alive(int(owner.get("pid", -1)))
        return time.time() - float(owner.get("heartbeat", 0.0)) < self.stale_after_s

    def live_owner(self) -> dict | None:
        """The record (host, pid, heartbeat) of another process that holds this lock and is alive, else None."""
        owner = self._read() or {}
        is_self = owner.get("pid") == self.owner["pid"] and owner.get("host") == self.owner["host"]
        return owner if owner and not is_self and self._owner_alive(owner) else None

    def _record(self) -> bytes:
        now = time.time()
        self._last_beat = now
        return json.dumps(dict(self.owner, heartbeat=now)).encode()

    def _write(self) -> None:
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_bytes(self._record())
            os.replace(tmp, self.path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise RLHelpersError(f"cannot write {self.path}: {exc.strerror or exc}; "
                                 "free disk space or choose a writable --runs-dir") from exc

    def acquire(self) -> None:
        """Take the lock, or raise ``RLHelpersError`` naming the living owner."""
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            try:
                os.write(fd, self._record())
            except OSError:
                self.path.unlink(missing_ok=True)
                raise
            finally:
                os.close(fd)
            return
        except FileExistsError:
            owner = self._read() or {}
            is_self = owner.get("pid") == self.owner["pid"] and owner.get("host") == self.owner["host"]
            age = time.time() - float(owner.get("heartbeat", 0.0))
            if not is_self and self._owner_alive(owner):
                raise RLHelpersError(
                    f"run {self.path.parent.name} is being trained by another process "
                    f"(host {owner.get('host')}, pid {owner.get('pid')}, last heartbeat {age:.0f} s ago); "
                    "stop that one first, or wait until its heartbeat is "
                    f"{self.stale_after_s:.0f} s old if it died on another machine") from None
            if not is_self:
                warnings.warn(f"taking over run {self.path.parent.name} from dead owner "
                              f"(host {owner.get('host')}, pid {owner.get('pid')}, last heartbeat {age:.0f} s ago)"
                              if owner else f"taking over run {self.path.parent.name}: its lock file is unreadable",
                              stacklevel=2)
        except OSError as exc:
            raise RLHelpersError(f"cannot write in run directory {self.path.parent}: {exc.strerror}; "
                                 "choose a writable --runs-dir") from exc
        self._write()

    def heartbeat(self) -> None:
        """Refresh the heartbeat if ``beat_every_s`` has passed since the last one."""
        if time.time() - self._last_beat >= self.beat_every_s:
            self._write()

    def release(self) -> None:
        """Give the lock up if this process still holds it."""
        owner = self._read()
        if owner and owner.get("pid") == self.owner["pid"] and owner.get("host") == self.owner["host"]:
            self.path.unlink(missing_ok=True)
