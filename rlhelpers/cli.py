"""The command line, above the run machinery and the report:
``python -m rlhelpers train | campaign | status | plot | publish | evaluate | analyze``."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from rlhelpers.core.config import ENV_DEFAULTS
from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.losses import ALGORITHMS
from rlhelpers.report.experiment import ANALYSIS_JSON, COMPARISON_PNG, EXPERIMENTS
from rlhelpers.runner.campaign import CampaignRun, status_table, train_campaign
from rlhelpers.runner.config import ARMS, DEFAULT_RUNS_DIR, FIELD_TYPES, TrainConfig, whole_number
from rlhelpers.runner.run import train
from rlhelpers.runner.store import HISTORY_FILE, run_dirs
from rlhelpers.runner.tracking import publish_runs


def _whole_number(text: str) -> int:
    """argparse's type of an integer option (``config.whole_number``: ``1e7`` is ten million)."""
    try:
        return whole_number(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class _Renamed(argparse.Action):
    """An option's old name: it still works, with a one-line notice of the new one (its ``dest``)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"{option_string} is now --{self.dest.replace('_', '-')}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def _add_whole_number(parser: argparse._ActionsContainer, flag: str, default: int, text: str) -> None:
    """An integer option (``_whole_number``) whose help, ``text``, ends with its default."""
    parser.add_argument(flag, type=_whole_number, default=default, help=f"{text} (default: {default})")


def _run_defaults_text(name: str) -> str | None:
    """What a field left as None defaults to, from the tables of ``run_defaults``: the algorithms' values, then
    those of each kind of env that sets it (``Atari 16, classic control 8``; where no algorithm sets it, every kind,
    ``none`` for one without a value); None for a field that neither table sets."""
    by_algo = [f"{algo} {row.defaults[name]:g}" for algo, row in ALGORITHMS.items() if name in row.defaults]
    env_sets = any(name in values for values in ENV_DEFAULTS.values())
    by_env = [f"{kind} " + ("none" if name not in values else "the env's reward threshold" if values[name] is None
                            else f"{values[name]:g}")
              for kind, values in ENV_DEFAULTS.items() if name in values or (env_sets and not by_algo)]
    return "; ".join(", ".join(texts) for texts in (by_algo, by_env) if texts) or None


def _add_config_options(parser: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    """One option per TrainConfig field but those in ``skip``, of the field's type. An option not given stays out
    of the namespace (argparse.SUPPRESS), so that the config's own default applies."""
    for f in [field for field in dataclasses.fields(TrainConfig) if field.name not in skip]:
        types = FIELD_TYPES[f.name]
        default = _run_defaults_text(f.name) or f.metadata.get("default", f.default)
        kind = {"action": argparse.BooleanOptionalAction} if bool in types else \
            {"type": _whole_number if int in types else types[0]}
        parser.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, default=argparse.SUPPRESS, **kind,
                            help=f"{f.metadata['help']} (default: {default})")


