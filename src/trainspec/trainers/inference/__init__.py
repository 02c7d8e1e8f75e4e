"""The `inference` command: an inference server started and supervised alone (main.py), the
server it picks (engines.py) and its [slurm] job (slurm_job.py)."""
