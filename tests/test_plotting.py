"""The comparison plot's numbers: mean over the pooled episodes of all seeds, +/- one standard error."""

import math
from pathlib import Path

import builders
import numpy as np
import pytest
from matplotlib.lines import Line2D

from allaction.figures import DIAGNOSTICS, plot_diagnostics, plot_experiment
from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.evaluation import Evaluation
from rlhelpers.plots import ArmCurve, arm_curve, figures_dir, plot_comparison
from rlhelpers.runner.config import arm_name, format_run_name
from rlhelpers.runner.store import METRICS_FILE, RunRecord, append_metrics


def record(algo: str, seed: int, history: tuple[Evaluation, ...], variant: str = "",
           env_id: str = "PongNoFrameskip-v4") -> RunRecord:
    config = {"algo": algo, "seed": seed, "env_id": env_id, "stop_return": 18.0}
    config.update({"variant": variant} if variant else {})
    return builders.made_up_run(format_run_name(arm_name(algo, variant), seed), history, config)


def pooled_curve(records: list[RunRecord]) -> ArmCurve:
    return arm_curve(records)


def label_of(line: Line2D) -> str:
    """A curve's label (matplotlib types labels as any object; the figures' are text)."""
    label = line.get_label()
    assert isinstance(label, str)
    return label


def xdata_of(line: Line2D) -> list:
    """A curve's x values as a list (matplotlib types them as anything array-like; the figures' are arrays)."""
    data = line.get_xdata()
    assert isinstance(data, np.ndarray)
    return data.tolist()


def ydata_of(line: Line2D) -> list:
    """A curve's y values as a list, as ``xdata_of``."""
    data = line.get_ydata()
    assert isinstance(data, np.ndarray)
    return data.tolist()


def points(means: list[float], every: int = 100) -> tuple[Evaluation, ...]:
    """Evaluations at steps 0, every, 2*every, ... with two returns each around the given means."""
    return builders.evaluations(means, every, lengths=(800, 800))


def test_a_seed_that_stopped_early_is_held_not_dropped() -> None:
    stopped = record("a2c", 0, points([-20.0, 10.0, 19.0]))  # exceeded 18 at step 200 and stopped
    going_on = record("a2c", 100, points([-20.0, -10.0, 0.0, 5.0, 8.0]))
    curve = pooled_curve([stopped, going_on])
    assert curve.steps.tolist() == [0, 100, 200, 300, 400]
    assert curve.means.tolist() == [-20.0, 0.0, 9.5, 12.0, 13.5]  # 19 held at steps 300 and 400
    assert [r.stopped_early() for r in (stopped, going_on)] == [True, False]
    assert math.isclose(curve.sems[3], np.std([18.0, 20.0, 4.0, 6.0], ddof=1) / 2.0)
    # every point pools both seeds' four episodes, never one seed's two alone
    pooled = [[a - 1, a + 1, b - 1, b + 1] for a, b in zip([-20, 10, 19, 19, 19], [-20, -10, 0, 5, 8], strict=True)]
    assert curve.sems.tolist() == pytest.approx([np.std(p, ddof=1) / 2.0 for p in pooled])


def test_a_seed_still_training_ends_the_curve_where_it_is() -> None:
    ahead = record("task1", 0, points([-20.0, -19.0, -18.0, -15.0]))
    behind = record("task1", 100, points([-20.0, -20.0]))  # not stopped, only behind: nothing to hold
    curve = pooled_curve([ahead, behind])
    assert curve.steps.tolist() == [0, 100] and curve.means.tolist() == [-20.0, -19.5]  # both seeds pooled
    assert curve.sems.tolist() == pytest.approx([np.std([-21, -19, -21, -19], ddof=1) / 2.0,
                                                 np.std([-20, -18, -21, -19], ddof=1) / 2.0])


