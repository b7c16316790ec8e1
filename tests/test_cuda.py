"""The package on each device: every algorithm learns CartPole, a resumed run trains as the uninterrupted one, a
checkpoint carries a run to its next session (on the same device, or between the GPU and the CPU), the campaign
trains its runs, each session records the float32 precision in effect and the trainer gives torch's settings back;
and a resume on a GPU restores the CUDA random stream of the GPU the run trained on.

Every test runs on the CPU everywhere (CI) and on CUDA where torch sees a GPU; only the moves between the GPU and
the CPU need both, and skip with that reason without a GPU. ``bash bench/gpu_check.sh`` runs them on a GPU
machine (``pytest -m cuda``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import builders
import pytest
import torch
from builders import saved

from rlhelpers.core.losses import ALGORITHMS
from rlhelpers.core.trainer import Trainer
from rlhelpers.runner import campaign
from rlhelpers.runner.campaign import campaign_runs, train_campaign
from rlhelpers.runner.config import TrainConfig
from rlhelpers.runner.run import resolve_config, session_provenance, train
from rlhelpers.runner.store import RunDirectory

ALGOS = tuple(ALGORITHMS)

pytestmark = pytest.mark.cuda
ON_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU, and torch sees none here")
ON_BOTH = pytest.mark.skipif(not torch.cuda.is_available(),
                             reason="moves a run between a CUDA GPU and the CPU, and torch sees no GPU here")

# What a run must reach on CartPole, on every device.
SOLVED = 475.0  # CartPole-v1's reward threshold: the mean evaluation return that stops a run
BUDGET = 300_000  # environment steps

# A short CartPole run that never stops early (the options a campaign's runs share).


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=ON_CUDA)])
def device(request: pytest.FixtureRequest) -> str:
    """The device a test trains on: the CPU, and CUDA where torch sees a GPU."""
    return request.param


def cartpole(tmp_path: Path, device: str, algo: str = "task1", **overrides: Any) -> TrainConfig:
    """A short CartPole run of ``algo`` on ``device`` in the runs directory ``tmp_path``."""
    return builders.cartpole(tmp_path, **{"algo": algo, "device": device, "stop_return": 1000.0, **overrides})




def sessions(run: Path) -> list[dict]:
    """The provenance of each training session of ``run``."""
    return saved(run)["provenance"]


@pytest.mark.parametrize("algo", ALGOS)
def test_solves_cartpole(device: str, algo: str, tmp_path: Path) -> None:
    config = TrainConfig(algo=algo, seed=0, env_id="CartPole-v1", total_timesteps=BUDGET, n_eval_episodes=10,
                         n_eval_envs=10, runs_dir=str(tmp_path), wandb_mode="disabled", device=device)
    assert config.stop_return == SOLVED and config.n_envs == 8
    result = train(config, show_progress=False)
    best = max(e.mean for e in result.record.evaluations)
    print(f"{algo} on {device}: best mean evaluation return {best:.1f}, stopped at step {result.num_timesteps:,}")
    assert sessions(result.run_dir)[0]["device"].startswith(device)
    assert result.stop_reason == "stop_return"
    assert best >= SOLVED
    assert result.num_timesteps <= BUDGET


def trainer_state(trainer: Trainer) -> dict[str, Any]:
    """What a resume must restore, in comparable form: weights and optimizer state on the CPU, and counters."""
    state = trainer.state_dict()
    optimizer = {(i, key): value.cpu() for i, moments in state["optimizer"]["state"].items()
                 for key, value in moments.items() if isinstance(value, torch.Tensor)}
    return {"model": {name: tensor.cpu() for name, tensor in state["model"].items()}, "optimizer": optimizer,
            "counters": (state["num_timesteps"], state["n_updates"], state["episode_returns"],
                         state["episode_lengths"])}


def assert_same_state(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a["counters"] == b["counters"]
    for part in ("model", "optimizer"):
        assert a[part].keys() == b[part].keys()
        assert all(torch.equal(a[part][key], b[part][key]) for key in a[part]), part


@pytest.mark.parametrize("algo", ALGOS)
def test_a_resumed_run_trains_as_the_uninterrupted_one(device: str, algo: str, tmp_path: Path) -> None:
    """N updates in one go against N/2, an evaluation, a checkpoint on disk, a new learner (which reseeds every
    generator) that loads it, and N/2 more: the same statistics at every update and the same weights and optimizer
    state to the bit. On CUDA the actions are drawn from the GPU's own generator, which the checkpoint must carry.
    A resume restarts the episodes in progress from a reset seeded by the step count; the uninterrupted learner
    does the same."""
    half = 25
    config, torch_device = resolve_config(cartpole(tmp_path, device, algo))
    run_dir = RunDirectory(tmp_path / config.run_name)
    run_dir.create()
    straight = Trainer(config, torch_device)
    try:
        for _ in range(half):
            straight.train_iteration()
        straight.evaluate(0)  # draws from the action generators before the checkpoint, as a run does
        run_dir.save_checkpoint(straight.state_dict(), straight.num_timesteps, keep=1)
        straight.restart_episodes(config.seed + straight.num_timesteps)  # as the resume below does
        second_half = [straight.train_iteration() for _ in range(half)]
        expected = trainer_state(straight)
    finally:
        straight.close()
    resumed = Trainer(config, torch_device)
    try:
        resumed.load_state_dict(builders.checkpoint(run_dir.path))
        assert resumed.model.critic_head.weight.device.type == device
        assert [resumed.train_iteration() for _ in range(half)] == second_half
        assert_same_state(trainer_state(resumed), expected)
    finally:
        resumed.close()


@pytest.mark.parametrize(("first", "then"), [("cpu", "cpu"), pytest.param("cuda", "cuda", marks=ON_CUDA),
                                             pytest.param("cuda", "cpu", marks=ON_BOTH),
                                             pytest.param("cpu", "cuda", marks=ON_BOTH)])
def test_a_checkpoint_carries_a_run_to_its_next_session_on_either_device(first: str, then: str,
                                                                        tmp_path: Path) -> None:
    """A run trained on one device resumes on the same or the other: the weights and RMSprop's averages arrive on
    the new device unchanged, the next update runs there, and the run goes on to its budget with one history."""
    train(cartpole(tmp_path, first, total_timesteps=2_000), show_progress=False)
    run = tmp_path / "task1_seed-0"
    saved = builders.checkpoint(run)
    trainer = Trainer(*resolve_config(cartpole(tmp_path, then, total_timesteps=4_000)))
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
    result = train(cartpole(tmp_path, then, total_timesteps=4_000), show_progress=False)
    assert [e.step for e in result.record.evaluations] == [0, 1_000, 2_000, 3_000, 4_000]
    assert [(s["start_step"], s["device"].split(":")[0]) for s in sessions(run)] == [(0, first), (2_000, then)]


def test_the_campaign_trains_its_runs_with_one_torch_thread_each(device: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Three runs, each in its own process, several at once where the cores allow it (``campaign_parallel``), one
    torch thread each: on a CPU the campaign passes it (two runs on 2 cores, as set here), on CUDA it is the trainer's
    choice. The runs' processes would have two threads otherwise (the suite's one is inherited: conftest.py)."""
    if device == "cpu":
        monkeypatch.setattr(campaign, "usable_cpus", lambda: 2)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    options = {**builders.CARTPOLE, "stop_return": 1000.0, "device": device, "runs_dir": str(tmp_path / "runs"),
               "total_timesteps": 1_000}
    assert train_campaign(options, campaign_runs(ALGOS, (0,))) == 0
    for algo in ALGOS:
        run = tmp_path / "runs" / f"{algo}_seed-0"
        assert [point["step"] for point in saved(run)["history"]] == [0, 1_000]
        [session] = sessions(run)
        assert session["device"].startswith(device) and session["torch_threads"] == 1


