"""RMSprop with TensorFlow semantics, the optimizer A2C on Atari was tuned with.

Differences from ``torch.optim.RMSprop``: the running square average starts at ones (not zeros),
and epsilon is added inside the square root::

    v <- alpha * v + (1 - alpha) * g^2          (v_0 = 1)
    w <- w - lr * g / sqrt(v + eps)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NoReturn, overload

import torch


class RMSpropTFLike(torch.optim.Optimizer):
    """TensorFlow-style RMSprop without momentum or centring."""

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, alpha: float = 0.99, eps: float = 1e-5) -> None:
        super().__init__(params, {"lr": lr, "alpha": alpha, "eps": eps})

    @overload
    def step(self, closure: None = None) -> None: ...

    @overload
    def step(self, closure: Callable[[], float]) -> NoReturn: ...

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> None:
        """One update of every parameter that has a gradient, from gradients already computed (no closure)."""
        if closure is not None:
            raise ValueError("RMSpropTFLike.step takes no closure: compute the loss and backward() first")
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params]
            for p in params:
                if "square_avg" not in self.state[p]:
                    self.state[p]["square_avg"] = torch.ones_like(p)
            square_avgs = [self.state[p]["square_avg"] for p in params]
            torch._foreach_mul_(square_avgs, group["alpha"])
            torch._foreach_addcmul_(square_avgs, grads, grads, value=1 - group["alpha"])
            denom = torch._foreach_add(square_avgs, group["eps"])
            torch._foreach_sqrt_(denom)
            torch._foreach_addcdiv_(params, grads, denom, value=-group["lr"])
