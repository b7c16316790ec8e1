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
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunLock:
    """Exclusive ownership of a run directory, refreshed by ``heartbeat()`` while training."""

    def __init__(self, run_dir: str | os.PathLike, stale_after_s: float = 300.0, beat_every_s: float = 30.0) -> None:
        self.path = Path(run_dir) / LOCK_FILE
        self.stale_after_s = stale_after_s
        self.beat_every_s = beat_every_s
        self.owner = {"host": socket.gethostname(), "pid": os.getpid()}
        self._last_beat = 0.0

    def _read(self) -> dict | None:
        try:
            return json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, json.JSONDecodeError):
            return {}

    def _owner_alive(self, owner: dict) -> bool:
        if not owner:
            return False
        if owner.get("host") == self.owner["host"]:
            return _pid_alive(int(owner.get("pid", -1)))
        return time.time() - float(owner.get("heartbeat", 0.0)) < self.stale_after_s

    def _write(self) -> None:
        record = dict(self.owner, heartbeat=time.time())
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(record))
        os.replace(tmp, self.path)
        self._last_beat = record["heartbeat"]

    def acquire(self) -> None:
        """Take the lock, or raise ``RLHelpersError`` naming the living owner."""
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            os.close(fd)
        except FileExistsError:
            owner = self._read() or {}
            is_self = owner.get("pid") == self.owner["pid"] and owner.get("host") == self.owner["host"]
            if not is_self and self._owner_alive(owner):
                age = time.time() - float(owner.get("heartbeat", 0.0))
                raise RLHelpersError(
                    f"run {self.path.parent.name} is being trained by another process "
                    f"(host {owner.get('host')}, pid {owner.get('pid')}, last heartbeat {age:.0f} s ago); "
                    "stop that one first, or wait until its heartbeat is "
                    f"{self.stale_after_s:.0f} s old if it died on another machine")
            if not is_self and owner:
                warnings.warn(f"taking over run {self.path.parent.name} from dead owner "
                              f"(host {owner.get('host')}, pid {owner.get('pid')})", stacklevel=2)
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
