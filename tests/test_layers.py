"""The package's three layers: the core imports nothing from the run machinery or the report, and the
algorithm table is the one place that defines an algorithm."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import rlhelpers
from rlhelpers.core.losses import ALGORITHMS, Algorithm, a2c_loss
from rlhelpers.runner.config import TrainConfig
from rlhelpers.runner.run import train

PACKAGE = Path(rlhelpers.__file__).parent


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at any depth of its code (function-level imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.update([node.module] + [f"{node.module}.{alias.name}" for alias in node.names])
    return found


def test_the_core_imports_nothing_from_the_outer_layers() -> None:
    core_files = sorted((PACKAGE / "core").glob("*.py"))
    assert len(core_files) >= 8
    for path in core_files:
        outer = [m for m in imported_modules(path) if m.startswith(("rlhelpers.runner", "rlhelpers.report"))
                 or m in ("rlhelpers.runner", "rlhelpers.report")]
        assert not outer, f"{path.name} imports {outer}"
    # And at run time: loading the training loop loads no module of the other layers.
    code = ("import sys, rlhelpers.core.trainer; "
            "print(sorted(m for m in sys.modules if m.startswith(('rlhelpers.runner', 'rlhelpers.report'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_every_module_belongs_to_a_layer() -> None:
    top_level = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top_level == ["__init__.py", "__main__.py"]
    assert sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__") == [
        "core", "report", "runner"]


def test_task2_is_named_in_the_table_and_the_report_comparisons_only() -> None:
    """Besides the table, only the report's own task1-against-task2 comparison (the analysis and its claims)
    names task2; the run machinery and the rest of the core read the table."""
    naming = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py") if "task2" in path.read_text())
    assert naming == ["core/losses.py", "report/analysis.py", "report/claims.py"]


def test_a_new_algorithm_is_one_row_of_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Register a toy algorithm (A2C's loss without its entropy bonus) in
    the table only, then train, checkpoint and evaluate it end to end: nothing else dispatches on names."""
    calls = []

    def toy_loss(logits, critic, actions, returns, pg_coef, vf_coef, ent_coef):  # noqa: ANN001, ANN202
        calls.append(critic.shape)
        return a2c_loss(logits, critic, actions, returns, pg_coef, vf_coef, ent_coef=0.0)

    monkeypatch.setitem(ALGORITHMS, "toy", Algorithm(toy_loss, critic="V", lr=7e-3, pg_coef=1.0, vf_coef=0.5,
                                                     ent_coef=0.0))
    config = TrainConfig(algo="toy", env_id="CartPole-v1", total_timesteps=2_000, eval_interval=1_000,
                         n_eval_episodes=2, n_eval_envs=2, runs_dir=str(tmp_path), wandb_mode="disabled",
                         device="cpu")
    assert (config.lr, config.vf_coef, config.ent_coef) == (7e-3, 0.5, 0.0)  # the env's lr, the row's others
    result = train(config, show_progress=False)
    assert [h["step"] for h in result.eval_history] == [0, 1_000, 2_000]
    assert (tmp_path / "toy_seed-0" / "eval_history.json").exists()
    assert len(calls) == 2_000 // config.batch_size and all(shape[1] == 1 for shape in calls)  # a V critic
    snapshot = torch.load(sorted((tmp_path / "toy_seed-0" / "snapshots").iterdir())[-1], weights_only=True)
    assert snapshot["model"]["critic_head.weight"].shape[0] == 1
