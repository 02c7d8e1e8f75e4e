"""`sft` with [slurm] on a real local SLURM cluster (two nodes of one CPU, cluster.py): the command
submits with sbatch; one node trains and saves; two nodes' processes meet through torchrun's
c10d rendezvous and `scancel --signal=TERM` makes them save and stop; on one node a plain scancel
makes the trainer save before it stops; a dry run submits nothing.

Every wait is polled with a generous limit (a busy 2-core machine); nothing asserts a time.
"""

from __future__ import annotations

from pathlib import Path

from cluster import LocalSlurm
from slurm_runs import (
    JOB_S,
    SFT,
    logs,
    run_command,
    saved_steps,
    steps,
    submit,
    wait_for_steps,
    write_config,
)


def test_a_dry_run_writes_the_script_for_this_cluster_and_submits_nothing(
    slurm_cluster: LocalSlurm, tmp_path
):
    config = write_config(tmp_path, SFT, {}, slurm={"project_dir": str(tmp_path)})
    result = run_command(slurm_cluster, "sft", str(config), "--dry-run")
    assert result.returncode == 0, result.stderr
    command = result.stdout.strip()
    assert command.startswith("sbatch ") and command.endswith("/sft.sbatch"), result.stdout
    script = command.removeprefix("sbatch ")
    text = Path(script).read_text()
    assert "#SBATCH --partition=debug" in text
    # sinfo says the partition's nodes have no GPU: the script asks for none
    assert "--gres" not in text and "declares no GPU" in result.stderr
    assert slurm_cluster.run(["squeue", "--noheader"]).stdout.strip() == ""


def test_a_one_node_job_trains_saves_and_reads_the_project_setup(
    slurm_cluster: LocalSlurm, tmp_path
):
    project = tmp_path / "project"
    project.mkdir()
    (project / ".env").write_text("TRAINSPEC_FROM_ENV_FILE=dotenv-value\n")
    slurm = {
        "project_dir": str(project),
        "pre_run_command": 'echo "pre-run saw $TRAINSPEC_FROM_ENV_FILE in $PWD" > pre-run.txt',
    }
    # clean = true empties the run directory when the job is submitted, not in the job (which
    # would delete its own script and log); identity.json marks it as an earlier run's
    stale = tmp_path / "out" / "one" / "stale.txt"
    stale.parent.mkdir(parents=True)
    stale.write_text("an earlier run's\n")
    (stale.parent / "identity.json").write_text('{"kind": "sft"}')
    changes = {"run": {"name": "one"}, "clean": True}
    job = submit(slurm_cluster, "sft", write_config(tmp_path, SFT, changes, slurm))
    assert job.run_dir == stale.parent and not stale.exists()
    assert f"clean = true: emptied {job.run_dir}" in job.stderr
    assert f"job log {job.run_dir}/job_{job.id}.log" in job.stdout
    assert f"sft: to stop it after a save: scancel {job.id}\n" in job.stdout
    result = slurm_cluster.wait(job.id, JOB_S)
    assert result.ok, result.diagnosis + logs(job.run_dir)
    assert len(result.nodes) == 1 and result.stdout == job.run_dir / f"job_{job.id}.log"
    assert steps(job.run_dir) == [1, 2, 3]
    assert (job.run_dir / "checkpoints" / "step_3").is_dir()
    latest = job.run_dir / "logs" / "latest"
    assert latest.resolve() == job.run_dir / "logs" / "attempt_0"
    assert "done after step 3" in (latest / "trainer.log").read_text()
    assert "sft exited with code 0" in result.stdout.read_text()
    # .env read and pre_run_command run, in project_dir, before the run
    assert (project / "pre-run.txt").read_text() == f"pre-run saw dotenv-value in {project}\n"


