"""The CLI's options are TrainConfig's fields, parsed with the fields' own types."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from allaction.cli import build_parser as study_parser
from rlhelpers.cli import build_parser
from rlhelpers.runner.config import TrainConfig


def test_every_field_is_an_option_of_its_own_type() -> None:
    hints = typing.get_type_hints(TrainConfig)
    samples = {int: ("7", 7), float: ("0.5", 0.5), str: ("x", "x"), bool: (None, True)}
    argv, expected = ["train"], {}
    for f in dataclasses.fields(TrainConfig):
        (kind,) = [t for t in samples if hints[f.name] is t or t in typing.get_args(hints[f.name])]
        text, value = samples[kind]
        option = f"--{f.name.replace('_', '-')}"
        argv += [option] if text is None else [option, text]  # bool's None: a flag, which takes no value
        expected[f.name] = value
    args = vars(build_parser().parse_args(argv))
    assert args.pop("command") == "train"
    assert args == expected
    assert all(type(args[name]) is type(value) for name, value in expected.items())  # 7, not 7.0 or "7"
    assert (type(args["seed"]), type(args["lr"]), type(args["wandb_entity"])) == (int, float, str)


def test_defaults_are_the_dataclass_defaults_and_bad_types_are_refused(capsys: pytest.CaptureFixture) -> None:
    args = vars(build_parser().parse_args(["train"]))
    del args["command"]
    assert TrainConfig(**args) == TrainConfig()
    for value, error in (("1.5", "not a whole number: '1.5'"), ("ten", "invalid integer: 'ten'")):
        with pytest.raises(SystemExit) as refused:
            build_parser().parse_args(["train", "--seed", value])
        assert refused.value.code == 2 and f"argument --seed: {error}" in capsys.readouterr().err


def test_integer_options_take_whole_numbers_in_float_notation() -> None:
    """``--total-timesteps 1e7`` as papermill's ``-p total_timesteps 1e7`` does."""
    args = build_parser().parse_args(["train", "--total-timesteps", "1e7", "--n-envs", "8.0", "--seed", "1_00"])
    assert (args.total_timesteps, args.n_envs, args.seed) == (10_000_000, 8, 100)
    assert type(args.total_timesteps) is int
    assert study_parser().parse_args(["evaluate", "runs/a2c_seed-0", "--episodes", "3e1"]).episodes == 30
    assert build_parser().parse_args(["train", "--seed", str(2**53 + 1)]).seed == 2**53 + 1  # not rounded via float


def test_campaign_passes_on_only_the_options_given() -> None:
    args = vars(build_parser().parse_args(["campaign", "--lr", "0.01", "--total-timesteps", "5000"]))
    cluster = {"cluster": None, "partition": None, "time_min": 240, "gpus_per_job": 0, "cpus_per_job": 2,
               "max_requeues": 30}
    assert args == {"command": "campaign", "arms": None, "seeds": None, "parallel": None,
                    **cluster, "lr": 0.01, "total_timesteps": 5000}
    args = vars(study_parser().parse_args(["campaign", "--lr", "0.01", "--total-timesteps", "5000"]))
    assert args == {"command": "campaign", "experiment": "pong", "arms": None, "seeds": None, "parallel": None,
                    **cluster, "lr": 0.01, "total_timesteps": 5000}  # the experiment's arms and seeds: --experiment


def test_status_piped_into_a_reader_that_leaves_early_shows_no_traceback(tmp_path: Path) -> None:
    # `true` exits at once, so the table is written into a closed pipe, as with `status | head -3`
    # With a buffered stdout (PYTHONUNBUFFERED unset) the write fails only when the buffer is flushed.
    env = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    for command in (f"status --runs-dir {tmp_path}", "train --help"):  # --help exits from inside argparse
        piped = subprocess.run(["bash", "-c", f"{sys.executable} -m rlhelpers {command} | true"],
                               capture_output=True, text=True, timeout=120, env=env)
        assert piped.stderr == "", command


def test_status_and_plot_refuse_a_runs_dir_that_holds_nothing(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from rlhelpers.cli import main

    out = tmp_path / "comparison.png"
    assert main(["status", "--runs-dir", str(tmp_path / "typo")]) == 2
    assert f"no runs directory {tmp_path / 'typo'}" in capsys.readouterr().err
    assert main(["plot", "--runs-dir", str(tmp_path), "--out", str(out)]) == 2  # exists, but no run in it
    assert "nothing to plot" in capsys.readouterr().err and not out.exists()


def test_plot_names_an_unreadable_history(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from rlhelpers.cli import main

    (tmp_path / "a2c_seed-0").mkdir()
    (tmp_path / "a2c_seed-0" / "eval_history.json").write_text('{"history": [')  # cut off mid-write
    assert main(["plot", "--runs-dir", str(tmp_path), "--out", str(tmp_path / "comparison.png")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path / 'a2c_seed-0' / 'eval_history.json'} is unreadable")


def test_campaign_help_gives_the_exit_statuses(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["campaign", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert ("Exit status: 0 when every run asked for is over (finished, or stopped early above its stop return); "
            "1 when a run failed or is not over (each named on stderr); 2 for bad input; 128 + N when stopped by "
            "signal N (130 after Ctrl-C, 143 after SIGTERM)") in help_text


def test_train_help_names_each_option_s_own_default(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    options = " ".join(capsys.readouterr().out.split()).split("options:")[1]

    def help_of(flag: str) -> str:
        return options.split(f" {flag} ")[1].split(" --")[0]

    for flag, default in (("--seed", "0"), ("--n-steps", "5"), ("--gamma", "0.99"), ("--total-timesteps", "10000000"),
                          ("--runs-dir", "runs")):
        assert help_of(flag).endswith(f"(default: {default})"), flag
    assert "a2c 0.0007" in help_of("--lr") and "classic control 0.007" in help_of("--lr")  # an algo's, then env's
    # a field that only some kinds of env set names every kind, "none" where one has no value
    assert help_of("--stop-return").endswith("(default: Atari none, classic control the env's reward threshold)")
