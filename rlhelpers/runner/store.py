"""Everything one run keeps on disk, written crash-safely and read back as one typed ``RunRecord``.

``<runs_dir>/<arm>_seed-<seed>/``::

    checkpoint-000000300000.pt        the training state and the run's record (``RunDirectory.save_checkpoint``)
    eval_history.json                 the run's record: config, provenance, W&B run id and every evaluation
    metrics.jsonl                     every metric sent to W&B, one JSON object per line (``append_metrics``)
    snapshots/model-000001000000.pt   model weights only, for the analysis
    owner.json                        the single-writer lock (``runlock``)
    train.log                         the output of a run that the campaign started
    policy.pt, policy_rescore.json    the exported float16 policy and its re-score (the study's ``playback``), and
    policy_rescore_greedy.json        its re-score with greedy actions

``write_atomically`` writes to a temporary file, fsyncs it and renames it over the target, so a kill at any moment
leaves the old file or the new one, never a partial file under the target's name. A checkpoint or snapshot is
written and verified in a local staging directory first, and older checkpoints are pruned only once the new one is
in place, so a kill (or a Google Drive mount that uploads late or does not rename atomically) leaves at least the
previous good checkpoint; on resume the newest checkpoint that loads wins, and metrics logged after it are dropped,
so a step never appears twice. A checkpoint loads with ``torch.load(weights_only=True)``. No save, check or load
here draws from the random generators that training uses (a test holds them unchanged).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import torch

from rlhelpers.core.errors import RLHelpersError, write_error
from rlhelpers.core.evaluation import Evaluation
from rlhelpers.core.networks import ActorCritic, build_model
from rlhelpers.runner.config import TrainConfig, config_differences, exceeds, parse_run_name

HISTORY_FILE = "eval_history.json"
METRICS_FILE = "metrics.jsonl"
GAMES_FILE = "games.jsonl"  # the training games each log line or checkpoint saw end, by env
LOCK_FILE = "owner.json"
TRAIN_LOG = "train.log"
POLICY_FILE = "policy.pt"
RESCORE_FILE = "policy_rescore.json"
GREEDY_RESCORE_FILE = "policy_rescore_greedy.json"
SNAPSHOT_DIR = "snapshots"
CAMPAIGN_LOCK = "campaign.json"  # in the runs directory: one campaign at a time
TMP_SUFFIX = ".tmp"
BROKEN_SUFFIX = ".broken"
CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d{12})\.pt$")
SNAPSHOT_PATTERN = re.compile(r"^model-(\d{12})\.pt$")
# Temporary files of write_atomically (checkpoints, snapshots, history, metrics, games) and RunLock
# (owner.json.<pid>.tmp).
STALE_TMP_PATTERN = re.compile(rf"^(checkpoint-\d{{12}}\.pt|model-\d{{12}}\.pt|{re.escape(HISTORY_FILE)}|"
                               rf"{re.escape(METRICS_FILE)}|{re.escape(GAMES_FILE)}|{re.escape(LOCK_FILE)}\.\d+)\.tmp$")


def checkpoint_name(step: int) -> str:
    """File name of the checkpoint taken at environment step ``step``."""
    return f"checkpoint-{step:012d}.pt"


def snapshot_name(step: int) -> str:
    """File name of the model snapshot taken at environment step ``step``."""
    return f"model-{step:012d}.pt"


def write_atomically(path: str | os.PathLike, content: bytes | Callable[[IO[bytes]], object],
                     tmp: str | os.PathLike | None = None) -> None:
    """Write ``content`` (bytes, or a function that writes into the open file) to ``tmp`` (default:
    ``path`` + ``.tmp``), fsync, then rename it onto ``path``. On failure the temporary file is removed and
    ``path`` is left as it was."""
    path = Path(path)
    tmp = Path(tmp) if tmp is not None else path.with_name(path.name + TMP_SUFFIX)
    try:
        with open(tmp, "wb") as f:
            content(f) if callable(content) else f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):  # the rename made durable, where a directory can be opened and fsynced
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@dataclass(frozen=True)
class MetricsLine:
    """One line of a metrics log (metrics.jsonl, games.jsonl): the step it was logged at, the wall-clock time and
    each value by its name (a number, None for a non-finite one; games.jsonl's ``games``, [env, return, length] each).
    Written and read through ``to_dict`` and ``from_dict``, each value where it stood."""

    global_step: int
    time: float
    values: dict[str, Any]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MetricsLine:
        values = dict(data)
        return cls(values.pop("global_step"), values.pop("time"), values)

    def to_dict(self) -> dict[str, Any]:
        return {"global_step": self.global_step, "time": self.time, **self.values}


def _metrics_line(line: str) -> MetricsLine | None:
    try:
        data = json.loads(line)
    except json.JSONDecodeError:
        return None  # the partial last line of a writer killed mid-append
    return MetricsLine.from_dict(data) if isinstance(data, dict) and {"global_step", "time"} <= data.keys() else None


def read_metrics(path: Path) -> list[MetricsLine]:
    """Every complete line of a metrics log, in file order ([] when there is none)."""
    if not path.exists():
        return []
    return [m for m in map(_metrics_line, path.read_text().splitlines()) if m is not None]


def drop_metrics_after(path: Path, step: int) -> None:
    """Keep only the complete lines of the metrics log ``path`` with ``global_step <= step`` (the file is rewritten
    only if one goes)."""
    if not path.exists():
        return
    lines = path.read_text().splitlines()
    kept = [line for line in lines if (m := _metrics_line(line)) is not None and m.global_step <= step]
    if len(kept) < len(lines):
        write_atomically(path, "".join(line + "\n" for line in kept).encode())


def append_metrics(path: Path, metrics: dict[str, Any], step: int) -> None:
    """Append one line to the metrics log ``path``: ``global_step``, ``time`` and ``metrics`` (non-finite floats
    as null)."""
    line = MetricsLine(step, round(time.time(), 3), {key: None if isinstance(value, float) and not math.isfinite(value)
                                                      else value for key, value in metrics.items()})
    try:
        with open(path, "a") as f:
            f.write(json.dumps(line.to_dict()) + "\n")
    except OSError as exc:
        raise write_error(str(path), exc) from exc


@dataclass(frozen=True, kw_only=True)
class Provenance:
    """One training session as the run's record keeps it: from which step and when, with which code, libraries,
    hardware and numerics. Each version recorded some of the last fields only: ``precision`` (while a run could
    train in bfloat16), then neither it nor the float32 settings, then ``float32_matmul_precision`` and
    ``cudnn_tf32``; the ones a session lacks are None and not written, so each shape reads and writes back as it
    was, its fields in their order."""

    start_step: int
    start_time: float
    rlhelpers: str | None
    git_commit: str | None
    git_dirty: bool | None
    python: str
    torch: str
    gymnasium: str | None
    ale_py: str | None
    numpy: str | None
    device: str
    device_name: str
    cpu_count: int | None
    precision: str | None = None
    torch_threads: int
    float32_matmul_precision: str | None = None
    cudnn_tf32: bool | None = None
    env_threads: int

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Provenance:
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return {name: value for name, value in asdict(self).items() if value is not None or name not in SHAPE_FIELDS}


SHAPE_FIELDS = ("precision", "float32_matmul_precision", "cudnn_tf32")  # what some versions' sessions lack


@dataclass(frozen=True)
class ConfigShape:
    """How an older version saved a run's config, so that its file writes back as it was: the keys in their order
    (today's fields it lacked are absent) and the values of keys this version no longer saves (``precision``, from
    when a run could train in bfloat16; ``runs_dir``, before a saved path was found to go stale)."""

    keys: tuple[str, ...]
    retired: dict[str, Any]


def _typed_config(saved: dict[str, Any]) -> dict[str, Any]:
    """The ``config`` and ``config_shape`` of a record whose file saved the config ``saved``."""
    config = TrainConfig.from_dict(saved)
    today = config.to_dict()
    return {"config": config, "config_shape": None if list(saved) == list(today) else ConfigShape(
        tuple(saved), {name: value for name, value in saved.items() if name not in today})}


@dataclass(frozen=True)
class RunRecord:
    """A run as its files record it: its name, the config it was saved with (the fields an older version did not
    save take today's defaults, which are what it did; a run not started has the defaults), every evaluation, its
    W&B run id and the provenance of each training session; ``config_shape`` is how an older version saved the
    config (None: as today). ``path`` is its directory (None for a record built from a dict alone). Written as
    eval_history.json and into every checkpoint, and read back from either, through ``to_dict`` and ``from_dict``."""

    name: str
    path: Path | None = None
    config: TrainConfig = field(default_factory=TrainConfig)
    evaluations: tuple[Evaluation, ...] = ()
    wandb_run_id: str | None = None
    sessions: tuple[Provenance, ...] = ()
    config_shape: ConfigShape | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any], path: str | os.PathLike | None = None) -> RunRecord:
        """The record of an eval_history.json's contents; its name defaults to the directory's."""
        path = Path(path) if path is not None else None
        return cls(name=data.get("run_name") or (path.name if path is not None else ""), path=path,
                   **_typed_config(data.get("config") or {}), wandb_run_id=data.get("wandb_run_id"),
                   evaluations=tuple(Evaluation.from_dict(point) for point in data.get("history") or []),
                   sessions=tuple(map(Provenance.from_dict, data.get("provenance") or ())))

    def to_dict(self) -> dict[str, Any]:
        """The contents of eval_history.json."""
        return {"run_name": self.name, "wandb_run_id": self.wandb_run_id, "config": self.saved_config(),
                "provenance": [s.to_dict() for s in self.sessions], "history": [e.to_dict() for e in self.evaluations]}

    def saved_config(self) -> dict[str, Any]:
        """The config as its file holds it: today's fields, or in the shape of the version that saved it."""
        if self.config_shape is None:
            return self.config.to_dict()
        values = {**self.config.to_dict(), **self.config_shape.retired}
        return {name: values[name] for name in self.config_shape.keys}

    @classmethod
    def from_checkpoint(cls, state: dict[str, Any], path: Path) -> RunRecord:
        """The record that a checkpoint's training state holds."""
        return cls(name=path.name, path=path, **_typed_config(state["config"]), wandb_run_id=state.get("wandb_run_id"),
                   evaluations=tuple(Evaluation.from_dict(point) for point in state.get("eval_history", [])),
                   sessions=tuple(map(Provenance.from_dict, state.get("sessions", ()))))

    def checkpoint_entries(self) -> dict[str, Any]:
        """What a checkpoint keeps of the record beside the training state, under the names it saves them."""
        return {"wandb_run_id": self.wandb_run_id, "eval_history": [e.to_dict() for e in self.evaluations],
                "sessions": [s.to_dict() for s in self.sessions]}

    @property
    def arm(self) -> str:
        """What the run is a seed of: its algorithm, or ``<algo>-<variant>`` (its name without the seed)."""
        return parse_run_name(self.name)[0]

    @property
    def seed(self) -> int:
        """The run's seed, from its name."""
        return parse_run_name(self.name)[1]

    @property
    def last(self) -> Evaluation | None:
        """The newest evaluation, None before the first."""
        return self.evaluations[-1] if self.evaluations else None

    @property
    def best(self) -> Evaluation | None:
        """The evaluation with the highest mean return (the first of equals), None before the first."""
        return max(self.evaluations, key=lambda e: e.mean, default=None)

    def first_step_above(self, level: float) -> int | None:
        """The first evaluation step whose mean exceeds ``level``, None if none does."""
        return next((e.step for e in self.evaluations if e.mean > level), None)

    def setting(self, name: str, value: Any = None) -> Any:
        """``value``, or when it is None the run's own (its config's field ``name``)."""
        return value if value is not None else getattr(self.config, name)

    def stopped_early(self, stop_return: float | None = None) -> bool:
        """Whether the last evaluation exceeded ``stop_return`` (default: the run's own): the run stopped
        there and its policy is frozen."""
        return self.last is not None and exceeds(self.last.mean, self.setting("stop_return", stop_return))

    def finished(self, total_timesteps: int | None = None, stop_return: float | None = None) -> bool:
        """Whether the run is done: its budget ``total_timesteps`` is spent or it stopped early at
        ``stop_return`` (both default to the run's own config)."""
        total = self.setting("total_timesteps", total_timesteps)
        return self.last is not None and (self.stopped_early(stop_return)
                                          or (total is not None and self.last.step >= total))

    def metrics(self) -> list[MetricsLine]:
        """Every complete line of the run's metrics.jsonl, in file order ([] when there is none)."""
        return read_metrics(self.path / METRICS_FILE) if self.path is not None else []


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


def load_checkpoint_file(path: Path) -> dict[str, Any]:
    """Load one checkpoint with ``weights_only=True``; raise ``RLHelpersError`` if it is truncated or corrupt.

    The file is read first, so that a read error (a Drive mount that dropped) propagates as the ``OSError``
    it is instead of marking a good checkpoint as broken; only what fails to load from its bytes is damage.
    """
    state = _torch_load(io.BytesIO(Path(path).read_bytes()), f"checkpoint {path}")
    if not isinstance(state, dict) or "num_timesteps" not in state:
        raise RLHelpersError(f"checkpoint {path} does not hold a training state")
    return state


def check_resumable(saved: RunRecord | None, config: TrainConfig, where: Path) -> None:
    """Refuse to resume the run in ``where``, whose history or checkpoint holds the record ``saved`` (None: nothing
    saved yet), with another ``config``."""
    if saved is None:
        return
    retired = saved.config_shape.retired if saved.config_shape is not None else {}
    if differences := config_differences(saved.config, config, retired.get("precision", "fp32")):
        raise RLHelpersError(
            f"run directory {where} holds a run with a different config ({'; '.join(differences)}); "
            "use the saved settings, another --runs-dir, or delete that directory to start over")


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


class RunDirectory:
    """Reads and writes the files of one run directory."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.history_path = self.path / HISTORY_FILE
        self.metrics_path = self.path / METRICS_FILE
        self.games_path = self.path / GAMES_FILE
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
                write_atomically(target, lambda dst: shutil.copyfileobj(src, dst, 1 << 20))
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

    def saved_record(self) -> RunRecord | None:
        """The record of the run's history; None for a new run, and for an unreadable history (a copy that Google
        Drive synced only in part), for ``resume`` checks the newest checkpoint's config under the lock."""
        with contextlib.suppress(RLHelpersError):
            return self.read_record()
        return None

    def resume(self, config: TrainConfig) -> tuple[dict[str, Any] | None, RunRecord | None]:
        """What the run resumes from, under its lock: the newest checkpoint that loads (None for none) and the
        saved record (None for none).

        Clears a killed writer's leftovers first. An unreadable history is left to be rebuilt from the
        checkpoint (said on stderr); checkpoints newer than the one that loads (they did not) are set aside
        as ``.broken``, and one checkpoint too many (a writer killed between its rename and its pruning)
        is pruned. A checkpoint saved with another config than ``config`` is refused before any of that.
        """
        self.remove_stale_files()
        state = self.load_latest_checkpoint()
        try:
            record = self.read_record()
        except RLHelpersError as exc:
            if state is None:
                raise
            print(f"{exc}; rebuilding it from the checkpoint of step {state['num_timesteps']:,}", file=sys.stderr)
            record = None
        if state is not None:
            check_resumable(RunRecord.from_checkpoint(state, self.path), config, self.path)
            # Checkpoints newer than the one that loads did not load: renamed to <name>.broken, so that their
            # names are written afresh, never over a broken file (on Drive an overwrite may sync late), and the
            # broken files stay for a look.
            for step, path in self.checkpoints():
                if step > state["num_timesteps"]:
                    os.replace(path, path.with_name(path.name + BROKEN_SUFFIX))
                    print(f"moved the broken {path.name} aside as {path.name}{BROKEN_SUFFIX}", file=sys.stderr)
            self.prune(int(state["num_timesteps"]), config.keep_checkpoints)
        return state, record

    def read_record(self) -> RunRecord | None:
        """The record of eval_history.json, or None if the run has none yet; an unreadable one raises
        ``RLHelpersError`` naming it and the remedy."""
        if not self.history_path.exists():
            return None
        try:
            return RunRecord.from_dict(json.loads(self.history_path.read_text()), self.path)
        except (OSError, json.JSONDecodeError) as exc:
            remedy = ("training the run again (the same command) rebuilds it from its newest checkpoint"
                      if self.checkpoints() else "restore it or delete the run directory to start over")
            raise RLHelpersError(f"{self.history_path} is unreadable ({exc}); {remedy}") from exc

    def write_record(self, record: RunRecord) -> None:
        """Atomically replace eval_history.json with ``record``."""
        try:
            write_atomically(self.history_path, json.dumps(record.to_dict(), indent=1).encode())
        except OSError as exc:
            raise write_error(str(self.history_path), exc) from exc


def run_dirs(runs_dir: str | os.PathLike) -> list[Path]:
    """Every sub-directory of ``runs_dir`` that holds an eval_history.json, in name order."""
    return sorted(path.parent for path in Path(runs_dir).glob(f"*/{HISTORY_FILE}"))


def read_run(path: str | os.PathLike) -> RunRecord | None:
    """The record of the run directory ``path``, or None if it has no eval_history.json yet. An unreadable
    one raises ``RLHelpersError`` naming it and the remedy."""
    return RunDirectory(path).read_record()


def read_runs(runs_dir: str | os.PathLike, seeds: Collection[int] | None = None) -> list[RunRecord]:
    """The records of every run directory under ``runs_dir`` (``run_dirs``), in name order; with ``seeds``,
    only the runs of those seeds."""
    records = [record for path in run_dirs(runs_dir) if (record := read_run(path)) is not None]
    return records if seeds is None else [record for record in records if record.seed in seeds]
