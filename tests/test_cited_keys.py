"""Every measurement report.ipynb cites by name is one ``claims.measure`` gives: the keys in the figure templates of
the ledger's entries and the keys of the claims check. A misspelt key would otherwise read "waiting for its runs" in
the ledger and "no runs" in the check, for ever and without failing anything."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from string import Formatter
from typing import Any, NamedTuple

import nbformat
import pytest
from test_claims import BREAKOUT_ANALYSIS, COMMITTED_ANALYSIS, NOTEBOOK, ROOT, SEEDS_ANALYSIS

from allaction import claims, ledger
from allaction.claims import SIGNIFICANT, STEP, Claim
from allaction.experiment import BREAKOUT, PONG, SPACE_INVADERS


class Citation(NamedTuple):
    """A key of ``claims.measure`` that the notebook names, and which entry or claim names it."""

    key: str
    cited_by: str


def assigned_list(nb: nbformat.NotebookNode, name: str, namespace: dict[str, Any]) -> list[Any]:
    """The list the notebook's one code cell assigning ``name`` builds, evaluated on its own in ``namespace`` (as
    test_claims.notebook_claims evaluates CLAIMS): the rest of the cell needs the runs and a kernel."""
    cells = [c.source for c in nb.cells if c.cell_type == "code" and re.search(rf"^{name}\s*=", c.source, re.M)]
    assert len(cells) == 1, f"{len(cells)} code cells assign {name}"
    (assignment,) = [node for node in ast.parse(cells[0]).body if isinstance(node, ast.Assign)
                     and [ast.unparse(target) for target in node.targets] == [name]]
    exec(compile(ast.Module([assignment], type_ignores=[]), name, "exec"), namespace)  # the list only
    listed = namespace[name]
    assert isinstance(listed, list)
    return listed


def template_keys(template: str) -> list[str]:
    """The keys a ``str.format_map`` of ``template`` looks up: each field's name up to any attribute or index (the
    conversion and format spec are not part of it)."""
    return [re.split(r"[.\[]", field, maxsplit=1)[0]
            for _, field, _, _ in Formatter().parse(template) if field is not None]


def cited_keys(notebook: Path) -> dict[str, list[Citation]]:
    """Each key of ``claims.measure`` the notebook cites, by source: the figure templates of LEDGER's entries and
    the keys of CLAIMS. (Its markdown cites none: its prose is not a template.)"""
    nb = nbformat.read(notebook, as_version=4)
    entries = assigned_list(nb, "LEDGER", {"ledger": ledger})
    listed = assigned_list(nb, "CLAIMS", {"Claim": Claim, "STEP": STEP, "SIGNIFICANT": SIGNIFICANT})
    assert all(isinstance(entry, ledger.Entry) for entry in entries) and all(isinstance(c, Claim) for c in listed)
    return {"LEDGER": [Citation(key, f"LEDGER entry {entry.number} ({entry.says})")
                       for entry in entries for key in template_keys(entry.figure)],
            "CLAIMS": [Citation(claim.key, f"CLAIMS {claim.says!r}") for claim in listed]}


def missing_keys(cited: dict[str, list[Citation]], measured: dict[str, Any]) -> list[Citation]:
    """The citations whose key ``measured`` lacks (a key measured as None or "no runs" is there: it waits for runs)."""
    return [citation for citations in cited.values() for citation in citations if citation.key not in measured]


@pytest.fixture(scope="module")
def measured() -> dict[str, Any]:
    """``claims.measure`` of the committed runs, called as the notebook's ledger cell calls it in a clone."""
    return claims.measure(ROOT / PONG.runs_dir, COMMITTED_ANALYSIS, SEEDS_ANALYSIS, ROOT / BREAKOUT.runs_dir,
                          BREAKOUT_ANALYSIS, ROOT / SPACE_INVADERS.runs_dir)


def test_every_key_the_notebook_cites_is_measured(measured: dict[str, Any]) -> None:
    cited = cited_keys(NOTEBOOK)
    assert len(cited["LEDGER"]) >= 10 and len(cited["CLAIMS"]) >= 25  # the collector finds the citations
    missing = missing_keys(cited, measured)
    assert missing == [], "keys report.ipynb cites that claims.measure does not give: " + "; ".join(
        f"{citation.key!r} ({citation.cited_by})" for citation in missing)


def test_a_misspelt_key_in_the_notebook_is_reported_by_name(measured: dict[str, Any], tmp_path: Path) -> None:
    cited = cited_keys(NOTEBOOK)
    ledger_key = next(citation.key for citation in cited["LEDGER"] if "/passed/" in citation.key)
    claim_key = cited["CLAIMS"][0].key
    ledger_typo, claim_typo = ledger_key.replace("/passed/", "/pased/"), f"{claim_key}x"
    assert ledger_typo not in measured and claim_typo not in measured
    # the collected keys, one misspelt: the check names it and only it
    typo = {"LEDGER": [c._replace(key=ledger_typo) if c.key == ledger_key else c for c in cited["LEDGER"]],
            "CLAIMS": cited["CLAIMS"]}
    assert [citation.key for citation in missing_keys(typo, measured)] == [ledger_typo] * sum(
        citation.key == ledger_key for citation in cited["LEDGER"])
    # a copy of the notebook with a key of each misspelt, as it would be written: both are named, with their source
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and re.search(r"^LEDGER\s*=", cell.source, re.M):
            cell.source = cell.source.replace("{" + ledger_key, "{" + ledger_typo)
        if cell.cell_type == "code" and re.search(r"^CLAIMS\s*=", cell.source, re.M):
            cell.source = cell.source.replace(f'"{claim_key}"', f'"{claim_typo}"')
    copy = tmp_path / "report.ipynb"
    nbformat.write(nb, copy)
    missing = missing_keys(cited_keys(copy), measured)
    assert {citation.key for citation in missing} == {ledger_typo, claim_typo}
    assert {citation.cited_by.split()[0] for citation in missing if citation.key == ledger_typo} == {"LEDGER"}
    assert {citation.cited_by.split()[0] for citation in missing if citation.key == claim_typo} == {"CLAIMS"}
    assert len(missing) == len([c for c in cited["LEDGER"] if c.key == ledger_key]) + len(
        [c for c in cited["CLAIMS"] if c.key == claim_key])  # every citation of each, and nothing else
