"""The comparison plot's numbers: mean over the pooled episodes of all seeds, +/- one standard error."""

import json
import math

import numpy as np

from rlhelpers.plotting import learning_curve, plot_comparison


def record(algo: str, seed: int, history: list[dict]) -> dict:
    return {"run_name": f"{algo}_seed-{seed}", "config": {"algo": algo, "seed": seed, "env_id": "PongNoFrameskip-v4"},
            "history": history}


def test_learning_curve_pools_seeds_with_standard_error() -> None:
    seed0 = record("a2c", 0, [{"step": 0, "returns": [-21.0, -20.0, -19.0]}, {"step": 300, "returns": [1.0, 3.0]}])
    seed100 = record("a2c", 100, [{"step": 0, "returns": [-21.0, -21.0, -20.0]}, {"step": 300, "returns": [5.0, 7.0]}])
    steps, means, sems, counts = learning_curve([seed0, seed100])
    pooled0 = np.array([-21.0, -20.0, -19.0, -21.0, -21.0, -20.0])
    assert steps.tolist() == [0, 300] and counts.tolist() == [6, 4]
    assert math.isclose(means[0], pooled0.mean()) and math.isclose(means[1], 4.0)
    assert math.isclose(sems[0], pooled0.std(ddof=1) / math.sqrt(6))
    assert math.isclose(sems[1], np.std([1.0, 3.0, 5.0, 7.0], ddof=1) / 2.0)


def test_plot_lists_missing_runs_and_writes_png(tmp_path) -> None:
    for algo, seed in (("a2c", 0), ("task2", 100)):
        run = tmp_path / "runs" / f"{algo}_seed-{seed}"
        run.mkdir(parents=True)
        history = [{"step": s, "returns": [float(s // 100 - 21)] * 3, "lengths": [800] * 3} for s in (0, 100, 200)]
        (run / "eval_history.json").write_text(json.dumps(record(algo, seed, history)))
    fig, missing = plot_comparison(tmp_path / "runs", tmp_path / "figures" / "comparison.png")
    assert missing == ["a2c_seed-100", "task1_seed-0", "task1_seed-100", "task2_seed-0"]
    assert (tmp_path / "figures" / "comparison.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    labels = [line.get_label() for line in fig.axes[0].lines]
    assert labels == ["a2c (seed 0)", "task2 (seed 100)"]
    assert fig.axes[0].lines[0].get_ydata().tolist() == [-21.0, -20.0, -19.0]
