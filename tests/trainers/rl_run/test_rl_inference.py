"""`[inference]` (serving/vllm_plan.py, serving/inference_server.py): the vLLM command and
environment `rl` builds on a GPU machine and on CPU, what it refuses, and its process handling,
with the stand-in (stand_in_vllm.py) where vLLM's command is and the GPU check answered yes. The
stand-in only does what the real vLLM cannot be made to do on demand: crash while it starts,
never come up, be stopped while it starts. Whole runs sampling from a real vLLM server, its
weight reloads included, are the real-engine tests'."""

from __future__ import annotations

import json
import signal
import stat
import sys
from pathlib import Path

import pytest
from helpers.ports import free_port
from helpers.processes import STAND_IN, ended, signal_while_the_server_starts, use_stand_in
from test_rl_command import write_config

from trainspec.config import load
from trainspec.trainers.builtin import builtin_model_dir
from trainspec.trainers.errors import SetupError, SetupErrors
from trainspec.trainers.rl_run import refusals as support
from trainspec.trainers.rl_run.inference_plan import vllm_plan
from trainspec.trainers.serving import vllm_plan as plan_module
from trainspec.trainers.serving.inference_server import InferenceServer
from trainspec.trainers.serving.vllm_plan import VLLM_MODULE

VLLM_COMMAND = plan_module.vllm_command  # the real one, before any test replaces it


@pytest.fixture
def stand_in(tmp_path, monkeypatch) -> Path:
    """vLLM's command replaced by stand_in_vllm.py (and vLLM counted as installed), on a GPU
    machine as far as `rl` asks; yields the stand-in's record file."""
    record = tmp_path / "stand-in.json"
    use_stand_in(monkeypatch, record)
    monkeypatch.setattr(support, "has_gpu", lambda: True)
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
    plan = vllm_plan(config, tmp_path, on_gpu=True)
    argv = plan.argv
    model = argv.index("--model")
    assert argv[:model] == [sys.executable, str(STAND_IN)]  # vllm_command(), replaced
    assert argv[model + 1] == "builtin:tiny-qwen3"
    pairs = {argv[i]: argv[i + 1] for i in range(model, len(argv) - 1) if argv[i].startswith("--")}
    assert pairs["--served-model-name"] == "builtin:tiny-qwen3"
    assert pairs["--port"] == "8123" and pairs["--host"] == "0.0.0.0"
    assert pairs["--tensor-parallel-size"] == "2" and pairs["--max-model-len"] == "4096"
    assert pairs["--gpu-memory-utilization"] == "0.5" and pairs["--max-num-seqs"] == "64"
    assert pairs["--logprobs-mode"] == "processed_logprobs"
    assert "--worker-extension-cls" not in argv  # the reload is vLLM's own (vllm_reload.py)
    assert "--dtype" not in argv  # the engine's default on a GPU
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
        vllm_plan(config, tmp_path, on_gpu=True)
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
    plan = vllm_plan(rl_config({"inference.server.port": free_port()}), tmp_path, on_gpu=True)
    server = InferenceServer(plan).start()
    with pytest.raises(SetupError) as caught:
        server.wait_ready(60, lambda: False)
    assert caught.value.path == "inference"
    assert "exited with code 3 before it was ready" in caught.value.problem
    assert "CUDA out of memory (stand-in)" in caught.value.problem  # the log's end
    assert "gpu_memory_utilization" in caught.value.fix


def test_a_server_that_never_answers_times_out_and_is_stopped(tmp_path, stand_in, monkeypatch):
    monkeypatch.setenv("STAND_IN_MODE", "hang")
    plan = vllm_plan(rl_config({"inference.server.port": free_port()}), tmp_path, on_gpu=True)
    server = InferenceServer(plan).start()
    try:
        with pytest.raises(SetupError) as caught:
            server.wait_ready(2, lambda: False)
        assert caught.value.path == "orchestrator.model.client.wait_for_ready_timeout"
    finally:
        server.stop()
    assert server.poll() is not None  # stopped, not left running


def test_the_server_listens_on_loopback_unless_told(tmp_path, stand_in):
    """vLLM's dev mode (the weight-update route) runs any worker method it is asked: the
    server binds 127.0.0.1 unless inference.server.host says otherwise."""
    for host, bound in ((None, "127.0.0.1"), ("10.0.0.5", "10.0.0.5")):
        plan = vllm_plan(rl_config({"inference.server.host": host}), tmp_path, on_gpu=True)
        assert plan.argv[plan.argv.index("--host") + 1] == bound and plan.argv.count("--host") == 1
        # beyond loopback, the start says who can reach the dev-mode routes
        warned = [note for note in plan.notes if "dev-mode routes" in note]
        assert warned == ([] if host is None else [warned[0]]), plan.notes
        assert host is None or warned[0].startswith("vLLM listens on 10.0.0.5:")


