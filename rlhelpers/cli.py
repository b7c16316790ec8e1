"""The command line, above the run machinery: ``python -m rlhelpers train | campaign | status | plot | publish``.

Its parts (``add_commands``, ``add_config_options``, ``add_campaign_options``, ``train_run``, ``campaign_command``,
``main``) also build the command line of a package above the helper, which adds commands and options of its own."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rlhelpers.core.config import ENV_DEFAULTS
from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.losses import ALGORITHMS
from rlhelpers.runner.campaign import CampaignRun, campaign_runs, status_table, train_campaign
from rlhelpers.runner.config import DEFAULT_RUNS_DIR, FIELD_TYPES, TrainConfig, whole_number
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


def add_whole_number(parser: argparse._ActionsContainer, flag: str, default: int, text: str) -> None:
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


def add_config_options(parser: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    """One option per TrainConfig field but those in ``skip``, of the field's type. An option not given stays out
    of the namespace (argparse.SUPPRESS), so that the config's own default applies."""
    for f in [field for field in dataclasses.fields(TrainConfig) if field.name not in skip]:
        types = FIELD_TYPES[f.name]
        default = _run_defaults_text(f.name) or f.metadata.get("default", f.default)
        kind = {"action": argparse.BooleanOptionalAction} if bool in types else \
            {"type": _whole_number if int in types else types[0]}
        parser.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, default=argparse.SUPPRESS, **kind,
                            help=f"{f.metadata['help']} (default: {default})")


def config_options(args: argparse.Namespace) -> dict[str, Any]:
    """The TrainConfig fields given on the command line."""
    return {name: value for name, value in vars(args).items() if name in FIELD_TYPES}


def add_commands(parser: argparse.ArgumentParser, commands: Mapping[str, Callable[[argparse.Namespace], int | None]],
                 reads_runs: tuple[str, ...]) -> dict[str, argparse.ArgumentParser]:
    """A sub-parser for each of ``commands``, by name; those of ``reads_runs`` get ``--runs-dir``. A command's
    summary in the list of commands is the first paragraph of its function's docstring, its description
    (``<command> --help``) the rest."""
    subparsers = parser.add_subparsers(dest="command", required=True)
    parsers = {}
    for name, command in commands.items():
        assert command.__doc__ is not None  # every command has a docstring: its help
        summary, _, details = inspect.cleandoc(command.__doc__).partition("\n\n")
        parsers[name] = subparsers.add_parser(name, help=summary, description=details or summary)
        if name in reads_runs:  # train and campaign have --runs-dir among the config's options
            parsers[name].add_argument("--runs-dir", default=DEFAULT_RUNS_DIR,
                                       help=f"directory holding the run directories (default: {DEFAULT_RUNS_DIR})")
    return parsers


