"""The `rl` command: orchestrator and RL trainer from one config, as two processes.

main.py          start both (and vLLM with [inference]), watch them, stop them
child.py         one side, started by main.py with its resolved sub-config
refusals.py      what `rl` refuses at start, and what it does instead
slurm_job.py     the job `rl` submits with [slurm]
summary.py       the closing summary
"""
