"""The declared dependency floors admit only versions the code works with, and the installed ones meet them."""

from __future__ import annotations

import importlib.metadata
import inspect
import re
from pathlib import Path

import numpy as np
from ale_py.vector_env import AtariVectorEnv
from packaging.requirements import Requirement

from rlhelpers.core.envs import make_vec_env

ROOT = Path(__file__).resolve().parents[1]
# Versions the code does not work with, and why: each must be excluded by the declared floor.
TOO_OLD = {
    "ale-py": ("0.11.0", "AtariVectorEnv has no autoreset_mode before 0.11.1"),
    "gymnasium": ("1.3.0", "the vector RecordEpisodeStatistics drops the first step of every episode after the "
                           "first with same-step autoreset before 1.4 (Gymnasium PR #1624)"),
}


def requirements_txt() -> dict[str, Requirement]:
    lines = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    return {req.name: req for req in (Requirement(line) for line in lines if line and not line.startswith("#"))}


def captured(pattern: str, text: str, flags: int) -> str:
    """The first group of ``pattern``'s match in ``text``, which must have one."""
    match = re.search(pattern, text, flags)
    assert match is not None, f"pyproject.toml has nothing that matches {pattern!r}"
    return match.group(1)


def pyproject_requirements() -> dict[str, Requirement]:
    """``dependencies`` and the ``report`` extra of pyproject.toml with the ``colab`` extra it names (read as text:
    tomllib needs Python 3.11)."""
    text = (ROOT / "pyproject.toml").read_text()
    blocks = [captured(r"^dependencies = \[(.*?)^\]", text, re.S | re.M),
              *(captured(rf"^{extra} = \[(.*)\]$", text, re.M) for extra in ("colab", "report"))]
    specs = [spec for block in blocks for spec in re.findall(r'"([^"]+)"', block) if spec != "rlhelpers[colab]"]
    return {req.name: req for req in map(Requirement, specs)}


def test_requirements_txt_matches_pyproject() -> None:
    assert {name: str(req) for name, req in requirements_txt().items()} == \
        {name: str(req) for name, req in pyproject_requirements().items()}


def test_floors_exclude_the_versions_that_break_the_code() -> None:
    declared = pyproject_requirements()
    for name, (version, why) in TOO_OLD.items():
        assert not declared[name].specifier.contains(version), f"{name} {version} is admitted but {why}"


def test_installed_versions_meet_the_declared_floors() -> None:
    for name, req in pyproject_requirements().items():
        installed = importlib.metadata.version(name)
        assert req.specifier.contains(installed, prereleases=True), f"{name} {installed} does not satisfy {req}"


def test_installed_ale_py_has_the_autoreset_mode_the_code_uses() -> None:
    assert "autoreset_mode" in inspect.signature(AtariVectorEnv).parameters


def test_installed_gymnasium_counts_every_step_of_same_step_episodes() -> None:
    """CartPole pays 1 per step, so each episode's return, length and our own step count must agree."""
    env = make_vec_env("CartPole-v1", 2)
    env.reset(seed=0)
    steps_in_episode = np.zeros(2, dtype=int)
    counted: list[int] = []
    reported: list[tuple[float, int]] = []  # (return, length) of each episode, as the statistics wrapper reports it
    for _ in range(200):
        _, rewards, terminated, truncated, info = env.step(np.zeros(2, dtype=np.int64))  # always push left
        steps_in_episode += 1
        done = terminated | truncated
        counted.extend(steps_in_episode[done].tolist())
        steps_in_episode[done] = 0
        if "episode" in info:
            ended, episodes = info["_episode"], info["episode"]
            reported.extend(zip(episodes["r"][ended].tolist(), episodes["l"][ended].tolist(), strict=True))
    env.close()
    assert len(counted) >= 10  # several episodes per env: the ones after the first are the ones at risk
    assert [length for _, length in reported] == counted
    assert all(ret == length for ret, length in reported)
