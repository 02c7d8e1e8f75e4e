"""The vLLM server of `[inference]` as a process: `rl` starts it before the orchestrator,
`sft` for its online evals; each waits for it, watches and stops it. What it runs comes from
vllm_plan.py.

    plan = vllm_plan(config, run_dir, on_gpu=True)  # SetupErrors for what it cannot start
    server = InferenceServer(plan).start()
    server.wait_ready(timeout_s, should_stop)  # GET /health until 200, or the reason it failed
    ...
    server.stop()

The server runs in its own process group (server_process.py) with its output in
`plan.log_path` (`<run dir>/logs/inference.log`); a server that exits before it is ready, or is
not ready in time, is reported with the end of that log.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from ..errors import SetupError
from .server_process import ServerProcess
from .vllm_plan import InferencePlan

POLL_S = 1.0
STOP_S = 30.0


class InferenceServer:
    def __init__(self, plan: InferencePlan) -> None:
        self.plan = plan
        self.server = ServerProcess(plan.argv, plan.log_path, env={**os.environ, **plan.env})

    def start(self) -> InferenceServer:
        try:
            self.server.start()
        except OSError as exc:
            raise SetupError(
                "inference",
                f"cannot start {self.plan.argv[0]!r}: {exc.strerror or exc}",
                "install vLLM beside trainspec (pip install 'trainspec[vllm]'), or drop "
                "[inference] and point [orchestrator.sampler] at a server you start",
            ) from None
        return self

    def poll(self) -> int | None:
        return self.server.poll()

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join(self.server.log_tail(lines))

    def wait_ready(self, timeout_s: float, should_stop: Callable[[], bool]) -> bool:
        """Poll GET /health every second until it answers 200 (True), the run is stopped
        (False), the server exits or the time is up (SetupError, with the log's last lines)."""
        import httpx

        url = self.plan.base_url.removesuffix("/v1") + "/health"
        deadline = time.monotonic() + timeout_s
        while True:
            code = self.poll()
            if code is not None:
                raise SetupError(
                    "inference",
                    f"the vLLM server exited with code {code} before it was ready; the end of "
                    f"{self.plan.log_path}:\n{self.log_tail()}",
                    "fix what its log says (a model vLLM cannot load, too little GPU memory: "
                    "inference.vllm.gpu_memory_utilization, max_model_len)",
                )
            try:
                if httpx.get(url, timeout=5).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            if should_stop():
                return False
            if time.monotonic() > deadline:
                raise SetupError(
                    self.plan.timeout_field,
                    f"the vLLM server at {url} was not ready after {timeout_s:g} s; the end of "
                    f"{self.plan.log_path}:\n{self.log_tail()}",
                    "raise wait_for_ready_timeout for a large model, or see the log",
                )
            time.sleep(POLL_S)

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL after STOP_S."""
        self.server.stop(STOP_S)
