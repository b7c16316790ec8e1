"""What ``report.ipynb`` shows besides the plots: the results table (a row per ``RunRecord`` of
``evaluated_runs``), where paired histories part, the measured gradient facts, the re-scores and the agent's
video. Its parameters, and where the runs live, are ``rlhelpers.notebook``'s.
"""

from __future__ import annotations

import base64
import json
import math
from itertools import takewhile
from pathlib import Path
from typing import Any

import numpy as np

from allaction.analysis import write_analysis
from allaction.experiment import AGENT_GIF, ANALYSIS_JSON, ARMS, PONG
from allaction.playback import read_rescore, record_video
from rlhelpers.plots import figures_dir, last_evaluation
from rlhelpers.runner.config import format_run_name
from rlhelpers.runner.store import POLICY_FILE, RunRecord, read_runs
from rlhelpers.runner.tracking import run_url

# The pairs whose histories part: task1 and task2 of one seed (equal actor gradients), and for scale two seeds of
# one algorithm.
TASK_PAIRS = tuple((format_run_name("task1", seed), format_run_name("task2", seed)) for seed in PONG.seeds)
SEED_PAIRS = tuple(tuple(format_run_name(algo, seed) for seed in PONG.seeds) for algo in PONG.arms)


def markdown_table(title: str | None, rows: list[dict[str, str]], left: tuple[int, ...] = (0,), empty: str = "") -> str:
    """A Markdown table of ``rows`` (column -> cell, the columns those of the first row) under a bold ``title``,
    or ``empty`` when there are no rows; the columns at the indices ``left`` are left-aligned, the others
    (numbers) right-aligned."""
    if not rows:
        return empty
    header = list(rows[0])
    left_columns = {i % len(header) for i in left}
    align = ["---" if i in left_columns else "---:" for i in range(len(header))]
    lines = [f"| {' | '.join(header)} |", f"|{'|'.join(align)}|"] + [f"| {' | '.join(row.values())} |" for row in rows]
    return (f"**{title}**\n\n" if title else "") + "\n".join(lines)


def evaluated_runs(runs_dir: str | Path, seeds: tuple[int, ...] | None = PONG.seeds,
                   arms: tuple[str, ...] | None = None) -> list[RunRecord]:
    """The record of every run of ``seeds`` (default: the report's; None: any) and of ``arms`` (None: any) under
    ``runs_dir`` with at least one evaluation: the rows of the report's tables, arm by arm (``experiment.ARMS``' order,
    then by name), seed by seed."""
    return sorted((r for r in read_runs(runs_dir, seeds) if r.evaluations and (arms is None or r.arm in arms)),
                  key=lambda r: (ARMS.index(r.arm) if r.arm in ARMS else len(ARMS), r.arm, r.seed))


def results_markdown(records: list[RunRecord], levels: tuple[float, ...] = PONG.levels,
                     wandb_entity: str | None = None) -> str:
    """The results table as Markdown (renders in the notebook and in the HTML export), under a title naming
    the environment once, with the first step above each of ``levels`` (an experiment's milestones and stop return);
    ``wandb_entity`` builds W&B links for runs saved without an entity."""
    envs = sorted({r.config.env_id for r in records})
    table = []
    for r in records:
        last = last_evaluation(r)
        best, seconds = r.best, last.train_seconds
        assert best is not None  # a run with an evaluation has a best one
        run_id = r.wandb_run_id or ""
        url = run_url(r.config.wandb_entity or wandb_entity, r.config.wandb_project or "", run_id)
        table.append({"run": r.name, "steps": f"{last.step:,}",
                      "hours": f"{seconds / 3600:.1f}" if seconds is not None else "not recorded",
                      "last eval return ± s.e. (episodes)": f"{last.mean:.2f} ± {last.sem:.2f} ({len(last.returns)})",
                      "best eval return ± s.e. (step)": f"{best.mean:.2f} ± {best.sem:.2f} ({best.step:,})",
                      **{f"first step > {level:g}": _step_or(r.first_step_above(level), "not reached")
                         for level in levels},
                      "W&B": f"[{run_id}]({url})" if url else f"`{run_id}`"})
    return markdown_table(f"Runs on {', '.join(f'`{env}`' for env in envs)}", table, left=(0, -1),
                          empty="_No run with an evaluation found._")


def _step_or(step: int | None, missing: str) -> str:
    return missing if step is None else f"{step:,}"


def history_divergence(first: RunRecord, second: RunRecord) -> dict[str, Any]:
    """Where two runs' evaluation histories part: the last step up to which every common evaluation holds
    identical returns, and at each later common step the absolute gap between the two mean returns and
    the standard error of that gap, sqrt(se_1^2 + se_2^2)."""
    a, b = ({e.step: e for e in run.evaluations} for run in (first, second))
    common = sorted(set(a) & set(b))
    identical = list(takewhile(lambda step: a[step].returns == b[step].returns, common))  # before they part
    later = common[len(identical):]
    return {"last_identical_step": identical[-1] if identical else None,
            "identical_steps": sum(a[s].returns == b[s].returns for s in common), "common_steps": len(common),
            "mean_gap": {s: abs(a[s].mean - b[s].mean) for s in later},
            "gap_sem": {s: math.hypot(a[s].sem, b[s].sem) for s in later}}


