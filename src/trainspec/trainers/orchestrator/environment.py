"""Environments through the verifiers library (`pip install 'trainspec[envs]'`): a source whose
`env.taskset.id` is not built in is a verifiers environment. Its taskset, agents, harnesses and
runtimes are verifiers' own, configured by the source's `env` table, and each rollout is one
verifiers episode played against an OpenAI-compatible endpoint that serves the policy.

    player = EnvPlayer(tokenizer, config.renderer, max_inflight=64)
    task = EnvTask.from_env(source.env, "orchestrator.train.source[0].env", player, seed=0)
    played = task.rollouts(prompts, n, sampler, temperature=1.0, max_tokens=128, seed=s)
    # per prompt: (completions, rewards), one completion per trainable branch of its episodes

* The endpoint is a server sampler's own URL (the vLLM that `rl` starts, [orchestrator.sampler]
  or a frozen model's). The in-process sampler is served on localhost (serve.ModelServer), so an
  environment runs unchanged on a machine without a GPU.
* Tokens come from verifiers' train client: it renders every turn with the orchestrator's
  renderer and calls the token route /inference/v1/generate. A branch of an episode's trace is
  a sample (its token ids, which of them the model sampled, their log-probabilities); its reward
  is the trace's. Tokens the environment wrote between turns are in the sample, not trained on
  (echo can weigh them).
* The `env` table is checked by verifiers' own config classes at start; each error names the
  source's dotted path (`orchestrator.train.source[0].env.taskset.turns`).
* `taskset.id` may be a local file ("my_taskset.py", relative to the working directory): it is
  imported as the module named after the file, and loads like an installed taskset.
* An episode that fails (harness, runtime, endpoint) is left out of its group and counted in
  the log; a step whose every episode failed stops the run with the first error.
* A source whose `serve.address` is set plays on the environment server there (verifiers'
  env server, started elsewhere or by env_servers.py), which the orchestrator waits for; the
  tasks are still loaded here, and each episode request carries its task, as the reference
  does.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from ..errors import SetupError, SetupErrors
from .sampler import Completion
from .task import Prompt, PromptStream

log = logging.getLogger("trainspec.orchestrator")
INSTALL_FIX = (
    "pip install 'trainspec[envs]' (the verifiers library), or use a built-in taskset "
    '("builtin:reverse-text") or your own data and reward'
)
SERVER_WAIT_S = 600.0  # how long an environment server may take to answer, as the reference


def _verifiers(path: str):
    try:
        import verifiers.v1 as vf
    except ImportError:
        raise SetupError(
            path, "names a verifiers taskset, and the verifiers library is not installed",
            INSTALL_FIX,
        ) from None  # fmt: skip
    return vf


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def local_taskset(env: dict[str, Any], path: str) -> dict[str, Any]:
    """`env` with a taskset id that is a local .py file imported, and named by its module."""
    taskset = env.get("taskset")
    if not isinstance(taskset, dict):
        return env
    ident = taskset.get("id")
    if not isinstance(ident, str) or not ident.endswith(".py"):
        return env
    file = Path(ident).resolve()
    if not file.is_file():
        raise SetupError(
            f"{path}.taskset.id",
            f"= {ident!r}: there is no such file (relative to {Path.cwd()})",
            "give the path of your taskset module, or the id of an installed taskset",
        )
    name = file.stem.replace("-", "_").lower()
    loaded = sys.modules.get(name)
    if loaded is None or getattr(loaded, "__file__", None) != str(file):
        spec = importlib.util.spec_from_file_location(name, file)
        assert spec is not None and spec.loader is not None  # a .py file always has both
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # the user's module failed to import: say where and why
            del sys.modules[name]
            raise SetupError(
                f"{path}.taskset.id",
                f"= {ident!r} cannot be imported: {type(exc).__name__}: {_first_line(exc)}",
                "fix the module (python -c 'import runpy; runpy.run_path(\"" + ident + "\")' "
                "shows the whole error)",
            ) from None
    return {**env, "taskset": {**taskset, "id": name}}


def errors_at(path: str, exc, fix: str) -> SetupErrors:
    """A pydantic ValidationError of verifiers' config classes, each error at its dotted path
    under `path`."""
    return SetupErrors(
        [
            SetupError(
                ".".join([path, *(str(part) for part in error["loc"])]),
                f"{error['msg']} (got {error.get('input')!r})",
                fix,
            )
            for error in exc.errors()
        ]
    )


def env_config(env: dict[str, Any], path: str):
    """The verifiers config of a source's `env` table, checked by verifiers' own classes."""
    from pydantic import ValidationError

    vf = _verifiers(f"{path}.taskset.id")
    env = local_taskset(env, path)
    try:
        return vf.resolve_env_config(env)
    except ValidationError as exc:
        raise errors_at(
            path, exc, "fix the value; the environment's settings are its own (see its docs)"
        ) from None
    except (ImportError, TypeError, ValueError, AttributeError) as exc:  # the plugin is missing
        raise SetupError(
            f"{path}.taskset.id",
            f"= {env.get('taskset', {}).get('id')!r} cannot be loaded: {_first_line(exc)}",
            "install the taskset's package, or give the path of a module file "
            '(id = "my_taskset.py")',
        ) from None


def _body(ids: list[int], content: str, tokenizer) -> tuple[int, int] | None:
    """Where the tokens of a message's text sit among its node's tokens (the role header and
    end-of-turn tokens around them), or None when the renderer merged them with their
    neighbours."""
    if not content:
        return None
    body = tokenizer.encode(content, add_special_tokens=False)
    for start in range(len(ids) - len(body) + 1):
        if ids[start : start + len(body)] == body:
            return start, start + len(body)
    return None


def segments_of(nodes, first: int, tokenizer) -> list[tuple[str, int, bool]]:
    """(role, tokens, generated) of a branch's tokens from position `first` on. A message the
    model sampled is generated (its template tokens too); a message of the environment is its
    role's body, between template tokens of no role ("")."""
    out: list[tuple[str, int, bool]] = []
    position = 0
    for node in nodes:
        ids = list(node.token_ids)
        skip = max(0, first - position)
        position += len(ids)
        if skip >= len(ids):
            continue
        if node.sampled:
            out.append(("assistant", len(ids) - skip, True))
            continue
        content = node.message.content if isinstance(node.message.content, str) else ""
        span = _body(ids, content, tokenizer) or (0, len(ids))
        if span[0] < skip:  # the prompt's own message: no body after `first`
            span = (skip, skip)
        role = str(node.message.role)
        for name, start, end in (("", skip, span[0]), (role, span[0], span[1]),
                                 ("", span[1], len(ids))):  # fmt: skip
            if end > start:
                out.append((name, end - start, False))
    return out


