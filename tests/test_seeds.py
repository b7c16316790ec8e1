"""The five-seed section's statistic: a run's score S and two arms' bootstrap difference, against hand-computed
values and the exact bootstrap distribution of small samples."""

from __future__ import annotations

import dataclasses
import itertools
import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import builders
import numpy as np
import pytest
from matplotlib.colors import to_hex
from test_plotting import label_of

from allaction import claims, seeds
from allaction.experiment import (
    ABLATION,
    BREAKOUT,
    BREAKOUT_TEST,
    EQUAL_HP,
    FIVE_SEEDS,
    HOLDS,
    NOT_SHOWN,
    PG1ENT_PONG,
    REFUTED,
    Comparison,
    Prediction,
)
from allaction.figures import plot_experiment
from allaction.seeds import NO_RUNS, difference, measure_seeds, plot_seeds, seed_score
from rlhelpers.plots import arm_curve
from rlhelpers.runner.store import RunRecord, read_run, read_runs

ROOT = Path(__file__).resolve().parents[1]


def run(means: list[float], every: int = 100, stop: float = 18.0, seed: int = 200) -> RunRecord:
    return builders.made_up_run(f"a2c_seed-{seed}", builders.evaluations(means, every),
                                {"eval_interval": every, "stop_return": stop})


def test_the_score_averages_the_evaluations_up_to_its_step_and_holds_a_stopped_run() -> None:
    assert seed_score(run([-21.0, -15.0, -3.0, 5.0, 20.0]), (0, 300)) == pytest.approx((-21 - 15 - 3 + 5) / 4)
    assert seed_score(run([-21.0, 19.0]), (0, 300)) == pytest.approx((-21 + 19 * 3) / 4)  # stopped at 100, held
    assert seed_score(run([-21.0, -15.0, -3.0]), (0, 300)) is None  # still training, not at step 300 yet


def test_a_window_that_leaves_step_0_out_averages_the_later_evaluations_only() -> None:
    """Breakout's S: the evaluations from the first interval on (0.5M to 10M), step 0 left out."""
    assert seed_score(run([-21.0, -15.0, -3.0, 5.0]), (100, 300)) == pytest.approx((-15 - 3 + 5) / 3)


def test_the_difference_of_two_small_arms_matches_the_exact_bootstrap() -> None:
    # x resampled: mean 0 (1/4), 1 (1/2), 2 (1/4); y is constant: the 2.5% and 97.5% points are 0 and 2
    found = difference([0.0, 2.0], [0.0])
    assert (found.delta, found.low, found.high, found.p_greater) == (1.0, 0.0, 2.0, 0.5)
    assert Prediction(1, "x", "y", above=True).verdict(found.low, found.high) == NOT_SHOWN  # from 0: not above 0


def test_the_interval_holds_95_percent_of_the_exact_bootstrap_distribution() -> None:
    x, y = [1.0, 2.0, 4.0, 8.0], [0.0, 3.0, 5.0]
    exact = np.array([np.mean(a) - np.mean(b) for a in itertools.product(x, repeat=4)
                      for b in itertools.product(y, repeat=3)])  # every resample, each equally likely
    found = difference(x, y)
    assert found.delta == pytest.approx(np.mean(x) - np.mean(y))
    assert np.mean(exact < found.low) <= 0.025 + 0.005 and np.mean(exact <= found.low) >= 0.025 - 0.005
    assert np.mean(exact > found.high) <= 0.025 + 0.005 and np.mean(exact >= found.high) >= 0.025 - 0.005
    assert found.p_greater == pytest.approx(7 / 12)  # 1>0; 4>0,3; 8>0,3,5; 2>0: 7 of the 12 pairs
    assert difference(x, y) == found and difference(x, y, seed=1) != found  # a fixed generator seed


