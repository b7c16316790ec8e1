"""The analysis's gradient measurements against answers known in closed form, on tiny models."""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from allaction.analysis import (
    METHOD_VERSION,
    Batch,
    a2c_estimator_variance,
    actor_gradient,
    advantage_scale,
    analyze_runs,
    collect_batch,
    estimator_variance,
    loss_term_gradients,
    optimizer_regime,
    stage_steps,
    task_gradient_agreement,
)
from allaction.experiment import ANALYSIS_JSON
from allaction.results import history_divergence
from rlhelpers.core.networks import ActorCritic, build_model
from rlhelpers.core.optim import RMSpropTFLike
from rlhelpers.runner.config import TrainConfig
from rlhelpers.runner.run import train
from rlhelpers.runner.store import read_runs


def linear_layer(module: torch.nn.Module) -> torch.nn.Linear:
    """A head of the model, which is a linear layer."""
    assert isinstance(module, torch.nn.Linear)
    return module


def bias_only_model(policy_bias: list[float], q_bias: list[float]) -> ActorCritic:
    """An MLP actor-critic whose features are zero: logits = policy bias, Q = critic bias, for every state."""
    model = build_model((3,), len(policy_bias), "task1", hidden_size=4).double()
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        linear_layer(model.policy_head).bias.copy_(torch.tensor(policy_bias, dtype=torch.float64))
        linear_layer(model.critic_head).bias.copy_(torch.tensor(q_bias, dtype=torch.float64))
    return model


def train_cartpole(algo: str, runs_dir: Path, total_timesteps: int, seed: int = 0) -> None:
    """A short CartPole run with an evaluation and a snapshot every 200 steps."""
    train(TrainConfig(algo=algo, seed=seed, env_id="CartPole-v1", total_timesteps=total_timesteps, n_envs=4,
                      eval_interval=200,
                      n_eval_episodes=2, n_eval_envs=2, snapshot_interval=200, runs_dir=str(runs_dir),
                      wandb_mode="disabled", device="cpu"), show_progress=False)


def test_estimator_variance_matches_the_closed_form() -> None:
    # Only the policy bias b has a gradient: grad log pi(a) = e_a - pi, so the sampled estimator is
    # (e_a - pi)(Q_a - V~) and the all-action gradient is pi * (Q - V~), the same for every state.
    b, q = [0.3, -0.2, 1.0], [1.0, -2.0, 0.5]
    pi = np.exp(b) / np.exp(b).sum()
    adv = np.array(q) - pi @ np.array(q)
    mean = pi * adv
    samples = [(np.eye(3)[a] - pi) * adv[a] for a in range(3)]
    expected = sum(pi[a] * np.sum((samples[a] - mean) ** 2) for a in range(3))
    batch = Batch(torch.randn(5, 3), torch.zeros(5, dtype=torch.long), torch.zeros(5))
    result = estimator_variance(bias_only_model(b, q), batch, batch_size=80)
    assert math.isclose(result["per_state"]["sampled"], expected, rel_tol=1e-9)
    assert math.isclose(result["mean_gradient_sq_norm"], float(np.sum(mean ** 2)), rel_tol=1e-9)
    assert math.isclose(result["batch"]["sampled"], expected / 80, rel_tol=1e-6)
    assert abs(result["per_sample"]["all_action"]) < 1e-12  # every state has the same all-action gradient
    assert math.isclose(result["per_sample"]["sampled"], expected, rel_tol=1e-9)
    assert math.isclose(result["signal_sq_norm"], float(np.sum(mean ** 2)), rel_tol=1e-9)  # no state variance
    assert math.isclose(result["batch_signal_to_noise"]["sampled"], float(np.sum(mean ** 2)) / (expected / 80),
                        rel_tol=1e-6)
    assert result["expectation_identity_max_relative_error"] < 1e-12


