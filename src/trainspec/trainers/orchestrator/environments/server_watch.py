"""Episodes on an environment server, watched while they play: verifiers' env client waits for
a rollout's reply with no limit, and its ZeroMQ socket says nothing when the server is gone
(it only tries to reconnect), so a server that crashed would hang the orchestrator for good.

    episodes = await watched(runs, client, address, exited)   # a RunError once it is gone

* A server the orchestrator started (env_servers.py) is gone once its process has exited:
  `exited()` says how (its exit code and its log's last lines), checked every WATCH_S.
* Any server, started here or elsewhere (`serve.address`), is asked for its health every
  HEALTH_S while episodes are out; one that has answered none for SILENT_S is gone (alive but
  hung: stopped, deadlocked).

Either way the episodes still out are cancelled (verifiers tells the server to drop them) and
the step fails with a RunError at the source's `serve` that names the server and what it said.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from ...errors import RunError

WATCH_S = 1.0  # how often the episodes' server is looked at
HEALTH_S = 30.0  # how often a server started elsewhere is asked for its health meanwhile
SILENT_S = 300.0  # how long such a server may answer no health check before it counts as gone
HEALTH_TIMEOUT_S = 10.0

Exited = Callable[[], RunError | None]


async def watched(runs: Awaitable[list], client, address: str, exited: Exited | None) -> list:
    """What `runs` (the episodes played on the server at `address`) returns, or a RunError
    once that server is gone (`exited`: the check of a server started here, else None)."""
    task = asyncio.ensure_future(runs)
    answered = probed = time.monotonic()
    while True:
        done, _ = await asyncio.wait({task}, timeout=WATCH_S)
        if done:
            return task.result()
        error = exited() if exited is not None else None
        if error is None and time.monotonic() - probed > HEALTH_S:
            probed = time.monotonic()
            if await client.health(timeout=HEALTH_TIMEOUT_S):
                answered = probed
            elif probed - answered > SILENT_S:
                error = RunError(
                    "serve.address" if exited is None else "serve",
                    f"= {address!r}: the environment server there has answered no health "
                    f"check for {probed - answered:.0f} s while episodes were out on it",
                    "see why in its own log and start it again (or drop serve.address to play "
                    "the environment in the orchestrator); the run resumes from its last "
                    "checkpoint"
                    if exited is None
                    else "see why in its log (the run directory's envs/); the run resumes from "
                    "its last checkpoint",
                )
        if error is not None:
            task.cancel()  # verifiers asks the server to drop each (it is gone: no matter)
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            raise error
