"""Checkpoints: the ferry file format, atomic I/O, verification and the training-run Checkpointer."""