def test_separated_arms_lie_above_zero_and_equal_ones_do_not() -> None:
    separated = difference([5.0, 6.0, 7.0, 8.0, 9.0], [-3.0, -2.0, 0.0, 1.0, 2.0])
    assert Prediction(1, "x", "y", above=True).verdict(separated.low, separated.high) == HOLDS
    same = difference([1.0, 2.0, 3.0, 4.0, 5.0], [1.0, 2.0, 3.0, 4.0, 5.0])
    assert same.low < 0 < same.high and same.p_greater == pytest.approx(10 / 25)


def write_seed_run(runs_dir: Path, arm: str, seed: int, means: dict[int, float], every: int,
                   stop_return: float | None, total: int) -> None:
    """The evaluation history of run ``<arm>_seed-<seed>``: the mean return at each step of ``means`` (its
    episodes one below and one above it)."""
    algo, _, variant = arm.partition("-")
    config = {"algo": algo, "variant": variant, "seed": seed, "eval_interval": every, "stop_return": stop_return,
              "total_timesteps": total}
    builders.write_run(runs_dir / f"{arm}_seed-{seed}", builders.evaluations(list(means.values()), steps=list(means)),
                       config)


def write_runs(runs_dir: Path, finals: dict[str, list[float]], every: int = 1_200_000) -> None:
    """One run per arm and seed of FIVE_SEEDS, rising linearly from -20 to its final mean at 7.2M (then flat,
    to 9.6M); a final mean above 18 stops the run at 7.2M."""
    for arm, arm_finals in finals.items():
        for seed, final in zip(FIVE_SEEDS, arm_finals, strict=True):
            steps = range(0, (7_200_000 if final > 18 else 9_600_000) + 1, every)
            means = {step: -20 + (final + 20) * min(step, 7_200_000) / 7_200_000 for step in steps}
            write_seed_run(runs_dir, arm, seed, means, every, 18.0, 9_600_000)


FINALS = {"a2c": [19.0, 19.0, 19.0, 19.0, 10.0], "task1": [-10.0, -5.0, 0.0, 19.0, -8.0],
          "task1-pg1": [12.0, 19.0, 6.0, 14.0, 19.0]}


def test_the_section_measures_scores_passes_and_each_prediction(tmp_path) -> None:
    write_runs(tmp_path, FINALS)
    found = measure_seeds(tmp_path)
    # a linear rise from -20 to F over steps 0..7.2M sampled at 7 points averages (F - 20) / 2
    assert found["score/task1_seed-100"] == pytest.approx((-5 - 20) / 2)
    assert (found["scored/a2c"], found["passed/a2c"], found["pass/a2c"]) == (5, 4, (7_200_000, 7_200_000))
    assert (found["passed/task1"], found["passed/task1-pg1"]) == (1, 2)
    assert found["training/a2c"] == found["training/task1"] == 0
    scores = {arm: [(f - 20) / 2 for f in finals] for arm, finals in FINALS.items()}
    for prediction in ABLATION.predictions:
        expected = difference(scores[prediction.x], scores[prediction.y])
        assert found[f"delta/{prediction.key}"] == pytest.approx(expected.delta)
        assert found[f"interval/{prediction.key}"] == pytest.approx((expected.low, expected.high))
        assert found[f"verdict/{prediction.key}"] == prediction.verdict(expected.low, expected.high)
    assert found["verdict/a2c/task1"] == found["verdict/task1-pg1/task1"] == HOLDS
    assert found["p/a2c/task1"] == pytest.approx(np.mean([[x > y for y in scores["task1"]] for x in scores["a2c"]]))


def test_no_prediction_is_judged_before_both_arms_have_five_seeds(tmp_path) -> None:
    write_runs(tmp_path, FINALS)
    shutil.rmtree(tmp_path / "task1_seed-300")
    found = measure_seeds(tmp_path)
    assert found["scored/task1"] == 4
    assert "delta/a2c/task1" not in found and "delta/task1-pg1/task1" not in found
    assert "delta/a2c/task1-pg1" in found  # its two arms are complete


