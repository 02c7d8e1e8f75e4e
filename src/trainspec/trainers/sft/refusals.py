"""What an SFT run refuses at start, before any worker starts: `[model]` settings this build or
device cannot honour, data the processes cannot split, renderers SFT does not have, and what
its online evals (`[eval]`, `[inference]`, `weight_broadcast`) ask that this build or machine
cannot honour. Each refusal names the setting, why, and what to do instead.

    check_sft(config, processes, device_type)     # SetupErrors, or nothing
    errors = online_eval_refusals(config, device_type)

* `weight_broadcast` without `[eval]` feeds nothing; the evals reload the server from weight
  files, so "nccl" (wired for `rl`) and "nixl" are refused.
* Settings inside `[inference]` tune the vLLM server that `sft` starts on a GPU machine; without
  one (no GPU, or `train()` called without the `sft` launcher) the evals run in the trainer's
  process, so a bare `[inference]` runs (said at start) and any setting in it is refused.
* `[eval.client]` settings address a server: without one they have nothing to act on; with one,
  per-rollout headers and per-engine admin URLs are refused (one engine, no router).
* A fixed number of episodes in flight (`concurrency.max_inflight`), no adaptive one; an
  `env_server_base_port` with no environment server to place; eval sampling beyond the
  temperature and the token cap; several nodes (their inference nodes come with SLURM).

A setting counts as set when it differs from what the config rules make of the same config
without it (a bare `[inference]`, no `[eval.client]`), so a resolved config read back from JSON,
as each torchrun worker reads it, is judged like the file it came from.
"""

from __future__ import annotations

from trainspec.validators.context import RuleContext
from trainspec.validators.online_evals import ONLINE_EVAL_RULES

from ..errors import SetupError, raise_all
from ..orchestrator.environments.players import starts_server
from ..orchestrator.evals import eval_sampling_refusals
from ..refusals import batch_split, model_refusals, renderer_refusals, set_by_user
from ..wire.broadcast import broadcast_refusals
from .online_evals import served_url


def _resolved_without(config, *, inference: bool, client: bool):
    """A copy of the config with a bare [inference] (`inference`) and no [eval.client]
    (`client`), as the online evals' rules resolve it."""
    from trainspec.generated.client import ClientConfig
    from trainspec.generated.inference import InferenceConfig

    copy = config.model_copy(deep=True)
    if inference and copy.inference is not None:
        copy.inference = InferenceConfig()
    if client:
        copy.eval.client = ClientConfig()
    ctx = RuleContext("sft")
    for rule in ONLINE_EVAL_RULES:
        rule(copy, ctx)
    return copy


