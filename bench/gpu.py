"""The GPU table of the throughput benchmark: ``python -m bench.gpu`` (``--help`` for its options).

Two shapes of machine, each with the one GPU: Colab's (the process and its threads confined to the first 2 CPUs it
may use, with ``os.sched_setaffinity``; each row checks from its threads' allowed CPUs that the confinement took
effect) and the whole machine. The rows answer, in this order, so that a check short of time drops the least
needed: on both shapes the ALE env ceiling, the course's reference design (bench/reference.py) and one a2c run with
the auto settings; on Colab's the evaluation step (for the projection) and two runs at once, on the whole machine
the campaign's six at once; then the choices still open (1 or 2 env groups, pinned memory with non_blocking
uploads, back-propagating through the acting passes against re-forwarding the rollout, TF32 convolutions:
bench/variants.py; the campaign's runs at once and ALE threads). From Colab's rates, evaluations included, it
projects the time of the six report runs, at the step counts and evaluations the committed runs recorded
(runs/*/eval_history.json).

Every figure is environment steps per second (summed over envs, and over the runs of a campaign row) of Pong with
16 envs and n_steps 5, after a warm-up: the median of ``SAMPLES`` timed windows of one set of fresh processes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
from pathlib import Path
from typing import Any

from bench import throughput
from bench.throughput import ROOT, Row, measure_in_time, paired_ratio, rlhelpers_run, start_measuring

COLAB_CORES = 2  # a Colab GPU runtime's CPU cores
SAMPLES = 3  # timed windows per row
SECONDS = 2.0  # each window on the GPU machine
ALGOS = ("a2c", "task1", "task2")
REPORT_RUNS = tuple(f"{algo}_seed-{seed}" for seed in (0, 100) for algo in ALGOS)
CAMPAIGN = [rlhelpers_run(algo) for algo in ALGOS] * 2  # the six report runs' trainers
AUTO = "rlhelpers a2c, auto settings"


def ale(threads: int) -> str:
    return f"{threads} ALE thread{'s' if threads > 1 else ''}"


def table_rows(quick: bool = False) -> list[Row]:
    """Every row, named ``<shape>: <what>``, in the order they are measured (the module's docstring)."""
    cores = len(os.sched_getaffinity(0))
    colab, whole = f"{min(COLAB_CORES, cores)} cores (Colab)", f"{cores} cores (all)"
    n_eval_envs = 2 if quick else report_eval_envs()
    shared = max(1, cores // 6)

    def row(shape: str, what: str, *children: dict[str, Any]) -> Row:
        on = {"cpus": COLAB_CORES} if shape == colab else {}
        return Row(f"{shape}: {what}", [{**child, **on} for child in children])

    def run(variant: str | None = None, **options: Any) -> dict[str, Any]:
        return {**rlhelpers_run("a2c", **options), "variant": variant}

    essentials = [row(shape, what, child) for shape in (colab, whole) for what, child in (
        ("env ceiling: vector env, random actions", {"kind": "random"}), ("reference design", {"kind": "reference"}),
        (AUTO, run()))]
    return [*essentials[:3],
            row(colab, f"evaluation: {n_eval_envs} envs stepped by the policy",
                {"kind": "evaluation", "algo": "a2c", "n_eval_envs": n_eval_envs}),
            row(colab, "campaign: 2 runs at once (auto: one per core)", *CAMPAIGN[:2]),
            *essentials[3:],
            row(whole, "campaign: 6 runs at once (auto: one per core, at most the runs)", *CAMPAIGN),
            row(colab, "rlhelpers a2c, 1 env group (auto: 2 with a GPU)", run(env_groups=1)),
            row(colab, "rlhelpers a2c, pinned memory + non_blocking uploads", run("pinned")),
            row(colab, "rlhelpers a2c, update through the acting passes (auto with a GPU: re-forward)",
                run("acting-graphs")),
            row(colab, "rlhelpers a2c, TF32 convolutions (auto: fp32)", run("tf32")),
            row(whole, "campaign: 2 runs at once", *CAMPAIGN[:2]),
            row(whole, f"campaign: 6 runs at once, {ale(shared)} each",
                *({**spec, "options": {"env_threads": shared}} for spec in CAMPAIGN)),
            row(whole, f"rlhelpers a2c, {ale(max(1, cores // 4))} (auto: one per core)",
                run(env_threads=max(1, cores // 4)))]


def report_eval_envs() -> int:
    """The evaluation envs of the committed report runs (30)."""
    return json.loads((ROOT / "runs" / REPORT_RUNS[0] / "eval_history.json").read_text())["config"]["n_eval_envs"]


def _find(table: list[Row], shape: str, what: str) -> Row | None:
    """The measured row of ``shape`` whose name, after the shape's label, starts with ``what``."""
    return next((row for row in table if row.name.startswith(f"{shape}: {what}") and row.samples), None)


def _against(row: Row, other: Row | None, what: str) -> str:
    return f"{paired_ratio(row.samples, other.samples):.2f}x {what}" if other else ""


def ratios(row: Row, table: list[Row]) -> str:
    """A measured row against the reference, the env ceiling and (choices) the auto settings or (campaigns) one run,
    each on the same shape and where measured; and whether Colab's confinement failed."""
    shape = row.name.split(": ")[0]
    reference, ceiling, auto = (_find(table, shape, what) for what in ("reference design", "env ceiling", AUTO))
    found = []
    if ": rlhelpers" in row.name:
        found += [_against(row, reference, "reference"), _against(row, ceiling, "env ceiling")]
        if row is not auto:  # a choice, against the auto settings it departs from
            found.append(_against(row, auto, "auto settings"))
    elif ": campaign" in row.name:
        found += [_against(row, auto, "one a2c run"), _against(row, ceiling, "env ceiling")]
    wanted = row.children[0].get("cpus")
    if wanted and row.cpus_seen > wanted:
        found.append(f"NOT confined to {wanted} CPUs: its threads could use {row.cpus_seen} (not Colab's shape)")
    return ", ".join(filter(None, found))


def projection(table: list[Row], runs_dir: Path = ROOT / "runs") -> list[tuple[str, str, str]]:
    """The six report runs on Colab's shape, at the a2c run's rate (the losses differ by little next to the GPU's
    launches and the emulator), plus their evaluations at the evaluation rate, as the committed runs recorded them
    (an evaluation of E episodes on N envs takes about ceil(E / N) times its longest episode in steps of all N
    envs); one at a time and, where measured, two at a time (the campaign's choice on 2 cores)."""
    shape = table[0].name.split(": ")[0] if table else ""
    auto, evaluation = _find(table, shape, AUTO), _find(table, shape, "evaluation")
    if auto is None or evaluation is None:
        return [("projected: the six report runs", "not projected", f"needs the rows {AUTO!r} and 'evaluation'")]
    pair = _find(table, shape, "campaign: 2 runs at once")
    rows, total_steps, total_eval = [], 0, 0.0
    for name in REPORT_RUNS:
        record = json.loads((runs_dir / name / "eval_history.json").read_text())
        history, envs = record["history"], record["config"]["n_eval_envs"]
        steps = history[-1]["step"]
        eval_steps = sum(max(e["lengths"]) * math.ceil(len(e["lengths"]) / envs) * envs for e in history)
        eval_s = eval_steps / evaluation.median
        rows.append((f"projected: {name}", f"{(steps / auto.median + eval_s) / 3600:.2f} h",
                     f"{steps:,} steps in {steps / auto.median / 3600:.2f} h + {len(history)} evaluations in "
                     f"{eval_s / 3600:.2f} h"))
        total_steps, total_eval = total_steps + steps, total_eval + eval_s
    rows.append(("projected: the six, one at a time", f"{(total_steps / auto.median + total_eval) / 3600:.1f} h",
                 f"{shape}, one GPU"))
    if pair is not None:
        rows.append(("projected: the six, two at a time", f"{(total_steps / pair.median + total_eval) / 3600:.1f} h",
                     f"{total_steps:,} steps at the campaign's combined {pair.median:,.0f} steps/s, evaluations "
                     "in full"))
    return rows


def timing(table: list[Row], seconds: float) -> str:
    """How long the rows took, and what they would take at the GPU run's size (``SAMPLES`` windows of ``SECONDS``)
    with this run's start-up (building and warming up a row's processes)."""
    measured = [row for row in table if row.samples]
    if not measured:
        return f"No row measured of {len(table)}."
    startup = [row.wall_s - SAMPLES * seconds for row in measured]
    full = sum(startup) + len(measured) * SAMPLES * SECONDS
    return (f"{len(measured)} of {len(table)} rows measured in {sum(row.wall_s for row in measured):.0f} s; start-up "
            f"(build and warm-up) median {statistics.median(startup):.1f} s a row. At the GPU run's size ({SAMPLES} "
            f"windows of {SECONDS:g} s a row) with this start-up, these rows take about {full:.0f} s.")


def machine_info() -> dict[str, str]:
    """The GPU, CUDA and how the cores pair up (Colab's 2 cores may be two threads of one core)."""
    import torch

    siblings = Path("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list")
    return {"gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "none (a smoke run on the CPU)",
            "cuda": str(torch.version.cuda), "cpu0's thread siblings": siblings.read_text().strip()
            if siblings.exists() else "unknown"}


def render(table: list[Row], info: dict[str, str], command: str, seconds: float, n_envs: int = 16) -> str:
    """One Markdown table: every row, measured or not, grouped by shape, then the projection, the timing and the
    machine."""
    lines = ["# GPU throughput", "",
             f"Command: `{command}`. PongNoFrameskip-v4, {n_envs} training envs, n_steps 5, Nature CNN, on the GPU, no "
             f"evaluation except in the evaluation row. Environment steps per second (summed over envs and runs), "
             f"the median of {SAMPLES} windows of {seconds:g} s in one set of fresh processes per row, the rows in "
             "the order below; ratios against the same shape's rows. Projections use the Colab-shape rates.", "",
             "| what | steps/s | windows | detail |", "| --- | ---: | --- | --- |"]
    colab = table[0].name.split(": ")[0] if table else ""
    for row in sorted(table, key=lambda row: not row.name.startswith(colab)):  # Colab's shape first
        if row.samples:
            lines.append(f"| {row.name} | {row.median:,.0f} | {', '.join(f'{s:.0f}' for s in row.samples)} "
                         f"| {ratios(row, table)} |")
        else:
            lines.append(f"| {row.name} | not measured | | out of the check's time |")
    lines += [f"| {what} | {figure} | | {detail} |" for what, figure, detail in projection(table)]
    lines += ["", timing(table, seconds), "", "Machine:", ""] + [f"- {key}: {value}" for key, value in info.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Parse options, measure the rows in order until the budget is spent, and write the table after every row."""
    parser = argparse.ArgumentParser(prog="python -m bench.gpu", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 2 envs, short windows (figures not comparable); without a GPU, on the CPU")
    parser.add_argument("--seconds", type=float, default=None,
                        help="measured seconds per window of a row (default 2; 0.2 with --quick)")
    parser.add_argument("--output", type=Path, default=Path(__file__).with_name("gpu_results.md"),
                        help="markdown file for the table, written after every row (default bench/gpu_results.md)")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="measure no row that would end later than this many seconds from the start (default: no "
                             "limit); the rows left are listed as not measured")
    parser.add_argument("--rows", type=int, default=None, help="only the table's first ROWS rows")
    parser.add_argument("--only", nargs="+", default=None, metavar="TEXT",
                        help="only the rows whose name contains one of these (e.g. 'auto settings' 'TF32')")
    args = parser.parse_args(argv)
    import torch

    if not (torch.cuda.is_available() or args.quick):
        parser.error("torch sees no CUDA device here (--quick runs the rows on the CPU)")
    seconds = args.seconds or (0.2 if args.quick else 2.0)
    common = {**start_measuring(args.quick, seconds), "device": "cuda" if torch.cuda.is_available() else "cpu",
              "samples": SAMPLES}
    table = [row for row in table_rows(args.quick)[:args.rows]
             if args.only is None or any(text in row.name for text in args.only)]
    if args.only and not table:
        parser.error(f"no row's name contains any of {args.only}")
    info = {**throughput.machine_info(), **machine_info()}
    command = "python -m bench.gpu" + (" --quick" if args.quick else "")
    measure_in_time(table, common, args.budget_s,
                    lambda: args.output.write_text(render(table, info, command, seconds, common["n_envs"])))
    print(args.output.read_text())
    print(f"written to {args.output}")


if __name__ == "__main__":
    main()
