"""The committed float16 policy: export, reload, re-scoring against the run's last evaluation, and the GIF."""

from __future__ import annotations

import json
from pathlib import Path

import builders
import imageio.v3 as iio
import pytest
import torch

from allaction.playback import (
    GREEDY_RESCORE_FILE,
    MAX_POLICY_BYTES,
    MAX_VIDEO_BYTES,
    POLICY_FILE,
    RESCORE_FILE,
    Rescore,
    evaluate_policy_file,
    export_policy,
    load_policy,
    read_rescore,
    record_video,
    save_rescore,
)
from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.evaluation import Evaluation
from rlhelpers.core.networks import build_model
from rlhelpers.runner.config import TrainConfig
from rlhelpers.runner.store import SNAPSHOT_DIR, snapshot_name


@pytest.fixture
def pong_run(tmp_path: Path) -> Path:
    """A Pong run directory with one snapshot of an untrained model and a last evaluation near -20.5."""
    torch.manual_seed(0)
    config = TrainConfig(algo="task1", n_eval_envs=2)
    model = build_model((4, 84, 84), 6, "task1")
    run = tmp_path / "task1_seed-0"
    (run / SNAPSHOT_DIR).mkdir(parents=True)
    saved_config = {**config.to_dict(), "runs_dir": str(tmp_path)}  # the path earlier versions saved
    torch.save({"step": 0, "config": saved_config, "obs_shape": [4, 84, 84], "n_actions": 6,
                "model": model.state_dict()}, run / SNAPSHOT_DIR / snapshot_name(0))
    builders.write_run(run, (Evaluation(0, (-21.0, -20.0, -21.0, -20.0), (800,) * 4),), config.to_dict())
    return run


def test_export_keeps_the_weights_in_float16(pong_run: Path) -> None:
    path = export_policy(pong_run)
    assert path == pong_run / POLICY_FILE and 2_000_000 < path.stat().st_size <= MAX_POLICY_BYTES
    saved = torch.load(path, weights_only=True)
    assert all(v.dtype == torch.float16 for v in saved["model"].values())
    assert "runs_dir" not in saved["config"]  # no machine path in a committed file
    model, config, step = load_policy(path)
    snapshot = torch.load(pong_run / SNAPSHOT_DIR / snapshot_name(0), weights_only=True)["model"]
    assert config.algo == "task1" and step == 0
    for name, value in model.state_dict().items():
        assert torch.allclose(value, snapshot[name], rtol=1e-3, atol=1e-4), name
        assert not torch.equal(value, snapshot[name]) or value.abs().max() == 0  # rounded through float16


