"""`[inference]` on a GPU machine (serving/vllm_plan.py, serving/inference_server.py): the vLLM
command and environment `rl` builds, what it refuses, and its process handling, with a stand-in
`vllm` (stand_in_vllm.py) on PATH and the GPU check answered yes. The stand-in serves the model
with trainspec.trainers.orchestrator.sampling.model_server, so a whole `rl` run samples from it
and feeds it each step's weights through the route `rl` uses on vLLM (/collective_rpc). The
real vLLM path runs in scripts/gpu_check.sh on a GPU."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest
from helpers.processes import ended, sigterm_while_the_server_starts
from test_rl_command import records, write_config

from trainspec.config import load
from trainspec.trainers.errors import SetupError, SetupErrors
from trainspec.trainers.rl_run import refusals as support
from trainspec.trainers.serving.inference_server import InferenceServer
from trainspec.trainers.serving.vllm_plan import vllm_plan

STAND_IN = Path(__file__).with_name("stand_in_vllm.py")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def stand_in(tmp_path, monkeypatch) -> Path:
    """A `vllm` executable first on PATH that runs stand_in_vllm.py; yields its record file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    vllm = bin_dir / "vllm"
    vllm.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STAND_IN}" "$@"\n')
    vllm.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    record = tmp_path / "stand-in.json"
    monkeypatch.setenv("STAND_IN_RECORD", str(record))
    monkeypatch.setattr(support, "_has_gpu", lambda: True)
    return record


def rl_config(settings: dict):
    base = {"model.name": "builtin:tiny-qwen3", "inference": {}}
    return load("rl_run", [], {**base, **settings}).config


def test_the_command_carries_the_engine_settings(tmp_path, stand_in):
    config = rl_config(
        {
            "deployment.num_infer_gpus": 2,
            "deployment.num_train_gpus": 1,
            "inference": {
                "server": {"host": "0.0.0.0", "port": 8123},
                "router": "None",
                "vllm": {
                    "tensor_parallel_size": 2,
                    "max_model_len": 4096,
                    "gpu_memory_utilization": 0.5,
                    "enforce_eager": True,
                    "enable_prefix_caching": False,
                    "max_num_seqs": 64,  # not a typed key: passed through
                },
                "env_vars": {"STAND_IN_EXTRA": "1"},
            },
        }
    )
    plan = vllm_plan(config, tmp_path)
    argv = plan.argv
    assert argv[0] == str(stand_in.parent / "bin" / "vllm") and argv[1:3] == [
        "serve",
        "builtin:tiny-qwen3",
    ]
    pairs = {argv[i]: argv[i + 1] for i in range(3, len(argv) - 1) if argv[i].startswith("--")}
    assert pairs["--port"] == "8123" and pairs["--host"] == "0.0.0.0"
    assert pairs["--tensor-parallel-size"] == "2" and pairs["--max-model-len"] == "4096"
    assert pairs["--gpu-memory-utilization"] == "0.5" and pairs["--max-num-seqs"] == "64"
    assert pairs["--logprobs-mode"] == "processed_logprobs"
    assert pairs["--worker-extension-cls"] == "trainspec.trainers.serving.vllm_worker.WeightUpdate"
    assert "--enforce-eager" in argv and "--no-enable-prefix-caching" in argv
    assert plan.env["CUDA_VISIBLE_DEVICES"] == "0,1" and plan.env["VLLM_SERVER_DEV_MODE"] == "1"
    assert plan.env["STAND_IN_EXTRA"] == "1"
    assert plan.base_url == "http://127.0.0.1:8123/v1"  # a wildcard bind is reached on loopback


def test_what_it_does_not_start_is_refused_naming_each_field(tmp_path, stand_in):
    config = rl_config(
        {
            "inference": {
                "vllm": {"model": "Qwen/Qwen3-0.6B", "data_parallel_size": 2, "enable_lora": True},
                "kv_cache_offload": {"type": "native", "cpu": {"num_bytes": 1024}},
            },
            "deployment.num_infer_gpus": 2,
        }
    )
    with pytest.raises(SetupErrors) as caught:
        vllm_plan(config, tmp_path)
    assert [e.path for e in caught.value.errors] == [
        "inference.vllm.model",
        "inference.router",
        "inference.kv_cache_offload",
        "inference.vllm.enable_lora",
    ]


def test_a_server_that_dies_before_it_is_ready_is_reported_with_its_log(
    tmp_path, stand_in, monkeypatch
):
    monkeypatch.setenv("STAND_IN_MODE", "crash")
    plan = vllm_plan(rl_config({"inference.server.port": free_port()}), tmp_path)
    server = InferenceServer(plan).start()
    with pytest.raises(SetupError) as caught:
        server.wait_ready(60, lambda: False)
    assert caught.value.path == "inference"
    assert "exited with code 3 before it was ready" in caught.value.problem
    assert "CUDA out of memory (stand-in)" in caught.value.problem  # the log's end
    assert "gpu_memory_utilization" in caught.value.fix


