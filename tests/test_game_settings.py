"""The Atari game settings of a run (``life_loss``, ``fire_reset``): a lost life ends a training episode while the
game goes on, FIRE serves after every reset and lost life, games are counted whole, and the settings are part of a
run's identity. Breakout, as its published A2C runs train it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlhelpers.cli import build_parser
from rlhelpers.core.envs import make_vec_env
from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.evaluation import evaluate_policy
from rlhelpers.core.networks import ActorCritic, build_model
from rlhelpers.core.trainer import Trainer
from rlhelpers.runner.config import TrainConfig, config_differences, validate
from rlhelpers.runner.run import resolve_config

BREAKOUT = "BreakoutNoFrameskip-v4"
FRAME_CAP_STEPS = 27_000  # 108,000 frames at frame skip 4


def never_fire_model() -> ActorCritic:
    """A Breakout policy that plays NOOP (action 0) with probability 1 - 1e-13: it never serves by itself."""
    model = build_model((4, 84, 84), 4, "a2c")
    head = model.policy_head
    assert isinstance(head, torch.nn.Linear)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.copy_(torch.tensor([30.0, 0.0, 0.0, 0.0]))
    return model


@pytest.mark.parametrize("life_loss", [False, True])
def test_a_policy_that_never_presses_fire_ends_its_evaluation_games_long_before_the_frame_cap(life_loss: bool) -> None:
    env = make_vec_env(BREAKOUT, 2, fire_reset=True, life_loss=life_loss)
    try:
        returns, lengths = evaluate_policy(never_fire_model(), env, 4, seed=0, device=torch.device("cpu"))
    finally:
        env.close()
    # Each FIRE serves, the paddle stands still and the ball is lost: a life lasts a few dozen steps.
    per_game = 5 if not life_loss else 1
    assert len(lengths) == 4 and max(lengths) < 50 * per_game < FRAME_CAP_STEPS // 100


def test_without_fire_reset_such_a_policy_stands_still_after_a_lost_life() -> None:
    """The control: the same policy without FIRE loses its first life and then nothing ends for 2,000 steps."""
    env = make_vec_env(BREAKOUT, 1, life_loss=True)
    try:
        env.reset(seed=0)
        ends = [env.step(np.ones(1, dtype=np.int64) if t == 0 else np.zeros(1, dtype=np.int64))[2][0]
                for t in range(2_000)]
    finally:
        env.close()
    assert sum(ends) == 1  # served once by hand, the life lost, and then the ball is never served again


def test_life_loss_ends_training_episodes_while_whole_games_are_counted_and_the_agents_actions_stored() -> None:
    config = validate(TrainConfig(env_id=BREAKOUT, life_loss=True, fire_reset=True, n_envs=2, device="cpu",
                                  torch_threads=1))
    trainer = Trainer(config, model=never_fire_model())
    terminations = 0
    try:
        for _ in range(60):  # 300 steps per env: a game of five lives lasts about 125 of them
            trainer.collect_rollout()
            terminations += int(trainer.buffer.terminated.sum())
            assert not trainer.buffer.actions.any()  # the agent's NOOPs, not the FIREs played in their place
    finally:
        trainer.close()
    games = len(trainer.episode_lengths)
    assert games >= 2 and terminations >= 4 * games + 2  # a termination per lost life, one game per five
    assert min(trainer.episode_lengths) > 4 * 20  # whole games, not single lives


def test_game_settings_are_part_of_a_runs_identity_and_older_runs_have_them_off() -> None:
    saved = TrainConfig(env_id=BREAKOUT)
    requested = TrainConfig(env_id=BREAKOUT, life_loss=True, fire_reset=True)
    assert config_differences(saved, requested) == ["life_loss: saved False != requested True",
                                                    "fire_reset: saved False != requested True"]
    older = {name: value for name, value in saved.to_dict().items() if name not in ("life_loss", "fire_reset")}
    assert config_differences(TrainConfig.from_dict(older), TrainConfig(env_id=BREAKOUT)) == []  # as a record reads it


def test_game_settings_on_the_command_line_and_their_checks() -> None:
    parse = build_parser().parse_args
    args = parse(["train", "--env-id", BREAKOUT, "--life-loss", "--fire-reset"])
    assert (args.life_loss, args.fire_reset) == (True, True)
    assert parse(["campaign", "--no-fire-reset"]).fire_reset is False
    with pytest.raises(RLHelpersError, match="not an Atari game"):
        validate(TrainConfig(env_id="CartPole-v1", life_loss=True))
    with pytest.raises(RLHelpersError, match="no FIRE action"):
        validate(TrainConfig(env_id="FreewayNoFrameskip-v4", fire_reset=True))
    with pytest.raises(RLHelpersError, match="life_loss must be True or False"):
        validate(TrainConfig(env_id=BREAKOUT, life_loss="yes"))  # type: ignore[arg-type]  # wrong on purpose: refused


def test_an_atari_run_has_no_early_stop_unless_asked() -> None:
    assert resolve_config(TrainConfig(env_id=BREAKOUT))[0].stop_return is None
    assert TrainConfig(stop_return=18.0).stop_return == 18.0
