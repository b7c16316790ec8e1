"""Words on the graders' page: the report exported with ``--no-input``, up to its Appendix. Run from the repository
root on an exported report::

    papermill report.ipynb out.ipynb -p algo none
    jupyter nbconvert --to html_mathml --no-input --output report_graders out.ipynb
    python -m bench.words report_graders.html

A word is a whitespace-separated token holding a letter or digit; a typeset formula (``<math>``) is one word; the
student's own section (*Your analysis*, up to the next heading of its level) is not counted. Prints the count of each
section and the total.
"""

from __future__ import annotations

import argparse
import re
from html.parser import HTMLParser
from pathlib import Path

WORD = re.compile(r"\w")  # a token holding a letter or digit (or an underscore, which no prose token is alone)
SKIPPED_TAGS = {"script", "style", "head", "title"}
STUDENT_SECTION = "Your analysis"
APPENDIX = "Appendix"


class PageWords(HTMLParser):
    """Counts the words of each section (``h1``/``h2`` heading) of a report's HTML until its Appendix."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: dict[str, int] = {"(before the first heading)": 0}
        self.current = "(before the first heading)"
        self.skipping = 0  # depth inside tags whose text is not shown
        self.in_math = 0
        self.heading: str | None = None  # the tag of the heading being read, and its text so far
        self.heading_text = ""
        self.done = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in SKIPPED_TAGS:
            self.skipping += 1
        elif tag == "math":
            if not self.in_math and not self.skipping and not self.done:
                self._count(1)
            self.in_math += 1
        elif tag in ("h1", "h2"):
            self.heading, self.heading_text = tag, ""

    def handle_endtag(self, tag: str) -> None:
        if tag in SKIPPED_TAGS:
            self.skipping -= 1
        elif tag == "math":
            self.in_math -= 1
        elif tag == self.heading:
            title = self.heading_text.replace("¶", "").strip()
            self.done = self.done or (tag == "h1" and title == APPENDIX)
            self.current = title
            self.sections.setdefault(title, 0)
            self._count(len([t for t in title.split() if WORD.search(t)]))
            self.heading = None

    def handle_data(self, data: str) -> None:
        if self.skipping or self.in_math or self.done:
            return
        if self.heading is not None:
            self.heading_text += data
            return
        self._count(sum(1 for token in data.split() if WORD.search(token)))

    def _count(self, n: int) -> None:
        if not self.done and self.current != STUDENT_SECTION:
            self.sections[self.current] += n


def page_words(html: str) -> dict[str, int]:
    """The words of each section of the page before its Appendix, in page order."""
    parser = PageWords()
    parser.feed(html)
    return parser.sections


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html", help="the report exported with --no-input (html or html_mathml)")
    sections = page_words(Path(parser.parse_args().html).read_text())
    for title, n in sections.items():
        print(f"{n:6,d}  {title}")
    print(f"{sum(sections.values()):6,d}  before the Appendix")


if __name__ == "__main__":
    main()
