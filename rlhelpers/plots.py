"""Comparing runs: an arm's curve over its seeds (a run that stopped early above its stop return holds its last
evaluation), each run's held returns, and the evaluation-curve plot that any comparison draws; where a runs
directory's figures go."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter
from matplotlib.typing import ColorType

from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.evaluation import Evaluation, mean_and_sem
from rlhelpers.runner.config import DEFAULT_RUNS_DIR, format_run_name
from rlhelpers.runner.store import RunRecord, read_runs


@dataclass
class ArmCurve:
    """One arm's curve over its seeds, with held evaluations of the seeds that stopped early."""

    steps: np.ndarray
    means: np.ndarray
    sems: np.ndarray


def arm_curve(records: Sequence[RunRecord]) -> ArmCurve:
    """Mean and standard error (std with ddof=1 over the pooled episodes / sqrt(n)) over the pooled
    episodes of all seeds at each evaluation step; for one run, its own curve.

    A seed that stopped early keeps contributing its last evaluation at later steps (its policy no
    longer changes), and a step that not every seed evaluated (seeds trained with different
    evaluation intervals) is left out, so no point silently becomes the mean of fewer seeds. The curve
    ends at the last step that every seed still training has reached.
    """
    stopped = {r.name: r.last.step for r in records if r.last is not None and r.stopped_early()}
    ends = [r.last.step for r in records if r.last is not None and r.name not in stopped]
    end = min(ends) if ends else max(stopped.values())
    all_steps = sorted({e.step for r in records for e in r.evaluations if e.step <= end})
    seed_returns = [held_returns(record, all_steps) for record in records]
    by_step = {step: [ret for returns in seed_returns for ret in returns[step]] for step in all_steps
               if all(step in returns for returns in seed_returns)}
    stats = [mean_and_sem(pooled) for pooled in by_step.values()]
    return ArmCurve(np.array(list(by_step)), np.array([m for m, _ in stats]), np.array([e for _, e in stats]))


def last_evaluation(record: RunRecord) -> Evaluation:
    """The run's newest evaluation: the curves and tables take runs that have one (``runs_by_arm``)."""
    if record.last is None:
        raise ValueError(f"run {record.name} has no evaluation yet")
    return record.last


def runs_by_arm(records: Iterable[RunRecord], arms: Iterable[str]) -> dict[str, list[RunRecord]]:
    """The runs of each of ``arms`` (an algorithm, or ``<algo>-<variant>``) among ``records`` that have an
    evaluation, by seed: the seeds of a curve."""
    evaluated = [r for r in records if r.evaluations]
    return {arm: sorted((r for r in evaluated if r.arm == arm), key=lambda r: r.seed) for arm in arms}


def held_returns(record: RunRecord, steps: Iterable[int]) -> dict[int, tuple[float, ...]]:
    """One run's evaluation returns at each of ``steps`` that it evaluated, and, once it stopped early,
    its last evaluation held at the later ones (its policy no longer changes)."""
    points = {e.step: e.returns for e in record.evaluations}
    held = record.last if record.stopped_early() else None
    returns = {}
    for step in map(int, steps):
        if step in points:
            returns[step] = points[step]
        elif held is not None and step > held.step:
            returns[step] = held.returns
    return returns


def mean_of_means(record: RunRecord, steps: Sequence[int]) -> float | None:
    """The mean of the run's evaluation means at ``steps`` (``held_returns``: a run that stopped early
    holds its last evaluation); None unless it has one at each of them."""
    held = held_returns(record, steps)
    if len(held) < len(steps):
        return None
    return float(np.mean([np.mean(returns) for returns in held.values()]))


# Two curves can coincide (the all-action actors' gradients are equal in exact arithmetic): distinct styles
# keep both visible.
LINE_STYLES = ("-", "--", ":", "-.")  # one per curve, in the order of the arms drawn


def arm_colors(arms: Sequence[str]) -> Callable[[str], ColorType]:
    """The colour of each of ``arms`` in every figure that takes this function, by its place among them, so that a
    reader can follow an arm from one figure to the next; grey for any other."""
    return lambda arm: f"C{list(arms).index(arm) % 10}" if arm in arms else "0.4"


def figures_dir(runs_dir: str | Path) -> Path:
    """Where the report of ``runs_dir`` puts its figures, results JSON and video: ``figures/`` for the
    committed runs in ``runs/``, ``<runs_dir>/figures`` for any other runs directory, so that a report of
    your own runs neither overwrites the committed figures nor shows them beside your table."""
    committed = Path(runs_dir).resolve() == Path(DEFAULT_RUNS_DIR).resolve()
    return Path("figures") if committed else Path(runs_dir) / "figures"


