"""Actor-critic networks: a shared encoder with a policy head and a critic head.

The critic head has one output, V(s), or |A| outputs, Q(s, .), as the algorithm table says.
Initialisation is orthogonal (as in OpenAI Baselines): gain sqrt(2) in the encoder, 0.01 on the
policy head (near-uniform initial policy), 1 on the critic head; biases are zero.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn

from rlhelpers.core.losses import ALGORITHMS

PRECISIONS = ("auto", "fp32", "bf16")


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bfloat16 in hardware (AVX512-BF16 or AMX), read from /proc/cpuinfo."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_precision(precision: str, device: torch.device, image_obs: bool = True) -> str:
    """``fp32`` or ``bf16`` for the encoder; ``auto`` is bf16 only for the Nature encoder on a CPU with
    native bfloat16 (there it trains faster; bench/results.md) and fp32 elsewhere (CUDA, MLP encoders)."""
    if precision != "auto":
        return precision
    return "bf16" if image_obs and device.type == "cpu" and cpu_has_native_bf16() else "fp32"


def layer_init(layer: nn.Module, gain: float = math.sqrt(2)) -> nn.Module:
    """Orthogonal weights with ``gain`` and zero bias."""
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class NatureEncoder(nn.Module):
    """Nature-DQN encoder: uint8 frames (N, 4, 84, 84) / 255 -> 512 float32 features.

    With ``bf16`` its convolutions and linear layer run under bfloat16 autocast (weights, gradients,
    optimizer state and the heads stay float32; oneDNN and cuBLAS accumulate in float32).
    """

    out_features = 512

    def __init__(self, in_channels: int = 4, bf16: bool = False) -> None:
        super().__init__()
        self.bf16 = bf16
        self.net = nn.Sequential(
            layer_init(nn.Conv2d(in_channels, 32, 8, stride=4)), nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)), nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)), nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)), nn.ReLU(),
        )
        # Channels-last convolution weights: oneDNN's faster CPU layout (bench/layout.py measures it).
        self.net.to(memory_format=torch.channels_last)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        dtype = self.net[0].weight.dtype  # float32 in training; float64 in the analysis
        with torch.autocast(obs.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            features = self.net(obs.to(dtype) / 255.0)
        return features.to(dtype)


class MLPEncoder(nn.Module):
    """Two tanh layers for vector observations (classic control)."""

    def __init__(self, obs_dim: int, hidden_size: int = 64) -> None:
        super().__init__()
        self.out_features = hidden_size
        self.net = nn.Sequential(
            layer_init(nn.Linear(obs_dim, hidden_size)), nn.Tanh(),
            layer_init(nn.Linear(hidden_size, hidden_size)), nn.Tanh(),
        )

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs.to(self.net[0].weight.dtype))


class ActorCritic(nn.Module):
    """Shared encoder, policy head (logits over A) and critic head (V: 1 output, Q: |A| outputs)."""

    def __init__(self, encoder: nn.Module, n_actions: int, critic_outputs: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.policy_head = layer_init(nn.Linear(encoder.out_features, n_actions), gain=0.01)
        self.critic_head = layer_init(nn.Linear(encoder.out_features, critic_outputs), gain=1.0)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Policy logits (N, |A|) and critic output (N, 1) for V or (N, |A|) for Q."""
        features = self.encoder(obs)
        return self.policy_head(features), self.critic_head(features)


def build_model(obs_shape: tuple[int, ...], n_actions: int, algo: str, hidden_size: int = 64,
                precision: str = "fp32") -> ActorCritic:
    """Nature encoder for image stacks (C, 84, 84), MLP for flat vectors; the critic ``algo`` has (V or Q).

    ``precision`` is a resolved one (``fp32`` or ``bf16``); bf16 applies to the Nature encoder only.
    """
    if precision not in ("fp32", "bf16"):
        raise ValueError(f"unresolved precision {precision!r}: pass fp32 or bf16")
    if len(obs_shape) == 3:
        encoder: nn.Module = NatureEncoder(obs_shape[0], bf16=precision == "bf16")
    elif len(obs_shape) == 1:
        encoder = MLPEncoder(obs_shape[0], hidden_size)
    else:
        raise ValueError(f"unsupported observation shape {obs_shape}")
    return ActorCritic(encoder, n_actions, critic_outputs=1 if ALGORITHMS[algo].critic == "V" else n_actions)


def sample_actions(logits: torch.Tensor) -> torch.Tensor:
    """a ~ pi(.|s) for each row of ``logits``: the same draw as ``Categorical(logits=logits).sample()``
    without its per-call validation and set-up."""
    return torch.multinomial(torch.softmax(logits, dim=-1), 1, replacement=True).squeeze(1)
