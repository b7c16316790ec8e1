"""report.ipynb end to end: papermill on tiny budgets (W&B offline), the report-only mode over
prepared runs, nbconvert to HTML, resume after a killed run, and a bad parameter."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import builders
import matplotlib.image
import nbformat
import pytest

from allaction import results as report
from allaction.experiment import PONG
from allaction.results import history_divergence
from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.evaluation import Evaluation
from rlhelpers.core.losses import ALGORITHMS
from rlhelpers.runner.store import RunRecord
from rlhelpers.runner.tracking import project_link

ROOT = Path(__file__).resolve().parents[1]
REPORT_RUNS = [f"{algo}_seed-{seed}" for algo in PONG.arms for seed in PONG.seeds]  # the report's six
NOTEBOOK = ROOT / "report.ipynb"
CARTPOLE = ["-p", "env_id", "CartPole-v1", "-p", "n_envs", "4", "-p", "n_eval_episodes", "4",
            "-p", "eval_interval", "500", "-p", "stop_return", "1000", "-p", "wandb_mode", "offline"]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _env(tmp_path: Path) -> dict[str, str]:
    # No inherited WANDB_* at all: once any test ran wandb.init in this process, WANDB_SERVICE points at its
    # wandb-core, and kernels sharing it would see a killed kernel's run id as still "in use".
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_") and k != "MPLBACKEND"}
    env["WANDB_DIR"] = str(tmp_path)
    # One torch thread: on a busy 2-core machine, spinning intra-op threads make a batch-1 forward pass ~10x slower.
    env["OMP_NUM_THREADS"] = "1"
    return env


def _papermill_args(out: Path, params: list[str]) -> list[str]:
    return [sys.executable, "-m", "papermill", str(NOTEBOOK), str(out), *params]


def _papermill(tmp_path: Path, out_name: str,
               params: list[str]) -> tuple[subprocess.CompletedProcess, nbformat.NotebookNode]:
    """Run papermill in ``tmp_path`` (so runs/ and figures/ land there); return the process and the output notebook."""
    out = tmp_path / out_name
    proc = subprocess.run(_papermill_args(out, params), cwd=tmp_path, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=300)
    return proc, nbformat.read(out, as_version=4)


def _outputs(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [out for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])]


def _errors(nb: nbformat.NotebookNode) -> list[str]:
    return [f"{o['ename']}: {o['evalue']}" for o in _outputs(nb) if o["output_type"] == "error"]


def _text(nb: nbformat.NotebookNode) -> str:
    """All stream text and Markdown/plain display data of the executed cells."""
    parts = []
    for o in _outputs(nb):
        if o["output_type"] == "stream":
            parts.append(o["text"])
        elif o["output_type"] in ("display_data", "execute_result"):
            parts.append(o["data"].get("text/markdown") or o["data"].get("text/plain", ""))
    return "\n".join(parts)


def _tables(nb: nbformat.NotebookNode) -> list[str]:
    """Every results table the notebook shows (the report's, the ablation's, the five-seed runs')."""
    return [o["data"]["text/markdown"] for o in _outputs(nb)
            if o["output_type"] == "display_data" and "\n| run | steps |" in o["data"].get("text/markdown", "")]


def _results_table(nb: nbformat.NotebookNode) -> str:
    tables = [table for table in _tables(nb) if not re.search(r"_seed-[234]00 \|", table)]
    assert len(tables) == 1, "the notebook shows exactly one results table of the report's seeds"
    return tables[0]


def _assert_report_ok(proc: subprocess.CompletedProcess, nb: nbformat.NotebookNode, tmp_path: Path,
                      runs: list[str], figures: str = "figures") -> None:
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _errors(nb) == []
    png = tmp_path / figures / "comparison.png"
    assert png.read_bytes().startswith(PNG_SIGNATURE)
    height, width = matplotlib.image.imread(png).shape[:2]
    assert height > 100 and width > 100
    assert any("image/png" in o.get("data", {}) for o in _outputs(nb)), "the plot is shown inline"
    table = _results_table(nb)
    for run in runs:
        assert f"| {run} |" in table


def _history(tmp_path: Path, run: str, runs_dir: str = "runs") -> dict:
    return builders.saved(tmp_path / runs_dir / run)


def _evaluated(run_dir: Path, step: int) -> bool:
    """Whether eval_history.json (written after the checkpoint) already holds the evaluation at ``step``."""
    try:
        history = json.loads((run_dir / "eval_history.json").read_text())["history"]
    except (OSError, ValueError, KeyError):
        return False
    return bool(history) and history[-1]["step"] >= step


def test_killed_run_resumes_with_the_same_command(tmp_path: Path) -> None:
    """A papermill run killed mid-training (as by a Colab disconnect) continues when the same command is rerun."""
    params = ["-p", "algo", "a2c", "-p", "seed", "0", "-p", "total_timesteps", "2000", *CARTPOLE]
    run_dir = tmp_path / "runs" / "a2c_seed-0"
    # Each checkpoint write pauses 1 s, so the kill lands seconds before the run could finish its 2,000 steps.
    slow_saves = builders.slow_copies(_env(tmp_path), 1.0)
    first = subprocess.Popen(_papermill_args(tmp_path / "first.ipynb", params), cwd=tmp_path, env=slow_saves,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while not _evaluated(run_dir, 500) and first.poll() is None:
            assert time.monotonic() < deadline, "the first run never saved its step-500 evaluation"
            time.sleep(0.1)
        owner = run_dir / "owner.json"
        if first.poll() is None and owner.exists():  # kill the kernel that trains, as a disconnect would
            os.kill(json.loads(owner.read_text())["pid"], signal.SIGKILL)
        first.wait(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    before = _history(tmp_path, "a2c_seed-0")
    assert before["history"] and 500 <= before["history"][-1]["step"] < 2000, "killed before it finished"

    proc, nb = _papermill(tmp_path, "second.ipynb", params)
    _assert_report_ok(proc, nb, tmp_path, ["a2c_seed-0"])
    assert f"a2c_seed-0: resuming from step {before['history'][-1]['step']:,} on " in _text(nb)
    after = _history(tmp_path, "a2c_seed-0")
    assert [point["step"] for point in after["history"]] == [0, 500, 1000, 1500, 2000]
    assert after["history"][: len(before["history"])] == before["history"]
    assert after["wandb_run_id"] == before["wandb_run_id"]
    assert f"W&B run {before['wandb_run_id']}" in _text(nb)
    logs = [o.text for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "stream"]
    assert 0 < sum(map(len, logs)) < 20_000, "progress bars and logs stay small"  # 3 KB when written


def test_algo_all_trains_every_run_and_a_rerun_only_builds_the_report(tmp_path: Path) -> None:
    params = ["-p", "algo", "all", "-p", "total_timesteps", "1000", *CARTPOLE]
    proc, nb = _papermill(tmp_path, "all.ipynb", params)
    _assert_report_ok(proc, nb, tmp_path, REPORT_RUNS)
    histories = {run: _history(tmp_path, run) for run in REPORT_RUNS}
    assert all([p["step"] for p in h["history"]] == [0, 500, 1000] for h in histories.values())
    assert "6/6 runs finished" in _text(nb)

    proc, nb = _papermill(tmp_path, "again.ipynb", params)
    _assert_report_ok(proc, nb, tmp_path, REPORT_RUNS)
    assert all(f"{run}: finished, skipped" in _text(nb) for run in REPORT_RUNS)
    assert {run: _history(tmp_path, run) for run in REPORT_RUNS} == histories


def test_short_pong_run(tmp_path: Path) -> None:
    """The README's main command, with a tiny budget: your own run in my_runs/, its figures beside it, drawn beside
    the committed runs, and a verdict on which of the text's figures it reproduces."""
    for run in ("a2c_seed-0", "task2_seed-0"):  # two of the committed runs, in the runs/ of this checkout
        (tmp_path / "runs" / run).mkdir(parents=True)
        committed = (ROOT / "runs" / run / "eval_history.json").read_bytes()
        (tmp_path / "runs" / run / "eval_history.json").write_bytes(committed)
    proc, nb = _papermill(tmp_path, "pong.ipynb", [
        "-p", "algo", "task2", "-p", "seed", "0", "-p", "total_timesteps", "40", "-p", "n_envs", "2",
        "-p", "eval_interval", "1000000", "-p", "n_eval_episodes", "1", "-p", "wandb_mode", "offline",
        "-p", "runs_dir", "my_runs"])
    _assert_report_ok(proc, nb, tmp_path, ["task2_seed-0"], figures="my_runs/figures")
    assert (tmp_path / "my_runs" / "figures" / "diagnostics.png").exists() is False  # the committed runs' figure
    assert not (tmp_path / "figures").exists()  # the committed figures are not overwritten
    text = _text(nb)
    assert "This report shows your runs in `my_runs`: the results plot draws them beside the committed runs" in text
    assert "No gradient analysis in the figures folder" in text  # the mechanism cell, with no analysis
    assert "#### Your runs against the text" in text and "**Your runs in `my_runs` reproduce 0 of the text's" in text
    assert "*task2 passes 18, seed 0* (9.9M in the text, not reached in yours)" in text  # in 40 steps
    assert re.search(r"\*\*\d+ of the \d+ figures checked hold on the runs in `runs`\.\*\* \d+ of the text's \d+ "
                     r"could not be checked here: \d+ lacks? (?:its|their) runs, \d+ lacks? a gradient analysis\.",
                     text)
    history = _history(tmp_path, "task2_seed-0", "my_runs")
    assert history["config"]["env_id"] == "PongNoFrameskip-v4" and history["config"]["stop_return"] == 18.0
    assert [point["step"] for point in history["history"]] == [0, 40]
    assert all(-21 <= r <= 21 for point in history["history"] for r in point["returns"])


def test_a_report_of_another_game_carries_nothing_of_pong(tmp_path: Path) -> None:
    """The README's command on Breakout with a tiny budget: the run trains with Breakout's settings and no stop at
    18, and what the report generates of it carries no Pong threshold, label or W&B project."""
    proc, nb = _papermill(tmp_path, "breakout.ipynb", [
        "-p", "env_id", "BreakoutNoFrameskip-v4", "-p", "algo", "a2c", "-p", "seed", "0", "-p", "total_timesteps",
        "40", "-p", "n_envs", "2", "-p", "n_eval_episodes", "2", "-p", "wandb_mode", "offline", "-p", "runs_dir", "b"])
    _assert_report_ok(proc, nb, tmp_path, ["a2c_seed-0"], figures="b/figures")
    config = _history(tmp_path, "a2c_seed-0", "b")["config"]
    assert (config["stop_return"], config["life_loss"], config["fire_reset"], config["eval_interval"]) == (
        None, True, True, 500_000)
    assert config["wandb_project"] == "breakout-actor-critic"
    table = _results_table(nb)
    assert table.startswith("**Runs on `BreakoutNoFrameskip-v4`**") and "first step >" not in table
    first, last = (next(i for i, c in enumerate(nb.cells) if c.source.startswith(heading))
                   for heading in ("## Training", "## Your analysis"))
    ours = _text(nbformat.NotebookNode(cells=nb.cells[first:last]))  # of your runs: training, plot and table
    assert "| a2c_seed-0 |" in ours  # the table of your runs is among them
    assert not re.search(r"pong|opponent|> 18|> -10", ours, re.IGNORECASE), ours  # no Pong word or threshold
    assert "Every other section is about the committed runs" in _text(nb)
    assert "breakout-actor-critic" in _text(nb) and "pong-actor-critic" not in _text(nb)


def _prepared_record(run: str, steps: list[int], means: list[float]) -> RunRecord:
    algo, seed = run.split("_seed-")
    config = {"algo": algo, "seed": int(seed), "env_id": "PongNoFrameskip-v4", "total_timesteps": steps[-1],
              "precision": "fp32", "wandb_project": "pong-actor-critic", "wandb_entity": "example-team"}
    history = tuple(Evaluation(s, (m - 1.0, m, m + 1.0), (800, 800, 800), train_seconds=s / 100)
                    for s, m in zip(steps, means, strict=True))
    return builders.made_up_run(run, history, config, wandb_run_id=f"id{algo}{seed}")


@pytest.fixture
def prepared_runs(tmp_path: Path) -> list[str]:
    """Five of the six report runs (task2_seed-100 missing); a2c_seed-0 exceeds 18 at step 600,000."""
    runs = [name for name in REPORT_RUNS if name != "task2_seed-100"]
    for run in runs:
        means = [-20.0, 5.0, 19.0] if run == "a2c_seed-0" else [-20.0, -19.0, -15.0]
        builders.save(tmp_path / "runs", _prepared_record(run, [0, 300_000, 600_000], means))
    return runs


def test_report_only_and_html_export(tmp_path: Path, prepared_runs: list[str]) -> None:
    builders.save(tmp_path / "runs", _prepared_record("a2c_seed-200", [0, 300_000], [-20.0, -18.0]))
    for variant in ("task1-a2chp_seed-0", "task1-a2chp_seed-200"):  # another section's runs, not the ablation's
        builders.save(tmp_path / "runs", _prepared_record(variant, [0, 300_000], [-20.0, -19.0]))
    proc, nb = _papermill(tmp_path, "out.ipynb", ["-p", "algo", "none", "-p", "wandb_mode", "offline"])
    _assert_report_ok(proc, nb, tmp_path, prepared_runs)
    table = _results_table(nb)
    assert "a2c_seed-200" not in table  # the five-seed runs have their own section and appendix table
    assert "task1-a2chp_seed-0" not in table  # the prescribed table is the three algorithms'
    assert [t for t in _tables(nb) if "| a2c_seed-200 |" in t] and (tmp_path / "figures" / "seeds.png").exists()
    # the equal-hyperparameters runs have their own figure and appendix table, and join no other table
    equal_hp = [t for t in _tables(nb) if "task1-a2chp" in t]
    assert len(equal_hp) == 1 and "| task1-a2chp_seed-0 |" in equal_hp[0] and "| task1-a2chp_seed-200 |" in equal_hp[0]
    assert "a2c_seed-200" not in equal_hp[0] and (tmp_path / "figures" / "equal_hp.png").exists()
    # 600,000 steps in 6,000 s; means -20, 5, 19: above -10 and 0 first at 300,000, above 18 at 600,000
    assert table.startswith("**Runs on `PongNoFrameskip-v4`**\n")  # the environment once, not on every row
    assert ("| a2c_seed-0 | 600,000 | 1.7 | 19.00 ± 0.58 (3) | 19.00 ± 0.58 (600,000) "
            "| 300,000 | 300,000 | 600,000 | [ida2c0]" in table)
    assert "[ida2c0](https://wandb.ai/example-team/pong-actor-critic/runs/ida2c0)" in table
    assert "not reached" in table
    text = _text(nb)
    assert "runs not present: task2_seed-100" in text
    # The analysis was written for the committed runs: on these, the claims check says which figures fail.
    verdict = re.search(r"\*\*(\d+) of the (\d+) figures checked hold", text)
    assert verdict is not None
    held, checked = map(int, verdict.groups())
    assert checked >= 10 and held < checked and "| task2 passes 18, seed 100 | 10.0M | no runs | not checked |" in text
    assert "*task1 passes 18, seed 100* (text: 9.9M; measured: not reached)" in text  # named in the verdict
    assert "*task2 passes 18, seed 100*" not in text
    assert re.search(r"\*\* \d+ of the text's \d+ could not be checked here: \d+ lacks? (?:its|their) runs", text)
    assert "| task1_seed-0 vs task2_seed-0 | 600,000 | 3 / 3 | n/a | n/a | n/a |" in text  # identical histories
    assert not (tmp_path / "wandb").exists(), "report-only mode starts no W&B run"

    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "html_mathml", "out.ipynb"],
                   cwd=tmp_path, check=True, capture_output=True, timeout=120)
    html = (tmp_path / "out.html").read_text()
    assert "data:image/png;base64," in html
    assert "injected-parameters" in html

    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "html_mathml", "--no-input",
                    "--TagRemovePreprocessor.remove_cell_tags=[\"injected-parameters\"]",
                    "--output", "graders", "out.ipynb"], cwd=tmp_path, check=True, capture_output=True, timeout=120)
    graders = (tmp_path / "graders.html").read_text()
    assert "data:image/png;base64," in graders and "<math" in graders  # the formulas typeset, for offline readers
    assert "injected-parameters" not in graders and "run_config(" not in graders
    headings = [title.strip() for title in re.findall(r"<h2[^>]*>([^<¶]+)", graders)]
    assert headings[headings.index("Method") + 1:headings.index("Results") + 2] == ["Training", "Results",
                                                                                    "Your analysis"]
    method = graders[graders.index(">Method<"):graders.index(">Training<")]  # the formulas, then the code
    assert all(name in method for name in ("a2c_loss", "task1_loss", "task2_loss", "ALGORITHMS", "ActorCritic"))


