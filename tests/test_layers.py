"""The two packages' layers: the helper's core and run machinery, its top-level modules (the plot, the notebook's
glue, the command line), and above them all the study, ``allaction``. Every import points down (or stays in its
layer), no modules import one another in a circle, the helper names nothing of the study, and the algorithm table
is the one place that defines an algorithm: a new one trains with nothing else added."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import builders
import pytest
import torch

import allaction
import rlhelpers
from allaction import notebook as study
from bench.anatomy import code_lines, import_graph
from rlhelpers.cli import main
from rlhelpers.core.losses import ALGORITHMS
from rlhelpers.runner.config import TrainConfig

PACKAGE = Path(rlhelpers.__file__).parent
STUDY = Path(allaction.__file__).parent
BENCH = PACKAGE.parent / "bench"


LAYERS = {"core": 0, "runner": 1}  # rlhelpers' sub-packages; above them its top-level modules, then the study
TOP, STUDY_LAYER = 2, 3


def layer(module: str) -> int:
    """0 for the core, 1 for the run machinery, 2 for the helper's top-level modules, 3 for the study's modules."""
    parts = module.split(".")
    if parts[0] != "rlhelpers":
        return STUDY_LAYER
    return LAYERS.get(parts[1], TOP) if len(parts) > 2 else TOP


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
    graph = import_graph(PACKAGE, STUDY)
    assert len(graph) > 30 and sum(map(len, graph.values())) > 60  # the graph is read, not empty
    assert any(target.startswith("rlhelpers.") for module, targets in graph.items() if module.startswith("allaction")
               for target in targets)  # the study imports the helper
    assert upward_imports(graph) == []
    assert circles(graph) == []


# What the helper's code must never name: the study's package, its variants, predictions, ledger and claims, its
# experiments' games as settings of its own (an example of an env id in a help text names no threshold).
STUDY_WORDS = re.compile(r"allaction|pg1|a2chp|lrvf|predict|ledger|claim|spaceinvaders|stop_return=18|18\.0",
                         re.IGNORECASE)


def test_the_helper_names_nothing_of_the_study() -> None:
    """No identifier, string or comment of ``rlhelpers``' code names the study (its package docstring may say that
    one exists above it), and the helper's code is under 2,400 lines and the study's under 1,500 (``bench.anatomy``)."""
    found = [f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}" for path in sorted(PACKAGE.rglob("*.py"))
             if path != PACKAGE / "__init__.py"
             for number, line in enumerate(path.read_text().splitlines(), 1) if STUDY_WORDS.search(line)]
    assert found == []
    assert STUDY_WORDS.search("VARIANTS = {'lrvf': ...}  # prediction 17")  # the pattern finds what it is for
    assert sum(map(code_lines, PACKAGE.rglob("*.py"))) < 2_400
    assert sum(map(code_lines, STUDY.rglob("*.py"))) < 1_500


def test_bench_imports_the_package_never_the_other_way_and_never_in_a_circle() -> None:
    """bench/ measures the package from above: its modules import the package's and one another's without a circle,
    and no module of the package imports one of bench's."""
    graph = import_graph(PACKAGE, BENCH)
    assert any(target.startswith("bench.") for targets in graph.values() for target in targets)  # bench is read
    assert circles(graph) == []
    assert [f"{m} -> {t}" for m, targets in graph.items() if m.startswith("rlhelpers") for t in targets
            if t.startswith("bench")] == []


def test_the_layer_test_catches_an_upward_import_and_a_circle(tmp_path: Path) -> None:
    """The same checks on a copy of the package with one import added: each is found. The modules are chosen by
    their place in the graph: a module of the run machinery that another one imports, and one of the report."""
    copy, study = tmp_path / "rlhelpers", tmp_path / "allaction"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(STUDY, study, ignore=shutil.ignore_patterns("__pycache__"))
    graph = import_graph(copy, study)
    lower, importer = next((target, module) for module in sorted(graph) for target in sorted(graph[module])
                           if layer(module) == layer(target) == LAYERS["runner"])
    upper = next(module for module in sorted(graph) if layer(module) == STUDY_LAYER and "." in module)
    path = copy.parent.joinpath(*lower.split(".")).with_suffix(".py")
    source = path.read_text()
    path.write_text(source + f"\nimport {upper}  # noqa\n")
    assert upward_imports(import_graph(copy, study)) == [f"{lower} -> {upper}"]
    path.write_text(source + f"\nimport {importer}  # noqa\n")
    assert upward_imports(import_graph(copy, study)) == []
    (circle,) = circles(import_graph(copy, study))  # importer imports lower, which now imports importer
    assert {lower, importer} <= set(circle)


