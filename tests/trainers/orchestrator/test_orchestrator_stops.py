"""The orchestrator as a real process (the `orchestrator` command): a second Ctrl-C ends it
while it waits on something the first one lets finish (process/signals.py), and it leaves its
sign of life for the trainer (process/liveness.py), which says how it ended."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.ports import free_port

from trainspec.config import load
from trainspec.trainers.process.liveness import orchestrator_sign
from trainspec.trainers.wire.broadcast import READY, broadcast_dir

BIN = Path(sys.executable).parent
WAIT_S = 240  # generous: a busy 2-core machine

CONFIG = """\
output_dir = "{run_dir}"
max_steps = 2
batch_size = 2
group_size = 1
seq_len = 64

[model]
name = "builtin:tiny-qwen3"

[train.sampling]
max_completion_tokens = 4

[rollout_transport]
type = "filesystem"

[[train.source]]
env.taskset.id = "trainspec-reverse-text"
env.agent.harness.id = "null"
env.agent.runtime.type = "subprocess"
serve.address = "tcp://127.0.0.1:{port}"
"""


@pytest.fixture(scope="module")
def first_weights(tmp_path_factory) -> Path:
    """A one-layer built-in model in Hugging Face format: what the trainer publishes first."""
    from trainspec.trainers.core.model import load_hf_model

    model_cfg = load("rl", [], {"model.name": "builtin:tiny-qwen3", "model.debug.num_layers": 1})
    path = tmp_path_factory.mktemp("weights")
    load_hf_model(model_cfg.config.model, seed=0).save_pretrained(path)
    return path


def test_a_second_ctrl_c_ends_the_orchestrator_while_it_waits_for_an_env_server(
    tmp_path, first_weights
):
    """Its source plays on an environment server at an address where none answers: the first
    step waits up to 600 s for it, and a first Ctrl-C only asks for a stop once the step is
    done. The second ends the process now, said in one line, with no traceback."""
    pytest.importorskip("verifiers", reason="the envs extra: pip install 'trainspec[envs]'")
    run_dir = tmp_path / "run"
    target = broadcast_dir(run_dir, 0)
    import shutil

    shutil.copytree(first_weights, target)
    (target / READY).touch()
    config = tmp_path / "orchestrator.toml"
    config.write_text(CONFIG.format(run_dir=run_dir, port=free_port()))
    log = tmp_path / "stderr.log"
    with log.open("w") as stderr:
        process = subprocess.Popen([str(BIN / "orchestrator"), str(config)], stderr=stderr)
    try:
        deadline = time.monotonic() + WAIT_S
        while "starting at step 0" not in log.read_text():  # the step, and its wait, begin
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the orchestrator did not start"
            time.sleep(0.2)
        time.sleep(2)
        process.send_signal(signal.SIGINT)
        time.sleep(2)
        assert process.poll() is None, log.read_text()  # a stop once the step is done
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    finally:
        process.kill()
        process.wait()
    err = log.read_text()
    assert process.returncode == 130, err
    assert "orchestrator: stopped by SIGINT" in err and "Traceback" not in err
    record = json.loads(orchestrator_sign(run_dir).read_text())
    assert record["state"] == "ended" and record["how"] == "stopped", record
