"""Defaults that depend on the algorithm and the kind of env, from one table that the help and the docs follow;
explicit values always win; values are checked."""

import itertools
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from allaction.experiment import ARMS, variant_options
from rlhelpers.cli import build_parser
from rlhelpers.core.config import ENV_DEFAULTS, AgentConfig
from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.losses import ALGORITHMS
from rlhelpers.core.trainer import Trainer
from rlhelpers.runner.config import (
    TrainConfig,
    config_differences,
    format_run_name,
    parse_run_name,
    validate,
    whole_number,
)


def test_atari_defaults_follow_the_experiment() -> None:
    config = TrainConfig(algo="task2")
    assert (config.n_envs, config.eval_interval, config.stop_return) == (16, 300_000, None)  # no early stop
    assert (config.lr, config.pg_coef, config.vf_coef, config.ent_coef) == (1.5e-3, 0.1, 0.5, 0.001)
    assert config.run_name == "task2_seed-0" and config.batch_size == 80


def test_classic_control_defaults_and_overrides() -> None:
    config = TrainConfig(algo="a2c", env_id="CartPole-v1")
    assert (config.n_envs, config.lr, config.ent_coef, config.stop_return) == (8, 7e-3, 0.0, 475.0)
    assert config.pg_coef == 1.0 and config.vf_coef == 0.25
    explicit = TrainConfig(algo="a2c", env_id="CartPole-v1", n_envs=3, lr=1e-4, stop_return=100.0)
    assert (explicit.n_envs, explicit.lr, explicit.stop_return) == (3, 1e-4, 100.0)


def test_config_round_trip_and_differences() -> None:
    config = TrainConfig(algo="task1", seed=100, total_timesteps=1_000)
    saved = TrainConfig.from_dict(config.to_dict())
    assert saved == config
    assert config_differences(saved, TrainConfig(algo="task1", seed=100, total_timesteps=5_000)) == []
    assert config_differences(saved, TrainConfig(algo="task1", seed=100, ent_coef=0.01)) == [
        "ent_coef: saved 0.001 != requested 0.01"]
    assert config_differences(saved, config, precision="bf16") == [
        "precision: saved 'bf16', while this version trains in fp32 only"]


def test_run_names_round_trip() -> None:
    assert format_run_name("task1", 100) == "task1_seed-100" == TrainConfig(algo="task1", seed=100).run_name
    assert parse_run_name("task1_seed-100") == ("task1", 100)
    assert parse_run_name("my_algo_seed-7") == ("my_algo", 7)
    for name in ("task1", "task1_seed-", "task1_seed-x", "_seed-0", "task1_seed-007", "task1_seed---1"):
        with pytest.raises(ValueError, match="not a run name"):
            parse_run_name(name)


def study_config(algo: str, variant: str, **options: Any) -> TrainConfig:
    """The validated config of a run of the study's ``variant`` of ``algo``, as ``allaction``'s ``train`` makes it."""
    return validate(TrainConfig(**variant_options(algo, variant, {"algo": algo, **options})))


def test_a_variant_sets_its_values_and_names_the_run() -> None:
    config = study_config("task1", "pg1", seed=100)
    assert config.run_name == "task1-pg1_seed-100" and parse_run_name(config.run_name) == ("task1-pg1", 100)
    assert (config.lr, config.pg_coef, config.vf_coef, config.ent_coef) == (1.5e-3, 1.0, 0.5, 0.001)
    plain = TrainConfig(algo="task1", seed=100)
    assert config_differences(config, plain) == [
        "variant: saved 'pg1' != requested ''", "pg_coef: saved 1.0 != requested 0.1"]
    before_variants = {k: v for k, v in plain.to_dict().items() if k != "variant"}  # runs saved before they existed
    assert config_differences(TrainConfig.from_dict(before_variants), plain) == []  # as a record reads it
    refused: list[tuple[dict[str, Any], str]] = [
        ({"variant": "pg2"}, "unknown variant 'pg2': choose one of pg1"),
        ({"variant": "pg1", "pg_coef": 0.5}, "variant pg1 means pg_coef 1, got 0.5"),
        ({"variant": "pg1", "algo": "a2c"}, "variant pg1 changes nothing for a2c")]
    for values, message in refused:
        with pytest.raises(RLHelpersError, match=message):
            study_config(values.pop("algo", "task1"), values.pop("variant"), **values)


