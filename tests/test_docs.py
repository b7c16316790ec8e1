"""Every ``python -m rlhelpers`` and ``papermill`` command that the README and docs/ give parses with today's
command line and notebook parameters (a renamed or removed option fails here, not in a reader's shell)."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from rlhelpers.cli import build_parser
from rlhelpers.notebook import NOTEBOOK_PARAMETERS

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# A code block that pins an older commit (``COMMIT=...``) gives that commit's command line, not today's.
PINNED = re.compile(r"^COMMIT=", re.MULTILINE)
COMMAND = re.compile(r"(?:python -m rlhelpers|papermill) [^`\n|#]*")
# Inline spans that name a subcommand alone, as in `train --variant pg1 --algo task1 --seed 0`.
SUBCOMMAND = re.compile(r"^(?:train|campaign|status|plot|publish|evaluate|analyze) --")
PLACEHOLDER = re.compile(r"<[^>]+>")  # <your W&B user>, <algo>


def commands(page: Path) -> list[str]:
    """The commands of ``page``: in its bash blocks (continued lines joined) and in its inline code spans."""
    text = page.read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.DOTALL)
    found = [m for block in blocks if not PINNED.search(block)
             for m in COMMAND.findall(block.replace("\\\n", " "))]
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    spans = re.findall(r"`([^`]+)`", prose)
    found += [m for span in spans for m in COMMAND.findall(span)]
    found += [f"python -m rlhelpers {span}" for span in spans if SUBCOMMAND.match(span)]
    # up to `&&`, a final `&` or a redirection
    return [" ".join(re.split(r" &| >", command)[0].split()) for command in found]


def check(command: str) -> None:
    words = shlex.split(PLACEHOLDER.sub("X", command))
    if words[0] == "papermill":
        names = [words[i + 1] for i, word in enumerate(words[:-1]) if word == "-p"]
        assert set(names) <= set(NOTEBOOK_PARAMETERS), f"{command}: unknown notebook parameter"
        return
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            build_parser().parse_args(words[3:])
    except SystemExit as exc:  # --help exits with 0
        if exc.code != 0:
            pytest.fail(f"{command}: today's command line refuses it")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_command_of_the_docs_parses(page: Path) -> None:
    for command in commands(page):
        check(command)


def test_the_check_catches_a_removed_option() -> None:
    with pytest.raises(pytest.fail.Exception):
        check("python -m rlhelpers campaign --algos task1 --variant pg1")
    with pytest.raises(AssertionError):
        check("papermill report.ipynb out.ipynb -p algorithm a2c")
    assert len([c for page in PAGES for c in commands(page)]) >= 20