def test_a_prediction_that_says_not_above_is_refuted_only_when_the_interval_lies_above_zero() -> None:
    not_slower = Prediction(3, "a2c", "task1-pg1", above=False)
    same, apart = difference([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]), difference([10.0, 11.0, 12.0], [1.0, 2.0, 3.0])
    assert (not_slower.verdict(same.low, same.high), not_slower.verdict(apart.low, apart.high)) == (HOLDS, REFUTED)


def test_the_seed_mean_curve_holds_a_stopped_seed_and_waits_for_one_still_training() -> None:
    """The figure's mean of an arm's seeds is the comparison plot's curve (``arm_curve``)."""
    def mean_curve(records: list[RunRecord]) -> tuple[list[int], list[float]]:
        curve = arm_curve(records)
        return curve.steps.tolist(), curve.means.tolist()

    stopped, going = run([-20.0, 19.0], every=100), run([-20.0, -10.0, 0.0], every=100, seed=300)
    assert mean_curve([stopped, going]) == ([0, 100, 200], [-20.0, 4.5, 9.5])
    assert mean_curve([going, run([-20.0], every=100)]) == ([0], [-20.0])


def test_the_figure_draws_every_seed_and_each_prediction_once_complete(tmp_path) -> None:
    write_runs(tmp_path / "runs", FINALS)
    fig = plot_seeds(tmp_path / "runs", ABLATION, tmp_path / "seeds.png")
    axes = fig.axes
    assert (tmp_path / "seeds.png").stat().st_size > 0
    assert axes[0].get_title() == "(a) a2c: 4 of 5 above 18\nat 7.2M"
    assert axes[2].get_title() == "(c) task1-pg1: 2 of 5 above 18\nat 7.2M"
    assert [len(ax.lines) for ax in axes[:3]] == [5 + 4 + 1 + 1, 5 + 1 + 1 + 1, 5 + 2 + 1 + 1]  # seeds, ×, mean, 18
    assert len(axes[4].containers) == len(ABLATION.predictions)
    assert not any("waiting" in t.get_text() for t in axes[4].texts)
    shutil.rmtree(tmp_path / "runs" / "a2c_seed-0")
    waiting = plot_seeds(tmp_path / "runs").axes[4]
    assert len(waiting.containers) == 1
    assert sum("waiting" in t.get_text() for t in waiting.texts) == 2


def test_a_seed_still_training_is_not_counted_as_one_that_failed(tmp_path) -> None:
    write_runs(tmp_path, FINALS)
    going = read_run(tmp_path / "a2c_seed-400")  # below 18 at 7.2M, and its budget not spent
    assert going is not None
    builders.save(tmp_path, dataclasses.replace(going, evaluations=going.evaluations[:7]))
    assert measure_seeds(tmp_path)["training/a2c"] == 1
    titles = [ax.get_title() for ax in plot_seeds(tmp_path).axes[:3]]
    assert titles[0] == "(a) a2c: 4 of 5 above 18\nat 7.2M, 1 still training"
    assert titles[1] == "(b) task1: 1 of 5 above 18\nat 7.2M"


def test_the_claims_check_can_cite_the_section(tmp_path) -> None:
    write_runs(tmp_path, FINALS)
    cited = claims.measure(tmp_path, None)
    assert {key: cited[f"seeds/{key}"] for key in measure_seeds(tmp_path)} == measure_seeds(tmp_path)


def test_the_seed_labels_of_close_scores_do_not_overlap(tmp_path) -> None:
    write_runs(tmp_path, FINALS)  # four a2c seeds share one score
    fig = plot_seeds(tmp_path)
    fig.canvas.draw()
    scores = fig.axes[3]
    labels = [t.get_window_extent() for t in scores.texts if t.get_text().isdigit()]
    assert len(labels) == 15
    assert not [(a, b) for a, b in itertools.combinations(labels, 2) if a.overlaps(b)]


