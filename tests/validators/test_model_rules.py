"""MODEL_RULES: one test per outcome of every rule of the [model] table, in both kinds.

Every input trips only the rule under test: impl = "hf" always comes with an explicit
attn = "flash_attention_2" (attn = "auto" needs impl "custom" or "auto"), a VLM always comes with
impl = "custom" and bfloat16 dtypes, and deepep / full_offload switch gradient clipping off
(optim.max_norm = "None") unless the clipping warning is the point.
"""

from __future__ import annotations

import pytest

from trainspec.config import KINDS
from trainspec.generated.model import ActivationCheckpointConfig, FP8Config, MXFP8Config
from trainspec.validators.model_rules import MODEL_RULES

HF = {"impl": "hf", "attn": "flash_attention_2"}
VLM = {"vision_encoder_attr": "model.visual", "language_model_attr": "model.language_model"}
VLM_MODEL = {
    "impl": "custom",
    "vlm": VLM,
    "optimization_dtype": "bfloat16",
    "reduce_dtype": "bfloat16",
}
NO_CLIPPING = {"optim": {"max_norm": "None"}}

kinds = pytest.mark.parametrize("kind", KINDS)


def model(**fields):
    return {"model": fields}


def test_model_rules_are_the_documented_ones():
    assert [rule.__name__ for rule in MODEL_RULES] == [
        "resolve_duplicate_ac_targets",
        "validate_selective_targets",
        "trust_remote_code_only_with_hf",
        "vlm_only_with_custom_impl",
        "vlm_cp_requires_ulysses",
        "validate_cp",
        "resolve_ac_for_ac_offloading",
        "selective_ac_only_with_custom_impl",
        "cpu_offload_mutual_exclusion",
        "flash_attention_4_only_with_custom_impl",
        "quantization_only_with_custom_impl",
        "validate_ep_comm_backend",
        "mxfp8_only_with_torch_ep_backend",
    ]


# --- validate_selective_targets ------------------------------------------------------------------


@kinds
@pytest.mark.parametrize("mode", ["full", "selective"])
def test_resolve_duplicate_ac_targets_removes_duplicates_with_warning(kind, mode, outcome):
    out = outcome(kind, model(ac={"mode": mode, "targets": ["norm", "mlp", "norm", "mlp"]}))
    issue = out.only_warning("resolve_duplicate_ac_targets", "model.ac.targets")
    assert "duplicates removed" in issue.message
    assert "norm" in issue.message and "mlp" in issue.message
    assert out.config.model.ac.targets == ["norm", "mlp"]
    assert out.config.model.ac.mode == mode


@kinds
def test_validate_selective_targets_rejects_selective_without_targets(kind, outcome):
    out = outcome(kind, model(ac={"mode": "selective", "targets": []}))
    issue = out.only_error("validate_selective_targets", "model.ac.targets")
    assert "is empty" in issue.message
    assert 'model.ac.mode = "selective"' in issue.message


@kinds
@pytest.mark.parametrize(
    "ac",
    [
        {"mode": "selective", "targets": ["norm", "mlp"]},
        {"mode": "full", "targets": []},
        {},
    ],
)
def test_validate_selective_targets_leaves_unique_targets_alone(kind, ac, outcome):
    config = outcome(kind, model(ac=ac)).clean()
    expected = ActivationCheckpointConfig.model_validate(ac)
    assert config.model.ac == expected


# --- trust_remote_code_only_with_hf --------------------------------------------------------------


@kinds
def test_trust_remote_code_only_with_hf_rejects_custom_impl(kind, outcome):
    out = outcome(kind, model(impl="custom", trust_remote_code=True))
    issue = out.only_error("trust_remote_code_only_with_hf", "model.trust_remote_code")
    assert "= true" in issue.message
    assert 'model.impl = "custom"' in issue.message


