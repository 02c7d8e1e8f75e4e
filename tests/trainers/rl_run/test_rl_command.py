"""The `rl` command end to end, as real processes: a short seeded run raises the reward; a crashed
run resumes; a killed orchestrator stops the run with a clear error and a saved checkpoint;
SIGTERM stops both cleanly; a trainer that cannot start is named; validate-config knows the
combined schema."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.listeners import LOOPBACK, watch_listeners
from helpers.ports import free_port

BIN = Path(sys.executable).parent
WAIT_S = 300

TINY_RUN = """\
#:schema {schema}
max_steps = {max_steps}
seq_len = 64
output_dir = "{output_dir}"

[model]
name = "builtin:tiny-qwen3"

[trainer.model]
compile = "None"
ac = "None"
ac_offloading = "None"

[trainer.model.debug]
num_layers = 1

[trainer.optim]
lr = 3e-3

[trainer.ckpt]
interval = {ckpt_interval}

[trainer.rollout_transport]
type = "filesystem"

[orchestrator]
batch_size = 64
group_size = 8
max_async_level = 0
seed = 1

[orchestrator.train.sampling]
max_completion_tokens = 8

[[orchestrator.train.source]]
env.taskset.id = "builtin:reverse-text"

[orchestrator.rollout_transport]
type = "filesystem"
"""


def write_config(tmp_path: Path, max_steps=40, ckpt_interval=1000) -> Path:
    schema = Path(__file__).resolve().parents[3] / "generated" / "schemas" / "rl.json"
    path = tmp_path / "run.toml"
    path.write_text(
        TINY_RUN.format(
            schema=schema,
            max_steps=max_steps,
            output_dir=tmp_path / "run",
            ckpt_interval=ckpt_interval,
        )
    )
    return path


def records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_rl(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`rl ARGS...` to its end."""
    return subprocess.run(
        [str(BIN / "rl"), *args], capture_output=True, text=True, timeout=WAIT_S, cwd=cwd
    )