def test_pg1ent_is_task1_at_a2cs_actor_weight_and_task1s_temperature() -> None:
    config = study_config("task1", "pg1ent", seed=0)
    assert config.run_name == "task1-pg1ent_seed-0" and parse_run_name(config.run_name) == ("task1-pg1ent", 0)
    assert (config.lr, config.pg_coef, config.vf_coef, config.ent_coef) == (1.5e-3, 1.0, 0.5, 0.01)

    def temperature(c: TrainConfig) -> float:
        assert c.ent_coef is not None and c.pg_coef is not None  # filled in from the algo's values
        return c.ent_coef / c.pg_coef

    assert temperature(config) == pytest.approx(temperature(TrainConfig(algo="task1")))
    assert "task1-pg1ent" in ARMS and "a2c-pg1ent" not in ARMS  # A2C already has both values


def test_lrvf_is_a2c_at_task1s_learning_rate_and_critic_weight_and_nothing_else() -> None:
    config = study_config("a2c", "lrvf", seed=300)
    assert config.run_name == "a2c-lrvf_seed-300" and parse_run_name(config.run_name) == ("a2c-lrvf", 300)
    task1, a2c = TrainConfig(algo="task1"), TrainConfig(algo="a2c")
    assert (config.lr, config.vf_coef) == (task1.lr, task1.vf_coef) == (1.5e-3, 0.5)
    assert (config.pg_coef, config.ent_coef) == (a2c.pg_coef, a2c.ent_coef) == (1.0, 0.01)
    assert "a2c-lrvf" in ARMS and "task1-lrvf" not in ARMS
    with pytest.raises(RLHelpersError, match="changes nothing for task1"):
        study_config("task1", "lrvf")


def test_the_helper_takes_a_variant_as_a_name_of_the_hyperparameters_its_caller_sets() -> None:
    """``rlhelpers`` knows no variant's values: the run's own options set them, and the variant names the run. A
    variant that changes none of the algorithm's hyperparameters, or whose name would not parse, is refused."""
    config = validate(TrainConfig(algo="a2c", variant="bigstep", lr=3e-3, seed=7))
    assert config.run_name == "a2c-bigstep_seed-7" and parse_run_name(config.run_name) == ("a2c-bigstep", 7)
    assert (config.lr, config.vf_coef) == (3e-3, TrainConfig(algo="a2c").vf_coef)
    for env_id in ("PongNoFrameskip-v4", "CartPole-v1"):  # the run's own defaults, those of its kind of env
        with pytest.raises(RLHelpersError, match="variant bigstep changes none of a2c's hyperparameters"):
            validate(TrainConfig(algo="a2c", variant="bigstep", env_id=env_id))
    assert validate(TrainConfig(algo="a2c", variant="bigstep", env_id="CartPole-v1", lr=7e-4)).lr == 7e-4
    for name in ("big_step", "big-step", "seed-1"):
        with pytest.raises(RLHelpersError, match="variant must be letters and digits"):
            validate(TrainConfig(algo="a2c", variant=name, lr=3e-3))


def test_whole_floats_are_integers_everywhere() -> None:
    """One rule for the command line (``1e7``), papermill (``-p total_timesteps 5e3`` gives 5000.0) and Python."""
    config = TrainConfig(total_timesteps=5e3, n_envs=4.0, seed=100.0)  # type: ignore[arg-type]  # floats on purpose
    assert (config.total_timesteps, config.n_envs, config.seed) == (5000, 4, 100)
    assert all(type(value) is int for value in (config.total_timesteps, config.n_envs, config.seed))
    assert TrainConfig(lr=1.0).lr == 1.0 and type(TrainConfig(lr=1.0).lr) is float  # float fields stay floats
    assert [whole_number(text) for text in ("10000000", "1e7", "1_000_000", "-3")] == [10_000_000, 10_000_000,
                                                                                        1_000_000, -3]
    for value, message in (("1.5", "not a whole number: '1.5'"), ("ten", "invalid integer: 'ten'"),
                           (2.5, "not a whole number: 2.5"), (True, "not a whole number: True")):
        with pytest.raises(ValueError, match=re.escape(message)):
            whole_number(value)


@pytest.mark.parametrize(("values", "message"), [
    ({"stop_return": "18"}, "stop_return must be a number, got '18' (papermill's -r passes text: use -p)"),
    ({"lr": "7e-4"}, "lr must be a number, got '7e-4' (papermill's -r passes text: use -p)"),
    ({"seed": "0"}, "seed must be an integer, got '0' (papermill's -r passes text: use -p)"),
    ({"n_envs": "4"}, "n_envs must be an integer, got '4' (papermill's -r passes text: use -p)"),
    ({"gamma": True}, "gamma must be a number, got True"),
    ({"n_envs": 4.5}, "n_envs must be an integer, got 4.5"),
    ({"keep_checkpoints": True}, "keep_checkpoints must be an integer, got True"),
    ({"device": 0}, "device must be text, got 0"),
    ({"runs_dir": 1}, "runs_dir must be text, got 1"),
])
def test_values_of_the_wrong_type_are_named(values: dict, message: str) -> None:
    with pytest.raises(RLHelpersError) as caught:
        validate(TrainConfig(env_id="CartPole-v1", **values))
    assert str(caught.value) == message


