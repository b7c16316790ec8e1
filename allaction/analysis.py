"""The report's gradient facts, measured on real states from model snapshots.

The measurements, each defined in its own docstring:

1. ``task_gradient_agreement``: task1's and task2's actor gradients on the same states and weights;
2. ``estimator_variance``: the sampled-action estimator's variance against the all-action gradient's (a Q critic);
3. ``a2c_estimator_variance``: the variance of A2C's own sampled estimator (a V critic);
4. ``loss_term_gradients``: the gradient that each weighted term of a run's loss puts on the encoder and the
   policy head;
5. ``advantage_scale``: the size of the advantage the actor follows and of the critic's error;
6. ``optimizer_regime``: per run, where RMSprop's running mean square lies against its eps.

They share three conventions. States: those ``collect_batch`` records from each snapshot's own policy.
Snapshots: those ``stage_steps`` chooses. Actor gradients: taken with respect to ``actor_parameters`` (the
shared encoder and the policy head), whose count is reported with each result. ``analyze_runs`` measures
every run's snapshots and ``write_analysis`` saves the results.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import importlib.metadata
import json
import math
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from allaction.experiment import ANALYSIS_JSON
from rlhelpers.core.config import filled
from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.losses import ALGORITHMS, state_value
from rlhelpers.core.networks import ActorCritic
from rlhelpers.plots import figures_dir
from rlhelpers.runner.config import TrainConfig
from rlhelpers.runner.run import resolve_config
from rlhelpers.runner.store import RunDirectory, load_model, write_atomically


@dataclass
class Batch:
    """States visited by a policy, with the actions it took and the n-step returns that followed."""

    obs: torch.Tensor
    actions: torch.Tensor
    returns: torch.Tensor


def collect_batch(model: ActorCritic, config: TrainConfig, n_rollouts: int, seed: int,
                  burn_in_steps: int = 1000, gap_steps: int = 100) -> Batch:
    """States from ``n_rollouts`` training rollouts (n_envs x n_steps states each) played by ``model``'s
    own policy with the trainer's rollout code, in the training envs reset with ``seed``. Each state carries
    the action taken and the trainer's n-step return (clipped rewards on Atari), bootstrapped from the
    critic at the state after its rollout.

    Play starts with ``burn_in_steps`` unrecorded steps per env, so that the states are from mid-game
    rather than the nearly identical opening frames of fresh games; then records a rollout, plays
    ``gap_steps`` unrecorded steps per env, so that the next is from different rallies, records it, and
    so on. Both counts are rounded up to whole rollouts of n_steps. The model is not changed.
    """
    from rlhelpers.core.trainer import Trainer  # the trainer's own rollout code, so the states are the training ones

    # The replay logs nothing (a snapshot's saved mode may be online, which would want a W&B key).
    replay_config, device = resolve_config(dataclasses.replace(config, seed=seed, device="cpu", torch_threads=0,
                                                               wandb_mode="disabled"))
    burn_in_rollouts, gap_rollouts = (math.ceil(steps / config.n_steps) for steps in (burn_in_steps, gap_steps))
    obs, actions, returns = [], [], []
    with closing(Trainer(replay_config, device, model=copy.deepcopy(model))) as trainer:
        for i in range(n_rollouts):
            with torch.inference_mode():  # no update follows: the rollouts need no autograd graph
                for _ in range(burn_in_rollouts if i == 0 else gap_rollouts):
                    trainer.collect_rollout()
                trainer.collect_rollout()
                last_values = state_value(*trainer.model(trainer.obs))
            returns.append(trainer.buffer.returns(last_values, config.gamma).flatten())
            obs.append(trainer.buffer.observations.flatten(0, 1).clone())
            actions.append(trainer.buffer.actions.flatten().clone())
    return Batch(torch.cat(obs), torch.cat(actions), torch.cat(returns))


def actor_parameters(model: ActorCritic) -> list[torch.nn.Parameter]:
    """The encoder's and the policy head's parameters: everything an actor loss reaches (the critic head
    receives no actor gradient: Q and V enter the actor losses through a stop-gradient)."""
    return [p for name, p in model.named_parameters() if not name.startswith("critic_head.")]


def _gradient_signal(mean_g: torch.Tensor, variance: float, n: int, params: list[torch.nn.Parameter],
                     per_sample: dict[str, float], batch_size: int) -> dict[str, Any]:
    """What both estimator measurements report beside their variances: the counts, |mean g|^2 over the n
    draws and the signal |E g|^2, estimated without bias as |mean g|^2 minus the variance of that mean
    (``variance`` / (n - 1), ``variance`` the draws' population variance); then, for each estimator's
    ``per_sample`` variance, the variance of a batch of B = ``batch_size`` and its signal-to-noise ratio
    |E g|^2 / (variance / B). Above 1, a batch's gradient points mostly where the expected gradient does;
    below 1, mostly in directions that the next batch undoes."""
    mean_sq = float(mean_g.square().sum())
    signal = mean_sq - (variance / (n - 1) if n > 1 else 0.0)
    batch = {name: var / batch_size for name, var in per_sample.items()}
    return {"n_states": n, "n_parameters": sum(p.numel() for p in params), "mean_gradient_sq_norm": mean_sq,
            "signal_sq_norm": signal, "batch": {"size": batch_size, **batch},
            "batch_signal_to_noise": {name: _ratio(signal, var) for name, var in batch.items()}}


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.inf


def _flat_grad(output: torch.Tensor, params: list[torch.nn.Parameter]) -> torch.Tensor:
    grads = torch.autograd.grad(output, params, retain_graph=True, materialize_grads=True)
    return torch.cat([g.reshape(-1) for g in grads])


def _loss(outputs: tuple[torch.Tensor, torch.Tensor], algo: str, batch: Batch, pg_coef: float, vf_coef: float,
          ent_coef: float) -> torch.Tensor:
    """``algo``'s training loss over the batch from the model's ``outputs`` on it, with these coefficients."""
    logits, critic = outputs
    return ALGORITHMS[algo].loss(logits, critic, batch.actions, batch.returns.to(logits.dtype), pg_coef=pg_coef,
                                 vf_coef=vf_coef, ent_coef=ent_coef)[0]


def actor_gradient(model: ActorCritic, algo: str, batch: Batch) -> torch.Tensor:
    """Flat gradient of ``algo``'s actor term (pg_coef 1, no critic or entropy term) over the batch."""
    return _flat_grad(_loss(model(batch.obs), algo, batch, 1.0, 0.0, 0.0), actor_parameters(model))


def task_gradient_agreement(model: ActorCritic, batch: Batch) -> dict[str, Any]:
    """task1's actor gradient, of -mean_s sum_a pi(a|s) sg[Q(s,a)], against task2's, of
    -mean_s sum_a pi(a|s) sg[Q(s,a) - V~(s)], on the same states and weights, in float32 and float64: their
    cosine and relative difference. The two are equal in exact arithmetic because sum_a grad pi(a|s) = 0. (The
    counts of states and parameters are those of ``estimator_variance``, measured beside it.)"""
    result = {}
    for name, dtype in (("float32", torch.float32), ("float64", torch.float64)):
        typed = copy.deepcopy(model).to(dtype)
        a, b = (actor_gradient(typed, algo, batch).double() for algo in ("task1", "task2"))
        result[name] = {"cosine": float(torch.dot(a, b) / (a.norm() * b.norm())),
                        "relative_difference": float((a - b).norm() / a.norm())}
    return result


def estimator_variance(model: ActorCritic, batch: Batch, batch_size: int) -> dict[str, Any]:
    """Exact variance of the sampled-action estimator against the all-action gradient (a Q critic), per
    state (over the actions), per sample (states and actions) and for a batch of ``batch_size`` states.

    For one state s, the all-action gradient g(s) = grad sum_a pi(a|s) sg[Q(s,a)] is exact given s, while
    the sampled estimator g(s, a) = grad log pi(a|s) sg[Q(s,a) - V~(s)], a ~ pi(.|s), has the same
    expectation (sum_a pi(a|s) g(s, a) = g(s), checked) and the variance
    Var_a = sum_a pi(a|s) |g(s, a) - g(s)|^2 (trace of its covariance), computed exactly over the |A|
    actions. Over a batch of B states both estimators also vary with the states drawn:
    Var_s = E_s |g(s)|^2 - |E_s g(s)|^2. Per sample (one state s from the batch, for the sampled estimator
    with one a ~ pi): all-action Var_s, sampled Var_s + E_s Var_a, like-for-like with
    ``a2c_estimator_variance``. For the batch mean, treating the B states as independent: these over B.
    """
    params = actor_parameters(model)
    sum_sq_g = action_var = identity_error = 0.0
    sum_g: torch.Tensor | float = 0.0  # a tensor from the first state on
    for obs in batch.obs:
        logits, q_values = model(obs.unsqueeze(0))
        log_probs = torch.log_softmax(logits, dim=-1)[0]
        probs = log_probs.exp().detach()
        q = q_values[0].detach()
        advantage = q - (probs * q).sum()
        all_action = _flat_grad((log_probs.exp() * q).sum(), params)
        sampled = [_flat_grad(log_probs[a], params) * advantage[a] for a in range(len(probs))]
        mixture = sum(p * g for p, g in zip(probs, sampled, strict=True))
        identity_error = max(identity_error, float((mixture - all_action).norm() / all_action.norm().clamp_min(1e-30)))
        action_var += float(sum(p * (g - all_action).square().sum() for p, g in zip(probs, sampled, strict=True)))
        sum_g = sum_g + all_action.double()
        sum_sq_g += float(all_action.double().square().sum())
    n = len(batch.obs)
    mean_g = sum_g / n
    assert isinstance(mean_g, torch.Tensor)  # the batch has states (none: the division above raised)
    state_var = sum_sq_g / n - float(mean_g.square().sum())
    per_state_action_var = action_var / n
    per_sample = {"all_action": state_var, "sampled": state_var + per_state_action_var}
    return {
        **_gradient_signal(mean_g, state_var, n, params, per_sample, batch_size),
        "per_state": {"sampled": per_state_action_var},  # the all-action gradient is exact given the state
        "per_sample": per_sample,
        "sampled_over_all_action_batch": _ratio(per_sample["sampled"], per_sample["all_action"]),
        "expectation_identity_max_relative_error": identity_error,
    }


def a2c_estimator_variance(model: ActorCritic, batch: Batch, batch_size: int) -> dict[str, Any]:
    """The variance of A2C's own per-sample estimator A_t grad log pi(a_t|s_t), with its V critic and n-step
    advantage A_t = R_t - V(s_t), on its own rollouts: the empirical trace of its covariance over the batch's
    samples (states, actions and returns all vary), and for a batch of ``batch_size`` samples."""
    params = actor_parameters(model)
    grads = []
    for obs, action, ret in zip(batch.obs, batch.actions, batch.returns, strict=True):
        logits, value = model(obs.unsqueeze(0))
        advantage = (ret - value[0, 0]).detach()
        grads.append(_flat_grad(torch.log_softmax(logits, dim=-1)[0, action] * advantage, params).double())
    stacked = torch.stack(grads)
    mean_g = stacked.mean(0)
    variance = float((stacked - mean_g).square().sum(1).mean())
    return {**_gradient_signal(mean_g, variance, len(grads), params, {"sampled": variance}, batch_size),
            "per_sample": variance}


def loss_term_gradients(model: ActorCritic, batch: Batch, config: TrainConfig) -> dict[str, Any]:
    """Norm of the gradient of each weighted term of ``config``'s algorithm's loss, with its coefficients
    (c_pg x actor, c_vf x critic, c_ent x entropy), on the encoder's and on the policy head's parameters,
    over the batch: which term moves the policy, and which shapes the shared features."""
    groups = {"encoder": list(model.encoder.parameters()), "policy_head": list(model.policy_head.parameters())}
    weights = {"actor": (filled(config.pg_coef, "pg_coef"), 0.0, 0.0),
               "critic": (0.0, filled(config.vf_coef, "vf_coef"), 0.0),
               "entropy": (0.0, 0.0, filled(config.ent_coef, "ent_coef"))}
    outputs = model(batch.obs)
    losses = {term: _loss(outputs, config.algo, batch, *coefs) for term, coefs in weights.items()}
    return {term: {group: float(_flat_grad(loss, params).norm()) for group, params in groups.items()}
            for term, loss in losses.items()}


def advantage_scale(model: ActorCritic, algo: str, batch: Batch) -> dict[str, float]:
    """Root mean square over the batch of the advantage that weights the actor's gradient and of the
    critic's error against its own n-step targets R_t.

    For a Q critic the advantage is Q(s,a) - V~(s), its size the pi-weighted spread
    sqrt(sum_a pi(a|s) (Q(s,a) - V~(s))^2), and the error R_t - Q(s_t,a_t); for A2C's V critic both are
    A_t = R_t - V(s_t). A Q critic whose spread over the actions is small beside its error gives the
    all-action actor a small and unreliable signal, however low its variance.
    """
    with torch.inference_mode():
        logits, critic = model(batch.obs)
        logits, critic, returns = logits.double(), critic.double(), batch.returns.double()
        if ALGORITHMS[algo].critic == "V":
            error = returns - state_value(logits, critic)
            advantage_sq = error.square()
        else:
            probs = torch.softmax(logits, dim=-1)
            advantage_sq = (probs * (critic - state_value(logits, critic).unsqueeze(-1)).square()).sum(-1)
            error = returns - critic.gather(1, batch.actions.long().unsqueeze(-1)).squeeze(-1)
    return {"advantage_rms": float(advantage_sq.mean().sqrt()), "critic_rms_error": float(error.square().mean().sqrt())}


def optimizer_regime(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """Per parameter group (encoder, policy head, critic head), from a training checkpoint's RMSprop state: how
    many parameters there are, the share whose running mean square v lies below the run's ``eps``, and the median
    sqrt(v); with the checkpoint's step and that eps.

    TF-style RMSprop steps by lr g / sqrt(v + eps), v the running mean square of the parameter's gradient.
    Where v is far below eps, the step is plain gradient descent at rate lr / sqrt(eps), proportional to the
    gradient, so a loss term's weight and its advantage's size set how far the parameter moves; where v is
    far above eps, RMSprop divides the gradient's size away.
    """
    eps = TrainConfig.from_dict(checkpoint["config"]).rms_eps
    optimizer_state = checkpoint["optimizer"]
    indices = [index for group in optimizer_state["param_groups"] for index in group["params"]]
    square_avgs: dict[str, list[torch.Tensor]] = {}
    for index, name in zip(indices, checkpoint["model"], strict=True):  # the parameters, in the optimizer's order
        head = name.split(".", 1)[0]  # the part of the network the parameter belongs to
        if index in optimizer_state["state"]:
            square_avgs.setdefault(head if head in ("policy_head", "critic_head") else "encoder", []).append(
                optimizer_state["state"][index]["square_avg"].flatten().double())
    joined = {group: torch.cat(values) for group, values in square_avgs.items()}
    groups = {group: {"n_parameters": v.numel(), "below_eps_share": float((v < eps).double().mean()),
                      "median_rms": float(v.median().sqrt())} for group, v in joined.items()}
    return {"step": int(checkpoint["num_timesteps"]), "eps": eps, "groups": groups}


# ---------------------------------------------------------------- the command: every run's snapshots

def _evenly_spaced(items: list[Any], n: int) -> list[Any]:
    """``n`` of ``items`` spread evenly from the first to the last (all of them if there are no more: the
    rounded picks then cover every index)."""
    picks = np.linspace(0, len(items) - 1, n).round().astype(int)
    return [items[i] for i in sorted(set(picks.tolist()))]


def stage_steps(steps: dict[str, list[int]], n_stages: int) -> dict[str, list[int]]:
    """The steps to measure of each run, in order: ``n_stages - 1`` steps spread evenly (first to last) over
    the steps that every run has, so that runs can be compared at one step, then the run's own last step
    (a step once only; only the last for a single stage). Runs that share no step get their own first,
    last and evenly spaced steps between instead."""
    shared = sorted(set.intersection(*(set(found) for found in steps.values()))) if steps else []
    if not shared:
        return {run: sorted(found)[-1:] if n_stages == 1 else _evenly_spaced(sorted(found), n_stages)
                for run, found in steps.items()}
    picks = _evenly_spaced(shared, n_stages - 1)
    return {run: sorted({*picks, max(found)}) for run, found in steps.items()}


# Raise whenever a measurement above changes, so that analyze does not keep results measured the old way.
METHOD_VERSION = 1


def _entries_of_gone_snapshots(reusable: dict[str, dict[str, Any]],
                               local: dict[str, dict[int, Path]]) -> dict[str, dict[int, dict[str, Any]]]:
    """The earlier entries, per run and step, whose snapshot is gone and which therefore cannot be measured
    again: all of a run without snapshots here (a fresh clone, or a run measured from another runs directory),
    and those of a run that lost its older snapshots (a new machine in the middle of training) up to its
    newest snapshot. An entry past the newest snapshot belongs to an earlier attempt at a run restarted from
    step 0, and is dropped. The entries returned are kept whatever steps are chosen to be measured."""
    kept: dict[str, dict[int, dict[str, Any]]] = {}
    for key, entry in reusable.items():
        run, step = key.rpartition("@")[0], int(entry["step"])
        if step not in local.get(run, {}) and step <= max(local.get(run, {}), default=step):
            kept.setdefault(run, {})[step] = entry
    return kept


def analyze_runs(runs_dir: str | Path, n_rollouts: int = 4, n_stages: int = 4, seed: int = 7,
                 burn_in_steps: int = 1000, gap_steps: int = 100, show_progress: bool = False,
                 previous: dict[str, Any] | None = None,
                 on_measured: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Every measurement above for the snapshots of each run under ``runs_dir``: ``n_stages`` per run, at the
    steps ``stage_steps`` chooses, on ``collect_batch``'s states with these settings (``seed`` the env seed);
    and each run's ``optimizer_regime`` from its newest checkpoint, the only state that keeps the optimizer.

    A snapshot's entry in ``previous`` (earlier results) is kept instead of measured again when
    ``METHOD_VERSION``, the settings and the snapshot file's SHA-256 are the same. The entries of snapshots
    that are gone (a fresh clone, another machine, a run not under ``runs_dir``) are kept as
    ``_entries_of_gone_snapshots`` says, and their steps take part in choosing the shared steps; a run without
    a checkpoint here also keeps its optimizer regime from ``previous``, while the regime of a run with one is
    always read anew. ``on_measured`` gets the results so far after each snapshot measured (with the earlier
    regimes), so that they can be saved as they come.
    """
    runs_dir = Path(runs_dir)
    local = {path.name: dict(found) for path in sorted(runs_dir.glob("*"))
             if (found := RunDirectory(path).snapshots())}
    if not local:
        raise RLHelpersError(f"no model snapshots under {runs_dir}/*/snapshots/: they are written while training "
                             "and are not committed")
    # What decides whether an earlier entry still holds: the method's version and the sampling settings. The
    # libraries that measured an entry are kept with it; they do not invalidate entries of snapshots that are gone.
    settings = {"method_version": METHOD_VERSION, "n_rollouts": n_rollouts, "env_seed": seed,
                "burn_in_steps": burn_in_steps, "gap_steps": gap_steps}
    libraries = {name: importlib.metadata.version(name) for name in ("torch", "gymnasium", "ale-py")}
    same_settings = isinstance(previous, dict) and all(previous.get(key) == value for key, value in settings.items())
    earlier, earlier_regimes = ((previous.get("snapshots"), previous.get("optimizer_regime"))
                                if previous is not None and same_settings else (None, None))
    reusable = ({key: entry for key, entry in earlier.items() if isinstance(entry, dict) and "step" in entry}
                if isinstance(earlier, dict) else {})
    kept = _entries_of_gone_snapshots(reusable, local)
    stages = stage_steps({run: sorted({*local.get(run, {}), *kept.get(run, {})}) for run in sorted({*local, *kept})},
                         n_stages)
    results: dict[str, Any] = {**settings, "n_stages": n_stages, "snapshots": {
        f"{run}@{step}": entry for run, entries in kept.items() for step, entry in entries.items()},
        "optimizer_regime": earlier_regimes if isinstance(earlier_regimes, dict) else {}}
    staged = [(run, step) for run, steps in stages.items() for step in steps if step in local.get(run, {})]
    for run, step in tqdm(staged, desc="snapshots", unit="snapshot", disable=not show_progress):
        key, path = f"{run}@{step}", local[run][step]
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if reusable.get(key, {}).get("snapshot_sha256") == digest:
            results["snapshots"][key] = reusable[key]
            continue
        model, config, step = load_model(path)
        batch = collect_batch(model, config, n_rollouts, seed, burn_in_steps, gap_steps)
        estimators = ({"a2c_estimator_variance": a2c_estimator_variance(model, batch, config.batch_size)}
                      if ALGORITHMS[config.algo].critic == "V" else
                      {"task_gradient_agreement": task_gradient_agreement(model, batch),
                       "estimator_variance": estimator_variance(model, batch, config.batch_size)})
        results["snapshots"][key] = {"run": run, "step": step, "snapshot_sha256": digest, "libraries": libraries,
                                     **estimators, "loss_term_gradients": loss_term_gradients(model, batch, config),
                                     "advantage_scale": advantage_scale(model, config.algo, batch)}
        if on_measured is not None:  # with the earlier entries not reached yet, so that a stop loses none
            on_measured({**results, "snapshots": {**reusable, **results["snapshots"]}})
    results["snapshots"] = dict(sorted(results["snapshots"].items(),
                                       key=lambda item: (item[1]["run"], item[1]["step"])))
    regimes = {run: optimizer_regime(checkpoint) for run in local
               if (checkpoint := RunDirectory(runs_dir / run).load_latest_checkpoint()) is not None}
    # over the earlier ones: those of runs without a checkpoint here stay as they were
    results["optimizer_regime"] = dict(sorted({**results["optimizer_regime"], **regimes}.items()))
    return results


def write_analysis(runs_dir: str | Path, out: str | Path | None = None, n_rollouts: int = 4, n_stages: int = 4,
                   **settings: Any) -> tuple[Path, dict[str, Any]]:
    """``analyze_runs`` saved as JSON to ``out`` (default: analysis.json in the runs' ``figures_dir``) after each
    snapshot measured, so that a stop loses one snapshot's work at most, keeping the entries of the results
    already there that still hold; returns the path and the results. ``settings`` are ``analyze_runs``' other
    settings (``seed``, ``burn_in_steps``, ``gap_steps``, ``show_progress``)."""
    out = Path(out) if out is not None else figures_dir(runs_dir) / ANALYSIS_JSON
    try:
        previous = json.loads(out.read_text()) if out.exists() else None
    except ValueError:  # cut off or not ours: measure everything anew and replace it
        previous = None

    def save(results: dict[str, Any]) -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(out, json.dumps(results, indent=1).encode())

    results = analyze_runs(runs_dir, n_rollouts, n_stages, previous=previous, on_measured=save, **settings)
    save(results)
    return out, results
