"""The samplers: LocalSampler on the built-in tiny model (shapes, stops, seeds, log-probabilities
checked against a separate forward pass, greedy, weight reloads) and OpenAISampler against a
fake vLLM completions server in a thread (request body, parsing, grouping, errors, reloads)."""

from __future__ import annotations

import copy
import json
import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler

import pytest
import torch
from helpers.families import FAMILIES, VOCAB, tiny_model
from safetensors.torch import save_file

from trainspec.trainers.chat.prompts import template_prompt_ids, template_stop_id
from trainspec.trainers.chat.tasks import reverse_text
from trainspec.trainers.errors import SetupError
from trainspec.trainers.orchestrator.sampling import local_sampler as sampler_module
from trainspec.trainers.orchestrator.sampling.http_server import HttpServer
from trainspec.trainers.orchestrator.sampling.local_sampler import LocalSampler
from trainspec.trainers.orchestrator.sampling.openai_client import OpenAISampler
from trainspec.trainers.orchestrator.sampling.sampler import Completion

torch.set_num_threads(1)
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def model():
    """The built-in model, randomly initialised, with the cache off as the loader leaves it."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from trainspec.trainers.builtin import builtin_model_dir

    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(builtin_model_dir("builtin:tiny-qwen3"))
    config.use_cache = False
    return AutoModelForCausalLM.from_config(config)


@pytest.fixture(scope="module")
def prompts(tokenizer) -> list[list[int]]:
    """Chat prompts of different lengths, so the batch is left-padded."""
    examples = reverse_text.examples("test", 4)
    ids = [template_prompt_ids(tokenizer, example["messages"][:-1]) for example in examples]
    assert len({len(p) for p in ids}) > 1
    return ids


@pytest.fixture(scope="module")
def sampler(model, tokenizer):
    return LocalSampler(model, tokenizer, template_stop_id(tokenizer), CPU)


def reference_logprobs(model, prompt: list[int], completion: list[int], temperature: float):
    """log softmax(logits / temperature) of each completion token, from one unpadded forward."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion])).logits[0].float()
    predicting = logits[len(prompt) - 1 : -1] / temperature
    chosen = torch.tensor(completion)[:, None]
    return torch.log_softmax(predicting, dim=-1).gather(1, chosen).squeeze(1)


def check_stops(completion: Completion, stop: int, max_tokens: int) -> None:
    assert len(completion.logprobs) == len(completion.token_ids) >= 1
    if completion.finished:
        assert completion.token_ids[-1] == stop and stop not in completion.token_ids[:-1]
    else:
        assert len(completion.token_ids) == max_tokens and stop not in completion.token_ids


def test_shapes_stops_and_seeds(sampler, prompts, tokenizer):
    stop = template_stop_id(tokenizer)
    rng_before = torch.get_rng_state()
    groups = sampler.sample(prompts, 16, temperature=1.0, max_tokens=16, seed=3)
    assert torch.equal(torch.get_rng_state(), rng_before)  # the caller's random state is kept
    assert [len(group) for group in groups] == [16] * len(prompts)
    flat = [c for group in groups for c in group]
    for completion in flat:
        check_stops(completion, stop, 16)
        assert completion.text == tokenizer.decode(completion.token_ids, skip_special_tokens=True)
        assert all(lp <= 0 for lp in completion.logprobs)
    # An untrained model draws the stop token now and then: both endings occur.
    assert any(c.finished for c in flat) and not all(c.finished for c in flat)

    again = sampler.sample(prompts, 16, temperature=1.0, max_tokens=16, seed=3)
    assert again == groups
    other = sampler.sample(prompts, 16, temperature=1.0, max_tokens=16, seed=4)
    assert [c.token_ids for g in other for c in g] != [c.token_ids for c in flat]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_logprobs_equal_a_separate_forward_pass(sampler, model, prompts, temperature):
    groups = sampler.sample(prompts, 3, temperature=temperature, max_tokens=12, seed=11)
    for prompt, group in zip(prompts, groups, strict=True):
        for completion in group:
            expected = reference_logprobs(model, prompt, completion.token_ids, temperature)
            got = torch.tensor(completion.logprobs)
            assert torch.allclose(got, expected, atol=1e-4, rtol=0), (got - expected).abs().max()
    if temperature != 1.0:  # the temperature matters: at 1.0 the numbers differ
        prompt, completion = prompts[0], groups[0][0]
        at_one = reference_logprobs(model, prompt, completion.token_ids, 1.0)
        assert (at_one - torch.tensor(completion.logprobs)).abs().max() > 1e-2