def start(config: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [str(BIN / "rl"), str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_steps(run_dir: Path, count: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + WAIT_S
    while len(records(run_dir / "metrics.jsonl")) < count:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the trainer made no progress"
        time.sleep(0.2)


def side_pid(run_dir: Path, side: str) -> int:
    """The process of one side of the run (`trainer` or `orchestrator`)."""
    marker = str(run_dir / f"rl-{side}.json")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker.encode() in argv and side.encode() in argv:
            return int(entry.name)
    raise AssertionError(f"no {side} process found")


def test_a_short_seeded_run_raises_the_mean_reward(tmp_path):
    result = run_rl(str(write_config(tmp_path)))
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "run"
    rewards = [r["reward"] for r in records(run_dir / "metrics.jsonl")]
    assert len(rewards) == 40
    first, last = sum(rewards[:10]) / 10, sum(rewards[-10:]) / 10
    assert last > first + 0.02, (first, last)
    assert "rl: done after step 40 in 0:" in result.stdout  # with the run's total time
    assert (run_dir / "rl.png").stat().st_size > 0
    assert records(run_dir / "orchestrator" / "metrics.jsonl")  # the orchestrator's own log
    assert "Traceback" not in result.stderr


def test_a_one_node_run_listens_on_loopback_only(tmp_path):
    """A single-node run with two trainer processes, the default rollout transport (ZeroMQ), a
    verifiers environment server the orchestrator starts (`serve = {}`) and the policy it
    serves that environment on localhost: torchrun's agent (in the trainer's process) and its
    workers, the orchestrator, the transport, the env server: nothing listens beyond loopback
    (torch's own stores bind every interface unless given a socket:
    process/loopback_rendezvous.py). The scan saw the transport's and the env server's ports
    (so it could fail), and both trainer processes train."""
    zmq_port, env_port = free_port(), free_port()
    text = write_config(tmp_path, max_steps=2).read_text()
    text = text.replace('[trainer.rollout_transport]\ntype = "filesystem"\n', "")
    text = text.replace('[orchestrator.rollout_transport]\ntype = "filesystem"\n', "")
    text = text.replace("batch_size = 64\ngroup_size = 8", "batch_size = 8\ngroup_size = 4")
    text = text.replace(
        'env.taskset.id = "builtin:reverse-text"',
        'env.taskset = { id = "trainspec-reverse-text", split = "train" }\n'
        'env.agent.harness.id = "null"\nenv.agent.runtime.type = "subprocess"\nserve = {}',
    )
    assert text.count("serve = {}") == 1 and "filesystem" not in text and "batch_size = 8" in text
    config = tmp_path / "zmq.toml"
    config.write_text(text)
    log = tmp_path / "rl.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [str(BIN / "rl"), str(config), "--deployment.num_train_gpus", "2",
             "--rollout_transport.port", str(zmq_port),
             "--orchestrator.env_server_base_port", str(env_port)],
            stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip
        seen = watch_listeners(process, WAIT_S)
    assert process.wait() == 0, log.read_text()[-3000:]
    assert all(address.startswith(LOOPBACK) for address in seen), seen
    ports = {int(address.rsplit(":", 1)[1]) for address in seen}
    assert {zmq_port, env_port} <= ports, (seen, zmq_port, env_port)
    assert len(ports) > 2  # torchrun's stores too
    assert [r["step"] for r in records(tmp_path / "run" / "metrics.jsonl")] == [1, 2]


def test_after_a_crash_the_same_command_resumes_and_sigterm_stops_it_with_a_checkpoint(tmp_path):
    """The trainer killed mid-run (no [trainer.resume] in the config): rerunning the command
    continues from its last checkpoint. The orchestrator killed then: rl says so and the
    trainer saves before it stops. A third run goes on from there, and SIGTERM stops both
    processes after a whole step, saved; every step is in the metrics once."""
    config = write_config(tmp_path, max_steps=100_000, ckpt_interval=2)
    process = start(config)
    run_dir = tmp_path / "run"
    wait_for_steps(run_dir, 3, process)
    os.kill(side_pid(run_dir, "trainer"), signal.SIGKILL)
    _, stderr = process.communicate(timeout=WAIT_S)
    assert process.returncode == 1
    assert "the trainer was killed by SIGKILL from outside (it could print nothing" in stderr
    saved = saved_steps(run_dir)
    assert saved, "no checkpoint before the kill"

    killed_at = records(run_dir / "metrics.jsonl")[-1]["step"]
    again = start(config)
    wait_past(run_dir, killed_at, again)
    os.kill(side_pid(run_dir, "orchestrator"), signal.SIGKILL)
    _, stderr = again.communicate(timeout=WAIT_S)
    assert again.returncode == 1
    assert f"resumed from {run_dir / 'checkpoints' / f'step_{saved[-1]}'}" in stderr
    assert "the orchestrator was killed by SIGKILL" in stderr
    assert "stopping the trainer, which saves a checkpoint first" in stderr
    assert "Traceback" not in stderr
    killed_at = records(run_dir / "metrics.jsonl")[-1]["step"]
    assert saved_steps(run_dir)[-1] == killed_at  # the trainer saved the step it was at

    third = start(config)
    wait_past(run_dir, killed_at, third)
    third.send_signal(signal.SIGTERM)
    stdout, stderr = third.communicate(timeout=WAIT_S)
    assert third.returncode == 0, stderr
    assert f"resumed from {run_dir / 'checkpoints' / f'step_{killed_at}'}" in stderr
    assert "rl: stopping" in stderr
    trained = records(run_dir / "metrics.jsonl")[-1]["step"]
    assert saved_steps(run_dir)[-1] == trained  # stopped after a whole step, and saved it
    assert f"rl: stopped after step {trained}" in stdout
    steps = [r["step"] for r in records(run_dir / "metrics.jsonl")]
    assert steps == list(range(1, trained + 1))
    shipped = [r["step"] for r in records(run_dir / "orchestrator" / "metrics.jsonl")]
    assert len(shipped) == len(set(shipped))


def saved_steps(run_dir: Path) -> list[int]:
    return sorted(int(p.name.split("_")[1]) for p in (run_dir / "checkpoints").glob("step_*"))


def wait_past(run_dir: Path, step: int, process: subprocess.Popen) -> None:
    """Until a relaunch has trained past `step` (the records before it are not its progress)."""
    deadline = time.monotonic() + WAIT_S
    while max((r["step"] for r in records(run_dir / "metrics.jsonl")), default=0) <= step:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the relaunch made no progress"
        time.sleep(0.2)


def test_the_demo_before_its_sft_stage_says_what_to_run(tmp_path):
    """configs/rl/demo.toml names the SFT stage's weights; before they exist, rl says which
    command writes them, starts nothing and prints no summary."""
    root = Path(__file__).resolve().parents[3]
    configs = tmp_path / "configs" / "rl"
    configs.mkdir(parents=True)
    for name in ("demo.toml", "demo-sft.toml"):
        (configs / name).write_text((root / "configs" / "rl" / name).read_text())
    result = run_rl("configs/rl/demo.toml", cwd=tmp_path)
    assert result.returncode == 1
    assert "outputs/rl-demo-sft/checkpoints/latest/weights' does not exist" in result.stderr
    assert "`sft configs/rl/demo-sft.toml`" in result.stderr
    assert "done" not in result.stdout and "Traceback" not in result.stderr
    assert not (tmp_path / "outputs").exists()


def test_a_trainer_that_cannot_start_is_named(tmp_path):
    config = write_config(tmp_path)
    result = run_rl(str(config), "--trainer.metrics-server.port", "9000")
    assert result.returncode == 1
    assert "metrics_server" in result.stderr
    assert "rl: the trainer failed with exit code 1" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_orchestrators_refusals_and_a_tasksets_typo_stop_rl_before_either_side(tmp_path):
    """What the orchestrator would refuse, and what a verifiers taskset's own class refuses of
    its table, are asked before anything starts, each at the line and column it was written."""
    config = write_config(tmp_path)
    config.write_text(
        config.read_text().replace("[orchestrator]\n", "[orchestrator]\ntasks_per_minute = 5\n", 1)
    )
    result = run_rl(str(config))
    line = next(
        n for n, text in enumerate(config.read_text().splitlines(), 1) if "tasks_per" in text
    )
    assert result.returncode == 1, result.stderr
    assert f"{config}:{line}:20: orchestrator.tasks_per_minute: error:" in result.stderr
    assert "rl-trainer" not in result.stdout + result.stderr  # the trainer never started
    (tmp_path / "typo").mkdir()
    typo = write_config(tmp_path / "typo")
    typo.write_text(
        typo.read_text()
        + '\n[[orchestrator.train.source]]\nenv.taskset = { id = "trainspec-reverse-text", '
        'split = "train", turnz = 2 }\n'
    )
    result = run_rl(str(typo))
    last = len(typo.read_text().splitlines())
    where = f"{typo}:{last}:"
    assert result.returncode == 1, result.stderr
    assert (
        f"{where}" in result.stderr
        and "env.taskset.turnz: error: is not a setting" in result.stderr
    )
    assert "rl-trainer" not in result.stdout + result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("lr = 3e-3", "lrr = 3e-3", "trainer.optim.lrr is not a known key"),
        ("batch_size = 64", "batch_size = 60", "not a multiple of group_size"),
    ],
)
def test_validate_config_reports_nested_mistakes_with_their_position(tmp_path, old, new, expected):
    config = write_config(tmp_path)
    config.write_text(config.read_text().replace(old, new))
    result = subprocess.run(
        [str(BIN / "validate-config"), str(config)], capture_output=True, text=True
    )
    assert result.returncode == 1
    output = result.stdout + result.stderr
    assert expected in output
    line = next(i for i, text in enumerate(config.read_text().splitlines(), 1) if new in text)
    assert f"{config}:{line}:" in output  # file:line:col of the mistake


def test_the_demo_config_is_valid():
    demo = Path(__file__).resolve().parents[3] / "configs" / "rl" / "demo.toml"
    result = subprocess.run(
        [str(BIN / "validate-config"), str(demo)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "valid rl_run config" in result.stdout


def test_clean_deletes_nothing_in_a_directory_no_run_marks(tmp_path, capsys):
    """clean = true (the default) deletes an earlier run's rollouts/ and broadcasts/, and only
    where trainspec's identity.json marks the directory as a run's."""
    from trainspec.trainers.rl_run.main import main

    config = write_config(tmp_path)
    theirs = tmp_path / "run" / "rollouts"
    theirs.mkdir(parents=True)
    (theirs / "notes.txt").write_text("someone else's\n")
    assert main([str(config)]) == 1
    err = capsys.readouterr().err
    assert "clean: error: = true would delete rollouts in" in err and "identity.json" in err
    assert (theirs / "notes.txt").read_text() == "someone else's\n"