def torch_settings() -> tuple[int, str, bool]:
    """torch's thread count, float32 matmul precision and cuDNN TF32 switch, as a session's provenance names them."""
    return torch.get_num_threads(), torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32


def set_torch_settings(settings: tuple[int, str, bool]) -> None:
    threads, precision, torch.backends.cudnn.allow_tf32 = settings
    torch.set_num_threads(threads)
    torch.set_float32_matmul_precision(precision)


@pytest.fixture
def notebook_settings() -> Iterator[tuple[int, str, bool]]:
    """A notebook's own torch settings (two threads, TF32 matmuls and convolutions), the test process's given back
    after the test."""
    before = torch_settings()
    set_torch_settings((2, "high", True))
    yield torch_settings()
    set_torch_settings(before)


def recorded(session: dict) -> tuple[int, str, bool]:
    return session["torch_threads"], session["float32_matmul_precision"], session["cudnn_tf32"]


def test_each_session_records_the_precision_in_effect_and_the_trainer_gives_torchs_settings_back(
        device: str, tmp_path: Path, notebook_settings: tuple[int, str, bool]) -> None:
    """The trainer sets the run's torch threads (one here) and on CUDA trains in fp32 without TF32 (matmuls at
    "highest", no TF32 convolutions); on the CPU it leaves the precision alone, so the test sets it by hand in the
    trainer's place. Either way the session's provenance records what is in effect, and once the trainer is closed,
    directly or by ``train``, the notebook has its own settings again."""
    fp32 = (1, "highest", False)
    trainer = Trainer(*resolve_config(cartpole(tmp_path, device, torch_threads=1)))
    try:
        if device == "cpu":
            set_torch_settings(fp32)
        assert torch_settings() == fp32
        assert recorded(session_provenance(trainer.device, 0, 0).to_dict()) == fp32
    finally:
        trainer.close()
    assert torch_settings() == notebook_settings
    result = train(cartpole(tmp_path, device, torch_threads=1, total_timesteps=1_000), show_progress=False)
    assert recorded(sessions(result.run_dir)[0]) == (fp32 if device == "cuda" else (1, *notebook_settings[1:]))
    assert torch_settings() == notebook_settings


