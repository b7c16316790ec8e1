"""The report's plots: the comparison of its experiments (the helper's evaluation-curve plot in the study's
colours), the training diagnostics and the gradient measurements."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
from matplotlib.typing import ColorType

from allaction.experiment import ARMS, PONG, experiment_of
from rlhelpers.plots import LINE_STYLES, arm_colors, label_steps, plot_comparison, save_figure
from rlhelpers.runner.config import parse_run_name
from rlhelpers.runner.store import read_runs


def arm_color(arm: str) -> ColorType:
    """The colour of an arm of the study (``ARMS``) in every figure, so that a reader can follow it from one figure
    to the next; grey for any other."""
    return arm_colors(ARMS)(arm)


def plot_experiment(runs_dir: str | Path, out: str | Path | None = None, arms: Sequence[str] | None = None,
                    beside: str | Path | None = None) -> tuple[Figure, list[str]]:
    """``plot_comparison`` of the runs in ``runs_dir`` as the report draws it: the seeds, and by default the arms,
    of the report's experiment on the runs' game (``experiment_of``), else every seed and arm present, in the
    study's colours; ``beside``: the committed runs, dashed."""
    envs = {r.config.env_id for r in read_runs(runs_dir)}
    experiment = experiment_of(envs.pop()) if len(envs) == 1 else None
    return plot_comparison(runs_dir, out, arms or (experiment.arms if experiment else None),
                           experiment.seeds if experiment else None, beside, arm_color, "committed runs")


def _seed_style(seed: int | None, styles: tuple[str, ...], other: str) -> str:
    """The line style or marker of a report seed (its place in Pong's seeds), ``other`` for any other seed."""
    return styles[PONG.seeds.index(seed) % len(styles)] if seed in PONG.seeds else other


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
            points = [(m.global_step, m.values[key]) for m in metrics if m.values.get(key) is not None]
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
    """The gradient measurements of ``analysis`` (``allaction.analysis``) over training, per run:
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
