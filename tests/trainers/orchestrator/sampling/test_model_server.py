"""orchestrator/sampling/model_server.py: a real model behind vLLM's completions API. OpenAISampler
against it must give what LocalSampler gives in process (greedy answers, log-probabilities,
prompt scoring), and a request it cannot honour is answered with the HTTP error a client can act
on."""

from __future__ import annotations

import shutil
import subprocess
import sys

import httpx
import pytest
import torch

from trainspec.trainers.chat.prompts import template_prompt_ids, template_stop_id
from trainspec.trainers.chat.tasks import reverse_text
from trainspec.trainers.errors import SetupError
from trainspec.trainers.orchestrator.sampling.model_server import ModelServer, main
from trainspec.trainers.orchestrator.sampling.openai_client import OpenAISampler

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def model_dir(tiny_weights):
    """The built-in model, randomly initialised, saved as a weights directory."""
    return tiny_weights(0)


@pytest.fixture(scope="module")
def local(model_dir):
    from trainspec.trainers.orchestrator.sampling.model_server import load as load_sampler

    return load_sampler(str(model_dir), "cpu")


@pytest.fixture(scope="module")
def server(model_dir):
    """The tiny model served, its weights root (`--weights-root`) the model directory's parent:
    pytest's base directory, which every tmp_path is under."""
    from trainspec.trainers.orchestrator.sampling.model_server import load as load_sampler

    sampler = load_sampler(str(model_dir), "cpu")
    served = ModelServer(sampler, "tiny", weights_root=model_dir.parent).start()
    yield served
    served.close()


@pytest.fixture(scope="module")
def prompts(tokenizer) -> list[list[int]]:
    examples = reverse_text.examples("test", 3)
    return [template_prompt_ids(tokenizer, example["messages"][:-1]) for example in examples]


def client(server, tokenizer) -> OpenAISampler:
    return OpenAISampler(server.base_url, "tiny", tokenizer, template_stop_id(tokenizer))


def test_greedy_over_http_is_the_in_process_answer(server, local, tokenizer, prompts):
    remote = client(server, tokenizer).greedy(prompts, max_tokens=6)
    here = local.greedy(prompts, max_tokens=6)
    assert [c.token_ids for c in remote] == [c.token_ids for c in here]
    for a, b in zip(remote, here, strict=True):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)


def test_sampled_logprobs_are_the_servers_own_scores(server, tokenizer, prompts):
    openai = client(server, tokenizer)
    groups = openai.sample(prompts, 2, temperature=1.0, max_tokens=5, seed=3)
    assert [len(g) for g in groups] == [2, 2, 2]
    flat = [(p, c) for p, g in zip(prompts, groups, strict=True) for c in g]
    scores = openai.score([p for p, _ in flat], [c.token_ids for _, c in flat], temperature=1.0)
    for (_, c), score in zip(flat, scores, strict=True):
        assert score == pytest.approx(c.logprobs, abs=1e-4)


def test_prompt_logprobs_are_unscaled_whatever_the_temperature_as_vllms(server, local, prompts):
    """vLLM computes prompt_logprobs from the raw logits (tests/trainers/serving/
    test_vllm_engine.py measures it); the model server answers the same."""
    body = {"model": "tiny", "prompt": prompts[0], "max_tokens": 1, "prompt_logprobs": 0}
    answers = [
        httpx.post(server.base_url + "/completions", json={**body, "temperature": t}).json()
        for t in (1.0, 0.5)
    ]
    (unscaled,) = local.score([prompts[0][:1]], [prompts[0][1:]], temperature=1.0)
    for answer in answers:
        entries = answer["choices"][0]["prompt_logprobs"][1:]
        got = [next(iter(entry.values()))["logprob"] for entry in entries]
        assert got == pytest.approx(unscaled, abs=1e-5)


def test_unseeded_requests_sample_differently(server, prompts):
    """As vLLM: without a seed every request draws anew (an environment's episodes each send
    one prompt; a fixed seed would make every episode of a group the same)."""
    body = {"model": "tiny", "prompt": prompts[0], "max_tokens": 8, "temperature": 1.0}
    answers = [httpx.post(server.base_url + "/completions", json=body).json() for _ in range(3)]
    texts = {tuple(a["choices"][0]["token_ids"]) for a in answers}
    assert len(texts) > 1
    seeded = {**body, "seed": 7}
    again = [httpx.post(server.base_url + "/completions", json=seeded).json() for _ in range(2)]
    assert again[0]["choices"] == again[1]["choices"]


def test_local_scores_equal_a_forward_pass(local, prompts):
    completion = [5, 9, 2]
    (score,) = local.score([prompts[0]], [completion], temperature=2.0)
    ids = torch.tensor([prompts[0] + completion])
    with torch.no_grad():
        logits = local.model(input_ids=ids).logits[0].float() / 2.0
    want = torch.log_softmax(logits, -1)[len(prompts[0]) - 1 + torch.arange(3), completion]
    assert score == pytest.approx(want.tolist(), abs=1e-5)


