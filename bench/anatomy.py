"""The helper package's anatomy: code lines per layer (and the study's package beside it), the runner's modules
and the imports between them, and how often the package's names use each word of its vocabulary. Run from the
repository root (on any commit, to compare)::

    python -m bench.anatomy

A code line is a physical line holding a token other than a comment, docstrings left out. An import is any
``import`` of another module of the package, at any depth of a module's code (function-level imports and imports
for type checking count). A word is counted in the identifiers of the code (not its prose): ``runs_by_label`` and
``LabelCurve`` each hold ``label`` once.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import tokenize
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING,
           tokenize.ENDMARKER}
# The ideas that issue 71 found under several words, each with its words.
VOCABULARY = {"an algorithm with an optional variant (task1-pg1)": ("arm", "label", "algo"),
              "the return above which a run stops": ("stop_return", "target"),
              "a run's files as read back": ("record", "history"),
              "a mean return": ("mean_return",)}


def docstring_lines(tree: ast.Module) -> set[int]:
    """The line numbers of the module's, classes' and functions' docstrings."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def code_lines(path: Path) -> int:
    """Physical lines of ``path`` holding a token other than a comment, docstrings left out."""
    source = path.read_text()
    docs = docstring_lines(ast.parse(source))
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in SKIPPED:
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines - docs)


def module_names(package: Path) -> dict[str, Path]:
    """Each module of ``package`` by its dotted name (a package's ``__init__`` under the package's name)."""
    names = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def import_graph(*packages: Path) -> dict[str, set[str]]:
    """Each module of ``packages`` and the modules of ``packages`` it imports, at any depth of its code. A
    sub-package's ``__init__`` holds no code: importing through it is importing the module named."""
    names = {name: path for package in packages for name, path in module_names(package).items()}
    graph = {}
    for module, path in names.items():
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.update([node.module] + [f"{node.module}.{alias.name}" for alias in node.names])
        graph[module] = {name for name in imported if name in names and names[name].name != "__init__.py"} - {module}
    return graph


def identifier_words(path: Path) -> Counter[str]:
    """The lower-case words of every identifier in ``path``'s code, split at underscores and capitals."""
    words: Counter[str] = Counter()
    for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if token.type == tokenize.NAME:
            words.update(part.lower() for part in re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", token.string))
    return words


def word_count(words: Counter[str], names: Counter[str], word: str) -> int:
    """How often ``word`` occurs: a single word in ``words``, a snake_case phrase as a name part in ``names``."""
    return names[word] if "_" in word else words[word]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--package", default=str(ROOT / "rlhelpers"), help="the helper package's directory")
    parser.add_argument("--study", default=str(ROOT / "allaction"),
                        help="the study's package directory, counted beside the helper where it exists")
    args = parser.parse_args()
    package, study = Path(args.package), Path(args.study)
    modules = module_names(package)
    lines = {name: code_lines(path) for name, path in modules.items()}

    def layer(name: str) -> str:
        parts = name.split(".")
        return parts[1] if len(parts) > 2 else "top level"

    print("Code lines per layer")
    per_layer = Counter[str]()
    for name, count in lines.items():
        per_layer[layer(name)] += count
    for name in ("core", "runner", "report", "top level"):
        print(f"  {name:<10} {per_layer[name]:>6,}")
    print(f"  {package.name:<10} {sum(lines.values()):>6,}")
    if study.is_dir():
        print(f"  {study.name:<10} {sum(map(code_lines, module_names(study).values())):>6,}  (the study, above it)")

    graph = import_graph(package)
    runner = sorted(name for name in modules if layer(name) == "runner" and not name.endswith(".runner"))
    print(f"\nThe runner: {len(runner)} modules, "
          f"{sum(len(graph[name] & set(runner)) for name in runner)} imports between them")
    for name in runner:
        within = sorted(target.rsplit(".", 1)[1] for target in graph[name] if target in runner)
        print(f"  {name.rsplit('.', 1)[1]:<12} {lines[name]:>5}  imports {', '.join(within) or '-'}")

    words: Counter[str] = Counter()
    names: Counter[str] = Counter()
    for path in modules.values():
        words += identifier_words(path)
        for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
            if token.type == tokenize.NAME:
                for phrase in ("stop_return", "mean_return"):
                    names[phrase] += token.string.lower().count(phrase)
    print("\nWords in the package's identifiers")
    for idea, vocabulary in VOCABULARY.items():
        print(f"  {idea}: " + ", ".join(f"{word} {word_count(words, names, word)}" for word in vocabulary))


if __name__ == "__main__":
    main()
