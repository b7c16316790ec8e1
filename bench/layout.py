"""Convolution weight layout: the Nature network's share of one training iteration, default vs channels-last.

Run from the repository root on an otherwise idle machine::

    python -m bench.layout

One iteration here is what the trainer's network does per rollout of 16 envs x 5 steps: six
inference forward passes on 16 observations (five actions and the bootstrap) and one forward and
backward pass on the 80 stored observations, with 1 torch thread. The two layouts are timed in
interleaved repetitions; the ratio printed is the median of the per-repetition ratios.
"""

from __future__ import annotations

import statistics
import time

import torch

from rlhelpers.core.networks import ActorCritic, build_model

REPETITIONS = 15
ITERATIONS = 5


def iteration(model: ActorCritic, rollout_obs: torch.Tensor, batch_obs: torch.Tensor) -> None:
    with torch.inference_mode():
        for _ in range(6):
            model(rollout_obs)
    logits, critic = model(batch_obs)
    (logits.sum() + critic.sum()).backward()


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rollout_obs = torch.randint(0, 256, (16, 4, 84, 84), dtype=torch.uint8)
    batch_obs = torch.randint(0, 256, (80, 4, 84, 84), dtype=torch.uint8)
    channels_last = build_model((4, 84, 84), 6, "task1")  # rlhelpers' layout
    default = build_model((4, 84, 84), 6, "task1")
    default.encoder.net.to(memory_format=torch.contiguous_format)  # type: ignore[call-overload]  # stub lacks memory_format
    models = {"default": default, "channels-last": channels_last}
    times: dict[str, list[float]] = {name: [] for name in models}
    for model in models.values():
        iteration(model, rollout_obs, batch_obs)  # warm-up
    for _ in range(REPETITIONS):
        for name, model in models.items():
            start = time.perf_counter()
            for _ in range(ITERATIONS):
                iteration(model, rollout_obs, batch_obs)
            times[name].append((time.perf_counter() - start) / ITERATIONS * 1000)
    for name, values in times.items():
        print(f"{name:>13}: median {statistics.median(values):.1f} ms per iteration")
    ratios = [d / c for d, c in zip(times["default"], times["channels-last"], strict=True)]
    print(f"default / channels-last: median {statistics.median(ratios):.2f}x "
          f"(per repetition: {', '.join(f'{r:.2f}' for r in sorted(ratios))})")


if __name__ == "__main__":
    main()
