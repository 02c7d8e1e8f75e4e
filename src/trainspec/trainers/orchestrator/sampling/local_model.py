"""A model served by this process (LocalSampler), by name: what the `inference` command serves
and `evaluate` evaluates when no vLLM serves them (a built-in model, or a machine without vLLM).

    sampler = local_model("builtin:tiny-qwen3", "vllm.model")   # SetupError naming the field
    server = ModelServer(sampler, "builtin:tiny-qwen3", "127.0.0.1", 8000).start()

A built-in model has no weight files: its weights are initialised from `seed` (the trainers'
start, before any training); anything else is loaded as model_server.py loads it.
"""

from __future__ import annotations

from ...builtin import is_builtin
from ...core.model_source import model_source
from ...errors import SetupError


def local_model(name: str, field: str, *, seed: int = 0, max_batch: int | None = None):
    """A LocalSampler of the model `name` (from the setting `field`) on this machine's device."""
    source = model_source(name, field)
    if not is_builtin(name):
        from .model_server import load

        try:
            return load(source, max_batch=max_batch)
        except SetupError as err:
            raise SetupError(field, err.problem, err.fix) from None
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from ...chat.prompts import template_stop_id
    from .local_sampler import LocalSampler

    tokenizer = AutoTokenizer.from_pretrained(source)
    torch.manual_seed(seed)
    lm = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(source))
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    lm.to(device).eval()
    return LocalSampler(lm, tokenizer, template_stop_id(tokenizer), device, max_batch=max_batch)
