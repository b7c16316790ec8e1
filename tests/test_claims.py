"""The written analysis of report.ipynb and its claims check: every figure the prose cites is measured
again from the runs, holds on the committed runs, and shows up as not holding when the runs differ."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import builders
import nbformat
import pytest

from allaction import claims
from allaction.claims import SIGNIFICANT, STEP, Claim, check, claims_markdown, verdict_markdown
from allaction.experiment import ABLATION, ANALYSIS_JSON, BREAKOUT, BREAKOUT_TEST, SPACE_INVADERS

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "report.ipynb"
COMMITTED_ANALYSIS = json.loads((ROOT / "figures" / ANALYSIS_JSON).read_text())
SEEDS_ANALYSIS = json.loads((ROOT / "figures" / ABLATION.analysis).read_text())  # the five-seed runs'
BREAKOUT_ANALYSIS = json.loads((ROOT / "figures" / BREAKOUT_TEST.analysis).read_text())  # the second game's


def notebook_claims() -> tuple[list[Claim], str]:
    """The notebook's CLAIMS, and the text of its markdown cells (the body and the Appendix, where the details of
    a section may cite figures too)."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    cell = next(c for c in nb.cells if "claims" in c.metadata.get("tags", []))
    namespace = {"Claim": Claim, "STEP": STEP, "SIGNIFICANT": SIGNIFICANT}
    (claims_list,) = [node for node in ast.parse(cell.source).body if isinstance(node, ast.Assign)
                      and [ast.unparse(target) for target in node.targets] == ["CLAIMS"]]
    exec(compile(ast.Module([claims_list], type_ignores=[]), "CLAIMS", "exec"), namespace)  # the list only
    prose = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    listed = namespace["CLAIMS"]
    assert isinstance(listed, list)
    return listed, " ".join(prose.split())


def test_every_figure_of_the_text_holds_on_the_committed_runs() -> None:
    claims_list, prose = notebook_claims()
    assert len(claims_list) >= 25
    measured = claims.measure(ROOT / "runs", COMMITTED_ANALYSIS, SEEDS_ANALYSIS, ROOT / BREAKOUT.runs_dir,
                              BREAKOUT_ANALYSIS, ROOT / SPACE_INVADERS.runs_dir)  # every game, as the report does
    rows = check(claims_list, measured)
    assert [(says, figure, now) for says, figure, now, holds in rows if not holds] == []
    for claim in claims_list:  # each checked figure is one the text really cites (a verdict is written in words)
        assert claim.figure in ("yes", "no") or claim.figure in prose, f"{claim.figure!r} ({claim.says}) not in text"
    assert verdict_markdown(rows, "runs") == f"**{len(rows)} of the {len(rows)} figures checked hold on the runs in " \
                                             f"`runs`**: every figure the text cites ({len(rows)})."