def test_per_sample_variance_is_the_state_variance_plus_the_action_variance() -> None:
    torch.manual_seed(5)
    model = build_model((4,), 3, "task1", hidden_size=8).double()
    n = 6
    batch = Batch(torch.randn(n, 4, dtype=torch.float64), torch.zeros(n, dtype=torch.long), torch.zeros(n))
    result = estimator_variance(model, batch, batch_size=80)
    # task1's actor gradient on one state is -g(s): Var_s from the states' gradients, computed apart
    g = torch.stack([actor_gradient(model, "task1", Batch(batch.obs[i:i + 1], batch.actions[i:i + 1],
                                                          batch.returns[i:i + 1])) for i in range(n)])
    state_variance = float((g - g.mean(0)).square().sum(1).mean())
    per_sample = result["per_sample"]
    assert math.isclose(per_sample["all_action"], state_variance, rel_tol=1e-9) and state_variance > 0
    assert math.isclose(per_sample["sampled"], state_variance + result["per_state"]["sampled"], rel_tol=1e-9)
    assert per_sample["sampled"] > per_sample["all_action"]
    assert result["batch"]["sampled"] == per_sample["sampled"] / 80
    assert result["batch"]["all_action"] == per_sample["all_action"] / 80


def test_advantage_scale_matches_the_closed_form() -> None:
    b, q = [0.3, -0.2, 1.0], [1.0, -2.0, 0.5]
    pi = np.exp(b) / np.exp(b).sum()
    spread = math.sqrt(float(pi @ (np.array(q) - pi @ np.array(q)) ** 2))
    actions, returns = torch.tensor([0, 1, 2, 1]), torch.tensor([2.0, -2.0, 0.0, 1.0], dtype=torch.float64)
    batch = Batch(torch.randn(4, 3, dtype=torch.float64), actions, returns)
    task1 = advantage_scale(bias_only_model(b, q), "task1", batch)
    assert math.isclose(task1["advantage_rms"], spread, rel_tol=1e-9)  # the same spread in every state
    errors = returns.numpy() - np.array(q)[actions.numpy()]  # 1, 0, -0.5, 3
    assert math.isclose(task1["critic_rms_error"], math.sqrt(np.mean(errors ** 2)), rel_tol=1e-9)

    a2c = build_model((3,), 3, "a2c", hidden_size=4).double()
    with torch.no_grad():
        for p in a2c.parameters():
            p.zero_()
        linear_layer(a2c.critic_head).bias.fill_(0.5)  # V = 0.5 everywhere: A_t = R_t - 0.5
    result = advantage_scale(a2c, "a2c", batch)
    expected = math.sqrt(np.mean((returns.numpy() - 0.5) ** 2))
    assert math.isclose(result["advantage_rms"], expected, rel_tol=1e-9)
    assert result["critic_rms_error"] == result["advantage_rms"]


def test_task1_and_task2_actor_gradients_agree_and_float64_is_exact() -> None:
    torch.manual_seed(0)
    model = build_model((4,), 3, "task1", hidden_size=16)
    with torch.no_grad():
        linear_layer(model.policy_head).weight.mul_(100)  # a policy far from uniform
    batch = Batch(torch.randn(40, 4), torch.randint(0, 3, (40,)), torch.randn(40))
    result = task_gradient_agreement(model, batch)
    assert result["float64"]["relative_difference"] < 1e-12 and result["float64"]["cosine"] > 1 - 1e-12
    assert 0 < result["float32"]["relative_difference"] < 1e-4
    counted = estimator_variance(model, batch, batch_size=80)  # measured beside it: the counts are its
    assert counted["n_parameters"] == sum(p.numel() for n, p in model.named_parameters() if "critic" not in n)
    gradient = actor_gradient(model, "task1", batch)
    assert gradient.norm() > 0


