"""Weights & Biases: one run logged against the environment step, and runs published from their files.

Metrics are logged with ``global_step`` as their x axis (``define_metric``), never through
``wandb.log(step=...)``: after a resume from an older checkpoint the environment step goes back a
little, which W&B's own step counter would silently drop, while a ``global_step`` value is kept.
Training (``Tracker``) and publishing (``publish_runs``) open runs the same way, through ``init_run``. This
module is all of the package's W&B: whether a key is available, which mode a run uses, what is said when nothing is
uploaded, the runs' web addresses, and what an online run already holds (``logged_keys``, for publishing).

Publishing uploads runs from their local files: one W&B run per (algo, seed), every record once.
A run resumed in offline mode leaves one ``offline-run-*`` folder per session, all with the same id,
and ``wandb sync`` of several such folders keeps only one of them (wandb issues #3841 and #5865).
The run directory holds everything instead: ``metrics.jsonl`` (every record sent to W&B, trimmed
on resume so that no step appears twice) and ``eval_history.json`` (every evaluation with its
returns). ``publish_runs`` rebuilds each W&B run from them, under the run's stored id and name:

* online, it reads back which keys W&B already holds at each ``global_step``, resumes the run and
  logs only the others, so running it again logs nothing twice;
* offline, it writes one new ``offline-run-*`` folder holding the whole run, each step once, for
  ``wandb sync <folder>`` (a sync replaces the run's history with the folder's, so a complete folder
  is what it needs).
"""

from __future__ import annotations

import configparser
import contextlib
import inspect
import netrc
import os
import secrets
import shlex
import string
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rlhelpers.core.errors import RLHelpersError
from rlhelpers.runner.runlock import RunLock, holder
from rlhelpers.runner.store import HISTORY_FILE, METRICS_FILE, RunRecord, append_metrics, read_run, run_dirs

WANDB_KEY = "WANDB_API_KEY"  # the environment variable, and the name of the Colab secret


def wandb_host() -> str:
    """The W&B server's host: that of ``WANDB_BASE_URL``, else of the ``base_url`` that ``wandb login --host``
    saved in wandb's settings file (in ``WANDB_CONFIG_DIR``, default ~/.config/wandb), else api.wandb.ai."""
    url = os.environ.get("WANDB_BASE_URL")
    if not url:
        settings = configparser.ConfigParser()
        settings.read(Path(os.environ.get("WANDB_CONFIG_DIR") or "~/.config/wandb").expanduser() / "settings")
        url = settings.get("default", "base_url", fallback="https://api.wandb.ai")
    return urlsplit(url).netloc


def has_wandb_key() -> bool:
    """True if an API key is available: ``WANDB_API_KEY``, or a ``wandb login`` entry for ``wandb_host()`` in
    the netrc file that wandb reads (``NETRC``, default ~/.netrc)."""
    if os.environ.get(WANDB_KEY):
        return True
    try:
        entry = netrc.netrc(os.path.expanduser(os.environ.get("NETRC") or "~/.netrc")).authenticators(wandb_host())
    except (OSError, netrc.NetrcParseError):
        return False
    return bool(entry and entry[2])  # (login, account, password): the password is the key


# How to make a W&B API key available, for the errors of what needs one.
ADD_WANDB_KEY = (f"set {WANDB_KEY} or run `wandb login` (on Colab, add the secret {WANDB_KEY} and rerun the "
                 "set-up cells)")


def resolve_wandb_mode(mode: str | None) -> str:
    """The requested mode, or ``online`` when a key is available and ``offline`` otherwise. An explicit
    ``online`` without a key raises ``RLHelpersError`` (W&B would prompt for one, or fail without a terminal)."""
    if mode is None:
        return "online" if has_wandb_key() else "offline"
    if mode == "online" and not has_wandb_key():
        raise RLHelpersError(f"wandb_mode 'online' needs an API key: {ADD_WANDB_KEY}, or use wandb_mode 'offline'")
    return mode