def test_on_other_runs_the_check_shows_which_figures_no_longer_hold(tmp_path: Path) -> None:
    claims_list, _ = notebook_claims()
    runs = tmp_path / "runs"
    for run in ("a2c_seed-0", "a2c_seed-100", "task1_seed-0", "task1_seed-100", "task2_seed-0"):
        shutil.copytree(ROOT / "runs" / run, runs / run, ignore=shutil.ignore_patterns("*.pt", "*.jsonl"))
    record = json.loads((runs / "a2c_seed-0" / "eval_history.json").read_text())
    record["history"] = record["history"][:-1]  # as if it had not passed 18 yet
    (runs / "a2c_seed-0" / "eval_history.json").write_text(json.dumps(record))
    rows = {says: (now, holds) for says, _, now, holds in check(claims_list, claims.measure(runs, None))}
    assert rows["A2C passes 18, seed 0"] == ("not reached", False)
    assert rows["task2 passes 18, seed 100"] == ("no runs", False)  # that run is missing
    assert rows["equal hyperparameters: seeds above 18"] == ("no runs", False)  # so is that arm: not a vacuous 0
    assert rows["sampled / all-action variance"] == ("n/a", False)  # no gradient analysis
    assert rows["A2C passes 18, seed 100"] == ("6.6M", True)
    checked = check(claims_list, claims.measure(runs, None))
    assert "| A2C passes 18, seed 0 | 7.2M | not reached | **no** |" in claims_markdown(checked)
    assert "| task2 passes 18, seed 100 | 10.0M | no runs | not checked |" in claims_markdown(checked)
    failing = [says for says, _, now, holds in checked if not holds and now not in ("no runs", "n/a")]
    absent, no_analysis = (sum(now == mark for _, _, now, _ in checked) for mark in ("no runs", "n/a"))
    assert absent and no_analysis
    verdict = verdict_markdown(checked, runs)  # counts what it could not check and why, names what fails
    n_checked = len(checked) - absent - no_analysis
    assert verdict.startswith(f"**{n_checked - len(failing)} of the {n_checked} figures checked hold on the runs in "
                              f"`{runs}`.** {absent + no_analysis} of the text's {len(checked)} could not be checked "
                              f"here: {absent} lack their runs, {no_analysis} lack a gradient analysis.")
    assert absent > 1 and no_analysis > 1  # the plural above; the singular is tested on its own
    assert "*A2C passes 18, seed 0* (text: 7.2M; measured: not reached)" in verdict
    assert all(f"*{says}*" in verdict for says in failing) and "*A2C passes 18, seed 100*" not in verdict
    assert "*task2 passes 18, seed 100*" not in verdict
    nothing = verdict_markdown(check(claims_list, claims.measure(tmp_path / "none", None)), "none")
    assert nothing.startswith(f"**None of the text's {len(checked)} figures could be checked on the runs in `none`**: ")


def test_one_figure_that_cannot_be_checked_is_counted_in_the_singular() -> None:
    rows = [("A2C passes 18, seed 0", "7.2M", "no runs", False), ("sampled / all-action variance", "38", "n/a", False),
            ("A2C passes 18, seed 100", "6.6M", "6.6M", True)]
    assert verdict_markdown(rows, "runs") == ("**1 of the 1 figures checked hold on the runs in `runs`.** 2 of the "
                                              "text's 3 could not be checked here: 1 lacks its runs, 1 lacks a "
                                              "gradient analysis.")


def test_your_runs_are_told_which_figures_of_the_text_they_reproduce(tmp_path: Path) -> None:
    """A report of your own Pong runs says which of the text's figures they give as the text does, which they give
    otherwise, and how many they cannot measure, instead of a failed claims check."""
    claims_list, _ = notebook_claims()
    runs = tmp_path / "my_runs"
    for run in ("a2c_seed-0", "a2c_seed-100"):
        shutil.copytree(ROOT / "runs" / run, runs / run, ignore=shutil.ignore_patterns("*.pt", "*.jsonl"))
    record = json.loads((runs / "a2c_seed-100" / "eval_history.json").read_text())
    record["history"] = record["history"][:-3] + [{**record["history"][-1], "step": 6_000_000}]  # 18 passed earlier
    (runs / "a2c_seed-100" / "eval_history.json").write_text(json.dumps(record))
    text = claims.reproduction_markdown(check(claims_list, claims.measure(runs, None)), runs)
    assert text.startswith(f"**Your runs in `{runs}` reproduce ")
    assert "*A2C passes 18, seed 0* (7.2M)" in text.split("They give")[0]
    assert "*A2C passes 18, seed 100* (6.6M in the text, 6.0M in yours)" in text
    missing = int(text.split(". ")[-1].split(" need runs")[0].split()[-1])
    assert missing > 50 and "task2" not in text.split("They give")[0]


@pytest.mark.parametrize(("value", "fmt", "text"), [
    (7_200_000, STEP, "7.2M"), (10_000_000, STEP, "10.0M"), (-9.197, ".1f", "-9.2"), (0.9981, ".1%", "99.8%"),
    ((3.38, 37.9), SIGNIFICANT, "3.4–38"), ((0.00544, 6.62), SIGNIFICANT, "0.0054–6.6"),
    ((-0.046, 0.22), SIGNIFICANT, "-0.046 to 0.22"), ((165.4, 165.2), SIGNIFICANT, "165"), (True, "", "yes"),
    (None, ".1f", "n/a"), (6.256e-06, ".1e", "6.3e-06"),
])
def test_figures_are_rounded_as_the_text_writes_them(value: object, fmt: str, text: str) -> None:
    assert check([Claim("x", text, "k", fmt)], {"k": value}) == [("x", text, text, True)]