@pytest.mark.filterwarnings("ignore:var:UserWarning")  # explained variance of a single sample
def test_a2c_variance_of_two_samples_is_their_half_distance_squared() -> None:
    torch.manual_seed(1)
    model = build_model((4,), 2, "a2c", hidden_size=8)
    batch = Batch(torch.randn(2, 4), torch.tensor([0, 1]), torch.tensor([1.5, -0.5]))
    g = [actor_gradient(model, "a2c", Batch(batch.obs[i:i + 1], batch.actions[i:i + 1], batch.returns[i:i + 1]))
         for i in range(2)]
    result = a2c_estimator_variance(model, batch, batch_size=80)
    assert math.isclose(result["per_sample"], float((g[0] - g[1]).double().square().sum()) / 4, rel_tol=1e-5)
    # |mean|^2 - variance / (n - 1) = |g0 + g1|^2 / 4 - |g0 - g1|^2 / 4 = g0 . g1, the unbiased estimate of |E g|^2
    assert math.isclose(result["signal_sq_norm"], float(torch.dot(g[0].double(), g[1].double())), rel_tol=1e-4)
    snr = result["batch_signal_to_noise"]["sampled"]
    assert math.isclose(snr, result["signal_sq_norm"] / result["batch"]["sampled"])
    same = Batch(batch.obs[:1].repeat(3, 1), batch.actions[:1].repeat(3), batch.returns[:1].repeat(3))
    assert a2c_estimator_variance(model, same, batch_size=80)["per_sample"] < 1e-12


def test_a_snapshot_measured_before_is_kept_unless_it_or_the_settings_changed(tmp_path, monkeypatch) -> None:
    import allaction.analysis as analysis

    train_cartpole("task1", tmp_path, 400)
    settings: dict[str, Any] = dict(n_rollouts=1, n_stages=2, burn_in_steps=10, gap_steps=5)
    first = analyze_runs(tmp_path, **settings)
    measured: list[int] = []
    collect = analysis.collect_batch
    monkeypatch.setattr(analysis, "collect_batch", counted(collect, measured))
    again = analyze_runs(tmp_path, **settings, previous=json.loads(json.dumps(first)))
    assert again == first and measured == []  # nothing measured twice; the regime is read anew, the same
    assert analyze_runs(tmp_path, **{**settings, "gap_steps": 6}, previous=first)["gap_steps"] == 6
    assert len(measured) == 2  # other settings: both snapshots measured again
    snapshots = tmp_path / "task1_seed-0" / "snapshots"
    (snapshots / "model-000000000400.pt").write_bytes((snapshots / "model-000000000000.pt").read_bytes())
    analyze_runs(tmp_path, **settings, previous=first)
    assert len(measured) == 3  # the rewritten file only


def test_write_analysis_keeps_its_earlier_results_and_survives_a_foreign_file(tmp_path, monkeypatch) -> None:
    import allaction.analysis as analysis

    train_cartpole("a2c", tmp_path / "runs", 200)
    measured: list[int] = []
    collect = analysis.collect_batch
    monkeypatch.setattr(analysis, "collect_batch", counted(collect, measured))
    out = tmp_path / "analysis.json"
    settings = dict(n_rollouts=1, n_stages=2, burn_in_steps=10, gap_steps=5)
    _, first = analysis.write_analysis(tmp_path / "runs", out, **settings)
    assert len(measured) == 2  # snapshots at 0 and 200
    _, again = analysis.write_analysis(tmp_path / "runs", out, **settings)
    assert len(measured) == 2 and again == first  # read back from the file, nothing measured again
    for foreign in ("[]", '{"snapshots": null}', '{"a2c_seed-0@0": 1}', "not json"):
        out.write_text(foreign)
        analysis.write_analysis(tmp_path / "runs", out, **settings)
    assert len(measured) == 2 + 4 * 2 and json.loads(out.read_text()) == first


def counted(collect: Callable[..., Batch], calls: list[int]) -> Callable[..., Batch]:
    """``collect`` that counts its calls in ``calls``."""
    def collect_and_count(*args: Any) -> Batch:
        calls.append(1)
        return collect(*args)
    return collect_and_count


