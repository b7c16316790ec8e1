"""``publish``: one complete W&B run per (algo, seed) from the local files, whatever the sessions were.

Real runs are trained on CartPole over several resumed sessions (one of them redoing steps after
lost checkpoints, as after a kill), W&B offline; the offline folders that publish writes are read
back record by record.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, NamedTuple

import builders
import pytest
import wandb
from wandb_offline import RunRecord, history_rows, run_records

from rlhelpers.cli import main
from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.evaluation import Evaluation
from rlhelpers.runner import tracking
from rlhelpers.runner.run import train
from rlhelpers.runner.store import LOCK_FILE, METRICS_FILE, checkpoint_name
from rlhelpers.runner.tracking import init_run

EVAL_INTERVAL = 2_500  # training lines land every 10,000 steps (trainer's log interval), evaluations more often
CARTPOLE = {"eval_interval": EVAL_INTERVAL, "checkpoint_interval_s": 3600.0, "wandb_mode": "offline"}


class Trained(NamedTuple):
    root: Path  # WANDB_DIR of the module: offline folders are in root/wandb
    runs: dict[str, Path]  # run name -> run directory
    sessions: list[Path]  # the offline folders that training wrote, oldest first




def offline_folders(root: Path, run_id: str | None = None) -> set[Path]:
    """Offline run folders under ``root`` (of the W&B run ``run_id`` only, when given; W&B may suffix their
    names with -1, -2, ... when two start within a second, so the id is read from the run record)."""
    folders = set((root / "wandb").glob("offline-run-*"))
    return folders if run_id is None else {f for f in folders if run_record(f).run_id == run_id}


def run_record(folder: Path) -> RunRecord:
    (run,) = [r.run for r in run_records(folder) if r.WhichOneof("record_type") == "run"]
    return run


def metric_keys(row: dict) -> set[str]:
    """The keys of a logged row without W&B's own (_step, _runtime, _timestamp)."""
    return {key for key in row if not key.startswith("_")}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Trained:
    """a2c_seed-0 trained in four sessions: three resumes, the second of which redoes 7,500-10,000 after the
    checkpoint at 10,000 was lost (as after a kill); task1_seed-0 in one session. W&B offline, one folder
    per session. Shared by the tests of this module, which only read it."""
    root = tmp_path_factory.mktemp("publish")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("WANDB_DIR", str(root))
        env.setenv("WANDB_SILENT", "true")
        env.delenv("WANDB_API_KEY", raising=False)
        env.delenv("WANDB_MODE", raising=False)
        wandb.teardown()
        for total in (5_000, 10_000):
            train(builders.cartpole(root / "runs", total, algo="a2c", **CARTPOLE), show_progress=False)
        a2c = root / "runs" / "a2c_seed-0"
        (a2c / checkpoint_name(10_000)).unlink()
        for total in (12_500, 15_000):
            train(builders.cartpole(root / "runs", total, algo="a2c", **CARTPOLE), show_progress=False)
        train(builders.cartpole(root / "runs", 5_000, algo="task1", **CARTPOLE), show_progress=False)
        wandb.teardown()  # wait until W&B has written everything
    return Trained(root, {"a2c_seed-0": a2c, "task1_seed-0": root / "runs" / "task1_seed-0"},
                   sorted(offline_folders(root)))


