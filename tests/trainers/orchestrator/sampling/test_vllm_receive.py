"""The orchestrator's side of `weight_broadcast.type = "nccl"` (policy.py, vllm_reload.py): it
has the server's workers join the trainer's group once the trainer waits there, then receives
every step the trainer announces, in order, paused, with the served version checked.

The server here is a small HTTP server that records the routes vLLM's RL API has and keeps a
weight version as vLLM does: vLLM's CPU build cannot receive over NCCL, and the transfer
itself is tested on GPUs (tests/gpu/test_nccl_broadcast.py). The files are the ones the
trainer's relay writes (wire/broadcast_nccl.py)."""

from __future__ import annotations

import json
import threading

import pytest

from trainspec.config import load
from trainspec.trainers.errors import RunError
from trainspec.trainers.orchestrator.policy import Policy
from trainspec.trainers.orchestrator.sampling.http_server import HttpServer, JsonHandler
from trainspec.trainers.wire.broadcast_nccl import RunDirRelay

UPDATE = {"names": ["lm_head.weight"], "dtype_names": ["float32"], "shapes": [[4, 2]]}


@pytest.fixture
def server():
    """(base URL, the (path, body) posted, state): a server with vLLM's RL routes."""
    posted: list[tuple[str, dict]] = []
    state = {"version": "default", "refuse": None}

    class Handler(JsonHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_json(200, {"weight_version": state["version"]})

        def do_POST(self) -> None:  # noqa: N802
            body = self.read_json()
            posted.append((self.path, body))
            if self.path == state["refuse"]:
                self.send_json(500, {"error": "Attempted to load weight into parameter"})
                return
            if self.path == "/update_weight_version":
                state["version"] = body["new_version"]
            self.send_json(200, {})

    httpd = HttpServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", posted, state
    httpd.shutdown()
    httpd.server_close()


def policy_on(root: str, run_dir, tokenizer) -> Policy:
    sampler = {"type": "openai", "base_url": f"{root}/v1", "model": "tiny",
               "reload_path": "/collective_rpc"}  # fmt: skip
    config = load("orchestrator", [], {
        "output_dir": str(run_dir), "weight_broadcast.type": "nccl", "sampler": sampler,
    }).config  # fmt: skip
    return Policy(config, run_dir, tokenizer, 0)


def announce(relay: RunDirRelay, step: int) -> None:
    relay.step = step
    relay.update_weights(UPDATE)


def test_the_server_joins_once_and_receives_every_announced_step_in_order(
    server, tmp_path, tokenizer
):
    root, posted, state = server
    policy = policy_on(root, tmp_path, tokenizer)
    asked = []
    assert not policy.wait_for(0, lambda: asked.append(1) or len(asked) > 2)  # no trainer yet
    assert posted == []
    relay = RunDirRelay(tmp_path)
    relay.init_weight_transfer_engine({"master_address": "localhost", "master_port": 29501})
    announce(relay, 0)
    announce(relay, 1)
    assert policy.wait_for(1, lambda: False)
    assert policy.step == 1 and state["version"] == "step_1"
    paths = [path for path, _ in posted]
    one_step = ["/pause?mode=wait", "/start_weight_update", "/update_weights",
                "/finish_weight_update", "/reset_prefix_cache", "/update_weight_version",
                "/resume"]  # fmt: skip
    assert paths == ["/init_weight_transfer_engine", *one_step, *one_step]
    assert posted[0][1] == {"init_info": {"master_address": "localhost", "master_port": 29501}}
    assert posted[3][1] == {"update_info": UPDATE}
    assert [body for path, body in posted if path == "/update_weight_version"] == [
        {"new_version": "step_0"}, {"new_version": "step_1"}
    ]  # fmt: skip
    announce(relay, 2)  # the next wait takes it although step 1 would do
    assert policy.wait_for(1, lambda: False) and policy.step == 2


def test_a_step_the_server_cannot_receive_stops_the_run_and_leaves_it_paused(
    server, tmp_path, tokenizer
):
    root, posted, state = server
    state["refuse"] = "/update_weights"
    relay = RunDirRelay(tmp_path)
    relay.init_weight_transfer_engine({"master_address": "localhost"})
    announce(relay, 0)
    with pytest.raises(RunError) as caught:
        policy_on(root, tmp_path, tokenizer).wait_for(0, lambda: False, first=True)
    assert caught.value.path == "sampler.reload_path"
    assert "could not load the weights of step_0 (over NCCL)" in caught.value.problem
    assert "stays paused" in caught.value.problem
    assert [path for path, _ in posted][-1] == "/update_weights"  # never resumed


def test_the_server_that_cannot_join_is_said_with_the_fix(server, tmp_path, tokenizer):
    from trainspec.trainers.errors import SetupError

    root, posted, state = server
    state["refuse"] = "/init_weight_transfer_engine"
    RunDirRelay(tmp_path).init_weight_transfer_engine({"master_address": "localhost"})
    with pytest.raises(SetupError) as caught:
        policy_on(root, tmp_path, tokenizer).wait_for(0, lambda: False, first=True)
    assert caught.value.path == "weight_broadcast"
    assert "could not join the trainer's NCCL group" in caught.value.problem
    assert "--weight-transfer-config" in caught.value.fix
    assert json.dumps({"backend": "nccl"}) in caught.value.fix