def plot_comparison(runs_dir: str | Path, out: str | Path | None = None, arms: Sequence[str] | None = None,
                    seeds: Sequence[int] | None = None, beside: str | Path | None = None,
                    color: Callable[[str], ColorType] | None = None,
                    beside_label: str | None = None) -> tuple[Figure, list[str]]:
    """One axes, one curve per arm (an algorithm, or ``<algo>-<variant>``: mean over seeds and episodes,
    +/- 1 standard-error band) and a thin line per seed; seeds that stopped early are held and marked. ``arms``
    are the curves drawn, in order, and ``seeds`` the seeds of each (default: every arm and seed present).
    ``beside``: another runs directory whose curves of the same arms and seeds are drawn dashed, for comparison,
    labelled ``<arm>, <beside_label>`` (default: the directory). ``color``: each arm's colour (default:
    ``arm_colors`` of the arms drawn).
    Returns the figure and the runs of those arms and seeds that are missing. Saves it to ``out`` (.png, .pdf
    or .svg) when given. Runs of several environments in one directory are refused: their returns cannot be
    averaged into one curve."""
    records = read_runs(runs_dir)
    envs = sorted({r.config.env_id for r in records})
    if len(envs) > 1:
        raise RLHelpersError(f"{runs_dir} holds runs of several environments ({', '.join(envs)}); "
                             "plot each environment's runs from a runs directory of its own")
    arms = arms or tuple(dict.fromkeys(r.arm for r in records))
    seeds = seeds or sorted({r.seed for r in records})
    arm_color = color or arm_colors(arms)
    records = [r for r in records if r.seed in seeds]
    fig, ax = plt.subplots(figsize=(8, 5.6))
    others = runs_by_arm(read_runs(beside, seeds), arms) if beside is not None else {}
    for style, (arm, runs) in zip(itertools.cycle(LINE_STYLES), runs_by_arm(records, arms).items()):
        if others.get(arm):
            curve = arm_curve(others[arm])
            ax.plot(curve.steps, curve.means, "--", color=arm_color(arm), linewidth=1, alpha=0.7,
                    label=f"{arm}, {beside_label or beside}")
        if not runs:
            continue
        curve = arm_curve(runs)
        seed_text = ("seed " if len(runs) == 1 else "seeds ") + ", ".join(str(r.seed) for r in runs)
        line, = ax.plot(curve.steps, curve.means, style, marker="o", markersize=3, color=arm_color(arm),
                        label=f"{arm} ({seed_text})")
        ax.fill_between(curve.steps, curve.means - curve.sems, curve.means + curve.sems, color=line.get_color(),
                        alpha=0.25)
        draw_seeds(ax, runs, line.get_color(), style, alpha=0.6, cross=(9, 2))
    label_steps(ax)
    ax.set_ylabel("evaluation return (mean ± 1 s.e.)")
    ax.set_title(f"{', '.join(envs) or 'no runs found'}: stochastic-policy evaluation")
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend()
    caption = ("Thick: mean over all seeds' evaluation episodes, band ±1 standard error; thin: each seed alone."
               + (f" Dashed: the runs of {beside}, same seeds." if others else ""))
    if any(r.stopped_early() for r in records if r.arm in arms):
        caption += ("\n× marks a seed that exceeded its stop return and stopped; its last evaluation is held "
                    "at later steps.")
    save_figure(fig, out, dpi=120, caption=caption, bottom=0.06)
    names = {r.name for r in records}
    return fig, [name for arm in arms for seed in seeds if (name := format_run_name(arm, seed)) not in names]


def draw_seeds(ax: Axes, runs: Sequence[RunRecord], color: ColorType, style: str, alpha: float,
               cross: tuple[float, float]) -> None:
    """Each run's evaluation means as a thin line, and × (``cross``: its size and line width) on the last of
    each run that stopped early."""
    for run in runs:
        steps, means = [e.step for e in run.evaluations], [e.mean for e in run.evaluations]
        ax.plot(steps, means, style, color=color, linewidth=0.7, alpha=alpha, label=f"_{run.name}")
        if run.stopped_early():
            ax.plot(steps[-1], means[-1], "x", color=color, markersize=cross[0], markeredgewidth=cross[1],
                    label=f"_{run.name} stopped")


def save_figure(fig: Figure, out: str | Path | None, dpi: int = 110, caption: str | None = None,
                bottom: float = 0.0) -> None:
    """Lay ``fig`` out above ``bottom`` (a share of its height), with ``caption`` in small print below, and
    save it to ``out`` (its format from the suffix), creating the folder; not saved when ``out`` is None."""
    if caption is not None:
        fig.text(0.01, 0.01, caption, fontsize=8, va="bottom", ha="left", wrap=True)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=dpi)


def label_steps(*axes: Axes) -> None:
    """Label the x axis of each of ``axes`` as environment steps, in engineering notation (300 k, 2 M) at every
    scale."""
    for ax in axes:
        ax.set_xlabel("environment steps")
        ax.xaxis.set_major_formatter(EngFormatter())
