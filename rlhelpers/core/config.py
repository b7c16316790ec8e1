"""What the trainer needs to know of a run: the algorithm, its hyperparameters, the environments and the
machine settings. An ``AgentConfig`` is complete on its own: the fields left as ``None`` take the run's
defaults (``run_defaults``: the algorithm table ``ALGORITHMS`` and ``ENV_DEFAULTS``). The run machinery
extends it (``rlhelpers.runner.config.TrainConfig``) with the budget, the evaluation and checkpoint cadence,
where the run lives and how it is tracked.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import torch

from rlhelpers.core.envs import atari_game, env_spec
from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.losses import ALGORITHMS

# ALE takes int32 seeds. Training envs use seeds below this offset (seed + step + env index after a
# resume) and evaluation envs seeds from it upwards, so the two never share a seed.
EVAL_SEED_OFFSET = 2**30

# A run's defaults besides its algorithm's row of ALGORITHMS, by kind of env (docs/experiment.md).
# Atari: the run shape of the Nature DQN preprocessing and A2C, with no early stop (a target is its caller's rule).
# Classic control (CartPole-v1): stop at the env's reward_threshold (475). With the Atari settings the critic term
# dominates the clipped gradient norm and the policy moves slowly; more updates per step (8 envs) and a larger lr let
# every algorithm solve CartPole within 300k steps (tests/test_cuda.py, on every device).
ENV_DEFAULTS: dict[str, dict[str, float | None]] = {
    "Atari": {"n_envs": 16, "eval_interval": 300_000},
    "classic control": {"n_envs": 8, "lr": 7e-3, "ent_coef": 0.0, "eval_interval": 10_000, "stop_return": None},
}


def run_defaults(algo: str, env_id: str) -> dict[str, float]:
    """The values a run of ``algo`` on ``env_id`` takes for the fields it leaves as None: the algorithm's row of
    ``ALGORITHMS``, then its kind of env's in ``ENV_DEFAULTS`` (a ``stop_return`` of None there: the env's reward
    threshold). An unknown algo or env id adds nothing (the run's validation names it)."""
    algo_values = dict(ALGORITHMS[algo].defaults) if algo in ALGORITHMS else {}
    try:
        kind = "Atari" if atari_game(env_id) is not None else "classic control"
    except RLHelpersError:
        return algo_values
    values: dict[str, float | None] = {**algo_values, **ENV_DEFAULTS[kind]}
    if "stop_return" in values:
        threshold = env_spec(env_id).reward_threshold
        values["stop_return"] = float("inf") if threshold is None else threshold
    return {name: value for name, value in values.items() if value is not None}  # all of them: the None is replaced


T = TypeVar("T")


def filled(value: T | None, name: str) -> T:
    """``value`` of the field ``name`` left as None in the config and filled from the run's defaults in
    ``AgentConfig.__post_init__``: a TypeError if it is still None (an unknown algo or env id has no defaults)."""
    if value is None:
        raise TypeError(f"{name} is None: an unknown algo or env id gave it no default")
    return value


def option(value: Any, help_text: str, **metadata: str) -> Any:
    """A config field: its default ``value`` and the help of its command-line option (``metadata``: e.g. the
    ``default`` that help names where the value itself says too little)."""
    return dataclasses.field(default=value, metadata={"help": help_text, **metadata})


@dataclasses.dataclass
class AgentConfig:
    """The algorithm, its hyperparameters and how the trainer runs it (one field per CLI option)."""

    algo: str = option("a2c", f"algorithm: {', '.join(ALGORITHMS)}")
    seed: int = option(0, "random seed of the run")
    env_id: str = option("PongNoFrameskip-v4", "gymnasium id: an ALE Atari game (e.g. PongNoFrameskip-v4; every ALE "
                         "id, v5 ones included, gets the Nature DQN preprocessing, without sticky actions) or an env "
                         "with discrete actions and vector observations (e.g. CartPole-v1)")
    life_loss: bool = option(False, "a lost life ends a training episode while the game goes on (Atari; evaluations "
                             "play whole games)")
    fire_reset: bool = option(False, "press FIRE after every reset and every lost life, in training and evaluation "
                              "(Atari games that serve with FIRE, e.g. Breakout)")
    n_envs: int | None = option(None, "parallel training environments")
    n_steps: int = option(5, "rollout length per environment (n of the n-step return)")
    gamma: float = option(0.99, "discount factor")
    lr: float | None = option(None, "learning rate")
    pg_coef: float | None = option(None, "actor loss weight")
    vf_coef: float | None = option(None, "critic loss weight")
    ent_coef: float | None = option(None, "entropy bonus weight")
    max_grad_norm: float = option(0.5, "global gradient-norm clip")
    rms_alpha: float = option(0.99, "RMSprop smoothing constant")
    rms_eps: float = option(1e-5, "RMSprop epsilon (inside the square root)")
    hidden_size: int = option(64, "MLP width for vector observations (CartPole)")
    n_eval_episodes: int = option(30, "complete episodes per evaluation")
    n_eval_envs: int = option(30, "parallel evaluation environments (at most n_eval_episodes are used)")
    device: str = option("auto", "torch device: auto (CUDA when present), cpu, cuda, mps")
    torch_threads: int = option(0, "CPU threads for torch; 0: torch's default, 1 with a GPU, and in a campaign whose "
                                "runs share a CPU each run's share of its cores (1 on 2 cores)")
    env_threads: int = option(0, "threads of each ALE vector env; 0: min(envs, CPUs this process may use)")
    env_groups: int = option(0, "training envs stepped as this many groups, the network choosing one group's "
                             "actions while the others step (ALE envs); 0: 2 with a GPU, else 1 (all envs step "
                             "at once)")

    def __post_init__(self) -> None:
        for name, value in run_defaults(self.algo, self.env_id).items():
            if hasattr(self, name) and getattr(self, name) is None:  # eval_interval, stop_return: TrainConfig only
                setattr(self, name, value)

    @property
    def batch_size(self) -> int:
        """Environment steps per update: n_steps * n_envs."""
        return self.n_steps * filled(self.n_envs, "n_envs")

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON view of the config, as checkpoints and snapshots save it."""
        return dataclasses.asdict(self)


def resolve_device(device: str) -> torch.device:
    """``auto`` picks CUDA when present, else the CPU; an unavailable CUDA device is an error."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RLHelpersError(f"device {device!r} requested but CUDA is not available here; use --device auto or cpu")
    return torch.device(device)
