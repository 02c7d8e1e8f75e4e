"""`inference` with [slurm]: a one-node job that runs `inference` there (the reference's
inference.sbatch.j2), submitted through slurm/submit.py.

    code = submit_inference(config)   # submits; dry_run: writes <output_dir>/inference.sbatch

The job runs the resolved config without [slurm] (configs/inference.json in output_dir),
through `python -m trainspec.trainers.slurm.job inference`; its output goes to
logs/latest/inference.log. `scancel` stops the server as Ctrl-C does here.
"""

from __future__ import annotations

from ..errors import SetupError, SetupErrors
from ..slurm import submit
from ..slurm.submit import Job, cannot, finish, job_config, project_dir


def inference_job(config) -> Job:
    run_dir = (project_dir(config.slurm) / config.output_dir).resolve()
    config_path = run_dir / "configs" / "inference.json"
    job = Job(
        kind="inference",
        run_dir=run_dir,
        bundled="single_node_inference.sbatch.j2",
        nodes=1,
        gpus_per_node=config.deployment.gpus_per_node,
        context={"config": str(config_path)},
        configs={config_path: job_config(config)},
        logs=["inference.log"],
    )
    if config.server.host is None:
        job.notes.append(
            "server.host is unset: the server binds 127.0.0.1 on its node, which only that node "
            'reaches; set server.host = "0.0.0.0" (or the node\'s address) to serve other nodes'
        )
    if config.deployment.type != "single_node":
        job.refusals.append(
            SetupError(
                "deployment.type",
                f"= {config.deployment.type!r}: the inference job starts one engine on one node",
                'use deployment.type = "single_node"',
            )
        )
    return job


def submit_inference(config) -> int:
    """`inference` with [slurm]: submit (or with dry_run, write) the job; the exit code."""
    gpus = submit.partition_gpus(config.slurm.partition)
    try:
        job = inference_job(config)
    except (SetupError, SetupErrors) as err:
        return cannot(config, "inference", err)
    return finish(config, job, gpus)
