"""The report's HTML export: nbconvert's HTML page with every formula of the Markdown typeset as MathML.

nbconvert's own HTML export leaves the formulas as LaTeX for MathJax, which the page loads from a CDN
when it is opened: offline, they show as source. ``MathMLHTMLExporter`` converts them with
``latex2mathml`` at export time, and browsers render MathML themselves. It is nbconvert's ``html_mathml``
exporter (an entry point of this package): ``jupyter nbconvert --to html_mathml report_final.ipynb``.
The notebook keeps its LaTeX, so Jupyter, Colab and GitHub render it as before.

nbconvert imports every registered exporter when it starts, whatever the format asked for, so this module imports
``latex2mathml`` only once a formula is converted: installed without it, only ``--to html_mathml`` fails.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from typing import Any

from jinja2 import pass_context
from nbconvert.exporters import HTMLExporter
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

log = logging.getLogger(__name__)
# A letter in an alphabet of its own (\mathcal A, \mathbb R, ...), as latex2mathml writes it. Chromium draws
# mathvariant only as "normal" (MathML Core), so these letters are written as Unicode's own characters instead.
_VARIANT_LETTER = re.compile(r'<mi mathvariant="(script|fraktur|double-struck|bold)">([A-Za-z])</mi>')


def _unicode_letter(variant: str, letter: str) -> str:
    """``letter`` of a mathvariant alphabet as one Unicode character: MATHEMATICAL SCRIPT CAPITAL A, or for
    the letters Unicode had before that block (its holes) SCRIPT CAPITAL H, BLACK-LETTER CAPITAL C, ..."""
    name = f"{variant.upper()} {'CAPITAL' if letter.isupper() else 'SMALL'} {letter.upper()}"
    try:
        return unicodedata.lookup(f"MATHEMATICAL {name}")
    except KeyError:
        return unicodedata.lookup(name.replace("FRAKTUR", "BLACK-LETTER"))


def latex_to_mathml(latex: str, display: str) -> str | None:
    """``latex`` as a MathML element (``display``: "inline" or "block"); None if latex2mathml cannot convert it."""
    try:
        from latex2mathml.converter import convert
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError("--to html_mathml needs latex2mathml: pip install latex2mathml (or rlhelpers' "
                                  "report or colab extra)") from exc
    try:
        mathml = convert(latex, display=display)
    except Exception as error:  # latex2mathml raises its own and plain Python errors on input it does not know
        log.warning("formula left to MathJax, latex2mathml cannot convert %r: %s", latex, error)
        return None
    return _VARIANT_LETTER.sub(lambda m: f"<mi>{_unicode_letter(*m.groups())}</mi>", mathml)


class MathMLRenderer(IPythonRenderer):
    """nbconvert's Markdown renderer, with MathML for the formulas instead of their LaTeX (kept when the
    conversion fails, for MathJax when the page has a network)."""

    def inline_math(self, body: str) -> str:
        return latex_to_mathml(body, "inline") or super().inline_math(body)

    def block_math(self, body: str) -> str:
        return latex_to_mathml(body, "block") or super().block_math(body)

    def latex_environment(self, name: str, body: str) -> str:
        return latex_to_mathml(f"\\begin{{{name}}}{body}\\end{{{name}}}", "block") or super().latex_environment(
            name, body)


class MathMLHTMLExporter(HTMLExporter):
    """nbconvert's HTML exporter (same options, same template) whose Markdown formulas are MathML."""

    export_from_notebook = "HTML with MathML"

    @pass_context
    def markdown2html(self, context: dict[str, Any], source: str) -> str:
        """``HTMLExporter.markdown2html`` with ``MathMLRenderer``."""
        renderer = MathMLRenderer(
            escape=False, attachments=context.get("cell", {}).get("attachments", {}), embed_images=self.embed_images,
            path=context.get("resources", {}).get("metadata", {}).get("path", ""),
            anchor_link_text=self.anchor_link_text, exclude_anchor_links=self.exclude_anchor_links,
            **self.lexer_options)
        return MarkdownWithMath(renderer=renderer).render(source)
