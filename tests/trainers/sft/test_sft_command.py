"""The `sft` command as users run it: real processes, real signals, real torchrun. What a
refusal says, and the one-process side of a comparison, run the command's entry point in this
process (sft_support.sft_in_process)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest
from helpers.listeners import LOOPBACK, watch_listeners
from helpers.sft_support import SFT, TINY, flags, sft_in_process, sft_process

WAIT = 240  # seconds; generous for a busy 2-core machine


def _run_dir(tmp_path: Path) -> Path:
    return tmp_path / "outputs" / "tiny"


def _wait_for(predicate, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not predicate():
        if proc.poll() is not None:
            raise AssertionError(
                f"sft exited ({proc.returncode}) before {what}: {proc.stderr.read()}"
            )
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _steps(run: Path) -> list[int]:
    path = run / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["step"] for line in path.read_text().splitlines() if line.strip()]


def _checkpoints(run: Path) -> list[int]:
    return sorted(int(p.name.split("_")[1]) for p in (run / "checkpoints").glob("step_*"))


def test_ctrl_c_finishes_the_step_saves_and_exits_0(tmp_path):
    """A scheduler's SIGTERM does the same: test_faults.py stops its first run with it."""
    proc = sft_process(tmp_path, "--max-steps", "100000", "--ckpt.interval", "None")
    run = _run_dir(tmp_path)
    _wait_for(lambda: len(_steps(run)) >= 2, proc, "two steps")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=WAIT)
    assert proc.returncode == 0, err
    last = _steps(run)[-1]
    assert _checkpoints(run) == [last]
    assert f"stop requested: stopping after step {last}" in err
    assert f"checkpoints/step_{last}" in out  # the closing line names the checkpoint
    assert "Traceback" not in err
    # the start banner (stdout) and the first minute's console: no no-op said at INFO, no
    # library progress bar in a log that is not a terminal
    banner = out.splitlines()[:4]
    assert banner[0].startswith("sft: ") and " parameters, on cpu (1 process)" in banner[0], out
    assert banner[1].startswith("  data   ") and " rows of " in banner[1], out
    assert banner[2] == "  steps  100000" and banner[3] == f"  run    {run}", out
    assert "have no effect" not in err and "copy nothing" not in err
    assert f"done after step {last} in 0:" in out


def test_sigusr1_and_the_control_files_checkpoint_and_stop(tmp_path):
    """One run, every way an operator talks to it without killing it: the `checkpoint` file
    and SIGUSR1 each save a checkpoint and training goes on; the `stop` file stops it after a
    save. Each command file is taken once."""
    run = _run_dir(tmp_path)
    control = run / "control"
    control.mkdir(parents=True)
    (control / "checkpoint").touch()
    proc = sft_process(tmp_path, "--max-steps", "100000", "--ckpt.interval", "None")
    _wait_for(lambda: not (control / "checkpoint").exists(), proc, "the checkpoint command")
    _wait_for(lambda: (run / "checkpoints").exists() and _checkpoints(run), proc, "a checkpoint")
    (commanded,) = _checkpoints(run)
    _wait_for(lambda: _steps(run)[-1] > commanded, proc, "training to go on")
    proc.send_signal(signal.SIGUSR1)
    _wait_for(lambda: len(_checkpoints(run)) == 2, proc, "the SIGUSR1 checkpoint")
    signalled = _checkpoints(run)[-1]
    _wait_for(lambda: _steps(run)[-1] > signalled, proc, "training to go on")
    (control / "stop").touch()
    out, err = proc.communicate(timeout=WAIT)
    assert proc.returncode == 0, err
    assert not (control / "stop").exists()  # taken once
    assert len(_checkpoints(run)) == 3  # the commanded one, SIGUSR1's and the one on stop
    assert _checkpoints(run)[-1] == _steps(run)[-1] > signalled > commanded
    assert "Traceback" not in err


def test_unsupported_setting_is_refused_without_a_traceback(tmp_path):
    refused = sft_in_process(
        *flags({**TINY, "output_dir": str(tmp_path)}),
        *("--model.attn", "flash_attention_2", "--model.cp", "2", "--data.micro-batch-size", "1"),
    )
    assert refused.returncode == 1
    # each refusal says where it was set: here the flag
    assert "\n--model.attn: model.attn: error:" in refused.stderr and "fix:" in refused.stderr
    assert "\n--model.cp: model.cp: error:" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_refusal_at_start_says_the_file_line_and_column(tmp_path):
    config = tmp_path / "gpu-only.toml"
    config.write_text('max_steps = 2\n\n[model]\nattn = "flash_attention_2"\n')
    refused = sft_in_process(str(config), *flags({**TINY, "output_dir": str(tmp_path)}))
    assert refused.returncode == 1
    assert f"\n{config}:4:8: model.attn: error:" in refused.stderr, refused.stderr


