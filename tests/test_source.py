"""The code the report shows beside the Method: the source of what the trainer calls, read from the objects
themselves, so that it cannot drift from what trains the runs."""

from __future__ import annotations

import inspect
import textwrap
from pathlib import Path

import nbformat
import pytest

from allaction.source import algorithm_listing, code_of, losses_with_helpers
from rlhelpers.core import losses
from rlhelpers.core.buffer import RolloutBuffer
from rlhelpers.core.losses import ALGORITHMS, Algorithm, explained_variance
from rlhelpers.core.trainer import Trainer

NOTEBOOK = Path(__file__).resolve().parents[1] / "report.ipynb"


def test_the_listing_is_the_source_of_every_loss_of_the_table_what_it_calls_the_returns_and_the_table() -> None:
    listing = algorithm_listing(Trainer, ALGORITHMS, RolloutBuffer.returns, omit=[explained_variance])
    for algorithm in ALGORITHMS.values():
        assert code_of(algorithm.loss) in listing
    for helper in (losses._policy_terms, losses._weighted, losses._all_action_loss):
        assert code_of(helper) in listing
    assert "def explained_variance" not in listing  # a logged statistic, left out as asked
    assert code_of(RolloutBuffer.returns) in listing
    assert 'ALGORITHMS: dict[str, Algorithm] = {\n    "a2c": Algorithm(a2c_loss, "V"' in listing
    assert len(listing.splitlines()) <= 100


def test_the_code_is_the_source_without_its_docstring() -> None:
    source, code = inspect.getsource(losses.a2c_loss), code_of(losses.a2c_loss)
    assert '"""' in source and '"""' not in code
    assert [line for line in source.splitlines() if line in code.splitlines()] == code.splitlines()
    assert len(source.splitlines()) - len(code.splitlines()) == len(str(inspect.getdoc(losses.a2c_loss)).splitlines())

    def undocumented(x: int) -> int:
        return x

    assert code_of(undocumented) == textwrap.dedent(inspect.getsource(undocumented))


def test_another_table_shows_its_own_losses_and_a_trainer_that_calls_none_is_refused() -> None:
    def half_loss(logits, critic, actions, returns, pg_coef, vf_coef, ent_coef):
        return losses.a2c_loss(logits, critic, actions, returns, pg_coef / 2, vf_coef, ent_coef)

    table = {"half": Algorithm(half_loss, "V", {})}
    assert losses_with_helpers(table) == [half_loss]  # a2c_loss is another module's attribute call, not a name
    listing = algorithm_listing(Trainer, table, RolloutBuffer.returns)
    assert "pg_coef / 2" in listing and "ALGORITHMS" not in listing  # a table no module defines has no source

    class Idle:
        def update(self) -> None:
            pass

    with pytest.raises(ValueError, match="calls no table loss"):
        algorithm_listing(Idle, ALGORITHMS, RolloutBuffer.returns)


def test_the_report_shows_it_right_after_the_method_from_the_objects_the_trainer_calls() -> None:
    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    method = next(i for i, c in enumerate(cells) if c.source.startswith("## Method"))
    shown = next(c for c in cells[method + 1:] if c.cell_type == "code")
    assert "show_algorithms(Trainer, ALGORITHMS, RolloutBuffer.returns, omit=[explained_variance])" in shown.source
    assert all(f"import {name}" in shown.source or f"import {name}," in shown.source or f", {name}" in shown.source
               for name in ("RolloutBuffer", "ALGORITHMS", "build_model", "Trainer"))