def new_run_id() -> str:
    """A fresh W&B run id, stored with the run so every resume continues the same W&B run."""
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))


def publish_command(runs_dir: str) -> str:
    """The command that uploads every run of ``runs_dir`` from its local files (``publish_runs``)."""
    return f"python -m rlhelpers publish --runs-dir {shlex.quote(str(runs_dir))}"


def upload_notice(mode: str, runs_dir: str, on_colab: bool = False, on_drive: bool = False) -> str:
    """What is said when W&B does not upload (``mode`` offline or disabled): that nothing is uploaded, where
    the records are kept, and how to publish them later (in a Colab notebook, ``on_colab``, with its secret;
    ``on_drive``: the runs are on Google Drive)."""
    where = f"{runs_dir}/<run>/{METRICS_FILE} and {HISTORY_FILE}"
    if on_drive:
        where += ", on Google Drive, so they survive a disconnect (W&B's own ./wandb folder does not)"
    if on_colab:
        later = (f"add the Colab secret {WANDB_KEY} (key icon, Notebook access on), rerun the set-up cells, "
                 f"then run `!{publish_command(runs_dir)}` in a new cell")
    else:
        later = f"run `wandb login` (or set {WANDB_KEY}), then `{publish_command(runs_dir)}`"
    reason = "" if has_wandb_key() else " (no API key found)"
    return (f"W&B: {mode.upper()}{reason}. Nothing is uploaded to W&B now. Every metric and evaluation is kept "
            f"with its run, in {where}. To publish the runs later: {later}.")


def project_url(entity: str, project: str) -> str:
    """Web address of a W&B project."""
    return f"https://wandb.ai/{entity}/{project}"


def run_url(entity: str | None, project: str, run_id: str) -> str | None:
    """Web address of a W&B run (None when the entity is unknown)."""
    return f"{project_url(entity, project)}/runs/{run_id}" if entity else None


def project_link(entity: str | None, project: str) -> str:
    """Markdown line linking the W&B project, or saying how to get a link."""
    if entity:
        return f"W&B project: [{entity}/{project}]({project_url(entity, project)})"
    return f"W&B project `{project}`: set `wandb_entity` to link it and each run's id above."


def init_run(project: str, entity: str | None, name: str, run_id: str, config: dict[str, Any],
             mode: str) -> Any:
    """Create or resume the W&B run ``run_id`` with ``global_step`` as the x axis of every metric; raise
    ``RLHelpersError`` when W&B refuses it. W&B itself stays silent (no banner, sync hints or run summary, which
    fill a notebook cell around the progress bar, with terminal colour codes) and leaves stdout and stderr
    alone: the caller says where the run is."""
    import wandb  # here, not at the top: the key and mode functions above serve every command, wandb loads slowly

    try:  # resume only online: offline, wandb before 0.28 ignores it with a warning in the cell
        run = wandb.init(project=project, entity=entity, name=name, id=run_id, config=config,
                         mode=mode,  # type: ignore[arg-type]  # online, offline or disabled: validate checked it
                         resume="allow" if mode == "online" else None,
                         settings=wandb.Settings(silent=True, console="off"))
    except wandb.errors.Error as exc:
        raise RLHelpersError(f"W&B refused run {run_id} of {name}: {exc}") from exc
    run.define_metric("global_step")
    run.define_metric("*", step_metric="global_step")
    return run