def add_campaign_options(campaign: argparse.ArgumentParser, arms: Sequence[str] | None, arms_default: str,
                         seeds_default: str) -> None:
    """``campaign``'s options: the arms (any algorithm, or ``<algo>-<variant>``, unless ``arms`` names the choices)
    and seeds to train, the runs at once, the cluster's, and every config option a run does not set itself."""
    campaign.add_argument("--arms", nargs="+", choices=arms, default=None, metavar="ARM",
                          help="train only these arms' runs: an algorithm, or <algo>-<variant> for a variant's runs "
                               f"({', '.join(arms) if arms else 'a variant named by you, its values the options below'}"
                               f"; default: {arms_default})")
    campaign.add_argument("--algos", nargs="+", choices=arms, dest="arms", action=_Renamed, help=argparse.SUPPRESS)
    campaign.add_argument("--seeds", nargs="+", type=_whole_number, default=None, metavar="SEED",
                          help=f"train these seeds of each (default: {seeds_default})")
    campaign.add_argument("--parallel", type=_whole_number, default=None,
                          help="runs trained at once (default: one per usable core, at most the runs; "
                               "docs/throughput.md)")
    slurm = campaign.add_argument_group("a cluster (docs/cluster.md; needs the cluster extra: submitit)")
    slurm.add_argument("--cluster", choices=("slurm", "local"), default=None,
                       help="submit each unfinished run as a job of a SLURM job array (slurm), or as submitit's "
                            "local processes to try the set-up (local), instead of training them here")
    slurm.add_argument("--partition", default=None, help="SLURM partition (default: the cluster's)")
    add_whole_number(slurm, "--time-min", 240, "time limit per job in minutes; a job is requeued at it and resumes")
    add_whole_number(slurm, "--gpus-per-job", 0, "GPUs per job")
    add_whole_number(slurm, "--cpus-per-job", 2, "CPUs per job")
    add_whole_number(slurm, "--max-requeues", 30, "times a job is requeued at its time limit")
    add_config_options(campaign, skip=CampaignRun._fields)  # each run sets its own


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command of ``COMMANDS``."""
    parser = argparse.ArgumentParser(prog="python -m rlhelpers",
                                     description="Train and compare actor-critic agents.")
    parsers = add_commands(parser, COMMANDS, READS_RUNS)
    add_config_options(parsers["train"])
    add_campaign_options(parsers["campaign"], None, "every algorithm", "0")
    plot = parsers["plot"]
    plot.add_argument("--out", default=None, help="image to write, .png, .pdf or .svg (default: comparison.png in "
                                                  "figures/ for runs/, in <runs-dir>/figures/ for another directory)")
    plot.add_argument("--arms", nargs="+", default=None, metavar="ARM", help="the curves drawn (default: every arm)")
    plot.add_argument("--seeds", nargs="+", type=_whole_number, default=None, metavar="SEED",
                      help="the seeds of each (default: every seed)")
    publish = parsers["publish"]
    publish.add_argument("--project", default=None, help="W&B project (default: the one each run was trained with)")
    publish.add_argument("--entity", default=None,
                         help="W&B user or team (default: the run's, else your key's default entity)")
    publish.add_argument("--mode", default="online", choices=("online", "offline"),
                         help="online (needs an API key) or offline: one complete folder per run for `wandb sync` "
                              "(default: online)")
    return parser


def train_run(options: dict[str, Any], prog: str = "python -m rlhelpers") -> int | None:
    """Train or resume the run of ``options`` (``TrainConfig`` fields) and say how it ended; after Ctrl-C, the
    command (``prog`` and this process's arguments) that resumes it, and exit status 130."""
    try:
        result = train(TrainConfig(**options))
    except KeyboardInterrupt as stopped:  # the step where train checkpointed and stopped, if it got that far
        print(f"{stopped or 'interrupted'}; to resume: `{prog} {shlex.join(sys.argv[1:])}`")
        return 130
    last = result.record.evaluations[-1]  # a run ends with an evaluation, or is reported from its evaluated history
    print(f"{result.run_dir}: stopped at step {result.num_timesteps:,} ({result.stop_reason}); last evaluation "
          f"{last.mean:.2f} at step {last.step:,}")
    return None


def _train(args: argparse.Namespace) -> int | None:
    """Train or resume one run (algo, seed).

    Train one run, or resume it from its newest checkpoint. SIGTERM or Ctrl-C saves a checkpoint and stops it (exit
    status 130 after Ctrl-C; pressed twice, it stops at once, keeping the checkpoints saved before).
    """
    return train_run(config_options(args))


def campaign_command(args: argparse.Namespace, options: dict[str, Any], runs: list[CampaignRun]) -> int:
    """Train ``runs`` with the shared ``options`` here, or submit them to SLURM with ``--cluster``: the exit status
    of ``campaign``."""
    if args.cluster:
        try:
            from rlhelpers.runner.cluster import submit_campaign
        except ImportError as exc:
            raise RLHelpersError(f"submitting to SLURM needs submitit, which is not installed ({exc}): "
                                 'pip install -e ".[cluster]"') from exc
        return submit_campaign(options, runs, args.parallel, cluster=args.cluster, partition=args.partition,
                               time_min=args.time_min, gpus=args.gpus_per_job, cpus=args.cpus_per_job,
                               max_requeues=args.max_requeues)
    try:
        return train_campaign(options, runs, args.parallel, show_progress=sys.stderr.isatty())
    except KeyboardInterrupt:  # the runs checkpointed and stopped
        return 130


def _campaign(args: argparse.Namespace) -> int:
    """Train or resume a set of runs, N at a time.

    Train or resume the runs of --arms and --seeds, seed by seed, each in its own process logging to
    <runs-dir>/<run>/train.log. Finished runs are skipped; a run that another live process trains is waited for,
    then trained if it is unfinished. Ctrl-C or SIGTERM checkpoints and stops every run.

    Exit status: 0 when every run asked for is over (finished, or stopped early above its stop return); 1 when a run
    failed or is not over (each named on stderr); 2 for bad input; 128 + N when stopped by signal N (130 after
    Ctrl-C, 143 after SIGTERM). With --cluster: 0 once the runs are submitted.
    """
    runs = campaign_runs(tuple(args.arms or ALGORITHMS), tuple(args.seeds or (0,)))
    return campaign_command(args, config_options(args), runs)


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


def plot_command(args: argparse.Namespace, plot: Callable[[str, Path], tuple[Any, list[str]]], name: str) -> None:
    """What ``plot`` does around a drawing: the file to write (``--out``, else ``name`` in the runs directory's
    ``figures_dir``) must be a .png, .pdf or .svg and the runs directory must hold a run; then ``plot(runs_dir,
    out)`` draws it and returns the figure and the runs missing, which are named."""
    from rlhelpers.plots import figures_dir

    out = Path(args.out) if args.out else figures_dir(args.runs_dir) / name
    if out.suffix.lower() not in (".png", ".pdf", ".svg"):
        raise RLHelpersError(f"--out {out}: name the plot's file .png, .pdf or .svg")
    if not run_dirs(args.runs_dir):
        raise RLHelpersError(f"no run with an {HISTORY_FILE} in {args.runs_dir}: nothing to plot; pass the --runs-dir "
                             "you trained in")
    _, missing = plot(args.runs_dir, out)
    print(f"wrote {out}" + (f"; runs not present: {', '.join(missing)}" if missing else ""))


def _plot(args: argparse.Namespace) -> None:
    """Draw the evaluation curves of the runs present.

    Draw one curve per arm, mean over its seeds, from every eval_history.json found (the runs must all be of one
    environment).
    """
    from rlhelpers.plots import plot_comparison

    plot_command(args, lambda runs_dir, out: plot_comparison(runs_dir, out, args.arms, args.seeds), "comparison.png")


# The commands, in the order --help lists them, and those that read a runs directory (--runs-dir).
COMMANDS = {"train": _train, "campaign": _campaign, "status": _status, "plot": _plot, "publish": _publish}
READS_RUNS = ("status", "plot", "publish")


def main(argv: list[str] | None = None, parser: Callable[[], argparse.ArgumentParser] = build_parser,
         commands: Mapping[str, Callable[[argparse.Namespace], int | None]] = COMMANDS) -> int:
    """Run the command of ``argv`` (of ``parser``, one of ``commands``); a package error is one line and status 2."""
    args = parser().parse_args(argv)
    try:
        return commands[args.command](args) or 0  # a command that returns nothing succeeded
    except RLHelpersError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def run(entry: Callable[[], int] = main) -> None:
    """``python -m rlhelpers``: exit with ``entry``'s code, quietly when the reader of stdout leaves early."""
    try:
        try:
            sys.exit(entry())
        finally:  # argparse's --help and errors exit from inside main; flush here, not at exit, outside the try
            sys.stdout.flush()
    except BrokenPipeError:  # the reader left early, as in `status | head -3`: no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
