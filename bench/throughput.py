"""Throughput benchmark: the env ceiling, the course's reference design, rlhelpers before and after its
speed work, two runs side by side, the pipeline with a near-free network, and one evaluation.

Run from the root of a git clone on an otherwise idle machine::

    python -m bench.throughput            # full run, about 15 minutes; writes bench/results.md
    python -m bench.throughput --quick    # smoke run in about a minute (figures not comparable)
    python -m bench.throughput --device cuda   # the GPU table (bench/gpu.py); bash bench/gpu_check.sh runs it

Every figure is environment steps per second (summed over the envs) of Pong with 16 envs and n_steps 5,
after a warm-up, without evaluations. Each measurement runs in a fresh process; a row of two runs starts
both processes and times them over the same window. The rows' repetitions are interleaved, so background
load hits every row alike, and each ratio is the median of per-repetition ratios. ``baseline`` rows run
the code of ``--baseline`` (default: the commit before the speed work), extracted with ``git archive``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from rlhelpers.core.networks import Encoder

ROOT = Path(__file__).resolve().parents[1]
ENV_ID = "PongNoFrameskip-v4"
BASELINE = "0a97a2d"  # rlhelpers before the speed work: the loop that trained the committed runs
TARGET_VS_REFERENCE = 2.0
TARGET_TWO_RUNS = 1.3
TARGET_PIPELINE_SHARE = 0.85


@dataclass
class Row:
    """One line of the table: a name and the processes it runs at once (``child`` specs); what they measured, how
    long its set of processes took, and the most CPUs any of their threads could run on (``threads_cpus``)."""

    name: str
    children: list[dict[str, Any]]
    samples: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    cpus_seen: int = 0

    @property
    def median(self) -> float:
        """Median over the repetitions."""
        return statistics.median(self.samples)


# ---------------------------------------------------------------- the measuring process

def _tiny_model(n_actions: int, critic_outputs: int) -> Any:
    """Actor-critic on a network whose cost is negligible (last frame subsampled to 21x21, one linear layer)."""
    import torch
    from torch import nn

    from rlhelpers.core.networks import ActorCritic

    class TinyEncoder(nn.Module):
        out_features = 32

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(21 * 21, self.out_features)

        def trunk(self, obs: torch.Tensor) -> torch.Tensor:
            return obs[:, -1, ::4, ::4].flatten(1).float() / 255.0

        def top(self, trunk_out: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.linear(trunk_out))

        def forward(self, obs: torch.Tensor) -> torch.Tensor:  # the baseline's ActorCritic calls the encoder
            return self.top(self.trunk(obs))

    # An Encoder by its interface: the baseline's rlhelpers, which runs it too, has no Encoder class to subclass.
    return ActorCritic(cast("Encoder", TinyEncoder()), n_actions, critic_outputs)


def _stepper(spec: dict[str, Any]) -> tuple[Any, int]:
    """The call that one measurement repeats, and the environment steps each call makes."""
    import numpy as np
    import torch

    n_envs, n_steps, device_name = spec["n_envs"], spec["n_steps"], spec.get("device", "cpu")
    if spec.get("torch_threads"):
        torch.set_num_threads(spec["torch_threads"])
    if spec["kind"] == "random":
        import gymnasium as gym

        from rlhelpers.core.envs import make_vec_env

        env = make_vec_env(ENV_ID, n_envs, num_threads=spec.get("env_threads", 0))
        env.reset(seed=0)
        rng = np.random.default_rng(0)
        n_actions = int(cast(gym.spaces.Discrete, env.single_action_space).n)
        return (lambda: env.step(rng.integers(0, n_actions, n_envs))), n_envs
    if spec["kind"] == "reference":
        from bench.reference import ReferenceA2C

        return ReferenceA2C(ENV_ID, n_envs, n_steps, device=device_name).train_iteration, n_envs * n_steps
    from bench.variants import VARIANTS
    from rlhelpers.core.trainer import Trainer
    from rlhelpers.runner.config import TrainConfig
    from rlhelpers.runner.run import resolve_config

    config, device = resolve_config(TrainConfig(algo=spec["algo"], env_id=ENV_ID, n_envs=n_envs, n_steps=n_steps,
                                                device=device_name, wandb_mode="disabled", **spec.get("options", {})))
    trainer = VARIANTS.get(spec.get("variant", ""), Trainer)(config, device)
    if spec.get("tiny"):  # the first trainer only tells the network's shape; its envs are closed, not left beside
        trainer.close()
        model = _tiny_model(trainer.n_actions, trainer.model.critic_head.out_features)
        trainer = Trainer(config, device, model=model)
    if spec["kind"] == "evaluation":  # one step of a full evaluation's envs with the policy, as Trainer.evaluate
        from rlhelpers.core.envs import make_vec_env
        from rlhelpers.core.networks import sample_actions

        for env in trainer.envs:  # the trainer stays open: its torch settings stay in effect, as in a run
            env.close()
        env = make_vec_env(ENV_ID, spec["n_eval_envs"], num_threads=config.env_threads)
        obs = [env.reset(seed=0)[0]]

        @torch.inference_mode()
        def evaluation_step() -> None:
            actions = sample_actions(trainer.model(torch.as_tensor(obs[0], device=device))[0])
            obs[0] = env.step(actions.cpu().numpy())[0]

        return evaluation_step, spec["n_eval_envs"]
    return trainer.train_iteration, n_envs * n_steps


def cpu_list(text: str) -> set[int]:
    """The CPUs of a kernel CPU list such as ``0-3,8``."""
    cpus: set[int] = set()
    for part in filter(None, text.strip().split(",")):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def threads_cpus() -> set[int]:
    """The CPUs that the threads of this process may run on, as the kernel applies it (``Cpus_allowed_list`` of
    each thread in /proc), and those they last ran on: under gVisor a mask set with ``sched_setaffinity`` is
    recorded but not enforced."""
    cpus: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that has ended
            status = dict(line.split(":", 1) for line in (task / "status").read_text().splitlines() if ":" in line)
            cpus |= cpu_list(status["Cpus_allowed_list"])
            cpus.add(int((task / "stat").read_text().rsplit(")", 1)[1].split()[36]))  # field 39: where it last ran
    return cpus


def child(spec: dict[str, Any]) -> None:
    """One measurement: build, warm up, say ``ready``, wait for a line on stdin, then time ``samples`` windows
    (default 1) and print their steps/s as JSON, with the CPUs the process's threads could use (``threads_cpus``).
    ``cpus``, where given, is the number of CPUs the process and its threads are confined to: the first ones it
    may use (Colab's shape)."""
    if spec.get("cpus"):
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:spec["cpus"]])
    step, steps_per_call = _stepper(spec)
    for _ in range(spec["warmup"]):
        step()
    print("ready", flush=True)
    sys.stdin.readline()
    rates = []
    for _ in range(spec.get("samples", 1)):
        calls, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < spec["seconds"] or calls == 0:
            step()
            calls += 1
        rates.append(calls * steps_per_call / elapsed)
    print(json.dumps({"steps_per_s": rates, "cpus": sorted(threads_cpus())}), flush=True)