def logged_keys(entity: str | None, project: str, run_id: str) -> dict[int, set[str]]:
    """The keys the online W&B run holds at each ``global_step``, read from the server ({} if the run does
    not exist yet; ``entity`` None means the key's default entity).

    Read before the run is resumed, while it is not running. Raises ``RLHelpersError`` when W&B
    returns fewer rows than it reports, since logging then could duplicate rows.
    """
    import wandb

    api = wandb.Api()
    path = f"{entity or api.default_entity}/{project}/{run_id}"
    try:
        run = api.run(path)
        last_step = run.lastHistoryStep  # -1 for a run without history
        n_rows = (last_step if last_step is not None else -1) + 1
        scan = run.scan_history
        # Newer wandb versions cache histories on disk; a cached copy would miss what was logged since.
        rows = list(scan(use_cache=False) if "use_cache" in inspect.signature(scan).parameters else scan())
        present: dict[int, set[str]] = {}
        for row in rows:
            if row.get("global_step") is not None:
                keys = {k for k, v in row.items() if v is not None and not k.startswith("_") and k != "global_step"}
                present.setdefault(int(row["global_step"]), set()).update(keys)
    except wandb.errors.CommError as exc:
        if isinstance(getattr(exc, "exc", None), ValueError):  # wandb's "could not find run"
            return {}
        raise RLHelpersError(f"cannot read W&B run {path} back: {exc}; nothing was logged, try again") from exc
    if len(rows) < n_rows:
        raise RLHelpersError(f"W&B returned {len(rows)} of the {n_rows} rows of run {path}; nothing was logged, so "
                             "that no row is logged twice; try again in a few minutes")
    return present


class Tracker:
    """The W&B run ``name`` (``<algo>_seed-<seed>``), resumed under its stored id; every record also goes to the
    run's local metrics log, ``metrics_path``. ``config`` is the run's config as saved (``TrainConfig.to_dict()``), its
    ``wandb_mode`` as ``resolve_config`` settled it; with ``disabled`` W&B is not even loaded.

    It says in one line where the run is (``runs_dir/name``) and where W&B keeps it: the run's web address, or
    offline W&B's own folder (what ``wandb sync`` uploads) and how to publish the run later."""

    def __init__(self, name: str, run_id: str, config: dict[str, Any], runs_dir: str, metrics_path: Path) -> None:
        self.metrics_path = metrics_path
        self.mode = config["wandb_mode"]
        self.run = None if self.mode == "disabled" else init_run(
            config["wandb_project"], config["wandb_entity"], name, run_id, config, self.mode)
        # the run's web address, online only
        self.url: str | None = self.run.url if self.run is not None and self.mode == "online" else None
        where = self.url if self.mode == "online" else "disabled" if self.run is None else (
            f"OFFLINE{'' if has_wandb_key() else ' (no API key found)'}, nothing is uploaded now; its files: "
            f"{Path(self.run.dir).parent}; to publish later: `{publish_command(runs_dir)}`")
        print(f"{name}: {Path(runs_dir, name)}; W&B: {where}", file=sys.stderr)

    def log(self, metrics: dict[str, Any], step: int) -> None:
        """Log ``metrics`` at environment step ``step`` (to W&B and to the local metrics log)."""
        append_metrics(self.metrics_path, metrics, step)
        if self.run is not None:
            self.run.log({**metrics, "global_step": step})

    def finish(self, exit_code: int = 0) -> None:
        """Close the W&B run; a non-zero ``exit_code`` marks this session as failed."""
        if self.run is not None:
            self.run.finish(exit_code=exit_code)


@dataclass
class Published:
    """What ``publish_run`` did for one run."""

    run_name: str
    logged: int  # rows logged now
    present: int  # rows W&B already held completely (online only)
    location: str  # the run's web address online, its offline folder offline
    project_url: str | None  # the project's web address (online only)


def local_rows(record: RunRecord) -> list[dict[str, Any]]:
    """One row per ``global_step``, in step order: the run's metrics.jsonl lines of that step merged with
    the evaluation taken there (what training logged of it, and its returns). Null (non-finite) values are
    left out."""
    rows: dict[int, dict[str, Any]] = {}
    for line in record.metrics():
        rows.setdefault(line.global_step, {}).update({k: v for k, v in line.values.items() if v is not None})
    for evaluation in record.evaluations:
        row = rows.setdefault(evaluation.step, {})
        row.update(evaluation.metrics())
        row["eval/returns"] = list(evaluation.returns)
    return [{**rows[step], "global_step": step} for step in sorted(rows)]


