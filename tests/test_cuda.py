"""The package on a CUDA GPU: every algorithm learns CartPole, a resumed run trains as the uninterrupted one, a
checkpoint moves a run between the GPU and the CPU, and the campaign trains on the GPU.

Skipped, with the reason, where torch sees no CUDA device; ``bash bench/gpu_check.sh`` runs them on a GPU
machine (``pytest -m cuda``).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from rlhelpers.core.evaluation import mean_return
from rlhelpers.core.trainer import Trainer
from rlhelpers.runner.campaign import train_campaign
from rlhelpers.runner.checkpoint import RunDirectory
from rlhelpers.runner.config import ALGOS, TrainConfig, resolve_config
from rlhelpers.runner.run import train

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(),
                                                   reason="needs a CUDA GPU, and torch sees none here")]

# What tests/test_learning.py asks of every algorithm on the CPU.
SOLVED = 475.0  # CartPole-v1's reward threshold: the mean evaluation return that stops a run
BUDGET = 300_000  # environment steps


# A short CartPole run on the GPU that never stops early (the options a campaign's runs share).
SHORT = dict(env_id="CartPole-v1", n_envs=4, eval_interval=1_000, n_eval_episodes=2, n_eval_envs=2, stop_return=1000.0,
             wandb_mode="disabled", device="cuda")


def cartpole(tmp_path: Path, algo: str = "task1", **overrides: object) -> TrainConfig:
    """A short CartPole run of ``algo`` in the runs directory ``tmp_path``."""
    return TrainConfig(**{**SHORT, "algo": algo, "runs_dir": str(tmp_path), **overrides})


def sessions(run: Path) -> list[dict]:
    """The provenance of each training session of ``run``."""
    return RunDirectory(run).read_history()["provenance"]


@pytest.mark.parametrize("algo", ALGOS)
def test_solves_cartpole_on_cuda(algo: str, tmp_path: Path) -> None:
    config = TrainConfig(algo=algo, seed=0, env_id="CartPole-v1", total_timesteps=BUDGET, n_eval_episodes=10,
                         n_eval_envs=10, runs_dir=str(tmp_path), wandb_mode="disabled", device="cuda")
    assert config.stop_return == SOLVED and config.n_envs == 8
    result = train(config, show_progress=False)
    best = max(mean_return(point) for point in result.eval_history)
    print(f"{algo} on CUDA: best mean evaluation return {best:.1f}, stopped at step {result.num_timesteps:,}")
    assert sessions(result.run_dir)[0]["device"].startswith("cuda")
    assert result.stop_reason == "stop_return"
    assert best >= SOLVED
    assert result.num_timesteps <= BUDGET


def trainer_state(trainer: Trainer) -> dict[str, object]:
    """What a resume must restore, in comparable form: weights and optimizer state on the CPU, and counters."""
    state = trainer.state_dict()
    optimizer = {(i, key): value.cpu() for i, moments in state["optimizer"]["state"].items()
                 for key, value in moments.items() if isinstance(value, torch.Tensor)}
    return {"model": {name: tensor.cpu() for name, tensor in state["model"].items()}, "optimizer": optimizer,
            "counters": (state["num_timesteps"], state["n_updates"], state["episode_returns"], state["eval_history"])}


def assert_same_state(a: dict[str, object], b: dict[str, object]) -> None:
    assert a["counters"] == b["counters"]
    for part in ("model", "optimizer"):
        assert a[part].keys() == b[part].keys()
        assert all(torch.equal(a[part][key], b[part][key]) for key in a[part]), part


@pytest.mark.parametrize("algo", ALGOS)
def test_a_run_resumed_on_cuda_trains_as_the_uninterrupted_one(algo: str, tmp_path: Path) -> None:
    """N updates in one go against N/2, a checkpoint on disk, a new learner (which reseeds every generator) that
    loads it, and N/2 more: the same statistics at every update and the same weights and optimizer state to the bit.
    On CUDA the actions are drawn from the GPU's own generator, which the checkpoint must carry. A resume restarts
    the episodes in progress from a reset seeded by the step count; the uninterrupted learner does the same."""
    half = 25
    config, device = resolve_config(cartpole(tmp_path, algo))
    run_dir = RunDirectory(tmp_path / config.run_name)
    run_dir.create()
    straight = Trainer(config, device)
    try:
        for _ in range(half):
            straight.train_iteration()
        straight.evaluate()
        run_dir.save_checkpoint(straight.state_dict(), straight.num_timesteps, keep=1)
        straight.restart_episodes(config.seed + straight.num_timesteps)  # as the resume below does
        second_half = [straight.train_iteration() for _ in range(half)]
        expected = trainer_state(straight)
    finally:
        straight.close()
    resumed = Trainer(config, device)
    try:
        resumed.load_state_dict(run_dir.load_latest_checkpoint())
        assert resumed.model.critic_head.weight.device.type == "cuda"
        assert [resumed.train_iteration() for _ in range(half)] == second_half
        assert_same_state(trainer_state(resumed), expected)
    finally:
        resumed.close()


@pytest.mark.parametrize(("first", "then"), [("cuda", "cpu"), ("cpu", "cuda")])
def test_a_checkpoint_moves_a_run_between_the_gpu_and_the_cpu(first: str, then: str, tmp_path: Path) -> None:
    """A run trained on one device resumes on the other: the weights and RMSprop's averages arrive on the new
    device unchanged, the next update runs there, and the run goes on to its budget with one history."""
    train(cartpole(tmp_path, device=first, total_timesteps=2_000), show_progress=False)
    run = tmp_path / "task1_seed-0"
    saved = RunDirectory(run).load_latest_checkpoint()
    trainer = Trainer(*resolve_config(cartpole(tmp_path, device=then, total_timesteps=4_000)))
    try:
        trainer.load_state_dict(saved)
        for name, tensor in trainer.model.state_dict().items():
            assert tensor.device.type == then and torch.equal(tensor.cpu(), saved["model"][name].cpu()), name
        averages = [value for moments in trainer.optimizer.state.values() for value in moments.values()
                    if isinstance(value, torch.Tensor) and value.dim() > 0]
        assert averages and all(value.device.type == then for value in averages)
        assert all(math.isfinite(value) for value in trainer.train_iteration().values())
    finally:
        trainer.close()
    result = train(cartpole(tmp_path, device=then, total_timesteps=4_000), show_progress=False)
    assert [point["step"] for point in result.eval_history] == [0, 1_000, 2_000, 3_000, 4_000]
    assert [(s["start_step"], s["device"].split(":")[0]) for s in sessions(run)] == [(0, first), (2_000, then)]


def test_the_campaign_trains_its_runs_on_the_gpu(tmp_path: Path) -> None:
    """Three runs, each in its own process on the GPU, several at once where the cores allow it
    (``campaign_parallel``), one torch thread each (the trainer's choice with CUDA)."""
    assert train_campaign({**SHORT, "runs_dir": str(tmp_path / "runs"), "total_timesteps": 2_000}, algos=ALGOS,
                          seeds=(0,)) == 0
    for algo in ALGOS:
        run = tmp_path / "runs" / f"{algo}_seed-0"
        assert [point["step"] for point in RunDirectory(run).read_history()["history"]] == [0, 1_000, 2_000]
        [session] = sessions(run)
        assert session["device"].startswith("cuda") and session["torch_threads"] == 1
