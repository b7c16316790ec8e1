"""The algorithm core: environments, networks, rollout storage, the losses and the algorithm table,
the optimizer, the training loop and evaluation. It imports nothing from the other two layers."""
