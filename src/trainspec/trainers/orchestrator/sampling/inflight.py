"""How many episodes are in flight at once ([orchestrator.concurrency]): a fixed number, or a
cap that follows the serving engines' KV-cache usage, as the reference's orchestrator keeps it.

    limit = build_inflight(config)   # the orchestrator's: [concurrency] and [sampler]
    with limit.gate.hold(8):     # a group of 8 completions: waits while the cap is full
        ...                      # the request; leaving it is a turnover, which updates the cap
    limit.metrics()              # {"inflight_cap": 96, "kv_usage": 0.71}, for the step's log

With an in-process sampler, or `min_inflight = max_inflight`, the number is fixed at
max_inflight. Against servers (vLLM, whose `/metrics` has the KV-cache usage, read by
engine_load.py), the cap starts at `initial_inflight`, or at the engines' KV capacity /
max_model_len (the episodes that fit at full length), and moves between min_inflight and
max_inflight, additive-increase / multiplicative-decrease style, at every turnover (an episode
ending), with the reference's constants: it grows x1.25 while the fullest engine's KV cache is
under 60% and the cap binds (90% of it in use); above 80% it is trimmed toward 70%; above 90%,
at a preemption, or when requests have queued on an engine for three readings running, it is
halved. The reference also cancels the youngest episodes above 90%; here they finish (their
tokens are kept), and the cap holds new ones back until usage falls.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
from collections.abc import Iterator

from trainspec.generated.orchestrator import ConcurrencyConfig

from ...refusals import set_by_user
from .engine_load import EngineLoad, max_model_len, metrics_reader, server_root

log = logging.getLogger("trainspec.orchestrator")

GROW = 1.25  # x the cap per turnover while the KV cache has room and the cap binds
GROW_BELOW = 0.6  # KV usage under which the cap may grow
BINDS = 0.9  # the cap binds when this share of it is in flight
SOFT_ABOVE = 0.8  # KV usage above which the cap is trimmed toward SOFT_TO
SOFT_TO = 0.7
HARD_ABOVE = 0.9  # KV usage above which the cap is halved
CUT = 0.5
QUEUED_READINGS = 3  # readings in a row with requests waiting on an engine: halve
POLL_S = 0.5  # how often the engines' /metrics are read
ADAPTIVE = ("initial_inflight", "min_inflight")  # settings that ask for a number that adapts


class AimdCap:
    """The cap's arithmetic, apart from where readings come from (tested on its own)."""

    def __init__(self, initial: int, minimum: int, maximum: int | None) -> None:
        self.minimum = minimum
        self.maximum = maximum
        self.value = self._clamp(initial)
        self._preemptions: float | None = None
        self._queued = 0

    def _clamp(self, value: float) -> int:
        value = max(self.minimum, math.floor(value))
        return value if self.maximum is None else min(self.maximum, value)

    def binds(self, in_flight: int, waiting: int) -> bool:
        """Whether the cap holds work back: episodes wait for it, or nearly all of it is used
        (`in_flight` counts the episode ending)."""
        return waiting > 0 or in_flight >= BINDS * self.value

    def update(self, load: EngineLoad, binds: bool) -> str | None:
        """The cap after a turnover; returns why it changed (None when it did not)."""
        preempted = self._preemptions is not None and load.preemptions > self._preemptions
        self._preemptions = load.preemptions
        self._queued = self._queued + 1 if load.waiting > 0 else 0
        before = self.value
        if preempted:
            self.value, reason = self._clamp(before * CUT), "preemption"
        elif load.kv_usage > HARD_ABOVE:
            self.value, reason = self._clamp(before * CUT), f"KV cache {load.kv_usage:.0%}"
        elif self._queued >= QUEUED_READINGS:
            self._queued = 0
            self.value, reason = self._clamp(before * CUT), "requests queued on the engine"
        elif load.kv_usage > SOFT_ABOVE:
            target = before * SOFT_TO / load.kv_usage
            self.value, reason = self._clamp(target), f"KV cache {load.kv_usage:.0%}"
        elif load.kv_usage < GROW_BELOW and binds:
            grown = max(before + 1, math.floor(before * GROW))
            self.value, reason = self._clamp(grown), f"KV cache {load.kv_usage:.0%}"
        else:
            return None
        return reason if self.value != before else None


class InflightGate:
    """At most `limit.value` completions in flight across threads; a holder larger than the
    cap still runs alone (a group is never split)."""

    def __init__(self, limit: InflightLimit) -> None:
        self.limit = limit
        self.in_flight = 0
        self.waiting = 0  # holders the cap keeps back
        self._changed = threading.Condition()

    def _fits(self, count: int) -> bool:
        cap = self.limit.value
        return cap is None or self.in_flight == 0 or self.in_flight + count <= cap

    @contextlib.contextmanager
    def hold(self, count: int) -> Iterator[None]:
        with self._changed:
            self.waiting += 1
            self._changed.wait_for(lambda: self._fits(count))
            self.waiting -= 1
            self.in_flight += count
        try:
            yield
        finally:
            with self._changed:
                self.limit.turnover(self.in_flight, self.waiting)  # as this one ended
                self.in_flight -= count
                self._changed.notify_all()


