"""Each loss's gradient against its formula on a small random batch."""

import pytest
import torch

from rlhelpers.core.losses import ALGORITHMS, a2c_loss, explained_variance, state_value, task1_loss, task2_loss
from rlhelpers.core.networks import ActorCritic, MLPEncoder
from rlhelpers.core.optim import RMSpropTFLike

N, A = 7, 4


def batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(N, A, generator=g, dtype=torch.float64)
    q_values = torch.randn(N, A, generator=g, dtype=torch.float64)
    actions = torch.randint(0, A, (N,), generator=g)
    returns = torch.randn(N, generator=g, dtype=torch.float64)
    return logits, q_values, actions, returns


def grads(loss_fn, logits, critic, actions, returns, **coefs) -> tuple[torch.Tensor, torch.Tensor]:
    logits = logits.clone().requires_grad_(True)
    critic = critic.clone().requires_grad_(True)
    loss, _ = loss_fn(logits, critic, actions, returns, **coefs)
    loss.backward()
    return logits.grad, critic.grad


@pytest.mark.parametrize("loss_fn", [task1_loss, task2_loss])
def test_all_action_actor_gradient_is_pi_times_q_minus_v_tilde(loss_fn) -> None:
    logits, q_values, actions, returns = batch()
    d_logits, _ = grads(loss_fn, logits, q_values, actions, returns, pg_coef=1.0, vf_coef=0.0, ent_coef=0.0)
    probs = torch.softmax(logits, -1)
    v_tilde = (probs * q_values).sum(-1, keepdim=True)
    # d/dlogit_k of sum_a pi_a Q_a = pi_k (Q_k - V~); the loss is its negated batch mean
    torch.testing.assert_close(d_logits, -probs * (q_values - v_tilde) / N)