def test_numbers_given_as_ints_optional_text_left_out_and_a_path_are_accepted(tmp_path: Path) -> None:
    config = TrainConfig(env_id="CartPole-v1", stop_return=500, lr=1, wandb_entity=None, wandb_mode=None,
                         runs_dir=tmp_path)  # type: ignore[arg-type]  # a Path on purpose: it is accepted
    assert validate(config) is config and config.runs_dir == str(tmp_path)


def test_an_agent_config_alone_is_complete_and_trains() -> None:
    """``AgentConfig`` takes the run's defaults itself: the trainer can run one built directly, with the values that
    ``TrainConfig`` gets."""
    for algo, env_id in (("task1", "CartPole-v1"), ("a2c", "PongNoFrameskip-v4")):
        agent, run = AgentConfig(algo=algo, env_id=env_id), TrainConfig(algo=algo, env_id=env_id)
        assert agent.to_dict() == {name: value for name, value in run.to_dict().items() if name in agent.to_dict()}
        assert None not in agent.to_dict().values()
    config = AgentConfig(algo="task1", env_id="CartPole-v1", n_eval_episodes=2, n_eval_envs=2, device="cpu")
    assert (config.n_envs, config.lr, config.pg_coef, config.ent_coef) == (8, 7e-3, 0.1, 0.0)
    trainer = Trainer(config)
    try:
        stats = trainer.train_iteration()
        assert trainer.num_timesteps == config.batch_size == 40 and stats["loss"] == stats["loss"]  # not NaN
        assert len(trainer.evaluate(0).returns) == 2
    finally:
        trainer.close()


def test_one_table_of_defaults_sets_the_runs_and_the_help(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture) -> None:
    """A changed default of a kind of env changes the runs and what ``--help`` says, together."""
    monkeypatch.setitem(ENV_DEFAULTS, "Atari", {**ENV_DEFAULTS["Atari"], "n_envs": 32})
    assert TrainConfig().n_envs == AgentConfig().n_envs == 32
    assert TrainConfig(env_id="CartPole-v1").n_envs == 8
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "parallel training environments (default: Atari 32, classic control 8)" in help_text
    assert "stop once the mean evaluation return exceeds this (default: Atari none, classic control the env's " \
           "reward threshold)" in help_text


def _markdown_table(text: str, heading: str) -> list[list[str]]:
    """The rows of the first table after ``heading``, without its header, as lists of cell texts."""
    lines = text[text.index(heading):].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = [line.strip("|").split(" | ") for line in itertools.takewhile(lambda line: line.startswith("|"),
                                                                          lines[start + 2:])]
    return [[cell.strip() for cell in row] for row in rows]


def test_the_experiments_tables_are_the_codes_defaults() -> None:
    """docs/experiment.md's algorithm table and its table of defaults say what runs get, per algorithm and kind of
    env."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "experiment.md").read_text()
    algorithms = {row[0]: row[-1] for row in _markdown_table(text, "## The three algorithms")}
    assert set(algorithms) == set(ALGORITHMS)
    for algo, values in algorithms.items():
        assert dict(zip(("lr", "pg_coef", "vf_coef", "ent_coef"), map(float, values.split(", ")), strict=True)) \
            == ALGORITHMS[algo].defaults
    defaults = {row[0].strip("`"): row[1:] for row in _markdown_table(text, "## Defaults")}
    assert set(defaults) >= {name for values in ENV_DEFAULTS.values() for name in values}
    for column, env_id in enumerate(("PongNoFrameskip-v4", "CartPole-v1")):
        for name, cells in defaults.items():
            for algo in ALGORITHMS:
                value, cell = getattr(TrainConfig(algo=algo, env_id=env_id), name), cells[column]
                if cell == "the algorithm's":
                    assert value == ALGORITHMS[algo].defaults[name], (name, env_id)
                elif cell.startswith("the env's reward threshold"):
                    assert value == gym.spec(env_id).reward_threshold, (name, env_id)
                elif cell.startswith(("none", "off")):
                    assert value in (None, False), (name, env_id)
                else:
                    assert value == float(cell.replace(",", "")), (name, env_id)
