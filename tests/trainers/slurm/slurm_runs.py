"""Tiny `sft` and `rl` configs with [slurm], submitted through the commands themselves (`sft
run.toml` runs sbatch) to a local cluster (cluster.py), and what their runs leave behind.

    path = write_config(tmp_path, SFT, {"max_steps": 3}, slurm={"project_dir": ...})
    job = submit(cluster, "sft", path)          # the job id the command printed
    result = cluster.wait(job.id, JOB_S)
    steps(job.run_dir)                          # [1, 2, 3]
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import tomlkit
from helpers.ports import free_port

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[3]
JOB_S = 420.0  # a tiny job submitted, scheduled, run and ended on a busy 2-core machine
COMMAND_S = 300.0

# The built-in model cut to one layer, nothing compiled; the reverse-text task's small split.
SFT = {
    "max_steps": 3,
    "model": {
        "name": "builtin:tiny-qwen3",
        "seq_len": 64,
        "compile": "None",
        "ac": "None",
        "ac_offloading": "None",
        "debug": {"num_layers": 1},
    },
    "data": {
        "name": "builtin:reverse-text",
        "splits": ["test"],
        "batch_size": 4,
        "micro_batch_size": 2,
        "seq_len": 64,
    },
    "ckpt": {"interval": 3},
    "deployment": {"gpus_per_node": 1, "num_train_gpus": 1, "num_infer_gpus": 0},
}
# The orchestrator samples the built-in task in process; batches and weights cross as files.
RL = {
    "max_steps": 3,
    "seq_len": 64,
    "model": {"name": "builtin:tiny-qwen3"},
    "trainer": {
        "model": {
            "compile": "None",
            "ac": "None",
            "ac_offloading": "None",
            "debug": {"num_layers": 1},
        },
        "ckpt": {"interval": 3},
    },
    "orchestrator": {
        "batch_size": 16,
        "group_size": 4,
        "max_async_level": 0,
        "seed": 1,
        "train": {
            "sampling": {"max_completion_tokens": 8},
            "source": [{"env": {"taskset": {"id": "builtin:reverse-text"}}}],
        },
    },
    "rollout_transport": {"type": "filesystem"},
    "deployment": {"gpus_per_node": 1, "num_infer_gpus": 0},
}
# Two nodes: inference (here: none, no GPU) and the orchestrator on n1, the trainer on n2.
RL_TWO_NODES = {
    "type": "multi_node",
    "gpus_per_node": 1,
    "num_train_nodes": 1,
    "num_infer_nodes": 1,
    "orchestrator_on_inference": True,
}


def merged(base: dict, changes: dict) -> dict:
    """`base` with `changes` written over it, table by table."""
    result = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merged(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def write_config(directory: Path, base: dict, changes: dict, slurm: dict) -> Path:
    """run.toml in `directory`: the config, its run under directory/out, [slurm] on the local
    cluster's partition."""
    document = merged(base, changes)
    if "deployment" in changes:  # a deployment of another type has other keys: replaced whole
        document["deployment"] = copy.deepcopy(changes["deployment"])
    document.setdefault("output_dir", str(directory / "out"))
    document["slurm"] = {"job_name": directory.name[:20], "partition": "debug", **slurm}
    path = directory / "run.toml"
    path.write_text(tomlkit.dumps(document))
    return path


@dataclass
class Submitted:
    id: int
    run_dir: Path
    stdout: str
    stderr: str
    script: Path  # the job script sbatch was given


def run_command(cluster, command: str, *args: str) -> subprocess.CompletedProcess:
    """`sft` / `rl` against the local cluster: its SLURM_CONF, a rendezvous port of its own
    (every node shares this machine's network), one thread per process."""
    env = {**cluster.environ(), "MASTER_PORT": str(free_port()), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [str(BIN / command), *args], env=env, capture_output=True, text=True, timeout=COMMAND_S
    )


def submit(cluster, command: str, config: Path) -> Submitted:
    result = run_command(cluster, command, str(config))
    assert result.returncode == 0, result.stdout + result.stderr
    found = re.search(r"submitted job (\d+) \(sbatch (\S+)\)", result.stdout)
    assert found, result.stdout + result.stderr
    script = Path(found.group(2))
    return Submitted(int(found.group(1)), script.parent, result.stdout, result.stderr, script)


def records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def steps(run_dir: Path) -> list[int]:
    return [record["step"] for record in records(run_dir / "metrics.jsonl")]


def saved_steps(run_dir: Path) -> list[int]:
    found = (run_dir / "checkpoints").glob("step_*")
    return sorted(int(path.name.removeprefix("step_")) for path in found)


def wait_for_steps(cluster, job: Submitted, count: int) -> None:
    """Until the job's run has logged `count` steps (it must still be queued or running)."""
    deadline = time.monotonic() + JOB_S
    while len(steps(job.run_dir)) < count:
        state = cluster.job(job.id)["JobState"]
        assert state in ("PENDING", "CONFIGURING", "RUNNING"), logs(job.run_dir)
        assert time.monotonic() < deadline, "no step trained\n" + logs(job.run_dir)
        time.sleep(0.5)


def logs(run_dir: Path) -> str:
    """Every log of the run's latest attempt, for an assertion's message."""
    parts = []
    for path in sorted((run_dir / "logs" / "latest").rglob("*.log")):
        parts.append(f"--- {path}:\n{path.read_text(errors='replace')[-3000:]}")
    return "\n".join(parts)
