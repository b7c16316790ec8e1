"""Every ``python -m rlhelpers`` and ``papermill`` command that the README and docs/ give parses with today's
command line and notebook parameters (a renamed or removed option fails here, not in a reader's shell); a
command given for an older commit parses with that commit's command line; the README stays short."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from allaction.cli import build_parser as study_parser
from allaction.notebook import NOTEBOOK_PARAMETERS
from rlhelpers.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# In a code block, the commands after a line ``COMMIT=<commit>`` (``COMMIT=a  # and COMMIT=b``: both) are
# given for that commit's command line, not today's.
COMMIT = re.compile(r"COMMIT=([0-9a-f]{7,40})")
README_LIMIT = 10_000  # bytes, as `wc -c README.md` counts them
COMMAND = re.compile(r"(?:python -m (?:rlhelpers|allaction)|papermill) [^`\n|#]*")
# Inline spans that name a subcommand alone, as in `train --variant pg1 --algo task1 --seed 0`.
SUBCOMMAND = re.compile(r"^(?:train|campaign|status|plot|publish|evaluate|analyze) --")
# Those that name the study's variants or experiments, or are the study's own: ``python -m allaction``'s.
STUDY_SUBCOMMAND = re.compile(r"^(?:evaluate|analyze) |.*--(?:variant|experiment) ")
PLACEHOLDER = re.compile(r"<[^>]+>")  # <your W&B user>, <algo>
PARSERS = {"rlhelpers": build_parser, "allaction": study_parser}  # each package's command line


def _clean(command: str) -> str:
    """``command`` up to `&&`, a final `&` or a redirection, its whitespace collapsed."""
    return " ".join(re.split(r" &| >", command)[0].split())


def block_commands(page: Path) -> list[tuple[tuple[str, ...], str]]:
    """``(commits, command)`` for each command in the bash blocks of ``page`` (continued lines joined):
    ``commits`` names the older commits it is given for, and is empty for today's command line."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", page.read_text(), re.DOTALL):
        commits: tuple[str, ...] = ()
        for line in block.replace("\\\n", " ").splitlines():
            if line.startswith("COMMIT="):
                commits = tuple(COMMIT.findall(line))
            found += [(commits, _clean(command)) for command in COMMAND.findall(line)]
    return found


def commands(page: Path) -> list[str]:
    """The commands of ``page`` for today's command line: in its bash blocks and in its inline code spans."""
    text = page.read_text()
    found = [command for commits, command in block_commands(page) if not commits]
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    spans = re.findall(r"`([^`]+)`", prose)
    found += [_clean(m) for span in spans for m in COMMAND.findall(span)]
    found += [_clean(f"python -m {'allaction' if STUDY_SUBCOMMAND.match(span) else 'rlhelpers'} {span}")
              for span in spans if SUBCOMMAND.match(span)]
    return found


def pinned_commands(page: Path) -> dict[str, list[str]]:
    """The commands of ``page`` given for older commits: commit -> its commands."""
    found: dict[str, list[str]] = {}
    for commits, command in block_commands(page):
        for commit in commits:
            found.setdefault(commit, []).append(command)
    return found


# Run in a fresh interpreter with a commit's ``rlhelpers/`` as argv[1]: which of the argument lists in argv[2]
# (JSON) that commit's ``build_parser`` refuses. Its command line lived in one of these modules.
_OLD_PARSER = """
import contextlib, importlib, io, json, sys
from pathlib import Path
root = Path(sys.argv[1])
name = next(name for name in ("rlhelpers.cli", "rlhelpers.runner.cli", "rlhelpers.__main__")
            if (root / (name.replace(".", "/") + ".py")).is_file()
            and "def build_parser" in (root / (name.replace(".", "/") + ".py")).read_text())
module = importlib.import_module(name)
assert Path(module.__file__).resolve().is_relative_to(root.resolve()), module.__file__
refused = []
for words in json.loads(sys.argv[2]):
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            module.build_parser().parse_args(words)
    except SystemExit as exc:
        if exc.code:
            refused.append(words)
print(json.dumps(refused))
"""


