"""Checkpoints: the checkpointer ([ckpt]), which one to resume from ([resume]), its files on disk,
and the Hugging Face export of the weights (also what the RL trainer broadcasts)."""
