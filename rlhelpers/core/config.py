"""What the trainer needs to know of a run: the algorithm, its hyperparameters, the environments and the
machine settings. The run machinery extends it (``rlhelpers.runner.config.TrainConfig``) with the budget,
the evaluation and checkpoint cadence, where the run lives and how it is tracked, and fills the fields
left as ``None`` from the algorithm table (``rlhelpers.core.losses.ALGORITHMS``) and the kind of env.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch

from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.losses import ALGORITHMS

# ALE takes int32 seeds. Training envs use seeds below this offset (seed + step + env index after a
# resume) and evaluation envs seeds from it upwards, so the two never share a seed.
EVAL_SEED_OFFSET = 2**30


@dataclass
class AgentConfig:
    """The algorithm, its hyperparameters and how the trainer runs it (one field per CLI option)."""

    algo: str = field(default="a2c", metadata={"help": f"algorithm: {', '.join(ALGORITHMS)}"})
    seed: int = field(default=0, metadata={"help": "random seed of the run (the report uses 0 and 100)"})
    env_id: str = field(
        default="PongNoFrameskip-v4",
        metadata={"help": "gymnasium id: an ALE Atari game (e.g. PongNoFrameskip-v4; every ALE id, v5 ones "
                          "included, gets the report's preprocessing, without sticky actions) or an env with "
                          "discrete actions and vector observations (e.g. CartPole-v1)"},
    )
    n_envs: int | None = field(default=None, metadata={"help": "parallel training environments (Atari: 16)"})
    n_steps: int = field(default=5, metadata={"help": "rollout length per environment (n of the n-step return)"})
    gamma: float = field(default=0.99, metadata={"help": "discount factor"})
    lr: float | None = field(default=None, metadata={"help": "learning rate"})
    pg_coef: float | None = field(default=None, metadata={"help": "actor loss weight"})
    vf_coef: float | None = field(default=None, metadata={"help": "critic loss weight"})
    ent_coef: float | None = field(default=None, metadata={"help": "entropy bonus weight"})
    max_grad_norm: float = field(default=0.5, metadata={"help": "global gradient-norm clip"})
    rms_alpha: float = field(default=0.99, metadata={"help": "RMSprop smoothing constant"})
    rms_eps: float = field(default=1e-5, metadata={"help": "RMSprop epsilon (inside the square root)"})
    hidden_size: int = field(default=64, metadata={"help": "MLP width for vector observations (CartPole)"})
    n_eval_episodes: int = field(default=30, metadata={"help": "complete episodes per evaluation"})
    n_eval_envs: int = field(
        default=30, metadata={"help": "parallel evaluation environments (at most n_eval_episodes are used)"}
    )
    device: str = field(default="auto", metadata={"help": "torch device: auto (CUDA when present), cpu, cuda, mps"})
    torch_threads: int = field(
        default=0,
        metadata={"help": "CPU threads for torch; 0: torch's default, 1 with a GPU (1 helps on a busy machine)"},
    )
    env_threads: int = field(
        default=0, metadata={"help": "threads of each ALE vector env; 0: min(envs, CPUs this process may use)"}
    )
    env_groups: int = field(
        default=0,
        metadata={"help": "training envs stepped as this many groups, the network choosing one group's actions "
                          "while the others step (ALE envs); 0: 2 with a GPU, else 1 (all envs step at once)"},
    )

    @property
    def batch_size(self) -> int:
        """Environment steps per update: n_steps * n_envs."""
        return self.n_steps * self.n_envs

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