# ---------------------------------------------------------------- the parent

def measure(row: Row, common: dict[str, Any], baseline_src: Path | None) -> list[float]:
    """Start the row's processes, let them warm up, time them together; return their summed steps/s of each window.
    Adds the time taken to ``row.wall_s`` and notes in ``row.cpus_seen`` how many CPUs their threads could use."""
    started = time.monotonic()
    processes = []
    for spec in row.children:
        env = dict(os.environ)
        src = baseline_src if spec.get("baseline") else ROOT
        # rlhelpers from src, bench from here, the rest as this process finds it (gpu_check.sh: the carried wheels)
        env["PYTHONPATH"] = os.pathsep.join([str(src), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
        env.update(spec.get("env", {}))
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "bench.throughput", "--child", json.dumps({**common, **spec})],
            cwd=src, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True))
    try:
        for process in processes:
            if _line(process).strip() != "ready":
                raise RuntimeError(f"{row.name}: a measuring process failed (its error is above)")
        for process in processes:
            assert process.stdin is not None  # piped
            process.stdin.write("go\n")
            process.stdin.flush()
        results = [json.loads(_line(process)) for process in processes]
    finally:
        for process in processes:  # with the reference's env worker processes, however this process ends
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        row.wall_s += time.monotonic() - started
    row.cpus_seen = max(row.cpus_seen, *(len(result["cpus"]) for result in results))
    return [sum(window) for window in zip(*(result["steps_per_s"] for result in results), strict=True)]