# A model directory (the built-in model's config and tokenizer) rather than the built-in name,
# whose weights the trainer initialises and which `rl` therefore samples in process.
MODEL_DIR = str(builtin_model_dir("builtin:tiny-qwen3"))


def with_model_dir(text: str) -> str:
    return text.replace('name = "builtin:tiny-qwen3"', f'name = "{MODEL_DIR}"', 1)


@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "ctrl-c"])
def test_a_stop_while_the_server_starts_stops_the_server_too(tmp_path, stand_in, sent):
    """SIGTERM or Ctrl-C to `rl` while it waits for vLLM to come up: rl ends, and the server (its
    own session) is not left running."""
    path = write_config(tmp_path, max_steps=3)
    port = free_port()
    text = path.read_text().replace("[model]", f"[inference.server]\nport = {port}\n\n[model]")
    path.write_text(with_model_dir(text))
    run = (  # the GPU check answered yes, as the stand_in fixture does in this process; the
        # helper replaces vLLM's command there too (processes.PATCH_STAND_IN, before this)
        "import sys; from trainspec.trainers.rl_run import main, refusals; "
        "refusals.has_gpu = lambda: True; sys.exit(main.main(sys.argv[1:]))"
    )
    code, err, server = signal_while_the_server_starts(run, path, stand_in, sent)
    assert code == 1 and b"stopped while vLLM was starting" in err, err.decode()
    started = json.loads(stand_in.read_text())
    assert started["argv"][:2] == ["--model", MODEL_DIR]
    # one node: vLLM's own groups (gloo, NCCL) keep their sockets on loopback
    assert started["env"]["GLOO_SOCKET_IFNAME"] == started["env"]["NCCL_SOCKET_IFNAME"] == "lo"
    assert ended(server), "the vLLM server was left running"


def test_dry_run_writes_the_server_command(tmp_path, stand_in, monkeypatch):
    """The command written is vLLM's own (this Python, vLLM's server module), which a dry run
    does not start."""
    from trainspec.trainers.rl_run.main import main

    monkeypatch.setattr(plan_module, "vllm_command", VLLM_COMMAND)
    path = write_config(tmp_path, max_steps=3)
    path.write_text(with_model_dir(path.read_text().replace("[model]", "[inference]\n\n[model]")))
    assert main([str(path), "--dry_run", "true"]) == 0
    launch = json.loads((tmp_path / "run" / "rl-launch.json").read_text())
    assert launch["inference"]["command"][:5] == [
        sys.executable, "-m", VLLM_MODULE, "--model", MODEL_DIR
    ]  # fmt: skip
    assert launch["inference"]["base_url"] == "http://127.0.0.1:8000/v1"
    assert not stand_in.exists()  # started nothing
    for name in ("rl-launch.json", "rl-trainer.json", "rl-orchestrator.json"):  # env_vars
        assert stat.S_IMODE((tmp_path / "run" / name).stat().st_mode) == 0o600, name


def test_on_cpu_the_plan_derives_what_vllms_cpu_build_needs_unless_set(tmp_path, stand_in):
    """Without a GPU: float32 (the trainer's precision on CPU), the run's sequence length, a
    small share of host memory and 1 GiB of KV cache, and no CUDA_VISIBLE_DEVICES; what the
    config sets wins over each."""
    config = rl_config({})
    plan = vllm_plan(config, tmp_path, on_gpu=False)
    argv = plan.argv
    assert argv[argv.index("--dtype") + 1] == "float32"
    assert argv[argv.index("--max-model-len") + 1] == str(config.orchestrator.seq_len)
    assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.1"
    assert plan.env["VLLM_CPU_KVCACHE_SPACE"] == "1" and "CUDA_VISIBLE_DEVICES" not in plan.env
    assert plan.env["VLLM_SERVER_DEV_MODE"] == "1"  # the reload routes, as on a GPU
    assert any("no GPU: vLLM's CPU build" in note for note in plan.notes)

    vllm = {"dtype": "bfloat16", "max_model_len": 512, "gpu_memory_utilization": 0.3}
    config = rl_config({"inference": {"vllm": vllm, "env_vars": {"VLLM_CPU_KVCACHE_SPACE": "4"}}})
    plan = vllm_plan(config, tmp_path, on_gpu=False)
    argv = plan.argv
    for flag, value in (("--dtype", "bfloat16"), ("--max-model-len", "512"),
                        ("--gpu-memory-utilization", "0.3")):  # fmt: skip
        assert argv.count(flag) == 1 and argv[argv.index(flag) + 1] == value
    assert plan.env["VLLM_CPU_KVCACHE_SPACE"] == "4" and "CUDA_VISIBLE_DEVICES" not in plan.env

    plan = vllm_plan(rl_config({"seq_len": 256}), tmp_path, on_gpu=False)  # the run's own length
    assert plan.argv[plan.argv.index("--max-model-len") + 1] == "256"