@kinds
@pytest.mark.parametrize("impl_fields", [HF, {"impl": "auto"}], ids=["hf", "auto"])
def test_trust_remote_code_only_with_hf_accepts_hf_and_auto(kind, impl_fields, outcome):
    config = outcome(kind, model(**impl_fields, trust_remote_code=True)).clean()
    assert config.model.trust_remote_code is True
    assert config.model.impl == impl_fields["impl"]


# --- vlm_only_with_custom_impl -------------------------------------------------------------------


@kinds
@pytest.mark.parametrize("impl_fields", [HF, {"impl": "auto"}], ids=["hf", "auto"])
def test_vlm_only_with_custom_impl_rejects_other_impls(kind, impl_fields, outcome):
    out = outcome(kind, model(**{**VLM_MODEL, **impl_fields}))
    issue = out.only_error("vlm_only_with_custom_impl", "model.vlm")
    assert f'got "{impl_fields["impl"]}"' in issue.message
    assert 'model.impl = "custom"' in issue.message


@kinds
def test_vlm_only_with_custom_impl_accepts_custom(kind, outcome):
    config = outcome(kind, model(**VLM_MODEL)).clean()
    assert config.model.vlm.vision_encoder_attr == "model.visual"
    assert config.model.impl == "custom"


# --- vlm_cp_requires_ulysses ---------------------------------------------------------------------


@kinds
def test_vlm_cp_requires_ulysses_rejects_ring(kind, outcome):
    out = outcome(kind, model(**VLM_MODEL, cp=2, cp_style="ring"))
    issue = out.only_error("vlm_cp_requires_ulysses", "model.cp_style")
    assert "model.cp = 2" in issue.message
    assert 'got "ring"' in issue.message


@kinds
@pytest.mark.parametrize(("cp", "cp_style"), [(2, "ulysses"), (1, "ring")])
def test_vlm_cp_requires_ulysses_leaves_valid_layouts_alone(kind, cp, cp_style, outcome):
    config = outcome(kind, model(**VLM_MODEL, cp=cp, cp_style=cp_style)).clean()
    assert (config.model.cp, config.model.cp_style) == (cp, cp_style)


# --- validate_cp ---------------------------------------------------------------------------------


@kinds
def test_validate_cp_rejects_hf_impl(kind, outcome):
    out = outcome(kind, model(**HF, cp=2))
    issue = out.only_error("validate_cp", "model.cp")
    assert "= 2" in issue.message
    assert 'got "hf"' in issue.message


@kinds
@pytest.mark.parametrize("impl", ["custom", "auto"])
def test_validate_cp_accepts_custom_and_auto(kind, impl, outcome):
    config = outcome(kind, model(impl=impl, cp=2)).clean()
    assert config.model.cp == 2


# --- resolve_ac_for_ac_offloading ----------------------------------------------------------------


@kinds
def test_resolve_ac_for_ac_offloading_turns_ac_back_on_with_warning(kind, outcome):
    out = outcome(kind, model(ac="None"))
    issue = out.only_warning("resolve_ac_for_ac_offloading", "model.ac")
    assert "turned back on" in issue.message
    assert "model.ac_offloading" in issue.message
    assert out.config.model.ac == ActivationCheckpointConfig()
    assert out.config.model.ac_offloading is not None


@kinds
def test_resolve_ac_for_ac_offloading_leaves_both_off_alone(kind, outcome):
    config = outcome(kind, model(ac="None", ac_offloading="None")).clean()
    assert config.model.ac is None
    assert config.model.ac_offloading is None


@kinds
def test_resolve_ac_for_ac_offloading_leaves_explicit_ac_alone(kind, outcome):
    config = outcome(kind, model(ac={"freq": 2})).clean()
    assert config.model.ac == ActivationCheckpointConfig(freq=2)


# --- selective_ac_only_with_custom_impl ----------------------------------------------------------


