"""trainspec against the real vLLM engine (its CPU build here, `make install`): the server
`[inference]` starts (serving/vllm_plan.py, inference_server.py), the orchestrator's client of
it (orchestrator/sampling/openai_client.py) and the weight reload through vLLM's own routes
(vllm_reload.py).

One server for the module (about a minute to start on two busy cores), started on a tiny
random Qwen3 saved as a user's checkpoint is (its output layer tied to the embeddings, written
once), then fed broadcasts as the trainer writes them (ckpt/hf_export.py, `untie`: the tied
output layer under its own name too): "A" (step_0, the same weights) and "B" (another seed).
The Hugging Face model on the same weights is the reference for every log-prob: in float32 on
CPU vLLM agrees with it to ~1e-6 (measured), and TOLERANCE leaves a wide margin.
The tests run in file order; the last ones break and then stop the server.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import httpx
import pytest
import torch
from helpers.ports import free_port

from trainspec.generated.inference import InferenceConfig
from trainspec.trainers.builtin import builtin_model_dir
from trainspec.trainers.chat.prompts import template_stop_id
from trainspec.trainers.ckpt.hf_export import export_weights
from trainspec.trainers.errors import RunError, SetupError
from trainspec.trainers.orchestrator.sampling.engine_load import metrics_reader, server_root
from trainspec.trainers.orchestrator.sampling.openai_client import OpenAISampler
from trainspec.trainers.serving.inference_server import InferenceServer
from trainspec.trainers.serving.vllm_plan import RELOAD_PATH, server_plan, vllm_installed

pytestmark = pytest.mark.skipif(
    not vllm_installed() and not os.environ.get("CI"),
    reason="vLLM is not installed (make install installs it)",
)

READY_S = 900.0  # eager: nothing to compile, but two busy cores are slow
TOLERANCE = 1e-4  # |vLLM log-prob - Hugging Face log-prob|, float32 on both sides
SEQ_LEN = 256
SERVED = "tiny"


def random_model(seed: int):
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(seed)
    config = AutoConfig.from_pretrained(builtin_model_dir("builtin:tiny-qwen3"))
    return AutoModelForCausalLM.from_config(config).to(torch.float32)


def save_checkpoint(path: Path, seed: int) -> Path:
    """The built-in tiny Qwen3's config and tokenizer with random weights of `seed`, saved by
    transformers (the tied output layer written once)."""
    shutil.copytree(builtin_model_dir("builtin:tiny-qwen3"), path)
    random_model(seed).save_pretrained(path)
    return path


def save_broadcast(path: Path, seed: int) -> Path:
    """The same weights as the trainer broadcasts them: every name of a tied weight."""
    shutil.copytree(builtin_model_dir("builtin:tiny-qwen3"), path)
    export_weights(random_model(seed), path, None, is_main=True, untie=True)
    return path


def plan_for(model: Path, run_dir: Path, port: int):
    inference = InferenceConfig.model_validate(
        {
            "server": {"port": port},
            "vllm": {"enforce_eager": True},
        }  # no compile warm-up: ~15 s less
    )
    return server_plan(
        inference, model=str(model), served_name=SERVED, infer_gpus=0, run_dir=run_dir,
        command="rl", seq_len=SEQ_LEN, on_gpu=False,
    )  # fmt: skip


class Engine:
    def __init__(self, root: Path) -> None:
        from transformers import AutoTokenizer

        start = save_checkpoint(root / "checkpoint", seed=0)
        self.a = save_broadcast(root / "broadcasts" / "step_0", seed=0)
        self.b = save_broadcast(root / "broadcasts" / "step_1", seed=1)
        self.tokenizer = AutoTokenizer.from_pretrained(start)
        self.stop_id = template_stop_id(self.tokenizer)
        self.plan = plan_for(start, root, free_port())
        self.server = InferenceServer(self.plan).start()
        self.server.wait_ready(READY_S, lambda: False)
        self.sampler = OpenAISampler(
            self.plan.base_url, SERVED, self.tokenizer, self.stop_id, reload_path=RELOAD_PATH
        )
        self.prompts = [self.tokenizer.encode(text) for text in ("hello there", "reverse: abc")]

    def hf(self, weights: Path):
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM.from_pretrained(weights, dtype=torch.float32).eval()

    def root(self) -> str:
        return self.plan.base_url.removesuffix("/v1")


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    engine = Engine(tmp_path_factory.mktemp("vllm"))
    yield engine
    engine.sampler.close()
    engine.server.stop()


def hf_logprobs(model, prompt: list[int], completion: list[int], temperature: float):
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float() / temperature
    picked = torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion)[:, None])
    return picked[:, 0].tolist()


def test_the_server_listens_on_loopback_and_serves_the_model(engine):
    argv = engine.plan.argv
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert engine.plan.base_url.startswith("http://127.0.0.1:")
    models = httpx.get(f"{engine.plan.base_url}/models", timeout=30).json()
    assert [m["id"] for m in models["data"]] == [SERVED]


def test_sampled_tokens_and_logprobs_are_the_hf_models(engine):
    # 160 tokens of a random model over a 260-token vocabulary: most completions meet the stop
    groups = engine.sampler.sample(engine.prompts, 4, temperature=1.0, max_tokens=160, seed=7)
    model = engine.hf(engine.a)
    compared = 0
    for prompt, group in zip(engine.prompts, groups, strict=True):
        assert len(group) == 4
        for completion in group:
            ids = completion.token_ids  # up to and including the stop token, as LocalSampler
            assert engine.stop_id not in ids[:-1]
            assert completion.finished == (ids[-1:] == [engine.stop_id])
            assert len(completion.logprobs) == len(completion.token_ids)
            if not completion.token_ids:
                continue
            expected = hf_logprobs(model, prompt, completion.token_ids, 1.0)
            assert (
                max(abs(a - b) for a, b in zip(completion.logprobs, expected, strict=True))
                < TOLERANCE
            )
            compared += len(expected)
    assert compared > 20
    finished = sum(c.finished for group in groups for c in group)
    assert 0 < finished < 8, finished  # the stop checks above saw both kinds of completion


def test_scored_tokens_are_the_hf_models_unscaled_whatever_the_temperature(engine):
    """vLLM's prompt_logprobs are of the raw distribution: the request's temperature scales
    the sampled tokens' log-probs only (--logprobs-mode processed_logprobs), not these. So the
    sampler scores at temperature 1 and refuses another (openai_client.py)."""
    completions = [[5, 6, 7, 8], [9, 10]]
    model = engine.hf(engine.a)
    scored = engine.sampler.score(engine.prompts, completions, temperature=1.0)
    for prompt, completion, got in zip(engine.prompts, completions, scored, strict=True):
        raw = hf_logprobs(model, prompt, completion, 1.0)
        assert max(abs(a - b) for a, b in zip(got, raw, strict=True)) < TOLERANCE
    prompt, completion = engine.prompts[0], completions[0]
    body = {"model": SERVED, "prompt": prompt + completion, "max_tokens": 1, "temperature": 0.7,
            "prompt_logprobs": 0}  # fmt: skip
    answer = httpx.post(f"{engine.plan.base_url}/completions", json=body, timeout=60).json()
    entries = answer["choices"][0]["prompt_logprobs"][len(prompt) :]
    got = [entry[str(token)]["logprob"] for entry, token in zip(entries, completion, strict=True)]
    raw = hf_logprobs(model, prompt, completion, 1.0)
    scaled = hf_logprobs(model, prompt, completion, 0.7)
    assert max(abs(a - b) for a, b in zip(got, raw, strict=True)) < TOLERANCE
    assert max(abs(a - b) for a, b in zip(raw, scaled, strict=True)) > 100 * TOLERANCE
    with pytest.raises(SetupError) as caught:
        engine.sampler.score(engine.prompts, completions, temperature=0.7)
    assert "unscaled" in caught.value.problem


def test_the_kv_cache_usage_is_read_from_the_real_metrics(engine):
    with httpx.Client(timeout=30) as client:
        load = metrics_reader([server_root(engine.plan.base_url)], client)()
    assert load is not None and 0.0 <= load.kv_usage <= 1.0
    assert load.capacity_tokens is not None and load.capacity_tokens >= SEQ_LEN


def test_a_verifiers_episode_plays_on_the_engines_token_route(engine):
    """verifiers' train client renders the taskset's chat and calls /inference/v1/generate
    (--enable-scale-out): the episode's prompt is the chat template's, and its sampled tokens
    carry the served model's log-probs of them."""
    pytest.importorskip("verifiers", reason="the envs extra: pip install 'trainspec[envs]'")
    from trainspec.trainers.chat.prompts import template_prompt_ids
    from trainspec.trainers.chat.tasks import reverse_text
    from trainspec.trainers.orchestrator.environments.verifiers_env import EnvPlayer, EnvTask

    player = EnvPlayer(engine.tokenizer, None, max_inflight=None)
    try:
        env = {"taskset": {"id": "trainspec-reverse-text"},
               "agent": {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}}}  # fmt: skip
        task = EnvTask.from_env(env, "orchestrator.train.source[0].env", player, seed=0)
        prompts = task.first(2)
        played = task.rollouts(prompts, 2, engine.sampler, temperature=1.0, max_tokens=12, seed=0)
    finally:
        player.close()
    model = engine.hf(engine.a)
    sampled = 0
    for prompt, (group, rewards) in zip(prompts, played, strict=True):
        (text,) = prompt.task.data.texts
        messages = [{"role": "system", "content": reverse_text.SYSTEM_PROMPT},
                    {"role": "user", "content": text}]  # fmt: skip
        assert len(group) == 2 and len(rewards) == 2
        for completion in group:
            assert completion.prompt_ids == template_prompt_ids(engine.tokenizer, messages)
            assert completion.token_ids and all(completion.mask)
            assert len(completion.logprobs) == len(completion.token_ids)
            expected = hf_logprobs(model, completion.prompt_ids, completion.token_ids, 1.0)
            assert (
                max(abs(a - b) for a, b in zip(completion.logprobs, expected, strict=True))
                < TOLERANCE
            )
            sampled += len(expected)
    assert sampled >= 8


