"""Run infrastructure: the run directory, checkpoints, metrics, the progress bar, the
learning curve, greedy evaluation and seed streams."""
