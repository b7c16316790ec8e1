"""The code that trains the runs, for the report to show beside the Method's formulas: read from the objects the trainer
calls (the algorithm table's losses with the module functions they call, the rollout's n-step returns, the table
itself), never a copy, so that what a grader reads is what ran."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Collection
from types import ModuleType
from typing import Any

from IPython.display import Code

from rlhelpers.core.losses import Algorithm


def _called_functions(function: Callable[..., Any]) -> list[Callable[..., Any]]:
    """The functions of ``function``'s own module that it calls by name, in the order it first calls them."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    names = dict.fromkeys(node.func.id for node in ast.walk(tree)
                          if isinstance(node, ast.Call) and isinstance(node.func, ast.Name))
    module_functions = [function.__globals__.get(name) for name in names]
    return [f for f in module_functions if inspect.isfunction(f) and f.__module__ == function.__module__]


def losses_with_helpers(table: dict[str, Algorithm],
                        omit: Collection[Callable[..., Any]] = ()) -> list[Callable[..., Any]]:
    """Each loss of ``table``, each followed by the functions of its module that it calls (directly or through
    them) and that no earlier one called, but for those of ``omit``."""
    shown: list[Callable[..., Any]] = []
    pending = [algorithm.loss for algorithm in table.values()]
    while pending:
        function = pending.pop(0)
        if function not in shown and function not in omit:
            shown.append(function)
            pending[:0] = _called_functions(function)
    return shown


def code_of(function: Callable[..., Any]) -> str:
    """The source of ``function``, dedented, without its docstring (the Method's formulas say the same)."""
    source = textwrap.dedent(inspect.getsource(function))
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.FunctionDef)  # a function's source
    if ast.get_docstring(body, clean=False) is None:
        return source
    first = body.body[0]
    lines = source.splitlines(keepends=True)
    assert first.end_lineno is not None  # parsed from source
    return "".join(lines[:first.lineno - 1] + lines[first.end_lineno:])


def assignment_source(module: ModuleType, name: str) -> str:
    """The lines of the module-level assignment of ``name`` in ``module``."""
    source = inspect.getsource(module)
    node = next(node for node in ast.parse(source).body if isinstance(node, ast.Assign | ast.AnnAssign)
                and name in [ast.unparse(t) for t in (node.targets if isinstance(node, ast.Assign) else [node.target])])
    return "\n".join(source.splitlines()[node.lineno - 1:node.end_lineno])


def algorithm_listing(trainer: type, table: dict[str, Algorithm], returns: Callable[..., Any],
                      omit: Collection[Callable[..., Any]] = ()) -> str:
    """The code (``code_of``) of the ``table``'s losses (``losses_with_helpers``, without ``omit``) and of the n-step
    ``returns``, then the source of the table (where its losses' module defines it), after checking that
    ``trainer``'s update calls a loss and ``returns`` (a ``ValueError`` otherwise)."""
    update = inspect.getsource(trainer.update)  # type: ignore[attr-defined]  # a Trainer class
    if ".loss(" not in update or f".{returns.__name__}(" not in update:
        raise ValueError(f"{trainer.__name__}.update calls no table loss or no {returns.__name__}")
    parts = [code_of(f) for f in [*losses_with_helpers(table, omit), returns]]
    module = inspect.getmodule(next(iter(table.values())).loss)
    if module is not None:  # the table, where its losses' module defines it
        parts += [assignment_source(module, name) for name, value in vars(module).items() if value is table][:1]
    return "\n\n".join(part.rstrip("\n") for part in parts)


def show_algorithms(trainer: type, table: dict[str, Algorithm], returns: Callable[..., Any],
                    omit: Collection[Callable[..., Any]] = ()) -> Code:
    """``algorithm_listing`` as highlighted Python for a notebook's output."""
    return Code(algorithm_listing(trainer, table, returns, omit), language="python")