def served_logprobs(engine) -> list[list[float]]:
    """The server's log-probs of fixed tokens after each prompt: which weights it serves."""
    return engine.sampler.score(engine.prompts, [[5, 6, 7, 8], [9, 10]], temperature=1.0)


def hf_scores(engine, weights: Path) -> list[list[float]]:
    model = engine.hf(weights)
    return [
        hf_logprobs(model, prompt, completion, 1.0)
        for prompt, completion in zip(engine.prompts, [[5, 6, 7, 8], [9, 10]], strict=True)
    ]


def gap(a: list[list[float]], b: list[list[float]]) -> float:
    return max(
        abs(x - y)
        for row_a, row_b in zip(a, b, strict=True)
        for x, y in zip(row_a, row_b, strict=True)
    )


def test_a_reload_switches_the_served_weights_and_back(engine):
    """The weights of A, then B (step_1), then A again (a copy named step_2): each time the
    served log-probs are the HF model's on those weights, and the served weight version is the
    step's."""
    expected = {"a": hf_scores(engine, engine.a), "b": hf_scores(engine, engine.b)}
    assert gap(expected["a"], expected["b"]) > 100 * TOLERANCE  # the check can fail
    assert gap(served_logprobs(engine), expected["a"]) < TOLERANCE
    engine.sampler.load_weights(engine.b)
    assert gap(served_logprobs(engine), expected["b"]) < TOLERANCE
    assert httpx.get(f"{engine.root()}/weight_info", timeout=30).json() == {
        "weight_version": "step_1"
    }
    again = engine.a.parent / "step_2"
    shutil.copytree(engine.a, again)
    engine.sampler.load_weights(again)
    assert gap(served_logprobs(engine), expected["a"]) < TOLERANCE
    info = httpx.get(f"{engine.root()}/weight_info", timeout=30).json()
    assert info["weight_version"] == "step_2"
    assert httpx.get(f"{engine.root()}/is_paused", timeout=30).json()["is_paused"] is False


