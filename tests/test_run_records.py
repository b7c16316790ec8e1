"""What a run leaves for the report: its identity, provenance, the metrics log, model
snapshots, and a checkpoint when it is asked to stop with SIGTERM."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import builders
import pytest
import torch
from builders import saved

from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.networks import build_model
from rlhelpers.runner.config import TrainConfig
from rlhelpers.runner.run import git_commit, session_provenance, train
from rlhelpers.runner.store import (
    HISTORY_FILE,
    LOCK_FILE,
    METRICS_FILE,
    SHAPE_FIELDS,
    SNAPSHOT_DIR,
    MetricsLine,
    Provenance,
    RunDirectory,
    append_metrics,
    drop_metrics_after,
    read_metrics,
    read_run,
)

REPO = Path(__file__).resolve().parents[1]


cartpole = functools.partial(builders.cartpole, algo="task1", snapshot_interval=1_000)




# ---------------------------------------------------------------- a bf16 run of an earlier version

def test_a_run_trained_in_bf16_by_an_earlier_version_is_not_resumed_in_fp32(tmp_path: Path) -> None:
    train(cartpole(tmp_path, 200), show_progress=False)
    run = RunDirectory(tmp_path / "task1_seed-0")
    record = saved(run.path)
    record["config"]["precision"] = "bf16"  # as versions that trained the encoder in bfloat16 saved it
    run.history_path.write_text(json.dumps(record))
    state = run.load_latest_checkpoint()
    assert state is not None
    state["config"]["precision"] = "bf16"
    path = run.checkpoints()[0][1]
    torch.save(state, path)
    with pytest.raises(RLHelpersError, match="precision: saved 'bf16', while this version trains in fp32 only"):
        train(cartpole(tmp_path, 400), show_progress=False)


# ---------------------------------------------------------------- provenance, metrics, snapshots

def test_saved_records_name_no_path_of_this_machine(tmp_path: Path) -> None:
    train(cartpole(tmp_path, 1_000), show_progress=False)
    run = RunDirectory(tmp_path / "task1_seed-0")
    assert str(tmp_path) not in run.history_path.read_text()
    checkpoint = builders.checkpoint(run.path)
    snapshot = torch.load(next((run.path / SNAPSHOT_DIR).glob("*.pt")), weights_only=True)
    for config in (saved(run.path)["config"], checkpoint["config"], snapshot["config"]):
        assert "runs_dir" not in config and config["algo"] == "task1"


def test_history_records_provenance_and_wall_clock_per_session(tmp_path: Path) -> None:
    train(cartpole(tmp_path, 2_000), show_progress=False)
    train(cartpole(tmp_path, 3_000), show_progress=False)
    record = read_run(tmp_path / "task1_seed-0")
    assert record is not None
    assert (record.name, record.arm, record.seed, record.config.variant) == ("task1_seed-0", "task1", 0, "")
    first, second = saved(tmp_path / "task1_seed-0")["provenance"]
    assert (first["start_step"], second["start_step"]) == (0, 2_000)
    for key in ("rlhelpers", "torch", "gymnasium", "ale_py", "numpy", "python", "device_name", "cpu_count"):
        assert first[key], key
    assert first["device"] == "cpu" and first["torch_threads"] >= 1
    assert first["torch"] == str(torch.__version__)
    commit, _ = git_commit(REPO)
    assert first["git_commit"] == commit  # None only where the package is not in a git checkout
    history = record.evaluations
    assert [p.step for p in history] == [0, 1_000, 2_000, 3_000] and record.last == history[-1]
    assert record.finished() and len(record.last.returns) == len(record.last.lengths) == 2
    times = [p.time for p in history if p.time is not None]
    seconds = [p.train_seconds for p in history if p.train_seconds is not None]
    assert len(times) == len(seconds) == len(history)  # every evaluation keeps both
    assert times == sorted(times) and abs(times[0] - first["start_time"]) < 60
    assert seconds == sorted(seconds) and seconds[0] >= 0 and seconds[-1] < time.time() - first["start_time"] + 1


def test_metrics_log_mirrors_what_is_logged(tmp_path: Path) -> None:
    train(cartpole(tmp_path, 30_000, eval_interval=10_000), show_progress=False)
    run_path = tmp_path / "task1_seed-0"
    metrics = builders.logged(run_path / METRICS_FILE)
    history = saved(run_path)["history"]
    evals = [m for m in metrics if "eval/mean_return" in m]
    assert [m["global_step"] for m in evals] == [p["step"] for p in history]
    assert [m["eval/mean_return"] for m in evals] == pytest.approx([sum(p["returns"]) / 2 for p in history])
    training = [m for m in metrics if "losses/loss" in m]
    assert [m["global_step"] for m in training] == [10_000, 20_000, 30_000]
    for key in ("losses/entropy", "losses/explained_variance", "losses/grad_norm", "charts/fps",
                "charts/episode_return"):
        assert all(isinstance(m[key], float) for m in training), key


def test_metrics_log_drops_lines_after_the_resumed_step(tmp_path: Path) -> None:
    log = tmp_path / METRICS_FILE
    for step in (0, 100, 200, 300):
        append_metrics(log, {"x": float(step)}, step)
    lines = log.read_text().splitlines()
    with open(log, "a") as f:
        f.write('{"global_step": 400, "x": 4')  # the partial line of a writer killed mid-append
    drop_metrics_after(log, 200)
    assert log.read_text().splitlines() == lines[:3]  # step 300 and the partial line dropped, the rest as it was
    assert [m["global_step"] for m in builders.logged(log)] == [0, 100, 200]
    inode = log.stat().st_ino
    drop_metrics_after(log, 200)
    assert log.stat().st_ino == inode  # nothing to drop: the file is not rewritten
    append_metrics(log, {"x": float("nan")}, 300)
    assert builders.logged(log)[-1]["x"] is None  # JSON has no NaN


def test_resume_drops_metrics_logged_after_the_checkpoint(tmp_path: Path) -> None:
    config = cartpole(tmp_path, 2_000)
    train(config, show_progress=False)
    path = tmp_path / "task1_seed-0" / METRICS_FILE
    append_metrics(path, {"eval/mean_return": 1.0}, 2_500)  # logged by a session that died before saving
    train(cartpole(tmp_path, 3_000), show_progress=False)
    evals = [m["global_step"] for m in builders.logged(path) if "eval/mean_return" in m]
    assert evals == [0, 1_000, 2_000, 3_000]


def test_snapshots_every_interval_rebuild_the_model(tmp_path: Path) -> None:
    train(cartpole(tmp_path, 2_500), show_progress=False)
    run = RunDirectory(tmp_path / "task1_seed-0")
    snapshots = sorted((run.path / SNAPSHOT_DIR).glob("model-*.pt"))
    assert [p.name for p in snapshots] == [f"model-{s:012d}.pt" for s in (0, 1_000, 2_000, 2_500)]
    final = torch.load(snapshots[-1], weights_only=True)
    assert final["step"] == 2_500 and "optimizer" not in final
    model = build_model(tuple(final["obs_shape"]), final["n_actions"], final["config"]["algo"],
                        final["config"]["hidden_size"])
    model.load_state_dict(final["model"])
    newest = builders.checkpoint(run.path)
    assert newest["num_timesteps"] == 2_500
    assert all(torch.equal(final["model"][k], v) for k, v in newest["model"].items())
    first = torch.load(snapshots[0], weights_only=True)
    assert not torch.equal(first["model"]["policy_head.weight"], final["model"]["policy_head.weight"])


# ---------------------------------------------------------------- SIGTERM

def test_sigterm_checkpoints_and_exits_cleanly(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    command = [sys.executable, "-m", "rlhelpers", "train", "--env-id", "CartPole-v1", "--n-envs", "4",
               "--total-timesteps", "10000000", "--eval-interval", "1000000", "--n-eval-episodes", "2",
               "--n-eval-envs", "2", "--checkpoint-interval-s", "3600", "--runs-dir", str(runs),
               "--wandb-mode", "disabled", "--device", "cpu"]
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    run = RunDirectory(runs / "a2c_seed-0")
    deadline = time.monotonic() + 120
    while not any(m["global_step"] >= 20_000 for m in builders.logged(run.path / METRICS_FILE)):
        assert time.monotonic() < deadline and proc.poll() is None, "the run never reached step 20,000"
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "(stopped by SIGTERM)" in out
    newest = builders.checkpoint(run.path)["num_timesteps"]
    assert newest >= 20_000  # well past the step-0 checkpoint of the first evaluation
    assert max(m["global_step"] for m in builders.logged(run.path / METRICS_FILE)) <= newest
    assert not (run.path / LOCK_FILE).exists()
    assert json.loads(run.history_path.read_text())["history"][-1]["step"] == 0


def test_every_committed_record_and_log_reads_typed_and_writes_back_as_it_is() -> None:
    """Each committed eval_history.json reads into a ``RunRecord`` whose config is a ``TrainConfig`` and whose
    sessions are ``Provenance`` records, the shapes that versions wrote of each among them, and writes back to the
    file's contents, the config's and every session's fields in their order; each line of every committed
    metrics.jsonl and games.jsonl reads into a ``MetricsLine`` that writes back to the same text."""
    shapes: set[frozenset[str]] = set()
    config_shapes: set[frozenset[str] | None] = set()
    committed = (REPO / "runs", REPO / "runs_discarded")
    histories = sorted(path for folder in committed for path in folder.rglob(HISTORY_FILE))
    assert len(histories) > 40
    for path in histories:
        data = json.loads(path.read_text())
        record = read_run(path.parent)
        assert record is not None and all(isinstance(session, Provenance) for session in record.sessions)
        assert isinstance(record.config, TrainConfig) and record.config.lr == data["config"]["lr"], path
        assert record.to_dict() == data, path
        assert [list(s.to_dict()) for s in record.sessions] == [list(s) for s in data["provenance"]], path
        assert list(record.saved_config()) == list(data["config"]), path
        shapes.update(frozenset(s) & set(SHAPE_FIELDS) for s in data["provenance"])
        config_shapes.add(None if record.config_shape is None else frozenset(record.config_shape.retired))
    assert shapes == {frozenset({"precision"}), frozenset(), frozenset({"float32_matmul_precision", "cudnn_tf32"})}
    assert config_shapes == {None, frozenset(), frozenset({"precision"}), frozenset({"precision", "runs_dir"})}
    logs = sorted(path for folder in committed for path in folder.rglob("*.jsonl"))
    assert {path.name for path in logs} == {METRICS_FILE, "games.jsonl"}
    for path in logs:
        lines = path.read_text().splitlines()
        typed = read_metrics(path)
        assert all(isinstance(line, MetricsLine) for line in typed) and len(typed) == len(lines), path
        assert [json.dumps(line.to_dict()) for line in typed] == lines, path


def test_a_session_of_this_version_writes_the_fields_it_reads() -> None:
    """A new session's provenance, through a checkpoint's plain types and back, is the same record."""
    session = session_provenance(torch.device("cpu"), 0, 1_000)
    assert Provenance.from_dict(json.loads(json.dumps(session.to_dict()))) == session
    assert session.float32_matmul_precision is not None and session.precision is None
    assert "precision" not in session.to_dict() and list(session.to_dict())[:2] == ["start_step", "start_time"]
