"""``python -m rlhelpers``: the command line of ``rlhelpers.cli``."""

from rlhelpers.cli import run

run()
