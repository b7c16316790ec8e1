"""The algorithm: collect a rollout, bootstrap, update; evaluate; save and restore the training state.

``Trainer`` owns the training envs, the model, the optimizer, the rollout buffer, the random streams and the
counters, and hands back plain values. It never touches files, locks, clocks or W&B: ``rlhelpers.runner.run``
drives it and keeps the run's records (its evaluations, sessions, training time and W&B id).
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import VectorEnv

from rlhelpers.core.buffer import RolloutBuffer
from rlhelpers.core.config import EVAL_SEED_OFFSET, AgentConfig, filled, resolve_device
from rlhelpers.core.envs import EnvGroups, atari_game, make_vec_env
from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.evaluation import Evaluation, evaluate_policy
from rlhelpers.core.losses import ALGORITHMS, state_value
from rlhelpers.core.networks import ActingTrunks, ActorCritic, build_model, sample_actions
from rlhelpers.core.optim import RMSpropTFLike

CHECKPOINT_FORMAT = 2


def env_group_count(config: AgentConfig, device: torch.device) -> int:
    """How many groups the training envs step in: ``config.env_groups``, or for 0 two groups of ALE envs
    with a GPU (the CPU is free while the GPU chooses one group's actions, so the other group steps
    meanwhile; bench/results.md) and one group otherwise (on a CPU the network and the emulator already
    share its cores)."""
    if config.env_groups:
        return config.env_groups
    overlap = device.type == "cuda" and atari_game(config.env_id) is not None and filled(config.n_envs, "n_envs") > 1
    return 2 if overlap else 1


def training_cuda_rng_state(saved: list[torch.Tensor], device: str) -> torch.Tensor | None:
    """The CUDA random state of the device a checkpoint trained on, from its saved list: one entry (this
    version's), none (it never trained on a GPU), or, from earlier versions, one per GPU of that machine, of
    which the run drew only from the device of its config (``cuda:<i>``, else the first)."""
    if not saved:
        return None
    index = torch.device(device).index if device.startswith("cuda") else None
    return saved[index or 0] if len(saved) > 1 else saved[0]


class Trainer:
    """One actor-critic learner: training envs, model, optimizer, rollout storage and counters."""

    def __init__(self, config: AgentConfig, device: torch.device | None = None,
                 model: ActorCritic | None = None) -> None:
        """``config`` as ``resolve_config`` returns it (validated, W&B mode resolved); ``device`` defaults to
        ``resolve_device(config.device)``; ``model`` replaces the one built from the config."""
        self.config = config
        self.device = resolve_device(config.device) if device is None else device
        # torch's settings as they were, which close() gives back (a notebook's kernel goes on to other work).
        self.torch_settings = (torch.get_num_threads(), torch.get_float32_matmul_precision(),
                               torch.backends.cudnn.allow_tf32)
        # torch's default uses every core; one thread helps when other processes compete for them, and when
        # the network runs on a GPU, where CPU threads only wait and spin against the emulator (bench/results.md).
        threads = config.torch_threads or (1 if self.device.type == "cuda" else 0)
        if threads:
            torch.set_num_threads(threads)
        if self.device.type == "cuda":  # fp32 means fp32: Ampere and later GPUs run cuDNN convolutions in TF32.
            # Matmuls through this one API only: mixed with matmul.allow_tf32, torch can refuse to report it.
            torch.set_float32_matmul_precision("highest")
            torch.backends.cudnn.allow_tf32 = False
        torch.manual_seed(config.seed)
        random.seed(config.seed)
        n_envs = filled(config.n_envs, "n_envs")
        self.env_groups = EnvGroups(n_envs, env_group_count(config, self.device), lambda size: make_vec_env(
            config.env_id, size, num_threads=config.env_threads, episode_statistics=False, life_loss=config.life_loss,
            fire_reset=config.fire_reset))
        self.envs = self.env_groups.envs
        self.eval_env: VectorEnv | None = None
        # check_supported admits discrete actions, and observations in a Box (Atari frames or a flat vector).
        obs_space = cast(gym.spaces.Box, self.envs[0].single_observation_space)
        self.n_actions = int(cast(gym.spaces.Discrete, self.envs[0].single_action_space).n)
        self.clip_rewards = atari_game(config.env_id) is not None
        if model is None:
            model = build_model(obs_space.shape, self.n_actions, config.algo, config.hidden_size)
        self.model = model.to(self.device)
        self.optimizer = RMSpropTFLike(self.model.parameters(), lr=filled(config.lr, "lr"), alpha=config.rms_alpha,
                                       eps=config.rms_eps)
        obs_dtype = torch.uint8 if obs_space.dtype == np.uint8 else torch.float32
        self.buffer = RolloutBuffer(config.n_steps, n_envs, obs_space.shape, obs_dtype, self.device)
        self.num_timesteps = 0
        self.n_updates = 0
        self.episode_returns: deque[float] = deque(maxlen=100)  # the last 100 games, pooled over the envs
        self.episode_lengths: deque[int] = deque(maxlen=100)
        # Each env's last 100 games, and the games ended since the runner last took them (``take_games``).
        self.env_game_returns: list[deque[float]] = [deque(maxlen=100) for _ in range(n_envs)]
        self.new_games: list[tuple[int, float, int]] = []  # (env, return, length)
        # The CUDA random state of the run, kept while it trains on another device so that it continues later.
        self.cuda_rng_state: torch.Tensor | None = None
        self.trunks = ActingTrunks(self.model, reforward=self.device.type == "cuda")
        self.restart_episodes(config.seed)

    @property
    def reforward(self) -> bool:
        """Whether the update runs the network again over the rollout (``ActingTrunks``): a GPU trainer's choice."""
        return self.trunks.reforward

    @reforward.setter
    def reforward(self, value: bool) -> None:
        self.trunks.reforward = value

    def restart_episodes(self, seed: int) -> None:
        """Reset every training env with ``seed`` (env i gets seed + i), abandoning the episodes in progress."""
        self.obs = torch.as_tensor(self.env_groups.reset(seed), device=self.device)
        n_envs = filled(self.config.n_envs, "n_envs")
        self.running_returns = np.zeros(n_envs)  # of the episodes in progress, true game scores
        self.running_lengths = np.zeros(n_envs, dtype=np.int64)

    @torch.inference_mode()
    def _values(self, obs: torch.Tensor) -> torch.Tensor:
        """V(s), or V~(s) = sum_a pi(a|s) Q(s,a) for a Q critic, for bootstrapping."""
        return state_value(*self.model(obs))

    def collect_rollout(self) -> None:
        """Play n_steps in every training env, filling the buffer: act (sample from pi), step, store.

        The env groups overlap the network's work with the emulator's (``EnvGroups``); the acting passes keep the
        encoder trunk's outputs for the update (``ActingTrunks``)."""
        self.trunks.start()
        obs = [self.obs[envs] for envs in self.env_groups.slices]  # replaced, never written: autograd may hold them
        self.obs = torch.cat(self.env_groups.play(self.config.n_steps, obs, self._act, self._store_step))
        self.num_timesteps += self.config.batch_size

    def _act(self, t: int, envs: slice, obs: torch.Tensor) -> np.ndarray:
        """Store the observations of the envs ``envs`` at step ``t`` and the actions sampled for them from pi."""
        self.buffer.observations[t, envs].copy_(obs)
        actions = sample_actions(self.trunks.logits(obs))
        self.buffer.actions[t, envs].copy_(actions)
        return actions.cpu().numpy()

    def _store_step(self, t: int, envs: slice, next_obs: np.ndarray | torch.Tensor, rewards: np.ndarray,
                    terminated: np.ndarray, truncated: np.ndarray, info: dict) -> torch.Tensor:
        """Store the step ``t`` of the envs ``envs`` in the buffer, count the games it ended (in true points), and
        return the next observations as a tensor on the device (``next_obs`` itself if it is one already)."""
        buf = self.buffer
        self.running_returns[envs] += rewards
        self.running_lengths[envs] += 1
        lost_life = info.get("life_lost", np.False_)  # the end of an episode, not of the game (life_loss)
        ended = np.flatnonzero(terminated & ~lost_life | truncated) + envs.start
        if len(ended):
            self.episode_returns.extend(self.running_returns[ended].tolist())
            self.episode_lengths.extend(self.running_lengths[ended].tolist())
            for env in ended.tolist():
                self.env_game_returns[env].append(float(self.running_returns[env]))
                self.new_games.append((env, float(self.running_returns[env]), int(self.running_lengths[env])))
            self.running_returns[ended] = 0.0
            self.running_lengths[ended] = 0
        if self.clip_rewards:
            rewards = np.sign(rewards)
        buf.rewards[t, envs].copy_(torch.as_tensor(rewards))
        buf.terminated[t, envs].copy_(torch.as_tensor(terminated))
        buf.truncated[t, envs].copy_(torch.as_tensor(truncated))
        buf.truncation_values[t, envs].zero_()
        # A timeout is not a real end: bootstrap from the critic's value of the true last observation.
        timeouts = np.flatnonzero(truncated & ~terminated)
        if len(timeouts):
            # ALE's final_obs is a dense array, gymnasium's an object array of observations: np.stack takes either.
            final_obs = torch.as_tensor(np.stack(info["final_obs"][timeouts]), device=self.device)
            buf.truncation_values[t, torch.as_tensor(timeouts + envs.start, device=self.device)] = \
                self._values(final_obs)
        return torch.as_tensor(next_obs, device=self.device)

    def take_games(self) -> list[tuple[int, float, int]]:
        """The training games ended since the last call, as (env, return in true points, length in steps)."""
        games, self.new_games = self.new_games, []
        return games

    def reward_mean_100(self) -> float | None:
        """Each env's mean return over its last 100 games, averaged over the envs (None until every env has ended
        a game): the training score that some courses grade, beside ``episode_returns``' pooled last 100."""
        if not all(self.env_game_returns):
            return None
        return float(np.mean([np.mean(returns) for returns in self.env_game_returns]))

    def update(self) -> dict[str, float]:
        """One gradient step on the rollout just collected (through its acting passes' trunks, or with
        ``self.reforward`` a new pass over its observations); returns its statistics as floats."""
        cfg = self.config
        returns = self.buffer.returns(self._values(self.obs), cfg.gamma).flatten()
        logits, critic = self.trunks.outputs(self.buffer.observations.flatten(0, 1))
        loss, stats = ALGORITHMS[cfg.algo].loss(logits, critic, self.buffer.actions.flatten(), returns,
                                                pg_coef=cfg.pg_coef, vf_coef=cfg.vf_coef, ent_coef=cfg.ent_coef)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        stats["grad_norm"] = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
        self.optimizer.step()
        self.n_updates += 1
        stats["loss"] = loss.detach()
        return dict(zip(stats, torch.stack([value.float() for value in stats.values()]).tolist(), strict=True))

    def train_iteration(self) -> dict[str, float]:
        """Collect one rollout and update on it."""
        self.collect_rollout()
        return self.update()

    def evaluate(self, index: int) -> Evaluation:
        """Evaluate the current policy as the run's evaluation number ``index`` (0 for the first), on episodes
        seeded by that number."""
        cfg = self.config
        if self.eval_env is None:
            self.eval_env = make_vec_env(cfg.env_id, min(cfg.n_eval_envs, cfg.n_eval_episodes),
                                         num_threads=cfg.env_threads, fire_reset=cfg.fire_reset)
        seed = cfg.seed + EVAL_SEED_OFFSET + index * self.eval_env.num_envs
        self.model.eval()
        returns, lengths = evaluate_policy(self.model, self.eval_env, cfg.n_eval_episodes, seed, self.device)
        self.model.train()
        return Evaluation(self.num_timesteps, tuple(returns), tuple(lengths))

    def snapshot(self) -> dict[str, Any]:
        """Model weights and what rebuilds the model (no optimizer): the analysis's view of the policy."""
        obs_space = cast(gym.spaces.Box, self.envs[0].single_observation_space)
        return {"step": self.num_timesteps, "config": self.config.to_dict(), "obs_shape": list(obs_space.shape),
                "n_actions": self.n_actions, "model": self.model.state_dict()}

    def state_dict(self) -> dict[str, Any]:
        """The learner's full state: model, optimizer, random streams and counters; only tensors and plain Python
        values (loads with weights_only=True). The CUDA stream saved is the training device's only (or the one
        kept from an earlier session on a GPU), so a checkpoint resumes on a machine with any number of GPUs."""
        cuda = torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else self.cuda_rng_state
        return {
            "format": CHECKPOINT_FORMAT,
            "config": self.config.to_dict(),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "num_timesteps": self.num_timesteps,
            "n_updates": self.n_updates,
            "episode_returns": list(self.episode_returns),
            "episode_lengths": list(self.episode_lengths),
            "env_game_returns": [list(returns) for returns in self.env_game_returns],
            "rng": {"torch": torch.get_rng_state(), "python": random.getstate(),
                    "cuda": [] if cuda is None else [cuda]},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a ``state_dict`` (keys it does not know are left to the caller); training envs restart from a
        reset seeded by the step count."""
        if state.get("format") != CHECKPOINT_FORMAT:
            raise RLHelpersError(f"checkpoint format {state.get('format')!r} is not this version's "
                                 f"({CHECKPOINT_FORMAT}); resume it with the rlhelpers version that wrote it")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.num_timesteps = int(state["num_timesteps"])
        self.n_updates = int(state["n_updates"])
        self.episode_returns = deque(state["episode_returns"], maxlen=self.episode_returns.maxlen)
        self.episode_lengths = deque(state["episode_lengths"], maxlen=self.episode_lengths.maxlen)
        for returns, saved in zip(self.env_game_returns, state.get("env_game_returns", ()), strict=False):
            returns.extend(saved)  # checkpoints of earlier versions have none
        self.new_games = []
        torch.set_rng_state(state["rng"]["torch"])
        random.setstate(state["rng"]["python"])
        self.cuda_rng_state = training_cuda_rng_state(state["rng"]["cuda"], state["config"].get("device", "auto"))
        if self.device.type == "cuda" and self.cuda_rng_state is not None:
            torch.cuda.set_rng_state(self.cuda_rng_state, self.device)
        # The emulator state is not saved: episodes in progress at the checkpoint are restarted.
        self.restart_episodes(self.config.seed + self.num_timesteps)

    def close(self) -> None:
        """Close the training and evaluation envs, and give torch's thread count and float32 precision back."""
        self.env_groups.close()
        if self.eval_env is not None:
            self.eval_env.close()
        threads, precision, torch.backends.cudnn.allow_tf32 = self.torch_settings
        torch.set_num_threads(threads)
        torch.set_float32_matmul_precision(precision)
