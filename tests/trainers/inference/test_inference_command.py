"""`inference FILE` starts a server alone and supervises it: the built-in tiny model served in
process answers a real completion request, then SIGTERM or SIGINT stops it (exit 0, nothing
left running, the port free again); vLLM's command is planned (a stand-in server stopped while
it starts, reaped); --dry-run and [slurm] write what would start; settings only vLLM honours are
refused at start, naming them."""

from __future__ import annotations

import json
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from helpers.ports import free_port
from helpers.processes import ended, signal_while_the_server_starts, use_stand_in

from trainspec.trainers.inference.main import main

BIN = Path(sys.executable).parent
READY_S = 180.0


def write(tmp_path: Path, text: str, name: str = "infer.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def tiny(tmp_path: Path, port: int, extra: str = "") -> Path:
    return write(
        tmp_path,
        f'output_dir = "{tmp_path / "out"}"\n{extra}\n[server]\nport = {port}\n'
        '[vllm]\nmodel = "builtin:tiny-qwen3"\n',
    )


def wait_ready(process: subprocess.Popen) -> str:
    """The base URL `inference` says it serves at (its stdout's "ready at" line)."""
    assert process.stdout is not None
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line.startswith("inference: ready at "):
            return line.split()[-1]
        if not line and process.poll() is not None:
            break
    process.kill()
    _, err = process.communicate()
    raise AssertionError(f"inference never said it was ready:\n{err}")


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_it_serves_a_completion_until_a_stop_signal(tmp_path, signum):
    port = free_port()
    config = tiny(tmp_path, port)
    process = subprocess.Popen(
        [str(BIN / "inference"), str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base_url = wait_ready(process)
        assert base_url == f"http://127.0.0.1:{port}/v1"  # loopback, unless told
        answer = httpx.post(
            f"{base_url}/completions",
            json={
                "model": "builtin:tiny-qwen3",
                "prompt": "hello",
                "max_tokens": 4,
                "temperature": 0,
            },  # fmt: skip
            timeout=60,
        )
        assert answer.status_code == 200, answer.text
        [choice] = answer.json()["choices"]
        assert len(choice["token_ids"]) == 4 and choice["finish_reason"] == "length"
        assert httpx.get(f"{base_url}/models", timeout=10).json()["data"][0]["id"] == (
            "builtin:tiny-qwen3"
        )
        process.send_signal(signum)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert "inference: stopping the server" in err and "Traceback" not in err
    assert ended(process.pid, 5) and not listening(port)


def test_a_dry_run_writes_what_it_would_start(tmp_path, capsys):
    config = tiny(tmp_path, 8123)
    assert main([str(config), "--dry-run"]) == 0
    written = tmp_path / "out" / "inference-launch.json"
    assert stat.S_IMODE(written.stat().st_mode) == 0o600  # the server's env_vars may be secrets
    plan = json.loads(written.read_text())
    assert plan == {
        "engine": "model_server",
        "model": "builtin:tiny-qwen3",
        "host": "127.0.0.1",
        "port": 8123,
        "base_url": "http://127.0.0.1:8123/v1",
        "why": "the built-in model builtin:tiny-qwen3 has no weight files for vLLM to load",
    }
    assert "dry run: wrote" in capsys.readouterr().err


def test_a_dry_run_plans_vllm_for_a_model_with_weights(tmp_path, monkeypatch, capsys):
    use_stand_in(monkeypatch, tmp_path / "record.json")
    config = write(
        tmp_path,
        f'output_dir = "{tmp_path / "out"}"\n[server]\nport = 8124\n'
        '[vllm]\nmodel = "Qwen/Qwen3-0.6B"\nmax_model_len = 512\n',
    )
    assert main([str(config), "--dry-run"]) == 0
    plan = json.loads((tmp_path / "out" / "inference-launch.json").read_text())
    assert plan["engine"] == "vllm" and plan["base_url"] == "http://127.0.0.1:8124/v1"
    argv = plan["command"]
    assert argv[argv.index("--model") + 1] == "Qwen/Qwen3-0.6B"
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert argv[argv.index("--max-model-len") + 1] == "512"
    assert not (tmp_path / "record.json").exists()  # nothing started


def test_sigterm_while_vllm_starts_stops_it_and_reaps_it(tmp_path):
    config = write(
        tmp_path,
        f'output_dir = "{tmp_path / "out"}"\n[server]\nport = {free_port()}\n'
        '[vllm]\nmodel = "Qwen/Qwen3-0.6B"\n',
    )
    code = (
        "import sys; from trainspec.trainers.inference.main import main; "
        "sys.exit(main(sys.argv[1:]))"
    )
    returncode, err, server = signal_while_the_server_starts(code, config, tmp_path / "record.json")
    assert returncode == 0, err
    assert b"stopped while vLLM was starting" in err and b"Traceback" not in err
    assert ended(server, 30)


def test_settings_only_vllm_honours_are_refused_in_process(tmp_path, capsys):
    config = tiny(tmp_path, 8125, "use_deep_gemm = true\n")
    assert main([str(config)]) == 1
    err = capsys.readouterr().err
    head = f"inference: cannot start\n{config}:2:17: use_deep_gemm: error: sets use_deep_gemm"
    assert err.startswith(head), err  # where it was written, then what and why
    assert "the model is served in this process" in err and "Traceback" not in err


def test_slurm_writes_the_job_on_a_dry_run(tmp_path, capsys):
    config = tiny(tmp_path, 8126, '[slurm]\npartition = "gpu"\n')
    assert main([str(config), "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert "server.host is unset: the server binds 127.0.0.1 on its node" in err
    script = tmp_path / "out" / "inference.sbatch"
    assert out == f"sbatch {script}\n"
    text = script.read_text()
    assert "#SBATCH --partition=gpu" in text and "#SBATCH --nodes=1" in text
    assert "trainspec.trainers.slurm.job inference" in text
    job = json.loads((tmp_path / "out" / "configs" / "inference.json").read_text())
    assert job["slurm"] is None and job["dry_run"] is False
    assert job["vllm"]["model"] == "builtin:tiny-qwen3"


def test_a_typo_is_reported_at_its_line_and_column(tmp_path, capsys):
    config = write(tmp_path, '[server]\nport = 8000\nhots = "0.0.0.0"\n')
    assert main([str(config)]) == 1
    err = capsys.readouterr().err
    assert f"{config}:3:1: error: server.hots is not a known key of [server]" in err
    assert "did you mean server.host?" in err