def _config_options(args: argparse.Namespace) -> dict[str, Any]:
    """The TrainConfig fields given on the command line."""
    return {name: value for name, value in vars(args).items() if name in FIELD_TYPES}


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command of ``COMMANDS``. A command's summary in the list of commands is the first
    paragraph of its function's docstring, its description (``<command> --help``) the rest."""
    parser = argparse.ArgumentParser(prog="python -m rlhelpers",
                                     description="Train and compare actor-critic agents.")
    commands = parser.add_subparsers(dest="command", required=True)
    parsers = {}
    for name, command in COMMANDS.items():
        assert command.__doc__ is not None  # every command has a docstring: its help
        summary, _, details = inspect.cleandoc(command.__doc__).partition("\n\n")
        parsers[name] = commands.add_parser(name, help=summary, description=details or summary)
        if name in READS_RUNS:  # train and campaign have --runs-dir among the config's options
            parsers[name].add_argument("--runs-dir", default=DEFAULT_RUNS_DIR,
                                       help=f"directory holding the run directories (default: {DEFAULT_RUNS_DIR})")

    _add_config_options(parsers["train"])
    campaign = parsers["campaign"]
    campaign.add_argument("--experiment", choices=EXPERIMENTS, default="pong",
                          help="the report's experiment whose runs and run settings to train, the options below "
                               "changing them (docs/experiment.md; default: pong)")
    campaign.add_argument("--arms", nargs="+", choices=ARMS, default=None, metavar="ARM",
                          help="train only these arms' runs: an algorithm, or <algo>-<variant> for a variant's runs "
                               f"({', '.join(ARMS)}; default: the experiment's)")
    campaign.add_argument("--algos", nargs="+", choices=ARMS, dest="arms", action=_Renamed, help=argparse.SUPPRESS)
    campaign.add_argument("--seeds", nargs="+", type=_whole_number, default=None, metavar="SEED",
                          help="train these seeds of each (default: the experiment's)")
    campaign.add_argument("--parallel", type=_whole_number, default=None,
                          help="runs trained at once (default: one per usable core, at most the runs; "
                               "docs/throughput.md)")
    slurm = campaign.add_argument_group("a cluster (docs/cluster.md; needs the cluster extra: submitit)")
    slurm.add_argument("--cluster", choices=("slurm", "local"), default=None,
                       help="submit each unfinished run as a job of a SLURM job array (slurm), or as submitit's "
                            "local processes to try the set-up (local), instead of training them here")
    slurm.add_argument("--partition", default=None, help="SLURM partition (default: the cluster's)")
    _add_whole_number(slurm, "--time-min", 240, "time limit per job in minutes; a job is requeued at it and resumes")
    _add_whole_number(slurm, "--gpus-per-job", 0, "GPUs per job")
    _add_whole_number(slurm, "--cpus-per-job", 2, "CPUs per job")
    _add_whole_number(slurm, "--max-requeues", 30, "times a job is requeued at its time limit")
    _add_config_options(campaign, skip=CampaignRun._fields)  # each run sets its own
    for name, written, default in (("plot", "image to write, .png, .pdf or .svg", COMPARISON_PNG),
                                   ("analyze", "JSON to write", ANALYSIS_JSON)):
        parsers[name].add_argument("--out", default=None,
                                   help=f"{written} (default: {default} in figures/ for the committed runs/, in "
                                        "<runs-dir>/figures/ for another runs directory)")
    publish = parsers["publish"]
    publish.add_argument("--project", default=None, help="W&B project (default: the one each run was trained with)")
    publish.add_argument("--entity", default=None,
                         help="W&B user or team (default: the run's, else your key's default entity)")
    publish.add_argument("--mode", default="online", choices=("online", "offline"),
                         help="online (needs an API key) or offline: one complete folder per run for `wandb sync` "
                              "(default: online)")
    evaluate = parsers["evaluate"]
    evaluate.add_argument("run_dir", help="a run directory, e.g. runs/a2c_seed-0")
    _add_whole_number(evaluate, "--episodes", TrainConfig.n_eval_episodes, "complete episodes to play")
    _add_whole_number(evaluate, "--seed", 0, "replay seed")
    evaluate.add_argument("--greedy", action="store_true",
                          help="play the most likely action, not a sampled one (saved to policy_rescore_greedy.json)")
    evaluate.add_argument("--export", action="store_true", help="first write policy.pt from the run's newest snapshot")
    evaluate.add_argument("--video", default=None, help="also record one episode as an animated GIF here")
    _add_whole_number(evaluate, "--video-scale", 2, "GIF pixels per observation pixel, of 84x84 observations")
    analyze = parsers["analyze"]
    _add_whole_number(analyze, "--rollouts", 4,
                      "rollouts of n_envs x n_steps states per snapshot, on Pong 4 x 16 x 5 = 320 states")
    _add_whole_number(analyze, "--stages", 4,
                      "snapshots per run: stages-1 steps that every run has, spread evenly, and the run's last")
    return parser


