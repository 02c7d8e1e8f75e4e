"""Process plumbing of the trainer commands: the setup-error guard, signal flags, malloc
tuning, how a process exits, torchrun's launcher in the command's process (workers.py)."""