def test_reference_style_at_file_and_dry_run(tmp_path):
    config = tmp_path / "tiny.toml"
    config.write_text('[model]\nname = "builtin:tiny-qwen3"\n\n[data]\ntype = "fake"\n')
    done = subprocess.run(
        [SFT, "@", str(config), "--dry-run"], capture_output=True, text=True, timeout=WAIT
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["model"]["name"] == "builtin:tiny-qwen3"


def test_torchrun_matches_one_process(tmp_path):
    """`sft` launches torchrun itself; FSDP2 over gloo gives the 1-process losses (that run in
    this process). The batch (4 rows, micro-batches of 4) splits into one forward of 2 rows on
    each process."""
    settings = {**TINY, "max_steps": 3, "data.length": "variable"}
    settings["ckpt"] = {}
    runs = {}
    for n in (1, 2):
        out = tmp_path / f"n{n}"
        args = [*flags({**settings, "output_dir": str(out)}), "--deployment.num-train-gpus", str(n)]
        if n == 1:
            done = sft_in_process(*args)
        else:
            done = subprocess.run([SFT, *args], capture_output=True, text=True, timeout=WAIT * 2)
        assert done.returncode == 0, done.stderr[-3000:]
        run = out / "tiny"
        lines = (run / "metrics.jsonl").read_text().splitlines()
        runs[n] = [json.loads(line)["loss"] for line in lines]
        assert _checkpoints(run) == [3]
    assert runs[2] == pytest.approx(runs[1], rel=1e-4)
    launched = tmp_path / "n2" / "tiny" / "launch-config.json"  # what the workers read
    assert stat.S_IMODE(launched.stat().st_mode) == 0o600  # env_vars, headers: secrets maybe


def test_two_processes_on_one_node_listen_on_loopback_only(tmp_path):
    """torch's rendezvous stores bind every interface unless given a socket: `sft` on two
    processes of one node has its agent and its workers listen on 127.0.0.1 alone
    (process/loopback_rendezvous.py)."""
    settings = {**TINY, "max_steps": 6, "output_dir": str(tmp_path / "out")}
    log = tmp_path / "sft.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [SFT, *flags(settings), "--deployment.num-train-gpus", "2"],
            stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip
        seen = watch_listeners(process, WAIT * 2)
    assert process.wait() == 0, log.read_text()[-3000:]
    assert seen, "nothing listened: the check could not fail"
    assert all(address.startswith(LOOPBACK) for address in seen), seen


def test_reference_renderer_section_is_accepted_and_a_custom_one_refused(tmp_path):
    """A chat file rendered by the renderer "auto" names; off a terminal `datasets` shows no
    progress bars."""
    config = tmp_path / "ref.toml"
    config.write_text('[renderer]\nname = "auto"\n')
    turns = [[{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]
             for i in range(8)]  # fmt: skip
    chats = [{"messages": messages} for messages in turns]
    (tmp_path / "chats.jsonl").write_text("".join(json.dumps(chat) + "\n" for chat in chats))
    data = {"data.type": "sft", "data.name": str(tmp_path / "chats.jsonl")}
    done = sft_in_process(str(config), *flags({**TINY, **data, "output_dir": str(tmp_path)}),
                          "--max-steps", "1")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Generating train split" not in done.stderr and "Map" not in done.stderr
    refused = sft_in_process(
        *flags({**TINY, "output_dir": str(tmp_path / "outputs")}),
        *("--renderer.name", "custom", "--renderer.import_path", "my.R"),
    )
    assert refused.returncode == 1
    assert 'renderer.name: error: "custom"' in refused.stderr and "Traceback" not in refused.stderr


def test_two_local_nodes_meet_through_torchrun_rendezvous(tmp_path):
    """Multi-node as users run it: the same command on each "node", NODE_RANK set on each.
    The rendezvous gives out the global ranks by (host, pid), not by NODE_RANK: node 1, started
    first, gets rank 0, which claims the run directory there."""
    import os
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = {**TINY, "max_steps": 2, "data.micro_batch_size": 2, "output_dir": str(tmp_path)}
    settings |= {"deployment.type": "multi_node", "deployment.num_train_nodes": 2}
    settings |= {"deployment.gpus_per_node": 1}
    nodes = [
        subprocess.Popen(
            [SFT, *flags(settings)],
            env={
                **os.environ,
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                "NODE_RANK": str(rank),
                "OMP_NUM_THREADS": "1",
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (1, 0)
    ]
    outputs = [node.communicate(timeout=WAIT) for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], [err[-2000:] for _, err in outputs]
    assert _steps(tmp_path / "tiny") == [1, 2]  # rank 0 of the job writes the metrics


@pytest.mark.parametrize(
    "name, deliver",
    [
        ("SIGTERM", lambda proc: proc.send_signal(signal.SIGTERM)),  # a scheduler's stop
        # a terminal's Ctrl-C goes to the whole process group: the launcher and its workers
        ("SIGINT", lambda proc: os.killpg(proc.pid, signal.SIGINT)),
    ],
)
def test_a_stop_signal_to_a_torchrun_job_stops_every_worker_after_a_save(tmp_path, name, deliver):
    proc = sft_process(
        tmp_path,
        "--max-steps",
        "100000",
        "--ckpt.interval",
        "None",
        "--deployment.num-train-gpus",
        "2",
        "--deployment.gpus-per-node",
        "2",
        "--data.micro-batch-size",
        "2",
        start_new_session=True,
    )
    run = _run_dir(tmp_path)
    _wait_for(lambda: len(_steps(run)) >= 2, proc, "two steps")
    deliver(proc)
    out, err = proc.communicate(timeout=WAIT)
    assert proc.returncode == 0, err[-3000:]
    assert _checkpoints(run) == [_steps(run)[-1]]
    assert f"{name}: the workers stopped after their step" in err


def test_a_second_ctrl_c_stops_at_once(tmp_path):
    """Steps of a second or so: the second Ctrl-C lands in the step the first lets finish."""
    long_steps = ["--model.seq-len", "512", "--data.seq-len", "512", "--data.batch-size", "64"]
    proc = sft_process(
        tmp_path, "--max-steps", "100000", "--ckpt.interval", "None", *long_steps,
        "--data.micro-batch-size", "64",
    )  # fmt: skip
    run = _run_dir(tmp_path)
    _wait_for(lambda: len(_steps(run)) >= 1, proc, "a step")
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)  # one signal at a time: the kernel merges a pending repeat into it
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=WAIT)
    assert proc.returncode == 128 + signal.SIGINT
    assert "sft: stopped by SIGINT" in err and "Traceback" not in err
