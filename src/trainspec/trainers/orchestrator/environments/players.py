"""Which sources are verifiers environments, and who plays them: one EnvPlayer for them all,
built when the first source needs it (a run of built-in tasksets never imports verifiers), and
the environment servers the orchestrator starts for the sources with a serve table.

    if starts_server(source):                             # an environment, serve, no address
        address = players.serve(source, path, split="train", index=0)  # tcp://127.0.0.1:<port>
    task = EnvTask.from_env(source.env, f"{path}.env", players.get(), seed=0, address=address)
    errors += serve_refusals(source, path)                # serve keys that source cannot use
    players.close()                                       # the player, then the servers

`players = Players.of(config, tokenizer, inflight)` is the orchestrator's. Source i (train
sources first, then eval sources) is served at `base_port` + i, its files under
`<run_dir>/envs` (env_servers.py); sources.py builds each source's task this way.
"""

from __future__ import annotations

import functools
from pathlib import Path

from trainspec.config_model import written
from trainspec.validators.orchestrator import source_name

from ...errors import SetupError, SetupErrors
from .env_servers import EnvServers
from .verifiers_config import env_config
from .verifiers_env import EnvPlayer

BUILTIN_PREFIX = "builtin:"


def is_environment(source) -> bool:
    """Whether a source is a verifiers environment: no data, and a taskset id not built in."""
    ident = source.env.taskset.id if source.data is None else ""
    return bool(ident) and not ident.startswith(BUILTIN_PREFIX)


def check_env_tables(config, prefix: str = "orchestrator.") -> list[SetupError]:
    """What verifiers' own config classes refuse of each environment source's `env` table (a
    taskset's own settings among them), asked before anything starts: every source's errors,
    at its dotted path under `prefix`. Imports verifiers only when there is such a source."""
    groups = [("train", config.train.source)]
    if config.eval is not None:
        groups.append(("eval", config.eval.source))
    errors: list[SetupError] = []
    for name, sources in groups:
        for index, source in enumerate(sources):
            if not is_environment(source):
                continue
            try:
                env_config(source.env, f"{prefix}{name}.source[{index}].env")
            except SetupErrors as err:
                errors.extend(err.errors)
            except SetupError as err:
                errors.append(err)
    return errors


def starts_server(source) -> bool:
    """Whether the orchestrator starts an environment server for `source`: an environment with a
    serve table that names no address of a server started elsewhere."""
    serve = source.serve
    return is_environment(source) and serve is not None and serve.address is None


def serve_refusals(source, path: str) -> list[SetupError]:
    """What a source's serve table (at `path`.serve) cannot ask. A serve table configures a
    verifiers environment server: one started elsewhere (`address`, whose sizing is its own) or
    one the orchestrator starts (every other key). A built-in taskset or a dataset plays in the
    orchestrator and has none."""
    errors: list[SetupError] = []
    if source.serve is None:
        return errors
    served = written(source.serve)
    if not is_environment(source):
        keys = {f"{path}.serve.{key}": value for key, value in served.items()}
        for where, value in (keys or {f"{path}.serve": {}}).items():  # `serve = {}`: the table
            errors.append(
                SetupError(
                    where,
                    f"= {value!r}: only a verifiers environment is served; a built-in "
                    "taskset or a dataset plays in the orchestrator",
                    "drop it (concurrency.max_inflight bounds the episodes in flight)",
                )
            )
    elif served.get("address") is not None:
        for key, value in served.items():
            if key != "address":
                errors.append(
                    SetupError(
                        f"{path}.serve.{key}",
                        f"= {value!r}: serve.address names a server started elsewhere, "
                        "which is sized where it starts",
                        "drop it, or drop serve.address to have the orchestrator start the server",
                    )
                )
    return errors


class Players:
    """The one EnvPlayer of a run's environment sources, built when the first needs it (a run of
    built-in tasksets never imports verifiers), and the environment servers started for them
    (their files under `run_dir`, source i at `base_port` + i)."""

    def __init__(
        self,
        tokenizer,
        renderer_cfg,
        *,
        run_dir: Path,
        base_port: int,
        max_inflight: int | None,
        inflight=None,
    ) -> None:
        self.tokenizer = tokenizer
        self.renderer_cfg = renderer_cfg
        self.run_dir = run_dir
        self.base_port = base_port
        self.max_inflight = max_inflight
        self.inflight = inflight  # an InflightLimit (inflight.py): the orchestrator's cap
        self.player: EnvPlayer | None = None
        self.servers: EnvServers | None = None

    @classmethod
    def of(cls, config, tokenizer, inflight=None) -> Players:
        """The orchestrator's: its renderer, concurrency (`inflight`, its cap) and
        env_server_base_port, servers' files in <output_dir>/orchestrator."""
        return cls(
            tokenizer,
            config.renderer,
            run_dir=Path(config.output_dir) / "orchestrator",
            base_port=config.env_server_base_port,
            max_inflight=config.concurrency.max_inflight,
            inflight=inflight,
        )

    def serve(self, source, path: str, *, split: str, index: int) -> str:
        """The address of the environment server started for `source` (index i of the train
        sources, then the eval sources)."""
        if self.servers is None:
            self.servers = EnvServers(self.run_dir, base_port=self.base_port)
        name = source_name(source).replace("/", "_")
        env, serve = written(source.env), written(source.serve)
        address = self.servers.start(env, serve, path, split=split, index=index, name=name)
        self.get().exited[address] = functools.partial(self.servers.exited, address)  # watched
        return address

    def get(self) -> EnvPlayer:
        if self.player is None:
            self.player = EnvPlayer(
                self.tokenizer,
                self.renderer_cfg,
                max_inflight=self.max_inflight,
                inflight=self.inflight,
            )
        return self.player

    def close(self) -> None:
        if self.player is not None:
            self.player.close()
        if self.servers is not None:
            self.servers.close()
