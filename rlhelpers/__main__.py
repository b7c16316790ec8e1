"""``python -m rlhelpers``: the command line of ``rlhelpers.runner.cli``."""

from rlhelpers.runner.cli import run

run()
