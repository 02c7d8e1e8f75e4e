"""The number of episodes in flight (orchestrator/sampling/inflight.py): the AIMD arithmetic on
hand-computed cases, vLLM's /metrics text, the gates, where the cap starts, and the cap at work
against a vLLM-like server whose KV-cache usage grows with the completions it holds."""

from __future__ import annotations

import asyncio
import json
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler
from types import SimpleNamespace

import pytest

from trainspec.generated.orchestrator import ConcurrencyConfig
from trainspec.trainers.errors import SetupError
from trainspec.trainers.orchestrator.sampling import inflight
from trainspec.trainers.orchestrator.sampling.engine_load import EngineLoad, combine, parse_metrics
from trainspec.trainers.orchestrator.sampling.http_server import HttpServer
from trainspec.trainers.orchestrator.sampling.inflight import (
    AimdCap,
    AsyncGate,
    InflightLimit,
    build_inflight,
)
from trainspec.trainers.orchestrator.sampling.openai_client import OpenAISampler

STOP = 258


def load(kv: float, preemptions: float = 0.0, waiting: float = 0.0) -> EngineLoad:
    return EngineLoad(kv_usage=kv, preemptions=preemptions, waiting=waiting)


# -- the arithmetic ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cap", "reading", "in_flight", "waiting", "after"),
    [
        (8, load(0.3), 8, 0, 10),  # binds (all of it in use), room: floor(8 x 1.25)
        (10, load(0.3), 8, 3, 12),  # 8 of 10, but groups wait for it: binds
        (4, load(0.3), 4, 0, 5),  # x1.25 would stay 4: at least one more
        (8, load(0.3), 7, 0, 8),  # 7 < 0.9 x 8 and nothing waits: no growth
        (8, load(0.65), 8, 2, 8),  # between 60% and 80%: held
        (60, load(0.875), 30, 0, 48),  # above 80%: trimmed toward 70%, floor(60 x 0.7 / 0.875)
        (60, load(0.95), 60, 0, 30),  # above 90%: halved
        (60, load(0.1, preemptions=1.0), 60, 0, 30),  # a preemption since the last reading
        (60, load(0.3), 60, 0, 64),  # grown up to max_inflight only
        (5, load(0.95), 5, 0, 4),  # halved down to min_inflight only
    ],
)
def test_one_turnover(cap, reading, in_flight, waiting, after):
    aimd = AimdCap(cap, minimum=4, maximum=64)
    aimd._preemptions = 0.0  # a first reading was taken
    aimd.update(reading, aimd.binds(in_flight, waiting))
    assert aimd.value == after


def test_the_start_is_clamped_and_a_first_reading_is_no_preemption():
    assert AimdCap(500, minimum=4, maximum=64).value == 64
    assert AimdCap(1, minimum=4, maximum=None).value == 4
    aimd = AimdCap(10, minimum=1, maximum=None)
    assert aimd.update(load(0.5, preemptions=7.0), False) is None  # from before this run: kept
    assert aimd.value == 10
    assert aimd.update(load(0.5, preemptions=7.0), False) is None
    assert aimd.update(load(0.5, preemptions=8.0), False) == "preemption"
    assert aimd.value == 5


def test_requests_queued_three_readings_running_halve_the_cap():
    aimd = AimdCap(40, minimum=1, maximum=None)
    for expected in (40, 40, 20, 20):  # the third reading in a row with a queue halves it
        aimd.update(load(0.7, waiting=3.0), True)
        assert aimd.value == expected
    aimd.update(load(0.7, waiting=0.0), True)  # the queue drained: the count starts again
    aimd.update(load(0.7, waiting=2.0), True)
    aimd.update(load(0.7, waiting=2.0), True)
    assert aimd.value == 20


# -- vLLM's /metrics ---------------------------------------------------------------------------

VLLM_METRICS = """\
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-0.6B"} 2.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-0.6B"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="Qwen/Qwen3-0.6B"} 0.75
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="Qwen/Qwen3-0.6B"} 3.0
vllm:num_preemptions_total{engine="1",model_name="Qwen/Qwen3-0.6B"} 1.0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",\
gpu_memory_utilization="0.9",num_cpu_blocks="None",num_gpu_blocks="2048"} 1.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="Qwen/Qwen3-0.6B"} 1234.0
"""


def test_vllm_metrics_are_read_by_name():
    reading = parse_metrics(VLLM_METRICS)
    assert reading == EngineLoad(
        kv_usage=0.75, preemptions=4.0, waiting=2.0, capacity_tokens=2048 * 16
    )
    older = 'vllm:gpu_cache_usage_perc{model_name="m"} 0.5\n'  # vLLM's v0 engine
    assert parse_metrics(older) == EngineLoad(0.5, 0.0, 0.0, None)
    assert parse_metrics("process_cpu_seconds_total 3.0\n") is None  # not an engine's metrics