def test_without_vllm_installed_the_plan_is_refused_naming_the_extra(
    tmp_path, stand_in, monkeypatch
):
    monkeypatch.setattr(plan_module, "vllm_installed", lambda: False)
    for on_gpu in (True, False):
        with pytest.raises(SetupError) as caught:
            vllm_plan(rl_config({}), tmp_path, on_gpu=on_gpu)
        assert caught.value.path == "inference"
        assert "vLLM is not installed" in caught.value.problem
        assert "trainspec[vllm]" in caught.value.fix


def test_nccl_starts_vllms_transfer_engine_and_sizes_both_sides_for_its_workers(tmp_path, stand_in):
    from trainspec.trainers.rl_run.inference_plan import served

    config = rl_config(
        {
            "weight_broadcast.type": "nccl",
            "deployment.num_infer_gpus": 2,
            "inference.vllm.tensor_parallel_size": 2,
        }
    )
    plan = vllm_plan(config, tmp_path, on_gpu=True)
    at = plan.argv.index("--weight-transfer-config")
    assert json.loads(plan.argv[at + 1]) == {"backend": "nccl"}
    resolved = served(config, plan)
    assert resolved.trainer.weight_broadcast.inference_world_size == 2
    assert resolved.orchestrator.weight_broadcast.inference_world_size == 2
    assert resolved.orchestrator.sampler.base_url == plan.base_url
    files = vllm_plan(rl_config({}), tmp_path, on_gpu=True)
    assert "--weight-transfer-config" not in files.argv  # filesystem: the reload route


def test_nccl_where_it_cannot_run_is_refused_naming_the_setting(tmp_path, stand_in):
    from trainspec.trainers.rl_run.refusals import check_launch, nccl_gpu_refusals

    config = rl_config({"weight_broadcast.type": "nccl", "deployment.num_train_gpus": 1})
    with pytest.raises(SetupError) as caught:
        vllm_plan(config, tmp_path, on_gpu=False)  # vLLM's CPU build
    assert caught.value.path == "inference.weight_broadcast.type"
    assert "receives weights over NCCL on GPUs only" in caught.value.problem
    (shared,) = nccl_gpu_refusals(config, visible=1)  # server and trainer on one GPU
    assert shared.path == "weight_broadcast.type" and "NCCL refuses two ranks" in shared.problem
    assert nccl_gpu_refusals(config, visible=2) == []
    mismatch = rl_config({"weight_broadcast.type": "nccl", "inference.weight_broadcast.type":
                          "filesystem"})  # fmt: skip
    with pytest.raises(SetupError) as caught:
        vllm_plan(mismatch, tmp_path, on_gpu=True)
    assert caught.value.path == "inference.weight_broadcast.type"
    slurm = rl_config({"weight_broadcast.type": "nccl", "slurm": {"job_name": "x"}})
    with pytest.raises(SetupError) as caught:
        check_launch(slurm, gpus=True)
    assert caught.value.path == "weight_broadcast.type" and "[slurm]" in caught.value.problem


def test_each_side_refuses_the_broadcast_it_cannot_take_part_in():
    from trainspec.trainers.wire.broadcast import broadcast_refusals

    def cfg(**fields):
        return load(
            "rl", [], {"weight_broadcast": {"type": "nccl", **fields}}
        ).config.weight_broadcast

    assert broadcast_refusals(cfg(), "cuda") == []  # the trainer on a GPU sends
    (cpu,) = broadcast_refusals(cfg(), "cpu")
    assert "trainer's CUDA GPU" in cpu.problem
    (local,) = broadcast_refusals(cfg(), "cuda", sampler="local")
    assert "samples in process" in local.problem
    assert broadcast_refusals(cfg(), "cpu", sampler="openai") == []  # the server receives
    (fp8,) = broadcast_refusals(cfg(quantize_in_weight_transfer=True), "cuda")
    assert fp8.path == "weight_broadcast.quantize_in_weight_transfer"
