"""The algorithm: collect a rollout, bootstrap, update; evaluate; save and restore the training state.

``Trainer`` owns the training envs, the model, the optimizer, the rollout buffer and the counters, and
hands back plain values. It never touches files, locks or W&B: ``rlhelpers.runner.run`` drives it and keeps
the run's records.
"""

from __future__ import annotations

import random
import time
from collections import deque
from typing import Any

import numpy as np
import torch

from rlhelpers.core.buffer import RolloutBuffer
from rlhelpers.core.config import EVAL_SEED_OFFSET, AgentConfig, resolve_device
from rlhelpers.core.envs import atari_game, final_observations, finished_episodes, make_vec_env
from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.evaluation import evaluate_policy
from rlhelpers.core.losses import ALGORITHMS, state_value
from rlhelpers.core.networks import ActorCritic, build_model, sample_actions
from rlhelpers.core.optim import RMSpropTFLike

CHECKPOINT_FORMAT = 2


class Trainer:
    """One actor-critic learner: training envs, model, optimizer, rollout storage and counters."""

    def __init__(self, config: AgentConfig, device: torch.device | None = None,
                 model: ActorCritic | None = None) -> None:
        """``config`` as ``resolve_config`` returns it (validated, W&B mode resolved); ``device`` defaults to
        ``resolve_device(config.device)``; ``model`` replaces the one built from the config."""
        self.config = config
        self.device = resolve_device(config.device) if device is None else device
        if config.torch_threads:
            # torch's default uses every core; one thread helps when other processes compete for them
            # (bench/results.md measures both).
            torch.set_num_threads(config.torch_threads)
        torch.manual_seed(config.seed)
        random.seed(config.seed)
        self.env = make_vec_env(config.env_id, config.n_envs, num_threads=config.env_threads)
        self.eval_env = None
        obs_space = self.env.single_observation_space
        self.n_actions = int(self.env.single_action_space.n)
        self.clip_rewards = atari_game(config.env_id) is not None
        if model is None:
            model = build_model(obs_space.shape, self.n_actions, config.algo, config.hidden_size)
        self.model = model.to(self.device)
        self.optimizer = RMSpropTFLike(self.model.parameters(), lr=config.lr, alpha=config.rms_alpha,
                                       eps=config.rms_eps)
        self.loss_fn = ALGORITHMS[config.algo].loss
        obs_dtype = torch.uint8 if obs_space.dtype == np.uint8 else torch.float32
        self.buffer = RolloutBuffer(config.n_steps, config.n_envs, obs_space.shape, obs_dtype, self.device)
        self.num_timesteps = 0
        self.n_updates = 0
        self.episode_returns: deque[float] = deque(maxlen=100)
        self.episode_lengths: deque[int] = deque(maxlen=100)
        self.eval_history: list[dict[str, Any]] = []
        self.sessions: list[dict[str, Any]] = []  # provenance of each training session
        self.train_seconds = 0.0  # wall-clock time spent training (evaluations included), over all sessions
        self.restart_episodes(config.seed)

    def restart_episodes(self, seed: int) -> None:
        """Reset every training env with ``seed`` (sub-envs get seed, seed+1, ...), abandoning the
        episodes in progress."""
        obs, _ = self.env.reset(seed=seed)
        self.obs = torch.as_tensor(obs, device=self.device)

    @torch.inference_mode()
    def _values(self, obs: torch.Tensor) -> torch.Tensor:
        """V(s), or V~(s) = sum_a pi(a|s) Q(s,a) for a Q critic, for bootstrapping."""
        return state_value(*self.model(obs))

    @torch.inference_mode()
    def collect_rollout(self) -> None:
        """Play n_steps in every training env with actions sampled from pi, filling the buffer."""
        buf = self.buffer
        for t in range(self.config.n_steps):
            buf.observations[t].copy_(self.obs)
            logits, _ = self.model(self.obs)
            actions = sample_actions(logits)
            buf.actions[t].copy_(actions)
            next_obs, rewards, terminated, truncated, info = self.env.step(actions.cpu().numpy())
            scores, lengths = finished_episodes(info)
            self.episode_returns.extend(scores.tolist())
            self.episode_lengths.extend(lengths.tolist())
            if self.clip_rewards:
                rewards = np.sign(rewards)
            buf.rewards[t].copy_(torch.as_tensor(rewards))
            buf.terminated[t].copy_(torch.as_tensor(terminated))
            buf.truncated[t].copy_(torch.as_tensor(truncated))
            buf.truncation_values[t].zero_()
            # A timeout is not a real end: bootstrap from the critic's value of the true last observation.
            timeouts = np.flatnonzero(truncated & ~terminated)
            if len(timeouts):
                final_obs = torch.as_tensor(final_observations(info, timeouts), device=self.device)
                buf.truncation_values[t, torch.as_tensor(timeouts, device=self.device)] = self._values(final_obs)
            self.obs = torch.as_tensor(next_obs, device=self.device)
        self.num_timesteps += self.config.batch_size

    def update(self) -> dict[str, float]:
        """One gradient step on the stored rollout; returns its statistics as floats."""
        cfg = self.config
        returns = self.buffer.returns(self._values(self.obs), cfg.gamma).flatten()
        logits, critic = self.model(self.buffer.observations.flatten(0, 1))
        loss, stats = self.loss_fn(logits, critic, self.buffer.actions.flatten(), returns,
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

    def evaluate(self) -> dict[str, Any]:
        """Evaluate the current policy and append ``{"step", "returns", "lengths", "time",
        "train_seconds"}`` to the history."""
        cfg = self.config
        if self.eval_env is None:
            self.eval_env = make_vec_env(cfg.env_id, min(cfg.n_eval_envs, cfg.n_eval_episodes),
                                         num_threads=cfg.env_threads)
        seed = cfg.seed + EVAL_SEED_OFFSET + len(self.eval_history) * self.eval_env.num_envs
        self.model.eval()
        returns, lengths = evaluate_policy(self.model, self.eval_env, cfg.n_eval_episodes, seed, self.device)
        self.model.train()
        record = {"step": self.num_timesteps, "returns": returns, "lengths": lengths,
                  "time": round(time.time(), 3), "train_seconds": round(self.train_seconds, 3)}
        self.eval_history.append(record)
        return record

    def snapshot(self) -> dict[str, Any]:
        """Model weights and what rebuilds the model (no optimizer): the analysis's view of the policy."""
        return {"step": self.num_timesteps, "config": self.config.to_dict(),
                "obs_shape": list(self.env.single_observation_space.shape), "n_actions": self.n_actions,
                "model": self.model.state_dict()}

    def state_dict(self) -> dict[str, Any]:
        """Full training state; only tensors and plain Python values (loads with weights_only=True)."""
        return {
            "format": CHECKPOINT_FORMAT,
            "config": self.config.to_dict(),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "num_timesteps": self.num_timesteps,
            "n_updates": self.n_updates,
            "episode_returns": list(self.episode_returns),
            "episode_lengths": list(self.episode_lengths),
            "eval_history": self.eval_history,
            "sessions": self.sessions,
            "train_seconds": self.train_seconds,
            "rng": {"torch": torch.get_rng_state(), "python": random.getstate(),
                    "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a ``state_dict``; training envs restart from a reset seeded by the step count."""
        if state.get("format") != CHECKPOINT_FORMAT:
            raise RLHelpersError(f"checkpoint format {state.get('format')!r} is not this version's "
                                 f"({CHECKPOINT_FORMAT}); resume it with the rlhelpers version that wrote it")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.num_timesteps = int(state["num_timesteps"])
        self.n_updates = int(state["n_updates"])
        self.episode_returns = deque(state["episode_returns"], maxlen=self.episode_returns.maxlen)
        self.episode_lengths = deque(state["episode_lengths"], maxlen=self.episode_lengths.maxlen)
        self.eval_history = list(state["eval_history"])
        self.sessions = list(state["sessions"])
        self.train_seconds = float(state["train_seconds"])
        torch.set_rng_state(state["rng"]["torch"])
        random.setstate(state["rng"]["python"])
        if torch.cuda.is_available() and state["rng"]["cuda"]:
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
        # The emulator state is not saved: episodes in progress at the checkpoint are restarted.
        self.restart_episodes(self.config.seed + self.num_timesteps)

    def close(self) -> None:
        """Close the training and evaluation envs."""
        self.env.close()
        if self.eval_env is not None:
            self.eval_env.close()
