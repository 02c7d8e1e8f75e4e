"""`rl` with [slurm] on a real local SLURM cluster (two nodes of one CPU, cluster.py): the command
submits with sbatch; on one node `rl` runs both processes; on two nodes the trainer trains on one
and the orchestrator samples on the other (no GPU: in process), weights and batches crossing
through the run directory, until `scancel --signal=TERM` stops both after a save; a process that
fails ends the job, the other node's waiting trainer included.

Every wait is polled with a generous limit (a busy 2-core machine); nothing asserts a time.
"""

from __future__ import annotations

import stat

from cluster import LocalSlurm
from slurm_runs import (
    JOB_S,
    RL,
    RL_TWO_NODES,
    logs,
    records,
    steps,
    submit,
    wait_for_steps,
    write_config,
)


def test_a_one_node_job_runs_rl_there(slurm_cluster: LocalSlurm, tmp_path):
    job = submit(
        slurm_cluster, "rl", write_config(tmp_path, RL, {}, {"project_dir": str(tmp_path)})
    )
    result = slurm_cluster.wait(job.id, JOB_S)
    assert result.ok, result.diagnosis + logs(job.run_dir)
    assert len(result.nodes) == 1
    assert steps(job.run_dir) == [1, 2, 3]
    assert records(job.run_dir / "orchestrator" / "metrics.jsonl")
    assert (job.run_dir / "checkpoints" / "step_3").is_dir()
    assert "rl: done after step 3" in (job.run_dir / "logs" / "latest" / "rl.log").read_text()
    # the job ran the config rl wrote, without [slurm]: it trained instead of submitting again
    assert '"slurm": null' in (job.run_dir / "configs" / "rl.json").read_text()


def test_a_two_node_job_trains_on_one_node_samples_on_the_other_and_stops_on_scancel(
    slurm_cluster: LocalSlurm, tmp_path
):
    """`scancel --signal=TERM` (the processes are srun's tasks, test_cluster.py): the trainer
    finishes its step and saves, the orchestrator stops, and the job COMPLETES. An env value
    that would run commands if the script held it unquoted runs none."""
    pwned = tmp_path / "pwned"
    two_nodes = {
        "deployment": RL_TWO_NODES,
        "inference": {},
        "max_steps": 100000,
        "env_vars": {"TRAINSPEC_QUOTED": f"$(touch${{IFS}}{pwned})`touch${{IFS}}{pwned}`'\" x"},
    }
    job = submit(
        slurm_cluster, "rl", write_config(tmp_path, RL, two_nodes, {"project_dir": str(tmp_path)})
    )
    assert "the orchestrator samples in process" in job.stderr  # no GPU in the partition
    assert f"rl: to stop it after a save: scancel --signal=TERM {job.id}\n" in job.stdout
    wait_for_steps(slurm_cluster, job, 2)
    slurm_cluster.cancel(job.id, signal="TERM")
    result = slurm_cluster.wait(job.id, JOB_S)
    assert result.ok, result.diagnosis + logs(job.run_dir)
    assert result.nodes == ["n1", "n2"]
    job_log = result.stdout.read_text()
    # each line written by the node's own task, naming the node SLURM ran it on
    assert "node 0 (n1): orchestrator started" in job_log, job_log
    assert "node 1 (n2): trainer started" in job_log, job_log
    assert "node 0: orchestrator exited with code 0" in job_log
    assert "node 1: trainer exited with code 0" in job_log
    latest = job.run_dir / "logs" / "latest"
    assert (latest / "trainer" / "node_1.log").is_file() and (latest / "orchestrator.log").is_file()
    trained = steps(job.run_dir)
    assert trained == list(range(1, len(trained) + 1)) and len(trained) >= 2
    assert records(job.run_dir / "orchestrator" / "metrics.jsonl")
    assert (job.run_dir / "checkpoints" / f"step_{trained[-1]}").is_dir(), logs(job.run_dir)
    assert "stop requested" in (latest / "trainer" / "node_1.log").read_text()
    env_file = job.run_dir / "configs" / "job.env"  # what the script sources: its owner's alone
    assert f"export 'TRAINSPEC_QUOTED=$(touch${{IFS}}{pwned})" in env_file.read_text()
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert not pwned.exists()  # the script ran, and the value was one word of it


def test_a_failing_process_fails_the_job_and_stops_the_other_node(
    slurm_cluster: LocalSlurm, tmp_path
):
    """The orchestrator refuses a setting at its start and exits 1; the trainer on the other
    node, which would wait for batches forever, is stopped by srun --kill-on-bad-exit."""
    failing = {
        "deployment": RL_TWO_NODES,
        "inference": {},
        "orchestrator": {"tasks_per_minute": 10},  # refused by the orchestrator at start
    }
    slurm = {"project_dir": str(tmp_path), "cleanup_grace_period": 5}
    job = submit(slurm_cluster, "rl", write_config(tmp_path, RL, failing, slurm))
    result = slurm_cluster.wait(job.id, JOB_S)
    assert result.state == "FAILED" and result.exit_code != 0, result.diagnosis
    orchestrator_log = (job.run_dir / "logs" / "latest" / "orchestrator.log").read_text()
    assert "orchestrator.tasks_per_minute: error" in orchestrator_log
    job_log = result.stdout.read_text()
    assert "node 0: orchestrator exited with code 1" in job_log, job_log
    assert "node 1: trainer exited" in job_log, job_log  # stopped, not left waiting
    assert steps(job.run_dir) == []


def test_an_env_name_past_validation_runs_no_command_in_the_job(
    slurm_cluster: LocalSlurm, tmp_path
):
    """Validation refuses an env name that is no shell name (tests/validators); past it (a
    config changed in code), the job the cluster runs still executes nothing the name holds.
    Before the fix the script's `export A; touch ...; B='1'` ran the `touch`."""
    from trainspec.config import load
    from trainspec.trainers.rl_run.slurm_job import rl_job
    from trainspec.trainers.slurm.submit import job_script, write_files

    pwned = tmp_path / "pwned"
    changes = {"deployment": RL_TWO_NODES, "inference": {}, "max_steps": 1}
    config = write_config(tmp_path, RL, changes, {"project_dir": str(tmp_path)})
    resolved = load("rl_run", [config]).config
    resolved.env_vars[f"A; touch {pwned}; B"] = "1"
    job = rl_job(resolved, False)
    script, text = job_script(resolved, job, False)
    write_files(job, script, text)
    result = slurm_cluster.wait(slurm_cluster.submit(script), JOB_S)
    assert result.stdout.exists(), result.diagnosis  # the job ran its script
    assert not pwned.exists(), result.stdout.read_text()
