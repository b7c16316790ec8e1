"""The run's local metrics log, ``metrics.jsonl``: every line sent to W&B, one JSON object per line.

Each line holds ``global_step``, the wall-clock ``time`` and the metrics. It lives in the run
directory (on Drive on Colab), so it survives what W&B's local folder does not, and it is the
source of the report's diagnostic plots. On resume, lines logged after the checkpoint's step are
dropped (``drop_after``), so a step never appears twice.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

from rlhelpers.core.errors import write_error
from rlhelpers.runner.files import write_atomically


def _parse(line: str) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return None  # the partial last line of a writer killed mid-append
    return record if isinstance(record, dict) and "global_step" in record else None


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """Every complete record of a metrics log, in file order ([] when there is none)."""
    if not path.exists():
        return []
    return [r for r in map(_parse, path.read_text().splitlines()) if r is not None]


class MetricsLog:
    """Appends metric records to one ``metrics.jsonl``."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def drop_after(self, step: int) -> None:
        """Keep only complete records with ``global_step <= step`` (the file is rewritten only if one goes)."""
        if not self.path.exists():
            return
        lines = self.path.read_text().splitlines()
        kept = [line for line in lines if (record := _parse(line)) is not None and record["global_step"] <= step]
        if len(kept) < len(lines):
            write_atomically(self.path, "".join(line + "\n" for line in kept).encode())

    def append(self, metrics: dict[str, Any], step: int) -> None:
        """Write one record: ``global_step``, ``time`` and ``metrics`` (non-finite floats as null)."""
        record = {"global_step": step, "time": round(time.time(), 3)}
        for key, value in metrics.items():
            record[key] = None if isinstance(value, float) and not math.isfinite(value) else value
        try:
            with open(self.path, "a") as f:
                f.write(json.dumps(record) + "\n")
        except OSError as exc:
            raise write_error(str(self.path), exc) from exc