def test_table_links_each_run_once_the_entity_is_known(tmp_path: Path) -> None:
    run = "task1_seed-100"
    record = _prepared_record(run, [0, 300_000], [-20.0, -19.0])
    record.config.wandb_entity = None  # trained without an entity
    builders.save(tmp_path / "runs", record)

    unlinked = report.results_markdown(report.evaluated_runs(tmp_path / "runs"))
    assert unlinked.splitlines()[-1].endswith("| `idtask1100` |")
    assert project_link(None, "pong-actor-critic") == (
        "W&B project `pong-actor-critic`: set `wandb_entity` to link it and each run's id above.")
    linked = report.results_markdown(report.evaluated_runs(tmp_path / "runs"), wandb_entity="student")
    assert linked.splitlines()[-1].endswith(
        "| [idtask1100](https://wandb.ai/student/pong-actor-critic/runs/idtask1100) |")
    assert project_link("student", "pong-actor-critic") == (
        "W&B project: [student/pong-actor-critic](https://wandb.ai/student/pong-actor-critic)")


@pytest.mark.parametrize(("params", "error"), [
    (["-p", "algo", "tsak1"], "unknown algo 'tsak1': choose one of a2c, task1, task2, 'all' to train every "
                              "run of the report, or 'none' to only build the report from the runs present"),
    # papermill itself only warns about a name the notebook lacks, and the default runs_dir would be used
    (["-p", "algo", "task1", "-p", "run_dir", "my_runs"], "unknown parameter 'run_dir': did you mean 'runs_dir'?"),
    (["-p", "env_id", "PongNoFrameskip-v9"], "unknown env id 'PongNoFrameskip-v9': use an ALE Atari id"),
    (["-p", "runs_dir", "/proc/nope", "-p", "total_timesteps", "100"], "cannot "),
])
def test_bad_parameters_fail_with_a_clear_error(tmp_path: Path, params: list[str], error: str) -> None:
    proc, nb = _papermill(tmp_path, "bad.ipynb", params)
    assert proc.returncode != 0
    (message,) = _errors(nb)
    assert message.startswith(f"RLHelpersError: {error}")
    (shown,) = [o.traceback for o in _outputs(nb) if o.output_type == "error"]
    assert shown == [message], "the cell shows the package's error as its one line, without a traceback"
    assert not (tmp_path / "runs").exists() and not (tmp_path / "my_runs").exists()


