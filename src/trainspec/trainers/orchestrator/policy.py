"""The policy the orchestrator samples from: the newest weights the trainer has broadcast.

    policy = Policy(config, run_dir, tokenizer, stop_id)
    policy.wait_for(step - max_async_level, should_stop)   # False when stopped while waiting
    policy.sampler.sample(...), policy.step

The trainer publishes its starting weights as step 0 (or its resume step) before it trains, so
the orchestrator's first policy is exactly the trainer's. The local sampler builds its model from
the first broadcast directory and copies every later broadcast into it in place; a server
sampler is told about each new directory (see sampling/openai_client.py). With
`weight_broadcast.type = "nccl"` the server receives every step the trainer sends, in order,
over NCCL (wire/broadcast_nccl.py, sampling/vllm_reload.py): the server's workers join the
trainer's group once the trainer waits there, then each announced step is received.

While it waits, the orchestrator watches the trainer's sign of life (process/liveness.py): a
trainer that ended, or has shown no sign for liveness.STALE_S (killed, its node lost), publishes
no more weights, and the wait ends with a RunError that says so instead of lasting forever.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import torch

from ..errors import RunError, SetupError
from ..process.liveness import LifeWatch, trainer_sign
from ..wire.broadcast import broadcast_dir, ready_steps
from .sampling.inflight import InflightLimit
from .sampling.local_sampler import LocalSampler
from .sampling.sampler import Sampler

log = logging.getLogger("trainspec.orchestrator")
POLL_S = 0.005  # a stat() every 5 ms costs nothing next to a step
WAIT_NOTE_S = 60.0
FIRST_WEIGHTS_S = 1200.0  # the reference's wait for the first weights when ckpt sets none
LOAD_RETRY_S = 60.0  # how long a ready broadcast may fail to load before the run stops


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


class Policy:
    def __init__(
        self, config, run_dir: Path, tokenizer, stop_id: int, inflight: InflightLimit | None = None
    ) -> None:
        self.config = config
        self.run_dir = run_dir
        self.tokenizer = tokenizer
        self.stop_id = stop_id
        self.step = -1
        self.sampler: Sampler | None = None  # set by the first weights (local) or here (server)
        self.nccl = config.weight_broadcast.type == "nccl"  # the server receives, over NCCL
        self._joined = False  # nccl: the server's workers are in the trainer's group
        self.trainer = LifeWatch(trainer_sign(run_dir), name="the trainer")
        if config.sampler.type == "openai":
            from .sampling.openai_client import OpenAISampler

            cfg = config.sampler
            self.sampler = OpenAISampler(
                cfg.base_url,
                cfg.model or config.model.name,
                tokenizer,
                stop_id,
                api_key=os.environ.get(cfg.api_key_var) or None,
                timeout_s=cfg.timeout,
                reload_path=cfg.reload_path,
                extra_body=config.train.sampling.extra_body,
                max_batch=config.concurrency.max_inflight,
                inflight=inflight,
            )

    def _load(self, step: int) -> None:
        weights = broadcast_dir(self.run_dir, step)
        if self.sampler is None:
            from transformers import AutoModelForCausalLM

            device = _device(self.config.sampler.device)
            model = AutoModelForCausalLM.from_pretrained(str(weights), dtype="auto")
            model.to(device).eval()  # type: ignore[arg-type]  # typeshed's wraps() loses `self`
            self.sampler = LocalSampler(
                model,
                self.tokenizer,
                self.stop_id,
                device,
                max_batch=self.config.concurrency.max_inflight,  # episodes in flight
            )
        else:
            self.sampler.load_weights(weights)
        self.step = step

    def wait_for(
        self, min_step: int, should_stop: Callable[[], bool], *, first: bool = False
    ) -> bool:
        """Load the newest broadcast once one at `min_step` or later is ready (nccl: receive
        every step sent so far, until one at `min_step` or later is in). The `first` wait (for
        the trainer's starting weights) gives up after ckpt.wait_for_weights_timeout."""
        since = started = time.monotonic()
        ckpt = self.config.ckpt
        limit = ckpt.wait_for_weights_timeout if ckpt is not None else None
        limit = float(limit or FIRST_WEIGHTS_S)
        failing: tuple[int, float] | None = None  # a broadcast that does not load, since when
        while True:
            gone = self.trainer.gone()  # read first: weights it sent before it went still load
            if self.nccl:
                self._receive_pending()
            else:
                failing = self._load_newest(min_step, failing)
            if self.step >= max(0, min_step):
                return True
            if should_stop():
                return False
            if gone is not None and failing is None:  # failing: LOAD_RETRY_S bounds the retries
                raise RunError(
                    str(self.trainer.path),
                    f"{gone}; its weights of step {max(0, min_step)} will not come",
                    "start the trainer again with the same output_dir (its log says why it "
                    "ended): it resumes from its last checkpoint; then start the orchestrator "
                    "again, which goes on at the trainer's step",
                )
            if first and time.monotonic() - started > limit:
                raise SetupError(
                    "orchestrator.ckpt.wait_for_weights_timeout",
                    f"no weights from the trainer in {self.run_dir / 'broadcasts'} after "
                    f"{limit:.0f} s",
                    "start the trainer with the same output_dir (its log says why it has not "
                    "published step 0), or raise ckpt.wait_for_weights_timeout",
                )
            if time.monotonic() - since > WAIT_NOTE_S:
                since = time.monotonic()
                log.info(
                    "waiting for the trainer's weights of step %d in %s",
                    max(0, min_step),
                    self.run_dir,
                )
            time.sleep(POLL_S)

    def _load_newest(self, min_step: int, failing: tuple[int, float] | None):
        """Load the newest ready broadcast if it is new and recent enough; a load that fails
        (deleted while loading: a newer one is there; or torn) is retried, for LOAD_RETRY_S."""
        steps = ready_steps(self.run_dir)
        if not steps or steps[-1] < max(0, min_step) or steps[-1] <= self.step:
            return failing
        try:
            self._load(steps[-1])
            return None
        except OSError as exc:
            if failing is None or failing[0] != steps[-1]:
                return (steps[-1], time.monotonic())
            if time.monotonic() - failing[1] > LOAD_RETRY_S:
                raise self._unloadable(steps[-1], exc) from None
            return failing

    def _receive_pending(self) -> None:
        """nccl: join the trainer's NCCL group once it waits there, then receive every step it
        has announced, in order (it waits in each broadcast until the server has it)."""
        from ..wire.broadcast_nccl import MARKER, init_file, nccl_steps
        from .sampling.vllm_reload import join_weight_transfer, receive_weights

        root = self.sampler.base_url.removesuffix("/v1")  # type: ignore[union-attr]
        if not self._joined:
            if not init_file(self.run_dir).exists():
                return
            init_info = json.loads(init_file(self.run_dir).read_text())["init_info"]
            join_weight_transfer(self.sampler, root, init_info)  # type: ignore[arg-type]
            self._joined = True
        for step in nccl_steps(self.run_dir):
            if step > self.step:
                marker = json.loads((broadcast_dir(self.run_dir, step) / MARKER).read_text())
                version = broadcast_dir(self.run_dir, step).name
                receive_weights(self.sampler, root, version, marker["update_info"])  # type: ignore[arg-type]
                self.step = step

    def _unloadable(self, step: int, exc: OSError) -> RunError:
        return RunError(
            "orchestrator.weight_broadcast",
            f"the trainer's weights of step {step} ({broadcast_dir(self.run_dir, step)}) "
            f"did not load for {LOAD_RETRY_S:.0f} s: {exc}",
            "check the run directory's disk (space, permissions) and the trainer's log; the "
            "run resumes from its last checkpoint",
        )

    def close(self) -> None:
        if self.sampler is not None:
            self.sampler.close()