@pytest.fixture
def root(trained: Trained, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's W&B writes next to the training's offline folders (conftest tore W&B down before it)."""
    monkeypatch.setenv("WANDB_DIR", str(trained.root))
    return trained.root


def expected_steps(run_path: Path) -> list[int]:
    """Every global_step of the run's local files, once."""
    history = json.loads((run_path / "eval_history.json").read_text())["history"]
    steps = {int(line["global_step"]) for line in builders.logged(run_path / METRICS_FILE)}
    return sorted(steps | {int(point["step"]) for point in history})


def test_offline_publish_writes_one_complete_run_per_algo_and_seed(trained: Trained, root: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    a2c = trained.runs["a2c_seed-0"]
    run_id = json.loads((a2c / "eval_history.json").read_text())["wandb_run_id"]
    # The problem publish solves: training left one partial folder per session, all with the run's id.
    sessions = [p for p in trained.sessions if run_record(p).run_id == run_id]
    assert len(sessions) == 4
    session_steps = [[row["global_step"] for row in history_rows(s)] for s in sessions]
    assert all(set(steps) < set(expected_steps(a2c)) for steps in session_steps)
    assert sum(steps.count(10_000) for steps in session_steps) == 4  # training and eval rows, logged twice
    before = offline_folders(root)
    capsys.readouterr()

    assert main(["publish", "--runs-dir", str(a2c.parent), "--mode", "offline"]) == 0
    wandb.teardown()

    out = capsys.readouterr().out
    new = offline_folders(root) - before
    assert len(new) == 2, "one folder per (algo, seed)"
    (upload,) = [line for line in out.splitlines() if line.startswith("Upload with: wandb sync ")]
    assert sorted(upload.removeprefix("Upload with: wandb sync ").split(" ")) == sorted(str(p) for p in new)
    for run_path in trained.runs.values():
        saved = json.loads((run_path / "eval_history.json").read_text())
        (folder,) = new & offline_folders(root, saved["wandb_run_id"])
        assert f"{run_path.name}: {len(expected_steps(run_path))} rows written to {folder}" in out
        rows = history_rows(folder)
        assert [row["global_step"] for row in rows] == expected_steps(run_path), "every step once, in order"
        by_step = {row["global_step"]: row for row in rows}
        for point in saved["history"]:
            assert by_step[point["step"]]["eval/returns"] == point["returns"]
            assert by_step[point["step"]]["eval/mean_return"] == pytest.approx(sum(point["returns"]) / 2)
        for line in builders.logged(run_path / METRICS_FILE):
            row = by_step[line["global_step"]]
            assert all(row[key] == pytest.approx(value) for key, value in line.items()
                       if key not in ("time", "global_step") and value is not None)
        run = run_record(folder)
        assert (run.run_id, run.display_name, run.project) == (saved["wandb_run_id"], run_path.name,
                                                               saved["config"]["wandb_project"])
    (a2c_folder,) = new & offline_folders(root, run_id)
    assert [row["global_step"] for row in history_rows(a2c_folder) if "losses/loss" in row] == [10_000]

    # Safe to repeat: another publish writes another complete folder, again each step once.
    assert main(["publish", "--runs-dir", str(a2c.parent), "--mode", "offline", "--project", "other"]) == 0
    wandb.teardown()
    (again,) = offline_folders(root, run_id) - before - new
    assert [row["global_step"] for row in history_rows(again)] == expected_steps(a2c)


def test_online_publish_logs_only_what_wandb_lacks(trained: Trained, root: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Online, W&B's read-back decides what is logged. The server is simulated: runs are written offline and
    ``logged_keys`` answers from the records that the first two training sessions left."""
    a2c = trained.runs["a2c_seed-0"]
    run_id = json.loads((a2c / "eval_history.json").read_text())["wandb_run_id"]
    server: dict[int, set[str]] = {}
    for session in [p for p in trained.sessions if run_record(p).run_id == run_id][:2]:
        for row in history_rows(session):
            server.setdefault(row["global_step"], set()).update(metric_keys(row) - {"global_step"})
    assert max(server) == 10_000
    monkeypatch.setattr(tracking, "has_wandb_key", lambda: True)

    def offline_init_run(project: str, entity: str | None, name: str, run_id: str, config: dict[str, Any],
                         mode: str) -> Any:
        return init_run(project, entity, name, run_id, config, "offline")

    monkeypatch.setattr(tracking, "init_run", offline_init_run)
    monkeypatch.setattr(tracking, "logged_keys", lambda entity, project, run_id: server)
    before = offline_folders(root)

    (result,) = [r for r in tracking.publish_runs(a2c.parent) if r.run_name == "a2c_seed-0"]
    wandb.teardown()

    (folder,) = offline_folders(root, run_id) - before
    rows = history_rows(folder)
    assert [row["global_step"] for row in rows] == expected_steps(a2c)
    # Up to 10,000 W&B has every metric but the returns, which training never logs; after it, everything is new.
    assert all(metric_keys(row) == {"global_step", "eval/returns"} for row in rows if row["global_step"] <= 10_000)
    assert all({"eval/mean_return", "eval/returns"} <= metric_keys(row) for row in rows if row["global_step"] > 10_000)
    assert (result.logged, result.present) == (len(rows), 0)

    # Once W&B holds everything, publishing again logs nothing.
    for row in rows:
        server.setdefault(row["global_step"], set()).update(metric_keys(row) - {"global_step"})
    (again,) = [r for r in tracking.publish_runs(a2c.parent) if r.run_name == "a2c_seed-0"]
    assert (again.logged, again.present) == (0, len(expected_steps(a2c)))


def test_rows_to_log_fills_in_missing_keys_only() -> None:
    rows: list[dict[str, Any]] = [{"global_step": 0, "eval/mean_return": 1.0, "eval/returns": [1.0]},
                                  {"global_step": 10, "losses/loss": 0.5, "eval/mean_return": 2.0}]
    present = {0: {"eval/mean_return", "eval/returns"}, 10: {"losses/loss"}}
    assert tracking.rows_to_log(rows, present) == [{"eval/mean_return": 2.0, "global_step": 10}]
    assert tracking.rows_to_log(rows, {}) == rows


class FakeApi:
    """Stands for ``wandb.Api`` with one stored run, ``student/p/abc12345``."""

    default_entity = "student"
    rows: list[dict] = []
    last_step: int | None = None
    error: Exception | None = None
    scans: list[dict] = []

    def run(self, path: str) -> FakeApi:
        if self.error is not None:
            raise self.error
        if path != "student/p/abc12345":
            raise wandb.errors.CommError(f"Could not find run {path}", ValueError(f"Could not find run {path}"))
        return self

    @property
    def lastHistoryStep(self) -> int | None:  # noqa: N802 -- wandb's name
        return self.last_step

    def scan_history(self, keys: list[str] | None = None, page_size: int = 1000, min_step: int = 0,
                     max_step: int | None = None, use_cache: bool = True) -> list[dict]:
        FakeApi.scans.append({"use_cache": use_cache})
        return self.rows


def test_logged_keys_reads_every_row_back_or_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wandb, "Api", FakeApi)
    assert tracking.logged_keys(None, "p", "new00000") == {}, "a run W&B does not have yet holds nothing"

    monkeypatch.setattr(FakeApi, "scans", [])
    monkeypatch.setattr(FakeApi, "rows", [
        {"_step": 0, "global_step": 0, "eval/mean_return": -20.0, "eval/returns": None},
        {"_step": 1, "global_step": 10_000, "losses/loss": 0.5, "_runtime": 3.0},
        {"_step": 2, "global_step": 10_000, "eval/mean_return": -19.0}])
    monkeypatch.setattr(FakeApi, "last_step", 2)
    assert tracking.logged_keys(None, "p", "abc12345") == {0: {"eval/mean_return"},
                                                          10_000: {"losses/loss", "eval/mean_return"}}
    assert FakeApi.scans[-1] == {"use_cache": False}, "never a cached, possibly stale, history"

    monkeypatch.setattr(FakeApi, "last_step", 5)  # W&B holds six rows but returned three: logging could duplicate
    with pytest.raises(RLHelpersError, match="W&B returned 3 of the 6 rows of run student/p/abc12345; nothing"):
        tracking.logged_keys("student", "p", "abc12345")
    monkeypatch.setattr(FakeApi, "error", wandb.errors.CommError("HTTP 502", None))
    with pytest.raises(RLHelpersError, match="cannot read W&B run student/p/abc12345 back: HTTP 502"):
        tracking.logged_keys("student", "p", "abc12345")


def test_online_publish_without_a_key_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.setenv("HOME", str(tmp_path))
    builders.write_run(tmp_path / "runs" / "a2c_seed-0", (), {"wandb_project": "p"}, wandb_run_id="abc12345")
    assert main(["publish", "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: publishing online needs a W&B API key") and "WANDB_API_KEY" in err
    assert not (tmp_path / "wandb").exists(), "nothing was started"


def test_publish_skips_a_run_in_training_and_names_empty_dirs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(RLHelpersError, match="no run directory with an eval_history.json in .*--runs-dir"):
        tracking.publish_runs(tmp_path / "missing", mode="offline")
    run = tmp_path / "runs" / "a2c_seed-0"
    builders.write_run(run, (), {"wandb_project": "p"}, wandb_run_id="abc12345")
    (run / LOCK_FILE).write_text(json.dumps({"host": "colab-vm-2", "pid": 7, "heartbeat": time.time()}))
    assert tracking.publish_runs(tmp_path / "runs", mode="offline") == []
    assert "a2c_seed-0: skipped, it is being trained (host colab-vm-2, pid 7)" in capsys.readouterr().out


class FakeRun:
    """Stands for the W&B run that ``init_run`` opens: records what is logged and how the run is finished."""

    url, dir, entity, project = "https://wandb.ai/student/p/runs/abc12345", "/tmp/wandb/run/files", "student", "p"

    def __init__(self, fail_at: int | None) -> None:
        self.fail_at = fail_at
        self.logged: list[dict] = []
        self.exit_codes: list[int] = []

    def log(self, row: dict) -> None:
        if len(self.logged) == self.fail_at:
            raise ConnectionError("the network dropped")
        self.logged.append(row)

    def finish(self, exit_code: int = 0) -> None:
        self.exit_codes.append(exit_code)


@pytest.mark.parametrize(("fail_at", "exit_codes"), [(None, [0]), (1, [1])])
def test_a_publish_finishes_its_w_and_b_run_once_as_failed_when_logging_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_at: int | None, exit_codes: list[int]) -> None:
    run_path = tmp_path / "a2c_seed-0"
    builders.write_run(run_path, tuple(Evaluation(step, (1.0,), (10,)) for step in (0, 10, 20)), {"wandb_project": "p"},
                       wandb_run_id="abc12345")
    fake = FakeRun(fail_at)
    monkeypatch.setattr(tracking, "init_run", lambda *args: fake)
    if fail_at is None:
        result = tracking.publish_run(run_path, "offline")
        assert (result.logged, result.location) == (3, "/tmp/wandb/run")
    else:
        with pytest.raises(ConnectionError):
            tracking.publish_run(run_path, "offline")
    assert fake.exit_codes == exit_codes
