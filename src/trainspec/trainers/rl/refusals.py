"""What the RL trainer refuses at start: `[model]` settings this build or device cannot honour,
in-memory weight broadcasts, router replay and a metrics server, all in one report.

    check_rl_trainer(config, processes, device_type)   # SetupErrors, or nothing
"""

from __future__ import annotations

from ..errors import SetupError, raise_all
from ..refusals import model_refusals
from ..wire.broadcast import broadcast_refusals


def check_rl_trainer(config, processes: int, device_type: str) -> None:
    """The RL trainer's refusals: `[model]`, the broadcast, router replay, metrics server."""
    raise_all(
        model_refusals(config.model, device_type, processes) + rl_refusals(config, device_type)
    )


def rl_refusals(config, device_type: str) -> list[SetupError]:
    """The RL trainer's own: in-memory broadcasts, router replay, a metrics server."""
    errors = broadcast_refusals(config.weight_broadcast, device_type)
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
    return errors
