"""The comparison plot of MISSION.md, built from every run's eval_history.json that is present."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from rlhelpers.checkpoint import HISTORY_FILE
from rlhelpers.config import ALGOS

REPORT_SEEDS = (0, 100)
# task1 and task2 can coincide (their actor gradients are equal in exact arithmetic): distinct styles
# keep both visible.
LINE_STYLES = {"a2c": "-", "task1": "--", "task2": ":"}


def load_histories(runs_dir: str | Path) -> dict[str, dict[str, Any]]:
    """eval_history.json records of every run directory under ``runs_dir``, keyed by run name."""
    records = {}
    for path in sorted(Path(runs_dir).glob(f"*/{HISTORY_FILE}")):
        record = json.loads(path.read_text())
        records[record.get("run_name", path.parent.name)] = record
    return records


def expected_runs(algos: tuple[str, ...] = ALGOS, seeds: tuple[int, ...] = REPORT_SEEDS) -> list[str]:
    """Run names the report is made of: every algo with every seed."""
    return [f"{algo}_seed-{seed}" for algo in algos for seed in seeds]


def learning_curve(records: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per evaluation step: the mean over all episodes of all given runs, its standard error
    (std with ddof=1 over the pooled episodes / sqrt(n)), and n."""
    by_step: dict[int, list[float]] = {}
    for record in records:
        for point in record["history"]:
            by_step.setdefault(int(point["step"]), []).extend(point["returns"])
    steps = np.array(sorted(by_step))
    means, sems, counts = [], [], []
    for step in steps:
        returns = np.asarray(by_step[step], dtype=float)
        means.append(returns.mean())
        sems.append(returns.std(ddof=1) / math.sqrt(len(returns)) if len(returns) > 1 else 0.0)
        counts.append(len(returns))
    return steps, np.array(means), np.array(sems), np.array(counts)


def plot_comparison(runs_dir: str | Path, out: str | Path | None = None) -> tuple[Figure, list[str]]:
    """One axes, one curve per algorithm with a +/- 1 standard-error band; returns the figure and
    the report's runs that are missing. Saves a PNG to ``out`` when given."""
    histories = load_histories(runs_dir)
    fig, ax = plt.subplots(figsize=(8, 5))
    for algo in ALGOS:
        runs = [r for name, r in histories.items() if r.get("config", {}).get("algo") == algo and r["history"]]
        if not runs:
            continue
        steps, means, sems, _ = learning_curve(runs)
        seeds = sorted(r["config"]["seed"] for r in runs)
        seed_text = ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(map(str, seeds))
        line, = ax.plot(steps, means, LINE_STYLES[algo], marker="o", markersize=3, label=f"{algo} ({seed_text})")
        ax.fill_between(steps, means - sems, means + sems, color=line.get_color(), alpha=0.25)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("evaluation return (mean ± 1 s.e.)")
    env_ids = sorted({r["config"]["env_id"] for r in histories.values()})
    ax.set_title(f"{', '.join(env_ids) or 'no runs found'}: stochastic-policy evaluation")
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend()
    fig.tight_layout()
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=120)
    missing = [name for name in expected_runs() if name not in histories]
    return fig, missing
