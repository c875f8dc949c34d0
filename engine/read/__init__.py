"""The read side: the read model's types, the fold, the checkpoint, one load, and the derived states every view asks."""
