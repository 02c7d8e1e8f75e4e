"""The shared trainer rules about the optimizer and its schedule: clipping turned off where it
cannot run, the CPU optimizer's limits, schedules that need max_steps, and offload exclusions.
The other shared rules, their order and coverage: test_shared_rules.py."""

from __future__ import annotations

import pytest

from trainspec.config import KINDS

HF = {"impl": "hf", "attn": "flash_attention_2"}
# model.full_offload on, without the error about the default model.optim_cpu_offload = true.
FULL_OFFLOAD = {"full_offload": True, "optim_cpu_offload": False}

kinds = pytest.mark.parametrize("kind", KINDS)


# --- resolve_no_grad_clipping_with_deepep --------------------------------------------------------


@kinds
@pytest.mark.parametrize(("optim", "was"), [({}, "1.0"), ({"max_norm": 0.5}, "0.5")])
def test_resolve_no_grad_clipping_with_deepep_warns_and_clears_max_norm(kind, optim, was, outcome):
    out = outcome(kind, {"model": {"ep_comm_backend": "deepep"}, "optim": optim})
    issue = out.only_warning("resolve_no_grad_clipping_with_deepep", "optim.max_norm")
    assert issue.message.startswith(f"set to null (was {was})")
    assert '"deepep"' in issue.message
    assert out.config.optim.max_norm is None


@kinds
def test_resolve_no_grad_clipping_with_deepep_is_quiet_without_clipping(kind, outcome):
    doc = {"model": {"ep_comm_backend": "deepep"}, "optim": {"max_norm": "None"}}
    config = outcome(kind, doc).clean()
    assert config.optim.max_norm is None


@kinds
def test_resolve_no_grad_clipping_with_deepep_leaves_torch_backend_alone(kind, outcome):
    config = outcome(kind, {"optim": {"max_norm": 0.5}}).clean()
    assert config.optim.max_norm == 0.5


@kinds
def test_resolve_no_grad_clipping_with_deepep_warns_once_with_full_offload(kind, outcome):
    doc = {"model": {**FULL_OFFLOAD, "ep_comm_backend": "deepep"}}
    out = outcome(kind, doc)
    out.only_warning("resolve_no_grad_clipping_with_deepep", "optim.max_norm")
    assert out.config.optim.max_norm is None


# --- full_optimizer_offload_requires_supported_optimizer -----------------------------------------


@kinds
@pytest.mark.parametrize("optimizer", ["sgd", "muon"])
def test_full_optimizer_offload_requires_supported_optimizer_rejects(kind, optimizer, outcome):
    doc = {"model": FULL_OFFLOAD, "optim": {"type": optimizer, "max_norm": "None"}}
    out = outcome(kind, doc)
    issue = out.only_error("full_optimizer_offload_requires_supported_optimizer", "optim.type")
    assert f'= "{optimizer}"' in issue.message
    assert "model.full_offload" in issue.message


@kinds
@pytest.mark.parametrize("optimizer", ["adamw", "sign_sgd"])
def test_full_optimizer_offload_requires_supported_optimizer_accepts(kind, optimizer, outcome):
    doc = {"model": FULL_OFFLOAD, "optim": {"type": optimizer, "max_norm": "None"}}
    config = outcome(kind, doc).clean()
    assert config.optim.type == optimizer
    assert config.model.full_offload is not None


@kinds
@pytest.mark.parametrize("optimizer", ["sgd", "muon"])
def test_full_optimizer_offload_requires_supported_optimizer_ignores_no_offload(
    kind, optimizer, outcome
):
    config = outcome(kind, {"optim": {"type": optimizer}}).clean()
    assert config.optim.type == optimizer


# --- resolve_no_grad_clipping_with_full_offload --------------------------------------------------


@kinds
@pytest.mark.parametrize(("optim", "was"), [({}, "1.0"), ({"max_norm": 2.5}, "2.5")])
def test_resolve_no_grad_clipping_with_full_offload_warns_and_clears(kind, optim, was, outcome):
    out = outcome(kind, {"model": FULL_OFFLOAD, "optim": optim})
    issue = out.only_warning("resolve_no_grad_clipping_with_full_offload", "optim.max_norm")
    assert issue.message.startswith(f"set to null (was {was})")
    assert "model.full_offload" in issue.message
    assert out.config.optim.max_norm is None


@kinds
def test_resolve_no_grad_clipping_with_full_offload_is_quiet_without_clipping(kind, outcome):
    config = outcome(kind, {"model": FULL_OFFLOAD, "optim": {"max_norm": "None"}}).clean()
    assert config.optim.max_norm is None


