"""The study's command line, the helper's ``train`` and ``campaign`` with the study's variants and experiments,
and its own ``plot``, ``evaluate`` and ``analyze``: ``python -m allaction train | campaign | plot | evaluate |
analyze``. ``status`` and ``publish`` are the helper's (``python -m rlhelpers``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from allaction.experiment import ANALYSIS_JSON, ARMS, COMPARISON_PNG, EXPERIMENTS, VARIANTS, study_runs, variant_options
from rlhelpers import cli
from rlhelpers.core.errors import RLHelpersError
from rlhelpers.runner.config import TrainConfig

PROG = "python -m allaction"


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command of ``COMMANDS``: the helper's options, and the study's."""
    parser = argparse.ArgumentParser(prog=PROG, description="Train and analyse the runs of the all-action study.")
    parsers = cli.add_commands(parser, COMMANDS, READS_RUNS)
    cli.add_config_options(parsers["train"], skip=("variant",))
    parsers["train"].add_argument("--variant", choices=VARIANTS, default="", help="a named change of the "
                                  "algorithm's hyperparameters, added to the run name: " + ", ".join(
                                      f"{name} ({', '.join(f'{k} {v:g}' for k, v in values.items())})"
                                      for name, values in VARIANTS.items()) + " (default: none)")
    campaign = parsers["campaign"]
    campaign.add_argument("--experiment", choices=EXPERIMENTS, default="pong",
                          help="the report's experiment whose runs and run settings to train, the options below "
                               "changing them (docs/experiment.md; default: pong)")
    cli.add_campaign_options(campaign, ARMS, "the experiment's", "the experiment's")
    for name, written, default in (("plot", "image to write, .png, .pdf or .svg", COMPARISON_PNG),
                                   ("analyze", "JSON to write", ANALYSIS_JSON)):
        parsers[name].add_argument("--out", default=None,
                                   help=f"{written} (default: {default} in figures/ for the committed runs/, in "
                                        "<runs-dir>/figures/ for another runs directory)")
    evaluate = parsers["evaluate"]
    evaluate.add_argument("run_dir", help="a run directory, e.g. runs/a2c_seed-0")
    cli.add_whole_number(evaluate, "--episodes", TrainConfig.n_eval_episodes, "complete episodes to play")
    cli.add_whole_number(evaluate, "--seed", 0, "replay seed")
    evaluate.add_argument("--greedy", action="store_true",
                          help="play the most likely action, not a sampled one (saved to policy_rescore_greedy.json)")
    evaluate.add_argument("--export", action="store_true", help="first write policy.pt from the run's newest snapshot")
    evaluate.add_argument("--video", default=None, help="also record one episode as an animated GIF here")
    cli.add_whole_number(evaluate, "--video-scale", 2, "GIF pixels per observation pixel, of 84x84 observations")
    analyze = parsers["analyze"]
    cli.add_whole_number(analyze, "--rollouts", 4,
                         "rollouts of n_envs x n_steps states per snapshot, on Pong 4 x 16 x 5 = 320 states")
    cli.add_whole_number(analyze, "--stages", 4,
                         "snapshots per run: stages-1 steps that every run has, spread evenly, and the run's last")
    return parser


def _train(args: argparse.Namespace) -> int | None:
    """Train or resume one run (algo, seed), of a variant or not.

    The helper's ``train``, with --variant naming one of the study's changes of hyperparameters: its values are
    the run's, and an option that contradicts them is refused. SIGTERM or Ctrl-C saves a checkpoint and stops it
    (exit status 130 after Ctrl-C).
    """
    options = cli.config_options(args)
    return cli.train_run(variant_options(options.get("algo", "a2c"), args.variant, options), PROG)


def _campaign(args: argparse.Namespace) -> int:
    """Train or resume all runs of one of the report's experiments, N at a time.

    Train or resume the runs of the experiment (its arms and seeds: docs/experiment.md), or of --arms and --seeds,
    with its game and run settings, seed by seed, each in its own process logging to <runs-dir>/<run>/train.log.
    Finished runs are skipped; a run that another live process trains is waited for, then trained if it is
    unfinished. Ctrl-C or SIGTERM checkpoints and stops every run.

    Exit status: 0 when every run asked for is over (finished, or stopped early above its stop return); 1 when a run
    failed or is not over (each named on stderr); 2 for bad input; 128 + N when stopped by signal N (130 after
    Ctrl-C, 143 after SIGTERM). With --cluster: 0 once the runs are submitted.
    """
    experiment = EXPERIMENTS[args.experiment]
    options = {**experiment.options(), **cli.config_options(args)}
    runs = study_runs(tuple(args.arms or experiment.arms), tuple(args.seeds or experiment.seeds), options)
    return cli.campaign_command(args, options, runs)


def _plot(args: argparse.Namespace) -> None:
    """Draw the report's comparison plot from the runs present.

    Draw the comparison plot of the report's experiment on the runs' game (its arms and seeds) from every
    eval_history.json found (the runs must all be of one environment).
    """
    from allaction.figures import plot_experiment

    cli.plot_command(args, plot_experiment, COMPARISON_PNG)


def _evaluate(args: argparse.Namespace) -> None:
    """Re-score a run's committed policy (policy.pt); optionally record a GIF of one episode.

    Play complete episodes with RUN_DIR/policy.pt (float16 weights) on fresh seeds and print the mean return ± s.e.
    beside the run's last evaluation; the result is saved to RUN_DIR/policy_rescore.json (with --greedy,
    policy_rescore_greedy.json), which the report shows.
    """
    from allaction.playback import evaluate_policy_file, export_policy, record_video, rescore_path, save_rescore

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
    from allaction.analysis import write_analysis

    if args.rollouts < 1 or args.stages < 1:
        raise RLHelpersError("--rollouts and --stages must be positive integers")
    out, results = write_analysis(args.runs_dir, args.out, args.rollouts, args.stages, show_progress=True)
    print(f"wrote {out}: {len(results['snapshots'])} snapshots")


# The commands, in the order --help lists them, and those that read a runs directory (--runs-dir).
COMMANDS = {"train": _train, "campaign": _campaign, "plot": _plot, "evaluate": _evaluate, "analyze": _analyze}
READS_RUNS = ("plot", "analyze")


def main(argv: list[str] | None = None) -> int:
    """The study's command of ``argv``: its exit status."""
    return cli.main(argv, build_parser, COMMANDS)
