"""The throughput benchmark runs end to end in its quickest form, so it cannot rot (its figures are not checked)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quick_benchmark_writes_its_table(tmp_path: Path) -> None:
    out = tmp_path / "results.md"
    subprocess.run([sys.executable, "-m", "bench.throughput", "--quick", "--output", str(out)],
                   cwd=ROOT, check=True, timeout=300, capture_output=True)
    table = out.read_text()
    for row in ("env ceiling", "reference design", "baseline: rlhelpers before", "rlhelpers a2c, auto settings",
                "rlhelpers task1", "rlhelpers task2", "two runs side by side: rlhelpers",
                "pipeline ceiling: rlhelpers, 1 torch thread, 2 env groups (auto with a GPU)",
                "cpu:"):
        assert row in table
    assert "x reference" in table and "x baseline pair" in table and "of env ceiling" in table
