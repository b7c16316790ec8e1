"""rlhelpers: on-policy actor-critic agents (A2C and two all-action variants) for Atari, with crash-safe runs.

Two layers, one sub-package each: ``core`` (the algorithm table, the networks and the training loop) and ``runner``
(a run end to end: config, checkpoints, campaign, cluster, W&B); on top, ``plots`` (curves over seeds and the
evaluation-curve plot), ``notebook`` (a notebook's parameters, Colab and W&B set-up) and ``cli`` (the command line).
Every import points down: the core imports nothing of the runner. The package knows no study: a study of its own
(this repository's ``allaction``) imports it.
"""