def test_a_step_only_one_seed_evaluated_is_left_out() -> None:
    """Seeds evaluated every 100 and every 150 steps share only steps 0 and 300."""
    often = record("task2", 0, points([-20.0, -19.0, -18.0, -17.0]))
    rarely = record("task2", 100, points([-20.0, -19.0, -16.0], every=150))
    curve = pooled_curve([often, rarely])
    assert curve.steps.tolist() == [0, 300] and curve.means.tolist() == [-20.0, -16.5]
    assert math.isclose(curve.sems[1], np.std([-18.0, -16.0, -17.0, -15.0], ddof=1) / 2.0)  # both seeds pooled


def test_plot_marks_the_stopped_seed_and_says_so(tmp_path) -> None:
    for rec in (record("a2c", 0, points([-20.0, 19.0])), record("a2c", 100, points([-20.0, 0.0, 5.0]))):
        builders.save(tmp_path, rec)
    fig, _ = plot_experiment(tmp_path)
    ax = fig.axes[0]
    assert [label_of(line) for line in ax.lines if not label_of(line).startswith("_")] == ["a2c (seeds 0, 100)"]
    marker = [line for line in ax.lines if label_of(line) == "_a2c_seed-0 stopped"]
    assert len(marker) == 1 and xdata_of(marker[0]) == [100]
    assert "held" in " ".join(t.get_text() for t in fig.texts)
    thin = [line for line in ax.lines if label_of(line) in ("_a2c_seed-0", "_a2c_seed-100")]
    assert [ydata_of(line) for line in thin] == [[-20.0, 19.0], [-20.0, 0.0, 5.0]]


def test_steps_read_in_engineering_notation_without_an_offset(tmp_path) -> None:
    builders.save(tmp_path, record("a2c", 0, points([-20.0, -15.0, -5.0], every=5_000_000)))
    fig, _ = plot_experiment(tmp_path)
    fig.canvas.draw()
    ax = fig.axes[0]
    labels = [label.get_text() for label in ax.get_xticklabels() if 0 <= label.get_position()[0] <= 10_000_000]
    assert "10 M" in labels and "0" in labels
    assert ax.xaxis.get_offset_text().get_text() == ""  # no "1e7" below the axis


