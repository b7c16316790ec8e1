"""``python -m allaction``: the study's command line (``allaction.cli``)."""

from allaction.cli import main
from rlhelpers.cli import run

run(main)
