"""The ledger of every prediction: each row reads its own section's figures, a prediction without a Δ its own
measurement, and nothing is judged before its runs are complete."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_seeds import FINALS, write_breakout_runs, write_runs, write_seed_run

from allaction import claims
from allaction.experiment import (
    BREAKOUT,
    FIVE_SEEDS,
    HOLDS,
    LRVF_PONG,
    NOT_SHOWN,
    PG1ENT_BREAKOUT,
    PG1ENT_PONG,
    REFUTED,
    Prediction,
)
from allaction.games import plot_third_game, third_game_markdown, training_score, training_scores
from allaction.ledger import DIFFERENCES, Entry, ledger_rows, plot_ledger, two_by_two_markdown
from allaction.seeds import difference, gap_share
from rlhelpers.runner.store import read_runs

ROOT = Path(__file__).resolve().parents[1]
BREAKOUT_FINALS = {"a2c": [40.0, 30.0, 26.0], "task1": [5.0, 8.0, 6.0], "task1-pg1": [30.0, 12.0, 20.0],
                   "task1-pg1ent": [20.0, 25.0, 30.0]}


def write_entropies(run_dir: Path, entropies: list[float]) -> None:
    """One window (a line of training metrics) per entropy."""
    lines = [{"global_step": 10_000 * (i + 1), "time": 1.0 + i, "losses/entropy": e} for i, e in enumerate(entropies)]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_every_numbered_prediction_with_a_delta_is_in_one_section_once() -> None:
    assert sorted(DIFFERENCES) == [1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13, 14, 16, 17, 18]
    assert [DIFFERENCES[n][:2] for n in (17, 18)] == [("Pong", "lrvf/")] * 2
    assert [DIFFERENCES[n][0] for n in (11, 13, 14)] == ["Pong"] * 3
    assert [DIFFERENCES[n][:2] for n in (12, 16)] == [("Breakout", "breakout/")] * 2


def test_a_prediction_is_refuted_only_where_its_interval_lies_wholly_on_the_wrong_side_of_its_bound() -> None:
    keeps_pace = PG1ENT_BREAKOUT.predictions[1]
    assert keeps_pace.number == 16 and keeps_pace.below == 22.0
    assert [keeps_pace.verdict(*interval) for interval in ((5.0, 21.9), (5.0, 22.0), (-24.0, 54.0), (22.1, 54.0))] \
        == [HOLDS, NOT_SHOWN, NOT_SHOWN, REFUTED]
    faster = Prediction(1, "x", "y")
    assert [faster.verdict(*interval) for interval in ((0.1, 5.0), (0.0, 5.0), (-3.0, 5.0), (-5.0, -0.1))] \
        == [HOLDS, NOT_SHOWN, NOT_SHOWN, REFUTED]


def test_the_hub_arm_is_measured_on_both_games_and_its_predictions_judged_once_complete(tmp_path: Path) -> None:
    hub = [15.0, 19.0, 10.0, 12.0, 19.0]
    write_runs(tmp_path / "pong", {**FINALS, "task1-a2chp": [5.0] * 5, "task1-pg1ent": hub})
    write_breakout_runs(tmp_path / "breakout", BREAKOUT_FINALS)
    found = claims.measure(tmp_path / "pong", None, breakout_dir=tmp_path / "breakout")
    score = {arm: [(f - 20) / 2 for f in finals] for arm, finals in FINALS.items()}
    expected = difference([(f - 20) / 2 for f in hub], score["task1"])
    assert found["pg1ent/delta/task1-pg1ent/task1"] == pytest.approx(expected.delta)
    assert found["pg1ent/verdict/task1-pg1ent/task1"] == PG1ENT_PONG.predictions[0].verdict(expected.low, expected.high)
    low, high = found["breakout/interval/a2c/task1-pg1ent"]
    verdict = HOLDS if high < 22.0 else REFUTED if low > 22.0 else NOT_SHOWN
    assert found["breakout/verdict/a2c/task1-pg1ent"] == verdict
    assert "breakout/delta/a2c/task1-pg1" in found  # the second game's first test is measured beside it
    rows = {row["#"]: row for row in ledger_rows([Entry(11, "step"), Entry(16, "pace")], found)}
    assert rows["11"]["result"].startswith("Δ(task1-pg1ent, task1) = ") and rows["11"]["game"] == "Pong"
    assert rows["16"]["verdict"] == {HOLDS: "holds", REFUTED: "**refuted**", NOT_SHOWN: "*not shown*"}[verdict]
    assert rows["16"]["interval"] == ("below 22" if high < 22 else "above 22" if low > 22 else "includes 22")
    (tmp_path / "pong" / "task1-pg1ent_seed-400" / "eval_history.json").unlink()
    waiting = ledger_rows([Entry(11, "step")], claims.measure(tmp_path / "pong", None))
    assert waiting[0]["result"] == "waiting for its runs" and waiting[0]["verdict"] == "waiting"


def test_the_collapse_prediction_counts_windows_below_the_floor_once_the_three_seeds_finish(tmp_path: Path) -> None:
    write_breakout_runs(tmp_path, BREAKOUT_FINALS)
    for seed, low_windows in zip(BREAKOUT.seeds, (1, 0, 2), strict=True):
        write_entropies(tmp_path / f"task1-pg1ent_seed-{seed}", [0.005] * low_windows + [0.5] * (100 - low_windows))
    found = claims.measure(ROOT / "runs", None, breakout_dir=tmp_path)
    assert found["breakout/windows/task1-pg1ent"] == 300
    assert found["breakout/collapsed/task1-pg1ent"] == pytest.approx(3 / 300)
    assert found["prediction/15"] is True  # 1% at most
    write_entropies(tmp_path / "task1-pg1ent_seed-100", [0.005] + [0.5] * 99)
    assert claims.measure(ROOT / "runs", None, breakout_dir=tmp_path)["prediction/15"] is False
    write_breakout_runs(tmp_path / "training", BREAKOUT_FINALS, a2c_last_step=5_000_000)
    (tmp_path / "training" / "task1-pg1ent_seed-200").rename(tmp_path / "gone")
    assert claims.measure(ROOT / "runs", None, breakout_dir=tmp_path / "training")["prediction/15"] is None


def test_the_predictions_without_a_delta_read_their_own_measurements(tmp_path: Path) -> None:
    write_runs(tmp_path, {**FINALS, "task1-a2chp": [19.0, 19.0, 19.0, 2.0, 19.0]})
    found = claims.measure(tmp_path, None)
    assert found["prediction/6"] is True  # 4 of 5 passed 18
    entry = Entry(6, "stalls removed", "Pong", "{equal_hp/passed/task1-a2chp} of 5 passed 18")
    assert ledger_rows([entry], found)[0] == {"#": "6", "game": "Pong", "prediction": "stalls removed",
                                              "result": "4 of 5 passed 18", "verdict": "holds", "interval": ""}
    missing = Entry(7, "learns", "Breakout", "A2C {breakout/last/a2c:.0f}")
    assert ledger_rows([missing], found)[0]["result"] == "waiting for its runs"  # no Breakout runs given


def test_the_figure_draws_a_panel_per_game_and_each_complete_delta(tmp_path: Path) -> None:
    write_runs(tmp_path / "pong", FINALS)
    write_breakout_runs(tmp_path / "breakout", BREAKOUT_FINALS)
    found = claims.measure(tmp_path / "pong", None, breakout_dir=tmp_path / "breakout")
    entries = [Entry(n, "") for n in (1, 2, 3, 11, 8, 12, 16)] + [Entry(0, "", "Pong", "")]
    fig = plot_ledger(entries, found, tmp_path / "ledger.png")
    pong, breakout = fig.axes
    assert [t.get_text() for t in pong.get_yticklabels()][::-1] == [
        "Δ(a2c, task1)", "Δ(task1-pg1, task1)", "Δ(a2c, task1-pg1)", "Δ(task1-pg1ent, task1)"]
    assert len(pong.containers) == 3 and sum("waiting" in t.get_text() for t in pong.texts) == 1  # no pg1ent runs
    assert len(breakout.containers) == 3  # 8, 12 and 16
    assert sum(line.get_linestyle() == "--" for line in breakout.lines) == 1  # 16's bound
    assert (tmp_path / "ledger.png").stat().st_size > 0


def test_the_gap_share_resamples_each_arm_once_for_both_differences() -> None:
    # x resampled: mean 10 or 12 or 14; y and z constant: the ratio (x - 8) / (x - 4) is 1/3, 4/8 or 6/10
    share, low, high = gap_share([10.0, 14.0], [8.0], [4.0])
    assert share == pytest.approx(4 / 8) and (low, high) == pytest.approx((1 / 3, 6 / 10))
    # resampled apart for the two differences, the ratio would reach (10 - 8) / (14 - 4) = 0.2
    assert gap_share([10.0, 14.0], [8.0], [4.0], seed=1)[1] > 0.3


def test_the_hub_arm_s_unjudged_figures_wait_for_all_seeds(tmp_path: Path) -> None:
    a2chp = [2.0, 0.0, 5.0, 3.0, 1.0]
    write_runs(tmp_path / "pong", {**FINALS, "task1-a2chp": a2chp, "task1-pg1ent": [15.0, 19.0, 10.0, 12.0, 19.0]})
    write_breakout_runs(tmp_path / "breakout", BREAKOUT_FINALS)
    found = claims.measure(tmp_path / "pong", None, breakout_dir=tmp_path / "breakout")
    score = {arm: (np.array(finals) - 20) / 2 for arm, finals in
             {**FINALS, "task1-a2chp": a2chp, "task1-pg1ent": [15.0, 19.0, 10.0, 12.0, 19.0]}.items()}
    expected = (score["task1-pg1"].mean() - score["task1-pg1ent"].mean()) / (
        score["task1-pg1"].mean() - score["task1-a2chp"].mean())
    share, (low, high) = found["pg1ent/gap_share"], found["pg1ent/gap_share_interval"]
    assert share == pytest.approx(expected) and low <= share <= high
    assert claims.format_figure(share, ".0%") == f"{expected:.0%}"  # a figure the text can cite as it is
    # on Pong, post hoc: no prediction compares them
    against_a2c = difference(score["task1-pg1ent"].tolist(), score["a2c"].tolist())
    assert found["pg1ent/delta/task1-pg1ent/a2c"] == pytest.approx(against_a2c.delta)
    assert found["pg1ent/interval/task1-pg1ent/a2c"] == pytest.approx((against_a2c.low, against_a2c.high))
    assert found["pg1ent/p/task1-pg1ent/a2c"] == pytest.approx(against_a2c.p_greater)
    hub, pg1 = ([f * 10.5 / 20 for f in BREAKOUT_FINALS[arm]] for arm in ("task1-pg1ent", "task1-pg1"))
    breakout = difference(hub, pg1)
    assert found["breakout/delta/task1-pg1ent/task1-pg1"] == pytest.approx(breakout.delta)
    assert found["breakout/interval/task1-pg1ent/task1-pg1"] == pytest.approx((breakout.low, breakout.high))
    (tmp_path / "pong" / "task1-a2chp_seed-0" / "eval_history.json").unlink()
    assert "pg1ent/gap_share" not in claims.measure(tmp_path / "pong", None)
    (tmp_path / "pong" / "task1-pg1ent_seed-0" / "eval_history.json").unlink()
    assert "pg1ent/delta/task1-pg1ent/a2c" not in claims.measure(tmp_path / "pong", None)


@pytest.mark.parametrize(("lrvf", "passes"), [([19.0, 19.0, 19.0, 2.0, 19.0], True),
                                              ([19.0, 5.0, 19.0, 2.0, 19.0], False)])
def test_the_missing_cell_is_judged_on_its_two_differences_and_its_seeds_above_18(
        tmp_path: Path, lrvf: list[float], passes: bool) -> None:
    hub = [15.0, 19.0, 10.0, 12.0, 19.0]
    write_runs(tmp_path, {**FINALS, "task1-pg1ent": hub, "a2c-lrvf": lrvf})
    found = claims.measure(tmp_path, None)
    score = {arm: [(f - 20) / 2 for f in finals] for arm, finals in {**FINALS, "task1-pg1ent": hub}.items()}
    score["a2c-lrvf"] = [(f - 20) / 2 for f in lrvf]
    for prediction in LRVF_PONG.predictions:
        expected = difference(score[prediction.x], score[prediction.y])
        assert found[f"lrvf/delta/{prediction.key}"] == pytest.approx(expected.delta)
        assert found[f"lrvf/verdict/{prediction.key}"] == prediction.verdict(expected.low, expected.high)
    assert found["prediction/19"] is passes
    (tmp_path / "a2c-lrvf_seed-400" / "eval_history.json").unlink()
    waiting = claims.measure(tmp_path, None)
    assert waiting["prediction/19"] is None and "lrvf/verdict/a2c-lrvf/a2c" not in waiting


def test_the_2x2_is_read_both_ways_with_each_arm_s_mean_score_and_entropy_floor(tmp_path: Path) -> None:
    """Pong's 2×2 beside predictions 17-19: the setting's effect on each estimator and the estimator's at each
    setting, each Δ as a section's differences are measured; a Δ waits until both of its arms have all five seeds."""
    finals = {**FINALS, "task1-a2chp": [2.0, 0.0, 5.0, 3.0, 1.0], "task1-pg1ent": [15.0, 19.0, 10.0, 12.0, 19.0],
              "a2c-lrvf": [19.0, 16.0, 19.0, 2.0, 19.0]}
    write_runs(tmp_path, finals)
    for seed, entropy in zip(FIVE_SEEDS, (1.2, 0.9, 1.4, 1.1, 1.3), strict=True):  # a2c-lrvf's training entropies
        lines = [{"global_step": step, "time": 0.0, "losses/entropy": e} for step, e in ((0, 1.79), (10_000, entropy))]
        (tmp_path / f"a2c-lrvf_seed-{seed}" / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in lines))
    found = claims.measure(tmp_path, None)
    score = {arm: [(f - 20) / 2 for f in arm_finals] for arm, arm_finals in finals.items()}
    for x, y in (("a2c-lrvf", "a2c"), ("task1-pg1ent", "task1-a2chp"), ("task1-a2chp", "a2c"),
                 ("task1-pg1ent", "a2c-lrvf")):
        expected = difference(score[x], score[y])
        assert found[f"lrvf/delta/{x}/{y}"] == pytest.approx(expected.delta)
        assert found[f"lrvf/interval/{x}/{y}"] == pytest.approx((expected.low, expected.high))
    assert found["lrvf/entropy_floor/a2c-lrvf"] == pytest.approx((0.9, 1.4)) and found["lrvf/entropy_floor/a2c"] is None
    table = two_by_two_markdown(found).splitlines()
    lrvf_cell = f"`a2c-lrvf`: S = {np.mean(score['a2c-lrvf']):.1f} (5 seeds), lowest entropy 0.90–1.4"
    assert table[4].split(" | ")[2] == lrvf_cell  # A2C's estimator at task1's setting
    expected, fmt = difference(score["a2c-lrvf"], score["a2c"]), claims.SIGNIFICANT
    assert table[4].split(" | ")[3] == (f"Δ(a2c-lrvf, a2c) = {claims.format_figure(expected.delta, fmt)}, "
                                        f"{claims.format_figure((expected.low, expected.high), fmt)} |")
    assert table[6].startswith("| the estimator's effect | Δ(task1-a2chp, a2c) = ")
    (tmp_path / "a2c-lrvf_seed-400" / "eval_history.json").unlink()
    waiting = two_by_two_markdown(claims.measure(tmp_path, None)).splitlines()
    assert "(4 seeds)" in waiting[4] and waiting[4].endswith(" | waiting for its runs |")
    assert waiting[6].endswith(" | waiting for its runs |  |") and "Δ(task1-a2chp, a2c) = " in waiting[6]


