"""Do the report's answers hold on more seeds, and on a second game? Each run's score S and two arms' difference
of mean scores, with a percentile-bootstrap interval over seeds, as a follow-up section's predictions define them
(``experiment.Comparison``); what the section cites, and its figure."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from allaction.experiment import ABLATION, HOLDS, NOT_SHOWN, REFUTED, Comparison, Prediction
from allaction.figures import arm_color
from rlhelpers.core.config import filled
from rlhelpers.plots import arm_curve, draw_seeds, label_steps, last_evaluation, mean_of_means, runs_by_arm, save_figure
from rlhelpers.runner.store import RunRecord, read_runs

RESAMPLES = 10_000
NO_RUNS = "no runs"  # what a section measures of an arm that has no runs
VERDICT_COLORS = {HOLDS: "0.2", REFUTED: "C3", NOT_SHOWN: "C1"}  # black, red, orange


def seed_score(record: RunRecord, window: tuple[int, int]) -> float | None:
    """S: ``mean_of_means`` at every evaluation step of ``window`` (first, last); None while the run has not got
    there."""
    return mean_of_means(record, range(window[0], window[1] + 1, filled(record.config.eval_interval, "eval_interval")))


def span(values: Iterable[float]) -> tuple[float, float] | None:
    """The smallest and the largest of ``values``, None when there are none."""
    values = list(values)
    return (min(values), max(values)) if values else None


@dataclass(frozen=True)
class Difference:
    """Δ(X, Y), the difference of two arms' mean scores, its bootstrap interval [low, high], and
    ``p_greater``, the share of seed pairs (one of X, one of Y) in which X scores higher."""

    delta: float
    low: float
    high: float
    p_greater: float

    def keys(self, pair: str) -> dict[str, Any]:
        """The figures under the keys a section gives them, for the pair ``pair`` ("<x>/<y>"): ``delta/<pair>``,
        ``interval/<pair>`` (low, high) and ``p/<pair>``."""
        return {f"delta/{pair}": self.delta, f"interval/{pair}": (self.low, self.high), f"p/{pair}": self.p_greater}


def difference(x: Sequence[float], y: Sequence[float], seed: int = 0, level: float = 0.95) -> Difference:
    """Δ(X, Y) of the seed scores ``x`` and ``y`` with its ``level`` percentile-bootstrap interval: each of
    ``RESAMPLES`` draws resamples each arm's seeds with replacement (a generator seeded with ``seed``)."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    rng = np.random.default_rng(seed)
    deltas = (rng.choice(xs, size=(RESAMPLES, len(xs))).mean(axis=1)
              - rng.choice(ys, size=(RESAMPLES, len(ys))).mean(axis=1))
    low, high = np.quantile(deltas, [(1 - level) / 2, (1 + level) / 2])
    return Difference(float(xs.mean() - ys.mean()), float(low), float(high),
                      float(np.mean(xs[:, None] > ys[None, :])))


def gap_share(x: Sequence[float], y: Sequence[float], z: Sequence[float], seed: int = 0,
              level: float = 0.95) -> tuple[float, float, float]:
    """Δ(X, Y) / Δ(X, Z), the share of X's lead over Z that Y's seed scores account for, with its ``level``
    percentile-bootstrap interval: each of ``RESAMPLES`` draws resamples each arm's seeds once, X's for the numerator
    and the denominator alike."""
    xs, ys, zs = (np.asarray(scores, dtype=float) for scores in (x, y, z))
    rng = np.random.default_rng(seed)
    mx, my, mz = (rng.choice(a, size=(RESAMPLES, len(a))).mean(axis=1) for a in (xs, ys, zs))
    low, high = np.quantile((mx - my) / (mx - mz), [(1 - level) / 2, (1 + level) / 2])
    return float((xs.mean() - ys.mean()) / (xs.mean() - zs.mean())), float(low), float(high)


def arm_runs(runs_dir: str | Path, comparison: Comparison = ABLATION) -> dict[str, list[RunRecord]]:
    """The evaluated runs of each arm of ``comparison`` with its seeds in ``runs_dir``, by seed."""
    return runs_by_arm(read_runs(runs_dir, comparison.seeds), comparison.arms)