def test_the_equal_hyperparameters_section_compares_its_own_arms_and_numbers_its_predictions(tmp_path) -> None:
    equal_hp = [19.0, 19.0, 19.0, 2.0, 19.0]
    write_runs(tmp_path, {**FINALS, "task1-a2chp": equal_hp})
    found = measure_seeds(tmp_path, EQUAL_HP)
    assert (found["scored/task1-a2chp"], found["passed/task1-a2chp"]) == (5, 4)
    assert "passed/task1-pg1" not in found and "delta/a2c/task1" not in found  # the ablation's are its own
    expected = difference([(f - 20) / 2 for f in equal_hp], [(f - 20) / 2 for f in FINALS["task1"]])
    assert found["delta/task1-a2chp/task1"] == pytest.approx(expected.delta)
    assert found["verdict/task1-a2chp/task1"] == EQUAL_HP.predictions[1].verdict(expected.low, expected.high)
    cited = claims.measure(tmp_path, None)
    assert {key: cited[f"equal_hp/{key}"] for key in found} == found
    fig = plot_seeds(tmp_path, EQUAL_HP)
    assert [ax.get_title().split(":")[0] for ax in fig.axes[:3]] == ["(a) a2c", "(b) task1-a2chp", "(c) task1"]
    assert [t.get_text() for t in fig.axes[4].get_yticklabels()] == ["Δ(task1-a2chp, task1)", "Δ(a2c, task1-a2chp)"]
    assert sorted(t.get_text().split("; ")[1] for t in fig.axes[4].texts) == [
        f"prediction 4 {found['verdict/a2c/task1-a2chp']}", f"prediction 5 {found['verdict/task1-a2chp/task1']}"]


def test_each_arm_keeps_its_colour_from_one_figure_to_the_next(tmp_path) -> None:
    write_runs(tmp_path, {**FINALS, "task1-a2chp": [19.0] * 5})
    ablation, equal_hp = (plot_seeds(tmp_path, comparison) for comparison in (ABLATION, EQUAL_HP))
    comparison, _ = plot_experiment(tmp_path, arms=("a2c", "task1", "task1-pg1", "task1-a2chp"))

    def colours(ax) -> set[str]:  # of the curves drawn, the 18 line aside
        return {to_hex(line.get_color()) for line in ax.lines if line.get_linestyle() != ":"}

    by_panel = {ax.get_title().split(":")[0].split(") ")[1]: colours(ax) for fig in (ablation, equal_hp)
                for ax in fig.axes[:3]}
    by_legend = {label_of(line).split(" (")[0]: {to_hex(line.get_color())} for line in comparison.axes[0].lines
                 if not label_of(line).startswith("_")}
    assert by_panel == by_legend and len({colour for c in by_panel.values() for colour in c}) == 4


def test_the_figure_reads_the_runs_once(tmp_path, monkeypatch) -> None:
    # Runs in training change between two readings: the panels' titles and curves must come from the same one.
    write_runs(tmp_path, FINALS)
    readings = []

    def reading(*args: Any) -> list[RunRecord]:
        readings.append(args)
        return read_runs(*args)

    monkeypatch.setattr(seeds, "read_runs", reading)
    plot_seeds(tmp_path)
    assert len(readings) == 1


def test_an_arm_without_runs_reads_no_runs_never_zero_seeds(tmp_path) -> None:
    """An arm with no runs has no seeds above the target, but that is not a finding: a claim of "0 seeds passed"
    must not hold on it."""
    write_runs(tmp_path, {"a2c": FINALS["a2c"], "task1": FINALS["task1"]})
    found = measure_seeds(tmp_path)
    assert (found["passed/task1-pg1"], found["training/task1-pg1"], found["scored/task1-pg1"]) == (NO_RUNS,) * 3
    assert found["passed/task1"] == 1
    claim = claims.Claim("seeds above 18", "0", "seeds/passed/task1-pg1", "d")
    rows = claims.check([claim], claims.measure(tmp_path, None))
    assert rows == [("seeds above 18", "0", NO_RUNS, False)]