def test_the_speed_rule_needs_both_seeds_below_both(tmp_path: Path) -> None:
    means = {"a2c_seed-0": [-20, -10, 0], "a2c_seed-100": [-20, -12, -2], "task1_seed-0": [-20, -15, -5],
             "task1_seed-100": [-20, -11, -1], "task1-pg1_seed-0": [-20, -19, -18]}
    records = [builders.made_up_run(name, builders.evaluations(runs, every=100), {
        "total_timesteps": 1_000, "stop_return": 18.0, "algo": name.split("_")[0].split("-")[0],
        "variant": "pg1" if "-pg1" in name else ""}) for name, runs in means.items()]
    found = claims.compare_speed(records, ("a2c", "task1", "task1-pg1"))
    assert found["until"] == 200 and found["seed/task1-pg1_seed-0"] == pytest.approx(-19.0)
    assert found["below/task1-pg1/a2c"] and found["below/task1-pg1/task1"]
    assert not found["below/task1/a2c"]  # task1 seed 100 (-10.7) lies above A2C seed 100 (-11.3)
    assert claims.compare_speed(records, ("a2c", "task2")) == {}


def test_a_variants_measurements_stay_out_of_the_report_runs_figures() -> None:
    """The ablation's snapshots are analysed beside the report's runs; the text's ranges are the report runs'."""
    with_variant = json.loads(json.dumps(COMMITTED_ANALYSIS))
    entry = json.loads(json.dumps(with_variant["snapshots"]["task1_seed-0@3000000"]))
    entry["run"] = "task1-pg1_seed-0"
    entry["estimator_variance"]["sampled_over_all_action_batch"] *= 100
    entry["task_gradient_agreement"]["float32"]["relative_difference"] = 0.5
    entry["loss_term_gradients"]["actor"]["policy_head"] *= 100
    with_variant["snapshots"]["task1-pg1_seed-0@3000000"] = entry

    def report_facts(analysis: dict) -> dict:
        return {k: v for k, v in claims._gradient_facts(analysis).items() if "task1-pg1" not in k}

    assert report_facts(with_variant) == report_facts(COMMITTED_ANALYSIS)
    # the ablation's own figure compares it with task1 at the same seed and step: 100 times task1's here
    assert claims._gradient_facts(with_variant)["head_actor/task1-pg1/task1"][1] == pytest.approx(100)


def test_the_five_seed_ranges_cover_both_analyses_and_count_their_runs() -> None:
    new_seed = json.loads(json.dumps({k: v for k, v in COMMITTED_ANALYSIS.items() if k != "snapshots"}))
    entry = json.loads(json.dumps(COMMITTED_ANALYSIS["snapshots"]["task1_seed-0@3000000"]))
    entry["run"] = "task1_seed-300"
    entry["estimator_variance"]["sampled_over_all_action_batch"] = 1000.0  # beyond the report runs' range
    new_seed["snapshots"] = {"task1_seed-300@3000000": entry}
    new_seed["optimizer_regime"] = {}
    found = claims.measure(ROOT / "runs", COMMITTED_ANALYSIS, seeds_analysis=new_seed)
    report_low, report_high = found["variance_ratio"]
    assert report_high < 1000.0 and found["seeds/variance_ratio"] == (report_low, 1000.0)
    assert found["seeds/analysed/task1"] == 3 and found["seeds/analysed/a2c"] == 2  # seeds 0, 100 and 300
    assert "seeds/variance_ratio" not in claims.measure(ROOT / "runs", COMMITTED_ANALYSIS)


def test_analyses_of_different_settings_are_not_merged() -> None:
    other = {**COMMITTED_ANALYSIS, "n_rollouts": COMMITTED_ANALYSIS["n_rollouts"] + 1}
    with pytest.raises(ValueError, match="different settings"):
        claims.merged_analysis(COMMITTED_ANALYSIS, other)
    assert claims.merged_analysis(None, None) is None
    assert claims.merged_analysis(COMMITTED_ANALYSIS, None) == COMMITTED_ANALYSIS
