"""The server `evaluate` samples through, and its client.

    server = EvalServer.start(config, say)   # base_url: the one written, or a server started here
    sampler = server.client(config, tokenizer, stop_id)   # waits until it answers
    server.close()                           # stops what was started (bounded, reaped)

* `eval.client.base_url` written: a server you started (`inference`, vLLM, any OpenAI-compatible
  endpoint serving `model`); eval starts none.
* else `[inference]` where vLLM runs (a GPU or vLLM's CPU build, a model with weight files):
  the vLLM server `rl` starts (serving/vllm_plan.py), on inference.server.port at 127.0.0.1,
  its log in <output_dir>/eval/logs/inference.log; stopped after the evals.
* else the in-process model server (orchestrator/sampling/model_server.py) on a free loopback
  port, serving `model` from this process.

Every request goes through the same OpenAI-compatible client (the orchestrator's), so the scores
do not depend on which server answered.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from ..errors import SetupError, raise_all
from ..orchestrator.sampling.frozen import wait_until_ready
from ..orchestrator.sampling.openai_client import OpenAISampler
from ..serving.gpus import has_gpu
from ..serving.vllm_plan import server_plan, why_not_vllm
from .refusals import unserved_inference_refusals


class EvalServer:
    def __init__(self, base_url: str, stop: Callable[[], None] | None, where: str) -> None:
        self.base_url = base_url
        self._stop = stop
        self.where = where

    @classmethod
    def start(cls, config, run_dir: Path, say: Callable[[str], None]) -> EvalServer:
        client = config.eval.client
        if "base_url" in client.model_fields_set:
            return cls(client.base_url, None, f"the server at {client.base_url}")
        why = why_not_vllm(config.model) if config.inference is not None else None
        if config.inference is not None and why is None:
            return cls._vllm(config, run_dir, say)
        if why is not None:
            raise_all(unserved_inference_refusals(config, why))
            say(f"[inference] asks for a vLLM server, but {why}")
        from ..orchestrator.sampling.local_model import local_model
        from ..orchestrator.sampling.model_server import ModelServer

        sampler = local_model(config.model, "model")
        server = ModelServer(sampler, config.model).start()
        return cls(
            server.base_url, server.close, f"the in-process model server ({server.base_url})"
        )

    @classmethod
    def _vllm(cls, config, run_dir: Path, say: Callable[[str], None]) -> EvalServer:
        from ..serving.inference_server import InferenceServer

        vllm, on_gpu = config.inference.vllm, has_gpu()
        plan = server_plan(
            config.inference,
            model=config.model,
            served_name=config.model,
            infer_gpus=vllm.tensor_parallel_size * vllm.data_parallel_size,
            run_dir=run_dir,
            command="eval",
            seq_len=config.seq_len,
            on_gpu=on_gpu,
        )
        plan.timeout_field = "eval.client.wait_for_ready_timeout"
        for note in plan.notes:
            say(f"[inference]: {note}")
        say(f"starting vLLM: {plan.log_path}")
        server = InferenceServer(plan).start()
        try:
            server.wait_ready(config.eval.client.wait_for_ready_timeout, lambda: False)
        except BaseException:
            server.stop()
            raise
        return cls(plan.base_url, server.stop, f"vLLM at {plan.base_url}")

    def client(self, config, tokenizer, stop_id: int) -> OpenAISampler:
        """The evals' client of this server, once it answers and serves `model`."""
        client = config.eval.client
        headers = dict(client.headers)
        missing = []
        for header, variable in client.headers_from_env.items():
            if os.environ.get(variable) is None:
                missing.append(
                    SetupError(
                        f"eval.client.headers_from_env.{header}",
                        f"names the environment variable {variable!r}, which is not set",
                        f"export {variable}=..., or drop the header",
                    )
                )
            else:
                headers[header] = os.environ[variable]
        raise_all(missing)
        key = os.environ.get(client.api_key_var)
        sampler = OpenAISampler(
            self.base_url,
            config.model,
            tokenizer,
            stop_id,
            api_key=key if key and key != "EMPTY" else None,
            max_batch=config.eval.concurrency.max_inflight,
            headers=headers,
            field="eval.client.base_url",
        )
        check = SimpleNamespace(
            wait_for_ready_timeout=client.wait_for_ready_timeout,
            skip_model_check=client.skip_model_check,
            name=config.model,
        )
        try:
            wait_until_ready(sampler, check, "eval.client")
        except SetupError as err:
            sampler.close()
            if err.path == "eval.client.name":  # the server serves another model
                raise SetupError(
                    "model",
                    err.problem,
                    "set model to a name the server serves, or eval.client.skip_model_check = true",
                ) from None
            raise
        return sampler

    def close(self) -> None:
        if self._stop is not None:
            stop, self._stop = self._stop, None
            stop()
