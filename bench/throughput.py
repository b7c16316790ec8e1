"""Throughput benchmark: env ceiling, reference design, rlhelpers' trainer, pipeline ceiling, evaluation.

Run from the repository root::

    python -m bench.throughput            # full run, a few minutes; writes bench/results.md
    python -m bench.throughput --quick    # smoke run in well under a minute

Every training figure is environment steps per second (summed over the envs) after a warm-up,
the median over repetitions; the repetitions of all rows are interleaved so that background load
on the machine hits every row alike. Compare rows of one run, not figures across runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import ale_py
import gymnasium as gym
import numpy as np
import torch
from torch import nn

from bench.reference import ReferenceA2C
from rlhelpers.core.envs import make_vec_env
from rlhelpers.core.networks import ActorCritic
from rlhelpers.core.trainer import Trainer
from rlhelpers.runner.config import TrainConfig, resolve_config
from rlhelpers.runner.provenance import cpu_model

ENV_ID = "PongNoFrameskip-v4"
TARGET_VS_REFERENCE = 2.0
TARGET_PIPELINE_SHARE = 0.85
TARGET_EVAL_SECONDS = 30.0


class TinyEncoder(nn.Module):
    """Last frame subsampled to 21x21 and one linear layer: a network whose cost is negligible."""

    out_features = 32

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(21 * 21, self.out_features)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Features of uint8 frame stacks (N, 4, 84, 84)."""
        return torch.relu(self.linear(obs[:, -1, ::4, ::4].flatten(1).float() / 255.0))


@dataclass
class Row:
    """One line of the table: what was measured and its repetitions."""

    name: str
    step: Callable[[], object]
    steps_per_call: int
    samples: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        """Median over the repetitions."""
        return statistics.median(self.samples)


def measure(step: Callable[[], object], steps_per_call: int, warmup: int, seconds: float) -> float:
    """Environment steps per second of ``step`` over at least ``seconds``, after ``warmup`` calls."""
    for _ in range(warmup):
        step()
    calls, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds or calls == 0:
        step()
        calls += 1
    return calls * steps_per_call / elapsed


def random_stepper(n_envs: int) -> Callable[[], object]:
    """The env ceiling: rlhelpers' vector env stepping uniformly random actions, no network."""
    env = make_vec_env(ENV_ID, n_envs)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    n_actions = int(env.single_action_space.n)
    return lambda: env.step(rng.integers(0, n_actions, n_envs))


def with_threads(n_threads: int, step: Callable[[], object]) -> Callable[[], object]:
    """``step`` run with ``n_threads`` torch intra-op threads, restoring the previous count after."""

    def run() -> object:
        previous = torch.get_num_threads()
        torch.set_num_threads(n_threads)
        try:
            return step()
        finally:
            torch.set_num_threads(previous)

    return run


def bench_config(algo: str, n_envs: int, n_steps: int, **overrides: object) -> tuple[TrainConfig, torch.device]:
    """The training config of every rlhelpers row, resolved for this machine, and its device."""
    return resolve_config(TrainConfig(algo=algo, env_id=ENV_ID, n_envs=n_envs, n_steps=n_steps, device="cpu",
                                      wandb_mode="disabled", **overrides))


def tiny_model(n_actions: int, critic_outputs: int) -> ActorCritic:
    """Actor-critic on ``TinyEncoder`` for the pipeline ceiling."""
    return ActorCritic(TinyEncoder(), n_actions, critic_outputs)


