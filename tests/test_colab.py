"""Where the notebook's runs live and how W&B is set up, with Colab's own calls replaced: the code around
them is the code that runs on Colab."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rlhelpers.core.errors import RLHelpersError
from rlhelpers.runner import colab


def test_setup_wandb_reads_the_colab_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_API_KEY", "")  # restored (removed) after the test
    monkeypatch.setattr(colab, "on_colab", lambda: True)
    monkeypatch.setattr(colab, "_colab_secret", lambda name: "k" * 40 if name == "WANDB_API_KEY" else None)
    assert colab.setup_wandb(None) == "online"
    assert os.environ["WANDB_API_KEY"] == "k" * 40


def test_setup_wandb_falls_back_to_offline_visibly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("WANDB_API_KEY", "")
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(colab, "on_colab", lambda: True)
    monkeypatch.setattr(colab, "_colab_secret", lambda name: None)
    assert colab.setup_wandb(None, colab.COLAB_RUNS_DIR) == "offline"
    out = capsys.readouterr().out
    assert out.startswith("W&B: OFFLINE (no API key found). Nothing is uploaded to W&B now.")
    assert f"{colab.COLAB_RUNS_DIR}/<run>/metrics.jsonl and eval_history.json, on Google Drive" in out
    assert (f"add the Colab secret WANDB_API_KEY (key icon, Notebook access on), rerun the set-up cells, then run "
            f"`!python -m rlhelpers publish --runs-dir {colab.COLAB_RUNS_DIR}` in a new cell") in out
    assert "wandb sync" not in out
    with pytest.raises(RLHelpersError, match="needs an API key"):
        colab.setup_wandb("online")

    monkeypatch.setattr(colab, "on_colab", lambda: False)
    assert colab.setup_wandb("disabled", "my runs") == "disabled"
    out = capsys.readouterr().out
    assert out.startswith("W&B: DISABLED (no API key found). Nothing is uploaded")
    assert "run `wandb login` (or set WANDB_API_KEY), then `python -m rlhelpers publish --runs-dir 'my runs'`" in out


def test_flush_drive_only_on_colab_with_the_runs_on_drive(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture) -> None:
    flushed = []
    monkeypatch.setattr(colab, "_colab_flush_and_unmount", lambda: flushed.append(True))
    monkeypatch.setattr(colab.os.path, "ismount", lambda path: path == colab.COLAB_DRIVE)
    monkeypatch.setattr(colab, "on_colab", lambda: False)
    colab.flush_drive("runs")
    monkeypatch.setattr(colab, "on_colab", lambda: True)
    colab.flush_drive("/content/local-runs")
    assert flushed == [] and capsys.readouterr().out == ""
    colab.flush_drive(colab.COLAB_RUNS_DIR)
    assert flushed == [True]
    assert capsys.readouterr().out.startswith(f"Google Drive flushed and unmounted: {colab.COLAB_RUNS_DIR}")
    monkeypatch.setattr(colab.os.path, "ismount", lambda path: False)  # already unmounted: nothing to do
    colab.flush_drive(colab.COLAB_RUNS_DIR)
    assert flushed == [True]


def test_runs_dir_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    mounted = []
    monkeypatch.setattr(colab, "_colab_mount_drive", lambda: mounted.append(True))
    monkeypatch.setattr(colab, "on_colab", lambda: False)
    assert colab.resolve_runs_dir(None) == "runs"
    assert colab.resolve_runs_dir("elsewhere") == "elsewhere"
    monkeypatch.setattr(colab, "on_colab", lambda: True)
    assert colab.resolve_runs_dir(None) == colab.COLAB_RUNS_DIR and mounted == [True]
    assert colab.resolve_runs_dir("/content/drive/MyDrive/other") == "/content/drive/MyDrive/other"
    assert colab.resolve_runs_dir("/content/local") == "/content/local" and mounted == [True, True]


def test_training_refuses_a_drive_runs_dir_once_drive_is_unmounted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last cell unmounts Drive; a training cell rerun alone must not write /content/drive on the VM's disk."""
    mounted = {colab.COLAB_DRIVE}
    monkeypatch.setattr(colab.os.path, "ismount", lambda path: path in mounted)
    monkeypatch.setattr(colab, "on_colab", lambda: True)
    colab.require_drive(colab.COLAB_RUNS_DIR)
    mounted.clear()
    with pytest.raises(RLHelpersError, match="Google Drive is not mounted .* rerun the set-up cell"):
        colab.require_drive(colab.COLAB_RUNS_DIR)
    colab.require_drive("/content/local-runs")  # not on Drive: nothing to check
    monkeypatch.setattr(colab, "on_colab", lambda: False)
    colab.require_drive(colab.COLAB_RUNS_DIR)  # elsewhere the path is an ordinary folder