def test_notebook_setup_and_last_cell() -> None:
    """The set-up says what the requirements are (lower bounds) and the last code cell flushes Drive."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    setup = next(cell.source for cell in nb.cells if cell.source.startswith("## Set-up"))
    assert "pinned" not in setup and "lower bounds" in setup
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert code[-1].source == "notebook.flush_drive(runs_dir)"
    assert all(not cell.outputs and cell.execution_count is None for cell in code), "saved without outputs"


def test_analysis_results_rescores_and_agent_video(tmp_path: Path) -> None:
    from rlhelpers.runner.config import TrainConfig
    from rlhelpers.runner.run import train

    for algo in ("a2c", "task1"):
        train(TrainConfig(algo=algo, env_id="CartPole-v1", total_timesteps=200, n_envs=4, eval_interval=200,
                          n_eval_episodes=2, n_eval_envs=2, snapshot_interval=200, runs_dir=str(tmp_path / "runs"),
                          wandb_mode="disabled", device="cpu"), show_progress=False)
    assert report.analysis_results(tmp_path / "runs", tmp_path / "analysis.json") is None  # nothing saved yet
    with pytest.raises(RLHelpersError, match="no model snapshots under"):
        report.analysis_results(tmp_path / "empty", tmp_path / "analysis.json", recompute=True)
    saved = report.analysis_results(tmp_path / "runs", tmp_path / "analysis.json", recompute=True)
    assert report.analysis_results(tmp_path / "runs", tmp_path / "analysis.json") == saved  # read back

    rows = report.evaluated_runs(tmp_path / "runs")
    no_policy = report.agent_video_html(tmp_path / "runs", rows, tmp_path / "agent.gif")
    assert "No committed policy yet" in no_policy
    assert "python -m allaction evaluate &lt;runs_dir&gt;/&lt;run&gt; --export" in no_policy
    (tmp_path / "agent.gif").write_bytes(b"GIF89a-not-really")
    html = report.agent_video_html(tmp_path / "runs", rows, tmp_path / "agent.gif")
    assert html.startswith('<img src="data:image/gif;base64,R0lGODlh')

    no_rescore = report.rescore_markdown(tmp_path / "runs", rows)
    assert "No re-score of a committed policy yet" in no_rescore and "evaluate <runs_dir>/<run> --export`" in no_rescore
    from allaction.playback import RESCORE_FILE, Rescore, save_rescore
    save_rescore(tmp_path / "runs" / "task1_seed-0", Rescore([20.0, 18.0], 19.0, 1.0, 15.0, 0.5, 200, 0))
    save_rescore(tmp_path / "runs" / "a2c_seed-0", Rescore([20.0, 18.0], 19.0, 1.0, 18.5, 0.5, 200, 0))
    save_rescore(tmp_path / "runs" / "a2c_seed-0", Rescore([20.0, 20.0, 20.0], 20.0, 0.0, 18.5, 0.5, 200, 0, True))
    table = report.rescore_markdown(tmp_path / "runs", rows)
    assert "| a2c_seed-0 | 200 | 19.00 ± 1.00 (2) | 20.00 ± 0.00 (3) | 18.50 ± 0.50 | yes |" in table
    assert "| task1_seed-0 | 200 | 19.00 ± 1.00 (2) | – | 15.00 ± 0.50 | **no** |" in table  # 4 > 1.96 * 1.12
    (tmp_path / "runs" / "a2c_seed-0" / RESCORE_FILE).unlink()  # a greedy re-score alone: no verdict
    assert "| a2c_seed-0 | 200 | – | 20.00 ± 0.00 (3) | 18.50 ± 0.50 | n/a |" in report.rescore_markdown(
        tmp_path / "runs", rows)


def _record(algo: str, seed: int, means: list[float], every: int = 1_000_000) -> RunRecord:
    """A run's record with two returns per evaluation, mean ± 1, every ``every`` steps."""
    return builders.made_up_run(f"{algo}_seed-{seed}", builders.evaluations(means, every, lengths=(800, 800)), {
        "algo": algo, "seed": seed, "env_id": "PongNoFrameskip-v4", "total_timesteps": 10_000_000, "stop_return": 18.0,
        **ALGORITHMS[algo].defaults})