def test_task1_and_task2_actor_gradients_agree() -> None:
    logits, q_values, actions, returns = batch(seed=3)
    coefs = {"pg_coef": 0.1, "vf_coef": 0.5, "ent_coef": 0.001}
    g1 = grads(task1_loss, logits.float(), q_values.float(), actions, returns.float(), **coefs)
    g2 = grads(task2_loss, logits.float(), q_values.float(), actions, returns.float(), **coefs)
    torch.testing.assert_close(g1[0], g2[0], rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(g1[1], g2[1])


@pytest.mark.parametrize("loss_fn", [task1_loss, task2_loss])
def test_task_critic_gradient_only_on_taken_actions(loss_fn) -> None:
    logits, q_values, actions, returns = batch(seed=1)
    _, d_q = grads(loss_fn, logits, q_values, actions, returns, pg_coef=1.0, vf_coef=1.0, ent_coef=0.0)
    q_sa = q_values.gather(1, actions[:, None]).squeeze(1)
    expected = torch.zeros_like(q_values)
    expected[torch.arange(N), actions] = 2 * (q_sa - returns) / N  # d MSE / d Q(s_t, a_t), no factor 1/2
    torch.testing.assert_close(d_q, expected)


def test_a2c_gradients_match_formula() -> None:
    logits, q_values, actions, returns = batch(seed=2)
    values = q_values[:, :1]
    d_logits, d_v = grads(a2c_loss, logits, values, actions, returns, pg_coef=1.0, vf_coef=0.25, ent_coef=0.0)
    probs = torch.softmax(logits, -1)
    advantages = returns - values.squeeze(1)
    one_hot = torch.nn.functional.one_hot(actions, A).double()
    # d log pi(a|s) / d logit_k = 1[k = a] - pi_k; A_t is a constant
    torch.testing.assert_close(d_logits, -(advantages[:, None] * (one_hot - probs)) / N)
    torch.testing.assert_close(d_v, (0.25 * 2 * (values.squeeze(1) - returns) / N)[:, None])


def test_entropy_gradient() -> None:
    logits, q_values, actions, returns = batch(seed=4)
    d_logits, _ = grads(task1_loss, logits, q_values, actions, returns, pg_coef=0.0, vf_coef=0.0, ent_coef=1.0)
    log_probs = torch.log_softmax(logits, -1)
    probs = log_probs.exp()
    entropy = -(probs * log_probs).sum(-1, keepdim=True)
    # dH/dlogit_k = -pi_k (log pi_k + H); the loss subtracts the batch-mean entropy
    torch.testing.assert_close(d_logits, probs * (log_probs + entropy) / N)


@pytest.mark.parametrize("algo", ["a2c", "task1", "task2"])
def test_actor_and_critic_terms_stay_in_their_heads(algo: str) -> None:
    torch.manual_seed(0)
    critic_outputs = 1 if algo == "a2c" else A
    model = ActorCritic(MLPEncoder(3, 8), A, critic_outputs)
    obs = torch.randn(N, 3)
    actions = torch.randint(0, A, (N,))
    returns = torch.randn(N)

    policy_head, critic_head = model.policy_head, model.critic_head
    assert isinstance(policy_head, torch.nn.Linear) and isinstance(critic_head, torch.nn.Linear)

    def head_grads(**coefs: float) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        model.zero_grad(set_to_none=True)
        logits, critic = model(obs)
        ALGORITHMS[algo].loss(logits, critic, actions, returns, **coefs)[0].backward()
        return policy_head.weight.grad, critic_head.weight.grad

    policy_grad, critic_grad = head_grads(pg_coef=1.0, vf_coef=0.0, ent_coef=0.0)
    assert policy_grad is not None and policy_grad.abs().sum() > 0
    assert critic_grad is None or critic_grad.abs().sum() == 0  # the actor sends nothing into the critic
    policy_grad, critic_grad = head_grads(pg_coef=0.0, vf_coef=1.0, ent_coef=0.0)
    assert critic_grad is not None and critic_grad.abs().sum() > 0
    assert policy_grad is None or policy_grad.abs().sum() == 0  # the critic sends nothing into the policy


def test_state_value_is_v_or_expected_q() -> None:
    logits, q_values, _, _ = batch()
    torch.testing.assert_close(state_value(logits, q_values[:, :1]), q_values[:, 0])
    torch.testing.assert_close(state_value(logits, q_values), (torch.softmax(logits, -1) * q_values).sum(-1))


def test_explained_variance_against_its_formula_and_nan_for_a_constant_target() -> None:
    target = torch.tensor([1.0, 2.0, 4.0, 8.0])
    predicted = torch.tensor([1.5, 2.0, 3.0, 9.0])
    torch.testing.assert_close(explained_variance(predicted, target), 1 - (target - predicted).var() / target.var())
    assert explained_variance(target, target) == 1.0
    constant = torch.full((7,), 1 / 3)
    assert constant.var() > 0  # a rounding error in float32, not zero: constancy must be tested exactly
    assert explained_variance(torch.randn(7), constant).isnan()  # undefined, as in Stable-Baselines3


def test_rmsprop_tf_like_update() -> None:
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    opt = RMSpropTFLike([w], lr=0.1, alpha=0.9, eps=1e-5)
    grad = torch.tensor([0.5, 3.0])
    expected = w.detach().clone()
    square_avg = torch.ones(2)  # TF initialises the running average to ones
    for _ in range(3):
        w.grad = grad.clone()
        opt.step()
        square_avg = 0.9 * square_avg + 0.1 * grad**2
        expected -= 0.1 * grad / torch.sqrt(square_avg + 1e-5)  # eps inside the square root
    torch.testing.assert_close(w.detach(), expected)
    restored = RMSpropTFLike([torch.nn.Parameter(torch.zeros(2))], lr=0.1)
    restored.load_state_dict(opt.state_dict())
    torch.testing.assert_close(restored.state[restored.param_groups[0]["params"][0]]["square_avg"], square_avg)