def test_two_servers_read_as_one():
    both = combine([EngineLoad(0.2, 1.0, 0.0, 100), EngineLoad(0.6, 2.0, 1.0, 300)])
    assert both == EngineLoad(0.6, 3.0, 1.0, 400)
    unknown = combine([EngineLoad(0.2, 0, 0, 100), EngineLoad(0.1, 0, 0, None)])
    assert unknown.capacity_tokens is None  # one server does not say: no capacity-based start


# -- the gates ---------------------------------------------------------------------------------


class Scripted:
    """A reader whose reading a test sets."""

    def __init__(self, reading: EngineLoad) -> None:
        self.reading = reading

    def __call__(self) -> EngineLoad:
        return self.reading


def test_the_thread_gate_never_admits_more_than_the_cap(monkeypatch):
    monkeypatch.setattr(inflight, "POLL_S", 0.01)
    reader = Scripted(load(0.95))  # full: every turnover halves the cap, down to 2
    limit = InflightLimit(16, AimdCap(8, minimum=2, maximum=16), reader)
    seen: list[tuple[int, int]] = []  # (in flight after admission, the cap at admission)
    lock = threading.Lock()

    def episode(_):
        with limit.gate.hold(1):
            with lock:
                seen.append((limit.gate.in_flight, limit.value))
            time.sleep(0.01)

    threads = [threading.Thread(target=episode, args=(i,)) for i in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    limit.close()
    assert all(count <= cap for count, cap in seen)
    assert limit.value == 2
    assert limit.gate.in_flight == 0


def test_a_group_larger_than_the_cap_runs_alone():
    limit = InflightLimit(16, AimdCap(2, minimum=1, maximum=16), Scripted(load(0.7)))
    with limit.gate.hold(5):  # 5 > 2: admitted because nothing else is in flight
        assert limit.gate.in_flight == 5
    limit.close()


def test_the_async_gate_follows_the_cap_as_it_grows(monkeypatch):
    """verifiers takes it as its semaphore (`async with gate`): one permit an episode."""
    monkeypatch.setattr(inflight, "POLL_S", 0.01)
    limit = InflightLimit(64, AimdCap(2, minimum=1, maximum=64), Scripted(load(0.1)))
    peaks: list[tuple[int, int]] = []

    async def episodes():
        gate = AsyncGate(limit)

        async def one():
            async with gate:
                peaks.append((gate.in_flight, limit.value))
                await asyncio.sleep(0.005)

        await asyncio.gather(*(one() for _ in range(60)))

    asyncio.run(episodes())
    limit.close()
    assert all(count <= cap for count, cap in peaks)
    assert limit.value > 2  # room in the cache and the cap binding: it grew
    assert max(count for count, _ in peaks) > 2


# -- a vLLM-like server -------------------------------------------------------------------------


class KvServer:
    """Completions that hold `tokens_each` KV-cache tokens per completion for `hold_s`; /metrics
    reports the usage of `capacity` tokens, /v1/models the context length."""

    def __init__(self, *, capacity: int, tokens_each: int, max_model_len: int, hold_s=0.03):
        self.capacity, self.tokens_each, self.max_model_len = capacity, tokens_each, max_model_len
        self.hold_s = hold_s
        self.in_flight = 0
        self.peak = 0
        self.bodies: list[dict] = []
        self.metrics = True
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path == "/metrics" and fake.metrics:
                    self.answer(200, fake.metrics_text(), "text/plain")
                elif self.path == "/v1/models":
                    models = {"data": [{"id": "m", "max_model_len": fake.max_model_len}]}
                    self.answer(200, json.dumps(models), "application/json")
                else:
                    self.answer(404, "{}", "application/json")

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                count = len(body["prompt"]) * body["n"]
                with fake.lock:
                    fake.bodies.append(body)
                    fake.in_flight += count
                    fake.peak = max(fake.peak, fake.in_flight)
                time.sleep(fake.hold_s)
                with fake.lock:
                    fake.in_flight -= count
                choices = [
                    {
                        "index": k,
                        "logprobs": {"token_logprobs": [-0.5], "tokens": [f"token_id:{STOP}"]},
                        "finish_reason": "stop",
                    }
                    for k in range(count)
                ]
                self.answer(200, json.dumps({"choices": choices}), "application/json")

            def answer(self, status: int, text: str, kind: str) -> None:
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.httpd = HttpServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def metrics_text(self) -> str:
        usage = min(1.0, self.in_flight * self.tokens_each / self.capacity)
        blocks = self.capacity // 16
        return (
            f'vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} {usage}\n'
            f'vllm:num_preemptions_total{{engine="0",model_name="m"}} 0.0\n'
            f'vllm:num_requests_waiting{{engine="0",model_name="m"}} 0.0\n'
            f'vllm:cache_config_info{{block_size="16",num_gpu_blocks="{blocks}"}} 1.0\n'
        )

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def kv_server():
    servers: list[KvServer] = []

    def start(**kwargs) -> KvServer:
        servers.append(KvServer(**kwargs))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def orchestrator(base_url: str | None, **concurrency) -> SimpleNamespace:
    sampler = SimpleNamespace(type="openai" if base_url else "local", base_url=base_url)
    return SimpleNamespace(sampler=sampler, concurrency=ConcurrencyConfig(**concurrency))


class Ids:
    def decode(self, ids, skip_special_tokens=True):
        return ""


def test_where_the_cap_starts(kv_server):
    server = kv_server(capacity=4096, tokens_each=16, max_model_len=512)
    started = build_inflight(orchestrator(server.base_url))  # the defaults: 1 .. 1024
    assert started.adaptive and started.value == 4096 // 512  # the episodes that fit in full
    started.close()
    told = build_inflight(orchestrator(server.base_url, initial_inflight=24, max_inflight=64))
    assert told.value == 24
    told.close()
    fixed = build_inflight(orchestrator(server.base_url, min_inflight=32, max_inflight=32))
    assert not fixed.adaptive and fixed.value == 32
    local = build_inflight(orchestrator(None, max_inflight=16))
    assert not local.adaptive and local.value == 16


def test_a_server_without_kv_metrics(kv_server, caplog):
    server = kv_server(capacity=4096, tokens_each=16, max_model_len=512)
    server.metrics = False
    with caplog.at_level("INFO", logger="trainspec.orchestrator"):
        plain = build_inflight(orchestrator(server.base_url, max_inflight=48))
    assert not plain.adaptive and plain.value == 48  # the defaults ask for nothing: fixed
    assert "reports no KV-cache usage; 48 episodes in flight" in caplog.text
    with pytest.raises(SetupError) as caught:
        build_inflight(orchestrator(server.base_url, min_inflight=8, max_inflight=48))
    assert caught.value.path == "concurrency.min_inflight"
    assert "/metrics reports none" in str(caught.value)


def test_the_cap_grows_while_the_cache_has_room_and_stays_under_max(kv_server, monkeypatch):
    """16 KV tokens a completion of 4096: the cache stays under 60% up to ~150 in flight, so
    from 8 the cap climbs as the turnovers come, never past max_inflight = 64."""
    monkeypatch.setattr(inflight, "POLL_S", 0.01)
    server = kv_server(capacity=4096, tokens_each=16, max_model_len=512)
    limit = build_inflight(orchestrator(server.base_url, max_inflight=64))
    sampler = OpenAISampler(server.base_url, "m", Ids(), STOP, inflight=limit, retries=0)
    groups = sampler.sample([[1, k] for k in range(120)], 4, temperature=1.0, max_tokens=4, seed=9)
    sampler.close()
    limit.close()
    assert [len(group) for group in groups] == [4] * 120
    assert sorted(body["seed"] for body in server.bodies) == [9 + k for k in range(120)]
    assert all(len(body["prompt"]) == 1 and body["n"] == 4 for body in server.bodies)
    assert limit.value > 8
    assert 8 < server.peak <= 64


def test_the_cap_falls_when_the_cache_fills(kv_server, monkeypatch):
    """200 KV tokens a completion of 2048: 10 completions fill the cache, so from 32 (the
    initial_inflight) the cap is cut toward what fits and stays near it. Single values are
    timing: a reading that lags behind a burst of turnovers (a busy machine) lets the cap grow
    for a few of them before the next reading cuts it, so the test reads the cap's course."""
    monkeypatch.setattr(inflight, "POLL_S", 0.01)
    server = kv_server(capacity=2048, tokens_each=200, max_model_len=512, hold_s=0.05)
    limit = build_inflight(orchestrator(server.base_url, initial_inflight=32, min_inflight=4))
    course: list[int] = []  # the cap after each turnover
    turnover = limit.turnover

    def recorded(in_flight: int, waiting: int) -> None:
        turnover(in_flight, waiting)
        course.append(limit.value)

    limit.turnover = recorded
    sampler = OpenAISampler(server.base_url, "m", Ids(), STOP, inflight=limit, retries=0)
    sampler.sample([[1, k] for k in range(80)], 2, temperature=1.0, max_tokens=4, seed=0)
    sampler.close()
    limit.close()
    assert len(course) == 80  # a turnover per group
    assert min(course) <= 7  # cut from 32 to what fits (7 completions at 70% of the cache)
    assert min(course) >= 4  # never under min_inflight
    assert statistics.median(course[40:]) < 12  # the second half: held near what fits
