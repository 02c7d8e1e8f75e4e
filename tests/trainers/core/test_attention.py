"""`model.attn` picks transformers' attention implementation: as named, or for "auto" one the
family supports; an impossible choice is refused at start, naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.families import save_tiny_model, tiny_config

from trainspec.config import load
from trainspec.trainers.core.model import build_model
from trainspec.trainers.errors import SetupError
from trainspec.trainers.refusals import model_refusals


def model_cfg(source: Path, attn: str):
    return load("sft", [], {"model.name": str(source), "model.attn": attn}).config.model


def transformers_pick(family: str) -> str:
    """What transformers picks for the family's causal LM on CPU: sdpa where its class supports
    it, else eager (which families do changes between transformers releases: Gemma 2 gained
    SDPA and lost it again)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    model_class = MODEL_FOR_CAUSAL_LM_MAPPING[type(tiny_config(family))]
    return "sdpa" if model_class._supports_sdpa else "eager"


@pytest.mark.parametrize(
    "family, attn, expected",
    [
        ("llama", "auto", "sdpa"),
        ("llama", "eager", "eager"),
        ("llama", "sdpa", "sdpa"),
        ("gemma2", "auto", None),  # transformers' pick: whether its Gemma 2 has an SDPA path
        ("gpt_oss", "auto", "eager"),  # no SDPA path for GPT-OSS's attention sinks
    ],
)
def test_the_implementation_is_the_one_configured(tmp_path, family, attn, expected):
    model = build_model(model_cfg(save_tiny_model(family, tmp_path / family), attn), seed=0)
    assert model.lm.config._attn_implementation == (expected or transformers_pick(family))


# the families whose SDPA path this transformers lacks (GPT-OSS in every release measured)
@pytest.mark.parametrize(
    "family", [f for f in ("gemma2", "gpt_oss") if transformers_pick(f) == "eager"]
)
def test_an_implementation_the_family_lacks_is_refused_by_name(tmp_path, family):
    with pytest.raises(SetupError) as raised:
        build_model(model_cfg(save_tiny_model(family, tmp_path / family), "sdpa"), seed=0)
    error = raised.value
    assert error.path == "model.attn" and "'sdpa'" in error.problem
    assert 'attn = "auto"' in error.fix


@pytest.mark.parametrize("attn", ["flash_attention_2", "flash_attention_3", "flex_attention"])
def test_gpu_only_implementations_are_refused_on_the_cpu(tmp_path, attn):
    config = model_cfg(tmp_path, attn)
    (error,) = [e for e in model_refusals(config, "cpu") if e.path == "model.attn"]
    assert f'"{attn}"' in error.problem and "cpu" in error.problem
    assert 'attn = "auto"' in error.fix


def test_auto_keeps_flash_attention_2_only_where_the_family_class_supports_it(tmp_path):
    """On a CUDA GPU with flash-attn, "auto" asks for flash_attention_2; the family's causal-LM
    class decides whether it stays (else transformers' own pick); remote code decides at load."""
    from transformers import PretrainedConfig, PreTrainedModel
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    from trainspec.trainers.core.model import _supported_or_default

    class NoFlashConfig(PretrainedConfig):
        model_type = "no-flash"

    class NoFlashForCausalLM(PreTrainedModel):
        config_class = NoFlashConfig
        _supports_flash_attn = False

    class RemoteConfig(PretrainedConfig):
        model_type = "remote"

    cfg = model_cfg(save_tiny_model("llama", tmp_path / "llama"), "auto")
    remote = cfg.model_copy(update={"trust_remote_code": True})
    flash = "flash_attention_2"
    assert _supported_or_default(tiny_config("llama"), flash, cfg) == flash
    assert _supported_or_default(RemoteConfig(), flash, remote) is None
    MODEL_FOR_CAUSAL_LM_MAPPING.register(NoFlashConfig, NoFlashForCausalLM, exist_ok=True)
    try:
        assert _supported_or_default(NoFlashConfig(), flash, cfg) is None
    finally:
        MODEL_FOR_CAUSAL_LM_MAPPING._extra_content.pop(NoFlashConfig)
