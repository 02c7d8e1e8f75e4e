"""What every [slurm] job shares: submit.py renders the job script and submits it, render.py
fills the Jinja templates (templates/), refusals.py refuses what a job could not honour, and
job.py is what the job runs (any command). Each command builds its own job: sft/slurm_job.py,
rl_run/slurm_job.py. No torch is imported here."""
