"""Ways to run the trainer on a GPU that the package does not take: its measurements (bench/results/) did not
justify them.

Each is a subclass of ``Trainer`` that changes one thing and keeps what is computed; ``bench.throughput``
measures them beside the package's own trainer (``python -m bench.throughput --device cuda``). Not part of
``rlhelpers``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlhelpers.core.trainer import Trainer


class PinnedUploads(Trainer):
    """Frames reach the GPU from page-locked memory without blocking: each group's next observations are copied
    into that group's pinned buffer, then uploaded asynchronously. A buffer is written again only after the GPU
    has read it: the actions drawn from it are copied back to the CPU, which waits for the GPU, before the
    group's next step is received."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.staging: dict[int, torch.Tensor] = {}  # a pinned buffer per env group, by its first env
        super().__init__(*args, **kwargs)

    def _store_step(self, t: int, envs: slice, next_obs: np.ndarray | torch.Tensor, *step: Any) -> torch.Tensor:
        if self.device.type != "cuda":  # nothing to upload (a smoke run on the CPU)
            return super()._store_step(t, envs, next_obs, *step)
        assert isinstance(next_obs, np.ndarray)  # the env's observations, as collect_rollout passes them
        frames = torch.from_numpy(next_obs)
        if envs.start not in self.staging:
            self.staging[envs.start] = torch.empty_like(frames).pin_memory()
        self.staging[envs.start].copy_(frames)
        # The trainer turns what it is given into a tensor on its device: a tensor there already is used as it is.
        return super()._store_step(t, envs, self.staging[envs.start].to(self.device, non_blocking=True), *step)


class ActingGraphs(Trainer):
    """The CPU's way on a GPU too: the update back-propagates through the acting passes' trunks instead of running
    the network again over the rollout (``Trainer.reforward``, the package's choice with CUDA)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reforward = False


class TF32Convolutions(Trainer):
    """cuDNN's own default on Ampere and later GPUs: convolutions in TF32 (about 1e-3 relative error). The package
    turns it off, so that a run's fp32 is fp32; this row says what that costs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.device.type == "cuda":  # nothing to switch on the CPU (a smoke run)
            torch.backends.cudnn.allow_tf32 = True


VARIANTS: dict[str, type[Trainer]] = {"pinned": PinnedUploads, "acting-graphs": ActingGraphs, "tf32": TF32Convolutions}