def test_greedy_is_the_argmax_continuation(sampler, model, prompts, tokenizer):
    stop = template_stop_id(tokenizer)
    completions = sampler.greedy(prompts, max_tokens=8)
    assert len(completions) == len(prompts)
    for prompt, completion in zip(prompts, completions, strict=True):
        ids = list(prompt)
        with torch.no_grad():
            for _ in range(8):
                ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
                if ids[-1] == stop:
                    break
        assert completion.token_ids == ids[len(prompt) :]
        check_stops(completion, stop, 8)
        expected = reference_logprobs(model, prompt, completion.token_ids, 1.0)
        assert torch.allclose(torch.tensor(completion.logprobs), expected, atol=1e-4, rtol=0)


def test_checkpoint_generation_defaults_do_not_change_sampling(model, tokenizer, prompts):
    """A Hub generation_config (here top_k=1, i.e. always the argmax) is not applied."""
    sampler = LocalSampler(model, tokenizer, template_stop_id(tokenizer), CPU)
    saved = model.generation_config
    model.generation_config = copy.deepcopy(saved)
    model.generation_config.top_k = 1
    model.generation_config.do_sample = True
    try:
        model.train()
        group = sampler.sample(prompts[:1], 6, temperature=1.0, max_tokens=6, seed=0)[0]
        assert model.training and model.generation_config.top_k == 1  # both restored
    finally:
        model.generation_config = saved
        model.eval()
    assert len({tuple(c.token_ids) for c in group}) > 1


def test_max_batch_chunks_keep_the_grouping(model, tokenizer, prompts):
    sampler = LocalSampler(model, tokenizer, template_stop_id(tokenizer), CPU, max_batch=4)
    groups = sampler.sample(prompts[:3], 2, temperature=1.0, max_tokens=4, seed=0)
    assert [len(g) for g in groups] == [2, 2, 2]
    for prompt, group in zip(prompts, groups, strict=False):
        for completion in group:
            expected = reference_logprobs(model, prompt, completion.token_ids, 1.0)
            assert torch.allclose(torch.tensor(completion.logprobs), expected, atol=1e-4, rtol=0)


def perturbed_weights(model) -> dict[str, torch.Tensor]:
    """The model's weights under HF names, plus noise, the tied lm_head written once."""
    torch.manual_seed(1)
    state = {
        name: (tensor + 0.01 * torch.randn_like(tensor)).contiguous()
        for name, tensor in model.state_dict().items()
        if name != "lm_head.weight"
    }
    return state


def test_load_weights_in_place(model, tokenizer, tmp_path):
    model = copy.deepcopy(model)
    sampler = LocalSampler(model, tokenizer, template_stop_id(tokenizer), CPU)
    weights = perturbed_weights(model)
    save_file(weights, str(tmp_path / "model.safetensors"))
    before = {name: param for name, param in model.named_parameters()}
    sampler.load_weights(tmp_path)
    for name, param in model.named_parameters():
        assert param is before[name]  # the same tensors, new values
        assert torch.equal(param, weights[name])
    assert torch.equal(model.lm_head.weight, weights["model.embed_tokens.weight"])  # still tied


def test_load_weights_from_shards(model, tokenizer, tmp_path):
    model = copy.deepcopy(model)
    weights = perturbed_weights(model)
    names = sorted(weights)
    halves = {
        "model-00001-of-00002.safetensors": names[::2],
        "model-00002-of-00002.safetensors": names[1::2],
    }
    for filename, part in halves.items():
        save_file({n: weights[n] for n in part}, str(tmp_path / filename))
    weight_map = {n: filename for filename, part in halves.items() for n in part}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    LocalSampler(model, tokenizer, template_stop_id(tokenizer), CPU).load_weights(tmp_path)
    for name, param in model.named_parameters():
        if name in weights:
            assert torch.equal(param, weights[name])


def test_load_weights_refuses_what_does_not_fit(model, tokenizer, tmp_path):
    sampler = LocalSampler(copy.deepcopy(model), tokenizer, template_stop_id(tokenizer), CPU)
    with pytest.raises(SetupError, match="neither model.safetensors"):
        sampler.load_weights(tmp_path)
    weights = perturbed_weights(model)
    del weights["model.norm.weight"]
    weights["model.extra.weight"] = torch.zeros(2)
    save_file(weights, str(tmp_path / "model.safetensors"))
    with pytest.raises(SetupError) as caught:
        sampler.load_weights(tmp_path)
    assert "model.norm.weight" in caught.value.problem
    assert "model.extra.weight" in caught.value.problem


