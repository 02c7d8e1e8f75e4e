"""The shared trainer rules of pipeline.SHARED_RULES (after the model rules), in both kinds,
plus the rule order and a check that every rule of the pipeline has a test.

resolve_auto_defaults is a shared rule too; test_auto_defaults.py covers it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainspec.config import KINDS, config_class
from trainspec.issues import dotted
from trainspec.validators.context import RuleContext
from trainspec.validators.model_rules import MODEL_RULES
from trainspec.validators.pipeline import MODE_RULES, SHARED_RULES, rules_for
from trainspec.validators.shared import (
    MAX_TRACE_STEPS,
    PROTECTED_ENV_VARS,
    reject_protected_env_vars,
)

HF = {"impl": "hf", "attn": "flash_attention_2"}
VLM = {"vision_encoder_attr": "model.visual", "language_model_attr": "model.language_model"}
VLM_MODEL = {
    "impl": "custom",
    "vlm": VLM,
    "optimization_dtype": "bfloat16",
    "reduce_dtype": "bfloat16",
}
# model.full_offload on, without the error about the default model.optim_cpu_offload = true.
FULL_OFFLOAD = {"full_offload": True, "optim_cpu_offload": False}

kinds = pytest.mark.parametrize("kind", KINDS)


# --- order and coverage ---------------------------------------------------------------------


@kinds
def test_shared_rules_run_before_mode_rules(kind):
    order = list(rules_for(kind))
    shared = [order.index(rule) for rule in SHARED_RULES]
    mode = [order.index(rule) for rule in MODE_RULES[kind]]
    assert mode, f"no {kind} rules"
    assert max(shared) < min(mode)
    assert order == [*SHARED_RULES, *MODE_RULES[kind]]
    assert len(set(order)) == len(order)


def test_model_rules_run_first_among_shared_rules():
    assert SHARED_RULES[: len(MODEL_RULES)] == MODEL_RULES
    assert SHARED_RULES[len(MODEL_RULES)].__name__ == "resolve_auto_defaults"


def test_every_pipeline_rule_has_a_test():
    sources = "".join(path.read_text() for path in Path(__file__).parent.glob("test_*.py"))
    names = {rule.__name__ for kind in KINDS for rule in rules_for(kind)}
    untested = sorted(name for name in names if f"test_{name}" not in sources)
    assert untested == []


@pytest.mark.parametrize(
    "module",
    ["context", "auto", "model_rules", "shared", "rl", "sft", "pipeline", "run_paths", "slurm"],
)
def test_validator_module_imports_on_its_own(module):
    """Each rules module can be the first trainspec import of a process (a rule author's
    script, a single test file), not only after trainspec.config."""
    result = subprocess.run(
        [sys.executable, "-c", f"import trainspec.validators.{module}"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr.strip().splitlines()[-1]


@kinds
def test_rule_that_changes_a_value_warns_with_dotted_path(kind, outcome):
    out = outcome(kind, {"model": {"ep_comm_backend": "deepep"}})
    issue = out.only_warning("resolve_no_grad_clipping_with_deepep", "optim.max_norm")
    assert issue.message.startswith("set to null")
    assert out.config.optim.max_norm is None


# --- reject_protected_env_vars -------------------------------------------------------------------


# The schema states this rule too (propertyNames), so the pipeline stops it at stage 1; the
# handwritten twin guards configs built from the generated classes directly.


@kinds
@pytest.mark.parametrize("key", PROTECTED_ENV_VARS)
def test_reject_protected_env_vars_rejects_launcher_variables(kind, key):
    config = config_class(kind).model_validate({"env_vars": {"NCCL_DEBUG": "WARN", key: "x"}})
    ctx = RuleContext(kind, rule="reject_protected_env_vars")
    reject_protected_env_vars(config, ctx)
    assert [(i.rule, i.path) for i in ctx.errors] == [
        ("reject_protected_env_vars", f"env_vars.{key}")
    ]
    assert "cannot be overridden" in ctx.errors[0].message
    assert key in ctx.errors[0].fix


@kinds
def test_reject_protected_env_vars_reports_each_variable(kind, outcome):
    out = outcome(kind, {"env_vars": {"WANDB_RUN_ID": "a", "CUDA_VISIBLE_DEVICES": "0"}})
    assert out.error_keys == [
        ("reject_protected_env_vars", "env_vars.WANDB_RUN_ID"),
        ("reject_protected_env_vars", "env_vars.CUDA_VISIBLE_DEVICES"),
    ]
    assert all("is set by the launcher" in e.message for e in out.errors)


@kinds
def test_reject_protected_env_vars_leaves_other_variables_alone(kind, outcome):
    config = outcome(kind, {"env_vars": {"NCCL_DEBUG": "WARN"}}).clean()
    assert config.env_vars == {"NCCL_DEBUG": "WARN"}


@kinds
@pytest.mark.parametrize("name", ["", "A=B", "X\0Y"])
def test_validate_env_var_names_rejects_names_no_process_can_have(kind, name, outcome):
    out = outcome(kind, {"env_vars": {name: "1"}})
    issue = out.only_error("validate_env_var_names", dotted(("env_vars", name)))
    assert "cannot name an environment variable" in issue.message


@kinds
def test_validate_env_var_names_rejects_a_nul_in_a_value(kind, outcome):
    out = outcome(kind, {"env_vars": {"NCCL_DEBUG": "WA\0RN"}})
    assert "NUL" in out.only_error("validate_env_var_names", "env_vars.NCCL_DEBUG").message


@kinds
def test_validate_env_var_names_accepts_unusual_but_possible_names(kind, outcome):
    assert outcome(kind, {"env_vars": {"lower.case-1": "v", "1ST": ""}}).clean()


# --- validate_step_xor_dir -----------------------------------------------------------------------


@kinds
def test_validate_step_xor_dir_rejects_step_and_dir(kind, outcome):
    out = outcome(kind, {"resume": {"step": 3, "dir": "outputs/a/checkpoints/step_400"}})
    issue = out.only_error("validate_step_xor_dir", "resume")
    assert "step = 3" in issue.message
    assert '"outputs/a/checkpoints/step_400"' in issue.message


@kinds
@pytest.mark.parametrize(
    "directory", ["outputs/a/checkpoints/latest", "step_", "step_4x", "a/b", "a/step_\u00b2"]
)
def test_resume_dir_must_be_a_step_directory(kind, directory, outcome):
    """The schema's pattern on resume.dir (one place: the field), reported before the rules."""
    out = outcome(kind, {"resume": {"dir": directory}})
    assert out.error_keys == [(None, "resume.dir")]
    assert "step_[0-9]+" in out.errors[0].message or "step_" in out.errors[0].fix