def measure_seeds(runs_dir: str | Path, comparison: Comparison = ABLATION) -> dict[str, Any]:
    """What a follow-up section cites, by key: ``score/<run>`` (S, None before it gets there), ``scored/<arm>``
    (how many seeds have S), ``passed/<arm>`` (how many seeds' evaluations exceeded its stop return), ``pass/<arm>``
    (the range of their first steps above it), ``training/<arm>`` (how many seeds are not finished yet) and
    ``last/<arm>`` (the mean of its seeds' last evaluation means), for each arm of ``comparison`` (``NO_RUNS`` for
    an arm without runs); and per prediction, x over y, once both arms have S for every seed: ``delta/<x>/<y>``
    (Δ), ``interval/<x>/<y>`` (low, high), ``p/<x>/<y>`` (P(X > Y)) and ``verdict/<x>/<y>`` (``Prediction.verdict``)."""
    return measure_arms(arm_runs(runs_dir, comparison), comparison)


def measure_arms(runs: dict[str, list[RunRecord]], comparison: Comparison) -> dict[str, Any]:
    """``measure_seeds`` of the runs of each arm, already read (so that a figure's titles and curves come from
    one reading of runs that may be training)."""
    found: dict[str, Any] = {}
    scores: dict[str, list[float]] = {}
    stop = comparison.stop_return
    for arm, records in runs.items():
        found.update({f"score/{r.name}": seed_score(r, comparison.window) for r in records})
        scores[arm] = [found[f"score/{r.name}"] for r in records if found[f"score/{r.name}"] is not None]
        passes = [step for r in records if stop is not None and (step := r.first_step_above(stop)) is not None]
        counts = {f"scored/{arm}": len(scores[arm]), f"passed/{arm}": len(passes), f"pass/{arm}": span(passes),
                  f"training/{arm}": sum(not r.finished() for r in records),
                  f"last/{arm}": float(np.mean([last_evaluation(r).mean for r in records])) if records else None}
        found.update(counts if records else dict.fromkeys(counts, NO_RUNS))
    for prediction in comparison.predictions:
        if all(len(scores[arm]) == len(comparison.seeds) for arm in (prediction.x, prediction.y)):
            result = difference(scores[prediction.x], scores[prediction.y])
            found.update(result.keys(prediction.key))
            found[f"verdict/{prediction.key}"] = prediction.verdict(result.low, result.high)
    return found


def plot_seeds(runs_dir: str | Path, comparison: Comparison = ABLATION, out: str | Path | None = None) -> Figure:
    """The figure of a follow-up section, of the arms of its ``comparison`` (three: a-c, four: a-d): per arm, its
    seeds (thin; × where one stopped above its stop return) and their mean (thick), the score window shaded; then each
    seed's score S and the arm's mean; and Δ of each prediction with its 95% bootstrap interval and P(X > Y), once both
    of its arms have all their seeds."""
    runs = arm_runs(runs_dir, comparison)
    found, stop = measure_arms(runs, comparison), comparison.stop_return
    window = " to ".join(f"{step / 1e6:.1f}M" if step else "0" for step in comparison.window)
    n, letters = len(runs), "abcdefgh"  # a panel per arm on top; below, the scores and the differences
    fig = plt.figure(figsize=(max(11.0, 3.6 * n), 7.6))
    rows = fig.add_gridspec(2, 1, height_ratios=(1.1, 1))  # tight_layout fits the rows; the gaps within are fixed
    top, bottom = rows[0].subgridspec(1, n, wspace=0.08), rows[1].subgridspec(1, 2, wspace=0.55)
    curves = top.subplots(sharex=True, sharey=True, squeeze=False)[0]  # the other arms share the first one's axes
    for i, (ax, (arm, records)) in enumerate(zip(curves, runs.items(), strict=True)):  # one arm each
        draw_seeds(ax, records, arm_color(arm), "-", alpha=0.55, cross=(7, 1.5))
        if records:
            curve = arm_curve(records)
            ax.plot(curve.steps, curve.means, color=arm_color(arm), linewidth=2.2, label="mean of the seeds")
        ax.axvspan(*comparison.window, color="0.5", alpha=0.08, linewidth=0)
        if stop is not None:
            ax.axhline(stop, color="0.3", linestyle=":", linewidth=0.8)
        label_steps(ax)
        ax.grid(alpha=0.3)
        when = found[f"pass/{arm}"] if records else None  # first and last step, written once when they round alike
        notes = [] if when is None else ["at " + "-".join(dict.fromkeys(f"{step / 1e6:.1f}M" for step in when))]
        training = found[f"training/{arm}"] if records else 0  # a seed on its way is not one that failed
        notes += [f"{training} still training"] if training else []
        count = f"{len(records)} seed" + "s" * (len(records) != 1)
        title = f"({letters[i]}) {arm}: " + ("no runs" if not records else count if stop is None
                                             else f"{found[f'passed/{arm}']} of {len(records)} above {stop:g}")
        ax.set_title("\n".join([title, ", ".join(notes)] if notes else [title]), fontsize=10)
    curves[0].set_ylabel("mean evaluation return")
    _draw_scores(fig.add_subplot(bottom[0]), runs, found, window, letters[n])
    differences = fig.add_subplot(bottom[1])
    draw_differences(differences, found, [(p, "") for p in comparison.predictions],
                     f"waiting for all {len(comparison.seeds)} seeds of both arms")
    differences.set_title(f"({letters[n + 1]}) the predictions: Δ with its 95% interval", fontsize=10)
    save_figure(fig, out, dpi=120, bottom=0.04, caption=(
        f"Thin: each seed; thick: their mean. Shaded: the steps that S averages ({window}). "
        f"Intervals: 95% percentile bootstrap over seeds, {RESAMPLES:,} resamples; P: the share of seed pairs in "
        "which the first arm scores higher."))
    return fig


