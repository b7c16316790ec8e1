"""Whether a W&B key is there decides the default mode; without one, training says so and logs offline."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlhelpers.core.errors import RLHelpersError
from rlhelpers.runner.config import TrainConfig, resolve_config
from rlhelpers.runner.metrics_log import MetricsLog
from rlhelpers.runner.tracking import Tracker, has_wandb_key, resolve_wandb_mode, wandb_host


@pytest.fixture
def no_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No key in the environment and an empty home; returns the path a netrc file may be written to."""
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_BASE_URL", raising=False)
    monkeypatch.delenv("NETRC", raising=False)
    monkeypatch.delenv("WANDB_CONFIG_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path / "netrc"


def test_the_default_mode_is_online_only_with_a_key(no_key: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not has_wandb_key() and resolve_wandb_mode(None) == "offline"
    assert resolve_wandb_mode("disabled") == "disabled" and resolve_wandb_mode("offline") == "offline"
    with pytest.raises(RLHelpersError, match="wandb_mode 'online' needs an API key"):
        resolve_wandb_mode("online")  # rather than W&B's prompt, or its failure without a terminal
    monkeypatch.setenv("WANDB_API_KEY", "k" * 40)
    assert has_wandb_key() and resolve_wandb_mode(None) == "online" and resolve_wandb_mode("online") == "online"


def test_a_wandb_login_is_found_where_wandb_keeps_it(no_key: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``wandb login`` writes ~/.netrc, or the file NETRC names; a self-hosted server is WANDB_BASE_URL's host."""
    (no_key.parent / ".netrc").write_text(f"machine api.wandb.ai login user password {'k' * 40}\n")
    (no_key.parent / ".netrc").chmod(0o600)
    assert has_wandb_key()
    no_key.write_text(f"machine wandb.example.org login user password {'k' * 40}\n")
    monkeypatch.setenv("NETRC", str(no_key))
    assert not has_wandb_key()  # NETRC replaces ~/.netrc, whose entry is for another host
    monkeypatch.setenv("WANDB_BASE_URL", "https://wandb.example.org")
    assert has_wandb_key()
    no_key.write_text("machine wandb.example.org login user\n")
    assert not has_wandb_key()  # an entry without a password holds no key


def test_the_host_of_wandb_login_host_is_read_from_wandb_settings(no_key: Path) -> None:
    """``wandb login --host URL`` keeps URL in ~/.config/wandb/settings, not in the environment."""
    assert wandb_host() == "api.wandb.ai"
    settings = no_key.parent / ".config" / "wandb" / "settings"
    settings.parent.mkdir(parents=True)
    settings.write_text("[default]\nbase_url = https://wandb.example.org:8443\n")
    assert wandb_host() == "wandb.example.org:8443"
    (no_key.parent / ".netrc").write_text(f"machine wandb.example.org:8443 login user password {'k' * 40}\n")
    (no_key.parent / ".netrc").chmod(0o600)
    assert has_wandb_key()


def test_training_without_a_key_says_so_and_logs_offline(no_key: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture) -> None:
    config, _ = resolve_config(TrainConfig(env_id="CartPole-v1", runs_dir=str(tmp_path / "my runs"), wandb_mode=None))
    assert config.wandb_mode == "offline"  # settled once, with the rest of the config
    tracker = Tracker(config.run_name, "abcd1234", config.to_dict(), config.runs_dir,
                      MetricsLog(tmp_path / "metrics.jsonl"))
    try:
        assert tracker.url is None
        tracker.log({"charts/episode_return": 1.0}, step=10)
    finally:
        tracker.finish()
    err = capsys.readouterr().err
    assert "W&B: OFFLINE (no API key found). Nothing is uploaded to W&B now." in err
    assert "`python -m rlhelpers publish --runs-dir '" in err and "my runs'`" in err
    assert '"global_step": 10' in (tmp_path / "metrics.jsonl").read_text()
