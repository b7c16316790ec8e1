"""The notebook's parameters and run config, where its runs live and how W&B is set up, with Colab's own calls
replaced: the code around them is the code that runs on Colab."""

from __future__ import annotations

import ast
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from allaction import notebook as study
from allaction.experiment import ANALYSIS_JSON, PONG, experiment_of
from rlhelpers import notebook
from rlhelpers.core.errors import RLHelpersError
from rlhelpers.runner.config import TrainConfig, validate

NOTEBOOK = Path(__file__).resolve().parents[1] / "report.ipynb"


def test_setup_wandb_reads_the_colab_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_API_KEY", "")  # restored (removed) after the test
    monkeypatch.setattr(notebook, "on_colab", lambda: True)
    monkeypatch.setattr(notebook, "_colab_secret", lambda name: "k" * 40 if name == "WANDB_API_KEY" else None)
    assert notebook.setup_wandb(None) == "online"
    assert os.environ["WANDB_API_KEY"] == "k" * 40


def test_setup_wandb_falls_back_to_offline_visibly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("WANDB_API_KEY", "")
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(notebook, "on_colab", lambda: True)
    monkeypatch.setattr(notebook, "_colab_secret", lambda name: None)
    assert notebook.setup_wandb(None, notebook.COLAB_RUNS_DIR) == "offline"
    out = capsys.readouterr().out
    assert out.startswith("W&B: OFFLINE (no API key found). Nothing is uploaded to W&B now.")
    assert f"{notebook.COLAB_RUNS_DIR}/<run>/metrics.jsonl and eval_history.json, on Google Drive" in out
    assert (f"add the Colab secret WANDB_API_KEY (key icon, Notebook access on), rerun the set-up cells, then run "
            f"`!python -m rlhelpers publish --runs-dir {notebook.COLAB_RUNS_DIR}` in a new cell") in out
    assert "wandb sync" not in out
    with pytest.raises(RLHelpersError, match="needs an API key"):
        notebook.setup_wandb("online")

    monkeypatch.setattr(notebook, "on_colab", lambda: False)
    assert notebook.setup_wandb("disabled", "my runs") == "disabled"
    out = capsys.readouterr().out
    assert out.startswith("W&B: DISABLED (no API key found). Nothing is uploaded")
    assert "run `wandb login` (or set WANDB_API_KEY), then `python -m rlhelpers publish --runs-dir 'my runs'`" in out


def test_flush_drive_only_on_colab_with_the_runs_on_drive(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture) -> None:
    flushed = []
    drive = SimpleNamespace(flush_and_unmount=lambda: flushed.append(True))
    monkeypatch.setattr(notebook, "_colab_drive", lambda: drive)
    monkeypatch.setattr(notebook.os.path, "ismount", lambda path: path == notebook.COLAB_DRIVE)
    monkeypatch.setattr(notebook, "on_colab", lambda: False)
    notebook.flush_drive("runs")
    monkeypatch.setattr(notebook, "on_colab", lambda: True)
    notebook.flush_drive("/content/local-runs")
    assert flushed == [] and capsys.readouterr().out == ""
    notebook.flush_drive(notebook.COLAB_RUNS_DIR)
    assert flushed == [True]
    assert capsys.readouterr().out.startswith(f"Google Drive flushed and unmounted: {notebook.COLAB_RUNS_DIR}")
    monkeypatch.setattr(notebook.os.path, "ismount", lambda path: False)  # already unmounted: nothing to do
    notebook.flush_drive(notebook.COLAB_RUNS_DIR)
    assert flushed == [True]


def test_runs_dir_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    mounted = []
    monkeypatch.setattr(notebook, "_colab_drive", lambda: SimpleNamespace(mount=lambda path: mounted.append(path)))
    monkeypatch.setattr(notebook, "on_colab", lambda: False)
    assert notebook.resolve_runs_dir(None) == "runs"
    assert notebook.resolve_runs_dir("elsewhere") == "elsewhere"
    monkeypatch.setattr(notebook, "on_colab", lambda: True)
    assert notebook.resolve_runs_dir(None) == notebook.COLAB_RUNS_DIR and mounted == [notebook.COLAB_DRIVE]
    assert notebook.resolve_runs_dir("/content/drive/MyDrive/other") == "/content/drive/MyDrive/other"
    assert notebook.resolve_runs_dir("/content/local") == "/content/local" and mounted == [notebook.COLAB_DRIVE] * 2


