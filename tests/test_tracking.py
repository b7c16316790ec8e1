"""Whether a W&B key is there decides the default mode; without one, training says so and logs offline."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from rlhelpers.core.errors import RLHelpersError
from rlhelpers.runner.config import TrainConfig
from rlhelpers.runner.run import resolve_config
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
    tracker = Tracker(config.run_name, "abcd1234", config.to_dict(), config.runs_dir, tmp_path / "metrics.jsonl")
    try:
        assert tracker.url is None
        tracker.log({"charts/episode_return": 1.0}, step=10)
    finally:
        tracker.finish()
    [line] = capsys.readouterr().err.splitlines()  # one line, and nothing of W&B's own
    assert line.startswith(f"{config.run_name}: {tmp_path / 'my runs' / config.run_name}; W&B: OFFLINE (no API key "
                           "found), nothing is uploaded now; its files: ")
    wandb_folder = Path(line.split("its files: ")[1].split("; ")[0])
    assert wandb_folder.name.startswith("offline-run-") and wandb_folder.name.endswith("abcd1234")
    assert list(wandb_folder.glob("*.wandb"))  # what `wandb sync` would upload
    assert "; to publish later: `python -m rlhelpers publish --runs-dir '" in line and "my runs'`" in line
    assert '"global_step": 10' in (tmp_path / "metrics.jsonl").read_text()


def test_a_disabled_run_does_not_load_wandb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture) -> None:
    """``disabled`` means no W&B: training neither waits for wandb's import nor needs it installed."""
    monkeypatch.setitem(sys.modules, "wandb", None)  # any import of wandb now fails
    config, _ = resolve_config(TrainConfig(env_id="CartPole-v1", runs_dir=str(tmp_path), wandb_mode="disabled"))
    tracker = Tracker(config.run_name, "abcd1234", config.to_dict(), config.runs_dir, tmp_path / "metrics.jsonl")
    tracker.log({"charts/episode_return": 1.0}, step=10)
    tracker.finish()
    assert tracker.url is None and '"global_step": 10' in (tmp_path / "metrics.jsonl").read_text()
    assert capsys.readouterr().err == f"{config.run_name}: {tmp_path / config.run_name}; W&B: disabled\n"


def terminal_output(command: list[str], cwd: Path, env: dict[str, str]) -> str:
    """What ``command`` shows in a terminal (stdin, stdout and stderr on one pseudo-terminal, so that W&B colours
    its lines as it does in a notebook), with line ends as ``\\n``."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # 120 columns for the progress bar
    process = subprocess.Popen(command, cwd=cwd, env=env, stdin=child, stdout=child, stderr=child)
    os.close(child)
    chunks = []
    with contextlib.suppress(OSError):  # EIO once the child has closed the terminal
        while chunk := os.read(main, 65536):
            chunks.append(chunk)
    os.close(main)
    assert process.wait(timeout=300) == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_a_training_cell_shows_the_progress_bar_and_one_line_on_where_the_run_is(tmp_path: Path) -> None:
    """W&B's own banner, sync hints and run summary (in colour) filled the output around the progress bar, and the
    offline notice came twice; now one line says where the run and its W&B files are, in plain text."""
    env = {name: value for name, value in os.environ.items() if name != "WANDB_SILENT"}  # W&B as users get it
    runs = tmp_path / "runs"
    output = terminal_output([sys.executable, "-m", "rlhelpers", "train", "--env-id", "CartPole-v1", "--n-envs", "4",
                              "--total-timesteps", "500", "--eval-interval", "500", "--n-eval-episodes", "2",
                              "--n-eval-envs", "2", "--device", "cpu", "--wandb-mode", "offline", "--runs-dir",
                              str(runs)], tmp_path, env)
    assert "\x1b[" not in output  # no terminal colour codes
    lines = [part for line in output.split("\n") for part in line.split("\r") if part.strip()]
    assert not [line for line in lines if line.lower().startswith("wandb")], output
    assert [line for line in lines if "W&B" in line] == [line for line in lines if line.startswith(
        f"a2c_seed-0: {runs / 'a2c_seed-0'}; W&B: OFFLINE (no API key found), nothing is uploaded now; its files: ")]
    assert len([line for line in lines if "W&B" in line]) == 1, output
    assert any(line.startswith("a2c_seed-0: 100%") for line in lines), output  # the progress bar
