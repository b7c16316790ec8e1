"""rlhelpers: on-policy actor-critic agents (a2c, task1, task2) for Atari, with crash-safe runs."""

from rlhelpers.config import ALGO_DEFAULTS, ALGOS, TrainConfig
from rlhelpers.errors import RLHelpersError

__all__ = ["ALGOS", "ALGO_DEFAULTS", "RLHelpersError", "TrainConfig"]