def rows_to_log(rows: list[dict[str, Any]], present: dict[int, set[str]]) -> list[dict[str, Any]]:
    """The part of each row that W&B does not hold yet, with its global_step; ``present`` maps a global_step to the
    keys logged there (``logged_keys``, which leaves global_step itself out)."""
    missing = [{k: v for k, v in row.items() if k not in present.get(row["global_step"], ())} for row in rows]
    return [row for row in missing if len(row) > 1]  # a row of its global_step alone holds nothing new


def publish_run(run_path: Path, mode: str, project: str | None = None, entity: str | None = None) -> Published:
    """Create or resume the W&B run of one run directory with an eval_history.json (``run_dirs``) and log what it
    lacks (see the module docstring).

    ``project`` and ``entity`` default to the ones the run was trained with.
    """
    record = read_run(run_path)
    if record is None or not record.wandb_run_id:
        raise RLHelpersError(f"{run_path / HISTORY_FILE} has no wandb_run_id; it was not written by rlhelpers train")
    project = project or record.config.wandb_project
    if not project:
        raise RLHelpersError(f"{run_path / HISTORY_FILE} names no W&B project; pass --project")
    entity = entity or record.config.wandb_entity
    rows = local_rows(record)
    online = mode == "online"
    missing = rows_to_log(rows, logged_keys(entity, project, record.wandb_run_id) if online else {})
    run = init_run(project, entity, record.name, record.wandb_run_id, record.config.to_dict(), mode)
    with contextlib.ExitStack() as finish:  # a publish that fails shows as failed in W&B
        finish.push(lambda failure, *_: run.finish(exit_code=int(failure is not None)))
        for row in missing:
            run.log(row)
        return Published(run_name=run_path.name, logged=len(missing), present=len(rows) - len(missing),
                         location=run.url if online else str(Path(run.dir).parent),
                         project_url=project_url(run.entity, run.project) if online else None)


def publish_runs(runs_dir: str | Path, mode: str = "online", project: str | None = None,
                 entity: str | None = None) -> list[Published]:
    """Publish every run under ``runs_dir`` that has an eval_history.json, printing one line per run; ``mode`` is
    ``online`` or ``offline`` (the choices of publish's --mode).

    Runs that a live process is training are skipped (publish them once they stop). Online mode needs
    an API key (``WANDB_API_KEY`` or ``wandb login``); without one it raises ``RLHelpersError``.
    """
    if mode == "online" and not has_wandb_key():
        raise RLHelpersError(f"publishing online needs a W&B API key and none was found: {ADD_WANDB_KEY}, then "
                             "publish again; or pass --mode offline to write one complete offline run per (algo, seed) "
                             "for a later `wandb sync`")
    runs = run_dirs(runs_dir)
    if not runs:
        raise RLHelpersError(f"no run directory with an {HISTORY_FILE} in {runs_dir}; pass the --runs-dir "
                             "you trained in")
    published = []
    for path in runs:
        owner = RunLock(path).live_owner()
        if owner is not None:
            print(f"{path.name}: skipped, it is being trained ({holder(owner)}); publish it once it stops")
            continue
        result = publish_run(path, mode, project, entity)
        published.append(result)
        done = f"logged, {result.present} already in W&B:" if mode == "online" else "written to"
        print(f"{result.run_name}: {result.logged} rows {done} {result.location}")
    if mode == "online" and published:
        print(f"W&B project: {published[-1].project_url}. To make its links public, open it, click the visibility "
              "icon next to the project name (or Overview, then Edit), choose Public and Save.")
    elif published:
        print("Upload with: wandb sync " + " ".join(shlex.quote(p.location) for p in published))
    return published
