"""The ledger of every prediction: each row reads its own section's figures, a prediction without a Δ its own
measurement, and nothing is judged before its runs are complete."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_seeds import FINALS, write_breakout_runs, write_runs

from rlhelpers.report import claims
from rlhelpers.report.experiment import BREAKOUT, PG1ENT_BREAKOUT, PG1ENT_PONG, Prediction
from rlhelpers.report.ledger import DIFFERENCES, Entry, ledger_rows, plot_ledger
from rlhelpers.report.seeds import difference, gap_share

ROOT = Path(__file__).resolve().parents[1]
BREAKOUT_FINALS = {"a2c": [40.0, 30.0, 26.0], "task1": [5.0, 8.0, 6.0], "task1-pg1": [30.0, 12.0, 20.0],
                   "task1-pg1ent": [20.0, 25.0, 30.0]}


def write_entropies(run_dir: Path, entropies: list[float]) -> None:
    """One window (a line of training metrics) per entropy."""
    lines = [{"global_step": 10_000 * (i + 1), "losses/entropy": e} for i, e in enumerate(entropies)]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_every_numbered_prediction_with_a_delta_is_in_one_section_once() -> None:
    assert sorted(DIFFERENCES) == [1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13, 14, 16]
    assert [DIFFERENCES[n][0] for n in (11, 13, 14)] == ["Pong"] * 3
    assert [DIFFERENCES[n][:2] for n in (12, 16)] == [("Breakout", "breakout/")] * 2


def test_an_upper_bound_prediction_holds_only_below_its_bound() -> None:
    keeps_pace = PG1ENT_BREAKOUT.predictions[1]
    assert keeps_pace.number == 16 and keeps_pace.below == 22.0
    assert keeps_pace.holds(5.0, 21.9) and not keeps_pace.holds(5.0, 22.0)
    assert not Prediction(1, "x", "y").holds(0.0, 5.0) and Prediction(1, "x", "y").holds(0.1, 5.0)


def test_the_hub_arm_is_measured_on_both_games_and_its_predictions_judged_once_complete(tmp_path: Path) -> None:
    hub = [15.0, 19.0, 10.0, 12.0, 19.0]
    write_runs(tmp_path / "pong", {**FINALS, "task1-a2chp": [5.0] * 5, "task1-pg1ent": hub})
    write_breakout_runs(tmp_path / "breakout", BREAKOUT_FINALS)
    found = claims.measure(tmp_path / "pong", None, breakout_dir=tmp_path / "breakout")
    score = {arm: [(f - 20) / 2 for f in finals] for arm, finals in FINALS.items()}
    expected = difference([(f - 20) / 2 for f in hub], score["task1"])
    assert found["pg1ent/delta/task1-pg1ent/task1"] == pytest.approx(expected.delta)
    assert found["pg1ent/holds/task1-pg1ent/task1"] is PG1ENT_PONG.predictions[0].holds(expected.low, expected.high)
    low, high = found["breakout/interval/a2c/task1-pg1ent"]
    assert found["breakout/holds/a2c/task1-pg1ent"] is (high < 22.0)
    assert "breakout/delta/a2c/task1-pg1" in found  # the second game's first test is measured beside it
    rows = {row["#"]: row for row in ledger_rows([Entry(11, "step"), Entry(16, "pace")], found)}
    assert rows["11"]["result"].startswith("Δ(task1-pg1ent, task1) = ") and rows["11"]["game"] == "Pong"
    assert rows["16"]["verdict"] == ("holds" if high < 22.0 else "**refuted**")
    assert rows["16"]["interval"] == ("above 0" if low > 0 else "includes 0")
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