def test_a_resume_on_a_gpu_restores_the_cuda_stream_of_the_gpu_the_run_trained_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen on any machine: a CPU trainer is told it trains on a GPU, and torch.cuda's random-state calls are
    recorded. A run that trained on cuda:1 saves that GPU's stream; resumed on another machine's cuda:0 it
    continues that stream there, from this version's checkpoint (one stream) and from an earlier one's (a stream
    per GPU of the machine, of which cuda:1's is the run's)."""
    streams = {torch.device("cuda", i): torch.full((16,), i + 1, dtype=torch.uint8) for i in range(2)}
    restored = []
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda device: streams[device])
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device: restored.append((state, device)))
    trainer = Trainer(*resolve_config(cartpole(tmp_path, "cpu")))
    try:
        monkeypatch.setattr(trainer, "restart_episodes", lambda seed: None)  # its tensors would go to the fake GPU
        trainer.device = torch.device("cuda", 1)
        state = trainer.state_dict()
        [saved] = state["rng"]["cuda"]
        assert torch.equal(saved, streams[torch.device("cuda", 1)])
        state["config"]["device"] = "cuda:1"
        trainer.device = torch.device("cuda", 0)
        for cuda_streams in ([saved], list(streams.values())):
            restored.clear()
            trainer.load_state_dict({**state, "rng": {**state["rng"], "cuda": cuda_streams}})
            [(stream, on)] = restored
            assert torch.equal(stream, streams[torch.device("cuda", 1)]) and on == torch.device("cuda", 0)
    finally:
        trainer.close()
