"""Command line: ``python -m rlhelpers train ...`` and ``python -m rlhelpers plot ...``."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from rlhelpers.config import ENV_DEPENDENT_FIELDS, TrainConfig
from rlhelpers.errors import RLHelpersError

_TYPES = {"int": int, "float": float, "str": str}


def _option_type(annotation: str):  # noqa: ANN202
    """argparse type of a TrainConfig field annotation such as ``int`` or ``float | None``."""
    return _TYPES[annotation.split("|")[0].strip()]


def _add_config_options(parser: argparse.ArgumentParser) -> None:
    hints = {f.name: f.type for f in dataclasses.fields(TrainConfig)}
    for f in dataclasses.fields(TrainConfig):
        default = f.default
        default_text = "set by algo and env" if f.name in ENV_DEPENDENT_FIELDS else default
        parser.add_argument(
            f"--{f.name.replace('_', '-')}",
            dest=f.name,
            type=_option_type(str(hints[f.name])),
            default=default,
            help=f"{f.metadata['help']} (default: {default_text})",
        )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rlhelpers",
                                     description="Train and compare actor-critic agents.")
    commands = parser.add_subparsers(dest="command", required=True)
    train_parser = commands.add_parser("train", help="train or resume one run (algo, seed)",
                                       description="Train one run, or resume it from its newest checkpoint.")
    _add_config_options(train_parser)
    plot_parser = commands.add_parser("plot", help="draw the comparison plot from the runs present",
                                      description="Draw the comparison plot from every eval_history.json found.")
    plot_parser.add_argument("--runs-dir", default="runs", help="directory holding the run directories (default: runs)")
    plot_parser.add_argument("--out", default="figures/comparison.png",
                             help="PNG to write (default: figures/comparison.png)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "train":
            from rlhelpers.trainer import mean_return, train

            values = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig)}
            result = train(TrainConfig(**values))
            summary = ""
            if result.eval_history:
                last = result.eval_history[-1]
                summary = f"; last evaluation {mean_return(last):.2f} at step {last['step']:,}"
            print(f"{result.run_dir}: stopped at step {result.num_timesteps:,} ({result.stop_reason}){summary}")
        else:
            from rlhelpers.plotting import plot_comparison

            _, missing = plot_comparison(args.runs_dir, args.out)
            print(f"wrote {args.out}" + (f"; runs not present: {', '.join(missing)}" if missing else ""))
    except RLHelpersError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