def _line(process: subprocess.Popen[str]) -> str:
    """The next line that a measuring process writes to its stdout (piped)."""
    assert process.stdout is not None  # measure pipes it
    return process.stdout.readline()


def rlhelpers_run(algo: str = "a2c", baseline: bool = False, tiny: bool = False, **options: Any) -> dict[str, Any]:
    """The spec of one rlhelpers trainer process; ``options`` are TrainConfig fields."""
    return {"kind": "rlhelpers", "algo": algo, "baseline": baseline, "tiny": tiny, "options": options}


# What the campaign passes to each of two runs on one CPU (campaign.train_campaign); everything else is auto.
PAIR: dict[str, Any] = {"torch_threads": 1}


def table_rows() -> list[Row]:
    """Every row of the table. "auto settings" is what a user gets: the defaults for one run, and the
    campaign's options for each of two runs side by side."""
    return [
        Row("env ceiling: vector env, random actions", [{"kind": "random"}]),
        Row("reference design, torch's default threads", [{"kind": "reference"}]),
        Row("reference design, 1 torch thread", [{"kind": "reference", "torch_threads": 1}]),
        Row("baseline: rlhelpers before, a2c", [rlhelpers_run(baseline=True)]),
        Row("baseline: rlhelpers before, a2c, 1 torch thread", [rlhelpers_run(baseline=True, torch_threads=1)]),
        *(Row(f"rlhelpers {algo}, auto settings", [rlhelpers_run(algo)]) for algo in ("a2c", "task1", "task2")),
        Row("rlhelpers a2c, 1 torch thread", [rlhelpers_run(torch_threads=1)]),
        Row("rlhelpers a2c, 2 env groups", [rlhelpers_run(env_groups=2)]),
        Row("rlhelpers a2c, 2 env groups, 1 torch thread, 1 env thread",
            [rlhelpers_run(env_groups=2, torch_threads=1, env_threads=1)]),
        Row("two runs side by side: baseline, 1 torch thread each",
            [rlhelpers_run("a2c", baseline=True, **PAIR), rlhelpers_run("task1", baseline=True, **PAIR)]),
        Row("two runs side by side: rlhelpers, the campaign's settings",
            [rlhelpers_run("a2c", **PAIR), rlhelpers_run("task1", **PAIR)]),
        Row("two runs side by side: rlhelpers, torch's default threads each",
            [rlhelpers_run("a2c"), rlhelpers_run("task1")]),
        Row("two runs side by side: rlhelpers, 1 torch thread and 1 env thread each",
            [rlhelpers_run(algo, torch_threads=1, env_threads=1) for algo in ("a2c", "task1")]),
        Row("pipeline ceiling: baseline, tiny network", [rlhelpers_run(baseline=True, tiny=True)]),
        Row("pipeline ceiling: rlhelpers, torch's default threads, tiny network", [rlhelpers_run(tiny=True)]),
        Row("pipeline ceiling: rlhelpers, 1 torch thread, 1 env group, tiny network",
            [rlhelpers_run(tiny=True, torch_threads=1, env_groups=1)]),
        Row("pipeline ceiling: rlhelpers, 1 torch thread, 2 env groups (auto with a GPU), tiny network",
            [rlhelpers_run(tiny=True, torch_threads=1, env_groups=2)]),
    ]


