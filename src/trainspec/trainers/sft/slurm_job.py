"""`sft` with [slurm]: the job that trains this config on the partition's nodes (one, or
several under torchrun's agent), submitted through slurm/submit.py.

    code = submit_sft(config)    # submits, or with dry_run writes <run>/sft.sbatch
"""

from __future__ import annotations

from ..errors import SetupError, SetupErrors
from ..run.run_dir import refuse_unmarked
from ..slurm import submit
from ..slurm.submit import (
    Job,
    cannot,
    empty_run_dir,
    finish,
    job_config,
    project_dir,
)
from .deployment import processes


def sft_job(config) -> Job:

    run_dir = (project_dir(config.slurm) / config.output_dir / config.run.dir).resolve()
    nodes, per_node = processes(config.deployment)
    multi = config.deployment.type == "multi_node"
    config_path = run_dir / "configs" / "sft.json"
    # clean = true empties the run directory at submission (below): the job must not empty it
    # again, taking this script and its own logs with it.
    configs = {config_path: job_config(config, clean=False)}
    job = Job(
        kind="sft",
        run_dir=run_dir,
        bundled="multi_node_sft.sbatch.j2" if multi else "single_node_sft.sbatch.j2",
        nodes=nodes,
        gpus_per_node=config.deployment.gpus_per_node,
        context={"config": str(config_path), "procs_per_node": per_node},
        configs=configs,
        logs=[f"trainer/node_<r>.log (node r of {nodes})"] if multi else ["trainer.log"],
    )
    if config.clean:  # refused before anything is written, on a dry run too
        try:
            refuse_unmarked(run_dir)
        except SetupError as err:
            job.refusals.append(err)
    if multi and config.deployment.num_infer_nodes:
        job.notes.append(
            f"deployment.num_infer_nodes = {config.deployment.num_infer_nodes} reserves nodes "
            "for an inference server, which sft starts none of: the job asks for the "
            f"{nodes} trainer node(s)"
        )
    return job


def submit_sft(config) -> int:
    """`sft` with [slurm]: submit (or with dry_run, write) the job; the exit code."""
    gpus = submit.partition_gpus(config.slurm.partition)
    try:
        job = sft_job(config)
    except (SetupError, SetupErrors) as err:
        return cannot(config, "sft", err)
    clean = config.clean and not config.dry_run
    return finish(config, job, gpus, before_submit=(lambda: empty_run_dir(job)) if clean else None)
