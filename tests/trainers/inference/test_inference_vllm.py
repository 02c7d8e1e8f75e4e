"""`inference` on the real vLLM engine (its CPU build here, `make install`): a checkpoint with
weight files is served by vLLM (about a minute to start on two busy cores), answers a
completion, takes an `eval` run through eval.client.base_url, then SIGTERM stops it: `inference`
exits 0 and no process of the server is left (vLLM's engine core included)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from helpers.ports import free_port

from trainspec.trainers.builtin import builtin_model_dir
from trainspec.trainers.serving.vllm_plan import vllm_installed

pytestmark = pytest.mark.skipif(
    not vllm_installed() and not os.environ.get("CI"),
    reason="vLLM is not installed (make install installs it)",
)
BIN = Path(sys.executable).parent
READY_S = 900.0


def checkpoint(path: Path) -> Path:
    """The built-in tiny Qwen3 with its seed-0 weights saved as a user's checkpoint."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    shutil.copytree(builtin_model_dir("builtin:tiny-qwen3"), path)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path)).save_pretrained(path)
    return path


def processes_naming(text: str) -> list[int]:
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path("/proc", entry, "cmdline").read_bytes().replace(b"\0", b" ")
            state = Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text.encode() in cmdline and state not in ("Z", "X"):
            found.append(int(entry))
    return found


def test_vllm_serves_a_checkpoint_alone_until_sigterm(tmp_path):
    model = checkpoint(tmp_path / "weights")
    port = free_port()
    infer = tmp_path / "infer.toml"
    infer.write_text(
        f'output_dir = "{tmp_path / "serve"}"\n[server]\nport = {port}\n'
        f'[vllm]\nmodel = "{model}"\nmax_model_len = 256\nenforce_eager = true\n'
    )
    server = subprocess.Popen(
        [str(BIN / "inference"), str(infer)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        deadline, line = time.monotonic() + READY_S, ""
        while time.monotonic() < deadline and not line.startswith("inference: ready at"):
            line = server.stdout.readline()
            if not line and server.poll() is not None:
                break
        assert line.startswith("inference: ready at"), server.stderr.read()
        url = line.split()[-1]
        assert url == f"http://127.0.0.1:{port}/v1"
        answer = httpx.post(
            f"{url}/completions",
            json={"model": str(model), "prompt": "hello", "max_tokens": 4, "temperature": 0},
            timeout=120,
        )
        assert answer.status_code == 200, answer.text
        evals = tmp_path / "evals.toml"
        evals.write_text(
            f'model = "{model}"\nseq_len = 128\noutput_dir = "{tmp_path / "eval"}"\n'
            f'[eval]\nnum_examples = 2\n[eval.client]\nbase_url = "{url}"\n'
            "[eval.sampling]\nmax_completion_tokens = 4\n"
            '[[eval.source]]\nname = "rt"\nenv.taskset.id = "builtin:reverse-text"\n'
        )
        result = subprocess.run(
            [str(BIN / "evaluate"), str(evals)], capture_output=True, text=True, timeout=600
        )
        assert result.returncode == 0, result.stderr
        lines = (tmp_path / "eval" / "eval" / "scores.jsonl").read_text().splitlines()
        assert [json.loads(x)["source"] for x in lines] == ["rt", "all"]
        assert f"through the server at {url}" in result.stderr
        assert processes_naming(str(model))  # vLLM's processes, before the stop
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=120)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert server.returncode == 0, err
    assert "stopping the vLLM server" in err and "Traceback" not in err
    deadline = time.monotonic() + 30
    while processes_naming(str(model)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert processes_naming(str(model)) == []
