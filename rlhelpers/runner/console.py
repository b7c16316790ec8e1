"""What long work shows on the console, written so that a notebook keeps a short output: progress bars
that refresh rarely outside a terminal, and lines printed above the bar in a terminal, plainly elsewhere."""

from __future__ import annotations

import sys
from typing import Any

from tqdm import tqdm


def progress_bar(**options: Any) -> tqdm:
    """A tqdm bar on stderr (``options`` are tqdm's). In a notebook every refresh is kept in the saved output,
    so outside a terminal it refreshes every 30 s at most (tqdm's monitor would otherwise force one every 10 s)."""
    interval = 1.0 if sys.stderr.isatty() else 30.0
    return tqdm(mininterval=interval, maxinterval=interval, file=sys.stderr, **options)


def say(line: str) -> None:
    """Print a line of a long job's log. In a terminal, above the progress bar; elsewhere plainly, as in a
    notebook, where tqdm's clearing and redrawing of the bar around each line is stored as output after output."""
    if sys.stderr.isatty():
        tqdm.write(line)
    else:
        print(line, flush=True)
