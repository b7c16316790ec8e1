"""Stopping a run part-way and starting it again continues where it was."""

import functools
import json

import builders
import torch

from rlhelpers.runner.run import train
from rlhelpers.runner.store import METRICS_FILE, RunDirectory

cartpole = functools.partial(builders.cartpole, algo="task2", stop_return=1000.0, wandb_mode="offline")


def test_resume_continues_history_and_wandb_run(tmp_path, monkeypatch) -> None:
    wandb_dir = tmp_path / "wandb_files"
    monkeypatch.setenv("WANDB_DIR", str(wandb_dir))
    first = train(cartpole(tmp_path, 3_000), show_progress=False)
    assert first.num_timesteps == 3_000
    assert [e.step for e in first.record.evaluations] == [0, 1_000, 2_000, 3_000]

    run_dir = RunDirectory(tmp_path / "task2_seed-0")
    state = run_dir.load_latest_checkpoint()
    assert state is not None and state["num_timesteps"] == 3_000 and state["wandb_run_id"] == first.record.wandb_run_id

    second = train(cartpole(tmp_path, 6_000), show_progress=False)
    steps = [e.step for e in second.record.evaluations]
    assert steps == [0, 1_000, 2_000, 3_000, 4_000, 5_000, 6_000]
    assert second.record.evaluations[:4] == first.record.evaluations  # history intact, nothing re-evaluated
    assert second.record.wandb_run_id == first.record.wandb_run_id
    # offline-run-<time>-<id>, with '-1' appended when both sessions started in the same second
    offline_runs = sorted(p.name for p in (wandb_dir / "wandb").glob("offline-run-*"))
    assert len(offline_runs) == 2 and all(f"-{first.record.wandb_run_id}" in name for name in offline_runs)

    saved = json.loads(run_dir.history_path.read_text())
    assert [p["step"] for p in saved["history"]] == steps
    assert saved["wandb_run_id"] == first.record.wandb_run_id

    again = train(cartpole(tmp_path, 6_000), show_progress=False)  # budget already spent: nothing to do
    assert again.num_timesteps == 6_000 and again.record.evaluations == second.record.evaluations


def test_checkpoint_holds_the_update_count_and_the_optimizer_state(tmp_path) -> None:
    """What a resume needs besides the weights (that the resumed update is the original's is checked in
    test_trainer.py)."""
    train(cartpole(tmp_path, 2_000), show_progress=False)
    state = RunDirectory(tmp_path / "task2_seed-0").load_latest_checkpoint()
    assert state is not None
    assert state["n_updates"] == 2_000 // 20
    assert state["optimizer"]["state"]  # the RMSprop square averages are saved, not re-initialised


def test_snapshots_change_nothing_that_is_trained_even_on_a_resume_at_a_snapshot_step(tmp_path) -> None:
    """Two sessions (stopped at 1,000, where a snapshot, an evaluation and a checkpoint coincide, then
    resumed to 2,000) train the same with a snapshot every 500 steps as with none but each session's
    first and last: saving a file never changes the training's random stream."""
    def two_sessions(name: str, snapshot_interval: int) -> tuple[list, list, list[int], dict]:
        runs = tmp_path / name
        train(cartpole(runs, 1_000, snapshot_interval=snapshot_interval, wandb_mode="disabled"), show_progress=False)
        result = train(cartpole(runs, 2_000, snapshot_interval=snapshot_interval, wandb_mode="disabled"),
                       show_progress=False)
        run_dir = RunDirectory(runs / "task2_seed-0")
        metrics = [{k: v for k, v in m.items() if k not in ("time", "charts/fps")}
                   for m in builders.logged(run_dir.path / METRICS_FILE)]
        final_weights = torch.load(run_dir.snapshots()[-1][1], weights_only=True)["model"]
        return list(result.record.evaluations), metrics, [step for step, _ in run_dir.snapshots()], final_weights

    often, rarely = two_sessions("often", 500), two_sessions("rarely", 10**9)
    assert often[2] == [0, 500, 1_000, 1_500, 2_000] and rarely[2] == [0, 1_000, 2_000]
    assert [e.returns for e in often[0]] == [e.returns for e in rarely[0]]
    assert often[1] and often[1] == rarely[1]  # losses, entropy, ... logged at the same steps
    assert often[3].keys() == rarely[3].keys()
    assert all(torch.equal(often[3][name], rarely[3][name]) for name in often[3])
