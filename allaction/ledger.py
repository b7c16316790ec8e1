"""The ledger of every prediction the report has tested: one row each with its game, what it claims, Δ with its
interval and P (or its measured figure, for a prediction without Δ), its verdict by its own pre-registered criterion
and what the interval shows; and one figure of the Δs against 0, a panel per game. What each prediction says is the
notebook's prose (``Entry``); every figure is ``claims.measure``'s."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from allaction.claims import BREAKOUT_SECTIONS, PONG_SECTIONS, SIGNIFICANT, format_figure, seed_scores
from allaction.experiment import ESTIMATORS, HOLDS, NOT_SHOWN, REFUTED, STEP_SETTINGS, TWO_BY_TWO, Prediction
from allaction.results import markdown_table
from allaction.seeds import RESAMPLES, draw_differences
from rlhelpers.plots import save_figure

GAMES = (("Pong", PONG_SECTIONS), ("Breakout", BREAKOUT_SECTIONS))
# Each prediction with a Δ, by number: its game, the prefix of its section's figures in ``claims.measure`` and itself.
DIFFERENCES = {p.number: (game, prefix, p) for game, sections in GAMES for prefix, comparison in sections
               for p in comparison.predictions}
WAITING = "waiting for its runs"
SHOWN_AS = {HOLDS: HOLDS, REFUTED: f"**{REFUTED}**", NOT_SHOWN: f"*{NOT_SHOWN}*"}  # a verdict in the ledger


@dataclass(frozen=True)
class Entry:
    """A row of the ledger: prediction ``number`` (0 for the first, unnumbered one), what it ``says`` in a few words,
    and for a prediction without a Δ its ``game`` and its ``figure``, a ``str.format`` template over the keys of
    ``claims.measure`` (its verdict is the measurement ``prediction/<number>``)."""

    number: int
    says: str
    game: str = ""
    figure: str = ""


def _difference(prefix: str, prediction: Prediction, measured: dict[str, Any]) -> tuple[str, str | None, str]:
    """A Δ prediction's result, verdict and what its interval shows against the prediction's bound, from its section's
    figures (``prefix``); ``WAITING`` until both of its arms have all their seeds."""
    found: dict[str, Any] = {name: measured.get(f"{prefix}{name}/{prediction.key}")
                             for name in ("delta", "interval", "p", "verdict")}
    if found["delta"] is None:
        return WAITING, None, ""
    (low, high), bound = found["interval"], prediction.below or 0
    return (f"Δ({prediction.x}, {prediction.y}) = {format_figure(found['delta'], SIGNIFICANT)}, "
            f"{format_figure((low, high), SIGNIFICANT)}; P = {found['p']:.2f}", found["verdict"],
            f"above {bound:g}" if low > bound else f"below {bound:g}" if high < bound else f"includes {bound:g}")


def _figure(entry: Entry, measured: dict[str, Any]) -> str:
    """The figure of a prediction without a Δ; ``WAITING`` while a measurement it names is missing or None."""
    try:
        return entry.figure.format_map(measured)
    except (KeyError, TypeError, ValueError):
        return WAITING


def ledger_rows(entries: list[Entry], measured: dict[str, Any]) -> list[dict[str, str]]:
    """The ledger's rows, one per entry in order."""
    rows = []
    for entry in entries:
        if entry.number in DIFFERENCES:
            game, prefix, prediction = DIFFERENCES[entry.number]
            result, verdict, shows = _difference(prefix, prediction, measured)
        else:
            holds, game, shows = measured.get(f"prediction/{entry.number}"), entry.game, ""
            verdict = None if holds is None else HOLDS if holds else REFUTED
            result = WAITING if verdict is None else _figure(entry, measured)  # no figure shown before its verdict
        shown = "waiting" if verdict is None else SHOWN_AS[verdict]
        rows.append({"#": str(entry.number) if entry.number else "–", "game": game, "prediction": entry.says,
                     "result": result, "verdict": shown, "interval": shows})
    return rows