def interrupted_at(n: int, collect, calls: list):  # noqa: ANN001, ANN201
    """``collect`` that counts its calls in ``calls`` and raises KeyboardInterrupt (a stop) at the ``n``-th."""
    def collect_or_stop(*args):  # noqa: ANN002, ANN202
        calls.append(1)
        if len(calls) == n:
            raise KeyboardInterrupt
        return collect(*args)
    return collect_or_stop


def test_write_analysis_saves_each_snapshot_as_it_is_measured(tmp_path, monkeypatch) -> None:
    """A stop in the middle (here an error at the second snapshot) keeps the first snapshot's entry, and the
    next call measures only what is missing."""
    import allaction.analysis as analysis

    train_cartpole("a2c", tmp_path / "runs", 200)
    measured: list[int] = []
    monkeypatch.setattr(analysis, "collect_batch", interrupted_at(2, analysis.collect_batch, measured))
    out = tmp_path / "analysis.json"
    settings = dict(n_rollouts=1, n_stages=2, burn_in_steps=10, gap_steps=5)
    with pytest.raises(KeyboardInterrupt):
        analysis.write_analysis(tmp_path / "runs", out, **settings)
    assert list(json.loads(out.read_text())["snapshots"]) == ["a2c_seed-0@0"]
    _, results = analysis.write_analysis(tmp_path / "runs", out, **settings)
    assert len(measured) == 3  # only the snapshot at 200 once more
    assert list(results["snapshots"]) == ["a2c_seed-0@0", "a2c_seed-0@200"] and "a2c_seed-0" in results[
        "optimizer_regime"]


def test_a_stop_while_measuring_keeps_the_earlier_entries_not_reached_yet(tmp_path, monkeypatch) -> None:
    """Snapshots 0 and 200 rewritten, so both are measured again; a stop at the second keeps the entry of 400,
    which the loop had not reached, in the saved file."""
    import allaction.analysis as analysis

    train_cartpole("a2c", tmp_path / "runs", 400)
    out = tmp_path / "analysis.json"
    settings = dict(n_rollouts=1, n_stages=4, burn_in_steps=10, gap_steps=5)
    _, first = analysis.write_analysis(tmp_path / "runs", out, **settings)
    assert list(first["snapshots"]) == ["a2c_seed-0@0", "a2c_seed-0@200", "a2c_seed-0@400"]
    snapshots = tmp_path / "runs" / "a2c_seed-0" / "snapshots"
    for step in (0, 200):
        path = snapshots / f"model-{step:012d}.pt"
        path.write_bytes(path.read_bytes() + b"\0")  # another file (SHA-256), the same weights
    monkeypatch.setattr(analysis, "collect_batch", interrupted_at(2, analysis.collect_batch, []))
    with pytest.raises(KeyboardInterrupt):
        analysis.write_analysis(tmp_path / "runs", out, **settings)
    saved = json.loads(out.read_text())["snapshots"]
    assert saved["a2c_seed-0@400"] == first["snapshots"]["a2c_seed-0@400"]
    assert saved["a2c_seed-0@0"]["snapshot_sha256"] != first["snapshots"]["a2c_seed-0@0"]["snapshot_sha256"]


