"""What `evaluate` refuses at start: settings of an SFT run's online evals that mean nothing for one
evaluation (its schedule), sampling the evaluation does not send, an adaptive concurrency, log
settings it does not honour, client settings for per-rollout headers and per-engine admin URLs,
and vLLM settings in [inference] where no vLLM is started.

    raise_all(eval_refusals(config))
"""

from __future__ import annotations

from trainspec.generated.inference import InferenceConfig
from trainspec.generated.log import LogConfig
from trainspec.generated.sft_eval import EvalsEvalConfig

from ..errors import SetupError
from ..orchestrator.environments.players import starts_server
from ..orchestrator.evals import eval_sampling_refusals
from ..orchestrator.sampling.inflight import adaptive_settings
from ..refusals import renderer_refusals, set_by_user

SCHEDULE = ("interval", "skip_first_step", "retrigger_on_resume")
UNSENT_CLIENT_KEYS = {
    "extra_headers_from_state": "headers filled from each rollout's state are not sent by the "
    "evals' client",
    "admin_base_url": "eval loads no weights into the server: it needs no engine's admin URL",
}
HONOURED_LOG = ("log.level", "log.vf_level")


def _changed(table) -> set[str]:
    """Which of the eval table's schedule and env-server settings differ from their defaults
    (set_by_user, reading those settings alone)."""
    baseline = EvalsEvalConfig.model_construct()
    return {
        path
        for key in (*SCHEDULE, "env_server_base_port")
        for path in set_by_user(getattr(table, key), getattr(baseline, key), key)
    }


def eval_refusals(config) -> list[SetupError]:
    errors: list[SetupError] = []
    table = config.eval
    changed = _changed(table)
    for key in SCHEDULE:
        if key in changed:
            errors.append(
                SetupError(
                    f"eval.{key}",
                    "is set: it schedules an SFT run's online evals over its steps, and `evaluate` "
                    "evaluates the model once",
                    "drop it",
                )
            )
    for index, source in enumerate(table.source):
        if source.interval is not None:
            errors.append(
                SetupError(
                    f"eval.source[{index}].interval",
                    "is set: it schedules an SFT run's online evals of this source, and `evaluate` "
                    "evaluates every source once",
                    "drop it",
                )
            )
    errors += eval_sampling_refusals(table, "eval")
    errors += renderer_refusals(config.renderer, samples="orchestrator")
    for key in adaptive_settings(table.concurrency):
        errors.append(
            SetupError(
                f"eval.concurrency.{key}",
                "is set: eval keeps a fixed number of episodes in flight "
                "(eval.concurrency.max_inflight), not an adaptive one",
                "set eval.concurrency.max_inflight alone",
            )
        )
    if "env_server_base_port" in changed and not any(starts_server(s) for s in table.source):
        errors.append(
            SetupError(
                "eval.env_server_base_port",
                f"= {table.env_server_base_port}, and no eval source asks for an environment "
                "server (an environment plays in this process unless it has a serve table that "
                "names no serve.address)",
                "drop it, or give the source a serve table",
            )
        )
    for key, why in UNSENT_CLIENT_KEYS.items():
        if getattr(table.client, key):
            errors.append(SetupError(f"eval.client.{key}", f"is set: {why}", "drop it"))
    for path in set_by_user(config.log, LogConfig(), "log"):
        if path not in HONOURED_LOG:
            errors.append(
                SetupError(
                    path,
                    "is set: eval logs its lines to the console at log.level (and verifiers' at "
                    "log.vf_level), nothing else",
                    "drop it",
                )
            )
    return errors


def unserved_inference_refusals(config, why: str) -> list[SetupError]:
    """[inference] settings, refused when no vLLM server is started (`why`): the model is then
    served in this process, and a bare [inference] says so."""
    baseline = InferenceConfig.model_validate({"vllm": {"model": config.model}})
    written = set_by_user(config.inference, baseline, "inference")
    if not written:
        return []
    return [
        SetupError(
            "inference",
            f"sets {', '.join(written)}, which tune the vLLM server [inference] starts; {why}, "
            "so the model is served in this process",
            "drop those settings (a bare [inference] runs here), or name a model with weight "
            "files on a machine with a GPU or vLLM installed",
        )
    ]
