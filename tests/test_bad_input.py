"""Bad input gives one clear line on stderr (exit code 2), never a traceback or a silent fresh start."""

import json
import subprocess
import sys
from pathlib import Path

import builders
import gymnasium as gym
import numpy as np
import pytest
import torch

from allaction.cli import main as study_main
from rlhelpers.cli import main
from rlhelpers.runner.store import RunDirectory


class GridEnv(gym.Env):
    """Image-like 3x3 observations, which neither network takes."""

    observation_space = gym.spaces.Box(0.0, 1.0, (3, 3), np.float32)
    action_space = gym.spaces.Discrete(2)


GRID_ENV = "rlhelpers-test/Grid-v0"
# gymnasium's EnvCreator protocol admits only factories of **kwargs, not an env class with fixed parameters, which
# gym.make calls with the registered kwargs alone: a valid entry point that its types refuse.
gym.register(GRID_ENV, entry_point=GridEnv)  # type: ignore[arg-type]  # EnvCreator wants **kwargs


def run_cli(capsys, *args: str) -> tuple[int, str]:
    code = (study_main if args[0] in ("evaluate", "analyze") else main)(list(args))
    err = capsys.readouterr().err
    return code, err


def cartpole_args(runs_dir: Path, *extra: str) -> list[str]:
    return ["train", *builders.cartpole_args(total_timesteps=400, n_envs=2, eval_interval=200, n_eval_episodes=1,
                                             n_eval_envs=1, runs_dir=runs_dir, stop_return=1000), *extra]