def test_analyze_runs_on_cartpole_snapshots(tmp_path) -> None:
    for algo in ("a2c", "task1", "task2"):
        train_cartpole(algo, tmp_path, 400)
    results = analyze_runs(tmp_path, n_rollouts=1, n_stages=2, burn_in_steps=10, gap_steps=5)
    assert sorted(results["snapshots"]) == [f"{a}_seed-0@{s}" for a in ("a2c", "task1", "task2") for s in (0, 400)]
    # how to measure it again
    assert [results[k] for k in ("n_rollouts", "n_stages", "burn_in_steps", "gap_steps")] == [1, 2, 10, 5]
    task1 = results["snapshots"]["task1_seed-0@400"]
    assert task1["estimator_variance"]["n_states"] == 20  # one rollout of 4 envs x 5 steps
    assert task1["estimator_variance"]["batch"]["size"] == 20  # the variance is given for one rollout
    assert results["snapshots"]["a2c_seed-0@400"]["a2c_estimator_variance"]["batch"]["size"] == 20
    assert task1["task_gradient_agreement"]["float64"]["relative_difference"] < 1e-10
    assert task1["loss_term_gradients"]["critic"]["policy_head"] == 0.0
    assert task1["advantage_scale"]["advantage_rms"] > 0 and task1["advantage_scale"]["critic_rms_error"] > 0
    assert results["snapshots"]["a2c_seed-0@0"]["a2c_estimator_variance"]["per_sample"] > 0
    # task1 and task2 of one seed start from the same weights and, at step 0, the same evaluation
    records = {r.name: r for r in read_runs(tmp_path)}
    assert history_divergence(records["task1_seed-0"], records["task2_seed-0"])["last_identical_step"] == 400
    regime = results["optimizer_regime"]["task1_seed-0"]  # from the newest checkpoint, at the end of the budget
    assert regime["step"] == 400 and set(regime["groups"]) == {"encoder", "policy_head", "critic_head"}
    assert sorted(results["optimizer_regime"]) == ["a2c_seed-0", "task1_seed-0", "task2_seed-0"]
    json.dumps(results)  # the command writes it as JSON


def test_collect_batch_burns_in_and_leaves_gaps_between_rollouts() -> None:
    config = TrainConfig(algo="task1", env_id="CartPole-v1", n_envs=2)
    torch.manual_seed(4)
    model = build_model((4,), 2, "task1", hidden_size=8)
    assert config.n_envs is not None  # given
    states = config.n_steps * config.n_envs  # per rollout

    def rollout(batch: Batch, k: int) -> tuple[torch.Tensor, ...]:
        part = slice(k * states, (k + 1) * states)
        return batch.obs[part], batch.actions[part], batch.returns[part]

    # The same play recorded from the reset states on, rollout after rollout
    stream = collect_batch(model, config, n_rollouts=5, seed=3, burn_in_steps=0, gap_steps=0)
    # 6 steps round up to 2 rollouts of 5 steps, 1 step to 1 rollout: the stream's rollouts 2 and 4
    batch = collect_batch(model, config, n_rollouts=2, seed=3, burn_in_steps=6, gap_steps=1)
    assert len(batch.obs) == 2 * states
    for recorded, played in ((0, 2), (1, 4)):
        assert all(torch.equal(a, b) for a, b in zip(rollout(batch, recorded), rollout(stream, played), strict=True))
    assert not torch.equal(batch.obs[:config.n_envs], stream.obs[:config.n_envs])  # not the reset states


def test_stages_are_steps_every_run_has_then_each_runs_last() -> None:
    million = 1_000_000
    steps = {"a2c_seed-0": [*range(0, 8 * million, million), 7_200_000],  # stopped at 7.2M
             "task1_seed-0": list(range(0, 11 * million, million))}  # 10M

    def stages(n_stages: int) -> dict[str, list[float]]:
        return {run: [step / million for step in chosen] for run, chosen in stage_steps(steps, n_stages).items()}

    # shared: 0, 1M, ..., 7M; three of them spread evenly, then each run's last
    assert stages(4) == {"a2c_seed-0": [0, 4, 7, 7.2], "task1_seed-0": [0, 4, 7, 10]}
    assert stages(2) == {"a2c_seed-0": [0, 7.2], "task1_seed-0": [0, 10]}
    assert stages(1) == {"a2c_seed-0": [7.2], "task1_seed-0": [10]}
    assert stages(20) == {"a2c_seed-0": [*range(8), 7.2], "task1_seed-0": [*range(8), 10]}
    steps["task2_seed-0"] = [0, million, 2 * million]
    # shared: 0, 1M, 2M; task2's last is one of them and is measured once
    assert stages(3) == {"a2c_seed-0": [0, 2, 7.2], "task1_seed-0": [0, 2, 10], "task2_seed-0": [0, 2]}
    steps["task2_seed-0"] = [million, 2 * million]
    steps["a2c_seed-0"] = [0, *range(3 * million, 8 * million, million), 7_200_000]
    # no step shared by all: each run's own evenly spaced picks
    assert stages(3) == {"a2c_seed-0": [0, 5, 7.2], "task1_seed-0": [0, 5, 10], "task2_seed-0": [1, 2]}
    assert stage_steps({}, 3) == {}


