"""Plumbing on real Atari games (PongNoFrameskip-v4, and Space Invaders for rewards above 1 and lives): shapes,
dtypes, score ranges, the preprocessing, clipped training rewards and unclipped scores (not learning)."""

import json
import os

import gymnasium as gym
import numpy as np
import pytest
import torch
from ale_py.vector_env import AtariVectorEnv

from rlhelpers.core.envs import ATARI_ENTRY_POINT, make_vec_env
from rlhelpers.core.evaluation import evaluate_policy
from rlhelpers.core.networks import build_model
from rlhelpers.core.trainer import Trainer
from rlhelpers.runner.config import TrainConfig
from rlhelpers.runner.run import resolve_config, train


def test_pong_env_and_buffer_shapes() -> None:
    trainer = Trainer(*resolve_config(TrainConfig(algo="task1", n_envs=2, device="cpu")))
    try:
        assert trainer.envs[0].single_observation_space.shape == (4, 84, 84)
        assert trainer.n_actions == 6
        trainer.train_iteration()
        obs = trainer.buffer.observations
        assert obs.dtype == torch.uint8 and obs.shape == (5, 2, 4, 84, 84)
        assert obs.max() > 0  # real frames, not zeros
    finally:
        trainer.close()


@pytest.mark.parametrize("algo", ["a2c", "task1", "task2"])
def test_pong_smoke_run(algo: str, tmp_path) -> None:
    config = TrainConfig(algo=algo, total_timesteps=2_000, n_envs=4, eval_interval=2_000, n_eval_episodes=1,
                         n_eval_envs=1, runs_dir=str(tmp_path), wandb_mode="offline", device="cpu")
    result = train(config, show_progress=False)
    assert result.num_timesteps == 2_000
    saved = json.loads((tmp_path / f"{algo}_seed-0" / "eval_history.json").read_text())
    assert [p["step"] for p in saved["history"]] == [0, 2_000]
    for point in saved["history"]:
        assert len(point["returns"]) == 1
        score = point["returns"][0]
        assert -21 <= score <= 21 and score == int(score)  # a whole Pong score (Space Invaders checks clipping)
        assert score < 0  # an untrained policy loses a game of Pong
        assert point["lengths"][0] > 0


def test_atari_rewards_are_clipped_to_their_sign_for_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pong's rewards are already ±1; Space Invaders scores 5 to 30 per alien, so clipping shows."""
    trainer = Trainer(*resolve_config(TrainConfig(algo="a2c", env_id="SpaceInvadersNoFrameskip-v4", n_envs=2,
                                                  device="cpu", wandb_mode="disabled")))
    env = trainer.envs[0]
    assert isinstance(env, AtariVectorEnv)  # ALE's own: training steps it through send and recv
    raw_rewards: list[np.ndarray] = []
    env_recv = env.recv

    def recording_recv() -> tuple:
        result = env_recv()
        raw_rewards.append(np.array(result[1], dtype=np.float32))
        return result

    monkeypatch.setattr(env, "recv", recording_recv)
    try:
        for _ in range(200):
            raw_rewards.clear()
            trainer.collect_rollout()
            if max(r.max() for r in raw_rewards) > 1:
                break
        rollout = np.stack(raw_rewards)
        assert rollout.max() > 1, "no alien hit in 200 rollouts"
        torch.testing.assert_close(trainer.buffer.rewards.cpu(), torch.as_tensor(np.sign(rollout)))
    finally:
        trainer.close()


def test_ale_final_observations_are_the_cut_episodes_last_frames() -> None:
    """ALE's dense final_obs, stacked as the trainer stacks it: each env's own true last stack (its previous
    stack shifted by one frame; the two envs' frames differ, so a mix-up shows), not the next episode's first."""
    gym.register("rlhelpers-test/PongShort-v4", entry_point=ATARI_ENTRY_POINT,
                 kwargs={"game": "pong", "max_num_frames_per_episode": 200})
    env = make_vec_env("rlhelpers-test/PongShort-v4", 2)
    try:
        obs, _ = env.reset(seed=0)
        for _ in range(200):
            previous = obs
            obs, _, terminated, truncated, info = env.step(np.array([0, 2]))  # NOOP and UP: the envs differ
            ended = np.flatnonzero(terminated | truncated)
            if len(ended):
                break
    finally:
        env.close()
    assert truncated.any() and not np.array_equal(previous[0], previous[1])
    final = np.stack(info["final_obs"][ended])
    np.testing.assert_array_equal(final[:, :3], previous[ended, 1:])
    assert not np.array_equal(obs[ended, :3], previous[ended, 1:])  # what step returned is the next episode's


def test_atari_envs_follow_the_standard_preprocessing() -> None:
    """Random no-op starts of at most 30, frame skip 4, and a lost life that does not end the episode."""
    env = make_vec_env("SpaceInvadersNoFrameskip-v4", 8)
    try:
        obs, info = env.reset(seed=0)
        assert obs.shape == (8, 4, 84, 84) and obs.dtype == np.uint8
        start_frames = info["episode_frame_number"]
        assert (start_frames <= 30 * 4).all() and len(set(start_frames.tolist())) > 1
        frames, lost_life_mid_episode = info["frame_number"], False
        for _ in range(2_000):
            lives = info["lives"]
            obs, _, terminated, truncated, info = env.step(env.action_space.sample())
            ended = terminated | truncated
            assert (info["frame_number"][~ended] - frames[~ended] == 4).all()
            lost_life_mid_episode |= bool((info["lives"] < lives)[~ended].any())
            frames = info["frame_number"]
            if lost_life_mid_episode:
                break
    finally:
        env.close()
    assert lost_life_mid_episode


def test_evaluation_reports_true_game_scores(monkeypatch: pytest.MonkeyPatch) -> None:
    """Space Invaders pays 5 to 30 points per alien: the evaluated return is the sum of the raw rewards."""
    torch.manual_seed(0)
    env = make_vec_env("SpaceInvadersNoFrameskip-v4", 1)
    rewards: list[float] = []
    env_step = env.step

    def recording_step(actions: np.ndarray) -> tuple:
        result = env_step(actions)
        rewards.append(float(result[1][0]))
        return result

    monkeypatch.setattr(env, "step", recording_step)
    try:
        returns, _ = evaluate_policy(build_model((4, 84, 84), 6, "a2c"), env, n_episodes=1, seed=0,
                                     device=torch.device("cpu"))
    finally:
        env.close()
    assert max(rewards) > 1 and returns == [sum(rewards)]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's")
def test_ale_starts_one_thread_per_cpu_the_process_may_use() -> None:
    """With the default env threads, an ALE env restricted to one CPU (as a cluster job to its CPUs) starts one
    worker thread, not one per CPU of the machine."""
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(allowed)})
    try:
        threads_before = len(os.listdir("/proc/self/task"))
        env = make_vec_env("PongNoFrameskip-v4", 4)
        try:
            assert len(os.listdir("/proc/self/task")) - threads_before == 1
        finally:
            env.close()
    finally:
        os.sched_setaffinity(0, allowed)