@pytest.mark.parametrize(("args", "message"), [
    (["--algo", "tsak1"], "unknown algo 'tsak1': choose one of a2c, task1, task2"),
    (["--env-id", "Pongg-v9"], "unknown env id 'Pongg-v9'"),
    (["--total-timesteps", "0"], "total_timesteps must be a positive integer, got 0"),
    (["--n-envs", "-1"], "n_envs must be a positive integer, got -1"),
    (["--eval-interval", "0"], "eval_interval must be a positive integer"),
    (["--n-eval-episodes", "0"], "n_eval_episodes must be a positive integer"),
    (["--lr", "-0.1"], "lr must be positive"),
    (["--n-steps", "0"], "n_steps must be a positive integer, got 0"),
    (["--keep-checkpoints", "0"], "keep_checkpoints must be a positive integer, got 0"),
    (["--max-grad-norm", "0"], "max_grad_norm must be positive, got 0.0"),
    (["--checkpoint-interval-s", "-1"], "checkpoint_interval_s must be positive, got -1.0"),
    (["--gamma", "99"], "gamma must lie in [0, 1], got 99.0"),
    (["--rms-alpha", "1"], "rms_alpha must lie in (0, 1), got 1.0"),
    (["--ent-coef", "-0.01"], "ent_coef must be non-negative, got -0.01"),
    (["--seed", "-1"], "seed must be a non-negative integer, got -1"),
    (["--torch-threads", "-1"], "torch_threads must be a non-negative integer, got -1"),
    (["--env-id", "Pendulum-v1"], "Pendulum-v1 has a Box(-2.0, 2.0, (1,), float32) action space"),
    (["--env-id", GRID_ENV], f"{GRID_ENV} has Box(0.0, 1.0, (3, 3), float32) observations; only Atari frames"),
    # training seeds (seed + step + env) would reach the evaluation seeds, which start at 2**30
    (["--total-timesteps", str(2**30)], "seed + total_timesteps is too large for the environments' int32 seeds"),
    (["--wandb-mode", "sometimes"], "unknown wandb_mode 'sometimes'"),
    (["--wandb-mode", "online"], "wandb_mode 'online' needs an API key"),  # conftest hides any key
    (["--device", "tpu"], "unknown device 'tpu'"),
    pytest.param(["--device", "cuda"], "CUDA is not available",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")),
])
def test_bad_values_are_named(capsys, tmp_path, args: list[str], message: str) -> None:
    code, err = run_cli(capsys, *cartpole_args(tmp_path, *args))
    assert code == 2
    assert err.startswith("error: ") and message in err
    assert not any(tmp_path.iterdir())  # nothing was created


def test_the_command_line_prints_one_error_line_and_no_traceback(tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-m", "rlhelpers", *cartpole_args(tmp_path, "--gamma", "99")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["error: gamma must lie in [0, 1], got 99.0"]


def test_conflicting_saved_config_is_refused(capsys, tmp_path) -> None:
    assert run_cli(capsys, *cartpole_args(tmp_path, "--algo", "a2c"))[0] == 0
    code, err = run_cli(capsys, *cartpole_args(tmp_path, "--algo", "a2c", "--lr", "0.01"))
    assert code == 2 and "different config" in err and "lr: saved 0.007 != requested 0.01" in err
    # a larger budget is not a conflict: the run resumes
    assert run_cli(capsys, *cartpole_args(tmp_path, "--algo", "a2c", "--total-timesteps", "600"))[0] == 0
    history = json.loads((tmp_path / "a2c_seed-0" / "eval_history.json").read_text())["history"]
    assert [p["step"] for p in history] == [0, 200, 400, 600]


def test_corrupt_checkpoint_is_reported_not_restarted(capsys, tmp_path) -> None:
    assert run_cli(capsys, *cartpole_args(tmp_path))[0] == 0
    run_dir = RunDirectory(tmp_path / "a2c_seed-0")
    for _, path in run_dir.checkpoints():
        path.write_bytes(path.read_bytes()[:100])  # truncate every checkpoint
    with pytest.warns(UserWarning, match="does not load") as warned:  # one per checkpoint tried, naming it
        code, err = run_cli(capsys, *cartpole_args(tmp_path, "--total-timesteps", "800"))
    tried = [path for _, path in run_dir.checkpoints()]  # newest first
    assert len(warned) == len(tried) and all(str(path) in str(w.message) for w, path in zip(warned, tried, strict=True))
    assert code == 2 and "no checkpoint in" in err and "loads" in err
    history = json.loads(run_dir.history_path.read_text())["history"]
    assert [p["step"] for p in history] == [0, 200, 400]  # the history was not overwritten by a fresh start


def test_missing_checkpoint_with_history_is_reported(capsys, tmp_path) -> None:
    assert run_cli(capsys, *cartpole_args(tmp_path))[0] == 0
    run_dir = RunDirectory(tmp_path / "a2c_seed-0")
    for _, path in run_dir.checkpoints():
        path.unlink()
    record = json.loads(run_dir.history_path.read_text())
    record["config"]["total_timesteps"] = 800  # stopped before its budget: it cannot go on without a checkpoint
    run_dir.history_path.write_text(json.dumps(record))
    code, err = run_cli(capsys, *cartpole_args(tmp_path))
    assert code == 2 and "no checkpoint was found" in err and "another runs directory" in err


def test_checkpoints_load_weights_only(capsys, tmp_path) -> None:
    assert run_cli(capsys, *cartpole_args(tmp_path))[0] == 0
    (_, newest), *_ = RunDirectory(tmp_path / "a2c_seed-0").checkpoints()
    state = torch.load(newest, weights_only=True)
    assert state["num_timesteps"] == 400 and state["config"]["algo"] == "a2c"


def test_evaluate_names_a_run_directory_that_does_not_exist(capsys, tmp_path) -> None:
    missing = tmp_path / "a2c_seed-0"
    for export in ([], ["--export"]):
        code, err = run_cli(capsys, "evaluate", str(missing), *export)
        assert code == 2 and err.startswith(f"error: {missing} does not exist") and "--export" not in err
    missing.mkdir()  # a run directory without policy.pt: --export writes it from the run's snapshots
    code, err = run_cli(capsys, "evaluate", str(missing))
    assert code == 2 and f"`python -m allaction evaluate {missing} --export`" in err