def test_a_run_name_that_would_run_commands_unquoted_is_one_word_of_the_job(
    slurm_cluster: LocalSlurm, tmp_path
):
    """run.name holds no whitespace or quote (validation refuses them: the `#SBATCH --output=`
    line cannot be quoted) but may hold `$( )` and backquotes: in the script they are one word,
    and on the cluster the job trains in a directory of exactly that name and runs nothing
    else."""
    name = "r$(touch${IFS}pwned)`touch${IFS}pwned`x"  # in the job's directory, project_dir
    config = write_config(tmp_path, SFT, {"run": {"name": name}}, {"project_dir": str(tmp_path)})
    job = submit(slurm_cluster, "sft", config)
    assert job.run_dir == tmp_path / "out" / name
    result = slurm_cluster.wait(job.id, JOB_S)
    assert result.ok, result.diagnosis + logs(job.run_dir)
    assert steps(job.run_dir) == [1, 2, 3]
    assert not list(tmp_path.rglob("pwned"))


def test_a_two_node_job_meets_through_the_c10d_rendezvous_and_stops_on_scancel_signal_term(
    slurm_cluster: LocalSlurm, tmp_path
):
    """The nodes' processes run as srun's tasks, which a plain scancel kills (srun turns its
    own SIGTERM into their SIGKILL, test_cluster.py): `scancel --signal=TERM` signals the tasks
    alone, and every node finishes its step, saves and stops; the job then COMPLETES."""
    endless = {"max_steps": 100000, "ckpt": {"interval": "None"}}
    two_nodes = {"deployment": {"type": "multi_node", "num_train_nodes": 2, "gpus_per_node": 1}}
    config = write_config(tmp_path, SFT, {**endless, **two_nodes}, {"project_dir": str(tmp_path)})
    job = submit(slurm_cluster, "sft", config)
    assert f"sft: to stop it after a save: scancel --signal=TERM {job.id}\n" in job.stdout
    wait_for_steps(slurm_cluster, job, 2)
    slurm_cluster.cancel(job.id, signal="TERM")
    result = slurm_cluster.wait(job.id, JOB_S)
    assert result.ok, result.diagnosis + logs(job.run_dir)
    assert result.nodes == ["n1", "n2"]
    job_log = result.stdout.read_text()
    assert "rendezvous at 127.0.0.1:" in job_log  # n1's NodeAddr
    trained = steps(job.run_dir)
    assert trained == list(range(1, len(trained) + 1)) and len(trained) >= 2
    assert saved_steps(job.run_dir) == [trained[-1]], logs(job.run_dir)
    node_logs = [
        (job.run_dir / "logs" / "latest" / "trainer" / f"node_{n}.log").read_text() for n in (0, 1)
    ]
    # The rendezvous gives out the global ranks: rank 0 (which writes the run's files and the
    # closing line) ran on one node, rank 1 (its log lines marked so) on the other.
    closing = f"checkpoints/step_{trained[-1]}"
    rank0 = [n for n, text in enumerate(node_logs) if closing in text and "[rank 1]" not in text]
    rank1 = [n for n, text in enumerate(node_logs) if "[rank 1]" in text]
    assert len(rank0) == 1 and len(rank1) == 1 and rank0 != rank1, logs(job.run_dir)


def test_scancel_makes_the_trainer_save_before_it_stops(slurm_cluster: LocalSlurm, tmp_path):
    endless = {"max_steps": 100000, "ckpt": {"interval": "None"}}
    job = submit(
        slurm_cluster, "sft", write_config(tmp_path, SFT, endless, {"project_dir": str(tmp_path)})
    )
    wait_for_steps(slurm_cluster, job, 2)
    slurm_cluster.cancel(job.id)  # SIGTERM to every process of the job; SIGKILL 30 s later
    result = slurm_cluster.wait(job.id, JOB_S)
    assert result.state == "CANCELLED", result.diagnosis
    saved = saved_steps(job.run_dir)
    trained = steps(job.run_dir)
    assert saved == [trained[-1]] and 2 <= saved[0] < 100000, (saved, logs(job.run_dir))
    assert "stop requested" in (job.run_dir / "logs" / "latest" / "trainer.log").read_text()
    # the batch script outlived the signal and waited for sft (had it ended first, SLURM would
    # have killed sft mid-save): it says how sft ended
    job_log = result.stdout.read_text()
    assert "SIGTERM: waiting for the run to save and stop" in job_log
    assert "job: sft exited with code 0" in job_log, job_log
