"""What ``report.ipynb`` shows besides training and the plots: its checked parameters and run config, the
results table (a row per ``RunRecord`` of ``evaluated_runs``), where paired histories part, the measured
gradient facts, the re-scores and the agent's video. Where the runs
live and how W&B is set up, on Colab or elsewhere, is ``colab``'s.
"""

from __future__ import annotations

import ast
import base64
import difflib
import json
from pathlib import Path
from typing import Any

import numpy as np

from rlhelpers.core.errors import RLHelpersError
from rlhelpers.report.claims import SEED_PAIRS, TASK_PAIRS, markdown_table, pair_divergences
from rlhelpers.report.plotting import AGENT_GIF, ANALYSIS_JSON, figures_dir
from rlhelpers.runner.config import ALGOS, REPORT_SEEDS, TrainConfig, expected_runs, validate
from rlhelpers.runner.records import RunRecord, read_runs
from rlhelpers.runner.tracking import project_link, run_url  # noqa: F401  (project_link: the notebook's)

REPORT_ONLY = "none"
ALL_RUNS = "all"
# The names of report.ipynb's parameters cell.
NOTEBOOK_PARAMETERS = ("algo", "seed", "env_id", "total_timesteps", "n_envs", "eval_interval", "n_eval_episodes",
                       "stop_return", "runs_dir", "wandb_project", "wandb_entity", "wandb_mode", "recompute_analysis",
                       "device", "repo_url")
_INT_PARAMS = ("seed", "total_timesteps", "n_envs", "eval_interval", "n_eval_episodes")


def check_parameters(executed_cells: list[str], recompute_analysis: object) -> None:
    """Stop on what papermill lets through: a ``-p`` name that is not one of ``NOTEBOOK_PARAMETERS``
    (papermill only warns, and the default stays in force) and text for the ``recompute_analysis`` flag
    (``-r`` passes text, and any text is true). ``executed_cells`` are the kernel's cell sources (IPython's
    ``In``); papermill's injected cell is the one that starts with ``# Parameters``."""
    for source in executed_cells:
        if not source.startswith("# Parameters\n"):
            continue
        for node in ast.parse(source).body:
            for target in getattr(node, "targets", []):
                if (isinstance(target, ast.Name) and target.id not in NOTEBOOK_PARAMETERS
                        and not target.id.startswith("PAPERMILL_")):  # --inject-paths adds these
                    close = difflib.get_close_matches(target.id, NOTEBOOK_PARAMETERS, n=1)
                    raise RLHelpersError(f"unknown parameter {target.id!r}"
                                         + (f": did you mean {close[0]!r}?" if close else "")
                                         + f" The parameters are {', '.join(NOTEBOOK_PARAMETERS)}")
    if not isinstance(recompute_analysis, bool):
        raise RLHelpersError(f"recompute_analysis must be True or False, got {recompute_analysis!r} "
                             "(papermill's -r passes text: use -p)")


def run_options(**params: Any) -> dict[str, Any]:
    """The notebook's parameters as ``TrainConfig`` fields: whole floats (papermill reads
    ``-p total_timesteps 5e3`` as 5000.0) become ints where the field is an integer."""
    return {name: int(value) if name in _INT_PARAMS and isinstance(value, float) and value.is_integer() else value
            for name, value in params.items()}


def run_config(algo: str, **params: Any) -> TrainConfig | None:
    """The validated ``TrainConfig`` of the run to train (``params``: ``TrainConfig`` fields, through
    ``run_options``); None for ``algo='none'`` (report only) and for ``'all'``, every unfinished run of
    the report (``campaign.train_campaign``), whose options are checked here for every algorithm."""
    params = run_options(**params)
    if algo in (REPORT_ONLY, ALL_RUNS):
        for each in ALGOS if algo == ALL_RUNS else ():
            validate(TrainConfig(algo=each, **params))
        return None
    if algo not in ALGOS:
        raise RLHelpersError(f"unknown algo {algo!r}: choose one of {', '.join(ALGOS)}, {ALL_RUNS!r} to train "
                             f"every run of the report, or {REPORT_ONLY!r} to only build the report from the runs "
                             "present")
    return validate(TrainConfig(algo=algo, **params))


def target_return(env_id: str, stop_return: float | None) -> float:
    """The return the table and the discussion measure the runs against: ``stop_return``, or else the
    one runs of ``env_id`` stop at by default (18 on Atari, the reward threshold on classic control)."""
    if stop_return is not None:
        return float(stop_return)
    return float(validate(TrainConfig(env_id=env_id)).stop_return)


MILESTONES = (-10.0, 0.0)  # besides the target: leaving the -21..-20 plateau, then winning more than losing


def _run_order(name: str) -> tuple[int, str]:
    order = expected_runs()
    return (order.index(name), "") if name in order else (len(order), name)


def evaluated_runs(runs_dir: str | Path) -> list[RunRecord]:
    """The record of every run of the report's seeds under ``runs_dir`` with at least one evaluation: the rows
    of the report's tables, in report order."""
    return sorted((r for r in read_runs(runs_dir, REPORT_SEEDS) if r.evaluations), key=lambda r: _run_order(r.name))


