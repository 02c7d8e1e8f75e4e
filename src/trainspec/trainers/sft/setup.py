"""SFT settings checked against each other and this build before anything loads."""

from __future__ import annotations

from ..errors import SetupError, raise_all
from ..model_support import check_model_support

# Renderers that mean "the tokenizer's chat template" here.
TEMPLATE_RENDERERS = ("auto", "default")


def preflight(config, processes: int, device_type: str) -> None:
    """Every refusal that needs no model or data, before any worker starts."""
    check_model_support(config.model, device_type, processes)
    check_sft_support(config, processes)


def check_sft_support(config, processes: int) -> None:
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
        if data.batch_size % (data.micro_batch_size * processes):
            errors.append(
                SetupError(
                    f"{path}.batch_size",
                    f"= {data.batch_size} rows per step cannot be split into micro-batches of "
                    f"{data.micro_batch_size} rows on {processes} process(es)",
                    f"make {path}.batch_size a multiple of {path}.micro_batch_size × processes "
                    f"= {data.micro_batch_size * processes}",
                )
            )
    renderer = config.renderer
    if renderer.name not in TEMPLATE_RENDERERS:
        errors.append(
            SetupError(
                "renderer.name",
                f'"{renderer.name}" is one of the reference\'s own renderers, which this build '
                "does not implement: it renders every example with the tokenizer's chat template",
                'use renderer.name = "auto" (or set tokenizer.chat_template to the template '
                "you need)",
            )
        )
    if renderer.thinking_retention is not None:
        errors.append(
            SetupError(
                "renderer.thinking_retention",
                "the chat template renders messages as written; reasoning retention is a "
                "feature of the named renderers this build does not implement",
                "drop renderer.thinking_retention (strip reasoning from your data instead)",
            )
        )
    if config.weight_broadcast is not None:
        errors.append(
            SetupError(
                "weight_broadcast",
                f'"{config.weight_broadcast.type}" feeds online evals, which this build does '
                "not run during SFT",
                "drop [weight_broadcast]; each checkpoint has HF weights under step_N/weights",
            )
        )
    raise_all(errors)