def test_runs_whose_snapshots_are_gone_keep_their_results_and_set_the_shared_steps(tmp_path, monkeypatch) -> None:
    import shutil

    import allaction.analysis as analysis

    for algo in ("a2c", "task1"):
        train_cartpole(algo, tmp_path, 400)
    settings: dict[str, Any] = dict(n_rollouts=1, burn_in_steps=10, gap_steps=5)
    first = json.loads(json.dumps(analyze_runs(tmp_path, n_stages=2, **settings)))
    assert sorted(first["snapshots"]) == ["a2c_seed-0@0", "a2c_seed-0@400", "task1_seed-0@0", "task1_seed-0@400"]
    # a fresh clone of a2c_seed-0: its history, no snapshots, no checkpoints
    a2c = tmp_path / "a2c_seed-0"
    shutil.rmtree(a2c / "snapshots")
    for checkpoint in a2c.glob("checkpoint-*.pt"):
        checkpoint.unlink()
    measured: list[int] = []
    collect = analysis.collect_batch
    monkeypatch.setattr(analysis, "collect_batch", counted(collect, measured))
    assert analyze_runs(tmp_path, n_stages=2, **settings, previous=first) == first and measured == []
    # Neither the method's description nor the libraries are part of the key: a docstring edit, or another
    # torch on a user's machine, must not drop results that can never be measured again.
    monkeypatch.setattr(analysis, "__doc__", analysis.__doc__ + " (a typo fixed)")
    other_libraries = json.loads(json.dumps(first))
    for entry in other_libraries["snapshots"].values():
        entry["libraries"]["torch"] = "1.0"
    kept = analyze_runs(tmp_path, n_stages=2, **settings, previous=other_libraries)
    assert kept["snapshots"]["a2c_seed-0@400"] == other_libraries["snapshots"]["a2c_seed-0@400"]
    assert measured == [] and "method" not in kept
    # task1 has 0, 200 and 400, but a2c was measured at 0 and 400 only: those are the steps both have
    three = analyze_runs(tmp_path, n_stages=3, **settings, previous=first)
    assert three == {**first, "n_stages": 3} and measured == []
    # measured another way: a2c's entries cannot be kept, nor measured again
    other = analyze_runs(tmp_path, n_stages=2, **{**settings, "gap_steps": 6}, previous=first)
    assert sorted(other["snapshots"]) == ["task1_seed-0@0", "task1_seed-0@400"]
    assert sorted(other["optimizer_regime"]) == ["task1_seed-0"] and len(measured) == 2
    # a run moved out of the runs directory keeps its results, as one whose snapshots are gone
    a2c.rename(tmp_path.parent / "a2c_elsewhere")
    assert analyze_runs(tmp_path, n_stages=2, **settings, previous=first) == first and len(measured) == 2