def test_a_server_that_never_answers_times_out_and_is_stopped(tmp_path, stand_in, monkeypatch):
    monkeypatch.setenv("STAND_IN_MODE", "hang")
    plan = vllm_plan(rl_config({"inference.server.port": free_port()}), tmp_path)
    server = InferenceServer(plan).start()
    try:
        with pytest.raises(SetupError) as caught:
            server.wait_ready(2, lambda: False)
        assert caught.value.path == "orchestrator.model.client.wait_for_ready_timeout"
    finally:
        server.stop()
    assert server.poll() is not None  # stopped, not left running


def test_rl_starts_the_server_samples_from_it_and_stops_it(tmp_path, stand_in, capsys):
    """A whole run: the orchestrator samples from the stand-in and sends it every step's weights
    through /collective_rpc; the server is stopped when rl ends."""
    from trainspec.trainers.rl_run.main import main

    path = write_config(tmp_path, max_steps=3)
    port = free_port()
    text = path.read_text().replace("[model]", f"[inference.server]\nport = {port}\n\n[model]")
    # the server loads model.name whole, as vLLM would: the trainer must train that model too
    path.write_text(text.replace("[trainer.model.debug]\nnum_layers = 1\n", ""))
    assert main([str(path)]) == 0
    err = capsys.readouterr().err
    assert "rl: starting vLLM on GPU(s) 0" in err
    assert f"vLLM serves 'builtin:tiny-qwen3' at http://127.0.0.1:{port}/v1" in err
    record = json.loads(stand_in.read_text())
    assert record["env"]["VLLM_SERVER_DEV_MODE"] == "1"
    run = tmp_path / "run"
    sampler = json.loads((run / "rl-orchestrator.json").read_text())["sampler"]
    assert sampler["type"] == "openai" and sampler["reload_path"] == "/collective_rpc"
    assert [r["step"] for r in records(run / "metrics.jsonl")] == [1, 2, 3]
    import httpx

    with pytest.raises(httpx.HTTPError):  # stopped with the run
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)


def test_the_server_listens_on_loopback_unless_told(tmp_path, stand_in):
    """vLLM's dev mode (the weight-update route) runs any worker method it is asked: the
    server binds 127.0.0.1 unless inference.server.host says otherwise."""
    for host, bound in ((None, "127.0.0.1"), ("10.0.0.5", "10.0.0.5")):
        argv = vllm_plan(rl_config({"inference.server.host": host}), tmp_path).argv
        assert argv[argv.index("--host") + 1] == bound and argv.count("--host") == 1


def test_a_stop_while_the_server_starts_stops_the_server_too(tmp_path, stand_in):
    """SIGTERM to `rl` while it waits for vLLM to come up: rl ends, and the server (its own
    session) is not left running."""
    path = write_config(tmp_path, max_steps=3)
    port = free_port()
    path.write_text(
        path.read_text().replace("[model]", f"[inference.server]\nport = {port}\n\n[model]")
    )
    run = (  # the GPU check answered yes, as the stand_in fixture does in this process
        "import sys; from trainspec.trainers.rl_run import main, refusals; "
        "refusals._has_gpu = lambda: True; sys.exit(main.main(sys.argv[1:]))"
    )
    code, err, server = sigterm_while_the_server_starts(run, path, stand_in)
    assert code == 1 and b"stopped while vLLM was starting" in err
    assert ended(server), "the vLLM server was left running"


def test_dry_run_writes_the_server_command(tmp_path, stand_in):
    from trainspec.trainers.rl_run.main import main

    path = write_config(tmp_path, max_steps=3)
    path.write_text(path.read_text().replace("[model]", "[inference]\n\n[model]"))
    assert main([str(path), "--dry_run", "true"]) == 0
    launch = json.loads((tmp_path / "run" / "rl-launch.json").read_text())
    assert launch["inference"]["command"][1:3] == ["serve", "builtin:tiny-qwen3"]
    assert launch["inference"]["base_url"] == "http://127.0.0.1:8000/v1"
    assert not stand_in.exists()  # started nothing


def test_the_worker_extension_hands_every_tensor_to_the_models_loader(tmp_path):
    """vLLM calls update_weights_from_path on each worker; the worker passes the directory's
    tensors (sharded or not) to its model's load_weights, which vLLM models all have."""
    import torch
    from safetensors.torch import save_file

    from trainspec.trainers.serving.vllm_worker import WeightUpdate

    tensors = {"a.weight": torch.ones(2, 2), "b.bias": torch.arange(3.0)}
    save_file({"a.weight": tensors["a.weight"]}, str(tmp_path / "part-1.safetensors"))
    save_file({"b.bias": tensors["b.bias"]}, str(tmp_path / "part-2.safetensors"))
    index = {"weight_map": {"a.weight": "part-1.safetensors", "b.bias": "part-2.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    loaded: dict[str, torch.Tensor] = {}

    class Model:
        def load_weights(self, weights):
            loaded.update(weights)

    class Worker(WeightUpdate):
        model_runner = type("Runner", (), {"model": Model()})()

    assert Worker().update_weights_from_path(str(tmp_path)) == 2
    assert loaded.keys() == tensors.keys()
    assert all(torch.equal(loaded[k], v) for k, v in tensors.items())
    with pytest.raises(FileNotFoundError, match="neither model.safetensors"):
        Worker().update_weights_from_path(str(tmp_path / "empty"))