@kinds
def test_selective_ac_only_with_custom_impl_rejects_hf(kind, outcome):
    out = outcome(kind, model(**HF, ac={"mode": "selective"}))
    issue = out.only_error("selective_ac_only_with_custom_impl", "model.ac.mode")
    assert '= "selective"' in issue.message
    assert 'got "hf"' in issue.message


@kinds
@pytest.mark.parametrize("impl", ["custom", "auto"])
def test_selective_ac_only_with_custom_impl_accepts_custom_and_auto(kind, impl, outcome):
    config = outcome(kind, model(impl=impl, ac={"mode": "selective"})).clean()
    assert config.model.ac.mode == "selective"


@kinds
def test_selective_ac_only_with_custom_impl_accepts_full_ac_with_hf(kind, outcome):
    config = outcome(kind, model(**HF, ac={"mode": "full"})).clean()
    assert config.model.ac.mode == "full"


# --- cpu_offload_mutual_exclusion ----------------------------------------------------------------


@kinds
def test_cpu_offload_mutual_exclusion_rejects_fsdp_with_optim_offload(kind, outcome):
    out = outcome(kind, model(fsdp_cpu_offload=True))
    issue = out.only_error("cpu_offload_mutual_exclusion", "model.fsdp_cpu_offload")
    assert "= true" in issue.message
    assert "model.optim_cpu_offload" in issue.message


@kinds
def test_cpu_offload_mutual_exclusion_rejects_full_offload_with_optim_offload(kind, outcome):
    out = outcome(kind, {**model(full_offload=True), **NO_CLIPPING})
    issue = out.only_error("cpu_offload_mutual_exclusion", "model.full_offload")
    assert "model.optim_cpu_offload" in issue.message


@kinds
def test_cpu_offload_mutual_exclusion_rejects_full_offload_with_fsdp_offload(kind, outcome):
    doc = {**model(full_offload=True, fsdp_cpu_offload=True, optim_cpu_offload=False)}
    out = outcome(kind, {**doc, **NO_CLIPPING})
    issue = out.only_error("cpu_offload_mutual_exclusion", "model.full_offload")
    assert "model.fsdp_cpu_offload = true" in issue.message


@kinds
def test_cpu_offload_mutual_exclusion_reports_every_conflict(kind, outcome):
    out = outcome(kind, {**model(full_offload=True, fsdp_cpu_offload=True), **NO_CLIPPING})
    assert out.config is None
    assert out.error_keys == [
        ("cpu_offload_mutual_exclusion", "model.fsdp_cpu_offload"),
        ("cpu_offload_mutual_exclusion", "model.full_offload"),
        ("cpu_offload_mutual_exclusion", "model.full_offload"),
    ]
    assert out.warning_keys == []
    assert "model.fsdp_cpu_offload = true" in out.errors[1].message
    assert "model.optim_cpu_offload" in out.errors[2].message
    assert all(issue.fix for issue in out.errors)


@kinds
@pytest.mark.parametrize(
    ("fields", "full_offload_on"),
    [
        ({"fsdp_cpu_offload": True, "optim_cpu_offload": False}, False),
        ({"full_offload": True, "optim_cpu_offload": False}, True),
        ({"full_offload": {"cpu_optimizer_backend": "torch"}, "optim_cpu_offload": False}, True),
        ({"full_offload": False}, False),
        ({}, False),
    ],
    ids=["fsdp-only", "full-only", "full-table", "full-false", "defaults"],
)
def test_cpu_offload_mutual_exclusion_leaves_one_offload_alone(
    kind, fields, full_offload_on, outcome
):
    config = outcome(kind, {**model(**fields), **NO_CLIPPING}).clean()
    assert (config.model.full_offload is not None) is full_offload_on
    assert config.model.fsdp_cpu_offload is fields.get("fsdp_cpu_offload", False)
    assert config.model.optim_cpu_offload is fields.get("optim_cpu_offload", True)


# --- flash_attention_4_only_with_custom_impl ------------------------------------------------


