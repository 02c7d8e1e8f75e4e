"""The RL orchestrator: samples completions from the policy, scores them, feeds the trainer."""
