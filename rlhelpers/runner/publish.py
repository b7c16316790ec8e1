"""Upload runs to W&B from their local files: one W&B run per (algo, seed), every record once.

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

import contextlib
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlhelpers.core.errors import RLHelpersError
from rlhelpers.runner.runlock import RunLock, holder
from rlhelpers.runner.store import HISTORY_FILE, RunRecord, read_run, run_dirs
from rlhelpers.runner.tracking import ADD_WANDB_KEY, has_wandb_key, init_run, logged_keys, project_url


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
        row = rows.setdefault(int(line["global_step"]), {})
        row.update({k: v for k, v in line.items() if k not in ("global_step", "time") and v is not None})
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
    run_id = record.wandb_run_id if record is not None else None
    if record is None or not run_id:
        raise RLHelpersError(f"{run_path / HISTORY_FILE} has no wandb_run_id; it was not written by rlhelpers train")
    project = project or record.config.get("wandb_project")
    if not project:
        raise RLHelpersError(f"{run_path / HISTORY_FILE} names no W&B project; pass --project")
    entity = entity or record.config.get("wandb_entity")
    rows = local_rows(record)
    online = mode == "online"
    missing = rows_to_log(rows, logged_keys(entity, project, run_id) if online else {})
    run = init_run(project, entity, record.name, run_id, record.config, mode)
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
