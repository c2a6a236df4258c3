"""Teacher-forced training: the label-smoothed loss, one update, the loop with validation and checkpoints."""