class AsyncGate:
    """The same cap for the episodes of an asyncio loop (verifiers' `run_slot` takes it as its
    semaphore: `async with gate`); one episode each."""

    def __init__(self, limit: InflightLimit) -> None:
        self.limit = limit
        self.in_flight = 0
        self.waiting = 0
        self._changed = asyncio.Condition()

    async def __aenter__(self) -> None:
        async with self._changed:
            cap = self.limit
            self.waiting += 1
            await self._changed.wait_for(
                lambda: cap.value is None or self.in_flight == 0 or self.in_flight < cap.value
            )
            self.waiting -= 1
            self.in_flight += 1

    async def __aexit__(self, *exc) -> None:
        async with self._changed:
            self.limit.turnover(self.in_flight, self.waiting)
            self.in_flight -= 1
            self._changed.notify_all()


class InflightLimit:
    """The cap every sampler and environment player of one orchestrator shares (train and eval
    alike): fixed, or an AimdCap fed by a thread that reads the engines' /metrics."""

    def __init__(
        self, fixed: int | None, cap: AimdCap | None = None, reader=None, client=None
    ) -> None:
        self.fixed = fixed
        self.cap = cap
        self._reader = reader  # () -> EngineLoad | None
        self._client = client  # the reader's HTTP client, closed with the limit
        self._load: EngineLoad | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.gate = InflightGate(self)
        if cap is not None and reader is not None:
            self._load = reader()
            self._thread = threading.Thread(target=self._poll, daemon=True, name="kv-usage")
            self._thread.start()

    @property
    def adaptive(self) -> bool:
        return self.cap is not None

    @property
    def value(self) -> int | None:
        return self.cap.value if self.cap is not None else self.fixed

    def _poll(self) -> None:
        assert self._reader is not None
        while not self._stop.wait(POLL_S):
            load = self._reader()
            if load is not None:
                with self._lock:
                    self._load = load

    def turnover(self, in_flight: int, waiting: int) -> None:
        """An episode ended with `in_flight` running (itself included) and `waiting` held
        back: the cap moves by the latest reading."""
        if self.cap is None:
            return
        with self._lock:
            load = self._load
            if load is None:
                return
            before = self.cap.value
            reason = self.cap.update(load, self.cap.binds(in_flight, waiting))
        if reason is not None:
            log.debug("concurrency: cap %d -> %d (%s)", before, self.cap.value, reason)

    def metrics(self) -> dict[str, float]:
        if self.cap is None:
            return {}
        out: dict[str, float] = {"inflight_cap": float(self.cap.value)}
        if self._load is not None:
            out["kv_usage"] = self._load.kv_usage
        return out

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._client is not None:
            self._client.close()


def adaptive_settings(concurrency) -> list[str]:
    """The settings of ADAPTIVE a [concurrency] table sets (by what they hold: set_by_user)."""
    default = ConcurrencyConfig()
    return [
        key
        for key in ADAPTIVE
        if set_by_user(getattr(concurrency, key), getattr(default, key), key)
    ]


def build_inflight(config) -> InflightLimit:
    """The orchestrator's limit: fixed for the in-process sampler or min_inflight =
    max_inflight, else adaptive on the sampler's server, which must then report its KV-cache
    usage when initial_inflight or min_inflight asks for adaptation explicitly."""
    import httpx

    from ...errors import SetupError

    concurrency = config.concurrency
    fixed = concurrency.max_inflight
    if config.sampler.type != "openai" or concurrency.min_inflight == fixed:
        return InflightLimit(fixed)
    base_url = config.sampler.base_url
    root = server_root(base_url)
    client = httpx.Client(timeout=5.0)
    reader = metrics_reader([root], client)
    load = reader()
    if load is None:
        asked = adaptive_settings(concurrency)
        if asked:
            raise SetupError(
                f"concurrency.{asked[0]}",
                f"asks for a number of episodes that follows the KV-cache usage, and "
                f"{root}/metrics reports none (vllm:kv_cache_usage_perc)",
                "sample from vLLM, or set concurrency.max_inflight alone for a fixed number",
            )
        log.info(
            "concurrency: %s/metrics reports no KV-cache usage; %s episodes in flight "
            "(max_inflight)",
            root,
            fixed if fixed is not None else "unlimited",
        )
        client.close()
        return InflightLimit(fixed)
    initial = concurrency.initial_inflight
    if initial is None:
        length = max_model_len(client, base_url)
        if load.capacity_tokens and length:
            initial = max(1, load.capacity_tokens // length)
        else:
            initial = fixed if fixed is not None else concurrency.min_inflight
    cap = AimdCap(initial, concurrency.min_inflight, fixed)
    log.info(
        "concurrency: %d episodes in flight to start, between %d and %s as %s's KV cache allows",
        cap.value,
        concurrency.min_inflight,
        fixed if fixed is not None else "no limit",
        root,
    )
    return InflightLimit(fixed, cap, reader, client)