def refused_by_commit(commit: str, argv_lists: list[list[str]], tmp_path: Path) -> list[list[str]]:
    """The argument lists that ``commit``'s command line refuses; skips where git or that commit is not at hand
    (a shallow clone, an archive, a partial clone without its blobs offline)."""
    env = {**os.environ, "GIT_NO_LAZY_FETCH": "1"}
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit, "rlhelpers"],
                                 capture_output=True, timeout=60, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"git archive {commit}: {exc}")
    if archive.returncode != 0:
        pytest.skip(f"commit {commit} is not in this clone: {archive.stderr.decode().strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        if hasattr(tarfile, "data_filter"):  # Python's safe extraction, where it has it
            tar.extractall(tmp_path, filter="data")
        else:
            tar.extractall(tmp_path)
    proc = subprocess.run([sys.executable, "-c", _OLD_PARSER, str(tmp_path), json.dumps(argv_lists)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _argv(command: str) -> list[str]:
    """The arguments after ``python -m rlhelpers``."""
    return shlex.split(PLACEHOLDER.sub("X", command))[3:]


def check(command: str) -> None:
    words = shlex.split(PLACEHOLDER.sub("X", command))
    if words[0] == "papermill":
        names = [words[i + 1] for i, word in enumerate(words[:-1]) if word == "-p"]
        assert set(names) <= set(NOTEBOOK_PARAMETERS), f"{command}: unknown notebook parameter"
        return
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            PARSERS[words[2]]().parse_args(words[3:])
    except SystemExit as exc:  # --help exits with 0
        if exc.code != 0:
            pytest.fail(f"{command}: today's command line refuses it")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_command_of_the_docs_parses(page: Path) -> None:
    for command in commands(page):
        check(command)


PINNED_COMMANDS: dict[str, list[str]] = {}
for _page in PAGES:
    for _commit, _commands in pinned_commands(_page).items():
        PINNED_COMMANDS.setdefault(_commit, []).extend(_commands)


@pytest.mark.parametrize("commit", sorted(PINNED_COMMANDS))
def test_every_command_given_for_an_older_commit_parses_with_that_commit(commit: str, tmp_path: Path) -> None:
    commands = PINNED_COMMANDS[commit]
    refused = refused_by_commit(commit, [_argv(command) for command in commands], tmp_path)
    assert refused == [], f"{commit}'s command line refuses {refused}"


def test_the_check_of_an_older_commit_catches_an_option_it_lacked(tmp_path: Path) -> None:
    # b11aa22 named a variant with --variant; arms such as task1-pg1 came later.
    argv_lists = [["campaign", "--algos", "task1-pg1"], ["campaign", "--algos", "task1", "--variant", "pg1"]]
    assert refused_by_commit("b11aa22", argv_lists, tmp_path) == argv_lists[:1]


def test_pinned_commands_are_found_per_commit(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```bash\npython -m rlhelpers status\nCOMMIT=abc1234  # and COMMIT=def5678\n"
                    "python -m rlhelpers train --seed 1 \\\n  --precision fp32 >> log\n```\n")
    assert pinned_commands(page) == {"abc1234": ["python -m rlhelpers train --seed 1 --precision fp32"],
                                     "def5678": ["python -m rlhelpers train --seed 1 --precision fp32"]}
    assert commands(page) == ["python -m rlhelpers status"]  # what follows COMMIT= is not today's


def test_the_readme_stays_short() -> None:
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_LIMIT, f"README.md has {size} bytes; move detail to docs/ (limit {README_LIMIT})"


def test_the_check_catches_a_removed_option() -> None:
    with pytest.raises(pytest.fail.Exception):
        check("python -m rlhelpers campaign --algos task1 --variant pg1")
    for moved in ("campaign --experiment breakout", "analyze --stages 1", "evaluate runs/a2c_seed-0"):
        check(f"python -m allaction {moved}")  # the study's commands: not the helper's
        with pytest.raises(pytest.fail.Exception):
            check(f"python -m rlhelpers {moved}")
    with pytest.raises(AssertionError):
        check("papermill report.ipynb out.ipynb -p algorithm a2c")
    assert len([c for page in PAGES for c in commands(page)]) >= 20


def test_every_command_the_packages_and_the_notebook_name_is_one_of_that_command_line() -> None:
    """A command named in a message of either package or in the report (`python -m allaction evaluate ...`) is a
    command of that package's command line: a command that moved to the study is not named under the helper's."""
    from allaction.cli import COMMANDS as STUDY_COMMANDS
    from rlhelpers.cli import COMMANDS

    commands = {"rlhelpers": COMMANDS, "allaction": STUDY_COMMANDS}
    named = re.compile(r"python -m (rlhelpers|allaction) ([a-z]+)")
    files = [*(ROOT / "rlhelpers").rglob("*.py"), *(ROOT / "allaction").rglob("*.py"), ROOT / "report.ipynb"]
    found = [(path.name, m[1], m[2]) for path in files for m in named.finditer(path.read_text())]
    assert len(found) > 10
    assert [f"{name}: python -m {package} {command}" for name, package, command in found
            if command not in commands[package]] == []