def test_training_refuses_a_drive_runs_dir_once_drive_is_unmounted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last cell unmounts Drive; a training cell rerun alone must not write /content/drive on the VM's disk."""
    mounted = {notebook.COLAB_DRIVE}
    monkeypatch.setattr(notebook.os.path, "ismount", lambda path: path in mounted)
    monkeypatch.setattr(notebook, "on_colab", lambda: True)
    notebook.require_drive(notebook.COLAB_RUNS_DIR)
    mounted.clear()
    with pytest.raises(RLHelpersError, match="Google Drive is not mounted .* rerun the set-up cell"):
        notebook.require_drive(notebook.COLAB_RUNS_DIR)
    notebook.require_drive("/content/local-runs")  # not on Drive: nothing to check
    monkeypatch.setattr(notebook, "on_colab", lambda: False)
    notebook.require_drive(notebook.COLAB_RUNS_DIR)  # elsewhere the path is an ordinary folder


def test_parameter_names_and_flags_are_checked() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    params = next(cell.source for cell in nb.cells if "parameters" in cell.metadata.get("tags", []))
    assert study.NOTEBOOK_PARAMETERS == tuple(node.targets[0].id for node in ast.parse(params).body)
    injected = '# Parameters\nalgo = "task1"\nseed = 100\nrecompute_analysis = True\n'
    names = study.NOTEBOOK_PARAMETERS
    notebook.check_parameters(["import os", params, injected], names, {"recompute_analysis": True})
    notebook.check_parameters([injected + 'PAPERMILL_INPUT_PATH = "notebook.ipynb"\n'], names, {})  # --inject-paths
    with pytest.raises(RLHelpersError, match="unknown parameter 'seeds': did you mean 'seed'"):
        notebook.check_parameters([injected + "seeds = 100\n"], names, {"recompute_analysis": False})
    with pytest.raises(RLHelpersError, match="recompute_analysis must be True or False, got 'False'"):
        notebook.check_parameters([injected], names, {"recompute_analysis": "False"})


def test_run_config_casts_papermill_floats() -> None:
    config = study.run_config("task1", PONG, seed=100, total_timesteps=5e3, n_envs=2.0, runs_dir="runs")
    assert config is not None
    assert (config.total_timesteps, config.n_envs, config.run_name) == (5000, 2, "task1_seed-100")
    assert study.run_config("none", PONG, seed=0) is None
    assert study.run_config("all", PONG, seed=0, total_timesteps=5e3) is None  # every run: trained by the campaign
    with pytest.raises(RLHelpersError, match="n_envs must be"):  # the shared options are checked for each algo
        study.run_config("all", PONG, seed=0, n_envs=-1)


def test_an_unknown_algo_gets_the_one_message_with_the_notebooks_own_choices() -> None:
    with pytest.raises(RLHelpersError) as everywhere:
        validate(TrainConfig(algo="tsak1"))
    with pytest.raises(RLHelpersError) as in_the_notebook:
        study.run_config("tsak1", PONG, seed=0)
    assert str(everywhere.value) == "unknown algo 'tsak1': choose one of a2c, task1, task2"
    assert str(in_the_notebook.value) == (f"{everywhere.value}, 'all' to train every run of the report, or 'none' to "
                                          "only build the report from the runs present")


