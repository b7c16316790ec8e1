"""The GPU table of the throughput benchmark (``python -m bench.throughput --device cuda``).

Two shapes of machine, each with the one GPU: Colab's (the process and its threads confined to 2 cores with
``os.sched_setaffinity``) and the whole machine. On each: the ALE env ceiling, the course's reference design
(bench/reference.py) and rlhelpers with its auto settings, on the same cores and GPU; the choices that decide
how the package should run on a GPU (1 or 2 env groups, ALE threads, pinned memory with non_blocking uploads,
re-forwarding the rollout against reusing the acting passes' graphs: bench/variants.py); and the campaign's
combined rate with K runs at once. From Colab's rates, evaluations included, it projects the time of the six
report runs, at the step counts and evaluations the committed runs recorded (runs/*/eval_history.json).

Every figure is environment steps per second (summed over envs, and over the runs of a campaign row) of Pong
with 16 envs and n_steps 5, after a warm-up, each row in fresh processes, as in the CPU table.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from bench.throughput import ROOT, Row, paired_ratio, rlhelpers_run

COLAB_CORES = 2  # a Colab GPU runtime's CPU cores
ALGOS = ("a2c", "task1", "task2")
REPORT_RUNS = tuple(f"{algo}_seed-{seed}" for seed in (0, 100) for algo in ALGOS)
CAMPAIGN = [rlhelpers_run(algo) for algo in ALGOS] * 2  # the six report runs' trainers
AUTO = "rlhelpers a2c, auto settings"


def ale(threads: int) -> str:
    return f"{threads} ALE thread{'s' if threads > 1 else ''}"


def shape_rows(label: str, cpus: int | None, campaigns: tuple[int, ...], ale_threads: int, n_eval_envs: int,
               every_algo: bool) -> list[Row]:
    """The rows of one shape, named ``<label>: ...``; ``cpus`` None is the whole machine."""
    on = {"cpus": cpus} if cpus else {}

    def run(algo: str = "a2c", variant: str | None = None, **options: Any) -> dict[str, Any]:
        return {**rlhelpers_run(algo, **options), **on, "variant": variant}

    rows = [Row("env ceiling: vector env, random actions", [{"kind": "random", **on}]),
            Row("reference design", [{"kind": "reference", **on}]),
            *(Row(f"rlhelpers {algo}, auto settings", [run(algo)]) for algo in (ALGOS if every_algo else ALGOS[:1])),
            Row("rlhelpers a2c, 1 env group (auto: 2 with a GPU)", [run(env_groups=1)]),
            Row(f"rlhelpers a2c, {ale(ale_threads)} (auto: one per core)",
                [run(env_threads=ale_threads)]),
            Row("rlhelpers a2c, pinned memory + non_blocking uploads", [run(variant="pinned")]),
            Row("rlhelpers a2c, re-forward the rollout in the update", [run(variant="reforward")]),
            Row("rlhelpers a2c, TF32 convolutions (auto: fp32)", [run(variant="tf32")])]
    if n_eval_envs:
        rows.append(Row(f"evaluation: {n_eval_envs} envs stepped by the policy",
                        [{"kind": "evaluation", "algo": "a2c", "n_eval_envs": n_eval_envs, **on}]))
    rows += [Row(f"campaign: {k} runs at once", [{**spec, **on} for spec in CAMPAIGN[:k]]) for k in campaigns]
    for row in rows:
        row.name = f"{label}: {row.name}"
    return rows


def table_rows(quick: bool = False) -> list[Row]:
    """Colab's shape with every row the projection needs, then the whole machine; the campaign rows there go up
    to the six report runs at once, the last with the ALE threads shared out among them."""
    cores = len(os.sched_getaffinity(0))
    colab = min(COLAB_CORES, cores)
    rows = shape_rows(f"{colab} cores (Colab)", colab, (2,), 1, 2 if quick else report_eval_envs(), True)
    whole = shape_rows(f"{cores} cores (all)", None, (2, 4, 6), max(1, cores // 4), 0, False)
    shared = max(1, cores // 6)
    whole.append(Row(f"{cores} cores (all): campaign: 6 runs at once, {ale(shared)} each",
                     [{**spec, "options": {"env_threads": shared}} for spec in CAMPAIGN]))
    return rows + whole


def report_eval_envs() -> int:
    """The evaluation envs of the committed report runs (30)."""
    return json.loads((ROOT / "runs" / REPORT_RUNS[0] / "eval_history.json").read_text())["config"]["n_eval_envs"]


def _find(table: list[Row], shape: str, what: str) -> Row | None:
    """The first row of ``shape`` whose name, after the shape's label, starts with ``what``."""
    return next((row for row in table if row.name.startswith(f"{shape}: {what}")), None)


