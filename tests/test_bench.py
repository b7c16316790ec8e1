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


def test_the_gpu_table_has_every_row_and_projects_the_six_report_runs() -> None:
    """The GPU table (``--device cuda``) is built from measured rates; here from made-up ones, 1,000 steps/s for every
    row but the evaluation's, 3,000: the projection then follows from the committed runs' step counts and
    evaluation lengths alone."""
    import json

    from bench import gpu

    table = gpu.table_rows()
    for row in table:
        row.samples = [3_000.0 if "evaluation" in row.name else 1_000.0]
    names = [row.name for row in table]
    for what in ("env ceiling", "reference design", "rlhelpers a2c, auto settings", "rlhelpers task2, auto settings",
                 "1 env group", "ALE thread", "pinned memory + non_blocking uploads", "re-forward the rollout",
                 "TF32 convolutions", "evaluation: 30 envs", "campaign: 2 runs at once"):
        assert any(name.startswith("2 cores (Colab): ") and what in name for name in names), what
    assert any(name.endswith("(all): campaign: 6 runs at once") for name in names)
    report = gpu.render(table, {"gpu": "a GPU"}, "command", ["cuda tests: 9 passed"], 1, 4.0)
    assert "| cuda tests | 9 passed | |" in report and "1.00x reference" in report and "1.00x one a2c run" in report
    for choice in ("1 env group", "1 ALE thread", "pinned memory", "re-forward", "TF32"):  # each against the auto row
        prefix = f"| 2 cores (Colab): rlhelpers a2c, {choice}"
        (line,) = [line for line in report.splitlines() if line.startswith(prefix)]
        assert "1.00x auto settings" in line, line
    history = json.loads((ROOT / "runs" / "a2c_seed-0" / "eval_history.json").read_text())["history"]
    eval_s = sum(max(e["lengths"]) for e in history) * 30 / 3_000.0  # one episode on each of 30 envs
    expected = (history[-1]["step"] / 1_000.0 + eval_s) / 3600
    assert f"| projected: a2c_seed-0 | {expected:.2f} h | {history[-1]['step']:,} steps in " in report
    assert "| projected: the six, one at a time |" in report and "| projected: the six, two at a time |" in report


def test_the_gpu_rows_new_measurements_run_and_reforwarding_keeps_the_update() -> None:
    """The evaluation step and the trainer variants build and step (on the CPU here); re-forwarding the rollout in
    the update computes what back-propagating through the acting passes computes."""
    import torch

    from bench.throughput import _stepper
    from bench.variants import Reforward
    from rlhelpers.core.trainer import Trainer
    from rlhelpers.runner.config import TrainConfig, resolve_config

    common = {"n_envs": 2, "n_steps": 5, "device": "cpu"}
    for spec in ({"kind": "evaluation", "algo": "a2c", "n_eval_envs": 2}, {"kind": "rlhelpers", "algo": "task1",
                 "variant": "pinned"}, {"kind": "rlhelpers", "algo": "a2c", "variant": "reforward"},
                 {"kind": "rlhelpers", "algo": "a2c", "variant": "tf32"}):
        step, steps_per_call = _stepper({**common, **spec})
        step()
        assert steps_per_call == (2 if spec["kind"] == "evaluation" else 10)
    for algo in ("a2c", "task1"):
        stats = []
        for cls in (Trainer, Reforward):
            trainer = cls(*resolve_config(TrainConfig(algo=algo, env_id="CartPole-v1", n_envs=4, env_groups=2,
                                                      device="cpu", wandb_mode="disabled")))
            try:
                stats.append([trainer.train_iteration() for _ in range(3)])
            finally:
                trainer.close()
        for ours, reforwarded in zip(*stats, strict=True):
            assert ours.keys() == reforwarded.keys()
            for key in ours:
                assert torch.isclose(torch.tensor(ours[key]), torch.tensor(reforwarded[key]), rtol=1e-4, atol=1e-6), key