def paired_ratio(samples: list[float], baseline: list[float]) -> float:
    """Median over repetitions of ``samples[i] / baseline[i]``."""
    return statistics.median(s / b for s, b in zip(samples, baseline, strict=True))


def _find(table: list[Row], start: str) -> list[Row]:
    return [row for row in table if row.name.startswith(start)]


def ratios(table: list[Row]) -> dict[str, tuple[str, str]]:
    """Per row name: its ratio and its target's verdict, where it has one."""
    reference = [max(reps) for reps in zip(*(row.samples for row in _find(table, "reference")), strict=True)]
    env_ceiling = _find(table, "env ceiling")[0].samples
    two_runs_before = _find(table, "two runs side by side: baseline")[0].samples
    found = {}
    for row in table:
        if row.name.startswith(("rlhelpers", "baseline")):
            ratio = paired_ratio(row.samples, reference)
            target = (f">= {TARGET_VS_REFERENCE:.1f}x: {'met' if ratio >= TARGET_VS_REFERENCE else 'missed'}"
                      if "auto" in row.name else "")
            found[row.name] = (f"{ratio:.2f}x reference", target)
        elif row.name.startswith("two runs side by side: rlhelpers"):
            ratio = paired_ratio(row.samples, two_runs_before)
            target = (f">= {TARGET_TWO_RUNS:.1f}x: {'met' if ratio >= TARGET_TWO_RUNS else 'missed'}"
                      if "campaign" in row.name else "")
            found[row.name] = (f"{ratio:.2f}x baseline pair", target)
        elif row.name.startswith("pipeline"):
            share = paired_ratio(row.samples, env_ceiling)
            target = (f">= {TARGET_PIPELINE_SHARE:.0%}: {'met' if share >= TARGET_PIPELINE_SHARE else 'missed'}"
                      if "auto" in row.name else "")
            found[row.name] = (f"{share:.0%} of env ceiling", target)
    return found


def machine_info() -> dict[str, str]:
    """What the figures depend on: CPU, cores, library versions, background load."""
    import ale_py
    import gymnasium as gym
    import numpy as np
    import torch

    from rlhelpers.runner.run import cpu_model

    return {
        "cpu": cpu_model(),
        "cores": str(os.cpu_count()),
        "torch's default threads": str(torch.get_num_threads()),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "gymnasium": gym.__version__,
        "ale-py": ale_py.__version__,
        "numpy": np.__version__,
        "load average at start (1 min)": f"{os.getloadavg()[0]:.2f}",
    }


def render(table: list[Row], info: dict[str, str], command: str, reps: int, seconds: float) -> str:
    """The results as Markdown: the table with ratios and targets, then the machine."""
    found = ratios(table)
    lines = [
        "# Throughput benchmark",
        "",
        f"Command: `{command}`. `{ENV_ID}`, 16 training envs, n_steps 5, Nature CNN unless noted, CPU, no "
        f"evaluation. Environment steps per second (summed over envs, and over both runs in a row of two), "
        f"median of {reps} interleaved repetitions of {seconds:g} s each, every one in fresh processes. Ratios "
        "are medians of per-repetition ratios against the same repetition's faster reference row, baseline "
        f"pair or env ceiling. Baseline: rlhelpers at commit {info['baseline']}.",
        "",
        "| measurement | steps/s | repetitions | ratio | target |",
        "| --- | ---: | --- | --- | --- |",
    ]
    for row in table:
        ratio, target = found.get(row.name, ("", ""))
        lines.append(f"| {row.name} | {row.median:,.0f} | {', '.join(f'{s:.0f}' for s in row.samples)} "
                     f"| {ratio} | {target} |")
    info["load average at end (1 min)"] = f"{os.getloadavg()[0]:.2f}"
    lines += ["", "Machine:", ""] + [f"- {key}: {value}" for key, value in info.items()]
    return "\n".join(lines) + "\n"


