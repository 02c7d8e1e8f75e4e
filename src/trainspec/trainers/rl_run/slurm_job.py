"""`rl` with [slurm]: the job that runs this config on the partition's nodes, submitted
through slurm/submit.py. One node runs `rl` itself; several run the trainer under torchrun's
agent on the trainer nodes, the orchestrator on one node and vLLM on the inference nodes.

    code = submit_rl(config)    # submits, or with dry_run writes <run>/rl.sbatch
"""

from __future__ import annotations

import shlex
from pathlib import Path

from trainspec.config import dump_json

from ..errors import SetupError, SetupErrors
from ..slurm import submit
from ..slurm.submit import Job, cannot, finish, job_config, project_dir
from ..wire.broadcast import stale_dirs
from .inference_plan import served, vllm_plan
from .refusals import check_launch, clean_refusals


def rl_job(config, gpus: bool | None) -> Job:

    slurm = config.slurm
    dep = config.deployment
    run_dir = (project_dir(slurm) / config.trainer.output_dir).resolve()
    nodes_have_gpus = gpus is not False
    where = f"the nodes of partition {slurm.partition!r}"
    refusals: list[SetupError] = []
    try:
        check_launch(config, gpus=nodes_have_gpus, where=where)
    except SetupErrors as err:
        refusals += err.errors
    except SetupError as err:
        refusals.append(err)
    refusals += clean_refusals(config, run_dir)
    notes = []
    if config.inference is not None and not nodes_have_gpus:
        notes.append(
            f"[inference] asks for a vLLM server; {where} declare no GPU, so the orchestrator "
            "samples in process instead"
        )
    if dep.type == "single_node":
        config_path = run_dir / "configs" / "rl.json"
        return Job(
            kind="rl",
            run_dir=run_dir,
            bundled="single_node_rl.sbatch.j2",
            nodes=1,
            gpus_per_node=dep.gpus_per_node,
            context={"config": str(config_path)},
            configs={config_path: job_config(config)},
            logs=["rl.log"],
            refusals=refusals,
            notes=notes,
        )
    return rl_multi_node_job(config, run_dir, nodes_have_gpus, refusals, notes)


def rl_multi_node_job(
    config, run_dir: Path, gpus: bool, refusals: list[SetupError], notes: list[str]
) -> Job:

    dep = config.deployment
    infer_nodes = dep.num_infer_nodes * dep.num_infer_replicas
    if infer_nodes > 1:
        refusals.append(
            SetupError(
                "deployment.num_infer_nodes",
                f"x num_infer_replicas = {infer_nodes} inference nodes: several engines need a "
                "router in front of them, which this build does not start",
                "use num_infer_nodes = 1 and num_infer_replicas = 1 (one engine on the GPUs of "
                "one node)",
            )
        )
    inference = None
    configs_env: dict[Path, str] = {}  # environment files the job script sources (0600)
    if config.inference is not None and gpus:
        try:
            plan = vllm_plan(config, run_dir, on_gpu=True)  # only where the nodes have GPUs
            config = served(config, plan)
            port = config.inference.server.port
            argv, bind_node = plan.argv, config.inference.server.host is None
            if bind_node:  # the node's own address, not loopback: the orchestrator may be
                at = argv.index("--host")  # on another node (the script fills it in)
                argv = argv[:at] + argv[at + 2 :]
            env_file = run_dir / "configs" / "inference.env"  # its env_vars may be secrets
            configs_env[env_file] = exports(plan.env)
            inference = {"argv": argv, "env_file": str(env_file), "port": port,
                         "bind_node": bind_node}  # fmt: skip
            notes += [f"[inference]: {note}" for note in plan.notes]
        except SetupErrors as err:
            refusals += err.errors
        except SetupError as err:
            refusals.append(err)
    if infer_nodes == 0:
        orchestrator_node, orchestrator_where = None, ""
    elif dep.orchestrator_on_inference:
        orchestrator_node, orchestrator_where = infer_nodes - 1, "the last inference node"
    else:
        orchestrator_node, orchestrator_where = infer_nodes, "the first trainer node"
    paths = {side: run_dir / f"rl-{side}.json" for side in ("trainer", "orchestrator")}
    configs = {path: dump_json(getattr(config, side)) + "\n" for side, path in paths.items()}
    if orchestrator_node is None:
        del configs[paths["orchestrator"]]
    env_file = run_dir / "configs" / "job.env"  # the run's env_vars: the script holds no value
    if config.env_vars:
        configs_env[env_file] = exports(config.env_vars)
    configs |= configs_env
    logs = [f"trainer/node_<r>.log (nodes {infer_nodes}..{infer_nodes + dep.num_train_nodes - 1})"]
    if orchestrator_node is not None:
        logs.append(f"orchestrator.log (node {orchestrator_node})")
    if inference is not None:
        logs.append("inference/node_<r>.log")
    clean = [str(path) for path in stale_dirs(run_dir)] if config.clean else []
    return Job(
        kind="rl",
        run_dir=run_dir,
        bundled="multi_node_rl.sbatch.j2",
        nodes=infer_nodes + dep.num_train_nodes,
        gpus_per_node=dep.gpus_per_node,
        context={
            "num_infer_nodes": infer_nodes,
            "num_train_nodes": dep.num_train_nodes,
            "procs_per_node": dep.gpus_per_node,
            "orchestrator_node": orchestrator_node,
            "orchestrator_where": orchestrator_where,
            "trainer_config": str(paths["trainer"]),
            "orchestrator_config": str(paths["orchestrator"]),
            "zmq": config.trainer.rollout_transport.type == "zmq",
            "inference": inference,
            "no_inference_why": (
                "no [inference]"
                if config.inference is None
                else "no GPU"
                if not gpus
                else "its [inference] settings were refused"
            ),
            "env_file": str(env_file) if config.env_vars else None,
            "clean": clean,
        },
        configs=configs,
        logs=logs,
        refusals=refusals,
        notes=notes,
    )


def submit_rl(config) -> int:
    """`rl` with [slurm]: submit (or with dry_run, write) the job; the exit code."""
    gpus = submit.partition_gpus(config.slurm.partition)
    try:
        job = rl_job(config, gpus)
    except (SetupError, SetupErrors) as err:
        return cannot(config, "rl", err)
    return finish(config, job, gpus)


def exports(env: dict[str, str]) -> str:
    """`env` as lines of a file the job script sources: one quoted `export NAME=value` each."""
    return "".join(f"export {shlex.quote(f'{name}={value}')}\n" for name, value in env.items())