def machine_info() -> dict[str, str]:
    """What the figures depend on: CPU, cores, threads, library versions, background load."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",)
    return {
        "cpu": cpu_model(),
        "cores": str(os.cpu_count()),
        "torch threads": f"{torch.get_num_threads()} (torch's default; rows marked '1 torch thread' set 1)",
        "load average at start (1 min)": f"{load[0]:.2f}" if load[0] != "?" else "?",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "gymnasium": gym.__version__,
        "ale-py": ale_py.__version__,
        "numpy": np.__version__,
    }


def run(quick: bool, reps: int, seconds: float, n_envs: int, n_steps: int, eval_envs: list[int],
        eval_episodes: int) -> str:
    """Measure every row, print progress, and return the results as markdown."""
    info = machine_info()
    default_threads = torch.get_num_threads()
    batch = n_envs * n_steps
    print(f"building envs and learners ({n_envs} envs, n_steps {n_steps}) ...", flush=True)
    reference = ReferenceA2C(ENV_ID, n_envs, n_steps)
    trainers = {algo: Trainer(*bench_config(algo, n_envs, n_steps)) for algo in ("a2c", "task1", "task2")}
    probe = trainers["a2c"]
    pipeline = Trainer(*bench_config("a2c", n_envs, n_steps), model=tiny_model(probe.n_actions, 1))
    rows = [
        Row("env ceiling: vector env, random actions", random_stepper(n_envs), n_envs),
        Row(f"reference design, torch default {default_threads} threads",
            with_threads(default_threads, reference.train_iteration), batch),
        Row("reference design, 1 torch thread", with_threads(1, reference.train_iteration), batch),
        *(Row(f"rlhelpers {algo}", t.train_iteration, batch) for algo, t in trainers.items()),
        Row("rlhelpers a2c, 1 torch thread (--torch-threads 1)", with_threads(1, probe.train_iteration), batch),
        Row("pipeline ceiling: rlhelpers a2c, tiny network", pipeline.train_iteration, batch),
    ]
    warmup = 1 if quick else 3
    for rep in range(reps):
        for row in rows:
            row.samples.append(measure(row.step, row.steps_per_call, warmup, seconds))
            print(f"  rep {rep + 1}/{reps}  {row.name:<58} {row.samples[-1]:8.0f} steps/s", flush=True)
    reference.close()
    for t in (*trainers.values(), pipeline):
        t.close()

    eval_seconds: dict[int, list[float]] = {}
    for n in eval_envs:
        trainer = Trainer(*bench_config("a2c", n_envs, n_steps, n_eval_envs=n, n_eval_episodes=eval_episodes))
        trainer.eval_env = make_vec_env(ENV_ID, n)  # built ahead so that only the evaluation is timed
        eval_seconds[n] = []
        for rep in range(reps):
            start = time.perf_counter()
            record = trainer.evaluate()
            eval_seconds[n].append(time.perf_counter() - start)
            print(f"  rep {rep + 1}/{reps}  evaluation, {n} eval envs: {eval_seconds[n][-1]:6.1f} s "
                  f"({sum(record['lengths'])} steps)", flush=True)
        trainer.close()
    return render(info, rows, eval_seconds, eval_episodes, reps, seconds, n_envs, n_steps, quick)


def paired_ratio(samples: list[float], baseline: list[float]) -> float:
    """Median over repetitions of ``samples[i] / baseline[i]``."""
    return statistics.median(s / b for s, b in zip(samples, baseline, strict=True))


def render(info: dict[str, str], rows: list[Row], eval_seconds: dict[int, list[float]], eval_episodes: int,
           reps: int, seconds: float, n_envs: int, n_steps: int, quick: bool) -> str:
    """Markdown report: the throughput table, the ratios against the targets, evaluation times, machine."""
    env_ceiling = next(row for row in rows if row.name.startswith("env ceiling")).samples
    references = [row.samples for row in rows if row.name.startswith("reference")]
    reference = [max(samples) for samples in zip(*references, strict=True)]
    lines = [
        "# Throughput benchmark",
        "",
        f"Command: `python -m bench.throughput{' --quick' if quick else ''}`. `{ENV_ID}`, {n_envs} training envs, "
        f"n_steps {n_steps}, Nature CNN unless noted, CPU. Environment steps per second (summed over envs) "
        f"after a warm-up, median of {reps} interleaved repetitions of >= {seconds:g} s each. "
        "Ratios are medians of per-repetition ratios (against the faster reference row of the same "
        "repetition, or the env ceiling of the same repetition), which cancels slow drifts in background load.",
        "",
        "| measurement | steps/s | repetitions | ratio | target |",
        "| --- | ---: | --- | --- | --- |",
    ]
    for row in rows:
        reps_text = ", ".join(f"{s:.0f}" for s in row.samples)
        ratio = target = ""
        if row.name.startswith("rlhelpers"):
            speedup = paired_ratio(row.samples, reference)
            ratio = f"{speedup:.2f}x reference"
            target = f">= {TARGET_VS_REFERENCE:.1f}x: {'met' if speedup >= TARGET_VS_REFERENCE else 'missed'}"
        elif row.name.startswith("pipeline"):
            share = paired_ratio(row.samples, env_ceiling)
            ratio = f"{share:.0%} of env ceiling"
            target = f">= {TARGET_PIPELINE_SHARE:.0%}: {'met' if share >= TARGET_PIPELINE_SHARE else 'missed'}"
        lines.append(f"| {row.name} | {row.median:,.0f} | {reps_text} | {ratio} | {target} |")
    lines += [
        "",
        f"One evaluation of an untrained policy, {eval_episodes} episodes (`Trainer.evaluate()`, eval env built "
        "beforehand):",
        "",
        "| eval envs | seconds (median) | repetitions | target |",
        "| ---: | ---: | --- | --- |",
    ]
    for n, samples in eval_seconds.items():
        median = statistics.median(samples)
        target = f"< {TARGET_EVAL_SECONDS:g} s: {'met' if median < TARGET_EVAL_SECONDS else 'missed'}"
        lines.append(f"| {n} | {median:.1f} | {', '.join(f'{s:.1f}' for s in samples)} | {target} |")
    if hasattr(os, "getloadavg"):
        info["load average at end (1 min)"] = f"{os.getloadavg()[0]:.2f}"
    lines += ["", "Machine:", ""] + [f"- {key}: {value}" for key, value in info.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Parse options, run the benchmark, print the table and write it to ``--output``."""
    parser = argparse.ArgumentParser(prog="python -m bench.throughput", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 2 envs, 1 short repetition, 1-episode evaluation (figures not comparable)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per row (default 3; 1 with --quick)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="measured seconds per repetition (default 4; 0.1 with --quick)")
    parser.add_argument("--output", type=Path, default=Path(__file__).with_name("results.md"),
                        help="markdown file for the table (default bench/results.md)")
    args = parser.parse_args(argv)
    if args.quick:
        options = {"n_envs": 2, "n_steps": 5, "eval_envs": [1], "eval_episodes": 1}
    else:
        options = {"n_envs": 16, "n_steps": 5, "eval_envs": [8, 16, 30], "eval_episodes": 30}
    reps = args.reps or (1 if args.quick else 3)
    seconds = args.seconds or (0.1 if args.quick else 4.0)
    report = run(args.quick, reps, seconds, **options)
    print()
    print(report)
    args.output.write_text(report)
    print(f"written to {args.output}")


if __name__ == "__main__":
    main()
