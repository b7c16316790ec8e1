"""What a new user meets first: Ctrl-C in `train` checkpoints and ends with one line that says how to resume."""

from __future__ import annotations

import functools
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import waiting

from rlhelpers.runner.run import StopRequest
from rlhelpers.runner.store import RunDirectory

# Pong, whose vector env (ALE's bindings) warns of leaked instances when the interpreter dies in the middle of a step
TRAIN = ["train", "--total-timesteps", "1e7", "--n-envs", "2", "--eval-interval", "1e6", "--n-eval-episodes", "1",
         "--n-eval-envs", "1", "--checkpoint-interval-s", "1", "--device", "cpu"]


def start(args: list[str]) -> subprocess.Popen:
    """``python -m rlhelpers ARGS`` in a process group of its own with SIGINT's default handling, as a terminal
    starts it (a shell without job control would start it with SIGINT ignored)."""
    return subprocess.Popen([sys.executable, "-m", "rlhelpers", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def newest(run: RunDirectory) -> int:
    """The step of the run's newest checkpoint, -1 without one."""
    return max((step for step, _ in run.checkpoints()), default=-1)


wait_for = functools.partial(waiting.wait_for, timeout_s=600.0)


def test_ctrl_c_checkpoints_and_ends_with_the_command_that_resumes(tmp_path: Path) -> None:
    """Ctrl-C reaches the whole process group (W&B's service too): the run saves a checkpoint where it stopped and
    the command ends with exit status 130 and one line, no traceback and no warnings of leaked instances. SIGTERM,
    the campaign's stop, still ends it with its usual line and status 0."""
    args = [*TRAIN, "--runs-dir", str(tmp_path)]
    run = RunDirectory(tmp_path / "a2c_seed-0")
    training = start(args)
    wait_for(lambda: newest(run) > 0 or training.poll() is not None, "a checkpoint of the training")
    os.killpg(training.pid, signal.SIGINT)  # Ctrl-C in a terminal
    out, err = training.communicate(timeout=300)
    assert training.returncode == 130, err
    assert "Traceback" not in err and "leaked" not in err
    (line,) = out.splitlines()
    stopped = re.fullmatch(r"a2c_seed-0: stopped and saved at step ([\d,]+); to resume: `python -m rlhelpers (.*)`",
                           line)
    assert stopped is not None, line
    step = int(stopped[1].replace(",", ""))
    assert step > 0 and newest(run) == step and stopped[2] == " ".join(args)

    resumed = start(shlex.split(stopped[2]))
    wait_for(lambda: newest(run) > step or resumed.poll() is not None, "a checkpoint of the rerun")
    resumed.send_signal(signal.SIGTERM)
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    assert f"a2c_seed-0: resuming from step {stopped[1]} on cpu" in err and "(stopped by SIGTERM)" in out


def test_a_second_ctrl_c_interrupts_at_once() -> None:
    """The first Ctrl-C asks the loop to stop at its next check; the second one does not wait for it (a long
    evaluation comes before that check)."""
    with StopRequest((signal.SIGTERM, signal.SIGINT)) as stop:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)
        assert stop.received == signal.SIGINT  # the first: a flag
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1.0)
