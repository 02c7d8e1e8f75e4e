"""The token route in front of a server sampler (orchestrator/environments/token_route.py):
verifiers' train client reads each sampled token as "token_id:N", which vLLM's
/inference/v1/generate names by `token_id` only. The upstream here is a canned server that
answers the body vLLM 0.32's CPU build gave (copied from a real answer) and records headers;
tests/trainers/serving/test_vllm_engine.py plays a whole episode through it on the real
engine."""

from __future__ import annotations

import copy
import socket

import httpx

from trainspec.trainers.orchestrator.environments.token_route import TokenRoute, renderers_shape

VLLM_ANSWER = {  # vLLM 0.32, output_mode "tokens", two sampled tokens (trimmed to what matters)
    "request_id": "generate-tokens-1", "model": "tiny", "output_mode": "tokens",
    "choices": [{
        "index": 0, "finish_reason": "length", "token_ids": [207, 129],
        "weight_versions": [{"version": "step_3", "start": 0, "end": 2}],
        "logprobs": {"content": [
            {"token_id": 207, "logprob": -5.94, "rank": 243,
             "top_logprobs": [{"token_id": 207, "logprob": -5.94, "rank": 243}]},
            {"token_id": 129, "logprob": -5.33, "rank": 36,
             "top_logprobs": [{"token_id": 129, "logprob": -5.33, "rank": 36}]},
        ]},
    }],
}  # fmt: skip


def test_each_sampled_token_is_named_as_renderers_reads_it_and_nothing_else_changes():
    shaped = renderers_shape(copy.deepcopy(VLLM_ANSWER))
    content = shaped["choices"][0]["logprobs"]["content"]
    assert [entry["token"] for entry in content] == ["token_id:207", "token_id:129"]
    for entry in content:
        del entry["token"]
    assert shaped == VLLM_ANSWER


def test_an_answer_already_in_renderers_shape_passes_unchanged():
    answer = {"choices": [{"token_ids": [5], "logprobs": {"content": [
        {"token": "token_id:5", "logprob": -0.1}]}}]}  # fmt: skip
    assert renderers_shape(copy.deepcopy(answer)) == answer


def test_requests_pass_through_with_the_samplers_key_and_the_answer_is_reshaped(canned_server):
    base_url, seen = canned_server(VLLM_ANSWER)
    route = TokenRoute(base_url, {"Authorization": "Bearer k"}).start()
    try:
        assert route.base_url.startswith("http://127.0.0.1:")
        root = route.base_url.removesuffix("/v1")
        body = {"model": "tiny", "token_ids": [1, 2], "sampling_params": {"max_tokens": 2}}
        answer = httpx.post(f"{root}/inference/v1/generate", json=body,
                            headers={"X-Session-ID": "s1"}, timeout=30)  # fmt: skip
        models = httpx.get(f"{route.base_url}/models", timeout=30)
    finally:
        route.close()
    assert answer.status_code == 200
    assert answer.json() == renderers_shape(copy.deepcopy(VLLM_ANSWER))
    assert models.json() == VLLM_ANSWER  # another route: passed as it came
    assert seen[0]["Authorization"] == "Bearer k" and seen[0]["X-Session-ID"] == "s1"
    assert seen[1]["Authorization"] == "Bearer k"


def test_an_upstream_that_does_not_answer_is_a_502_naming_it():
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    route = TokenRoute(f"http://127.0.0.1:{port}/v1").start()
    try:
        answer = httpx.post(route.base_url.removesuffix("/v1") + "/inference/v1/generate",
                            json={}, timeout=60)  # fmt: skip
    finally:
        route.close()
    assert answer.status_code == 502
    assert f"127.0.0.1:{port}" in answer.json()["error"]["message"]