def test_the_core_loads_nothing_of_the_outer_layers() -> None:
    """At run time: loading the training loop loads no module of the other layers."""
    code = ("import sys, rlhelpers.core.trainer; "
            "print(sorted(m for m in sys.modules if m.startswith(('rlhelpers.runner', 'allaction'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
    code = "import sys, rlhelpers.cli, rlhelpers.notebook, rlhelpers.plots; print('allaction' in sys.modules)"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "False"  # the helper's command line loads nothing of the study


def test_every_sub_package_is_a_layer() -> None:
    """A module of a sub-package that is no layer would be ranked as a top-level module, above every layer, and
    escape the checks: each sub-package is one of ``LAYERS``."""
    sub_packages = {module.split(".")[1] for module in import_graph(PACKAGE) if module.count(".") >= 2}
    assert sub_packages and sub_packages <= set(LAYERS)


# A new algorithm as its author would add it: a loss and a row of the table, nothing else. Sampled-action Q
# actor-critic: A2C's actor with Q(s_t, a_t) in place of the advantage, and task1's critic.
NEW_ALGORITHM = '''
import torch
import torch.nn.functional as F

from rlhelpers.core.losses import ALGORITHMS, Algorithm, explained_variance

CALLS = []


def qac_loss(logits, critic, actions, returns, pg_coef, vf_coef, ent_coef):
    """-pg_coef * mean(Q(s_t,a_t).detach() log pi(a_t|s_t)) + vf_coef * MSE(Q(s_t,a_t), R_t) - ent_coef * mean(H)"""
    CALLS.append(tuple(critic.shape))
    log_probs = torch.log_softmax(logits, dim=-1)
    entropy = -(log_probs.exp() * log_probs).sum(-1).mean()
    q_sa = critic.gather(1, actions.unsqueeze(1)).squeeze(1)
    actor_loss = -(q_sa.detach() * log_probs.gather(1, actions.unsqueeze(1)).squeeze(1)).mean()
    critic_loss = F.mse_loss(q_sa, returns)
    stats = {"actor_loss": actor_loss.detach(), "critic_loss": critic_loss.detach(), "entropy": entropy.detach(),
             "explained_variance": explained_variance(q_sa.detach(), returns)}
    return pg_coef * actor_loss + vf_coef * critic_loss - ent_coef * entropy, stats


ALGORITHMS["qac"] = Algorithm(qac_loss, "Q", {"lr": 1e-3, "pg_coef": 0.5, "vf_coef": 0.25, "ent_coef": 0.02})
'''


def cartpole_options(runs_dir: Path, steps: int = 2_000) -> list[str]:
    """A CARTPOLE run of the env's own n_envs and stop return, as the algorithm's author would try it."""
    return builders.cartpole_args(total_timesteps=steps, runs_dir=runs_dir, n_envs=8, stop_return=475.0)


def test_a_new_algorithm_is_a_loss_and_a_row_of_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture) -> None:
    """Register a new algorithm in the table only, then train and resume it on CartPole through the command line
    and the notebook's entry point, and see it in the status table: nothing else dispatches on names."""
    module = types.ModuleType("qac_algorithm")
    monkeypatch.setitem(ALGORITHMS, "qac", None)  # restored after the test, like the row the module adds
    exec(NEW_ALGORITHM, module.__dict__)
    row = ALGORITHMS["qac"]
    assert main(["train", "--algo", "qac", *cartpole_options(tmp_path)]) == 0
    record = json.loads((tmp_path / "qac_seed-0" / "eval_history.json").read_text())
    assert [point["step"] for point in record["history"]] == [0, 1_000, 2_000]
    saved = {name: record["config"][name] for name in row.defaults}
    # the row's coefficients, with classic control's lr and ent_coef, as every algorithm's
    assert saved == {**row.defaults, "lr": 7e-3, "ent_coef": 0.0} == {
        name: getattr(TrainConfig(algo="qac", env_id="CartPole-v1"), name) for name in row.defaults}
    n_envs = record["config"]["n_envs"]
    assert module.CALLS == [(n_envs * 5, 2)] * (2_000 // (n_envs * 5))  # a Q critic: one output per action
    snapshot = torch.load(sorted((tmp_path / "qac_seed-0" / "snapshots").iterdir())[-1], weights_only=True)
    assert snapshot["model"]["critic_head.weight"].shape[0] == 2
    assert main(["train", "--algo", "qac", *cartpole_options(tmp_path, 3_000)]) == 0  # resumed, not restarted
    history = json.loads((tmp_path / "qac_seed-0" / "eval_history.json").read_text())["history"]
    assert [point["step"] for point in history] == [0, 1_000, 2_000, 3_000]
    config = study.run_config("qac", None, env_id="CartPole-v1", runs_dir=str(tmp_path))
    assert config is not None and config.run_name == "qac_seed-0"
    capsys.readouterr()
    assert main(["status", "--runs-dir", str(tmp_path)]) == 0
    assert re.search(r"^qac_seed-0 +3,000 .* finished$", capsys.readouterr().out, re.MULTILINE)


@pytest.mark.skipif(sys.platform == "win32", reason="sitecustomize on PYTHONPATH, as on Linux and macOS")
def test_a_new_algorithm_trains_in_a_campaign_and_shows_in_the_help(tmp_path: Path) -> None:
    """The same algorithm, registered at the start of every process (the campaign trains each run in its own): the
    campaign trains its runs, and the help of the command line names it and its defaults."""
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "qac_algorithm.py").write_text(NEW_ALGORITHM)
    (plugin / "sitecustomize.py").write_text("import qac_algorithm  # noqa: F401\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin), os.environ.get("PYTHONPATH", "")])}

    def rlhelpers_cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "rlhelpers", *args], capture_output=True, text=True,
                              timeout=600, env=env)

    help_text = " ".join(rlhelpers_cli("train", "--help").stdout.split())
    assert "algorithm: a2c, task1, task2, qac" in help_text
    assert "learning rate (default: a2c 0.0007, task1 0.0015, task2 0.0015, qac 0.001; classic control 0.007)" \
        in help_text
    campaign = rlhelpers_cli("campaign", "--arms", "qac", "--seeds", "1", "--parallel", "1",
                             *cartpole_options(tmp_path / "runs"))
    assert campaign.returncode == 0, campaign.stderr
    history = json.loads((tmp_path / "runs" / "qac_seed-1" / "eval_history.json").read_text())
    assert [point["step"] for point in history["history"]] == [0, 1_000, 2_000]
    assert history["config"]["pg_coef"] == 0.5
