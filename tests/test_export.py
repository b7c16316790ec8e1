"""The README's HTML export commands show each progress bar once, in its final state, and typeset every
formula as MathML, which needs no network."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import nbformat
from bs4 import BeautifulSoup
from nbconvert import HTMLExporter

from allaction.export import MathMLRenderer

ROOT = Path(__file__).resolve().parents[1]
REFRESHES = 1_000  # a long run's progress bar, as papermill records it: one stream output per refresh


def readme_export_commands() -> list[list[str]]:
    """The ``jupyter nbconvert`` lines of the README's first code block under "Export to HTML"."""
    section = (ROOT / "README.md").read_text().split("## Export to HTML", 1)[1]
    match = re.search(r"```bash\n(.*?)```", section, re.S)
    assert match is not None, "no bash block under Export to HTML"
    block = match.group(1)
    commands = [shlex.split(line) for line in block.splitlines() if line.startswith("jupyter nbconvert")]
    assert len(commands) == 3
    return [[sys.executable, "-m", *command] for command in commands]


def run_export(command: list[str], cwd: Path) -> str:
    """Run one README export command in ``cwd``; the HTML it wrote."""
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    html_name = command[command.index("--output") + 1] + ".html" if "--output" in command else "out.html"
    return (cwd / html_name).read_text()


def trained_notebook(path: Path) -> None:
    """A training cell's outputs as papermill saves them: text, then every refresh of the bar as its own
    stderr output (each starts with a carriage return), then a closing line."""
    outputs = [nbformat.v4.new_output("stream", name="stdout", text="a2c_seed-0: checkpoints in runs/a2c_seed-0\n"),
               nbformat.v4.new_output("stream", name="stderr", text="a2c_seed-0: resuming from step 300,000 on cpu\n")]
    for i in range(1, REFRESHES + 1):
        outputs.append(nbformat.v4.new_output(
            "stream", name="stderr", text=f"\ra2c_seed-0: {i / 10:5.1f}%| | {i * 20}k/20.0M [eval -20.{i % 10}]"))
    outputs.append(nbformat.v4.new_output("stream", name="stderr", text="\n"))
    outputs.append(nbformat.v4.new_output("stream", name="stdout", text="a2c_seed-0: stopped at step 20,000,000\n"))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("result = train(config)", outputs=outputs, execution_count=1)]
    nbformat.write(nb, path)


def progress_lines(html: str) -> list[str]:
    return re.findall(r"a2c_seed-0: +[\d.]+%[^<\n\r]*", html)


def test_readme_exports_show_each_progress_bar_once(tmp_path: Path) -> None:
    trained_notebook(tmp_path / "out.ipynb")
    raw, _ = HTMLExporter().from_filename(str(tmp_path / "out.ipynb"))
    assert len(progress_lines(raw)) == REFRESHES, "what nbconvert does without the README's option"

    for command in readme_export_commands():
        html = run_export(command, tmp_path)
        assert progress_lines(html) == [f"a2c_seed-0: 100.0%| | {REFRESHES * 20}k/20.0M [eval -20.0]"], command
        assert "a2c_seed-0: resuming from step 300,000 on cpu" in html and "stopped at step 20,000,000" in html


def method_formulas() -> list[str]:
    """How each formula of report.ipynb's Method section is displayed, in order: "block" ($$...$$) or "inline"."""
    nb = nbformat.read(ROOT / "report.ipynb", as_version=4)
    method = next(cell.source for cell in nb.cells if cell.source.startswith("## Method"))
    return ["block" if block else "inline" for block, _ in re.findall(r"\$\$(.+?)\$\$|\$(.+?)\$", method, re.S)]


def test_readme_exports_typeset_every_formula_as_mathml(tmp_path: Path) -> None:
    """Offline, a formula left as LaTeX for MathJax shows as its source: the exported page holds none, and
    each formula of the Method section is a MathML element. The notebook's Markdown keeps its LaTeX."""
    formulas = method_formulas()
    assert len(formulas) >= 18 and formulas.count("block") == 2  # every formula the Method holds today
    (tmp_path / "out.ipynb").write_text((ROOT / "report.ipynb").read_text())
    for command in readme_export_commands():
        page = BeautifulSoup(run_export(command, tmp_path), "html.parser")
        for tag in page(["script", "style"]):  # MathJax's configuration names the $ delimiters
            tag.decompose()
        assert not re.search(r"\$[^$]+\$", page.get_text()), f"raw LaTeX in the page of {command}"
        method = next(cell for cell in page.select(".jp-MarkdownCell") if cell.find("h2", id="Method"))
        assert [math["display"] for math in method("math")] == formulas, command


def test_letters_of_other_alphabets_are_unicode_and_a_formula_it_cannot_convert_stays_latex() -> None:
    """Chromium ignores mathvariant="script" and the like: \\mathcal H must arrive as the character itself."""
    renderer = MathMLRenderer(escape=False)
    mathml = renderer.block_math(r"\mathcal H_t + \mathbb R + \mathfrak g")
    assert mathml.startswith("<math") and 'display="block"' in mathml and "mathvariant" not in mathml
    assert all(f"<mi>{letter}</mi>" in mathml for letter in "ℋℝ𝔤")
    assert renderer.inline_math("x^") == "$x^$"  # left to MathJax, as nbconvert's own HTML does


def test_without_latex2mathml_nbconvert_still_exports_and_html_mathml_says_what_is_missing(tmp_path: Path) -> None:
    """Installed without latex2mathml (as ``pip install rlhelpers`` alone leaves it), the registered exporter must
    not break ``jupyter nbconvert`` for the other formats, which imports every exporter at start-up."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("The loss $-c_{pg} \\sum_a \\pi(a) Q(a)$.")]
    nbformat.write(nb, tmp_path / "out.ipynb")
    hide = "import sys; sys.modules['latex2mathml'] = sys.modules['latex2mathml.converter'] = None; "
    convert = "from nbconvert.nbconvertapp import main; sys.argv[0] = 'jupyter-nbconvert'; main()"

    def nbconvert(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", hide + convert, *args, "out.ipynb"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)

    plain = nbconvert("--to", "html")
    assert plain.returncode == 0, plain.stderr
    assert "c_{pg}" in (tmp_path / "out.html").read_text()
    mathml = nbconvert("--to", "html_mathml", "--output", "mathml")
    assert mathml.returncode != 0 and "html_mathml needs latex2mathml: pip install latex2mathml" in mathml.stderr
