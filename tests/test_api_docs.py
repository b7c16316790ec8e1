"""The Python API of docs/api.md works as written: its ``python`` blocks, run in order in one namespace in an empty
directory, train a CartPole run, resume it to a larger budget, read its history and play its newest snapshot, and
each does what the page says it does (a renamed function, attribute or field fails here, not in a reader's shell)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from rlhelpers.runner.store import HISTORY_FILE, METRICS_FILE, read_run

PAGE = Path(__file__).resolve().parents[1] / "docs" / "api.md"
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
# What the examples ask for: the run, its first budget and the resumed one, and the episodes played.
RUN = Path("my_runs") / "a2c_seed-0"
BUDGET, RESUMED_BUDGET, EVAL_INTERVAL, EPISODES = 2_000, 4_000, 1_000, 5


def python_blocks(page: Path) -> list[str]:
    """The code of each ``python`` block of ``page``, in order."""
    return PYTHON_BLOCK.findall(page.read_text())


def example_source(page: Path) -> str:
    """The ``python`` blocks of ``page`` as one program, each line where it stands on the page (every other line
    blank), so that a traceback names the page's line."""
    lines, inside = [], False
    for line in page.read_text().splitlines():
        opens = line.startswith("```python")
        inside = opens or (inside and not line.startswith("```"))
        lines.append(line if inside and not opens else "")
    return "\n".join(lines) + "\n"


def run_examples(page: Path) -> dict[str, Any]:
    """Run the ``python`` blocks of ``page`` one after the other in one namespace; return that namespace."""
    namespace: dict[str, Any] = {"__name__": "api_examples"}
    exec(compile(example_source(page), str(page), "exec"), namespace)
    return namespace


def test_each_section_of_the_api_page_has_one_example() -> None:
    sections = re.findall(r"^## (.+)$", PAGE.read_text(), re.MULTILINE)
    assert sections == ["Training a run", "Resuming it", "Reading its history", "Loading its policy to play a game"]
    assert len(python_blocks(PAGE)) == len(sections)
    assert example_source(PAGE).split() == "\n".join(python_blocks(PAGE)).split()  # the program is those blocks


def test_the_api_examples_train_resume_read_and_play_a_run_as_documented(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    namespace = run_examples(PAGE)
    run_dir = tmp_path / RUN

    # Training, then resuming: one run directory, trained to the larger budget in two sessions.
    assert (run_dir / HISTORY_FILE).is_file() and (run_dir / METRICS_FILE).is_file()
    result = namespace["result"]
    assert (result.run_dir.resolve(), result.num_timesteps, result.stop_reason) == (
        run_dir, RESUMED_BUDGET, "total_timesteps")
    record = read_run(run_dir)
    assert record is not None
    assert [e.step for e in record.evaluations] == list(range(0, RESUMED_BUDGET + 1, EVAL_INTERVAL))
    assert [session.start_step for session in record.sessions] == [0, BUDGET]

    # Reading: the page's record is the one on disk, and its metrics hold each evaluation.
    assert namespace["record"].evaluations == record.evaluations == result.record.evaluations
    assert [line.global_step for line in namespace["eval_lines"]] == [e.step for e in record.evaluations]

    # Playing: the newest snapshot, the episodes asked for, and the env closed.
    assert namespace["step"] == RESUMED_BUDGET
    assert len(namespace["returns"]) == len(namespace["lengths"]) == EPISODES
    assert all(length > 0 for length in namespace["lengths"])
    assert namespace["env"].closed

    # The outputs the page shows in its comments.
    out = capsys.readouterr().out.splitlines()
    assert f"{RUN.as_posix()} {BUDGET} total_timesteps" in out
    assert f"{RESUMED_BUDGET} {RESUMED_BUDGET}" in out
    assert f"[0, {BUDGET}]" in out