def test_rescore_and_video(pong_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    export_policy(pong_run)
    rescore = evaluate_policy_file(pong_run, episodes=2, show_progress=True)
    progress = capsys.readouterr().err
    assert "episodes: 100%" in progress and "2/2" in progress  # one tick per finished episode
    assert len(rescore.returns) == 2 and all(-21 <= r <= -15 for r in rescore.returns)  # untrained: loses
    assert rescore.last_mean == -20.5 and rescore.consistent is not None
    assert (rescore.step, rescore.seed) == (0, 0)
    video = record_video(pong_run, tmp_path / "agent.gif")
    frames = iio.imread(tmp_path / "agent.gif")
    assert 100 < len(frames) <= video["frames"]  # the GIF writer merges repeated frames
    assert video["bytes"] <= MAX_VIDEO_BYTES
    assert frames.shape[1:3] == (84 * 2 + 14, 84 * 2)
    assert -21 <= video["score"] <= -15 and frames[0][:14].max() > 200  # the score line is drawn


def test_missing_policy_and_snapshot_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(RLHelpersError, match="no model snapshot to export"):
        export_policy(tmp_path)
    with pytest.raises(RLHelpersError, match="no policy file at"):
        evaluate_policy_file(tmp_path)


def saved_rescore(run_dir: Path) -> Rescore:
    """The re-score saved in ``run_dir``, which must have one."""
    rescore = read_rescore(run_dir)
    assert rescore is not None, f"no re-score in {run_dir}"
    return rescore


def test_evaluate_command_exports_rescores_and_compares(pong_run: Path, capsys: pytest.CaptureFixture) -> None:
    from allaction.cli import main

    assert main(["evaluate", str(pong_run), "--episodes", "2", "--export"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"wrote {pong_run / POLICY_FILE}"
    assert out[1].startswith(f"{pong_run}: -2") and out[1].endswith("over 2 episodes")
    assert out[2].startswith("run's last evaluation: -20.50 ± 0.29; the new mean is ")
    assert out[3] == f"wrote {pong_run / RESCORE_FILE}"
    saved = json.loads((pong_run / RESCORE_FILE).read_text())
    assert len(saved["returns"]) == 2 and saved["last_mean"] == -20.5 and saved["step"] == 0
    assert f"{saved['mean']:.2f}" in out[1] and saved["consistent"] == saved_rescore(pong_run).consistent
    assert read_rescore(pong_run.parent) is None
    assert main(["evaluate", str(pong_run), "--episodes", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == f"kept {pong_run / RESCORE_FILE}: it re-scores this policy over more episodes"
    assert len(saved_rescore(pong_run).returns) == 2


def test_a_greedy_rescore_is_kept_apart_and_not_judged_against_the_sampled_evaluations(
        pong_run: Path, capsys: pytest.CaptureFixture) -> None:
    from allaction.cli import main

    assert main(["evaluate", str(pong_run), "--episodes", "2", "--export", "--greedy"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith(f"{pong_run}: -2") and out[1].endswith("over 2 episodes of greedy actions")
    assert out[2] == "run's last evaluation: -20.50 ± 0.29"  # no verdict: the run evaluated sampled actions
    assert out[3] == f"wrote {pong_run / GREEDY_RESCORE_FILE}"
    greedy = read_rescore(pong_run, greedy=True)
    assert greedy is not None and greedy.greedy and greedy.consistent is None and len(greedy.returns) == 2
    assert read_rescore(pong_run) is None  # the sampled re-score's file is untouched
    assert json.loads((pong_run / GREEDY_RESCORE_FILE).read_text())["greedy"] is True


def test_a_shorter_rescore_of_the_same_policy_keeps_the_longer_one(tmp_path: Path) -> None:
    def rescore(episodes: int, step: int) -> Rescore:
        return Rescore([1.0] * episodes, 1.0, 0.0, 1.0, 0.1, step, seed=0)

    assert save_rescore(tmp_path, rescore(30, 100)) == tmp_path / RESCORE_FILE
    assert save_rescore(tmp_path, rescore(2, 100)) is None  # a quick check of the same policy
    assert len(saved_rescore(tmp_path).returns) == 30
    assert save_rescore(tmp_path, rescore(30, 100)) is not None  # as many episodes: replaced
    assert save_rescore(tmp_path, rescore(2, 200)) is not None  # another policy: replaced
    assert read_rescore(tmp_path) == rescore(2, 200)


def test_an_oversized_video_is_refused_and_removed(pong_run: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    from allaction import playback
    from allaction.cli import main

    export_policy(pong_run)
    monkeypatch.setattr(playback, "MAX_VIDEO_BYTES", 1_000)
    with pytest.raises(RLHelpersError, match="over the 1,000 allowed; record it with a smaller scale"):
        record_video(pong_run, tmp_path / "agent.gif", max_steps=20)
    assert not (tmp_path / "agent.gif").exists()
    assert main(["evaluate", str(pong_run), "--video", str(tmp_path / "agent.gif"), "--video-scale", "0"]) == 2
    assert "--video-scale must be a positive integer" in capsys.readouterr().err


def test_rescore_is_consistent_within_1_96_standard_errors_of_the_difference() -> None:
    # |0 - 2.5| <= 1.96 * sqrt(1 + 1) = 2.77 < |0 - 3|
    assert Rescore([], 0.0, 1.0, 2.5, 1.0, 0, 0).consistent is True
    assert Rescore([], 0.0, 1.0, 3.0, 1.0, 0, 0).consistent is False
    assert Rescore([], 0.0, 1.0, None, None, 0, 0).consistent is None  # the run has no evaluation to compare with
