"""What every trainer is made of: the process group, the model and its head, parallelism, the
optimizer, the schedule and the tokenizer, each built from its own sub-config."""