def ratios(table: list[Row]) -> dict[str, str]:
    """Per row: against the reference, the env ceiling and (choices) the auto settings or (campaigns) one run,
    each on the same shape."""
    found = {}
    for row in table:
        shape = row.name.split(": ")[0]
        reference, ceiling, auto = (_find(table, shape, what) for what in ("reference design", "env ceiling", AUTO))
        if ": rlhelpers" in row.name:
            found[row.name] = (f"{paired_ratio(row.samples, reference.samples):.2f}x reference, "
                               f"{paired_ratio(row.samples, ceiling.samples):.0%} of env ceiling")
            if not row.name.endswith("auto settings"):  # a choice, against the auto settings it departs from
                found[row.name] += f", {paired_ratio(row.samples, auto.samples):.2f}x auto settings"
        elif ": campaign" in row.name:
            found[row.name] = (f"{paired_ratio(row.samples, auto.samples):.2f}x one a2c run, "
                               f"{paired_ratio(row.samples, ceiling.samples):.0%} of env ceiling")
    return found


def projection(table: list[Row], runs_dir: Path = ROOT / "runs") -> list[tuple[str, str, str]]:
    """The six report runs on Colab's shape: each run's training steps at its algorithm's rate, plus its
    evaluations at the evaluation rate, as the committed run recorded them (an evaluation of E episodes on N envs
    takes about ceil(E / N) times its longest episode in steps of all N envs); then the six one at a time (the
    campaign's choice with 2 cores) and, where measured, two at a time, their evaluations counted in full."""
    shape = table[0].name.split(": ")[0]
    evaluation = _find(table, shape, "evaluation")
    pair = _find(table, shape, "campaign: 2 runs at once")
    rows, total_steps, total_eval, total = [], 0, 0.0, 0.0
    for name in REPORT_RUNS:
        record = json.loads((runs_dir / name / "eval_history.json").read_text())
        history, envs = record["history"], record["config"]["n_eval_envs"]
        steps = history[-1]["step"]
        eval_steps = sum(max(e["lengths"]) * math.ceil(len(e["lengths"]) / envs) * envs for e in history)
        eval_s = eval_steps / evaluation.median
        train_s = steps / _find(table, shape, f"rlhelpers {name.split('_')[0]}, auto settings").median
        rows.append((f"projected: {name}", f"{(train_s + eval_s) / 3600:.2f} h",
                     f"{steps:,} steps in {train_s / 3600:.2f} h + {len(history)} evaluations in "
                     f"{eval_s / 3600:.2f} h"))
        total_steps, total_eval, total = total_steps + steps, total_eval + eval_s, total + train_s + eval_s
    rows.append(("projected: the six, one at a time", f"{total / 3600:.1f} h", f"{shape}, one GPU"))
    if pair is not None:
        paired = total_steps / pair.median + total_eval
        rows.append(("projected: the six, two at a time", f"{paired / 3600:.1f} h",
                     f"{total_steps:,} steps at the campaign's combined {pair.median:,.0f} steps/s, evaluations "
                     "in full"))
    return rows


def machine_info() -> dict[str, str]:
    """The GPU, CUDA and how the cores pair up (Colab's 2 cores may be two threads of one core)."""
    import torch

    siblings = Path("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list")
    return {"gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "none (a smoke run on the CPU)",
            "cuda": str(torch.version.cuda), "cpu0's thread siblings": siblings.read_text().strip()
            if siblings.exists() else "unknown"}


def render(table: list[Row], info: dict[str, str], command: str, notes: list[str], reps: int, seconds: float) -> str:
    """One Markdown table: the notes (the CUDA tests' result), every measurement, the projection; then the
    machine."""
    found = ratios(table)
    lines = ["# GPU throughput", "",
             f"Command: `{command}`. PongNoFrameskip-v4, 16 training envs, n_steps 5, Nature CNN, on the GPU, no "
             f"evaluation except in the evaluation row. Environment steps per second (summed over envs and runs), "
             f"median of {reps} repetition(s) of {seconds:g} s, each in fresh processes; ratios against the same "
             "shape's rows. Projections use the Colab-shape rates.", "",
             "| what | figure | detail |", "| --- | ---: | --- |"]
    lines += [f"| {note.split(': ', 1)[0]} | {note.split(': ', 1)[-1]} | |" for note in notes]
    lines += [f"| {row.name} | {row.median:,.0f} steps/s | {found.get(row.name, '')} |" for row in table]
    lines += [f"| {what} | {figure} | {detail} |" for what, figure, detail in projection(table)]
    lines += ["", "Machine:", ""] + [f"- {key}: {value}" for key, value in info.items()]
    return "\n".join(lines) + "\n"