@kinds
@pytest.mark.parametrize("attn", ["flash_attention_4", "auto"])
def test_flash_attention_4_only_with_custom_impl_rejects_hf(kind, attn, outcome):
    out = outcome(kind, model(impl="hf", attn=attn))
    issue = out.only_error("flash_attention_4_only_with_custom_impl", "model.attn")
    assert f'= "{attn}"' in issue.message
    assert 'got "hf"' in issue.message


@kinds
@pytest.mark.parametrize(
    ("impl", "attn"),
    [
        ("custom", "flash_attention_4"),
        ("auto", "flash_attention_4"),
        ("custom", "auto"),
        ("hf", "flash_attention_2"),
        ("hf", "flash_attention_3"),
    ],
)
def test_flash_attention_4_only_with_custom_impl_leaves_valid_pairs_alone(
    kind, impl, attn, outcome
):
    config = outcome(kind, model(impl=impl, attn=attn)).clean()
    assert (config.model.impl, config.model.attn) == (impl, attn)


# --- quantization_only_with_custom_impl ----------------------------------------------------------


@kinds
@pytest.mark.parametrize("qtype", ["fp8", "mxfp8"])
def test_quantization_only_with_custom_impl_rejects_hf(kind, qtype, outcome):
    out = outcome(kind, model(**HF, quantization={"type": qtype}))
    issue = out.only_error("quantization_only_with_custom_impl", "model.quantization")
    assert 'got "hf"' in issue.message


@kinds
@pytest.mark.parametrize("impl", ["custom", "auto"])
@pytest.mark.parametrize(("qtype", "cls"), [("fp8", FP8Config), ("mxfp8", MXFP8Config)])
def test_quantization_only_with_custom_impl_accepts_custom_and_auto(
    kind, impl, qtype, cls, outcome
):
    config = outcome(kind, model(impl=impl, quantization={"type": qtype})).clean()
    assert isinstance(config.model.quantization, cls)


# --- validate_ep_comm_backend --------------------------------------------------------------------


@kinds
def test_validate_ep_comm_backend_rejects_deepep_without_expert_parallelism(kind, outcome):
    out = outcome(kind, {**model(ep=1, ep_comm_backend="deepep"), **NO_CLIPPING})
    issue = out.only_error("validate_ep_comm_backend", "model.ep_comm_backend")
    assert '= "deepep"' in issue.message
    assert "model.ep = 1" in issue.message


@kinds
@pytest.mark.parametrize(
    ("ep", "backend"), [(2, "deepep"), ("auto", "deepep"), (1, "torch"), ("auto", "torch")]
)
def test_validate_ep_comm_backend_leaves_valid_pairs_alone(kind, ep, backend, outcome):
    config = outcome(kind, {**model(ep=ep, ep_comm_backend=backend), **NO_CLIPPING}).clean()
    assert (config.model.ep, config.model.ep_comm_backend) == (ep, backend)


# --- mxfp8_only_with_torch_ep_backend -------------------------------------------------------


@kinds
def test_mxfp8_only_with_torch_ep_backend_rejects_deepep(kind, outcome):
    doc = model(quantization={"type": "mxfp8"}, ep_comm_backend="deepep")
    out = outcome(kind, {**doc, **NO_CLIPPING})
    issue = out.only_error("mxfp8_only_with_torch_ep_backend", "model.quantization")
    assert '"mxfp8"' in issue.message
    assert 'got "deepep"' in issue.message


@kinds
@pytest.mark.parametrize(
    ("qtype", "backend", "cls"),
    [("mxfp8", "torch", MXFP8Config), ("fp8", "deepep", FP8Config)],
)
def test_mxfp8_only_with_torch_ep_backend_leaves_valid_pairs_alone(
    kind, qtype, backend, cls, outcome
):
    doc = model(quantization={"type": qtype}, ep_comm_backend=backend)
    config = outcome(kind, {**doc, **NO_CLIPPING}).clean()
    assert isinstance(config.model.quantization, cls)
    assert config.model.ep_comm_backend == backend