def _evaluate(args: argparse.Namespace) -> None:
    """Re-score a run's committed policy (policy.pt); optionally record a GIF of one episode.

    Play complete episodes with RUN_DIR/policy.pt (float16 weights) on fresh seeds and print the mean return ± s.e.
    beside the run's last evaluation; the result is saved to RUN_DIR/policy_rescore.json (with --greedy,
    policy_rescore_greedy.json), which the report shows.
    """
    from rlhelpers.report.playback import evaluate_policy_file, export_policy, record_video, rescore_path, save_rescore

    if args.video_scale < 1:
        raise RLHelpersError(f"--video-scale must be a positive integer, got {args.video_scale}")
    if not Path(args.run_dir).is_dir():
        raise RLHelpersError(f"{args.run_dir} does not exist: name a run directory, such as runs/a2c_seed-0")
    if args.export:
        print(f"wrote {export_policy(args.run_dir)}")
    rescore = evaluate_policy_file(args.run_dir, args.episodes, args.seed, show_progress=True, greedy=args.greedy)
    print(f"{args.run_dir}: {rescore.mean:.2f} ± {rescore.sem:.2f} over {len(rescore.returns)} episodes"
          + (" of greedy actions" if args.greedy else ""))
    if rescore.last_mean is not None:
        verdict = "" if rescore.consistent is None else "; the new mean is " + (
            "within" if rescore.consistent else "OUTSIDE") + " 1.96 standard errors of the difference"
        print(f"run's last evaluation: {rescore.last_mean:.2f} ± {rescore.last_sem:.2f}{verdict}")
    saved = save_rescore(args.run_dir, rescore)
    print(f"wrote {saved}" if saved else
          f"kept {rescore_path(args.run_dir, args.greedy)}: it re-scores this policy over more episodes")
    if args.video:
        video = record_video(args.run_dir, args.video, args.seed, scale=args.video_scale)
        print(f"wrote {video['path']}: one episode, score {video['score']:+.0f}, {video['bytes']:,} bytes")


def _analyze(args: argparse.Namespace) -> None:
    """Measure the report's gradient facts on the runs' snapshots; write a JSON.

    On states visited by each snapshot's own policy: the two all-action actors' gradients against each other
    (float32, float64), the all-action vs sampled-action estimator variance and signal-to-noise, A2C's estimator,
    the gradient norm of each weighted loss term and the size of the advantage the actor follows; from each run's
    newest checkpoint, the share of parameters whose RMSprop mean square lies below epsilon. Snapshots already in
    the JSON, measured the same way, keep their entries; delete it to measure all anew. The JSON is saved after
    each snapshot measured.
    """
    from rlhelpers.report.analysis import write_analysis

    if args.rollouts < 1 or args.stages < 1:
        raise RLHelpersError("--rollouts and --stages must be positive integers")
    out, results = write_analysis(args.runs_dir, args.out, args.rollouts, args.stages, show_progress=True)
    print(f"wrote {out}: {len(results['snapshots'])} snapshots")


def _train(args: argparse.Namespace) -> int | None:
    """Train or resume one run (algo, seed).

    Train one run, or resume it from its newest checkpoint. SIGTERM or Ctrl-C saves a checkpoint and stops it (exit
    status 130 after Ctrl-C; pressed twice, it stops at once, keeping the checkpoints saved before).
    """
    try:
        result = train(TrainConfig(**_config_options(args)))
    except KeyboardInterrupt as stopped:  # the step where train checkpointed and stopped, if it got that far
        print(f"{stopped or 'interrupted'}; to resume: `python -m rlhelpers {shlex.join(sys.argv[1:])}`")
        return 130
    last = result.record.evaluations[-1]  # a run ends with an evaluation, or is reported from its evaluated history
    print(f"{result.run_dir}: stopped at step {result.num_timesteps:,} ({result.stop_reason}); last evaluation "
          f"{last.mean:.2f} at step {last.step:,}")
    return None