def test_a_comparison_without_a_target_counts_no_seed_above_one(tmp_path) -> None:
    write_runs(tmp_path, FINALS)
    untargeted = Comparison(ABLATION.predictions, FIVE_SEEDS, ABLATION.window)
    found = measure_seeds(tmp_path, untargeted)
    assert found["passed/a2c"] == 0 and found["pass/a2c"] is None
    assert found["delta/a2c/task1"] == measure_seeds(tmp_path)["delta/a2c/task1"]
    assert [ax.get_title() for ax in plot_seeds(tmp_path, untargeted).axes[:3]] == [
        "(a) a2c: 5 seeds", "(b) task1: 5 seeds", "(c) task1-pg1: 5 seeds"]


def test_a_panel_of_one_seed_says_seed_not_seeds(tmp_path) -> None:
    write_runs(tmp_path, FINALS)
    for run in tmp_path.glob("*_seed-[1-9]*"):
        shutil.rmtree(run)
    untargeted = Comparison(ABLATION.predictions, FIVE_SEEDS, ABLATION.window)
    assert [ax.get_title() for ax in plot_seeds(tmp_path, untargeted).axes[:3]] == [
        "(a) a2c: 1 seed", "(b) task1: 1 seed", "(c) task1-pg1: 1 seed"]


def write_breakout_runs(runs_dir: Path, finals: dict[str, list[float]], a2c_last_step: int = 10_000_000) -> None:
    """BREAKOUT's runs, each seed rising linearly from 0 to its final mean at 10M, evaluated every 500k; the last
    a2c seed has got only to ``a2c_last_step``."""
    every, total = 500_000, 10_000_000
    for arm, arm_finals in finals.items():
        for seed, final in zip(BREAKOUT.seeds, arm_finals, strict=True):
            last = a2c_last_step if (arm, seed) == ("a2c", BREAKOUT.seeds[-1]) else total
            means = {step: final * step / total for step in range(0, last + 1, every)}
            write_seed_run(runs_dir, arm, seed, means, every, None, total)


@pytest.mark.parametrize(("a2c_finals", "learns"), [([40.0, 30.0, 26.0], True), ([40.0, 20.0, 26.0], False)])
def test_the_second_game_is_cited_by_its_own_test_and_judged_to_be_learned_once_a2c_finishes(
        tmp_path: Path, a2c_finals: list[float], learns: bool) -> None:
    finals = {"a2c": a2c_finals, "task1": [5.0, 8.0, 6.0], "task1-pg1": [30.0, 12.0, 20.0]}
    write_breakout_runs(tmp_path / "done", finals)
    found = claims.measure(ROOT / "runs", None, breakout_dir=tmp_path / "done")
    section = measure_seeds(tmp_path / "done", BREAKOUT_TEST)
    assert {key: found[f"breakout/{key}"] for key in section} == section
    assert found["breakout/last/a2c"] == pytest.approx(np.mean(a2c_finals))
    assert found["breakout/learns"] is learns
    # S over 0.5M..10M of a rise from 0 to F: F times the mean of 1/20..20/20
    assert found["breakout/score/task1_seed-100"] == pytest.approx(8.0 * 10.5 / 20)
    assert found["breakout/verdict/a2c/task1"] == BREAKOUT_TEST.predictions[0].verdict(
        *found["breakout/interval/a2c/task1"])
    assert found["seeds/score/a2c_seed-200"] != found["breakout/score/a2c_seed-200"]  # Pong's runs stay Pong's
    write_breakout_runs(tmp_path / "training", finals, a2c_last_step=5_000_000)
    training = claims.measure(ROOT / "runs", None, breakout_dir=tmp_path / "training")
    assert training["breakout/learns"] is None and "breakout/delta/a2c/task1" not in training
    assert "breakout/learns" not in claims.measure(ROOT / "runs", None)