@kinds
def test_resolve_no_grad_clipping_with_full_offload_leaves_no_offload_alone(kind, outcome):
    config = outcome(kind, {"model": {"full_offload": False}, "optim": {"max_norm": 2.5}}).clean()
    assert config.optim.max_norm == 2.5


# --- validate_scheduler_steps --------------------------------------------------------------------


@kinds
def test_validate_scheduler_steps_rejects_linear_schedule_that_changes_nothing(kind, outcome):
    doc = {"scheduler": {"type": "linear", "warmup_steps": 0, "decay_steps": 0}}
    issue = outcome(kind, doc).only_error("validate_scheduler_steps", "scheduler")
    assert "warmup_steps = 0" in issue.message
    assert "decay_steps = 0" in issue.message


@kinds
def test_validate_scheduler_steps_rejects_linear_decay_without_max_steps(kind, outcome):
    doc = {"scheduler": {"type": "linear", "decay_steps": 7}}
    issue = outcome(kind, doc).only_error("validate_scheduler_steps", "max_steps")
    assert "scheduler.decay_steps = 7" in issue.message


@kinds
def test_validate_scheduler_steps_rejects_linear_longer_than_run(kind, outcome):
    doc = {"scheduler": {"type": "linear", "warmup_steps": 6, "decay_steps": 5}, "max_steps": 10}
    issue = outcome(kind, doc).only_error("validate_scheduler_steps", "scheduler")
    assert "6 + 5" in issue.message
    assert "max_steps = 10" in issue.message


@kinds
def test_validate_scheduler_steps_rejects_cosine_without_max_steps(kind, outcome):
    issue = outcome(kind, {"scheduler": {"type": "cosine"}}).only_error(
        "validate_scheduler_steps", "max_steps"
    )
    assert "cosine" in issue.message


@kinds
@pytest.mark.parametrize("warmup", [10, 11])
def test_validate_scheduler_steps_rejects_cosine_warmup_past_run(kind, warmup, outcome):
    doc = {"scheduler": {"type": "cosine", "warmup_steps": warmup}, "max_steps": 10}
    issue = outcome(kind, doc).only_error("validate_scheduler_steps", "scheduler.warmup_steps")
    assert f"= {warmup}" in issue.message
    assert "max_steps = 10" in issue.message


@kinds
@pytest.mark.parametrize(
    "doc",
    [
        {"scheduler": {"type": "linear", "warmup_steps": 10, "decay_steps": 10}, "max_steps": 20},
        {"scheduler": {"type": "linear", "warmup_steps": 5, "decay_steps": 0}},
        {"scheduler": {"type": "cosine", "warmup_steps": 9}, "max_steps": 10},
        {"scheduler": {"type": "cosine", "warmup_steps": 0}, "max_steps": 1},
        {"scheduler": {}},
        {"scheduler": {"type": "constant"}, "max_steps": 1},
    ],
    ids=["linear-fits", "linear-no-decay", "cosine-fits", "cosine-no-warmup", "default", "const"],
)
def test_validate_scheduler_steps_leaves_valid_schedules_alone(kind, doc, outcome):
    config = outcome(kind, doc).clean()
    assert config.scheduler.type == doc["scheduler"].get("type", "constant")


# --- validate_opt_and_fsdp_offload ---------------------------------------------------------------


@kinds
def test_validate_opt_and_fsdp_offload_rejects_muon(kind, outcome):
    doc = {
        "model": {"fsdp_cpu_offload": True, "optim_cpu_offload": False},
        "optim": {"type": "muon"},
    }
    issue = outcome(kind, doc).only_error("validate_opt_and_fsdp_offload", "optim.type")
    assert '= "muon"' in issue.message
    assert "model.fsdp_cpu_offload = true" in issue.message


@kinds
@pytest.mark.parametrize(
    ("optimizer", "fsdp"), [("adamw", True), ("sgd", True), ("sign_sgd", True), ("muon", False)]
)
def test_validate_opt_and_fsdp_offload_leaves_other_pairs_alone(kind, optimizer, fsdp, outcome):
    doc = {
        "model": {"fsdp_cpu_offload": fsdp, "optim_cpu_offload": False},
        "optim": {"type": optimizer},
    }
    config = outcome(kind, doc).clean()
    assert (config.optim.type, config.model.fsdp_cpu_offload) == (optimizer, fsdp)
