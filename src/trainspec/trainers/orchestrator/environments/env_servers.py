"""Environment servers the orchestrator starts itself. A verifiers environment source with a
`serve` table that names no `address` plays on a verifiers env server started for it (sized by
its `pool` and `max_concurrent`), as the reference's launcher starts one per source; a source
without a `serve` table plays in the orchestrator's own process.

    servers = EnvServers(run_dir, base_port=config.env_server_base_port)
    env, serve = written(source.env), written(source.serve)   # the settings, as dicts
    address = servers.start(env, serve, path, split="train", index=0, name="rt")
    ...                                  # EnvTask(..., address=address)
    servers.close()                      # SIGTERM, then SIGKILL after a grace period
                                         # (serving/server_process.py, as for vLLM)

* Source i (train sources first, then eval sources, every kind counted) listens at
  `tcp://127.0.0.1:<env_server_base_port + i>`.
* Its settings are written to `<run_dir>/envs/<split>/<name>.json` and it logs to the `.log`
  beside them; the process is
  `python -m trainspec.trainers.orchestrator.environments.env_servers <json>`, which calls
  verifiers' `serve_env` with the pool's sizing.
* `start` returns once the server answers its health check. A server that exits first (a
  taken port, a taskset it cannot load) is a SetupError at `<path>.serve` with its log's last
  lines; one that exits later, `exited(address)`, the RunError that fails the episodes out on
  it (server_watch.py).
* The serve table is checked by verifiers' own `ServeConfig`; each error names its dotted path.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ...errors import RunError, SetupError
from ...run.atomic_files import write_atomic
from ...serving.server_process import ServerProcess, stop_all

HOST = "127.0.0.1"
WAIT_S = 600.0  # how long a server may take to answer, as the reference waits
STOP_GRACE_S = 30.0
LOG_TAIL = 6


def serve_config(serve: dict[str, Any], path: str):
    """verifiers' ServeConfig of a source's `serve` table, each error at its dotted path."""
    from pydantic import ValidationError
    from verifiers.v1.configs.serve import ServeConfig

    from .verifiers_config import errors_at

    try:
        return ServeConfig.model_validate(serve)
    except ValidationError as exc:
        raise errors_at(
            path, exc, "fix the value (verifiers' serve settings: pool, max_concurrent, address)"
        ) from None


def address_of(base_port: int, index: int) -> str:
    return f"tcp://{HOST}:{base_port + index}"


class EnvServers:
    """The env-server processes of one orchestrator, each waited for when started and all
    stopped by close()."""

    def __init__(self, run_dir: Path, *, base_port: int) -> None:
        self.run_dir = Path(run_dir)
        self.base_port = base_port
        self.servers: list[ServerProcess] = []
        self.by_address: dict[str, ServerProcess] = {}

    def start(self, env: dict, serve: dict, path: str, *, split: str, index: int, name: str) -> str:
        """Start the server of source `index` and return its address once it answers."""
        from verifiers.v1.serve import env_config_data

        from .verifiers_config import env_config

        settings = serve_config(serve, f"{path}.serve")
        config = env_config(env, f"{path}.env")
        taskset = env.get("taskset", {}).get("id", "")
        local = str(Path(taskset).resolve()) if taskset.endswith(".py") else None
        address = address_of(self.base_port, index)
        spec = {
            "env": env_config_data(config),
            "serve": settings.model_dump(mode="json") | {"address": address},
            "taskset_file": local,
        }
        base = self.run_dir / "envs" / split / name
        base.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(base.with_suffix(".json"), json.dumps(spec, indent=2) + "\n", private=True)
        child_env = dict(os.environ)  # its harness programs run with the uv beside python
        child_env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + child_env["PATH"]
        argv = [sys.executable, "-m", __name__, str(base.with_suffix(".json"))]
        server = ServerProcess(argv, base.with_suffix(".log"), env=child_env).start()
        self.servers.append(server)  # stopped by close(), with its pool's workers
        self._wait(server, address, f"{path}.serve")
        self.by_address[address] = server
        return address

    def exited(self, address: str) -> RunError | None:
        """The error of the server at `address` once it has exited (None while it runs): what
        server_watch.py raises for the episodes out on it. Its path is the source's `serve`."""
        server = self.by_address[address]
        code = server.poll()
        if code is None:
            return None
        how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited ({code})"
        said = " | ".join(line.strip() for line in server.log_tail(LOG_TAIL)) or "nothing"
        return RunError(
            "serve",
            f"the environment server at {address} {how} while episodes were out on it; its "
            f"log ({server.log_path}) ends: {said}",
            "fix what its log says (killed: the machine's memory, `dmesg` tells; lower "
            "serve.pool's workers or serve.max_concurrent), then relaunch: the run resumes "
            "from its last checkpoint",
        )

    @staticmethod
    def _wait(server: ServerProcess, address: str, path: str) -> None:
        from verifiers.v1.serve import EnvClient

        async def answered() -> bool:
            client = EnvClient(address)
            try:
                deadline = time.monotonic() + WAIT_S
                while time.monotonic() < deadline and server.poll() is None:
                    if await client.health(timeout=2.0):
                        return True
                    await asyncio.sleep(0.5)
                return False
            finally:
                await client.close()

        if asyncio.run(answered()):
            return
        said = " | ".join(line.strip() for line in server.log_tail(LOG_TAIL)) or "nothing"
        code = server.poll()
        if code is None:
            problem = f"the environment server at {address} did not answer in {WAIT_S:.0f} s"
        else:
            problem = f"the environment server for {address} exited ({code})"
        raise SetupError(
            path,
            f"{problem}; its log ({server.log_path}) ends: {said}",
            "fix what its log says (a taken port: set orchestrator.env_server_base_port to "
            "a free range)",
        )

    def close(self) -> None:
        stop_all(self.servers, STOP_GRACE_S)
        self.servers.clear()
        self.by_address.clear()


def _setup(taskset_file: str | None) -> None:
    """Each server process's (and pool worker's) logging, and a local taskset file imported
    under its module name, so the env config resolves in a freshly spawned worker too."""
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
    )
    if taskset_file is not None:
        from .verifiers_config import local_taskset

        local_taskset({"taskset": {"id": taskset_file}}, "env")


def _stop_with(parent: int) -> None:
    """Stop this server (its whole process group) once the orchestrator that started it is
    gone, however it ended."""
    while os.getppid() == parent:
        time.sleep(2.0)
    os.killpg(0, signal.SIGTERM)


def main(argv: list[str] | None = None) -> None:
    from verifiers.v1.configs.serve import ServeConfig, pool_serve_kwargs
    from verifiers.v1.serve import serve_env

    threading.Thread(target=_stop_with, args=(os.getppid(),), daemon=True).start()
    spec = json.loads(Path((argv or sys.argv[1:])[0]).read_text())
    serve = ServeConfig.model_validate(spec["serve"])
    setup = functools.partial(_setup, spec["taskset_file"])
    serve_env(
        **pool_serve_kwargs(serve.pool),
        address=serve.address,
        config_data=spec["env"],
        max_concurrent=serve.max_concurrent,
        log_setup=setup,
    )


if __name__ == "__main__":
    main()
