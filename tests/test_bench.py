"""The throughput benchmark runs end to end in its quickest form, so it cannot rot (its figures are not checked)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_quick_benchmark_writes_its_table(tmp_path: Path) -> None:
    out = tmp_path / "results.md"
    subprocess.run([sys.executable, "-m", "bench.throughput", "--quick", "--output", str(out)],
                   cwd=ROOT, check=True, timeout=300, capture_output=True)
    table = out.read_text()
    for row in ("env ceiling", "reference design", "baseline: rlhelpers before", "rlhelpers a2c, auto settings",
                "rlhelpers task1", "rlhelpers task2", "two runs side by side: rlhelpers",
                "pipeline ceiling: rlhelpers, 1 torch thread, 2 env groups (auto with a GPU)",
                "cpu:"):
        assert row in table
    assert "x reference" in table and "x baseline pair" in table and "of env ceiling" in table


def test_the_gpu_table_has_every_row_and_projects_the_six_report_runs() -> None:
    """The GPU table (``--device cuda``) is built from measured rates; here from made-up ones, 1,000 steps/s for every
    row but the evaluation's, 3,000, each row 10 s long, the last row left out of time: the projection then follows
    from the committed runs' step counts and evaluation lengths alone."""
    import json

    from bench import gpu

    table = gpu.table_rows()
    names = [row.name for row in table]
    for shape in ("2 cores (Colab): ", " cores (all): "):
        for what in ("env ceiling", "reference design", "rlhelpers a2c, auto settings"):
            assert any(shape in name and what in name for name in names), (shape, what)
    for what in ("evaluation: 30 envs", "campaign: 2 runs at once", "1 env group",
                 "pinned memory + non_blocking uploads", "update through the acting passes", "TF32 convolutions"):
        assert any(name.startswith("2 cores (Colab): ") and what in name for name in names), what
    (six,) = [name for name in names if "(all): campaign: 6 runs at once (auto" in name]
    # The answers first: a check short of time drops the open choices, never the rows the projection needs.
    assert names.index(six) < min(names.index(name) for name in names if "1 env group" in name or "TF32" in name)
    colab = [child for row in table if row.name.startswith("2 cores (Colab)") for child in row.children]
    assert all(child.get("cpus") == 2 for child in colab)
    for row in table[:-1]:
        row.samples, row.wall_s = [3_000.0 if "evaluation" in row.name else 1_000.0] * 3, 10.0
    table[1].cpus_seen = 16  # Colab's reference design, whose threads could run on all 16 CPUs
    report = gpu.render(table, {"gpu": "a GPU"}, "command", 2.0)
    assert "1.00x reference" in report and "1.00x one a2c run" in report
    lines = report.splitlines()
    # each choice against the auto row
    for choice in ("1 env group", "pinned memory", "update through the acting passes", "TF32"):
        (line,) = [line for line in lines if line.startswith(f"| 2 cores (Colab): rlhelpers a2c, {choice}")]
        assert "1.00x auto settings" in line, line
    (reference,) = [line for line in lines if line.startswith("| 2 cores (Colab): reference design")]
    assert "NOT confined to 2 CPUs: its threads could use 16" in reference
    assert f"| {names[-1]} | not measured | | out of the check's time |" in report
    history = json.loads((ROOT / "runs" / "task2_seed-100" / "eval_history.json").read_text())["history"]
    eval_s = sum(max(e["lengths"]) for e in history) * 30 / 3_000.0  # one episode on each of 30 envs
    expected = (history[-1]["step"] / 1_000.0 + eval_s) / 3600  # at the a2c run's rate
    assert f"| projected: task2_seed-100 | {expected:.2f} h | | {history[-1]['step']:,} steps in " in report
    assert "| projected: the six, one at a time |" in report and "| projected: the six, two at a time |" in report
    assert f"{len(table) - 1} of {len(table)} rows measured in {10 * (len(table) - 1)} s" in report
    assert "start-up (build and warm-up) median 4.0 s a row" in report  # 10 s less 3 windows of 2 s
    assert "not projected" in gpu.render(table[:1], {}, "command", 2.0)