def test_the_renderers_client_generates_through_the_token_route(server, local, tokenizer):
    """The `renderers` package's own client (what verifiers' train client calls) against
    /inference/v1/generate: the greedy answer is the in-process one, token ids and
    log-probabilities included, and the reply text is parsed back."""
    import asyncio

    from openai import AsyncOpenAI
    from renderers.client import generate
    from renderers.default import DefaultRenderer

    renderer = DefaultRenderer(tokenizer)
    messages = [{"role": "system", "content": "Reverse the text."},
                {"role": "user", "content": "hello"}]  # fmt: skip

    async def ask():
        client = AsyncOpenAI(base_url=server.base_url, api_key="EMPTY")
        try:
            return await generate(
                client=client,
                renderer=renderer,
                messages=messages,
                model="tiny",
                sampling_params={"temperature": 0.0, "max_tokens": 6},
            )
        finally:
            await client.close()

    result = asyncio.run(ask())
    (want,) = local.greedy([result["prompt_ids"]], max_tokens=6)
    assert result["prompt_ids"] == list(renderer.render_ids(messages, add_generation_prompt=True))
    assert result["completion_ids"] == want.token_ids
    assert result["completion_logprobs"] == pytest.approx(want.logprobs, abs=1e-5)
    assert result["finish_reason"] in ("stop", "length")


def test_the_token_route_refuses_sampling_it_does_not_do(server):
    body = {"model": "tiny", "token_ids": [1, 2], "sampling_params": {"min_tokens": 3}}
    answer = httpx.post(server.base_url.removesuffix("/v1") + "/inference/v1/generate", json=body)
    assert answer.status_code == 400 and "min_tokens" in answer.json()["error"]["message"]


def test_models_and_health(server):
    assert httpx.get(server.base_url + "/models").json()["data"][0]["id"] == "tiny"
    assert httpx.get(server.base_url.removesuffix("/v1") + "/health").status_code == 200


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"model": "other", "prompt": [1, 2]}, 404, "is not served"),
        ({"model": "tiny", "prompt": [1, 2], "top_p": 0.5}, 400, "plain distribution"),
        ({"model": "tiny", "prompt": []}, 400, "prompt must be"),
        ({"model": "tiny", "prompt": [1], "max_tokens": 0}, 400, "max_tokens must be"),
        ({"model": "tiny", "prompt": [1], "n": "two"}, 400, "n must be a number"),
    ],
)
def test_a_request_it_cannot_honour_is_an_http_error(server, body, status, words):
    answer = httpx.post(server.base_url + "/completions", json=body)
    assert answer.status_code == status
    assert words in answer.json()["error"]["message"]


def test_update_weights_loads_new_weights(server, tokenizer, model_dir, tmp_path, prompts):
    from transformers import AutoModelForCausalLM

    openai = client(server, tokenizer)
    before = openai.greedy(prompts[:1], max_tokens=4)[0].logprobs
    changed = AutoModelForCausalLM.from_pretrained(model_dir)
    with torch.no_grad():
        for param in changed.parameters():
            param.mul_(1.5)
    changed.save_pretrained(tmp_path)
    root = server.base_url.removesuffix("/v1")
    assert httpx.post(root + "/update_weights", json={"path": str(tmp_path)}).status_code == 200
    after = openai.greedy(prompts[:1], max_tokens=4)[0].logprobs
    assert after != pytest.approx(before, abs=1e-4)
    httpx.post(root + "/update_weights", json={"path": str(model_dir)})  # as the others expect


def test_score_of_a_server_without_prompt_logprobs_is_a_setup_error(tokenizer, canned_server):
    url, _ = canned_server({"choices": [{"index": 0, "text": ""}]})
    sampler = OpenAISampler(url, "m", tokenizer, 0, field="orchestrator.algo.teacher.base_url")
    with pytest.raises(SetupError) as caught:
        sampler.score([[1, 2]], [[3]], temperature=1.0)
    assert caught.value.path == "orchestrator.algo.teacher.base_url"
    assert "prompt_logprobs" in caught.value.problem


def test_the_command_refuses_a_missing_model_without_a_traceback(tmp_path, capsys):
    assert main([str(tmp_path / "nowhere"), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "model: error:" in err and "cannot be loaded" in err and "Traceback" not in err


@pytest.mark.parametrize("flag", [False, True], ids=["no-weights-root", "weights-root"])
def test_the_command_serves_until_stopped(model_dir, tmp_path, flag):
    """`python -m trainspec.trainers.orchestrator.sampling.model_server` as a user starts it: it
    says where it serves, and where from it reloads weights: nowhere, unless `--weights-root`
    names a directory (the model's own siblings are refused)."""
    root = tmp_path.resolve()
    process = subprocess.Popen(
        [sys.executable, "-m", "trainspec.trainers.orchestrator.sampling.model_server",
         str(model_dir), "--name", "t", "--port", "0", "--device", "cpu",
         *(["--weights-root", str(tmp_path)] if flag else [])],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("serving 't' at http://127.0.0.1:")
        url = line.split(" at ")[1].strip()
        said = f"under {root}" if flag else "nowhere (no --weights-root)"
        assert process.stdout.readline() == f"/update_weights loads weights {said}\n"
        assert httpx.get(url + "/models", timeout=60).json()["data"][0]["id"] == "t"
        sibling = httpx.post(
            url.removesuffix("/v1") + "/update_weights", json={"path": str(model_dir)}, timeout=60
        )
        assert sibling.status_code == 403
        assert "--weights-root" in sibling.json()["error"]["message"]
        if flag:  # a directory under the root loads
            shutil.copytree(model_dir, tmp_path / "step_1")
            loaded = httpx.post(
                url.removesuffix("/v1") + "/update_weights",
                json={"path": str(tmp_path / "step_1")},
                timeout=60,
            )
            assert loaded.status_code == 200, loaded.text
    finally:
        process.terminate()
        process.wait(timeout=60)
