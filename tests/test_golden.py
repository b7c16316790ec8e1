"""What a run keeps on disk, pinned: a CartPole run written by the code before the runner's restructuring (commit
45147d7, tests/fixtures/before-71) is read, resumed and reported by today's code as that code did.

The fixture holds the run at 10,000 steps (history, metrics, its checkpoint and last snapshot), the same run that
the old code resumed to 20,000 steps (``resumed-to-20000.*``) and the old ``status`` line. The continuation is
compared value for value where the CPU is the model that wrote the fixture (float kernels differ between CPU
models); elsewhere its steps and keys are."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import builders

from rlhelpers.cli import main
from rlhelpers.runner.config import TrainConfig
from rlhelpers.runner.run import cpu_model, train
from rlhelpers.runner.store import HISTORY_FILE, METRICS_FILE, RunDirectory, load_model, read_run

FIXTURES = Path(__file__).parent / "fixtures" / "before-71"
RUN = "task1_seed-3"
WALL_CLOCK = {"time", "train_seconds", "charts/fps"}  # what differs from one session to the next
ADDED_SINCE = {"charts/reward_mean_100"}  # what today's code logs beside what the old code logged


def copy_of_the_run(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    shutil.copytree(FIXTURES / RUN, runs / RUN)
    return runs


def without_wall_clock(lines: list[dict]) -> list[dict]:
    return [{k: v for k, v in line.items() if k not in WALL_CLOCK | ADDED_SINCE} for line in lines]


def test_the_old_files_read_as_they_were_written(tmp_path: Path) -> None:
    runs = copy_of_the_run(tmp_path)
    on_disk = json.loads((runs / RUN / HISTORY_FILE).read_text())
    record = read_run(runs / RUN)
    assert record is not None and record.to_dict() == on_disk  # read and written back through the same class
    assert (record.arm, record.seed, record.wandb_run_id) == ("task1", 3, on_disk["wandb_run_id"])
    assert [e.step for e in record.evaluations] == [0, 5_000, 10_000] and record.finished()
    assert [e.returns for e in record.evaluations] == [tuple(p["returns"]) for p in on_disk["history"]]
    metrics = builders.logged(runs / RUN / METRICS_FILE)
    assert [m["global_step"] for m in metrics] == [0, 5_000, 10_000, 10_000] and "losses/entropy" in metrics[2]
    state = RunDirectory(runs / RUN).load_latest_checkpoint()
    assert state is not None and state["num_timesteps"] == 10_000 and state["eval_history"] == on_disk["history"]
    model, config, step = load_model(runs / RUN / "snapshots" / "model-000000010000.pt")
    assert (config.run_name, step, model.critic_head.out_features) == (RUN, 10_000, 2)


def test_the_old_run_is_reported_as_the_old_code_reported_it(tmp_path: Path, capsys) -> None:
    runs = copy_of_the_run(tmp_path)
    assert main(["status", "--runs-dir", str(runs)]) == 0
    assert capsys.readouterr().out == (FIXTURES / "status.txt").read_text()


def test_the_old_run_resumes_as_the_old_code_resumed_it(tmp_path: Path) -> None:
    runs = copy_of_the_run(tmp_path)
    saved = json.loads((runs / RUN / HISTORY_FILE).read_text())
    config = TrainConfig.from_dict({**saved["config"], "total_timesteps": 20_000})
    config.runs_dir = str(runs)
    result = train(config, show_progress=False)
    assert (result.num_timesteps, result.stop_reason) == (20_000, "total_timesteps")
    history = json.loads((runs / RUN / HISTORY_FILE).read_text())
    expected = json.loads((FIXTURES / "resumed-to-20000.eval_history.json").read_text())
    assert history["history"][:3] == saved["history"]  # what was there stays, bit for bit
    assert history["wandb_run_id"] == saved["wandb_run_id"] and len(history["provenance"]) == 2
    metrics = builders.logged(runs / RUN / METRICS_FILE)
    expected_metrics = builders.logged(FIXTURES / "resumed-to-20000.metrics.jsonl")
    assert metrics[:4] == builders.logged(FIXTURES / RUN / METRICS_FILE)
    if cpu_model() == saved["provenance"][0]["device_name"]:  # the CPU model that wrote the fixture
        assert without_wall_clock(history["history"]) == without_wall_clock(expected["history"])
        assert without_wall_clock(metrics) == without_wall_clock(expected_metrics)
    else:
        assert [p["step"] for p in history["history"]] == [p["step"] for p in expected["history"]]
        assert [sorted(set(m) - ADDED_SINCE) for m in metrics] == [sorted(m) for m in expected_metrics]