def _draw_scores(ax: Axes, runs: dict[str, list[RunRecord]], found: dict[str, Any], window: str, letter: str) -> None:
    scored = {arm: sorted((found[f"score/{r.name}"], r.seed) for r in records if found[f"score/{r.name}"] is not None)
              for arm, records in runs.items()}
    every = [score for points in scored.values() for score, _ in points] or [0.0]
    pad = max(max(every) - min(every), 1.0) * 0.1
    low, high = ax.set_ylim(min(every) - pad, max(every) + pad)
    gap = 0.06 * (high - low)  # the seed labels' least vertical distance: 6% of the panel's height
    for i, (arm, points) in enumerate(scored.items()):
        ax.plot([i] * len(points), [score for score, _ in points], "o", color=arm_color(arm), markersize=5)
        if points:
            ax.hlines(np.mean([s for s, _ in points]), i - 0.15, i + 0.15, color=arm_color(arm), linewidth=2)
        for side in (0, 1):  # labels alternate sides, and on each side close ones move up to stay readable
            labelled = points[side::2]  # placed at its score, or ``gap`` above the label below
            ys = accumulate((s for s, _ in labelled), lambda below, y: max(y, below + gap))
            for (_, seed), y in zip(labelled, ys, strict=True):
                ax.text(i + (0.2 if side else -0.2), y, str(seed), ha="left" if side else "right",
                        va="center", fontsize=7)
    ax.set_xticks(range(len(runs)), list(runs))
    ax.set_xlim(-0.6, len(runs) - 0.4)
    ax.set_ylabel(f"score S (mean return, {window})")
    ax.set_title(f"({letter}) each seed's score S (labelled by seed) and the arm's mean", fontsize=10)
    ax.grid(alpha=0.3, axis="y")


def draw_differences(ax: Axes, found: dict[str, Any], rows: Sequence[tuple[Prediction, str]], waiting: str) -> None:
    """Each of ``rows``, a prediction with the prefix of its section's figures in ``found``, top down: Δ with its 95%
    interval, P(X > Y) and the verdict, the bound of a prediction on the interval's upper end, or ``waiting`` until
    its arms have all their seeds."""
    for y, (prediction, prefix) in enumerate(reversed(rows)):  # the first prediction at the top
        key = f"{prefix}{{}}/{prediction.key}"
        if key.format("delta") not in found:
            ax.text(0.5, y, waiting, ha="center", va="center", fontsize=8, transform=ax.get_yaxis_transform())
            continue
        (low, high), delta = found[key.format("interval")], found[key.format("delta")]
        verdict = found[key.format("verdict")]
        ax.errorbar(delta, y, xerr=[[delta - low], [high - delta]], fmt="o", color=VERDICT_COLORS[verdict], capsize=4)
        if prediction.below is not None:
            ax.plot([prediction.below] * 2, [y - 0.3, y + 0.3], "--", color="0.3", linewidth=1)
        ax.annotate(f"P = {found[key.format('p')]:.2f}; prediction {prediction.number} {verdict}", (delta, y),
                    xytext=(0, 9), textcoords="offset points", ha="center", fontsize=8)
    ax.axvline(0, color="0.3", linewidth=0.8)
    ax.set_yticks(range(len(rows)), [f"Δ({p.x}, {p.y})" for p, _ in reversed(rows)])
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlabel("difference of mean scores S")
    ax.grid(alpha=0.3, axis="x")
