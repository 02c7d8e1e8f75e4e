"""`rl` with `[inference]` on the real vLLM (its CPU build here, `make install`): the command a
user runs starts the server, the orchestrator samples from it, and after every step the server
reloads the trainer's weights, the served weight version following the trainer's steps. While
the run goes on nothing it started listens beyond loopback; Ctrl-C while it trains, the server
killed, or an error between the server's start and the orchestrator's leaves no vLLM process
behind.

Each test is one `rl` run, which starts its own server (what is tested is that it starts and
stops it): 20 to 40 s on two busy cores with `enforce_eager` (no compile warm-up), on a tiny
random Qwen3 saved as a user's checkpoint (its output layer tied, as the built-in model's is).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from helpers.listeners import LOOPBACK, descendants, watch_listeners
from helpers.ports import free_port
from test_rl_command import BIN, TINY_RUN, records

from trainspec.trainers.builtin import builtin_model_dir
from trainspec.trainers.serving.vllm_plan import vllm_installed

pytestmark = pytest.mark.skipif(
    not vllm_installed() and not os.environ.get("CI"),
    reason="vLLM is not installed (make install installs it)",
)

RUN_S = 900  # vLLM's start, then a few tiny steps, on two busy cores
SCHEMA = Path(__file__).resolve().parents[3] / "generated" / "schemas" / "rl.json"


def checkpoint(path: Path) -> Path:
    from transformers import AutoConfig, AutoModelForCausalLM

    source = builtin_model_dir("builtin:tiny-qwen3")
    shutil.copytree(source, path)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(source)).save_pretrained(path)
    return path


def write_run(tmp_path: Path, max_steps: int) -> Path:
    """The tiny run of test_rl_command on a model with weight files (the trainer trains it
    whole, as the server serves it), with a bare [inference] on a free port."""
    text = TINY_RUN.format(
        schema=SCHEMA, max_steps=max_steps, output_dir=tmp_path / "run", ckpt_interval=1000
    )
    text = text.replace('name = "builtin:tiny-qwen3"', f'name = "{checkpoint(tmp_path / "m")}"')
    text = text.replace("[trainer.model.debug]\nnum_layers = 1\n", "")
    path = tmp_path / "rl.toml"
    path.write_text(
        text + f"\n[inference.server]\nport = {free_port()}\n"
        "[inference.vllm]\nenforce_eager = true\n"  # no compile warm-up: ~15 s less a start
    )
    return path


def test_rl_samples_from_vllm_and_the_served_weights_follow_the_trainer(tmp_path):
    config = write_run(tmp_path, max_steps=3)
    process = subprocess.Popen(
        [str(BIN / "rl"), str(config)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    seen = watch_listeners(process, RUN_S)
    out, err = process.communicate()
    run = tmp_path / "run"
    log = (run / "logs" / "inference.log").read_text()
    assert process.returncode == 0, f"{err}\n--- inference.log:\n{log[-3000:]}"
    assert "starting vLLM (its CPU build)" in err and "vLLM serves" in err
    assert seen, "nothing listened: the check could not fail"
    assert all(address.startswith(LOOPBACK) for address in seen), seen
    assert [r["step"] for r in records(run / "metrics.jsonl")] == [1, 2, 3]
    orchestrator = records(run / "orchestrator" / "metrics.jsonl")
    assert [r["policy_step"] for r in orchestrator if "policy_step" in r] == [0, 1, 2]
    # every weights update went through vLLM's routes, the version checked after each
    versions = log.count('"POST /update_weight_version HTTP/1.1" 200')
    assert versions >= 3 and log.count('"GET /weight_info HTTP/1.1" 200') == versions
    sampler = json.loads((run / "rl-orchestrator.json").read_text())["sampler"]
    assert sampler["type"] == "openai" and sampler["reload_path"] == "/collective_rpc"


def training(tmp_path: Path) -> tuple[subprocess.Popen, set[int]]:
    """`rl` on a long run, once its first step is trained; with the processes it runs then."""
    config = write_run(tmp_path, max_steps=10_000)
    process = subprocess.Popen(
        [str(BIN / "rl"), str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # Ctrl-C reaches the terminal's foreground group: rl's own
    )
    metrics = tmp_path / "run" / "metrics.jsonl"
    deadline = time.monotonic() + RUN_S
    while not records(metrics) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(1)
    assert records(metrics), "no step was trained"
    return process, descendants(process.pid)


def test_ctrl_c_while_training_leaves_no_vllm_process(tmp_path):
    process, tree = training(tmp_path)
    assert any(b"vllm.entrypoints" in _cmdline(pid) for pid in tree), "vLLM is not running"
    os.killpg(process.pid, signal.SIGINT)
    try:
        _, err = process.communicate(timeout=RUN_S)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    assert process.returncode is not None
    left = [pid for pid in tree if _alive(pid)]
    assert not left, f"left running: {[_cmdline(pid) for pid in left]}\n{err}"


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_a_server_killed_mid_run_stops_the_run_saying_so_and_leaves_no_process(tmp_path):
    """vLLM's API server SIGKILLed while the run trains (an OOM killer, an operator): `rl` says
    the server exited, stops both sides (the trainer saves first) and exits 1; nothing of the
    run is left, vLLM's engine processes (the dead server's group) included."""
    process, tree = training(tmp_path)
    (api_server,) = [pid for pid in tree if b"vllm.entrypoints.openai.api_server" in _cmdline(pid)]
    assert len([pid for pid in tree if _alive(pid)]) > 3  # the engine's processes too
    os.kill(api_server, signal.SIGKILL)
    try:
        _, err = process.communicate(timeout=RUN_S)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    assert process.returncode == 1, err
    assert "the vLLM server exited with code -9" in err
    left = [pid for pid in tree if _alive(pid)]
    assert not left, f"left running: {[_cmdline(pid) for pid in left]}\n{err}"


def test_an_error_after_vllm_is_ready_stops_it(tmp_path):
    """The run fails between vLLM's start and the orchestrator's (here: its config cannot be
    written, a directory holds the name): rl says why in one message and leaves no vLLM
    process behind."""
    config = write_run(tmp_path, max_steps=3)
    (tmp_path / "run" / "rl-orchestrator.json").mkdir(parents=True)
    process = subprocess.Popen(
        [str(BIN / "rl"), str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    tree: set[int] = set()
    deadline = time.monotonic() + RUN_S
    while process.poll() is None and time.monotonic() < deadline:
        tree |= descendants(process.pid)  # every process it started, while they run
        time.sleep(0.5)
    if process.poll() is None:
        process.kill()
    _, err = process.communicate()
    assert "vLLM serves" in err, err  # it failed after the server was ready
    assert process.returncode == 1 and "Traceback" not in err, err
    assert "rl-orchestrator.json" in err, err
    left = [pid for pid in tree if _alive(pid)]
    assert not left, f"left running: {[_cmdline(pid) for pid in left]}\n{err}"