def test_diagnostics_draw_every_run_from_its_metrics_log(tmp_path) -> None:
    for algo, seed in (("a2c", 0), ("task1", 100)):
        run = builders.save(tmp_path, record(algo, seed, points([-20.0])))
        for step in (10_000, 20_000, 30_000):
            append_metrics(run / METRICS_FILE, {key: step / 1e4 + seed for key, _ in DIAGNOSTICS}, step)
        append_metrics(run / METRICS_FILE, {"eval/mean_return": -20.0}, 30_000)  # not a diagnostic: ignored
    fig = plot_diagnostics(tmp_path, tmp_path / "diagnostics.png")
    assert (tmp_path / "diagnostics.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for ax in fig.axes:
        assert [label_of(line) for line in ax.lines] == ["a2c_seed-0", "task1_seed-100"]
        assert xdata_of(ax.lines[1]) == [10_000, 20_000, 30_000]
        assert ydata_of(ax.lines[1]) == [101.0, 102.0, 103.0]
    assert fig.axes[1].get_title() == "explained variance of the critic"  # nothing below -1: the axis is free


def test_explained_variance_axis_starts_at_minus_one(tmp_path) -> None:
    run = builders.save(tmp_path, record("task1", 0, points([-20.0])))
    for step, value in ((1_000, -230.0), (2_000, 0.2), (3_000, 0.9)):
        append_metrics(run / METRICS_FILE, {"losses/explained_variance": value}, step)
    ax = plot_diagnostics(tmp_path).axes[1]
    assert ax.get_ylim()[0] == -1.0 and ax.get_ylim()[1] >= 1.0
    assert ydata_of(ax.lines[0]) == [-230.0, 0.2, 0.9]  # drawn, only off the axis
    assert "axis from -1" in ax.get_title()


def test_arm_curve_pools_seeds_with_standard_error() -> None:
    seed0 = record("a2c", 0, (Evaluation(0, (-21.0, -20.0, -19.0)), Evaluation(300, (1.0, 3.0))))
    seed100 = record("a2c", 100, (Evaluation(0, (-21.0, -21.0, -20.0)), Evaluation(300, (5.0, 7.0))))
    curve = pooled_curve([seed0, seed100])
    steps, means, sems = curve.steps, curve.means, curve.sems
    pooled0 = np.array([-21.0, -20.0, -19.0, -21.0, -21.0, -20.0])  # six episodes at step 0, four at 300
    assert steps.tolist() == [0, 300]
    assert math.isclose(means[0], pooled0.mean()) and math.isclose(means[1], 4.0)
    assert math.isclose(sems[0], pooled0.std(ddof=1) / math.sqrt(6))
    assert math.isclose(sems[1], np.std([1.0, 3.0, 5.0, 7.0], ddof=1) / 2.0)


def test_plot_lists_missing_runs_and_writes_png(tmp_path) -> None:
    for algo, seed in (("a2c", 0), ("task2", 100)):
        history = tuple(Evaluation(s, (float(s // 100 - 21),) * 3, (800,) * 3) for s in (0, 100, 200))
        builders.save(tmp_path / "runs", record(algo, seed, history))
    fig, missing = plot_experiment(tmp_path / "runs", tmp_path / "figures" / "comparison.png")
    assert missing == ["a2c_seed-100", "task1_seed-0", "task1_seed-100", "task2_seed-0"]
    assert (tmp_path / "figures" / "comparison.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    labels = [label_of(line) for line in fig.axes[0].lines if not label_of(line).startswith("_")]
    assert labels == ["a2c (seed 0)", "task2 (seed 100)"]
    assert ydata_of(fig.axes[0].lines[0]) == [-21.0, -20.0, -19.0]


def test_figures_go_beside_other_runs_and_to_figures_for_the_committed_ones(tmp_path, monkeypatch, capsys) -> None:
    from allaction.cli import main as study_main
    from rlhelpers.cli import main

    monkeypatch.chdir(tmp_path)
    assert figures_dir("runs") == figures_dir("./runs") == figures_dir(tmp_path / "runs") == Path("figures")
    assert figures_dir("my_runs") == Path("my_runs/figures")
    assert figures_dir(tmp_path / "drive" / "runs") == tmp_path / "drive" / "runs" / "figures"
    builders.save(tmp_path / "my_runs", record("a2c", 0, tuple(Evaluation(s, (-21.0, -20.0), (800, 800))
                                                               for s in (0, 100))))
    assert main(["plot", "--runs-dir", "my_runs"]) == 0
    assert (tmp_path / "my_runs" / "figures" / "comparison.png").exists() and not (tmp_path / "figures").exists()
    assert main(["plot", "--runs-dir", "my_runs", "--out", "plot.txt"]) == 2
    assert capsys.readouterr().err.strip().endswith("--out plot.txt: name the plot's file .png, .pdf or .svg")
    capsys.readouterr()
    assert study_main(["plot", "--runs-dir", "my_runs", "--out", "my_runs/figures/report.png"]) == 0  # the study's
    assert (tmp_path / "my_runs" / "figures" / "report.png").exists()
    assert capsys.readouterr().out.strip() == ("wrote my_runs/figures/report.png; runs not present: a2c_seed-100, "
                                               "task1_seed-0, task1_seed-100, task2_seed-0, task2_seed-100")
    assert study_main(["plot", "--runs-dir", "my_runs", "--out", "plot.txt"]) == 2
    assert capsys.readouterr().err.strip().endswith("--out plot.txt: name the plot's file .png, .pdf or .svg")


def test_runs_of_several_environments_are_not_pooled(tmp_path) -> None:
    for seed, env_id in ((0, "PongNoFrameskip-v4"), (100, "CartPole-v1")):
        builders.save(tmp_path, record("a2c", seed, points([-20.0, 10.0]), env_id=env_id))
    with pytest.raises(RLHelpersError, match=r"several environments \(CartPole-v1, PongNoFrameskip-v4\)"):
        plot_experiment(tmp_path)


def test_a_variant_run_has_a_curve_of_its_own_drawn_only_when_asked_for(tmp_path) -> None:
    """task1-pg1_seed-0 is task1 with another pg_coef: never pooled into task1's curve, and left out of the
    report's comparison unless its label is asked for, as in the pg_coef ablation."""
    for rec in (record("a2c", 0, points([-20.0, -10.0])), record("task1", 0, points([-20.0, -18.0])),
                record("task1", 0, points([-20.0, -5.0]), variant="pg1")):
        append_metrics(builders.save(tmp_path, rec) / METRICS_FILE, {"losses/entropy": 1.0}, 100)

    def curves(fig) -> dict[str, list[float]]:
        return {label_of(line): ydata_of(line) for line in fig.axes[0].lines}

    fig, missing = plot_experiment(tmp_path)
    assert curves(fig) == {"a2c (seed 0)": [-20.0, -10.0], "_a2c_seed-0": [-20.0, -10.0],
                           "task1 (seed 0)": [-20.0, -18.0], "_task1_seed-0": [-20.0, -18.0]}
    assert "task1-pg1_seed-100" not in missing
    fig, missing = plot_experiment(tmp_path, arms=("a2c", "task1", "task1-pg1"))
    assert curves(fig)["task1 (seed 0)"] == [-20.0, -18.0] and curves(fig)["task1-pg1 (seed 0)"] == [-20.0, -5.0]
    assert missing == ["a2c_seed-100", "task1_seed-100", "task1-pg1_seed-100"]
    assert [line.get_label() for line in plot_diagnostics(tmp_path).axes[0].lines] == ["a2c_seed-0", "task1_seed-0"]
    ablation = plot_diagnostics(tmp_path, arms=("task1", "task1-pg1")).axes[0].lines
    assert [line.get_label() for line in ablation] == ["task1-pg1_seed-0", "task1_seed-0"]
    assert ablation[0].get_color() != ablation[1].get_color()


def test_runs_of_other_seeds_stay_out_of_the_report_plot_and_table(tmp_path) -> None:
    """The five-seed runs (seeds 200, 300, 400) live beside the report's in runs/: the prescribed plot, the
    results table and the claims measure seeds 0 and 100 only."""
    from allaction.claims import measure
    from allaction.results import evaluated_runs

    for rec in (record("a2c", 0, points([-20.0, 5.0])), record("a2c", 100, points([-20.0, 7.0])),
                record("a2c", 200, points([-20.0, -20.0]))):
        builders.save(tmp_path, rec)
    fig, _ = plot_experiment(tmp_path)
    assert [label_of(line) for line in fig.axes[0].lines if not label_of(line).startswith("_")] == [
        "a2c (seeds 0, 100)"]
    assert [r.name for r in evaluated_runs(tmp_path)] == ["a2c_seed-0", "a2c_seed-100"]
    assert [r.name for r in evaluated_runs(tmp_path, seeds=(200, 300))] == ["a2c_seed-200"]  # the Appendix's
    assert "last/a2c_seed-200" not in measure(tmp_path, None)


def test_the_results_table_lists_the_runs_arm_by_arm_in_the_tables_order_then_the_others_by_name(tmp_path) -> None:
    from allaction.results import evaluated_runs

    for rec in (record("task1", 0, points([1.0]), "pg1"), record("task2", 0, points([1.0])),
                record("a2c", 100, points([1.0])), record("a2c", 0, points([1.0]), "a2chp"),
                record("a2c", 0, points([1.0])), record("task1", 100, ())):
        builders.save(tmp_path, rec)
    assert [r.name for r in evaluated_runs(tmp_path)] == [
        "a2c_seed-0", "a2c_seed-100", "task2_seed-0", "task1-pg1_seed-0", "a2c-a2chp_seed-0"]
    assert [r.name for r in evaluated_runs(tmp_path, arms=("task1-pg1", "a2c"))] == [
        "a2c_seed-0", "a2c_seed-100", "task1-pg1_seed-0"]


def test_your_runs_are_drawn_beside_the_committed_ones_and_another_games_runs_alone(tmp_path) -> None:
    """Your own Pong runs: your curves, and the committed runs' of the same arms and seeds dashed beside them.
    Runs of a game the report has no experiment of: every arm and seed present, and no other runs named missing."""
    for runs_dir, rec in (("committed", record("a2c", 0, points([-20.0, 5.0]))),
                          ("committed", record("task1", 0, points([-20.0, -15.0]))),
                          ("committed", record("a2c", 300, points([-20.0, 9.0]))),
                          ("mine", record("a2c", 0, points([-20.0, 1.0])))):
        builders.save(tmp_path / runs_dir, rec)
    fig, missing = plot_experiment(tmp_path / "mine", beside=tmp_path / "committed")
    lines = {label_of(line): line for line in fig.axes[0].lines if not label_of(line).startswith("_")}
    assert list(lines) == ["a2c, committed runs", "a2c (seed 0)", "task1, committed runs"]
    assert ydata_of(lines["a2c, committed runs"]) == [-20.0, 5.0]  # seed 0 only, as the report's
    assert lines["a2c, committed runs"].get_linestyle() == "--"
    assert missing == ["a2c_seed-100", "task1_seed-0", "task1_seed-100", "task2_seed-0", "task2_seed-100"]
    builders.save(tmp_path / "other", record("task1", 7, points([0.0, 2.0]), "pg1", env_id="AsteroidsNoFrameskip-v4"))
    fig, missing = plot_experiment(tmp_path / "other")
    assert [label_of(line) for line in fig.axes[0].lines if not label_of(line).startswith("_")] == [
        "task1-pg1 (seed 7)"] and missing == []


def test_the_helpers_plot_draws_every_arm_and_seed_present_unless_told(tmp_path) -> None:
    """``rlhelpers``' plot knows no experiment: by default every arm and seed present, in colours by the arms'
    order; ``arms``, ``seeds`` and ``color`` choose, and the curves of ``beside`` are named by their directory."""
    for rec in (record("a2c", 0, points([-20.0, -10.0])), record("a2c", 200, points([-20.0, -12.0])),
                record("task1", 7, points([-20.0, -18.0]), variant="pg1")):
        builders.save(tmp_path, rec)
    fig, missing = plot_comparison(tmp_path)
    drawn = {label_of(line): line for line in fig.axes[0].lines if not label_of(line).startswith("_")}
    assert list(drawn) == ["a2c (seeds 0, 200)", "task1-pg1 (seed 7)"]
    assert missing == ["a2c_seed-7", "task1-pg1_seed-0", "task1-pg1_seed-200"]
    assert [line.get_color() for line in drawn.values()] == ["C0", "C1"]
    fig, missing = plot_comparison(tmp_path, arms=("task1-pg1",), seeds=(7,), color=lambda arm: "red")
    drawn = {label_of(line): line for line in fig.axes[0].lines if not label_of(line).startswith("_")}
    assert list(drawn) == ["task1-pg1 (seed 7)"] and drawn["task1-pg1 (seed 7)"].get_color() == "red"
    builders.save(tmp_path / "other", record("a2c", 0, points([-20.0, -5.0])))
    fig, _ = plot_comparison(tmp_path, arms=("a2c",), seeds=(0,), beside=tmp_path / "other")
    assert [label_of(line) for line in fig.axes[0].lines if not label_of(line).startswith("_")] == [
        f"a2c, {tmp_path / 'other'}", "a2c (seed 0)"]  # runs of another directory, named as such
    assert missing == []
