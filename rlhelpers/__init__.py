"""rlhelpers: on-policy actor-critic agents (A2C and two all-action variants) for Atari, with crash-safe runs.

Three layers, one sub-package each: ``core`` (the algorithm table, the networks and the training loop;
it imports nothing from the other two), ``runner`` (a run end to end: config, checkpoints, campaign, W&B,
the command line) and ``report`` (run records, plots, gradient analysis, playback).
"""
