"""Does a change of the trainer change what it computes? Trains 30,000 steps of a2c, task1 and task2 on Pong, once as
the CPU trains and once with the GPU's choices set by attribute on the CPU (``Trainer.reforward`` on, two env groups),
and compares two such sets of runs, made by two versions of the code on one machine, metric by metric; then counts
the torch operators of one training iteration on both paths. Run from the root of each checkout::

    python -m bench.identity train /tmp/before      # in a checkout of the old code
    python -m bench.identity train /tmp/after       # in this one
    python -m bench.identity compare /tmp/before /tmp/after
    python -m bench.identity profile                # in each checkout: the operator counts per iteration
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from rlhelpers.core.trainer import Trainer

ALGOS = ("a2c", "task1", "task2")
# The GPU's choices: reforward (an attribute) and two env groups.
PATHS: dict[str, dict[str, Any]] = {"cpu": {}, "gpu-choices": {"env_groups": 2}}
WALL_CLOCK = {"time", "charts/fps"}
OPERATORS = ("aten::convolution", "aten::linear", "aten::copy_")


def _trainer_class(path: str) -> type[Trainer]:

    if path == "cpu":
        return Trainer

    class GpuChoices(Trainer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.reforward = True

    return GpuChoices


def train_all(out: Path, steps: int) -> None:
    """The six runs, in ``out/<path>/<algo>_seed-0``."""
    from rlhelpers.runner import run
    from rlhelpers.runner.config import TrainConfig

    original = run.Trainer
    for path, options in PATHS.items():
        run.Trainer = _trainer_class(path)  # type: ignore[misc]  # the run builds its trainer from this name
        try:
            for algo in ALGOS:
                config = TrainConfig(algo=algo, seed=0, total_timesteps=steps, torch_threads=1, wandb_mode="disabled",
                                     runs_dir=str(out / path), **options)
                run.train(config, show_progress=False)
        finally:
            run.Trainer = original  # type: ignore[misc]


def _lines(path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [{k: v for k, v in line.items() if k not in WALL_CLOCK} for line in lines]


def compare(a: Path, b: Path) -> bool:
    """Print, run by run, whether the metrics logs of ``a`` and ``b`` hold the same values; True if all do."""
    same = True
    for path in PATHS:
        for algo in ALGOS:
            run_a, run_b = (root / path / f"{algo}_seed-0" / "metrics.jsonl" for root in (a, b))
            lines_a, lines_b = _lines(run_a), _lines(run_b)
            values = sum(len(line) - 1 for line in lines_a)
            equal = lines_a == lines_b
            same &= equal
            print(f"{path:12} {algo:6} {len(lines_a)} lines, {values} values: {'identical' if equal else 'DIFFER'}")
    return same


def profile(iterations: int = 3) -> dict[str, dict[str, float]]:
    """Each path's operator counts per training iteration (a rollout and its update) of a2c on Pong, after one
    iteration of warm-up."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from rlhelpers.runner.config import TrainConfig
    from rlhelpers.runner.run import resolve_config

    counts = {}
    for path, options in PATHS.items():
        config, device = resolve_config(TrainConfig(algo="a2c", torch_threads=1, wandb_mode="disabled", **options))
        trainer = _trainer_class(path)(config, device)
        try:
            trainer.train_iteration()
            with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
                for _ in range(iterations):
                    trainer.train_iteration()
            found = Counter({event.key: event.count for event in prof.key_averages()})
            counts[path] = {op: found[op] / iterations for op in OPERATORS}
        finally:
            trainer.close()
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train")
    train.add_argument("out", type=Path)
    train.add_argument("--steps", type=int, default=30_000)
    both = commands.add_parser("compare")
    both.add_argument("a", type=Path)
    both.add_argument("b", type=Path)
    commands.add_parser("profile")
    args = parser.parse_args(argv)
    if args.command == "train":
        train_all(args.out, args.steps)
    elif args.command == "compare":
        return 0 if compare(args.a, args.b) else 1
    else:
        for path, ops in profile().items():
            print(f"{path:12} " + "  ".join(f"{op} {n:g}" for op, n in ops.items()) + "  per iteration")
    return 0


if __name__ == "__main__":
    sys.exit(main())