def online_eval_refusals(config, device_type: str) -> list[SetupError]:
    errors: list[SetupError] = []
    broadcast = config.weight_broadcast
    if config.eval is None:
        if broadcast is not None:
            errors.append(
                SetupError(
                    "weight_broadcast",
                    f'"{broadcast.type}" feeds the online evals, and this run has no [eval]',
                    "drop [weight_broadcast], or add [eval] with the sources to evaluate",
                )
            )
        return errors
    if broadcast is not None and broadcast.type == "nccl":
        errors.append(
            SetupError(
                "weight_broadcast.type",
                "= 'nccl': sft's online evals reload the server from weight files (nccl is "
                "wired for rl's trainer and orchestrator)",
                'set weight_broadcast.type = "filesystem"',
            )
        )
    elif broadcast is not None:
        errors += broadcast_refusals(broadcast, device_type)
    errors += eval_sampling_refusals(config.eval, "eval")
    if config.deployment.type == "multi_node":
        errors.append(
            SetupError(
                "deployment.type",
                '= "multi_node": the online evals of a multi-node run play against inference '
                "nodes that the SLURM launcher starts, which this build does not have (issue 21)",
                'train on one node (deployment.type = "single_node"), or drop [eval]',
            )
        )
    served = served_url() is not None and config.inference is not None
    target = config.model_copy(deep=True)  # the real tables (the config may be a recorder)
    if config.inference is not None and not served:
        bare = _resolved_without(target, inference=True, client=False).inference
        written = set_by_user(target.inference, bare, "inference")
        if written:
            why = (
                f"no vLLM server was started for it (this machine has no GPU ({device_type}) "
                "and vLLM is not installed, or model.name is the built-in model, which has no "
                "weight files)"
                if device_type != "cuda"
                else "the sft command starts it, and this run was started without it"
            )
            errors.append(
                SetupError(
                    "inference",
                    f"sets {', '.join(written)}, which tune the vLLM server [inference] starts; "
                    f"{why}, so the evals run in the trainer's process",
                    "drop those settings (a bare [inference] runs here), or run sft on a GPU "
                    "machine",
                )
            )
    default_client = _resolved_without(target, inference=False, client=True).eval.client
    changed = set_by_user(target.eval.client, default_client, "eval.client")
    keys = sorted({path.split(".")[2] for path in changed})
    if served:
        for key in keys:
            if key in UNSERVED_CLIENT_KEYS:
                errors.append(
                    SetupError(
                        f"eval.client.{key}", f"is set: {UNSERVED_CLIENT_KEYS[key]}", "drop it"
                    )  # fmt: skip
                )
    elif keys:
        where = (
            "without [inference] the evals run in the trainer's process"
            if config.inference is None
            else "this machine starts no server, so the evals run in the trainer's process"
        )
        errors.append(
            SetupError(
                "eval.client",
                f"sets {', '.join(keys)}, which address the server the evals talk to; {where}",
                "drop [eval.client] (with [inference] on a GPU machine sft starts the server and "
                "fills in eval.client.base_url)",
            )
        )
    concurrency = config.eval.concurrency
    for key, default in (("initial_inflight", None), ("min_inflight", 1)):
        if getattr(concurrency, key) != default:
            errors.append(
                SetupError(
                    f"eval.concurrency.{key}",
                    "is set: the evals keep a fixed number of episodes in flight "
                    "(eval.concurrency.max_inflight), not an adaptive one",
                    "set eval.concurrency.max_inflight alone",
                )
            )
    base_port = config.eval.env_server_base_port
    if base_port != 5000 and not any(starts_server(s) for s in config.eval.source):
        errors.append(
            SetupError(
                "eval.env_server_base_port",
                f"= {base_port}, and no eval source asks for an environment server (an "
                "environment plays in the trainer's process unless it has a serve table that "
                "names no serve.address)",
                "drop it, or give the source a serve table",
            )
        )
    return errors


UNSERVED_CLIENT_KEYS = {
    "extra_headers_from_state": "headers filled from each rollout's state are not sent by the "
    "evals' client",
    "admin_base_url": "sft starts one engine, with no router: weights are loaded at base_url",
}


def check_sft(config, processes: int, device_type: str) -> None:
    """The SFT trainer's refusals: `[model]`, data shapes, renderers, weight broadcasts."""
    raise_all(
        model_refusals(config.model, device_type, processes)
        + sft_refusals(config, processes)
        + online_eval_refusals(config, device_type)
    )


def sft_refusals(config, processes: int) -> list[SetupError]:
    """Data shapes the processes cannot split, and renderers SFT does not have."""
    errors: list[SetupError] = []
    tables = [("data", config.data)]
    if config.val is not None:
        tables.append(("val.data", config.val.data))
    for path, data in tables:
        if data.seq_len > config.model.seq_len:
            errors.append(
                SetupError(
                    f"{path}.seq_len",
                    f"= {data.seq_len} is longer than model.seq_len = {config.model.seq_len}",
                    f"raise model.seq_len to {data.seq_len} or shorten {path}.seq_len",
                )
            )
        split = batch_split(data, path, processes)
        if isinstance(split, SetupError):
            errors.append(split)
    errors.extend(renderer_refusals(config.renderer))
    return errors
