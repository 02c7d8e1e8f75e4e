"""SLURM for `sft` and `rl` ([slurm]): submit.py renders the job script and submits it; job.py
is what the job runs; templates/ holds the bundled sbatch templates. No torch is imported here."""