def extract(revision: str, into: Path) -> Path:
    """The ``rlhelpers`` package of git ``revision``, written below ``into``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "rlhelpers"], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def measure_all(table: list[Row], reps: int, common: dict[str, Any], baseline_src: Path | None) -> None:
    """Every row's repetitions, the rows interleaved within each repetition."""
    for rep in range(reps):
        for row in table:
            row.samples += measure(row, common, baseline_src)
            print(f"  rep {rep + 1}/{reps}  {row.name:<70} {row.samples[-1]:8.0f} steps/s", flush=True)


def guess_s(row: Row, table: list[Row]) -> float:
    """How long ``row`` will take: as the longest measured row of as many processes, else half as long again as the
    longest measured row (0 before the first)."""
    same = [other.wall_s for other in table if other.samples and len(other.children) == len(row.children)]
    return max(same) if same else 1.5 * max((other.wall_s for other in table if other.samples), default=0.0)


def measure_in_time(table: list[Row], common: dict[str, Any], budget_s: float | None,
                    write: Callable[[], object]) -> None:
    """Each row once, its windows in one set of processes, in order, until the next would end more than
    ``budget_s`` seconds from now (``guess_s``): the rows left stay unmeasured. ``write`` runs before the first row
    and after each, so that a check cut short keeps what it measured."""
    end = time.monotonic() + (math.inf if budget_s is None else budget_s)
    write()
    for i, row in enumerate(table):
        if time.monotonic() + guess_s(row, table) > end:
            print(f"  out of time: {len(table) - i} rows not measured", flush=True)
            return
        row.samples = measure(row, common, None)
        print(f"  {row.name:<90} {row.median:8.0f} steps/s", flush=True)
        write()


def start_measuring(quick: bool, seconds: float) -> dict[str, Any]:
    """The settings every row of a table shares (``quick``: 2 envs and 1 warm-up update instead of 16 and 5; each
    sample ``seconds`` long), after making SIGTERM (as from timeout) end by an exception, so that ``measure`` kills
    the processes of the row it measures."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    return {"n_envs": 2 if quick else 16, "n_steps": 5, "warmup": 1 if quick else 5, "seconds": seconds}


def main(argv: list[str] | None = None) -> None:
    """Parse options, measure every row, print the table and write it to ``--output``."""
    parser = argparse.ArgumentParser(prog="python -m bench.throughput", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 2 envs, 1 short repetition (figures not comparable)")
    parser.add_argument("--reps", type=int, default=None,
                        help="CPU table: repetitions per row (default 3; 1 with --quick)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="measured seconds per repetition (default 8; 0.2 with --quick)")
    parser.add_argument("--baseline", default=BASELINE, help=f"git revision of the baseline rows (default {BASELINE})")
    parser.add_argument("--output", type=Path, default=Path(__file__).with_name("results.md"),
                        help="markdown file for the table (default bench/results.md)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(json.loads(args.child))
        return
    reps = args.reps or (1 if args.quick else 3)
    seconds = args.seconds or (0.2 if args.quick else 8.0)
    common = start_measuring(args.quick, seconds)
    info = machine_info()
    info["baseline"] = args.baseline
    table = table_rows()
    with tempfile.TemporaryDirectory() as tmp:
        measure_all(table, reps, common, extract(args.baseline, Path(tmp)))
    report = render(table, info, "python -m bench.throughput" + (" --quick" if args.quick else ""), reps, seconds)
    output = args.output
    output.write_text(report)
    print()
    print(report)
    print(f"written to {output}")


if __name__ == "__main__":
    main()
