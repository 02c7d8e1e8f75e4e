"""RL trainer settings checked against this build before anything loads."""

from __future__ import annotations

from ..errors import SetupError, raise_all
from ..model_support import check_model_support
from .broadcast import check_broadcast


def preflight(config, processes: int, device_type: str) -> None:
    """Every refusal that needs no model or data."""
    check_model_support(config.model, device_type, processes)
    errors: list[SetupError] = []
    try:
        check_broadcast(config.weight_broadcast, device_type)
    except SetupError as err:
        errors.append(err)
    if config.enable_router_replay:
        errors.append(
            SetupError(
                "enable_router_replay",
                "this build replays no MoE routing: rollouts carry no routing decisions and "
                "there is no custom MoE implementation to replay them into",
                "set enable_router_replay = false",
            )
        )
    if config.metrics_server is not None:
        errors.append(
            SetupError(
                "metrics_server",
                "this build serves no Prometheus endpoint; metrics go to [monitors] "
                "(metrics.jsonl in output_dir, or W&B)",
                "drop [metrics_server] and read output_dir/metrics.jsonl",
            )
        )
    raise_all(errors)
