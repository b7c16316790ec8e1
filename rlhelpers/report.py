"""What ``report.ipynb`` calls besides ``train`` and ``plot_comparison``: where the runs live, the W&B
mode, the validated run config, the results table and the status of the analysis.

Colab-only code is confined to ``_colab_mount_drive``, ``_colab_secret`` and
``_colab_flush_and_unmount``; everything else runs, and is tested, on any machine.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlhelpers.config import ALGOS, TrainConfig, validate
from rlhelpers.errors import RLHelpersError
from rlhelpers.plotting import expected_runs, learning_curve, load_histories
from rlhelpers.tracking import has_wandb_key, publish_command, resolve_wandb_mode

REPORT_ONLY = "none"
COLAB_DRIVE = "/content/drive"
COLAB_RUNS_DIR = f"{COLAB_DRIVE}/MyDrive/rlhelpers/runs"
REPORT_ENV_ID = "PongNoFrameskip-v4"
WANDB_SECRET = "WANDB_API_KEY"
_INT_PARAMS = ("seed", "total_timesteps", "n_envs", "eval_interval", "n_eval_episodes")


def on_colab() -> bool:
    """True inside a Google Colab notebook (its kernel imports ``google.colab`` at start-up)."""
    return "google.colab" in sys.modules


def _colab_mount_drive() -> None:
    """Mount Google Drive at /content/drive (asks the user for permission in the Colab UI)."""
    from google.colab import drive

    drive.mount(COLAB_DRIVE)


def _colab_secret(name: str) -> str | None:
    """A Colab secret's value, or None when it is missing or the notebook may not read it."""
    from google.colab import userdata

    try:
        return userdata.get(name)
    except Exception as exc:  # SecretNotFoundError, NotebookAccessError, or no Colab UI (e.g. under papermill)
        print(f"Colab secret {name} not available ({type(exc).__name__})")
        return None


def _colab_flush_and_unmount() -> None:
    """Write everything pending to Google Drive and unmount it."""
    from google.colab import drive

    drive.flush_and_unmount()


def _on_drive(runs_dir: str) -> bool:
    return on_colab() and str(runs_dir).startswith(COLAB_DRIVE)


def resolve_runs_dir(runs_dir: str | None) -> str:
    """``runs_dir`` when given; otherwise a Google Drive folder on Colab and ``runs`` elsewhere.

    On Colab, Drive is mounted whenever the runs directory lies on it.
    """
    if not runs_dir:
        runs_dir = COLAB_RUNS_DIR if on_colab() else "runs"
    if _on_drive(runs_dir):
        _colab_mount_drive()
    return str(runs_dir)


def flush_drive(runs_dir: str) -> None:
    """On Colab with the runs on Google Drive: flush and unmount Drive, so that the last checkpoint and
    history reach it before the runtime is deleted (Drive uploads in the background). Elsewhere nothing."""
    if not (_on_drive(runs_dir) and os.path.ismount(COLAB_DRIVE)):
        return
    _colab_flush_and_unmount()
    print(f"Google Drive flushed and unmounted: {runs_dir} is complete on Drive. Run all again to mount it again.")


def upload_notice(mode: str, runs_dir: str) -> str:
    """What the set-up cell says when W&B does not upload (``mode`` offline or disabled): that nothing is
    uploaded, where the records are kept, and how to publish them later."""
    where = f"{runs_dir}/<run>/metrics.jsonl and eval_history.json"
    if _on_drive(runs_dir):
        where += ", on Google Drive, so they survive a disconnect (W&B's own ./wandb folder does not)"
    if on_colab():
        later = (f"add the Colab secret {WANDB_SECRET} (key icon, Notebook access on), rerun the set-up cells, "
                 f"then run `!{publish_command(runs_dir)}` in a new cell")
    else:
        later = f"run `wandb login` (or set {WANDB_SECRET}), then `{publish_command(runs_dir)}`"
    reason = "" if has_wandb_key() else " (no API key found)"
    return (f"W&B: {mode.upper()}{reason}. Nothing is uploaded to W&B now. Every metric and evaluation is kept "
            f"with its run, in {where}. To publish the runs later: {later}.")


def setup_wandb(mode: str | None, runs_dir: str = "runs") -> str:
    """Choose the W&B mode and say which one is used.

    On Colab the secret ``WANDB_API_KEY`` is copied into the environment (child processes inherit
    it). ``mode`` None means online with a key and offline without one; an explicit ``online``
    without a key is refused with an ``RLHelpersError`` instead of W&B's prompt. Without uploads the
    message says how to publish the runs of ``runs_dir`` later.
    """
    if on_colab() and not os.environ.get(WANDB_SECRET):
        key = _colab_secret(WANDB_SECRET)
        if key:
            os.environ[WANDB_SECRET] = key
    resolved = resolve_wandb_mode(mode)
    if resolved == "online" and not has_wandb_key():
        raise RLHelpersError("wandb_mode 'online' needs an API key: add the Colab secret WANDB_API_KEY, "
                             "set WANDB_API_KEY, run `wandb login`, or use wandb_mode 'offline'")
    print("W&B: online" if resolved == "online" else upload_notice(resolved, runs_dir))
    return resolved