def _campaign(args: argparse.Namespace) -> int:
    """Train or resume all runs of one of the report's experiments, N at a time.

    Train or resume the runs of the experiment (its arms and seeds: docs/experiment.md), or of --arms and --seeds,
    with its game and run settings, seed by seed, each
    in its own process logging to <runs-dir>/<run>/train.log. Finished runs are skipped; a run
    that another live process trains is waited for, then trained if it is unfinished. Ctrl-C or SIGTERM
    checkpoints and stops every run.

    Exit status: 0 when every run asked for is over (finished, or stopped early above its stop return); 1 when a run
    failed or is not over (each named on stderr); 2 for bad input; 128 + N when stopped by signal N (130 after
    Ctrl-C, 143 after SIGTERM). With --cluster: 0 once the runs are submitted.
    """
    experiment = EXPERIMENTS[args.experiment]
    # The options, arms, seeds and runs at once that training here and submitting to SLURM share.
    shared = ({**experiment.options(), **_config_options(args)}, tuple(args.arms or experiment.arms),
              tuple(args.seeds or experiment.seeds), args.parallel)
    if args.cluster:
        try:
            from rlhelpers.runner.cluster import submit_campaign
        except ImportError as exc:
            raise RLHelpersError(f"submitting to SLURM needs submitit, which is not installed ({exc}): "
                                 'pip install -e ".[cluster]"') from exc
        return submit_campaign(*shared, cluster=args.cluster, partition=args.partition, time_min=args.time_min,
                               gpus=args.gpus_per_job, cpus=args.cpus_per_job, max_requeues=args.max_requeues)
    try:
        return train_campaign(*shared, show_progress=sys.stderr.isatty())
    except KeyboardInterrupt:  # the runs checkpointed and stopped
        return 130


def _status(args: argparse.Namespace) -> None:
    """One line per run: steps, evaluations, speed, state.

    Print the state of every run in the runs directory, from their files.
    """
    print(status_table(args.runs_dir))


def _publish(args: argparse.Namespace) -> None:
    """Upload every run to W&B from its local files, each record once.

    Create or resume one W&B run per run directory (its stored id, name <algo>_seed-<seed>) and log every line of
    metrics.jsonl and every evaluation that W&B does not hold yet. Safe to repeat.
    """
    publish_runs(args.runs_dir, args.mode, args.project, args.entity)


def _plot(args: argparse.Namespace) -> None:
    """Draw the comparison plot from the runs present.

    Draw the comparison plot from every eval_history.json found (the runs must all be of one environment).
    """
    from rlhelpers.report.plotting import figures_dir, plot_comparison

    out = Path(args.out) if args.out else figures_dir(args.runs_dir) / COMPARISON_PNG
    if out.suffix.lower() not in (".png", ".pdf", ".svg"):
        raise RLHelpersError(f"--out {out}: name the plot's file .png, .pdf or .svg")
    if not run_dirs(args.runs_dir):
        raise RLHelpersError(f"no run with an {HISTORY_FILE} in {args.runs_dir}: nothing to plot; pass the --runs-dir "
                             "you trained in")
    _, missing = plot_comparison(args.runs_dir, out)
    print(f"wrote {out}" + (f"; runs not present: {', '.join(missing)}" if missing else ""))


# The commands, in the order --help lists them, and those that read a runs directory (--runs-dir).
COMMANDS = {"train": _train, "campaign": _campaign, "status": _status, "plot": _plot, "publish": _publish,
            "evaluate": _evaluate, "analyze": _analyze}
READS_RUNS = ("status", "plot", "publish", "analyze")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args) or 0  # a command that returns nothing succeeded
    except RLHelpersError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def run() -> None:
    """``python -m rlhelpers``: exit with ``main``'s code, quietly when the reader of stdout leaves early."""
    try:
        try:
            sys.exit(main())
        finally:  # argparse's --help and errors exit from inside main; flush here, not at exit, outside the try
            sys.stdout.flush()
    except BrokenPipeError:  # the reader left early, as in `status | head -3`: no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