def test_the_gpu_rows_stop_where_the_next_would_end_past_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each row is guessed to take as long as the longest measured row of as many processes, else half as long again
    as the longest: with 10 s a process set and 25 s, two one-process rows fit and a two-process row does not."""
    from bench import throughput
    from bench.throughput import Row

    clock, writes = [0.0], []

    def measure(row: Row, common: dict, baseline_src: None) -> list[float]:
        clock[0] += 10.0
        row.wall_s = 10.0
        return [1.0, 2.0, 3.0]

    monkeypatch.setattr(throughput, "measure", measure)
    monkeypatch.setattr(throughput.time, "monotonic", lambda: clock[0])
    table = [Row("one", [{}]), Row("two", [{}]), Row("pair", [{}, {}]), Row("three", [{}])]
    throughput.measure_in_time(table, {}, 25.0, lambda: writes.append(sum(bool(row.samples) for row in table)))
    assert [row.samples for row in table] == [[1.0, 2.0, 3.0]] * 2 + [[]] * 2
    assert writes == [0, 1, 2]  # before the first row and after each


def test_a_gpu_row_times_its_windows_in_one_set_of_processes_and_sees_where_their_threads_may_run() -> None:
    """Colab's shape confines a row's processes to the first CPU(s) they may use; the CPUs their threads could use
    come back with the windows' rates (summed over the processes of a row)."""
    import os

    from bench.throughput import Row, measure

    common = {"n_envs": 2, "n_steps": 5, "warmup": 1, "seconds": 0.05, "samples": 3}
    confined, pair = Row("confined", [{"kind": "random", "cpus": 1}]), Row("pair", [{"kind": "random"}] * 2)
    assert len(measure(confined, common, None)) == 3 and confined.cpus_seen == 1 and confined.wall_s > 0
    assert len(measure(pair, common, None)) == 3 and pair.cpus_seen == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("made_to_fail", [False, True])
def test_the_gpu_checks_dry_run_reports_every_phase_and_fails_loudly(made_to_fail: bool, tmp_path: Path) -> None:
    """``bash bench/gpu_check.sh --dry-run`` with one fast cuda test, passing or made to fail (by a pytest plugin),
    and no benchmark rows: exit 0 and "passed", or exit 1 naming the failed test; either way every phase's time and
    result are written."""
    import os

    plugin = "def pytest_runtest_call(item):\n    raise AssertionError('made to fail')\n"
    (tmp_path / "made_to_fail.py").write_text(plugin)
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env.update(PYTHON=sys.executable, WHEELS=str(tmp_path / "no-wheels"), OUT=str(tmp_path), ROWS="0",
               PYTHONPATH=str(tmp_path), PYTEST_ADDOPTS="-k cuda_stream" + (" -p made_to_fail" if made_to_fail else ""))
    done = subprocess.run(["bash", "bench/gpu_check.sh", "--dry-run"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    results = (tmp_path / "gpu_results.md").read_text()
    for phase in ("install", "cuda tests", "benchmark", "left running", "total", "projected GPU run"):
        assert f"| {phase} | " in results, phase
    (left_running,) = [line for line in results.splitlines() if line.startswith("| left running |")]
    assert left_running.endswith("| none |")
    if made_to_fail:
        assert done.returncode == 1
        failed = "FAILED: cuda tests: 1 failed"
        assert f"**{failed}" in results and "tests/test_cuda.py::test_a_resume_on_a_gpu_restores_the_cuda_" in results
        assert done.stdout.splitlines()[-1].startswith(failed)
    else:
        assert done.returncode == 0, done.stdout
        assert "**passed**" in results and "| cuda tests | " in results and "1 passed" in results


def test_the_gpu_rows_new_measurements_run() -> None:
    """The evaluation step and the trainer variants build and step (on the CPU here)."""
    from bench.throughput import _stepper

    common = {"n_envs": 2, "n_steps": 5, "device": "cpu"}
    for spec in ({"kind": "evaluation", "algo": "a2c", "n_eval_envs": 2}, {"kind": "rlhelpers", "algo": "task1",
                 "variant": "pinned"}, {"kind": "rlhelpers", "algo": "a2c", "variant": "acting-graphs"},
                 {"kind": "rlhelpers", "algo": "a2c", "variant": "tf32"}):
        step, steps_per_call = _stepper({**common, **spec})
        step()
        assert steps_per_call == (2 if spec["kind"] == "evaluation" else 10)


def test_the_graders_page_words_count_formulas_once_and_stop_at_the_appendix() -> None:
    from bench.words import page_words

    html = ("<html><head><title>Report title</title><style>p {}</style></head><body>"
            "<h1>Answer first¶</h1><p>A2C learned fastest: 7.2M — and <math><mi>x</mi><mo>+</mo><mn>1</mn></math>"
            " is one word.</p><table><tr><td>Δ(a2c, task1) = 7.4</td></tr></table>"
            "<h2>Your analysis</h2><p>The student's own words are not counted.</p>"
            "<h2>Limits</h2><p>Two games.</p><h1>Appendix</h1><p>Not counted either.</p></body></html>")
    # the heading, five words, the formula, three words, the table's three; the student's section and the Appendix: none
    assert page_words(html) == {"(before the first heading)": 0, "Answer first": 2 + 5 + 1 + 3 + 3,
                                "Your analysis": 0, "Limits": 1 + 2, "Appendix": 0}