def test_a_tiny_temperature_samples_the_argmax(sampler, prompts):
    """The temperature reaches the draw itself, not only the reported log-probabilities."""
    greedy = [c.token_ids for c in sampler.greedy(prompts, max_tokens=6)]
    groups = sampler.sample(prompts, 2, temperature=1e-3, max_tokens=6, seed=0)
    assert [[c.token_ids for c in g] for g in groups] == [[ids, ids] for ids in greedy]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_prompt_is_prefilled_once_with_the_plain_samples(family, monkeypatch):
    """n completions of a prompt share one prefill (prefill_shared_prompts): on every family,
    with sliding windows shorter than some prompts and left padding, the tokens and
    log-probabilities equal those of generate's own num_return_sequences=n."""
    model = tiny_model(family)
    stop = 2
    generator = torch.Generator().manual_seed(1)
    lengths = [5, 23, 1 + 1, 12]  # longer and shorter than the windows of 16; one of 2 tokens
    prompts = [torch.randint(3, VOCAB, (k,), generator=generator).tolist() for k in lengths]
    sampler = LocalSampler(model, StubTokenizer(), stop, CPU)
    prefilled = []
    real_prefill = sampler_module.prefill_shared_prompts

    def counting(model, input_ids, attention_mask, n):
        prefilled.append(input_ids.size(0))
        return real_prefill(model, input_ids, attention_mask, n)

    monkeypatch.setattr(sampler_module, "prefill_shared_prompts", counting)
    shared = sampler.sample(prompts, 4, temperature=1.0, max_tokens=10, seed=7)
    assert prefilled == [len(prompts)]  # the prompts' rows, not prompts x n
    monkeypatch.setattr(sampler_module, "shares_prompt_prefill", lambda *_: False)
    plain = sampler.sample(prompts, 4, temperature=1.0, max_tokens=10, seed=7)
    for mine, theirs in zip(sum(shared, []), sum(plain, []), strict=True):
        assert mine.token_ids == theirs.token_ids
        assert mine.logprobs == pytest.approx(theirs.logprobs, abs=1e-4)


class StubTokenizer:
    """Decodes ids as their numbers (the family models have no tokenizer of their own)."""

    pad_token_id = 0

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(map(str, ids))


# --- OpenAISampler against a fake vLLM server ------------------------------------------------

STOP = 258


def fake_choices(body: dict) -> list[dict]:
    """vLLM's answer shape: prompt-major choices, logprobs with "token_id:<id>" tokens.

    Sample j of prompt i is [100 + i, 110 + j] then the stop token for even j; odd j run into
    max_tokens (2) instead. Returned in reverse order: the client must sort by index."""
    choices = []
    for i, _ in enumerate(body["prompt"]):
        for j in range(body["n"]):
            ids = [100 + i, 110 + j] + ([STOP] if j % 2 == 0 else [])
            logprobs = [-(i + 1) - j / 10 - k / 100 for k in range(len(ids))]
            choices.append(
                {
                    "index": len(choices),
                    "text": "".join(chr(t) for t in ids[:2]),
                    "logprobs": {
                        "text_offset": list(range(len(ids))),
                        "token_logprobs": logprobs,
                        "tokens": [f"token_id:{t}" for t in ids],
                        "top_logprobs": [
                            {f"token_id:{t}": lp} for t, lp in zip(ids, logprobs, strict=True)
                        ],
                    },
                    "finish_reason": "stop" if j % 2 == 0 else "length",
                    "stop_reason": STOP if j % 2 == 0 else None,
                    "prompt_logprobs": None,
                }
            )
    return choices[::-1]