def ledger_markdown(entries: list[Entry], measured: dict[str, Any]) -> str:
    """The ledger as a Markdown table: Δ(x, y) with its 95% interval and P(X > Y), or the prediction's figure."""
    return markdown_table(None, ledger_rows(entries, measured), left=(1, 2, 3, 4, 5))


def two_by_two_markdown(measured: dict[str, Any]) -> str:
    """Pong's 2×2 (``TWO_BY_TWO``) read both ways, beside predictions 17-19: each arm's mean score S over its seeds so
    far and the range of its seeds' lowest training entropy; the setting's effect on each estimator (last column) and
    the estimator's effect at each setting (last row), Δ with its 95% interval, ``WAITING`` until both of its arms have
    all their seeds."""
    def effect(x: tuple[str, str], y: tuple[str, str]) -> str:
        key = f"{x[1]}/{y[1]}"
        if (delta := measured.get(f"lrvf/delta/{key}")) is None:
            return WAITING
        return (f"Δ({x[1]}, {y[1]}) = {format_figure(delta, SIGNIFICANT)}, "
                f"{format_figure(measured[f'lrvf/interval/{key}'], SIGNIFICANT)}")

    def cell(section: str, arm: str) -> str:
        scores, floor = seed_scores(measured, section, arm), measured.get(f"lrvf/entropy_floor/{arm}")
        return (f"`{arm}`: S = {np.mean(scores):.1f} ({len(scores)} seeds), lowest "
                f"entropy {format_figure(floor, SIGNIFICANT)}") if scores else f"`{arm}`: {WAITING}"

    (a2c, lrvf), (a2chp, pg1ent) = TWO_BY_TWO
    rows = [{"": estimator, **{setting: cell(*arm) for setting, arm in zip(STEP_SETTINGS, row, strict=True)},
             "the setting's effect": effect(row[1], row[0])}
            for estimator, row in zip(ESTIMATORS, TWO_BY_TWO, strict=True)]
    rows.append({"": "the estimator's effect", STEP_SETTINGS[0]: effect(a2chp, a2c),
                 STEP_SETTINGS[1]: effect(pg1ent, lrvf), "the setting's effect": ""})
    return markdown_table("Pong's 2×2, not judged: estimator by lr and vf_coef (S from 0 to 7.2M steps; Δ with its 95% "
                          "interval)", rows, left=(0, 1, 2, 3))


def plot_ledger(entries: list[Entry], measured: dict[str, Any], out: str | Path | None = None) -> Figure:
    """The Δ of every prediction of ``entries`` that has one, with its 95% interval against 0, a panel per game, in
    the order of ``entries``."""
    games = {game: [(p, prefix) for g, prefix, p in (DIFFERENCES[e.number] for e in entries if e.number in DIFFERENCES)
                    if g == game] for game, _ in GAMES}
    fig, axes = plt.subplots(len(games), 1, figsize=(9, 1.4 + 0.55 * sum(map(len, games.values()))),
                             height_ratios=[max(len(rows), 1) for rows in games.values()])
    for ax, (game, sections) in zip(axes, GAMES, strict=True):
        draw_differences(ax, measured, games[game], WAITING)
        window = " to ".join(f"{step / 1e6:g}M" if step else "0" for step in sections[0][1].window)
        ax.set_title(f"{game} (S: the mean evaluation return from {window} steps)", fontsize=10)
    save_figure(fig, out, dpi=120, bottom=0.06, caption=(
        f"Each prediction's Δ with its 95% percentile-bootstrap interval over seeds ({RESAMPLES:,} resamples) and "
        "P(X > Y); black: the prediction holds, red: refuted (the interval lies entirely on the wrong side of its "
        "bound), orange: not shown (the interval straddles it); dashed: a bound other than 0."))
    return fig
