"""rlhelpers: on-policy actor-critic agents (A2C and two all-action variants) for Atari, with crash-safe runs.

Three layers, one sub-package each: ``core`` (the algorithm table, the networks and the training loop),
``runner`` (a run end to end: config, checkpoints, campaign, W&B) and ``report`` (plots, claims, gradient
analysis, playback); on top, ``cli`` (the command line) and ``notebook`` (the notebook's parameters, Colab and
W&B set-up). Every import points down: the core imports neither of the others, the runner nothing of the report.
"""
