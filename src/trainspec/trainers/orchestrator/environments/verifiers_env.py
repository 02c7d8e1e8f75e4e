"""Environments through the verifiers library (`pip install 'trainspec[envs]'`): a source whose
`env.taskset.id` is not built in is a verifiers environment. Its taskset, agents, harnesses and
runtimes are verifiers' own, configured by the source's `env` table (verifiers_config.py), and
each rollout is one verifiers episode played against an OpenAI-compatible endpoint that serves
the policy.

    player = EnvPlayer(tokenizer, config.renderer, max_inflight=64)
    task = EnvTask.from_env(source.env, "orchestrator.train.source[0].env", player, seed=0)
    played = task.rollouts(prompts, n, sampler, temperature=1.0, max_tokens=128, seed=s)
    # per prompt: (completions, rewards), one completion per trainable branch of its episodes

* The endpoint is a server sampler's own URL (the vLLM that `rl` starts, [orchestrator.sampler]
  or a frozen model's). The in-process sampler is served on localhost (serve.ModelServer), so an
  environment runs unchanged on a machine without a GPU.
* Tokens come from verifiers' train client: it renders every turn with the orchestrator's
  renderer and calls the token route /inference/v1/generate (through token_route.py, which
  names each sampled token as the renderers package reads it). A trainable branch of an episode's
  trace is a completion (episode_completions.py); its reward is the trace's.
* An episode that fails (harness, runtime, endpoint) is left out of its group and counted in
  the log; a step whose every episode failed stops the run with the first error.
* A source whose `serve.address` is set plays on the environment server there (verifiers'
  env server, started elsewhere or by env_servers.py), which the orchestrator waits for; the
  tasks are still loaded here, and each episode request carries its task, as the reference
  does. While episodes are out on it the server is watched (server_watch.py): one that is
  gone fails the step with a RunError instead of hanging the orchestrator.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from ...errors import SetupError
from ..sampling.sampler import Completion
from .episode_completions import completion_of
from .task import Prompt, PromptStream
from .verifiers_config import env_config, first_line, import_verifiers

log = logging.getLogger("trainspec.orchestrator")
SERVER_WAIT_S = 600.0  # how long an environment server may take to answer, as the reference


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
        self.exited: dict[str, Any] = {}  # address -> its started server's check (server_watch)
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
        from ...chat.named_renderers import renderer_config, uses_named_renderer, variant_settings

        if not uses_named_renderer(renderer_cfg):  # the tokenizer's chat template
            return renderer_config("default", {})
        return renderer_config(renderer_cfg.name, variant_settings(renderer_cfg))

    def _endpoint(self, sampler) -> tuple[str, str]:
        """(base URL, model name) of the loopback endpoint that serves `sampler`: a server
        sampler's headers (its API key) go on from there."""
        base_url = getattr(sampler, "base_url", None)
        if id(sampler) not in self._servers:
            if base_url is not None:  # a server sampler: its server, in renderers' shape
                from .token_route import TokenRoute

                self._servers[id(sampler)] = TokenRoute(base_url, dict(sampler.headers)).start()
            else:  # the in-process sampler, served on localhost
                from ..sampling.model_server import ModelServer

                self._servers[id(sampler)] = ModelServer(sampler, "policy").start()
        server = self._servers[id(sampler)]
        return server.base_url, sampler.model if base_url is not None else server.name

    def context(self, sampler, *, temperature: float, max_tokens: int | None):
        import verifiers.v1 as vf

        base_url, model = self._endpoint(sampler)
        client = vf.TrainClientConfig(
            base_url=base_url,
            api_key_var="TRAINSPEC_NO_API_KEY",  # the endpoint adds the sampler's key
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
        from .server_watch import watched

        client = self._env_client(address)
        runs = watched(there(client), client, address, self.exited.get(address))
        return asyncio.run_coroutine_threadsafe(runs, self._loop).result()

    def _gate(self):
        """What bounds the episodes in flight: the adaptive cap, max_inflight, or nothing."""
        if self.inflight is not None and self.inflight.adaptive:
            from ..sampling.inflight import AsyncGate

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
        return f"{type(episode).__name__}: {first_line(episode)}"
    errors = list(episode.errors) + [e for trace in episode.traces for e in trace.errors]
    return f"{errors[0].type}: {errors[0].message}" if errors else "the episode did not finish"


class EnvTask(PromptStream):
    """The tasks of a verifiers taskset, in a seeded order per epoch (a finite taskset) or in
    the taskset's own order (an infinite one), played as episodes."""

    def __init__(
        self, config, path: str, player: EnvPlayer, *, seed: int, address: str | None = None
    ) -> None:
        super().__init__()
        vf = import_verifiers(f"{path}.taskset.id")
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
                f"{first_line(exc)}",
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
        except SetupError as err:  # the server never answered, or is gone: the source's setting
            raise type(err)(self.path.removesuffix(".env") + "." + err.path, err.problem,
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
