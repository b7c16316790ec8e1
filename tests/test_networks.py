"""The networks of the spec: the Nature-DQN encoder on frames scaled to [0, 1], and the heads of each algorithm."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from rlhelpers.core.networks import NatureEncoder, build_model


def test_nature_encoder_is_the_dqn_torso() -> None:
    """Conv 32x8x8/4, 64x4x4/2, 64x3x3/1, Linear 3136->512, each followed by a ReLU."""
    layers = list(NatureEncoder().net)
    convs = [(m.in_channels, m.out_channels, m.kernel_size, m.stride) for m in layers if isinstance(m, nn.Conv2d)]
    assert convs == [(4, 32, (8, 8), (4, 4)), (32, 64, (4, 4), (2, 2)), (64, 64, (3, 3), (1, 1))]
    (linear,) = [m for m in layers if isinstance(m, nn.Linear)]
    assert (linear.in_features, linear.out_features) == (3136, 512)
    weighted = [i for i, m in enumerate(layers) if isinstance(m, (nn.Conv2d, nn.Linear))]
    assert all(isinstance(layers[i + 1], nn.ReLU) for i in weighted)


def test_nature_encoder_divides_uint8_frames_by_255() -> None:
    torch.manual_seed(0)
    encoder = NatureEncoder()
    frames = torch.randint(0, 256, (2, 4, 84, 84), dtype=torch.uint8)
    features = encoder(frames)
    assert features.dtype == torch.float32 and features.shape == (2, 512)
    torch.testing.assert_close(features, encoder.net(frames.float() / 255.0))


@pytest.mark.parametrize(("algo", "critic_outputs"), [("a2c", 1), ("task1", 6), ("task2", 6)])
def test_heads_give_logits_over_actions_and_v_or_q(algo: str, critic_outputs: int) -> None:
    torch.manual_seed(0)
    model = build_model((4, 84, 84), 6, algo)
    logits, critic = model(torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8))
    assert logits.shape == (3, 6) and critic.shape == (3, critic_outputs)
    entropy = torch.distributions.Categorical(logits=logits).entropy()
    assert (entropy > 0.99 * math.log(6)).all()  # the 0.01-gain policy head starts near-uniform
