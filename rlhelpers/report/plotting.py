"""The report's plots: the comparison of docs/experiment.md, built from every run's eval_history.json that
is present, the training diagnostics and the gradient measurements; and where a runs directory's figures go."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter, FuncFormatter, LogLocator, NullFormatter
from matplotlib.typing import ColorType

from rlhelpers.core.errors import RLHelpersError
from rlhelpers.report.curves import arm_curve, runs_by_arm
from rlhelpers.report.experiment import PONG, experiment_of
from rlhelpers.runner.config import ARMS, DEFAULT_RUNS_DIR, format_run_name, parse_run_name
from rlhelpers.runner.store import RunRecord, read_runs

# Two curves can coincide (the all-action actors' gradients are equal in exact arithmetic): distinct styles
# keep both visible.
LINE_STYLES = ("-", "--", ":", "-.")  # one per curve, in the order of the arms drawn


def arm_color(arm: str) -> str:
    """The colour of an arm (an algorithm, or one with a variant: ``config.ARMS``) in every figure, so that a
    reader can follow it from one figure to the next; grey for any other."""
    return f"C{ARMS.index(arm) % 10}" if arm in ARMS else "0.4"


def figures_dir(runs_dir: str | Path) -> Path:
    """Where the report of ``runs_dir`` puts its figures, results JSON and video: ``figures/`` for the
    committed runs in ``runs/``, ``<runs_dir>/figures`` for any other runs directory, so that a report of
    your own runs neither overwrites the committed figures nor shows them beside your table."""
    committed = Path(runs_dir).resolve() == Path(DEFAULT_RUNS_DIR).resolve()
    return Path("figures") if committed else Path(runs_dir) / "figures"


def plot_comparison(runs_dir: str | Path, out: str | Path | None = None, arms: Sequence[str] | None = None,
                    beside: str | Path | None = None) -> tuple[Figure, list[str]]:
    """One axes, one curve per arm (an algorithm, or ``<algo>-<variant>``: mean over seeds and episodes,
    +/- 1 standard-error band) and a thin line per seed, of the seeds named below; seeds that stopped early are
    held and marked. ``arms`` are the curves drawn, in order; ``("a2c", "task1", "task1-pg1")`` draws an
    ablation. The seeds, and by default the arms, are those of the report's experiment on the runs' game
    (``experiment_of``), else every seed and arm present. ``beside``: another runs directory (the committed
    runs) whose curves of the same arms and seeds are drawn dashed, for comparison.
    Returns the figure and the runs of those arms and seeds that are missing. Saves it to ``out`` (.png, .pdf
    or .svg) when given. Runs of several environments in one directory are refused: their returns cannot be
    averaged into one curve."""
    records = read_runs(runs_dir)
    envs = sorted({r.config.get("env_id", "unknown") for r in records})
    if len(envs) > 1:
        raise RLHelpersError(f"{runs_dir} holds runs of several environments ({', '.join(envs)}); "
                             "plot each environment's runs from a runs directory of its own")
    experiment = experiment_of(envs[0]) if envs else None
    arms = arms or (experiment.arms if experiment else tuple(dict.fromkeys(r.arm for r in records)))
    seeds = experiment.seeds if experiment else sorted({r.seed for r in records})
    records = [r for r in records if r.seed in seeds]
    fig, ax = plt.subplots(figsize=(8, 5.6))
    others = runs_by_arm(read_runs(beside, seeds), arms) if beside is not None else {}
    for style, (arm, runs) in zip(itertools.cycle(LINE_STYLES), runs_by_arm(records, arms).items()):
        if others.get(arm):
            curve = arm_curve(others[arm])
            ax.plot(curve.steps, curve.means, "--", color=arm_color(arm), linewidth=1, alpha=0.7,
                    label=f"{arm}, committed runs")
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
               + (f" Dashed: the committed runs of {beside}, same seeds." if others else ""))
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


def _seed_style(seed: int | None, styles: tuple[str, ...], other: str) -> str:
    """The line style or marker of a report seed (its place in Pong's seeds), ``other`` for any other seed."""
    return styles[PONG.seeds.index(seed) % len(styles)] if seed in PONG.seeds else other


def label_steps(*axes: Axes) -> None:
    """Label the x axis of each of ``axes`` as environment steps, in engineering notation (300 k, 2 M) at every
    scale."""
    for ax in axes:
        ax.set_xlabel("environment steps")
        ax.xaxis.set_major_formatter(EngFormatter())


DIAGNOSTICS = (
    ("losses/entropy", "policy entropy"),
    ("losses/explained_variance", "explained variance of the critic"),
    ("charts/episode_return", "training-episode return (last 100)"),
    ("losses/grad_norm", "gradient norm (before clipping)"),
)
# Explained variance is at most 1 but unbounded below: an untrained critic's first updates can reach -200
# and would flatten the rest of the curve, so its axis starts here and lower values run off it.
EXPLAINED_VARIANCE_FLOOR = -1.0


def plot_diagnostics(runs_dir: str | Path, out: str | Path | None = None, arms: Sequence[str] = PONG.arms) -> Figure:
    """Training diagnostics from the metrics.jsonl of every report-seed run of ``arms`` (as in ``plot_comparison``):
    entropy, explained variance, training-episode return and gradient norm against environment steps; one
    colour per arm, one line style per seed (the styles of ``plot_comparison``'s curves)."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    runs = [(record, record.metrics()) for record in read_runs(runs_dir, PONG.seeds) if record.arm in arms]
    for ax, (key, title) in zip(axes.flat, DIAGNOSTICS, strict=True):
        for record, metrics in runs:
            points = [(m["global_step"], m[key]) for m in metrics if m.get(key) is not None]
            if points:
                steps, values = zip(*points, strict=True)
                ax.plot(steps, values, _seed_style(record.seed, LINE_STYLES, LINE_STYLES[-1]),
                        color=arm_color(record.arm), linewidth=0.9, label=record.name)
        if key == "losses/explained_variance" and ax.dataLim.y0 < EXPLAINED_VARIANCE_FLOOR:  # y0: the lowest drawn
            ax.set_ylim(EXPLAINED_VARIANCE_FLOOR, 1.05)  # it never exceeds 1
            title += f" (axis from {EXPLAINED_VARIANCE_FLOOR:g}; lower values off it)"
        ax.set_title(title, fontsize=10)
        ax.ticklabel_format(axis="y", useOffset=False)
        ax.grid(alpha=0.3)
    label_steps(*axes[1])
    if axes[0, 0].lines:
        axes[0, 0].legend(fontsize=7)
    save_figure(fig, out)
    return fig


SEED_MARKERS = ("o", "s", "^", "D")


def _draw_series(ax: Axes, analysis: dict[str, Any], value: Callable[[dict[str, Any]], float | None],
                 style: str = "-", suffix: str = "") -> None:
    """One line per report run (variants left out): ``value(entry)`` of its trained snapshots (step 0 left
    out), where defined, against their steps; the colour of its arm, a marker per seed."""
    series: dict[str, list[tuple[int, float]]] = {}
    for entry in sorted(analysis.get("snapshots", {}).values(), key=lambda e: (e["run"], e["step"])):
        measured = value(entry) if entry["step"] > 0 and parse_run_name(entry["run"])[0] in PONG.arms else None
        if measured is not None:
            series.setdefault(entry["run"], []).append((entry["step"], measured))
    for run, points in series.items():
        arm, seed = parse_run_name(run)
        steps, values = zip(*points, strict=True)
        ax.plot(steps, values, style, marker=_seed_style(seed, SEED_MARKERS, "x"), color=arm_color(arm),
                label=run + suffix)


def plot_mechanism(analysis: dict[str, Any], out: str | Path | None = None) -> Figure:
    """The gradient measurements of ``analysis`` (``rlhelpers.report.analysis``) over training, per run:
    (a) how much noisier a batch's sampled-action gradient is than the all-action one, (b) the batch's
    signal-to-noise ratio of each estimator, (c) the actor term's gradient on the policy head, and (d)
    the size of the advantage each actor follows beside the critic's error."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), sharex=True)
    (variance, snr), (head, advantage) = axes
    _draw_series(variance, analysis, lambda e: e.get("estimator_variance", {}).get("sampled_over_all_action_batch"))
    variance.set_title("(a) sampled-action over all-action gradient variance,\nbatch of 80 states", fontsize=10)
    _draw_series(snr, analysis, lambda e: e.get("estimator_variance", {}).get("batch_signal_to_noise", {}).get(
        "all_action"), suffix=" all-action")
    _draw_series(snr, analysis, lambda e: (e.get("estimator_variance") or e.get("a2c_estimator_variance", {})).get(
        "batch_signal_to_noise", {}).get("sampled"), ":", " sampled")
    snr.set_title("(b) signal-to-noise of a batch's gradient (solid: all-action,\ndotted: sampled; A2C: its own)",
                  fontsize=10)
    snr.set_yscale("symlog", linthresh=0.01)
    _draw_series(head, analysis, lambda e: e["loss_term_gradients"]["actor"]["policy_head"])
    head.set_title("(c) gradient norm of the weighted actor term\non the policy head", fontsize=10)
    _draw_series(advantage, analysis, lambda e: e["advantage_scale"]["advantage_rms"])
    _draw_series(advantage, analysis, lambda e: e["advantage_scale"]["critic_rms_error"]
                 if "estimator_variance" in e else None, ":", " critic error")
    advantage.set_title("(d) advantage the actor follows (solid; RMS) and\nthe Q critic's error (dotted)",
                        fontsize=10)
    for ax in axes.flat:
        if ax is not snr:
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
            ax.yaxis.set_minor_formatter(NullFormatter())
        ax.grid(alpha=0.3, which="both")
    label_steps(*axes[1])
    handles = {line.get_label().split(" ")[0]: line for line in head.lines}
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=6, fontsize=8)
    save_figure(fig, out, bottom=0.05)
    return fig
