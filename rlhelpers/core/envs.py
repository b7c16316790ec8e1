"""Vector environment factory: ALE's C++ vector env for Atari ids, gymnasium's for classic control.

Both use SAME_STEP autoreset: the step that ends an episode returns the first observation of the
next one and puts the true last observation in ``info["final_obs"]``. Every stored transition is
therefore a real one (no dummy reset steps); the trainer cuts returns where an episode terminates
and bootstraps truncations from that last observation. Rewards are the true game scores (no clipping here).
Evaluation envs report per-episode returns and lengths in ``info["episode"]`` (``RecordEpisodeStatistics``);
the trainer counts its own, since it steps its envs in two calls (``send_actions``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, cast

import ale_py
import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

from rlhelpers.core.errors import RLHelpersError

gym.register_envs(ale_py)

ATARI_ENTRY_POINT = "ale_py.env:AtariEnv"
FIRE = 1  # the action that serves, in every ALE game that has it (check_supported checks)


def atari_game(env_id: str) -> str | None:
    """ALE ROM name of an Atari env id (``PongNoFrameskip-v4`` -> ``pong``), or None for other ids: the one test
    of whether an env is Atari."""
    spec = env_spec(env_id)
    return spec.kwargs["game"] if spec.entry_point == ATARI_ENTRY_POINT else None


def env_spec(env_id: str) -> gym.envs.registration.EnvSpec:
    """The registered spec of ``env_id``, or a clear error naming the id."""
    try:
        return gym.spec(env_id)
    except gym.error.Error as exc:
        raise RLHelpersError(
            f"unknown env id {env_id!r}: use an ALE Atari id such as PongNoFrameskip-v4, or CartPole-v1"
        ) from exc


def check_supported(env_id: str, life_loss: bool = False, fire_reset: bool = False) -> None:
    """Raise ``RLHelpersError`` unless ``env_id`` is an Atari id or an env with discrete actions and flat
    vector observations (the two inputs the networks take), and unless the game settings apply to it (Atari;
    FIRE is action 1); builds one copy of a non-Atari env, or of an Atari env with ``fire_reset``, to look."""
    if atari_game(env_id) is not None:
        if fire_reset:
            meanings = cast(ale_py.env.AtariEnv, gym.make(env_id).unwrapped).get_action_meanings()
            if meanings[FIRE] != "FIRE":
                raise RLHelpersError(f"fire_reset: {env_id} has no FIRE action (its actions: {', '.join(meanings)})")
        return
    if life_loss or fire_reset:
        raise RLHelpersError(f"life_loss and fire_reset are Atari game settings; {env_id} is not an Atari game")
    try:
        env = gym.make(env_id)
    except gym.error.Error as exc:
        raise RLHelpersError(f"cannot build {env_id}: {exc}") from exc
    actions, observations = env.action_space, env.observation_space
    env.close()
    if not isinstance(actions, gym.spaces.Discrete):
        raise RLHelpersError(f"{env_id} has a {actions} action space; only discrete actions are supported")
    if not isinstance(observations, gym.spaces.Box) or len(observations.shape) != 1:
        raise RLHelpersError(f"{env_id} has {observations} observations; only Atari frames and flat vectors "
                             "are supported")


def make_vec_env(env_id: str, n_envs: int, num_threads: int = 0, episode_statistics: bool = True,
                 life_loss: bool = False, fire_reset: bool = False) -> VectorEnv:
    """Build ``n_envs`` copies of ``env_id`` as one SAME_STEP-autoreset vector env, with gymnasium's episode
    statistics unless ``episode_statistics`` is False (its wrapper only steps in one call: see ``send_actions``).

    Atari ids get the preprocessing of docs/experiment.md inside ``AtariVectorEnv``: up to 30 no-op starts,
    frame skip 4 with max-pooling, 84x84 grey, 4-frame stack, no sticky actions, unclipped rewards. The game
    settings: ``life_loss`` ends an episode at each lost life while the game goes on (ALE's ``life_loss_info``;
    its ``episodic_life`` would restart the game instead); ``fire_reset`` presses FIRE after every reset and lost
    life (``Lives``). ``num_threads=0`` means min(n_envs, ``usable_cpus()``): ALE's own default counts
    every CPU of the machine, also those a cluster job may not use.
    Seed it through ``reset(seed=s)`` (sub-envs get s, s+1, ...).
    """
    game = atari_game(env_id)
    env: VectorEnv
    if game is not None:
        atari_env = ale_py.vector_env.AtariVectorEnv(
            game,
            n_envs,
            num_threads=num_threads or min(n_envs, usable_cpus()),
            max_num_frames_per_episode=env_spec(env_id).kwargs.get("max_num_frames_per_episode", 108_000),
            repeat_action_probability=0.0,
            noop_max=30,
            frameskip=4,
            maxpool=True,
            img_height=84,
            img_width=84,
            grayscale=True,
            stack_num=4,
            episodic_life=False,
            life_loss_info=life_loss,
            use_fire_reset=False,
            reward_clipping=False,
            autoreset_mode=AutoresetMode.SAME_STEP,
        )
        env = Lives(atari_env, fire_reset) if life_loss or fire_reset else atari_env
    else:
        env = gym.make_vec(
            env_id, n_envs, vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
        )
    return gym.wrappers.vector.RecordEpisodeStatistics(env) if episode_statistics else env


class Lives(gym.vector.VectorWrapper):
    """Follows each env's lives for the game settings: ``info["life_lost"]`` marks the steps that lost one (with
    ``life_loss`` they end an episode, not the game), and with ``fire`` FIRE replaces the agent's action on the first
    step of each game and after each lost life, as SB3's ``FireResetEnv`` presses it: games such as Breakout wait
    for FIRE to serve, and a policy that never pressed it would stand still until the frame cap. The agent's action
    there has no effect, so the press is part of the environment that the agent learns."""

    env: ale_py.vector_env.AtariVectorEnv

    def __init__(self, env: ale_py.vector_env.AtariVectorEnv, fire: bool) -> None:
        super().__init__(env)
        self.fire = fire

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict]:
        obs, info = self.env.reset(**kwargs)
        self.lives, self.due = info["lives"], np.full(self.num_envs, self.fire)
        return obs, info

    def send(self, actions: np.ndarray) -> None:
        self.env.send(np.where(self.due, FIRE, actions))

    def recv(self) -> tuple:
        obs, rewards, terminated, truncated, info = self.env.recv()
        info["life_lost"] = info["lives"] < self.lives
        self.due = self.fire & (info["life_lost"] | terminated | truncated)  # a lost life, or a new game
        self.lives = info["lives"]
        return obs, rewards, terminated, truncated, info

    def step(self, actions: np.ndarray) -> tuple:
        self.send(actions)
        return self.recv()


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity mask where the OS has one (a SLURM job's CPUs), else all."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def send_actions(env: VectorEnv, actions: np.ndarray) -> Callable[[], tuple]:
    """Start a step of ``env`` and return the call that ends it with the step's results. ALE's vector env
    steps in its own threads in between, so the caller can compute meanwhile; other envs step in that call."""
    if isinstance(env, ale_py.vector_env.AtariVectorEnv | Lives):
        env.send(actions)
        return env.recv
    return lambda: env.step(actions)


class EnvGroups:
    """The training envs as consecutive groups, each its own vector env, that step in turn: a group's step is sent,
    and while ALE computes it in its own threads the network chooses the next group's actions; the step's results are
    received when the group acts again. A GPU trainer uses two groups (the CPU is free while the GPU chooses one
    group's actions: 1.10x and 1.22x faster on an H200, bench/results/); on a CPU one group, where the turns are plain
    act, step, store. Actions are drawn group after group in env order, as one draw for all envs would draw them."""

    def __init__(self, n_envs: int, count: int, make: Callable[[int], VectorEnv]) -> None:
        """``count`` groups of ``n_envs`` envs, each built by ``make(size)``."""
        bounds = np.linspace(0, n_envs, count + 1).round().astype(int)
        self.slices = [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        self.envs = [make(envs.stop - envs.start) for envs in self.slices]

    def reset(self, seed: int) -> np.ndarray:
        """Every env's first observation, env i seeded with ``seed`` + i."""
        return np.concatenate([env.reset(seed=seed + envs.start)[0] for env, envs in zip(self.envs, self.slices,
                                                                                         strict=True)])

    def play(self, n_steps: int, obs: list[Any], act: Callable[[int, slice, Any], np.ndarray],
             store: Callable[..., Any]) -> list[Any]:
        """``n_steps`` turns of every group from its observations ``obs``: ``act(t, envs, obs)`` gives the group's
        actions at step t, its envs step meanwhile, and ``store(t, envs, next_obs, rewards, terminated, truncated,
        info)`` keeps the step and returns the observations it acts on next. Returns each group's last ones."""
        receive: list[Callable[[], tuple] | None] = [None] * len(self.envs)
        for t in range(n_steps + 1):
            for g, (env, envs) in enumerate(zip(self.envs, self.slices, strict=True)):
                if (received := receive[g]) is not None:
                    obs[g] = store(t - 1, envs, *received())
                if t < n_steps:
                    receive[g] = send_actions(env, act(t, envs, obs[g]))
        return obs

    def close(self) -> None:
        for env in self.envs:
            env.close()