@kinds
def test_validate_step_xor_dir_and_the_step_pattern_both_apply(kind, outcome):
    out = outcome(kind, {"resume": {"step": 3, "dir": "outputs/a/latest"}})
    assert out.error_keys == [(None, "resume.dir")]  # the pattern first; then the rule
    out = outcome(kind, {"resume": {"step": 3, "dir": "outputs/a/step_7"}})
    assert out.error_keys == [("validate_step_xor_dir", "resume")]


@kinds
@pytest.mark.parametrize(
    "resume",
    [
        {"dir": "outputs/a/checkpoints/step_400"},
        {"dir": "outputs/a/checkpoints/step_400/"},
        {"dir": "step_1"},
        {"step": 3},
        {},
        "None",
    ],
)
def test_validate_step_xor_dir_leaves_valid_resume_alone(kind, resume, outcome):
    config = outcome(kind, {"resume": resume}).clean()
    if resume == "None":
        assert config.resume is None
    else:
        assert config.resume.model_dump() == {"step": None, "dir": None, **resume}


# --- vlms_require_bfloat16 ------------------------------------------------------------------


@kinds
@pytest.mark.parametrize("field", ["optimization_dtype", "reduce_dtype"])
def test_vlms_require_bfloat16_rejects_float32(kind, field, outcome):
    out = outcome(kind, {"model": {**VLM_MODEL, field: "float32"}})
    issue = out.only_error("vlms_require_bfloat16", f"model.{field}")
    assert 'got "float32"' in issue.message
    assert '"bfloat16"' in issue.message


@kinds
def test_vlms_require_bfloat16_reports_both_dtypes(kind, outcome):
    out = outcome(kind, {"model": {"impl": "custom", "vlm": VLM}})
    assert out.error_keys == [
        ("vlms_require_bfloat16", "model.optimization_dtype"),
        ("vlms_require_bfloat16", "model.reduce_dtype"),
    ]


@kinds
def test_vlms_require_bfloat16_accepts_bfloat16(kind, outcome):
    config = outcome(kind, {"model": VLM_MODEL}).clean()
    assert (config.model.optimization_dtype, config.model.reduce_dtype) == ("bfloat16",) * 2


@kinds
def test_vlms_require_bfloat16_ignores_text_models(kind, outcome):
    config = outcome(kind, {}).clean()
    assert (config.model.optimization_dtype, config.model.reduce_dtype) == ("float32",) * 2


# --- vlm_freeze_incompatible_with_lora -----------------------------------------------------------


@kinds
def test_vlm_freeze_incompatible_with_lora_rejects_trained_encoder(kind, outcome):
    vlm = {**VLM, "freeze_vision_encoder": False}
    out = outcome(kind, {"model": {**VLM_MODEL, "vlm": vlm, "lora": {}}})
    issue = out.only_error("vlm_freeze_incompatible_with_lora", "model.vlm.freeze_vision_encoder")
    assert "= false" in issue.message
    assert "[model.lora]" in issue.message


@kinds
@pytest.mark.parametrize(("freeze", "lora"), [(True, {}), (False, "None")])
def test_vlm_freeze_incompatible_with_lora_leaves_valid_pairs_alone(kind, freeze, lora, outcome):
    vlm = {**VLM, "freeze_vision_encoder": freeze}
    config = outcome(kind, {"model": {**VLM_MODEL, "vlm": vlm, "lora": lora}}).clean()
    assert config.model.vlm.freeze_vision_encoder is freeze
    assert (config.model.lora is not None) is (lora != "None")