def completion_of(branch, trace, tokenizer) -> Completion:
    """One branch of a trace as a completion after its prompt (the tokens before the first
    sampled one)."""
    mask = [bool(m) for m in branch.sampled_mask]
    ids = list(branch.token_ids)
    first = mask.index(True)
    return Completion(
        ids[first:],
        list(branch.logprobs)[first:],
        trace.last_reply,
        not trace.is_truncated,
        prompt_ids=ids[:first],
        mask=mask[first:],
        segments=segments_of(branch.nodes, first, tokenizer),
        agent=trace.agent.name,
        turns=max(1, trace.num_turns),
    )


class EnvPlayer:
    """Plays verifiers episodes for every environment source of one orchestrator: an event
    loop in its own thread, each environment's serving resources held open, and a localhost
    server for each in-process sampler."""

    def __init__(self, tokenizer, renderer_cfg, *, max_inflight: int | None, inflight=None) -> None:
        self.max_inflight = max_inflight
        self.inflight = inflight  # an adaptive InflightLimit (inflight.py), or None
        self.tokenizer = tokenizer
        self._tokenizer_dir = tempfile.mkdtemp(prefix="trainspec-renderer-")
        tokenizer.save_pretrained(self._tokenizer_dir)  # what the train client's renderer loads
        self._renderer = self._renderer_config(renderer_cfg)
        self._servers: dict[int, Any] = {}
        self._serving: set[int] = set()
        self._env_clients: dict[str, Any] = {}
        self._stack = contextlib.AsyncExitStack()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        # verifiers' harness programs run with uv: the one beside this interpreter comes first
        here = str(Path(sys.executable).parent)
        if here not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = here + os.pathsep + os.environ.get("PATH", "")

    @staticmethod
    def _renderer_config(renderer_cfg):
        from ..sft.named_renderers import renderer_config, uses_named_renderer, variant_settings

        if not uses_named_renderer(renderer_cfg):  # the tokenizer's chat template
            return renderer_config("default", {})
        return renderer_config(renderer_cfg.name, variant_settings(renderer_cfg))

    def _endpoint(self, sampler) -> tuple[str, str, dict[str, str]]:
        """(base URL, model name, headers) of the endpoint that serves `sampler`."""
        base_url = getattr(sampler, "base_url", None)
        if base_url is not None:  # a server sampler: its own server
            return base_url, sampler.model, dict(sampler.headers)
        if id(sampler) not in self._servers:
            from ..serve import ModelServer

            self._servers[id(sampler)] = ModelServer(sampler, "policy").start()
        server = self._servers[id(sampler)]
        return server.base_url, server.name, {}

    def context(self, sampler, *, temperature: float, max_tokens: int | None):
        import verifiers.v1 as vf

        base_url, model, headers = self._endpoint(sampler)
        client = vf.TrainClientConfig(
            base_url=base_url,
            api_key_var="TRAINSPEC_NO_API_KEY",  # headers carry any key (Authorization)
            headers=headers,
            renderer=self._renderer,
            renderer_model_name=self._tokenizer_dir,
        )
        extras = dict(getattr(sampler, "extra_body", None) or {})  # a server's request extras
        sampling = vf.Sampling(temperature=temperature, max_tokens=max_tokens, **extras)
        return vf.ModelContext(model=model, client=client, sampling=sampling)

    def play(self, env, tasks: list, n: int, ctx, address: str | None = None) -> list:
        """`n` episodes of every task, task-major, in this process or (`address`) on the
        environment server there; a failed one is an Episode with errors or the exception it
        raised."""
        from verifiers.v1.env import RunSlot

        async def here() -> list:
            if id(env) not in self._serving:
                await self._stack.enter_async_context(env.serving())
                self._serving.add(id(env))
            gate = self._gate()
            slots = [RunSlot(task) for task in tasks for _ in range(n)]
            runs = (env.run_slot(slot, ctx, gate) for slot in slots)
            return await asyncio.gather(*runs, return_exceptions=True)

        async def there(client) -> list:
            gate = self._gate() or asyncio.Semaphore(len(tasks) * n)

            async def one(task):
                async with gate:
                    return await client.run(ctx.client, ctx.model, ctx.sampling,
                                            task.data.model_dump())  # fmt: skip

            runs = (one(task) for task in tasks for _ in range(n))
            return await asyncio.gather(*runs, return_exceptions=True)

        if address is None:
            return asyncio.run_coroutine_threadsafe(here(), self._loop).result()
        client = self._env_client(address)
        return asyncio.run_coroutine_threadsafe(there(client), self._loop).result()

    def _gate(self):
        """What bounds the episodes in flight: the adaptive cap, max_inflight, or nothing."""
        if self.inflight is not None and self.inflight.adaptive:
            from .inflight import AsyncGate

            return AsyncGate(self.inflight)
        return asyncio.Semaphore(self.max_inflight) if self.max_inflight else None

    def _env_client(self, address: str):
        """A client of the environment server at `address`, once it answers its health
        check."""
        if address not in self._env_clients:
            from verifiers.v1.serve import EnvClient

            async def connect():
                client = EnvClient(address)
                await client.wait_for_server_startup(timeout=SERVER_WAIT_S)
                self._stack.push_async_callback(client.close)
                return client

            future = asyncio.run_coroutine_threadsafe(connect(), self._loop)
            try:
                self._env_clients[address] = future.result()
            except TimeoutError:
                raise SetupError(
                    "serve.address",
                    f"= {address!r}: no environment server answered in {SERVER_WAIT_S:.0f} s",
                    "start it first (verifiers' env server for this source's env table), or "
                    "drop serve.address to play the environment in the orchestrator",
                ) from None
        return self._env_clients[address]

    def close(self) -> None:
        with contextlib.suppress(Exception):  # tearing down: the run's result stands
            asyncio.run_coroutine_threadsafe(self._stack.aclose(), self._loop).result(60)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        for server in self._servers.values():
            server.close()
        shutil.rmtree(self._tokenizer_dir, ignore_errors=True)