def write_spaceinvaders_run(runs_dir: Path, seed: int, scores: dict[int, list[float]], last_step: int) -> None:
    """A2C's SpaceInvaders run ``seed`` evaluated up to ``last_step`` of 10M, its two envs' training games ``scores``
    logged in games.jsonl, ten games a line."""
    every, total = 500_000, 10_000_000
    write_seed_run(runs_dir, "a2c", seed, {step: 300.0 for step in range(0, last_step + 1, every)}, every, None, total)
    history = runs_dir / f"a2c_seed-{seed}" / "eval_history.json"
    saved = json.loads(history.read_text())
    history.write_text(json.dumps({**saved, "config": {**saved["config"], "n_envs": len(scores)}}))
    games = [[env, score, 700] for env, env_scores in scores.items() for score in env_scores]
    lines = [{"global_step": 1_000 * (i + 1), "time": 0.0, "games": games[i:i + 10]} for i in range(0, len(games), 10)]
    (history.parent / "games.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


@pytest.mark.parametrize(("second", "full_mark"), [(600.0, True), (590.0, False)])
def test_the_course_s_figure_on_the_third_game_is_each_env_s_last_100_games_averaged_over_the_envs(
        tmp_path: Path, second: float, full_mark: bool) -> None:
    # env 0: 50 early games at 0 and 100 at 800; env 1: 100 at 400. By env: (800 + 400) / 2 = 600; pooled: 400.
    write_spaceinvaders_run(tmp_path, 0, {0: [0.0] * 50 + [800.0] * 100, 1: [400.0] * 100}, 10_000_000)
    write_spaceinvaders_run(tmp_path, 100, {0: [second] * 100, 1: [second] * 100}, 9_500_000)
    found = claims.measure(tmp_path / "pong", None, spaceinvaders_dir=tmp_path)
    assert found["spaceinvaders/reward_mean_100/a2c_seed-0"] == pytest.approx(600.0)
    assert found["spaceinvaders/pooled/a2c_seed-0"] == pytest.approx(400.0)
    assert found["prediction/20"] is None  # seed 100 is still training
    write_spaceinvaders_run(tmp_path, 100, {0: [second] * 100, 1: [second] * 100}, 10_000_000)
    found = claims.measure(tmp_path / "pong", None, spaceinvaders_dir=tmp_path)
    assert found["spaceinvaders/reward_mean_100"] == pytest.approx((min(600.0, second), 600.0))
    assert found["prediction/20"] is full_mark


def test_the_third_game_s_table_and_figure_show_each_run_s_training_score_beside_its_evaluations(
        tmp_path: Path) -> None:
    write_spaceinvaders_run(tmp_path, 0, {0: [0.0] * 50 + [800.0] * 100, 1: [400.0] * 100}, 10_000_000)
    records = [r for r in read_runs(tmp_path) if r.name == "a2c_seed-0"]
    scores = training_scores(records[0])
    assert [s.step for s in scores] == [1_000 * (i + 1) for i in range(150, 250, 10)]  # from env 1's first game on
    assert scores[-1] == training_score(records[0]) and scores[-1].reward_mean_100 == pytest.approx(600.0)
    assert training_score(records[0], 171_000) == scores[2] and training_score(records[0], 150_000) is None
    table = third_game_markdown(records)
    assert "| a2c_seed-0 | 10,000,000 | 300.0 ± 1.0 | 600.0 | 400.0 | 250 |" in table
    assert third_game_markdown([]).startswith("*No SpaceInvaders runs yet")
    fig = plot_third_game(records, tmp_path / "spaceinvaders.png")
    (ax,) = fig.axes
    assert len(ax.lines) == 2 + 3 and (tmp_path / "spaceinvaders.png").stat().st_size > 0  # 2 curves, 3 bars
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    (caption,) = fig.texts
    wrapped = caption._get_wrapped_text()  # type: ignore[attr-defined]  # the lines it is drawn in
    with caption._cm_set(text=wrapped):  # type: ignore[attr-defined]
        caption_top = caption.get_window_extent(renderer).y1
    axes_box = ax.get_tightbbox(renderer)
    assert axes_box is not None and caption_top < axes_box.y0  # below the axes and their step label, not over them
