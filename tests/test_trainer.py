"""The algorithm through ``Trainer``: timeouts are bootstrapped and terminations are not; a checkpoint
restores the training state exactly, so the resumed learner's next update is the original's."""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.losses import ALGORITHMS, state_value
from rlhelpers.core.networks import sample_actions
from rlhelpers.core.trainer import Trainer, env_group_count, training_cuda_rng_state
from rlhelpers.runner.config import TrainConfig
from rlhelpers.runner.run import resolve_config
from rlhelpers.runner.store import RunDirectory, load_model

GAMMA = 0.9
EPISODE_STEPS = 8


class ConstantRewardEnv(gym.Env):
    """One observation and reward 1 at every step, whatever the action (Stable-Baselines3's
    InfiniteHorizonEnv in its simplest form): a task without end whose value is 1 / (1 - gamma).
    With ``terminate_after`` its episodes end for real after that many steps instead."""

    observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, terminate_after: int | None = None) -> None:
        self.terminate_after = terminate_after
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return np.ones(1, np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        terminated = self.terminate_after is not None and self.t >= self.terminate_after
        return np.ones(1, np.float32), 1.0, terminated, False, {}


TIMEOUT_ENV = "rlhelpers-test/TimeoutOnly-v0"  # every episode is cut by a time limit
TERMINATING_ENV = "rlhelpers-test/Terminating-v0"  # every episode terminates
# gymnasium's EnvCreator protocol admits only factories of **kwargs, not an env class with fixed parameters, which
# gym.make calls with the registered kwargs alone: a valid entry point that its types refuse.
gym.register(TIMEOUT_ENV, entry_point=ConstantRewardEnv,  # type: ignore[arg-type]  # EnvCreator wants **kwargs
             max_episode_steps=EPISODE_STEPS)
gym.register(TERMINATING_ENV, entry_point=ConstantRewardEnv,  # type: ignore[arg-type]  # EnvCreator wants **kwargs
             kwargs={"terminate_after": EPISODE_STEPS})


class CounterEnv(gym.Env):
    """Observation [t]; a seeded reset starts at t = seed % 3, so envs seeded 0, 1, 2 time out at different
    steps, each when t reaches 6."""

    observation_space = gym.spaces.Box(0.0, 100.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0 if seed is None else seed % 3
        return np.array([self.t], np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return np.array([self.t], np.float32), 0.0, False, self.t >= 6, {}


COUNTER_ENV = "rlhelpers-test/Counter-v0"
gym.register(COUNTER_ENV, entry_point=CounterEnv)  # type: ignore[arg-type]  # EnvCreator wants **kwargs


def legacy_numpy_state() -> tuple[str, np.ndarray, int, int, float]:
    """numpy's global generator state as the tuple of its legacy form (numpy's stubs type the call without
    ``legacy`` as returning the dict form, which it does not)."""
    state = np.random.get_state(legacy=True)
    assert isinstance(state, tuple)
    return state


def make_trainer(env_id: str, **overrides: Any) -> Trainer:
    values = dict(algo="a2c", env_id=env_id, n_envs=4, n_steps=5, device="cpu", wandb_mode="disabled")
    return Trainer(*resolve_config(TrainConfig(**{**values, **overrides})))


def critic_value_after_training(env_id: str, updates: int) -> float:
    """V(s) of the one observation after ``updates`` critic-only updates (no actor or entropy term)."""
    trainer = make_trainer(env_id, gamma=GAMMA, lr=2e-2, pg_coef=0.0, vf_coef=1.0, ent_coef=0.0)
    try:
        for _ in range(updates):
            trainer.train_iteration()
        with torch.no_grad():
            return float(state_value(*trainer.model(trainer.obs[:1])))
    finally:
        trainer.close()


def test_timeouts_bootstrap_the_critic_towards_the_infinite_horizon_value() -> None:
    infinite_horizon = 1 / (1 - GAMMA)
    # Every episode times out after 8 steps, yet nothing in the task ends: V must reach r / (1 - gamma).
    assert critic_value_after_training(TIMEOUT_ENV, 200) == pytest.approx(infinite_horizon, rel=0.02)
    # The same rewards with real ends after 8 steps: at most 8 rewards follow, so V stays well below it.
    assert critic_value_after_training(TERMINATING_ENV, 200) < 0.5 * infinite_horizon


@pytest.mark.parametrize(("algo", "env_id"), [("a2c", "PongNoFrameskip-v4"), ("task1", "PongNoFrameskip-v4"),
                                              ("task2", "PongNoFrameskip-v4"), ("task1", "CartPole-v1")])
@pytest.mark.parametrize("reforward", [False, True])
def test_the_update_through_the_acting_passes_has_the_gradient_of_a_new_pass_over_the_rollout(
        algo: str, env_id: str, reforward: bool) -> None:
    """``update`` back-propagates through the forward passes that chose the actions (their trunks; the layers
    above run once on the whole rollout), or with ``reforward`` (a GPU's default, here on the CPU) keeps no graph
    and runs the network again. For the same weights and the same rollout, either gradient is the one of the loss
    recomputed from the stored observations in one batch, to float tolerance."""
    trainer = make_trainer(env_id, algo=algo, n_envs=4, max_grad_norm=1e9)  # no clipping: the raw gradient
    assert not trainer.reforward  # on the CPU
    trainer.reforward = reforward
    try:
        for _ in range(3):  # away from the initial weights, where the policy gradient is tiny
            trainer.train_iteration()
        trainer.collect_rollout()
        assert len(trainer.trunks.kept) == (0 if reforward else trainer.config.n_steps)
        weights = copy.deepcopy(trainer.model)
        cfg, buf = trainer.config, trainer.buffer
        returns = buf.returns(trainer._values(trainer.obs), cfg.gamma).flatten()
        loss, _ = ALGORITHMS[algo].loss(*weights(buf.observations.flatten(0, 1)), buf.actions.flatten(), returns,
                                        pg_coef=cfg.pg_coef, vf_coef=cfg.vf_coef, ent_coef=cfg.ent_coef)
        loss.backward()
        trainer.update()
        for (name, new), old in zip(trainer.model.named_parameters(), weights.parameters(), strict=True):
            assert old.grad is not None and old.grad.abs().max() > 0, name

            def message(m: str, name: str = name) -> str:
                return f"{name}: {m}"

            torch.testing.assert_close(new.grad, old.grad, rtol=1e-4, atol=1e-5 * float(old.grad.abs().max()),
                                       msg=message)
    finally:
        trainer.close()


@pytest.mark.parametrize(("env_id", "iterations"), [("PongNoFrameskip-v4", 3), ("CartPole-v1", 40)])
def test_envs_stepped_in_groups_play_the_rollouts_and_episodes_of_all_envs_at_once(env_id: str,
                                                                                  iterations: int) -> None:
    """With env_groups > 1 the network chooses one group's actions while the others step. The rollouts
    (observations, actions, rewards, ends), the episodes counted and the learned weights are those of all
    envs stepping at once: same env seeds, same draws from the random stream in the same order."""
    played = {}
    for groups in (1, 2, 3):
        trainer = make_trainer(env_id, n_envs=5, env_groups=groups)
        try:
            rollouts = []
            for _ in range(iterations):
                trainer.train_iteration()
                buf = trainer.buffer
                rollouts.append([x.clone() for x in (buf.observations, buf.actions, buf.rewards, buf.terminated,
                                                     buf.truncated)])
            played[groups] = (rollouts, list(trainer.episode_returns), list(trainer.episode_lengths),
                              [p.detach().clone() for p in trainer.model.parameters()])
        finally:
            trainer.close()
    rollouts, returns, lengths, weights = played[1]
    if env_id == "CartPole-v1":
        assert len(lengths) >= 10 and returns == lengths  # CartPole pays 1 per step
    for groups in (2, 3):
        assert_identical(played[groups][0], rollouts, f"rollouts with {groups} groups")
        assert (played[groups][1], played[groups][2]) == (returns, lengths)
        for new, old in zip(played[groups][3], weights, strict=True):
            torch.testing.assert_close(new, old, rtol=1e-4, atol=1e-6)


def test_by_default_ale_envs_step_in_two_groups_with_a_gpu_and_in_one_on_a_cpu() -> None:
    """With a GPU the CPU is free while the network computes, so by default the ALE envs step in two groups;
    on a CPU, and for envs that step in the calling thread, in one; an explicit count is kept."""
    pong = TrainConfig(algo="a2c", env_id="PongNoFrameskip-v4")
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert (env_group_count(pong, cuda), env_group_count(pong, cpu)) == (2, 1)
    assert env_group_count(TrainConfig(algo="a2c", env_id="CartPole-v1"), cuda) == 1
    assert env_group_count(TrainConfig(algo="a2c", env_id="PongNoFrameskip-v4", n_envs=1), cuda) == 1
    assert env_group_count(TrainConfig(algo="a2c", env_id="PongNoFrameskip-v4", env_groups=3), cpu) == 3
    with pytest.raises(RLHelpersError, match="env_groups must be a non-negative integer"):
        resolve_config(TrainConfig(algo="a2c", env_id="CartPole-v1", env_groups=-1, wandb_mode="disabled"))


# ---------------------------------------------------------------- exact resume

def assert_identical(a: Any, b: Any, where: str = "state") -> None:
    """Equal to the bit: tensors by value and dtype, containers element by element."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            assert_identical(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_identical(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def training_state(trainer: Trainer) -> dict[str, Any]:
    """The trainer's state without the random generators, which are global: they are compared apart."""
    state = trainer.state_dict()
    del state["rng"]
    return state


def test_writing_a_snapshot_or_a_checkpoint_leaves_the_random_generators_as_they_were(tmp_path: Path) -> None:
    """Saving is I/O: it must not draw from the training's random stream (a snapshot's check once built a
    network, whose initialisation drew from torch's global generator and so changed the rest of the run)."""
    trainer = make_trainer("CartPole-v1", algo="task1", n_eval_episodes=2, n_eval_envs=2)
    try:
        trainer.train_iteration()
        run_dir = RunDirectory(tmp_path)
        run_dir.create()
        before = torch.get_rng_state(), random.getstate(), legacy_numpy_state()
        run_dir.save_snapshot(trainer.snapshot(), trainer.num_timesteps)
        run_dir.save_checkpoint(trainer.state_dict(), trainer.num_timesteps, keep=1)
        ((_, snapshot),) = run_dir.snapshots()
        load_model(snapshot)
        run_dir.load_latest_checkpoint()
        after = torch.get_rng_state(), random.getstate(), legacy_numpy_state()
        assert torch.equal(after[0], before[0]), "torch's generator moved"
        assert after[1] == before[1], "Python's generator moved"
        assert np.array_equal(after[2][1], before[2][1]) and after[2][2:] == before[2][2:], "numpy's generator moved"
    finally:
        trainer.close()


def test_resume_restores_the_state_exactly_and_the_next_update_is_the_same(tmp_path: Path) -> None:
    original = make_trainer("CartPole-v1", algo="task2", n_eval_episodes=2, n_eval_envs=2)
    resumed = None
    try:
        for _ in range(30):
            original.train_iteration()
        run_dir = RunDirectory(tmp_path)
        run_dir.save_checkpoint(original.state_dict(), original.num_timesteps, keep=1)
        rng_at_save = torch.get_rng_state(), random.getstate()

        resumed = make_trainer("CartPole-v1", algo="task2", n_eval_episodes=2, n_eval_envs=2)  # reseeds the RNGs
        assert not torch.equal(torch.get_rng_state(), rng_at_save[0])
        checkpoint = run_dir.load_latest_checkpoint()
        assert checkpoint is not None
        resumed.load_state_dict(checkpoint)

        # Weights, optimizer state (RMSprop's square averages), counters, episode statistics.
        assert_identical(training_state(resumed), training_state(original))
        assert (resumed.num_timesteps, resumed.n_updates) == (30 * 20, 30)
        assert resumed.optimizer.state_dict()["state"] and resumed.episode_returns
        assert torch.equal(torch.get_rng_state(), rng_at_save[0]) and random.getstate() == rng_at_save[1]

        # A resume restarts the episodes in progress, from a reset seeded by the step count; from the same
        # episodes and the same random state the original and the resumed learner take the same next step.
        original.restart_episodes(original.config.seed + original.num_timesteps)
        assert torch.equal(original.obs, resumed.obs)
        resumed_stats = resumed.train_iteration()
        torch.set_rng_state(rng_at_save[0])
        random.setstate(rng_at_save[1])
        original_stats = original.train_iteration()
        assert resumed_stats == original_stats
        assert_identical(training_state(resumed), training_state(original))
    finally:
        original.close()
        if resumed is not None:
            resumed.close()


def test_the_learners_state_is_its_model_optimizer_random_streams_and_counters_not_the_runs_record() -> None:
    trainer = make_trainer("CartPole-v1")
    try:
        assert set(trainer.state_dict()) == {"format", "config", "model", "optimizer", "rng", "num_timesteps",
                                             "n_updates", "episode_returns", "episode_lengths", "env_game_returns"}
    finally:
        trainer.close()


def fake_cuda_states(n: int) -> list[torch.Tensor]:
    """``n`` distinct byte tensors shaped as CUDA generator states (seed and offset of Philox)."""
    return [torch.full((16,), i + 1, dtype=torch.uint8) for i in range(n)]


def test_only_the_training_devices_cuda_stream_is_restored_from_a_checkpoint_of_a_machine_with_several_gpus() -> None:
    """Earlier versions saved the states of every visible GPU and restored them all, which fails where fewer
    GPUs are visible; the run drew only from its own device's stream."""
    def restored(saved: list[torch.Tensor], device: str) -> torch.Tensor:
        state = training_cuda_rng_state(saved, device)
        assert state is not None
        return state

    two = fake_cuda_states(2)
    assert torch.equal(restored(two, "auto"), two[0])
    assert torch.equal(restored(two, "cuda"), two[0])
    assert torch.equal(restored(two, "cuda:1"), two[1])
    assert torch.equal(restored(two[1:], "cuda:1"), two[1])  # this version saves only that one
    assert training_cuda_rng_state([], "auto") is None  # trained without CUDA so far


@pytest.mark.parametrize("gpus_saved", [1, 2])
def test_a_session_without_a_gpu_keeps_the_runs_cuda_stream_for_a_later_one_with_a_gpu(gpus_saved: int) -> None:
    """GPU, then CPU (a Colab quota cut), then GPU: the CPU session must carry the CUDA stream forward, or the
    third session would restart it from the seed and replay the first session's draws."""
    trainer = make_trainer("CartPole-v1")
    resumed = make_trainer("CartPole-v1")
    try:
        state = trainer.state_dict()
        assert state["rng"]["cuda"] == []  # a CPU run that never saw a GPU saves none
        state["rng"]["cuda"] = fake_cuda_states(gpus_saved)
        resumed.load_state_dict(copy.deepcopy(state))
        resumed.train_iteration()
        (kept,) = resumed.state_dict()["rng"]["cuda"]
        assert torch.equal(kept, state["rng"]["cuda"][0])
    finally:
        trainer.close()
        resumed.close()


def test_a_checkpoint_of_another_format_is_refused() -> None:
    trainer = make_trainer("CartPole-v1")
    try:
        state = trainer.state_dict()
        state["format"] = 1
        with pytest.raises(RLHelpersError, match=r"checkpoint format 1 is not this version's \(2\)"):
            trainer.load_state_dict(state)
    finally:
        trainer.close()


def test_truncations_bootstrap_from_each_timed_out_envs_true_last_observation() -> None:
    """Bootstrapping from the next episode's first frame, or into another env's slot, fails here: the
    envs time out at different steps and the last observation (6) differs from the first (0..2)."""
    trainer = make_trainer(COUNTER_ENV, n_envs=3, n_steps=10)
    try:
        trainer.collect_rollout()
        buf = trainer.buffer
        timeouts = torch.zeros(10, 3, dtype=torch.bool)
        for t, env in ((5, 0), (4, 1), (3, 2), (9, 2)):  # env i starts at t = i and is cut at 6, then every 6 steps
            timeouts[t, env] = True
        assert torch.equal(buf.truncated, timeouts) and not buf.terminated.any()
        with torch.no_grad():
            v_last, v_first = trainer._values(torch.tensor([[6.0], [0.0]]))
        assert abs(float(v_last - v_first)) > 1e-3  # the two choices can be told apart
        torch.testing.assert_close(buf.truncation_values, torch.where(timeouts, v_last, torch.zeros(())))
    finally:
        trainer.close()


def test_update_clips_the_gradient_norm_before_the_optimizer_step_and_logs_it_unclipped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    max_norm = 1e-3
    trainer = make_trainer("CartPole-v1", algo="task1", max_grad_norm=max_norm)
    norms_at_step, optimizer_step = [], trainer.optimizer.step

    def recording_step(*args: Any, **kwargs: Any) -> None:
        grads = [p.grad.norm() for p in trainer.model.parameters() if p.grad is not None]
        norms_at_step.append(float(torch.linalg.vector_norm(torch.stack(grads))))
        return optimizer_step(*args, **kwargs)

    monkeypatch.setattr(trainer.optimizer, "step", recording_step)
    try:
        stats = trainer.train_iteration()
    finally:
        trainer.close()
    assert stats["grad_norm"] > 10 * max_norm  # logged before clipping
    assert len(norms_at_step) == 1 and norms_at_step[0] == pytest.approx(max_norm, rel=1e-4)


def test_sample_actions_draws_from_the_softmax_of_each_row() -> None:
    torch.manual_seed(0)
    logits, n = torch.tensor([[0.0, 1.0, 2.0], [2.0, 0.0, -1.0]]), 100_000
    actions = sample_actions(logits.repeat_interleave(n, 0)).view(2, n)
    for row, probs in zip(actions, torch.softmax(logits, -1).double(), strict=True):
        frequencies = torch.bincount(row, minlength=3).double() / n
        assert ((frequencies - probs).abs() < 5 * (probs * (1 - probs) / n).sqrt()).all()  # within 5 s.e.
