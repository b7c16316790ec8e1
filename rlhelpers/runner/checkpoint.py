"""Crash-safe storage of one run: step-numbered checkpoints and the plain-JSON evaluation history, in the
run directory that ``files`` lays out (a checkpoint loads with ``torch.load(weights_only=True)``).

A checkpoint or snapshot is written and verified in a local staging directory, then copied into the
run directory under a temporary name, fsynced and renamed; older checkpoints are pruned only after the
new one is in place. Nothing is overwritten in place, so a kill at any moment (or a Google Drive mount
that uploads late or does not rename atomically) leaves at least the previous good checkpoint, and
never an incomplete file under a checkpoint's name. On resume the newest checkpoint that loads wins.
No save, check or load here draws from the random generators that training uses (a test holds them unchanged).

Test-only hook: when the environment variable ``RLHELPERS_TEST_WRITE_DELAY_S`` is set, the copy of a
checkpoint or snapshot into the run directory pauses that many seconds halfway, so a test can kill mid-write.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from rlhelpers.core.errors import RLHelpersError, write_error
from rlhelpers.core.networks import ActorCritic, build_model
from rlhelpers.runner.config import TrainConfig, config_differences
from rlhelpers.runner.files import (
    CHECKPOINT_PATTERN,
    HISTORY_FILE,
    SNAPSHOT_DIR,
    SNAPSHOT_PATTERN,
    STALE_TMP_PATTERN,
    TMP_SUFFIX,
    checkpoint_name,
    snapshot_name,
    write_atomically,
)

TEST_WRITE_DELAY_ENV = "RLHELPERS_TEST_WRITE_DELAY_S"
BROKEN_SUFFIX = ".broken"


def _torch_load(source: str | Path | io.BytesIO, name: str, remedy: str = "") -> Any:
    """``torch.load`` onto the CPU with ``weights_only=True``; what does not load raises ``RLHelpersError``
    "<name> does not load (<why>)<remedy>" in one line: torch's messages add paragraphs of advice (about
    ``weights_only``, about filing an issue) that do not apply to a damaged file, so only the cause's first
    sentence is kept."""
    try:
        return torch.load(source, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises EOFError, OSError, RuntimeError, UnpicklingError, ... on damage
        text = str(exc).split("WeightsUnpickler error:")[-1]
        cause = next((line.strip() for line in text.splitlines() if line.strip()), "").split(". ")[0]
        failure = f"{type(exc).__name__}: {cause}" if cause else type(exc).__name__
        raise RLHelpersError(f"{name} does not load ({failure}){remedy}") from exc


def load_model(path: str | Path) -> tuple[ActorCritic, TrainConfig, int]:
    """The model (float32 weights), config and step of a saved model: a snapshot or an exported policy."""
    saved = _torch_load(path, str(path), "; delete it, or restore it from a backup")
    config = TrainConfig.from_dict(saved["config"])
    # Building a network draws its initial weights from torch's global generator, which is the training's
    # random stream: fork it, so that loading (and verifying a written snapshot) leaves that stream as it was.
    with torch.random.fork_rng(devices=[]):
        model = build_model(tuple(saved["obs_shape"]), saved["n_actions"], config.algo, config.hidden_size)
    model.load_state_dict(saved["model"])  # copies float16 weights into the float32 parameters
    return model, config, int(saved["step"])


def _copy_file(src: Any, dst: Any) -> None:
    """Copy file ``src`` into file ``dst``, pausing halfway when the test-only delay hook is set."""
    delay = float(os.environ.get(TEST_WRITE_DELAY_ENV) or 0)
    if delay > 0:
        dst.write(src.read(os.fstat(src.fileno()).st_size // 2))
        dst.flush()
        time.sleep(delay)
    shutil.copyfileobj(src, dst, 1 << 20)


def _empty_and_unlink(path: Path) -> None:
    """Truncate ``path`` to zero bytes, then delete it (nothing happens if it is gone already).

    On a Google Drive mount a deleted file goes to the Drive Trash and counts against the storage
    quota for 30 days; truncated first, it counts as nothing.
    """
    with contextlib.suppress(FileNotFoundError):
        os.truncate(path, 0)
        path.unlink()


def _step_files(folder: Path, pattern: re.Pattern[str]) -> list[tuple[int, Path]]:
    """(step, path) of the files in ``folder`` (none if it does not exist) whose name ``pattern`` numbers with a
    step, oldest first."""
    return sorted((int(match.group(1)), entry) for entry in folder.glob("*.pt") if (match := pattern.match(entry.name)))


def check_resumable(saved: dict[str, Any] | None, config: TrainConfig, where: Path) -> None:
    """Refuse to resume the run in ``where``, saved with the config ``saved`` (None: nothing saved yet), with
    another ``config``."""
    if saved is not None and (differences := config_differences(saved, config)):
        raise RLHelpersError(
            f"run directory {where} holds a run with a different config ({'; '.join(differences)}); "
            "use the saved settings, another --runs-dir, or delete that directory to start over")


def load_checkpoint_file(path: Path) -> dict[str, Any]:
    """Load one checkpoint with ``weights_only=True``; raise ``RLHelpersError`` if it is truncated or corrupt.

    The file is read first, so that a read error (a Drive mount that dropped) propagates as the ``OSError``
    it is instead of marking a good checkpoint as broken; only what fails to load from its bytes is damage.
    """
    state = _torch_load(io.BytesIO(Path(path).read_bytes()), f"checkpoint {path}")
    if not isinstance(state, dict) or "num_timesteps" not in state:
        raise RLHelpersError(f"checkpoint {path} does not hold a training state")
    return state


class RunDirectory:
    """Reads and writes the files of one run directory."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.history_path = self.path / HISTORY_FILE
        # The local directory where this run's checkpoints are written and verified before the copy.
        key = hashlib.sha1(str(self.path.resolve()).encode()).hexdigest()[:16]
        self.staging_path = Path(tempfile.gettempdir()) / "rlhelpers-staging" / key

    def remove_stale_files(self) -> None:
        """Delete temporary files left by a killed writer; call it while holding the run's lock."""
        shutil.rmtree(self.staging_path, ignore_errors=True)
        for entry in [*self.path.glob("*.tmp"), *(self.path / SNAPSHOT_DIR).glob("*.tmp")]:
            if STALE_TMP_PATTERN.match(entry.name):
                _empty_and_unlink(entry)  # emptied first, as pruned checkpoints are, for the Drive Trash

    def create(self) -> None:
        """Create the directory, or explain why it cannot be created."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RLHelpersError(f"cannot create run directory {self.path}: {exc.strerror}; "
                                 "choose a writable --runs-dir") from exc

    def checkpoints(self) -> list[tuple[int, Path]]:
        """(step, path) of every step-numbered checkpoint present, newest first."""
        return _step_files(self.path, CHECKPOINT_PATTERN)[::-1]

    def snapshots(self) -> list[tuple[int, Path]]:
        """(step, path) of every model snapshot present, oldest first."""
        return _step_files(self.path / SNAPSHOT_DIR, SNAPSHOT_PATTERN)

    def _save_verified(self, obj: dict[str, Any], target: Path, verify: Callable[[Path], object], what: str,
                       note: str = "") -> None:
        """Save ``obj`` in the local staging dir, ``verify`` that it loads, then copy it durably to ``target``;
        a failure raises ``write_error`` for the ``what`` (checkpoint, snapshot) named ``target``."""
        local = self.staging_path / target.name
        try:
            target.parent.mkdir(exist_ok=True)
            self.staging_path.mkdir(parents=True, exist_ok=True)
            torch.save(obj, local)
            verify(local)
            with open(local, "rb") as src:
                write_atomically(target, lambda dst: _copy_file(src, dst))
        except (OSError, RuntimeError, RLHelpersError) as exc:
            # torch.save reports a full disk as a RuntimeError ("unexpected pos ...").
            raise write_error(f"{what} {target}", exc, note) from exc
        finally:  # nothing is left in the temp directory
            shutil.rmtree(self.staging_path, ignore_errors=True)

    def save_checkpoint(self, state: dict[str, Any], step: int, keep: int) -> None:
        """Write ``state`` as the checkpoint of ``step`` (verified, atomic), then ``prune`` to the newest ``keep``."""
        self._save_verified(state, self.path / checkpoint_name(step), load_checkpoint_file, "checkpoint",
                            "the previous checkpoint is intact")
        self.prune(step, keep)

    def save_snapshot(self, snapshot: dict[str, Any], step: int) -> None:
        """Write ``snapshot`` (model weights and what rebuilds the model) as ``snapshots/model-<step>.pt``,
        verified and atomic like a checkpoint."""
        self._save_verified(snapshot, self.path / SNAPSHOT_DIR / snapshot_name(step), load_model, "snapshot")

    def prune(self, step: int, keep: int) -> None:
        """Delete checkpoints older than ``step`` beyond the newest ``keep`` up to and including ``step``.

        Checkpoints newer than ``step`` are left alone: after a resume from ``step`` they can only be
        broken files that were skipped, and they must not push good checkpoints out.
        """
        older = [path for old_step, path in self.checkpoints() if old_step < step]
        for old in older[max(keep - 1, 0):]:
            # Renamed to .tmp first, so that a kill never leaves an empty file under a checkpoint's name,
            # only a .tmp file that remove_stale_files clears.
            doomed = old.with_name(old.name + TMP_SUFFIX)
            os.replace(old, doomed)
            _empty_and_unlink(doomed)

    def load_latest_checkpoint(self) -> dict[str, Any] | None:
        """The newest checkpoint that loads, or None if there is none at all.

        Each broken checkpoint is skipped with a one-line warning; if checkpoints exist but none loads, raise.
        """
        candidates = self.checkpoints()
        for i, (_, path) in enumerate(candidates):
            try:
                return load_checkpoint_file(path)
            except RLHelpersError as exc:
                warnings.warn(f"{exc}; falling back to an older checkpoint" if i + 1 < len(candidates) else str(exc),
                              stacklevel=2)
        if candidates:
            raise RLHelpersError(f"no checkpoint in {self.path} loads ({', '.join(p.name for _, p in candidates)}); "
                                 "restore one from a backup or delete the run directory to start over")
        return None

    def saved_config(self) -> dict[str, Any] | None:
        """The config the run was saved with (None for a new run): its history's, or the newest loadable
        checkpoint's when the history is unreadable (a copy that Google Drive synced only in part)."""
        try:
            record = self.read_history()
        except RLHelpersError:
            if not self.checkpoints():
                raise
            with warnings.catch_warnings():  # quietly: the load under the lock reports the broken ones
                warnings.simplefilter("ignore")
                return self.load_latest_checkpoint()["config"]
        return None if record is None else record.get("config", {})

    def resume(self, config: TrainConfig) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """What the run resumes from, under its lock: the newest checkpoint that loads (None for none) and the
        saved history (None for none).

        Clears a killed writer's leftovers first. An unreadable history is left to be rebuilt from the
        checkpoint (said on stderr); checkpoints newer than the one that loads (they did not) are set aside
        as ``.broken``, and one checkpoint too many (a writer killed between its rename and its pruning)
        is pruned. A checkpoint saved with another config than ``config`` is refused before any of that.
        """
        self.remove_stale_files()
        state = self.load_latest_checkpoint()
        try:
            history = self.read_history()
        except RLHelpersError as exc:
            if state is None:
                raise
            print(f"{exc}; rebuilding it from the checkpoint of step {state['num_timesteps']:,}", file=sys.stderr)
            history = None
        if state is not None:
            check_resumable(state["config"], config, self.path)
            # Checkpoints newer than the one that loads did not load: renamed to <name>.broken, so that their
            # names are written afresh, never over a broken file (on Drive an overwrite may sync late), and the
            # broken files stay for a look.
            for step, path in self.checkpoints():
                if step > state["num_timesteps"]:
                    os.replace(path, path.with_name(path.name + BROKEN_SUFFIX))
                    print(f"moved the broken {path.name} aside as {path.name}{BROKEN_SUFFIX}", file=sys.stderr)
            self.prune(int(state["num_timesteps"]), config.keep_checkpoints)
        return state, history

    def read_history(self) -> dict[str, Any] | None:
        """Contents of eval_history.json, or None if the run has none yet."""
        if not self.history_path.exists():
            return None
        try:
            return json.loads(self.history_path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            remedy = ("training the run again (the same command) rebuilds it from its newest checkpoint"
                      if self.checkpoints() else "restore it or delete the run directory to start over")
            raise RLHelpersError(f"{self.history_path} is unreadable ({exc}); {remedy}") from exc

    def write_history(self, record: dict[str, Any]) -> None:
        """Atomically replace eval_history.json with ``record``."""
        try:
            write_atomically(self.history_path, json.dumps(record, indent=1).encode())
        except OSError as exc:
            raise write_error(str(self.history_path), exc) from exc
