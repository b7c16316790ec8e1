"""The run machinery: a run's config, one run end to end with its checkpoints, lock and W&B tracking,
the campaign of several runs, publishing, Colab and the command line."""
