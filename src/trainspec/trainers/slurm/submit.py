"""`sft` and `rl` with [slurm]: the job script, rendered into the run directory beside the
configs it runs, then `sbatch` (with --dry-run: the command that would submit it).

    sft run.toml             # submits; prints the job id and where the logs go
    sft run.toml --dry-run   # writes <run>/sft.sbatch, <run>/configs/sft.json; prints `sbatch ...`
    rl run.toml [--dry-run]  # <run>/rl.sbatch with configs/rl.json (one node), or with
                             # rl-trainer.json and rl-orchestrator.json (several nodes)

The configs the job runs are the resolved config without [slurm], so the job trains instead of
submitting again (job.py runs them). The job starts in [slurm] project_dir, so the config's
relative paths (output_dir, data files) are taken from there, here as well. Each attempt of
the job writes its processes' output under <run>/logs/attempt_N (logs/latest is the newest);
the script's own lines go to <run>/job_<id>.log. Templates: templates/{single,multi}_node_
{sft,rl}.sbatch.j2.

What the job's nodes have is asked of SLURM: a partition whose nodes declare no GPU (sinfo's
GRES) gets no --gres line and runs on CPU (multi-node rl: no vLLM, the orchestrator samples in
process). Settings the job could not honour are refused before anything is written or
submitted, on a dry run as well: it writes only what submitting would submit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainspec.config import dump_json

from ..errors import SetupError, SetupErrors
from ..run.atomic_files import write_atomic
from .refusals import slurm_refusals
from .render import Shell, check_syntax, render


@dataclass
class Job:
    kind: str  # the command: "sft" or "rl"
    run_dir: Path
    bundled: str  # the bundled template for this command and deployment
    nodes: int
    gpus_per_node: int  # the --gres line's count, on a partition with GPUs
    context: dict[str, Any]  # what this template reads besides job, python and run_dir
    configs: dict[Path, str]  # the files the job reads: path -> text
    logs: list[str]  # the processes' logs, under logs/latest/
    refusals: list[SetupError] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def say(kind: str, message: str) -> None:
    sys.stderr.write(f"{kind}: {message}\n")
    sys.stderr.flush()


def partition_gpus(partition: str) -> bool | None:
    """Whether the partition's nodes declare GPUs (sinfo's GRES column); None when SLURM cannot
    be asked from here (no sinfo, no cluster) or does not know the partition."""
    sinfo = shutil.which("sinfo")
    conf = os.environ.get("SLURM_CONF")
    if sinfo is None or (conf and not Path(conf).is_file()):  # sinfo would retry it for 60 s
        return None
    try:
        result = subprocess.run(
            [sinfo, "--noheader", f"--partition={partition}", "--format=%G"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [line.strip() for line in result.stdout.splitlines() if line.strip()]
    if result.returncode != 0 or not lines:
        return None
    return any("gpu" in line for line in lines)


def project_dir(slurm) -> Path:
    """Where the job starts; the config's relative paths (output_dir, data files, ...) are
    taken from there, on this side too."""
    return Path(slurm.project_dir).expanduser().resolve()


def job_config(config, **changes) -> str:
    """The config the job runs: this one without [slurm] (and dry_run off)."""
    return dump_json(config.model_copy(update={"slurm": None, "dry_run": False, **changes})) + "\n"


# -- sft --------------------------------------------------------------------------------------


def empty_run_dir(job: Job) -> None:
    """clean = true: the run directory emptied now, under its lock (a run still in it refuses;
    so does a directory that no identity file marks as a run's)."""
    from ..run.lock import lock_run_dir
    from ..run.run_dir import empty, refuse_unmarked

    refuse_unmarked(job.run_dir)  # before the lock, which leaves a file in the directory
    lock = lock_run_dir(job.run_dir, job.kind, setting="run.name")
    try:
        empty(job.run_dir)
    finally:
        lock.release()
    say(job.kind, f"clean = true: emptied {job.run_dir}")


# -- rl ---------------------------------------------------------------------------------------


# -- both -------------------------------------------------------------------------------------


def job_settings(slurm, job: Job, gpus: bool | None) -> dict[str, Any]:
    """What the #SBATCH header and the setup read of [slurm]."""
    return {
        "name": slurm.job_name,
        "partition": slurm.partition,
        "nodes": job.nodes,
        "gpus_per_node": job.gpus_per_node if gpus is not False else None,
        "output": str(job.run_dir / "job_%j.log"),
        "nodelist": slurm.nodelist,
        "exclude": slurm.exclude,
        "account": slurm.account,
        "time": slurm.time,
        "project_dir": str(project_dir(slurm)),
        # a shell command by design: the script runs it as written
        "pre_run_command": None if slurm.pre_run_command is None else Shell(slurm.pre_run_command),
        "cleanup_grace_period": slurm.cleanup_grace_period,
    }


def job_script(config, job: Job, gpus: bool | None) -> tuple[Path, str]:
    """The job script's path and text, rendered and checked (SetupError when it cannot be)."""
    slurm = config.slurm
    template_path = None
    if slurm.template_path is not None and Path(slurm.template_path).is_file():
        template_path = Path(slurm.template_path).resolve()
    script = job.run_dir / f"{job.kind}.sbatch"
    context = {
        **job.context,
        "kind": job.kind,
        "template": str(template_path or job.bundled),
        "script": str(script),
        "job": job_settings(slurm, job, gpus),
        "python": sys.executable,
        "run_dir": str(job.run_dir),
    }
    text = render(template_path, job.bundled, context)
    check_syntax(text, str(template_path or job.bundled))
    return script, text


def finish(config, job: Job, gpus: bool | None, before_submit=None) -> int:
    """Render and check the script; then write it and its configs, and submit it (or, on a dry
    run, say how to). Anything refused: nothing is written or submitted, dry run or not."""
    slurm = config.slurm
    kind = job.kind
    job.refusals = slurm_refusals(slurm, job.run_dir) + job.refusals
    script, text = job.run_dir / f"{kind}.sbatch", ""
    try:
        script, text = job_script(config, job, gpus)
    except SetupError as err:
        job.refusals.append(err)
    if gpus is None:
        job.notes.append(
            f"SLURM could not be asked here whether partition {slurm.partition!r} has GPUs "
            f"(sinfo): the script asks for {job.gpus_per_node} per node"
        )
    elif not gpus:
        job.notes.append(
            f"partition {slurm.partition!r} declares no GPU (sinfo): the job asks for none and "
            "runs on CPU"
        )
    for note in job.notes:
        say(kind, note)
    if job.refusals:
        return cannot(config, kind, SetupErrors(job.refusals))
    if config.dry_run:
        write_files(job, script, text)
        wrote = ", ".join(str(path) for path in [script, *job.configs])
        say(kind, f"dry run: wrote {wrote}; nothing submitted")
        print(f"sbatch {script}", flush=True)
        return 0
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        return cannot(
            config,
            kind,
            SetupError(
                "slurm",
                "is set, and there is no sbatch on PATH to submit with",
                "run on a SLURM login node, or add --dry-run to write the script only",
            ),
        )
    try:
        if before_submit is not None:
            before_submit()
    except SetupError as err:
        return cannot(config, kind, err)
    write_files(job, script, text)
    result = subprocess.run(
        [sbatch, "--parsable", str(script)], capture_output=True, text=True, timeout=300
    )
    if result.returncode != 0:
        say(kind, f"error: sbatch {script} exited with code {result.returncode}:")
        sys.stderr.write(result.stderr or result.stdout)
        say(kind, "    fix: what sbatch says above (the partition, account or nodes of [slurm])")
        return 1
    job_id = result.stdout.strip().split(";")[0]
    logs = ", ".join(job.logs)
    print(f"{kind}: submitted job {job_id} (sbatch {script})", flush=True)
    print(
        f"{kind}: job log {job.run_dir / f'job_{job_id}.log'}; the processes' logs in "
        f"{job.run_dir / 'logs' / 'latest'}/: {logs}",
        flush=True,
    )
    # On several nodes the processes are srun's tasks, which a plain scancel may kill before
    # they save (srun aborts its step): the signal goes to them alone.
    stop = f"scancel --signal=TERM {job_id}" if job.nodes > 1 else f"scancel {job_id}"
    print(f"{kind}: to stop it after a save: {stop}", flush=True)
    return 0


def write_files(job: Job, script: Path, text: str) -> None:
    """The job's configs and script, written whole and for their owner alone: they carry the
    run's env_vars and headers (the script exports them)."""
    for path, content in job.configs.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, content, private=True)
    script.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(script, text, private=True)
    script.chmod(0o700)


def cannot(config, kind: str, err: SetupError | SetupErrors) -> int:
    sys.stderr.write(f"{kind}: cannot {'write' if config.dry_run else 'submit'} the job\n")
    sys.stderr.write(err.render() + "\n")
    return 1