def _write_runs(runs_dir: Path, records: list[RunRecord]) -> None:
    for record in records:
        builders.save(runs_dir, record)


def test_history_divergence_of_same_seed_and_seed_pairs(tmp_path: Path) -> None:
    task1 = _record("task1", 0, [-21.0, -20.0, -19.0, -10.0])
    task2 = _record("task2", 0, [-21.0, -20.0, -18.0, -12.0])
    changed = dataclasses.replace(task2.evaluations[2], returns=(-19.0, -17.0))  # mean -18, s.e. 1
    task2 = dataclasses.replace(task2, evaluations=task2.evaluations[:2] + (changed,) + task2.evaluations[3:])
    result = history_divergence(task1, task2)
    assert result["last_identical_step"] == 1_000_000 and result["identical_steps"] == 2
    assert result["mean_gap"] == {2_000_000: 1.0, 3_000_000: 2.0}
    assert result["gap_sem"] == {2_000_000: pytest.approx(2 ** 0.5), 3_000_000: pytest.approx(2 ** 0.5)}
    apart = history_divergence(_record("a2c", 0, [-21.0]), _record("a2c", 100, [-20.0]))
    assert apart["last_identical_step"] is None

    assert "No pair of runs" in report.divergence_markdown(tmp_path)
    _write_runs(tmp_path, [task1, task2, _record("task1", 100, [-20.0, -20.0, -15.0, -10.0])])
    text = report.divergence_markdown(tmp_path)
    assert "| task1_seed-0 vs task2_seed-0 | 1,000,000 | 2 / 4 | 1.50 | 2.00 | 1.41 |" in text
    assert "| task1_seed-0 vs task1_seed-100 | never | 2 / 4 | 1.25 | 4.00 | 1.41 |" in text
    assert "task2_seed-100" not in text