def results_markdown(records: list[RunRecord], threshold: float = 18.0, wandb_entity: str | None = None) -> str:
    """The results table as Markdown (renders in the notebook and in the HTML export), under a title naming
    the environment once; ``wandb_entity`` builds W&B links for runs saved without an entity."""
    if not records:
        return "_No run with an evaluation found._"
    levels = (*MILESTONES, threshold)
    envs = sorted({r.config.get("env_id", "unknown") for r in records})
    table = []
    for r in records:
        last, best, seconds = r.last, r.best, r.last.train_seconds
        run_id = r.wandb_run_id or ""
        url = run_url(r.config.get("wandb_entity") or wandb_entity, r.config.get("wandb_project", ""), run_id)
        table.append([r.name, f"{last.step:,}",
                      f"{seconds / 3600:.1f}" if seconds is not None else "not recorded",
                      f"{last.mean:.2f} ± {last.sem:.2f} ({len(last.returns)})",
                      f"{best.mean:.2f} ± {best.sem:.2f} ({best.step:,})",
                      *(_step_or(r.first_step_above(level), "not reached") for level in levels),
                      f"[{run_id}]({url})" if url else f"`{run_id}`"])
    return markdown_table(f"Runs on {', '.join(f'`{env}`' for env in envs)}",
                          ["run", "steps", "hours", "last eval return ± s.e. (episodes)",
                           "best eval return ± s.e. (step)", *(f"first step > {level:g}" for level in levels), "W&B"],
                          table, left=(0, -1))


def _step_or(step: int | None, missing: str) -> str:
    return missing if step is None else f"{step:,}"


def divergence_markdown(runs_dir: str | Path) -> str:
    """Where the evaluation histories of the report's pairs part (``claims.TASK_PAIRS``: equal actor
    gradients, same seed), and how far apart they drift afterwards, beside two seeds of one algorithm."""
    table = []
    for pair, d in pair_divergences({r.name: r for r in read_runs(runs_dir)}, (*TASK_PAIRS, *SEED_PAIRS)).items():
        gaps, sems = list(d["mean_gap"].values()), list(d["gap_sem"].values())  # at the same steps
        after = [f"{np.mean(gaps):.2f}", f"{max(gaps):.2f}", f"{np.mean(sems):.2f}"] if gaps else ["n/a"] * 3
        table.append([pair, _step_or(d["last_identical_step"], "never"),
                      f"{d['identical_steps']} / {d['common_steps']}", *after])
    if not table:
        return "_No pair of runs to compare yet: each needs both runs' evaluation histories._"
    return markdown_table("Where evaluation histories part: the last step up to which both runs' evaluations are "
                          "identical, then the gap between their mean returns at the common later steps",
                          ["pair", "identical up to step", "identical / common evaluations", "mean gap after",
                           "largest gap after", "mean s.e. of the gap"], table)


# ---------------------------------------------------------------- measured facts and the agent on screen

def analysis_results(runs_dir: str | Path, path: str | Path | None = None,
                     recompute: bool = False) -> dict[str, Any] | None:
    """The gradient facts: measured on the runs' snapshots and saved when ``recompute`` is set (about half
    an hour on a CPU for the report's runs; snapshots already in the saved JSON keep their entries, see
    ``analysis.write_analysis``), else the saved JSON; None when there is neither.
    ``path`` defaults to ``analysis.json`` in the runs' ``figures_dir``."""
    from rlhelpers.report.analysis import write_analysis

    if recompute:
        return write_analysis(runs_dir, path)[1]
    path = Path(path) if path is not None else figures_dir(runs_dir) / ANALYSIS_JSON
    return json.loads(path.read_text()) if path.exists() else None


def agent_video_html(runs_dir: str | Path, records: list[RunRecord], gif: str | Path | None = None) -> str:
    """HTML embedding the GIF of the best run's committed policy (recorded first if only the policy exists);
    ``gif`` defaults to ``agent.gif`` in the runs' ``figures_dir``."""
    from rlhelpers.report.playback import record_video
    from rlhelpers.runner.files import POLICY_FILE

    gif = Path(gif) if gif is not None else figures_dir(runs_dir) / AGENT_GIF
    with_policy = [r for r in records if (Path(runs_dir) / r.name / POLICY_FILE).exists()]
    if not gif.exists():
        if not with_policy:
            return ("<p><em>No committed policy yet: the video appears once a run's policy.pt exists "
                    "(<code>python -m rlhelpers evaluate &lt;runs_dir&gt;/&lt;run&gt; --export</code> writes it "
                    "from the run's newest snapshot).</em></p>")
        best = max(with_policy, key=lambda r: r.last.mean)
        record_video(Path(runs_dir) / best.name, gif)
    data = base64.b64encode(gif.read_bytes()).decode()
    return f'<img src="data:image/gif;base64,{data}" alt="one episode of the trained agent" style="width:336px">'


def rescore_markdown(runs_dir: str | Path, records: list[RunRecord]) -> str:
    """A table of each run's saved re-score of its float16 policy beside the run's last evaluation."""
    from rlhelpers.report.playback import read_rescore

    table = []
    for record in records:
        rescore = read_rescore(Path(runs_dir) / record.name)
        if rescore is None:
            continue
        verdict = {True: "yes", False: "**no**", None: "n/a"}[rescore.consistent]
        last = "n/a" if rescore.last_mean is None else f"{rescore.last_mean:.2f} ± {rescore.last_sem:.2f}"
        table.append([record.name, f"{rescore.step:,}", f"{rescore.mean:.2f} ± {rescore.sem:.2f}",
                      str(len(rescore.returns)), last, verdict])
    if not table:
        return ("*No re-score of a committed policy yet: `python -m rlhelpers evaluate <runs_dir>/<run> "
                "--export --episodes 30` writes one, with the policy.pt it re-scores.*")
    return markdown_table("The committed float16 policies re-scored on fresh seeds, beside each run's last evaluation "
                          "(within: the two means differ by at most 1.96 standard errors of their difference)",
                          ["run", "policy step", "re-score", "episodes", "last evaluation", "within"], table)