def run_config(algo: str, **params: Any) -> TrainConfig | None:
    """The validated ``TrainConfig`` of the run to train, or None for ``algo='none'`` (report only).

    ``params`` are ``TrainConfig`` fields; whole floats (papermill reads ``-p total_timesteps 5e3``
    as 5000.0) become ints where the field is an integer.
    """
    if algo == REPORT_ONLY:
        return None
    if algo not in ALGOS:
        raise RLHelpersError(f"unknown algo {algo!r}: choose one of {', '.join(ALGOS)}, "
                             f"or {REPORT_ONLY!r} to only build the report from the runs present")
    for name in _INT_PARAMS:
        value = params.get(name)
        if isinstance(value, float) and value.is_integer():
            params[name] = int(value)
    return validate(TrainConfig(algo=algo, **params))


def wandb_run_url(entity: str | None, project: str, run_id: str) -> str | None:
    """Web address of a W&B run (None when the entity is unknown)."""
    return f"https://wandb.ai/{entity}/{project}/runs/{run_id}" if entity else None


def project_link(entity: str | None, project: str) -> str:
    """Markdown line linking the W&B project, or saying how to get a link."""
    if entity:
        return f"W&B project: [{entity}/{project}](https://wandb.ai/{entity}/{project})"
    return f"W&B project `{project}`: set `wandb_entity` to link it."


@dataclass
class RunSummary:
    """One row of the results table, from a run's eval_history.json."""

    run_name: str
    env_id: str
    total_timesteps: int
    last_step: int
    last_mean: float
    last_sem: float
    n_episodes: int
    best_mean: float
    best_step: int
    first_exceed_step: int | None
    precision: str
    wandb_run_id: str
    wandb_url: str | None

    @property
    def finished(self) -> bool:
        """True once the run used its budget or already exceeded the target."""
        return self.last_step >= self.total_timesteps or self.first_exceed_step is not None


def _run_order(name: str) -> tuple[int, str]:
    order = expected_runs()
    return (order.index(name), "") if name in order else (len(order), name)


def summarize_runs(runs_dir: str | Path, threshold: float = 18.0,
                   wandb_entity: str | None = None) -> list[RunSummary]:
    """One ``RunSummary`` per run with at least one evaluation under ``runs_dir``, in report order.

    ``threshold`` is the return that must be exceeded; ``wandb_entity`` builds W&B links for runs
    saved without an entity.
    """
    rows = []
    for name, record in sorted(load_histories(runs_dir).items(), key=lambda item: _run_order(item[0])):
        if not record.get("history"):
            continue
        steps, means, sems, counts = learning_curve([record])
        best = int(means.argmax())
        above = [int(s) for s, m in zip(steps, means, strict=True) if m > threshold]
        config = record.get("config", {})
        run_id = record.get("wandb_run_id", "")
        rows.append(RunSummary(
            run_name=name,
            env_id=config.get("env_id", "?"),
            total_timesteps=int(config.get("total_timesteps", 0)),
            last_step=int(steps[-1]),
            last_mean=float(means[-1]),
            last_sem=float(sems[-1]),
            n_episodes=int(counts[-1]),
            best_mean=float(means[best]),
            best_step=int(steps[best]),
            first_exceed_step=above[0] if above else None,
            precision=config.get("precision", "not recorded"),
            wandb_run_id=run_id,
            wandb_url=wandb_run_url(config.get("wandb_entity") or wandb_entity,
                                    config.get("wandb_project", ""), run_id),
        ))
    return rows


def results_markdown(rows: list[RunSummary], threshold: float = 18.0) -> str:
    """The results table as Markdown (renders in the notebook and in the HTML export)."""
    if not rows:
        return "_No run with an evaluation found._"
    lines = [
        f"| run | env | steps | last eval return ± s.e. (episodes) | best eval return (step) "
        f"| steps to exceed {threshold:g} | precision | W&B |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        reached = f"{r.first_exceed_step:,}" if r.first_exceed_step is not None else "not reached"
        link = (f"[{r.wandb_run_id}]({r.wandb_url})" if r.wandb_url
                else f"`{r.wandb_run_id}` (set wandb_entity to link it)")
        lines.append(f"| {r.run_name} | {r.env_id} | {r.last_step:,} | {r.last_mean:.2f} ± {r.last_sem:.2f} "
                     f"({r.n_episodes}) | {r.best_mean:.2f} ({r.best_step:,}) | {reached} | {r.precision} | {link} |")
    return "\n".join(lines)


def analysis_status(rows: list[RunSummary]) -> str:
    """Markdown saying plainly which results are present and whether the analysis can be written."""
    present = {r.run_name: r for r in rows}
    complete = [name for name in expected_runs()
                if name in present and present[name].env_id == REPORT_ENV_ID and present[name].finished]
    lines = ["**Results present:** " + (", ".join(
        f"{r.run_name} ({r.env_id}, {r.last_step:,} steps{'' if r.finished else ', unfinished'})" for r in rows)
        or "none") + "."]
    if len(complete) == len(expected_runs()):
        lines.append(f"All {len(complete)} {REPORT_ENV_ID} runs are complete: the analysis below can be written "
                     "from the table and the plot.")
    else:
        missing = [name for name in expected_runs() if name not in complete]
        lines.append(f"**Analysis pending:** it needs all six {REPORT_ENV_ID} runs trained to their budget; "
                     f"not yet complete: {', '.join(missing)}. No conclusion is drawn from the results above.")
    return "\n\n".join(lines)