def test_notebook_defaults_follow_the_environment() -> None:
    """The parameters cell's None takes the experiment's on its game, else each environment's defaults: Pong's 18
    is the report's rule (it would stop a CartPole run at its first evaluation, where a near-uniform policy already
    scores about 20, and a Breakout run long before it learns)."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    params = next(cell.source for cell in nb.cells if "parameters" in cell.metadata.get("tags", []))
    values: dict = {}
    exec(params, values)

    def run_config(env_id: str, **given: object) -> TrainConfig:
        names = ("n_envs", "eval_interval", "n_eval_episodes", "stop_return", "checkpoint_interval_s", "wandb_project")
        options = study.run_options(experiment_of(env_id), env_id=env_id,
                                       **{**{name: values[name] for name in names}, **given})
        config = study.run_config("a2c", experiment_of(env_id), **options)
        assert config is not None  # one algo: a run to train
        return config

    cartpole, pong, breakout = (run_config(env) for env in ("CartPole-v1", "PongNoFrameskip-v4",
                                                              "BreakoutNoFrameskip-v4"))
    assert (cartpole.n_envs, cartpole.eval_interval, cartpole.stop_return) == (8, 10_000, 475.0)
    assert (pong.n_envs, pong.eval_interval, pong.stop_return, pong.life_loss) == (16, 300_000, 18.0, False)
    assert (breakout.n_envs, breakout.eval_interval, breakout.stop_return) == (16, 500_000, None)
    assert (breakout.life_loss, breakout.fire_reset, breakout.n_eval_episodes) == (True, True, 30)
    assert (pong.wandb_project, breakout.wandb_project) == ("pong-actor-critic", "breakout-actor-critic")
    assert run_config("PongNoFrameskip-v4", stop_return=100, eval_interval=1000).stop_return == 100.0
    assert pong.checkpoint_interval_s == 300.0  # None: the run's default
    assert run_config("PongNoFrameskip-v4", checkpoint_interval_s=60).checkpoint_interval_s == 60
    asteroids = run_config("AsteroidsNoFrameskip-v4")  # a game without an experiment: the run defaults
    assert (asteroids.stop_return, asteroids.eval_interval, asteroids.life_loss) == (None, 300_000, False)
    assert [run.name for run in study.report_runs(None)] == [  # "all" on it: the report's six
        "a2c_seed-0", "task1_seed-0", "task2_seed-0", "a2c_seed-100", "task1_seed-100", "task2_seed-100"]


def test_outside_a_clone_the_committed_runs_are_fetched_from_repo_url_at_its_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip installs the package, not the repository: the report fetches the committed runs' histories and figures,
    without a .pt file, from ``repo_url``, or from the commit its ``@<commit>`` names (as pip pins one)."""
    root = NOTEBOOK.parent
    repo = tmp_path / "repo.git"
    subprocess.run(["git", "clone", "--quiet", "--bare", root, repo], check=True)
    subprocess.run(["git", "-C", repo, "config", "uploadpack.allowFilter", "true"], check=True)
    older = subprocess.run(["git", "-C", repo, "rev-list", "-1", "HEAD", "--", "runs/breakout/task1_seed-0"],
                           capture_output=True, text=True, check=True).stdout.strip()
    for name, url in (("head", f"file://{repo}"), ("pinned", f"file://{repo}@{older}")):
        (tmp_path / name).mkdir()
        monkeypatch.chdir(tmp_path / name)
        fetched = study.committed_root(url)
        assert fetched == Path(study.COMMITTED_FOLDER) and not (fetched / ".git").exists()
        files = [p for p in fetched.rglob("*") if p.is_file()]
        assert not [p for p in files if p.suffix == ".pt"] and (fetched / "figures" / ANALYSIS_JSON).exists()
        listed = subprocess.run(["git", "-C", repo, "ls-tree", "-r", "--name-only", url.rpartition("@")[2]
                                 if name == "pinned" else "HEAD", "runs"], capture_output=True, text=True,
                                check=True).stdout.split()
        assert sorted(str(p.relative_to(fetched)) for p in files if p.parts[1] == "runs") == sorted(
            path for path in listed if not path.endswith(".pt"))
        assert study.committed_root(url) == fetched  # fetched once
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RLHelpersError, match=r"cannot fetch the committed runs from file:///nowhere.git: git fetch "):
        study.committed_root("file:///nowhere.git")
    monkeypatch.chdir(root)
    assert study.committed_root(f"file://{repo}") == Path(".")  # in a clone, its own runs