def test_a_run_measured_in_a_runs_directory_of_its_own_keeps_every_other_runs_results(tmp_path) -> None:
    """analyze of one new run, written into the committed analysis.json, adds that run's entries and keeps every
    committed run's entries and optimizer regime, though none of those runs is in its runs directory."""
    import allaction.analysis as analysis

    train_cartpole("a2c", tmp_path / "runs", 200, seed=1)
    settings = dict(n_rollouts=1, n_stages=2, burn_in_steps=10, gap_steps=5)
    committed = json.loads((Path(__file__).parents[1] / "figures" / ANALYSIS_JSON).read_text())
    committed.update(settings)  # as if measured with this test's quicker settings
    out = tmp_path / "analysis.json"
    out.write_text(json.dumps(committed))
    _, results = analysis.write_analysis(tmp_path / "runs", out, **settings)
    assert len(committed["snapshots"]) == 32
    assert results["snapshots"] == {**committed["snapshots"], **{
        key: results["snapshots"][key] for key in ("a2c_seed-1@0", "a2c_seed-1@200")}}
    assert results["optimizer_regime"] == {**committed["optimizer_regime"],
                                           "a2c_seed-1": results["optimizer_regime"]["a2c_seed-1"]}
    assert json.loads(out.read_text()) == results


def test_a_run_that_lost_its_older_snapshots_keeps_their_results_but_not_those_of_an_earlier_attempt(
        tmp_path, monkeypatch) -> None:
    import shutil

    import allaction.analysis as analysis

    def steps(results: dict) -> list[int]:
        return [entry["step"] for entry in results["snapshots"].values()]

    train_cartpole("task1", tmp_path, 400)
    # 20 stages: every snapshot
    settings: dict[str, Any] = dict(n_rollouts=1, n_stages=20, burn_in_steps=10, gap_steps=5)
    first = json.loads(json.dumps(analyze_runs(tmp_path, **settings)))
    assert steps(first) == [0, 200, 400]
    measured: list[int] = []
    collect = analysis.collect_batch
    monkeypatch.setattr(analysis, "collect_batch", counted(collect, measured))
    # a new machine in the middle of training: the older snapshots are gone, the run trains on
    snapshots = tmp_path / "task1_seed-0" / "snapshots"
    for step in (0, 200):
        (snapshots / f"model-{step:012d}.pt").unlink()
    train_cartpole("task1", tmp_path, 600)
    later = analyze_runs(tmp_path, **settings, previous=first)
    # measured: 600, and 400, saved again by the resume at 400 with the new budget in its config
    assert steps(later) == [0, 200, 400, 600] and len(measured) == 2
    assert all(later["snapshots"][f"task1_seed-0@{step}"] == first["snapshots"][f"task1_seed-0@{step}"]
               for step in (0, 200))
    # the run restarted from step 0: the entries past its newest snapshot belong to the earlier attempt
    shutil.rmtree(tmp_path / "task1_seed-0")
    train_cartpole("task1", tmp_path, 200)
    restarted = analyze_runs(tmp_path, **settings, previous=later)
    assert steps(restarted) == [0, 200]


def test_results_of_gone_snapshots_survive_a_run_that_has_fewer_steps(tmp_path) -> None:
    import shutil

    train_cartpole("a2c", tmp_path, 600)
    settings: dict[str, Any] = dict(n_rollouts=1, n_stages=20, burn_in_steps=10, gap_steps=5)
    first = json.loads(json.dumps(analyze_runs(tmp_path, **settings)))
    assert sorted(first["snapshots"]) == [f"a2c_seed-0@{step}" for step in (0, 200, 400, 600)]
    shutil.rmtree(tmp_path / "a2c_seed-0" / "snapshots")  # a fresh clone: they cannot be measured again
    train_cartpole("task1", tmp_path, 200)  # a new run, still early: only 0 and 200 are shared
    later = analyze_runs(tmp_path, **settings, previous=first)
    assert sorted(later["snapshots"]) == [*first["snapshots"], "task1_seed-0@0", "task1_seed-0@200"]
    assert all(later["snapshots"][key] == entry for key, entry in first["snapshots"].items())