# --- dont_do_massive_traces ----------------------------------------------------------------------


@kinds
@pytest.mark.parametrize(
    ("max_steps", "shown"), [("None", "null"), (MAX_TRACE_STEPS, "10"), (500, "500")]
)
def test_dont_do_massive_traces_rejects_long_traced_runs(kind, max_steps, shown, outcome):
    out = outcome(kind, {"trace_path": "outputs/trace.json", "max_steps": max_steps})
    issue = out.only_error("dont_do_massive_traces", "max_steps")
    assert f"got {shown}" in issue.message
    assert f"below {MAX_TRACE_STEPS}" in issue.message
    assert "trace_path" in issue.message


@kinds
@pytest.mark.parametrize(
    ("trace_path", "max_steps"),
    [("outputs/trace.json", MAX_TRACE_STEPS - 1), ("outputs/trace.json", 1), ("None", 500)],
)
def test_dont_do_massive_traces_leaves_short_or_untraced_runs_alone(
    kind, trace_path, max_steps, outcome
):
    config = outcome(kind, {"trace_path": trace_path, "max_steps": max_steps}).clean()
    assert config.max_steps == max_steps


# --- ep_only_with_custom_impl --------------------------------------------------------------------


@kinds
def test_ep_only_with_custom_impl_rejects_hf(kind, outcome):
    issue = outcome(kind, {"model": {**HF, "ep": 2}}).only_error(
        "ep_only_with_custom_impl", "model.ep"
    )
    assert "= 2" in issue.message
    assert 'got "hf"' in issue.message


@kinds
@pytest.mark.parametrize(
    ("impl_fields", "ep"),
    [({"impl": "custom"}, 2), ({"impl": "auto"}, 8), (HF, 1), (HF, "auto")],
    ids=["custom", "auto", "hf-ep1", "hf-ep-auto"],
)
def test_ep_only_with_custom_impl_leaves_valid_pairs_alone(kind, impl_fields, ep, outcome):
    config = outcome(kind, {"model": {**impl_fields, "ep": ep}}).clean()
    assert config.model.ep == ep


# --- resolve_tokenizer_from_model ----------------------------------------------------------------


@kinds
def test_resolve_tokenizer_from_model_copies_unset_fields_from_model(kind, outcome):
    doc = {"model": {**HF, "name": "Org/Some-Model", "trust_remote_code": True}}
    config = outcome(kind, doc).clean()
    assert config.tokenizer.name == "Org/Some-Model"
    assert config.tokenizer.trust_remote_code is True


@kinds
def test_resolve_tokenizer_from_model_copies_defaults_from_model(kind, outcome):
    config = outcome(kind, {"tokenizer": {"name": "None", "trust_remote_code": "None"}}).clean()
    assert config.tokenizer.name == config.model.name == "Qwen/Qwen3-0.6B"
    assert config.tokenizer.trust_remote_code is False


@kinds
def test_resolve_tokenizer_from_model_leaves_explicit_fields_alone(kind, outcome):
    doc = {
        "model": {**HF, "name": "Org/Some-Model", "trust_remote_code": True},
        "tokenizer": {"name": "Org/Other-Tokenizer", "trust_remote_code": False},
    }
    out = outcome(kind, doc)
    config = out.clean()
    assert "resolve_tokenizer_from_model" not in {issue.rule for issue in out.warnings}
    assert config.tokenizer.name == "Org/Other-Tokenizer"
    assert config.tokenizer.trust_remote_code is False


# --- validate_control_signals --------------------------------------------------------------------


@kinds
@pytest.mark.parametrize("signal", ["SIGUSR1", "SIGUSR2"])
def test_validate_control_signals_rejects_one_signal_for_both(kind, signal, outcome):
    doc = {"control": {"checkpoint_signal": signal, "stop_signal": signal}}
    issue = outcome(kind, doc).only_error("validate_control_signals", "control.stop_signal")
    assert f'= "{signal}"' in issue.message
    assert "control.checkpoint_signal" in issue.message


@kinds
@pytest.mark.parametrize(
    "control",
    [
        {},
        {"checkpoint_signal": "SIGUSR2", "stop_signal": "SIGUSR1"},
        {"checkpoint_signal": "None", "stop_signal": "None"},
        {"stop_signal": "None"},
        "None",
    ],
)
def test_validate_control_signals_leaves_distinct_signals_alone(kind, control, outcome):
    config = outcome(kind, {"control": control}).clean()
    if control == "None":
        assert config.control is None
    else:
        expected = {"checkpoint_signal": "SIGUSR1", "stop_signal": "SIGTERM", **control}
        expected = {k: None if v == "None" else v for k, v in expected.items()}
        assert config.control.checkpoint_signal == expected["checkpoint_signal"]
        assert config.control.stop_signal == expected["stop_signal"]
