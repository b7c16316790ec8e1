"""The three actor-critic losses of docs/experiment.md, each next to its formula, and the algorithm
table ``ALGORITHMS`` that names each one's loss, critic kind and default coefficients.

Shapes: ``logits`` (N, |A|); ``critic`` (N, 1) holding V(s) for a2c or (N, |A|) holding Q(s, .) for
task1/task2; ``actions`` (N,) int64; ``returns`` (N,) n-step returns R_t. Every MSE is the plain
mean of squared errors, without a factor 1/2. Each function returns the total loss and a dict of
detached scalar tensors for logging (the trainer turns them into floats once per update).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

Stats = dict[str, Tensor]
LossFn = Callable[..., tuple[Tensor, Stats]]


def state_value(logits: Tensor, critic: Tensor) -> Tensor:
    """V(s) for bootstrapping: the critic itself when it has one output, else V~(s) = sum_a pi(a|s) Q(s,a)."""
    if critic.shape[-1] == 1:
        return critic.squeeze(-1)
    return (torch.softmax(logits, dim=-1) * critic).sum(-1)


def explained_variance(estimate: Tensor, target: Tensor) -> Tensor:
    """1 - Var[target - estimate] / Var[target] (1 is perfect, 0 is no better than a constant).

    NaN when the target is constant, where it is undefined (as in Stable-Baselines3). Constancy is
    tested exactly: the float variance of a constant can be a rounding error rather than zero.
    """
    constant = target.amin() == target.amax()
    return torch.where(constant, torch.nan, 1.0 - (target - estimate).var() / target.var())


def _policy_terms(logits: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """log pi(.|s), pi(.|s) and the batch's mean entropy mean(H)."""
    log_probs = torch.log_softmax(logits, dim=-1)
    probs = log_probs.exp()
    entropy = -(probs * log_probs).sum(-1).mean()
    return log_probs, probs, entropy


def _weighted(actor_loss: Tensor, critic_loss: Tensor, entropy: Tensor, estimate: Tensor,
              returns: Tensor, pg_coef: float, vf_coef: float, ent_coef: float) -> tuple[Tensor, Stats]:
    """pg_coef * actor_loss + vf_coef * critic_loss - ent_coef * entropy, and the statistics of the terms."""
    loss = pg_coef * actor_loss + vf_coef * critic_loss - ent_coef * entropy
    return loss, {
        "actor_loss": actor_loss.detach(),
        "critic_loss": critic_loss.detach(),
        "entropy": entropy.detach(),
        "explained_variance": explained_variance(estimate.detach(), returns),
    }


def a2c_loss(logits: Tensor, critic: Tensor, actions: Tensor, returns: Tensor,
             pg_coef: float, vf_coef: float, ent_coef: float) -> tuple[Tensor, Stats]:
    """loss = -pg_coef * mean(A_t log pi(a_t|s_t)) + vf_coef * MSE(V(s_t), R_t) - ent_coef * mean(H),
    with A_t = R_t - V(s_t) treated as a constant."""
    log_probs, _, entropy = _policy_terms(logits)
    values = critic.squeeze(-1)
    advantages = (returns - values).detach()
    actor_loss = -(advantages * log_probs.gather(1, actions.unsqueeze(1)).squeeze(1)).mean()
    return _weighted(actor_loss, F.mse_loss(values, returns), entropy, values, returns, pg_coef, vf_coef, ent_coef)


def _all_action_loss(logits: Tensor, q_values: Tensor, actions: Tensor, returns: Tensor,
                     coefs: tuple[float, float, float], baseline: bool) -> tuple[Tensor, Stats]:
    """task1's loss, or with ``baseline`` task2's; ``coefs`` are pg_coef, vf_coef and ent_coef."""
    log_probs, probs, entropy = _policy_terms(logits)
    q_sa = q_values.gather(1, actions.unsqueeze(1)).squeeze(1)
    actor_weights = q_values - (probs * q_values).sum(-1, keepdim=True) if baseline else q_values  # Q - V~ or Q
    actor_loss = -(probs * actor_weights.detach()).sum(-1).mean()
    return _weighted(actor_loss, F.mse_loss(q_sa, returns), entropy, q_sa, returns, *coefs)


def task1_loss(logits: Tensor, critic: Tensor, actions: Tensor, returns: Tensor,
               pg_coef: float, vf_coef: float, ent_coef: float) -> tuple[Tensor, Stats]:
    """All-action actor-critic:
    loss = -pg_coef * mean_s sum_a pi(a|s) Q(s,a).detach() + vf_coef * MSE(Q(s_t,a_t), R_t) - ent_coef * mean(H).
    The executed actions enter only the critic loss."""
    return _all_action_loss(logits, critic, actions, returns, (pg_coef, vf_coef, ent_coef), baseline=False)


def task2_loss(logits: Tensor, critic: Tensor, actions: Tensor, returns: Tensor,
               pg_coef: float, vf_coef: float, ent_coef: float) -> tuple[Tensor, Stats]:
    """task1 with the baseline V~(s) = sum_a pi(a|s) Q(s,a):
    actor loss = -mean_s sum_a pi(a|s) (Q(s,a) - V~(s)).detach(); critic and entropy terms as task1.
    Since sum_a grad pi(a|s) = 0, its actor gradient equals task1's in exact arithmetic."""
    return _all_action_loss(logits, critic, actions, returns, (pg_coef, vf_coef, ent_coef), baseline=True)


@dataclass(frozen=True)
class Algorithm:
    """One actor-critic algorithm: its loss, its critic's kind and the hyperparameters a run of it takes unless it
    sets its own (tuned for Atari; ``rlhelpers.core.config.ENV_DEFAULTS`` changes some for other envs)."""

    loss: LossFn
    critic: str  # "V": one output, V(s); "Q": one output per action, Q(s, .)
    defaults: dict[str, float]  # lr, pg_coef, vf_coef and ent_coef


# The algorithm table (docs/experiment.md): everything else reads it, so a new algorithm is a loss and a row.
ALGORITHMS: dict[str, Algorithm] = {
    "a2c": Algorithm(a2c_loss, "V", {"lr": 7e-4, "pg_coef": 1.0, "vf_coef": 0.25, "ent_coef": 0.01}),
    "task1": Algorithm(task1_loss, "Q", {"lr": 1.5e-3, "pg_coef": 0.1, "vf_coef": 0.5, "ent_coef": 0.001}),
    "task2": Algorithm(task2_loss, "Q", {"lr": 1.5e-3, "pg_coef": 0.1, "vf_coef": 0.5, "ent_coef": 0.001}),
}
