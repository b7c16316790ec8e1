"""The package's layers: the core, the run machinery, the report, and on top the command line and the
notebook's module. Every import points down (or stays in its layer), no modules import one another in a circle,
and the algorithm table is the one place that defines an algorithm."""

from __future__ import annotations

import ast
import shutil
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


LAYERS = {"core": 0, "runner": 1, "report": 2}  # and above them all: the command line and the notebook's module


def layer(module: str) -> int:
    """0 for the core, 1 for the run machinery, 2 for the report, 3 for the package's top-level modules."""
    parts = module.split(".")
    return LAYERS.get(parts[1], 3) if len(parts) > 2 else 3


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module of the package (``rlhelpers.runner.run``) and the package's modules it imports, at any depth of
    its code: function-level imports and imports for type checking count."""
    names = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for module, path in names.items():
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.update([node.module] + [f"{node.module}.{alias.name}" for alias in node.names])
        # A sub-package's __init__ holds no code: importing through it is importing the module named.
        graph[module] = {name for name in imported if name in names and names[name].name != "__init__.py"} - {module}
    return graph


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{module} -> {target}" for module, targets in graph.items() for target in targets
                  if layer(target) > layer(module))


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each set of modules that import one another, directly or through others (Tarjan's strongly connected
    components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = stack[stack.index(module):]
            del stack[stack.index(module):]
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_imports_point_down_and_never_in_a_circle() -> None:
    graph = import_graph()
    assert len(graph) > 30 and sum(map(len, graph.values())) > 60  # the graph is read, not empty
    assert upward_imports(graph) == []
    assert circles(graph) == []


def test_the_layer_test_catches_an_upward_import_and_a_circle(tmp_path: Path) -> None:
    """The same checks on a copy of the package with one import added: each is found."""
    copy = tmp_path / "rlhelpers"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    files = copy / "runner" / "files.py"
    source = files.read_text()
    files.write_text(source + "\nfrom rlhelpers.report.plotting import COMPARISON_PNG  # noqa\n")
    assert upward_imports(import_graph(copy)) == ["rlhelpers.runner.files -> rlhelpers.report.plotting"]
    files.write_text(source + "\nfrom rlhelpers.runner.checkpoint import RunDirectory  # noqa\n")
    assert upward_imports(import_graph(copy)) == []
    (circle,) = circles(import_graph(copy))  # checkpoint imports files, which now imports checkpoint
    assert {"rlhelpers.runner.checkpoint", "rlhelpers.runner.files"} <= set(circle)


def test_the_core_loads_nothing_of_the_outer_layers() -> None:
    """At run time: loading the training loop loads no module of the other layers."""
    code = ("import sys, rlhelpers.core.trainer; "
            "print(sorted(m for m in sys.modules if m.startswith(('rlhelpers.runner', 'rlhelpers.report'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_every_module_belongs_to_a_layer() -> None:
    top_level = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top_level == ["__init__.py", "__main__.py", "cli.py", "notebook.py"]
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