def test_the_second_game_cites_each_run_s_last_evaluation_and_each_arm_s_entropy_floor(tmp_path: Path) -> None:
    write_breakout_runs(tmp_path, {"a2c": [40.0, 30.0, 26.0], "task1": [5.0, 8.0, 6.0], "task1-pg1": [30.0, 12.0, 0.0]})
    lowest = {"task1-pg1": [0.9, 0.002, 0.05], "a2c": [0.4, 0.7, 0.6]}  # task1 logged no entropy
    for arm, floors in lowest.items():
        for seed, floor in zip(BREAKOUT.seeds, floors, strict=True):
            lines = [{"global_step": step, "time": float(step), "losses/entropy": e}
                     for step, e in ((10, 1.5), (20, floor), (30, 1.2))]
            lines.insert(1, {"global_step": 15, "time": 15.0, "eval/mean_return": 0.0})  # a record without an entropy
            metrics = tmp_path / f"{arm}_seed-{seed}" / "metrics.jsonl"
            metrics.write_text("".join(json.dumps(line) + "\n" for line in lines))
    found = claims.measure(ROOT / "runs", None, breakout_dir=tmp_path)
    assert found["breakout/entropy_floor/task1-pg1"] == (0.002, 0.9)
    assert found["breakout/entropy_floor/a2c"] == (0.4, 0.7)
    assert found["breakout/entropy_floor/task1"] is None
    assert found["breakout/last/task1-pg1_seed-200"] == 0.0 and found["breakout/last/a2c_seed-0"] == 40.0


def test_the_second_games_gradient_facts_come_from_its_own_analysis() -> None:
    breakout = json.loads((ROOT / "figures" / BREAKOUT_TEST.analysis).read_text())
    found = claims.measure(ROOT / "runs", None, breakout_dir=ROOT / BREAKOUT.runs_dir, breakout_analysis=breakout)
    snapshots = {s["run"]: s for s in breakout["snapshots"].values()}  # one per run, near 5M
    seeds = [run.removeprefix("task1_") for run in snapshots if run.startswith("task1_")]
    spreads = [snapshots[f"task1_{seed}"]["advantage_scale"]["advantage_rms"] for seed in seeds]
    assert found["breakout/advantage/task1"] == (min(spreads), max(spreads))
    head = {run: s["loss_term_gradients"]["actor"]["policy_head"] for run, s in snapshots.items()}
    ratios = [head[f"a2c_{seed}"] / head[f"task1_{seed}"] for seed in seeds]  # same seed, same step
    assert found["breakout/head_actor/a2c/task1"] == pytest.approx((min(ratios), max(ratios)))
    assert found["head_actor/a2c/task1"] is None and found["breakout/analysed/a2c"] == 3  # Pong's: no analysis given


def test_the_hub_arm_s_pong_figure_has_a_panel_for_each_of_its_four_arms(tmp_path) -> None:
    # PG1ENT_PONG compares four arms; the figure's grid once had room for three and raised an IndexError.
    write_runs(tmp_path, {**FINALS, "task1-a2chp": [10.0] * 5, "task1-pg1ent": [19.0, 19.0, 19.0, 12.0, 19.0]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # tight_layout warns when it cannot fit the panels
        fig = plot_seeds(tmp_path, PG1ENT_PONG)
    assert [ax.get_title().split(":")[0] for ax in fig.axes] == [
        "(a) task1-pg1ent", "(b) task1", "(c) task1-pg1", "(d) task1-a2chp",
        "(e) each seed's score S (labelled by seed) and the arm's mean", "(f) the predictions"]
    assert [t.get_text() for t in fig.axes[5].get_yticklabels()] == [
        "Δ(task1-pg1ent, task1-a2chp)", "Δ(task1-pg1, task1-pg1ent)", "Δ(task1-pg1ent, task1)"]
