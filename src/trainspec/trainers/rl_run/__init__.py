"""The `rl` command: orchestrator and RL trainer from one config, as two processes."""