def test_analyze_command_refuses_bad_counts_and_runs_without_snapshots(tmp_path, capsys) -> None:
    from allaction.cli import main

    assert main(["analyze", "--runs-dir", str(tmp_path), "--rollouts", "0"]) == 2
    assert "--rollouts and --stages must be positive integers" in capsys.readouterr().err
    out = tmp_path / "figures" / "analysis.json"
    for runs_dir in (tmp_path / "missing", tmp_path):  # no such directory; a directory without snapshots
        assert main(["analyze", "--runs-dir", str(runs_dir), "--out", str(out)]) == 2
        assert f"no model snapshots under {runs_dir}/*/snapshots/" in capsys.readouterr().err
    assert not (tmp_path / "figures").exists()  # nothing written over a previous analysis


@pytest.mark.parametrize("algo", ["a2c", "task1"])
def test_loss_term_gradients_scale_with_their_coefficients(algo: str) -> None:
    torch.manual_seed(3)
    model = build_model((4,), 3, algo, hidden_size=8)
    batch = Batch(torch.randn(12, 4), torch.randint(0, 3, (12,)), torch.randn(12))
    config = TrainConfig(algo=algo)
    assert config.pg_coef is not None  # the algo's value, filled in
    base = loss_term_gradients(model, batch, config)
    assert base["critic"]["policy_head"] == 0.0  # the critic term never reaches the policy head
    assert all(base[term][group] > 0 for term in ("actor", "entropy") for group in ("encoder", "policy_head"))
    doubled = loss_term_gradients(model, batch, TrainConfig(algo=algo, pg_coef=2 * config.pg_coef,
                                                                  ent_coef=0.0))
    assert math.isclose(doubled["actor"]["policy_head"], 2 * base["actor"]["policy_head"], rel_tol=1e-5)
    assert doubled["entropy"]["encoder"] == 0.0 and doubled["critic"] == base["critic"]


def test_optimizer_regime_counts_parameters_below_epsilon() -> None:
    model = build_model((4,), 3, "task1", hidden_size=8)
    optimizer = RMSpropTFLike(model.parameters(), lr=1e-3, eps=1e-5)
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    optimizer.step()
    for name, p in model.named_parameters():
        optimizer.state[p]["square_avg"].fill_(1e-6 if name.startswith("policy_head.") else 4.0)
    head_bias = linear_layer(model.policy_head).bias
    optimizer.state[head_bias]["square_avg"][0] = 1.0  # one of the head's parameters above eps
    checkpoint = {"config": TrainConfig(algo="task1", rms_eps=1e-5).to_dict(), "model": model.state_dict(),
                  "optimizer": optimizer.state_dict(), "num_timesteps": 640}
    regime = optimizer_regime(checkpoint)
    head = regime["groups"]["policy_head"]
    assert head["n_parameters"] == 8 * 3 + 3
    assert head["below_eps_share"] == pytest.approx(26 / 27) and head["median_rms"] == pytest.approx(1e-3)
    assert regime["groups"]["encoder"]["below_eps_share"] == 0.0 and regime["groups"]["encoder"]["median_rms"] == 2.0
    assert regime["eps"] == 1e-5 and regime["step"] == 640


def test_the_committed_analysis_is_kept_by_the_current_method() -> None:
    """figures/analysis.json holds measurements of snapshots that exist nowhere any more: its version and
    settings must be those analyze uses, or its next run would drop them."""
    committed = json.loads((Path(__file__).parents[1] / "figures" / ANALYSIS_JSON).read_text())
    assert committed["method_version"] == METHOD_VERSION
    defaults = {name: p.default for name, p in inspect.signature(analyze_runs).parameters.items()}
    assert (committed["n_rollouts"], committed["env_seed"], committed["burn_in_steps"], committed["gap_steps"]) == (
        defaults["n_rollouts"], defaults["seed"], defaults["burn_in_steps"], defaults["gap_steps"])
    report_runs = [key for key in committed["snapshots"] if "-" not in key.split("_seed-")[0]]
    assert len(report_runs) == 24  # 0, 3M, 6M and the last snapshot of each of the six report runs
    assert all("libraries" in e for e in committed["snapshots"].values())