def test_a_run_is_finished_by_its_own_config(tmp_path: Path) -> None:
    """Passing the report's 18 once does not finish a run that trains on to its own stop_return."""
    record = _record("a2c", 0, [-20.5, 18.5, 17.0])
    record.config.stop_return = 20.0
    done = _record("a2c", 100, [-20.5, 17.0, 18.5])
    _write_runs(tmp_path, [record, done])
    rows = {r.name: r for r in report.evaluated_runs(tmp_path)}
    assert rows["a2c_seed-0"].first_step_above(18.0) == 1_000_000 and not rows["a2c_seed-0"].finished()
    assert rows["a2c_seed-100"].finished()


@pytest.mark.parametrize("code", [0, 1, 143])
def test_the_training_cell_raises_unless_every_run_of_the_campaign_is_over(code: int) -> None:
    """algo = "all": anything but 0 (a run failed or is not over, or a signal stopped the campaign) stops the
    notebook before a report is built from unfinished runs."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    cell = next(cell.source for cell in nb.cells if "train_campaign(options" in cell.source)
    namespace: dict[str, Any] = {"algo": "all", "runs_dir": "runs", "options": {}, "experiment": None,
                                 "notebook": types.SimpleNamespace(require_drive=lambda runs_dir: None),
                                 "study": types.SimpleNamespace(report_runs=lambda experiment: []),
                                 "train_campaign": lambda options, runs, show_progress: code}
    if code == 0:
        exec(cell, namespace)
    else:
        with pytest.raises(RuntimeError, match=f"the campaign ended with exit code {code}: not every run is over"):
            exec(cell, namespace)