def divergence_markdown(runs_dir: str | Path) -> str:
    """Where the evaluation histories of ``TASK_PAIRS`` (equal actor gradients, same seed) part, and how far
    apart they drift afterwards, beside ``SEED_PAIRS`` (two seeds of one algorithm); pairs with a run
    missing are left out."""
    records = {r.name: r for r in read_runs(runs_dir)}
    table = []
    for a, b in (pair for pair in (*TASK_PAIRS, *SEED_PAIRS) if all(run in records for run in pair)):
        pair, d = f"{a} vs {b}", history_divergence(records[a], records[b])
        gaps, sems = list(d["mean_gap"].values()), list(d["gap_sem"].values())  # at the same steps
        after = [f"{np.mean(gaps):.2f}", f"{max(gaps):.2f}", f"{np.mean(sems):.2f}"] if gaps else ["n/a"] * 3
        table.append({"pair": pair, "identical up to step": _step_or(d["last_identical_step"], "never"),
                      "identical / common evaluations": f"{d['identical_steps']} / {d['common_steps']}",
                      **dict(zip(("mean gap after", "largest gap after", "mean s.e. of the gap"), after, strict=True))})
    return markdown_table("Where evaluation histories part: the last step up to which both runs' evaluations are "
                          "identical, then the gap between their mean returns at the common later steps", table,
                          empty="_No pair of runs to compare yet: each needs both runs' evaluation histories._")


# ---------------------------------------------------------------- measured facts and the agent on screen

def analysis_results(runs_dir: str | Path, path: str | Path | None = None,
                     recompute: bool = False) -> dict[str, Any] | None:
    """The gradient facts: measured on the runs' snapshots and saved when ``recompute`` is set (about half
    an hour on a CPU for the report's runs; snapshots already in the saved JSON keep their entries, see
    ``analysis.write_analysis``), else the saved JSON; None when there is neither.
    ``path`` defaults to ``analysis.json`` in the runs' ``figures_dir``."""
    if recompute:
        return write_analysis(runs_dir, path)[1]
    path = Path(path) if path is not None else figures_dir(runs_dir) / ANALYSIS_JSON
    return json.loads(path.read_text()) if path.exists() else None


def agent_video_html(runs_dir: str | Path, records: list[RunRecord], gif: str | Path | None = None) -> str:
    """HTML embedding the GIF of the best run's committed policy (recorded first if only the policy exists);
    ``gif`` defaults to ``agent.gif`` in the runs' ``figures_dir``."""
    gif = Path(gif) if gif is not None else figures_dir(runs_dir) / AGENT_GIF
    with_policy = [r for r in records if (Path(runs_dir) / r.name / POLICY_FILE).exists()]
    if not gif.exists():
        if not with_policy:
            return ("<p><em>No committed policy yet: the video appears once a run's policy.pt exists "
                    "(<code>python -m allaction evaluate &lt;runs_dir&gt;/&lt;run&gt; --export</code> writes it "
                    "from the run's newest snapshot).</em></p>")
        best = max(with_policy, key=lambda r: last_evaluation(r).mean)
        record_video(Path(runs_dir) / best.name, gif)
    data = base64.b64encode(gif.read_bytes()).decode()
    return f'<img src="data:image/gif;base64,{data}" alt="one episode of the trained agent" style="width:336px">'


def rescore_markdown(runs_dir: str | Path, records: list[RunRecord]) -> str:
    """A table of each run's saved re-scores of its float16 policy, with sampled and with greedy actions, beside the
    run's last evaluation (which samples them)."""
    table = []
    for record in records:
        sampled, greedy = (read_rescore(Path(runs_dir) / record.name, g) for g in (False, True))
        policy = sampled or greedy
        if policy is None:
            continue
        verdict = {True: "yes", False: "**no**", None: "n/a"}[sampled.consistent if sampled else None]
        last = "n/a" if policy.last_mean is None else f"{policy.last_mean:.2f} ± {policy.last_sem:.2f}"
        table.append({"run": record.name, "policy step": f"{policy.step:,}",
                      **{f"re-score, {kind}": f"{r.mean:.2f} ± {r.sem:.2f} ({len(r.returns)})" if r else "–"
                         for kind, r in (("sampled", sampled), ("greedy", greedy))},
                      "last evaluation": last, "within": verdict})
    return markdown_table("The committed float16 policies re-scored on fresh seeds (episodes in brackets), with "
                          "sampled and with greedy actions, beside each run's last evaluation (within: the sampled "
                          "re-score's mean and the last evaluation's differ by at most 1.96 standard errors of their "
                          "difference)", table,
                          empty="*No re-score of a committed policy yet: `python -m allaction evaluate "
                          "<runs_dir>/<run> --export` writes one, with the policy.pt it re-scores.*")