def test_a_failed_reload_names_the_step_and_leaves_the_server_paused(engine, tmp_path):
    """A weights file cut short (a copy that did not finish): vLLM refuses it; the error names
    the step and the server stays paused (no partly loaded policy samples). A good reload then
    restores it."""
    bad = tmp_path / "step_3"
    shutil.copytree(engine.b, bad)
    data = (bad / "model.safetensors").read_bytes()
    (bad / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(RunError) as caught:
        engine.sampler.load_weights(bad)
    assert caught.value.path == "sampler.reload_path"
    assert "step_3" in caught.value.problem and "stays paused" in caught.value.problem
    assert httpx.get(f"{engine.root()}/is_paused", timeout=30).json()["is_paused"] is True
    restored = engine.a.parent / "step_4"
    shutil.copytree(engine.a, restored)
    engine.sampler.load_weights(restored)
    assert gap(served_logprobs(engine), hf_scores(engine, engine.a)) < TOLERANCE


def test_a_tied_output_layer_named_once_is_left_behind_so_broadcasts_name_it(engine, tmp_path):
    """B saved as transformers saves it (the tied output layer written once, under the
    embeddings' name): after the reload the server answers neither A's nor B's log-probs, but
    B's body under the output layer it had. Hence the broadcasts' `untie`: B as the trainer
    broadcasts it is served exactly (test_a_reload_switches_the_served_weights_and_back)."""
    once = save_checkpoint(tmp_path / "step_5", seed=1)
    expected = {"a": hf_scores(engine, engine.a), "b": hf_scores(engine, engine.b)}
    assert gap(served_logprobs(engine), expected["a"]) < TOLERANCE  # restored by the last test
    engine.sampler.load_weights(once)
    served = served_logprobs(engine)
    assert gap(served, expected["b"]) > 100 * TOLERANCE
    assert gap(served, expected["a"]) > 100 * TOLERANCE
    engine.sampler.load_weights(engine.b)
    assert gap(served_logprobs(engine), expected["b"]) < TOLERANCE


def live_group(pgid: int) -> list[int]:
    """The processes of group `pgid` that have not ended (a zombie waiting for init has)."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append(int(entry))
    return found


def test_stop_ends_every_process_of_the_server(engine):
    """SIGTERM to the server's process group (vLLM's engine core included); the server reaped,
    the rest of its group ended (init reaps those)."""
    pgid = engine.server.server.process.pid
    assert len(live_group(pgid)) > 1  # the engine's processes beside the server: can fail
    engine.server.stop()
    assert engine.server.poll() is not None
    deadline = time.monotonic() + 30  # a SIGKILLed process takes a moment to end
    while live_group(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert live_group(pgid) == []


def test_a_server_that_cannot_load_its_model_is_reported_with_its_log(tmp_path):
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    server = InferenceServer(plan_for(empty, tmp_path, free_port())).start()
    try:
        with pytest.raises(SetupError) as caught:
            server.wait_ready(READY_S, lambda: False)
    finally:
        server.stop()
    assert caught.value.path == "inference"
    assert "exited with code" in caught.value.problem
    assert str(empty) in caught.value.problem  # the log's end says which model it could not load
