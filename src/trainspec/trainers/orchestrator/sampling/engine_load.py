"""The serving engines' load, read from their Prometheus `/metrics` (vLLM's names): the fullest
KV cache, the preemptions and queued requests, and the KV-cache capacity in tokens.

    reader = metrics_reader([server_root("http://host:8000/v1")], httpx.Client(timeout=5.0))
    load = reader()   # EngineLoad(kv_usage=0.71, preemptions=0.0, waiting=0.0, ...), or None
    max_model_len(client, "http://host:8000/v1")   # 4096: the context a vLLM server reports

The in-flight cap (inflight.py) moves by these readings.
"""

from __future__ import annotations

from dataclasses import dataclass

KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")  # vLLM v1, then v0
PREEMPTIONS = "vllm:num_preemptions_total"  # a counter
WAITING = "vllm:num_requests_waiting"
CACHE_INFO = "vllm:cache_config_info"


@dataclass(frozen=True)
class EngineLoad:
    """One reading of every serving engine's /metrics."""

    kv_usage: float  # the fullest engine's KV cache, 0 to 1
    preemptions: float  # requests preempted so far, all engines together
    waiting: float  # requests queued, all engines together
    capacity_tokens: int | None = None  # KV-cache tokens of all engines (cache_config_info)


def parse_metrics(text: str) -> EngineLoad | None:
    """The load in one engine's Prometheus text, or None when it has no KV-cache usage."""
    from prometheus_client.parser import text_string_to_metric_families

    usage: list[float] = []
    preemptions = waiting = 0.0
    capacity: int | None = None
    for family in text_string_to_metric_families(text):
        for sample in family.samples:  # by sample name: how a TYPE line groups them varies
            if sample.name in KV_USAGE:
                usage.append(sample.value)
            elif sample.name == PREEMPTIONS:
                preemptions += sample.value
            elif sample.name == WAITING:
                waiting += sample.value
            elif sample.name == CACHE_INFO:
                blocks, size = sample.labels.get("num_gpu_blocks"), sample.labels.get("block_size")
                if blocks and size and blocks.isdigit() and size.isdigit():
                    capacity = (capacity or 0) + int(blocks) * int(size)
    if not usage:
        return None
    return EngineLoad(max(usage), preemptions, waiting, capacity)


def combine(loads: list[EngineLoad]) -> EngineLoad:
    """Several engines (data-parallel servers) as one: the fullest cache, the sums."""
    capacities = [load.capacity_tokens for load in loads]
    return EngineLoad(
        kv_usage=max(load.kv_usage for load in loads),
        preemptions=sum(load.preemptions for load in loads),
        waiting=sum(load.waiting for load in loads),
        capacity_tokens=None if None in capacities else sum(c or 0 for c in capacities),
    )


def metrics_reader(roots: list[str], client):
    """() -> the engines' combined load, or None when a server does not answer with one."""

    def read() -> EngineLoad | None:
        loads = []
        for root in roots:
            try:
                response = client.get(f"{root}/metrics")
            except Exception:  # noqa: BLE001  # a reading missed is a reading skipped
                return None
            load = parse_metrics(response.text) if response.status_code == 200 else None
            if load is None:
                return None
            loads.append(load)
        return combine(loads) if loads else None

    return read


def server_root(base_url: str) -> str:
    """A server's root from its OpenAI base URL ("http://host:8000/v1" -> "http://host:8000")."""
    return base_url.rstrip("/").removesuffix("/v1")


def max_model_len(client, base_url: str) -> int | None:
    """The context length a vLLM server reports in GET /v1/models, if it does."""
    try:
        models = client.get(f"{base_url.rstrip('/')}/models").json()["data"]
        return int(models[0]["max_model_len"])
    except Exception:  # noqa: BLE001  # not vLLM, or not saying: no capacity-based start
        return None
