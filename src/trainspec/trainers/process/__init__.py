"""Process plumbing of the trainer commands: the setup-error guard, signal flags, malloc
tuning, how a process exits."""