class FakeServer:
    """A threading HTTP server on a free port; `answers` is a queue of (status, body) overrides
    (status 0: the connection is reset unanswered), else /v1/completions answers like vLLM and
    any other path with {}."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict, dict]] = []
        self.answers: list[tuple[int, object]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append((self.path, body, dict(self.headers)))
                if fake.answers:
                    status, answer = fake.answers.pop(0)
                    if status == 0:  # an RST instead of an answer (SO_LINGER 0, then close)
                        linger = struct.pack("ii", 1, 0)
                        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                        self.close_connection = True
                        self.connection.close()
                        return
                elif self.path == "/v1/completions":
                    status, answer = (
                        200,
                        {"object": "text_completion", "choices": fake_choices(body)},
                    )
                else:
                    status, answer = 200, {}
                data = answer.encode() if isinstance(answer, str) else json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.httpd = HttpServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    fake = FakeServer()
    yield fake
    fake.close()


def openai_sampler(base_url: str, tokenizer, **kwargs) -> OpenAISampler:
    kwargs = {"retries": 1, "backoff_s": 0.01, **kwargs}
    return OpenAISampler(base_url, "tiny", tokenizer, STOP, **kwargs)


def test_openai_request_parsing_and_grouping(server, tokenizer):
    sampler = openai_sampler(server.base_url, tokenizer, api_key="secret")
    groups = sampler.sample([[1, 2, 3], [4, 5]], 3, temperature=0.7, max_tokens=2, seed=5)
    sampler.close()
    path, body, headers = server.requests[0]
    assert path == "/v1/completions"
    assert headers["Authorization"] == "Bearer secret"
    assert body["prompt"] == [[1, 2, 3], [4, 5]]
    assert {k: body[k] for k in ("model", "n", "temperature", "max_tokens", "seed")} == {
        "model": "tiny",
        "n": 3,
        "temperature": 0.7,
        "max_tokens": 2,
        "seed": 5,
    }
    assert body["stop_token_ids"] == [STOP] and body["logprobs"] >= 0
    assert body["return_tokens_as_token_ids"] is True and body["skip_special_tokens"] is False
    assert (body["top_p"], body["top_k"], body["min_p"]) == (1.0, -1, 0.0)

    assert [len(g) for g in groups] == [3, 3]
    for i, group in enumerate(groups):
        for j, completion in enumerate(group):
            finished = j % 2 == 0
            ids = [100 + i, 110 + j] + ([STOP] if finished else [])
            assert completion.token_ids == ids
            assert completion.logprobs == pytest.approx(
                [-(i + 1) - j / 10 - k / 100 for k in range(len(ids))]
            )
            assert completion.finished is finished
            assert completion.text == chr(100 + i) + chr(110 + j)


def test_openai_greedy(server, tokenizer):
    completions = openai_sampler(server.base_url, tokenizer).greedy([[1], [2], [3]], max_tokens=2)
    body = server.requests[0][1]
    assert body["temperature"] == 0.0 and body["n"] == 1
    assert [c.token_ids[0] for c in completions] == [100, 101, 102]


def test_openai_load_weights(server, tokenizer, tmp_path):
    openai_sampler(server.base_url, tokenizer).load_weights(tmp_path)
    assert server.requests == []  # no reload_path: the server watches the directory itself
    sampler = openai_sampler(server.base_url, tokenizer, reload_path="/update_weights")
    sampler.load_weights(tmp_path)
    path, body, _ = server.requests[0]
    assert (path, body) == ("/update_weights", {"path": str(tmp_path)})
    server.answers.append((404, {"detail": "Not Found"}))
    with pytest.raises(SetupError) as caught:
        sampler.load_weights(tmp_path)
    assert caught.value.path == "sampler.reload_path"


def test_openai_dead_port_is_a_setup_error(tokenizer):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sampler = openai_sampler(f"http://127.0.0.1:{port}/v1", tokenizer)
    with pytest.raises(SetupError) as caught:
        sampler.sample([[1]], 1, temperature=1.0, max_tokens=2, seed=0)
    assert caught.value.path == "sampler.base_url"
    assert "cannot reach" in caught.value.problem and "start the server" in caught.value.fix


def test_openai_http_500_is_a_setup_error_without_retry(server, tokenizer):
    server.answers.append((500, {"object": "error", "message": "boom"}))
    with pytest.raises(SetupError) as caught:
        openai_sampler(server.base_url, tokenizer).sample(
            [[1]], 1, temperature=1, max_tokens=2, seed=0
        )
    assert caught.value.path == "sampler.base_url"
    assert "HTTP 500" in caught.value.problem and "boom" in caught.value.problem
    assert len(server.requests) == 1


def test_openai_retries_a_reset_connection(server, tokenizer):
    server.answers.append((0, None))
    groups = openai_sampler(server.base_url, tokenizer).sample(
        [[1]], 2, temperature=1.0, max_tokens=2, seed=0
    )
    assert len(server.requests) == 2 and [len(g) for g in groups] == [2]


def test_openai_retries_a_server_still_starting(server, tokenizer):
    server.answers.append((503, "starting"))
    groups = openai_sampler(server.base_url, tokenizer).sample(
        [[1]], 2, temperature=1.0, max_tokens=2, seed=0
    )
    assert len(server.requests) == 2 and [len(g) for g in groups] == [2]


@pytest.mark.parametrize(
    "answer",
    [
        "not json",
        {"choices": []},
        {"choices": [{"index": 0, "logprobs": {"tokens": ["a"], "token_logprobs": [-1.0]}}]},
        {"choices": [{"index": 0, "logprobs": {"tokens": ["token_id:1"], "token_logprobs": []}}]},
    ],
)
def test_openai_malformed_answers(server, tokenizer, answer):
    server.answers.append((200, answer))
    with pytest.raises(SetupError) as caught:
        openai_sampler(server.base_url, tokenizer).sample(
            [[1]], 1, temperature=1, max_tokens=2, seed=0
        )
    assert caught.value.path == "sampler.base_url"
