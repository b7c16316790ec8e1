"""Actor-critic networks: a shared encoder with a policy head and a critic head.

The critic head has one output, V(s), or |A| outputs, Q(s, .), as the algorithm table says.
Initialisation is orthogonal (as in OpenAI Baselines): gain sqrt(2) in the encoder, 0.01 on the
policy head (near-uniform initial policy), 1 on the critic head; biases are zero.
"""

from __future__ import annotations

import math
from typing import TypeVar, cast

import torch
from torch import nn

from rlhelpers.core.losses import ALGORITHMS

Layer = TypeVar("Layer", nn.Linear, nn.Conv2d)


def layer_init(layer: Layer, gain: float = math.sqrt(2)) -> Layer:
    """Orthogonal weights with ``gain`` and zero bias."""
    nn.init.orthogonal_(layer.weight, gain)
    assert layer.bias is not None, "layer_init's layers are built with a bias"
    nn.init.zeros_(layer.bias)
    return layer


class Encoder(nn.Module):
    """Observations -> ``out_features`` features, as a ``trunk`` (the per-observation layers whose graph the
    trainer's acting passes keep: the convolutions) followed by a ``top`` (the layers the update runs once on
    the whole rollout)."""

    out_features: int

    def trunk(self, obs: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def top(self, trunk_out: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.top(self.trunk(obs))


class NatureEncoder(Encoder):
    """Nature-DQN encoder: uint8 frames (N, 4, 84, 84) / 255 -> 512 features."""

    out_features = 512
    trunk_layers = 7  # three convolutions with their ReLUs, and the flattening; the top is the linear layer

    def __init__(self, in_channels: int = 4) -> None:
        super().__init__()
        self.net = nn.Sequential(
            layer_init(nn.Conv2d(in_channels, 32, 8, stride=4)), nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)), nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)), nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)), nn.ReLU(),
        )
        # Channels-last convolution weights: oneDNN's faster CPU layout (bench/layout.py measures it).
        self.net.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # to()'s stub lacks memory_format

    def trunk(self, obs: torch.Tensor) -> torch.Tensor:
        """The convolutions, flattened: (N, 3136). Float32 in training, float64 in the analysis.

        The frames go channels-last while still bytes, so the convolution does not reorder them as floats."""
        frames = obs.contiguous(memory_format=torch.channels_last).to(cast(nn.Conv2d, self.net[0]).weight.dtype)
        return self.net[:self.trunk_layers](frames / 255.0)

    def top(self, trunk_out: torch.Tensor) -> torch.Tensor:
        """The fully connected layer on the trunk's output."""
        return self.net[self.trunk_layers:](trunk_out)


class MLPEncoder(Encoder):
    """Two tanh layers for vector observations (classic control)."""

    def __init__(self, obs_dim: int, hidden_size: int = 64) -> None:
        super().__init__()
        self.out_features = hidden_size
        self.net = nn.Sequential(
            layer_init(nn.Linear(obs_dim, hidden_size)), nn.Tanh(),
            layer_init(nn.Linear(hidden_size, hidden_size)), nn.Tanh(),
        )

    def trunk(self, obs: torch.Tensor) -> torch.Tensor:
        """No layers: the observations as floats."""
        return obs.to(cast(nn.Linear, self.net[0]).weight.dtype)

    def top(self, trunk_out: torch.Tensor) -> torch.Tensor:
        """Both layers."""
        return self.net(trunk_out)


class ActorCritic(nn.Module):
    """Shared encoder, policy head (logits over A) and critic head (V: 1 output, Q: |A| outputs)."""

    def __init__(self, encoder: Encoder, n_actions: int, critic_outputs: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.policy_head = layer_init(nn.Linear(encoder.out_features, n_actions), gain=0.01)
        self.critic_head = layer_init(nn.Linear(encoder.out_features, critic_outputs), gain=1.0)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Policy logits (N, |A|) and critic output (N, 1) for V or (N, |A|) for Q."""
        return self.heads(self.encoder.trunk(obs))

    def heads(self, trunk_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The outputs from the encoder's trunk on: its top, then the policy and critic heads."""
        features = self.encoder.top(trunk_out)
        return self.policy_head(features), self.critic_head(features)


def build_model(obs_shape: tuple[int, ...], n_actions: int, algo: str, hidden_size: int = 64) -> ActorCritic:
    """Nature encoder for image stacks (C, 84, 84), MLP for flat vectors; the critic ``algo`` has (V or Q)."""
    if len(obs_shape) == 3:
        encoder: Encoder = NatureEncoder(obs_shape[0])
    elif len(obs_shape) == 1:
        encoder = MLPEncoder(obs_shape[0], hidden_size)
    else:
        raise ValueError(f"unsupported observation shape {obs_shape}")
    return ActorCritic(encoder, n_actions, critic_outputs=1 if ALGORITHMS[algo].critic == "V" else n_actions)


def sample_actions(logits: torch.Tensor) -> torch.Tensor:
    """a ~ pi(.|s) for each row of ``logits``: the same draw as ``Categorical(logits=logits).sample()``
    without its per-call validation and set-up."""
    return torch.multinomial(torch.softmax(logits, dim=-1), 1, replacement=True).squeeze(1)


class ActingTrunks:
    """The encoder trunk's outputs of a rollout's acting passes, kept with their graph while autograd is on, so that
    the update runs only the layers above the trunk on the whole rollout and back-propagates through them, instead of
    running the network again over the stored observations. One update per rollout uses the weights that acted, so
    the gradient is the same; on a CPU this saves the convolutions' second forward pass (docs/throughput.md). With
    ``reforward`` (a GPU trainer's choice, 1.10x and 1.22x faster on an H200, bench/results/) nothing is kept and the
    update runs the whole network again."""

    def __init__(self, model: ActorCritic, reforward: bool) -> None:
        self.model, self.reforward = model, reforward
        self.kept: list[torch.Tensor] = []

    def start(self) -> None:
        """A new rollout: what an earlier one kept (and did not update on) is let go."""
        self.kept = []

    def logits(self, obs: torch.Tensor) -> torch.Tensor:
        """The policy's logits for ``obs``, keeping the trunk's output for the update (unless ``reforward``)."""
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.reforward):
            trunk_out = self.model.encoder.trunk(obs)
        if not self.reforward:
            self.kept.append(trunk_out)
        with torch.no_grad():
            return self.model.heads(trunk_out)[0]

    def outputs(self, observations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The heads' outputs over the rollout, ``observations`` in acting order: through the kept trunks, or with
        ``reforward`` a new pass. What was kept is let go (the backward pass frees its graph)."""
        trunks = self.model.encoder.trunk(observations) if self.reforward else torch.cat(self.kept)
        self.kept = []
        return self.model.heads(trunks)