def _error_of(episode) -> str:
    if isinstance(episode, BaseException):
        return f"{type(episode).__name__}: {_first_line(episode)}"
    errors = list(episode.errors) + [e for trace in episode.traces for e in trace.errors]
    return f"{errors[0].type}: {errors[0].message}" if errors else "the episode did not finish"


class EnvTask(PromptStream):
    """The tasks of a verifiers taskset, in a seeded order per epoch (a finite taskset) or in
    the taskset's own order (an infinite one), played as episodes."""

    def __init__(
        self, config, path: str, player: EnvPlayer, *, seed: int, address: str | None = None
    ) -> None:
        super().__init__()
        vf = _verifiers(f"{path}.taskset.id")
        self.path = path
        self.address = address  # an environment server's, else episodes play here
        self.player = player
        self.seed = seed
        try:
            self.env = vf.load_environment(config)
            taskset = self.env.taskset
            self.infinite = not taskset.bounded
            self._stream = iter(taskset) if self.infinite else None
            self.rows = [] if self.infinite else list(taskset)
        except Exception as exc:  # the taskset's own loading failed: say which and why
            raise SetupError(
                f"{path}.taskset",
                f"{config.taskset.id!r} failed to load its tasks: {type(exc).__name__}: "
                f"{_first_line(exc)}",
                "fix the taskset's settings (or its module)",
            ) from None
        if not self.infinite and not self.rows:
            raise SetupError(f"{path}.taskset", f"{config.taskset.id!r} has no tasks", "check it")

    @classmethod
    def from_env(
        cls, env: dict, path: str, player: EnvPlayer, *, seed: int, address: str | None = None
    ) -> EnvTask:
        return cls(env_config(env, path), path, player, seed=seed, address=address)

    def _prompt(self, index: int) -> Prompt:
        return Prompt([], "", task=self.rows[index])

    def at(self, position: int) -> Prompt:
        if not self.infinite:
            return super().at(position)
        assert self._stream is not None
        while len(self.rows) <= position:
            self.rows.append(next(self._stream))
        return self._prompt(position)

    def count(self, count: int) -> int:
        if self.infinite and count < 0:
            raise SetupError(
                f"{self.path}.taskset",
                "is infinite, and num_examples = -1 asks for all of it",
                "set num_examples on the eval source",
            )
        return count if self.infinite else super().count(count)

    def first(self, count: int) -> list[Prompt]:
        return [self.at(i) if self.infinite else self._prompt(i) for i in range(self.count(count))]

    def exact(self, text: str, prompt: Prompt) -> bool | None:
        return None  # the environment's reward is the measure

    def rollouts(self, prompts, n, sampler, *, temperature, max_tokens, seed):
        """The episodes' trainable branches and their traces' rewards, per prompt."""
        ctx = self.player.context(sampler, temperature=temperature, max_tokens=max_tokens)
        try:
            episodes = self.player.play(self.env, [p.task for p in prompts], n, ctx, self.address)
        except SetupError as err:  # the server never answered: name the source's setting
            raise SetupError(self.path.removesuffix(".env") + "." + err.path, err.problem,
                             err.fix) from None  # fmt: skip
        played, failed = [], []
        for index in range(len(prompts)):
            completions: list[Completion] = []
            rewards: list[float] = []
            for episode in episodes[index * n : (index + 1) * n]:
                if isinstance(episode, BaseException) or not episode.ok:
                    failed.append(episode)
                    continue
                for trace in episode.traces:
                    if not trace.agent.trainable:
                        continue
                    for branch in trace.branches:
                        if branch.trainable and any(branch.sampled_mask):
                            completions.append(completion_of(branch, trace, self.player.tokenizer))
                            rewards.append(float(trace.reward))
            played.append((completions, rewards))
        if failed and len(failed) == len(episodes):
            raise SetupError(
                self.path,
                f"every episode failed ({len(failed)}); the first: {_error_of(failed[0])}",
                "fix the environment or its endpoint (run it alone with verifiers' `vf-eval` "
                "to see the whole error)",
            )
        if failed:
            log.warning(
                "%s: %d of %d episodes failed and were left out (the first: %s)",
                self.path, len(failed), len(episodes), _error_of(failed[0]),
            )  # fmt: skip
        return played
