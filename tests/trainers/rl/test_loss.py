"""RL policy losses: the default (DPPO) and IPO losses against hand-computed values and
gradients, the adv_tau / kl_tau scaling, and custom losses imported by path (only when built)."""

from __future__ import annotations

import io
import math
import sys
import textwrap

import pytest
import torch

from trainspec.cli.validate_config import run as validate_config
from trainspec.config import validate
from trainspec.trainers.errors import SetupError
from trainspec.trainers.rl.loss import LossInputs, LossOutputs, build_loss

torch.set_num_threads(1)

# Seven tokens: (trainer prob p, sampler prob q, advantage A, in the loss mask).
# prob_diff = p - q; DPPO thresholds 0.2 / 0.2, IPO threshold 0.1.
TOKENS = [
    (0.60, 0.30, 1.0, True),  # 0: diff +0.30, A > 0  -> DPPO masks (high); IPO masks
    (0.20, 0.50, -1.0, True),  # 1: diff -0.30, A <= 0 -> DPPO masks (low);  IPO masks
    (0.45, 0.40, 2.0, True),  # 2: diff +0.05           -> both keep
    (0.55, 0.60, -0.5, True),  # 3: diff -0.05           -> both keep
    (0.90, 0.10, 1.0, False),  # 4: outside the loss mask: contributes nothing
    (0.30, 0.70, 1.0, True),  # 5: diff -0.40, A > 0  -> DPPO keeps; IPO masks
    (0.60, 0.20, -1.0, True),  # 6: diff +0.40, A <= 0 -> DPPO keeps; IPO masks
]
LOSS_TOKENS = 6


def make_inputs(tokens=TOKENS) -> LossInputs:
    return LossInputs(
        trainer_logprobs=torch.tensor(
            [math.log(p) for p, _, _, _ in tokens], dtype=torch.float32, requires_grad=True
        ),
        inference_logprobs=torch.tensor([math.log(q) for _, q, _, _ in tokens]),
        advantages=torch.tensor([a for _, _, a, _ in tokens]),
        loss_mask=torch.tensor([m for _, _, _, m in tokens]),
    )


def loss_cfg(**loss):
    return validate("rl", {"loss": loss}).config.loss


def run_loss(cfg, inputs: LossInputs | None = None) -> tuple[LossOutputs, list[float]]:
    inputs = inputs or make_inputs()
    out = build_loss(cfg)(inputs)
    out.loss.backward()
    return out, inputs.trainer_logprobs.grad.tolist()


def test_default_loss_value_gradient_and_masked_fraction_by_hand():
    kl = 0.001  # the default kl_tau; adv_tau defaults to 1
    out, grad = run_loss(loss_cfg())
    # Per token: kept -> -A * p/q + kl * log(p/q)^2, gradient -A * p/q + 2 * kl * log(p/q);
    # masked -> kl * log(p/q)^2 only, gradient 2 * kl * log(p/q).
    expected_loss = (
        kl * math.log(0.60 / 0.30) ** 2  # 0 masked
        + kl * math.log(0.20 / 0.50) ** 2  # 1 masked
        + (-2.0 * 0.45 / 0.40 + kl * math.log(0.45 / 0.40) ** 2)  # 2
        + (0.5 * 0.55 / 0.60 + kl * math.log(0.55 / 0.60) ** 2)  # 3
        + (-1.0 * 0.30 / 0.70 + kl * math.log(0.30 / 0.70) ** 2)  # 5
        + (1.0 * 0.60 / 0.20 + kl * math.log(0.60 / 0.20) ** 2)  # 6
    )
    expected_grad = [
        2 * kl * math.log(0.60 / 0.30),
        2 * kl * math.log(0.20 / 0.50),
        -2.0 * 0.45 / 0.40 + 2 * kl * math.log(0.45 / 0.40),
        0.5 * 0.55 / 0.60 + 2 * kl * math.log(0.55 / 0.60),
        0.0,
        -1.0 * 0.30 / 0.70 + 2 * kl * math.log(0.30 / 0.70),
        1.0 * 0.60 / 0.20 + 2 * kl * math.log(0.60 / 0.20),
    ]
    assert out.loss.dim() == 0
    assert out.loss.item() == pytest.approx(expected_loss, rel=1e-5)
    assert grad == pytest.approx(expected_grad, rel=1e-5, abs=1e-7)
    assert out.metrics["masked_fraction"] == pytest.approx(2 / LOSS_TOKENS)


def test_ipo_loss_value_gradient_and_masked_fraction_by_hand():
    kl = 0.001
    out, grad = run_loss(loss_cfg(type="ipo"))
    # IPO masks tokens 0, 1, 5 and 6 (|p - q| > 0.1) and keeps 2 and 3.
    expected_loss = (
        kl * math.log(0.60 / 0.30) ** 2
        + kl * math.log(0.20 / 0.50) ** 2
        + (-2.0 * 0.45 / 0.40 + kl * math.log(0.45 / 0.40) ** 2)
        + (0.5 * 0.55 / 0.60 + kl * math.log(0.55 / 0.60) ** 2)
        + kl * math.log(0.30 / 0.70) ** 2
        + kl * math.log(0.60 / 0.20) ** 2
    )
    expected_grad = [
        2 * kl * math.log(0.60 / 0.30),
        2 * kl * math.log(0.20 / 0.50),
        -2.0 * 0.45 / 0.40 + 2 * kl * math.log(0.45 / 0.40),
        0.5 * 0.55 / 0.60 + 2 * kl * math.log(0.55 / 0.60),
        0.0,
        2 * kl * math.log(0.30 / 0.70),
        2 * kl * math.log(0.60 / 0.20),
    ]
    assert out.loss.item() == pytest.approx(expected_loss, rel=1e-5)
    assert grad == pytest.approx(expected_grad, rel=1e-5, abs=1e-7)
    assert out.metrics["masked_fraction"] == pytest.approx(4 / LOSS_TOKENS)


def test_thresholds_come_from_the_config():
    # Wider thresholds mask nothing; a narrower DPPO one masks tokens 2 and 3 as well.
    assert run_loss(loss_cfg(dppo_mask_low=0.5, dppo_mask_high=0.5))[0].metrics[
        "masked_fraction"
    ] == pytest.approx(0.0)
    assert run_loss(loss_cfg(type="ipo", ipo_threshold=0.5))[0].metrics[
        "masked_fraction"
    ] == pytest.approx(0.0)
    assert run_loss(loss_cfg(dppo_mask_low=0.01, dppo_mask_high=0.01))[0].metrics[
        "masked_fraction"
    ] == pytest.approx(4 / LOSS_TOKENS)


def test_dppo_uses_the_high_threshold_for_positive_advantages_and_the_low_one_otherwise():
    kl = 0.001
    out, grad = run_loss(loss_cfg(dppo_mask_low=0.1, dppo_mask_high=0.35))
    # Token 0 (A > 0, diff +0.30 <= 0.35) is kept; token 1 (A <= 0, diff -0.30 < -0.1) is masked.
    assert out.metrics["masked_fraction"] == pytest.approx(1 / LOSS_TOKENS)
    assert grad[0] == pytest.approx(-1.0 * 0.60 / 0.30 + 2 * kl * math.log(0.60 / 0.30), rel=1e-5)
    assert grad[1] == pytest.approx(2 * kl * math.log(0.20 / 0.50), rel=1e-5)


def test_dppo_treats_a_zero_advantage_as_negative():
    # A == 0: masked when the probability fell by more than dppo_mask_low, never when it rose.
    fell, _ = run_loss(loss_cfg(), make_inputs([(0.20, 0.50, 0.0, True)]))
    rose, _ = run_loss(loss_cfg(), make_inputs([(0.60, 0.30, 0.0, True)]))
    assert fell.metrics["masked_fraction"] == 1.0
    assert rose.metrics["masked_fraction"] == 0.0


def test_mismatch_kl_and_ratio_mean_by_hand():
    out, _ = run_loss(loss_cfg())
    loss_tokens = [(p, q) for p, q, _, m in TOKENS if m]
    ratios = [p / q for p, q in loss_tokens]
    assert out.metrics["ratio_mean"] == pytest.approx(sum(ratios) / 6, rel=1e-5)
    k3 = [r - math.log(r) - 1 for r in ratios]
    assert out.metrics["mismatch_kl"] == pytest.approx(sum(k3) / 6, rel=1e-5)
    # left on the device (no host sync per micro-batch): 0-dim tensors the loop reads once a step
    assert all(isinstance(v, torch.Tensor) and v.ndim == 0 for v in out.metrics.values())


@pytest.mark.parametrize("kind", ["default", "ipo"])
def test_adv_tau_scales_the_advantage_term_and_kl_tau_the_kl_term(kind):
    pg_only, pg_grad = run_loss(loss_cfg(type=kind, adv_tau=1.0, kl_tau=0.0))
    kl_only, kl_grad = run_loss(loss_cfg(type=kind, adv_tau=0.0, kl_tau=1.0))
    both, grad = run_loss(loss_cfg(type=kind, adv_tau=0.5, kl_tau=0.3))

    # With adv_tau = 0 the loss is the squared log-ratio summed over the loss tokens.
    squared = sum(math.log(p / q) ** 2 for p, q, _, m in TOKENS if m)
    assert kl_only.loss.item() == pytest.approx(squared, rel=1e-5)
    assert both.loss.item() == pytest.approx(
        0.5 * pg_only.loss.item() + 0.3 * kl_only.loss.item(), rel=1e-5
    )
    assert grad == pytest.approx(
        [0.5 * a + 0.3 * b for a, b in zip(pg_grad, kl_grad, strict=True)], rel=1e-5, abs=1e-7
    )
    # The taus weight the terms; they do not change which tokens are masked.
    assert both.metrics["masked_fraction"] == pg_only.metrics["masked_fraction"]


@pytest.mark.parametrize("kind", ["default", "ipo"])
def test_no_loss_tokens_gives_zero_loss_and_zero_metrics(kind):
    tokens = [(p, q, a, False) for p, q, a, _ in TOKENS]
    out, grad = run_loss(loss_cfg(type=kind), make_inputs(tokens))
    assert out.loss.item() == 0.0
    assert grad == [0.0] * len(tokens)
    assert out.metrics == {"masked_fraction": 0.0, "mismatch_kl": 0.0, "ratio_mean": 0.0}


def test_a_masked_token_with_an_overflowing_ratio_keeps_the_gradient_finite():
    # exp(lp - lq) overflows float32 here; the token is masked (A > 0, p - q > 0.2), so its
    # policy-gradient term must drop out cleanly rather than as inf * 0 = nan.
    inputs = LossInputs(
        trainer_logprobs=torch.tensor([-0.01, math.log(0.5)], requires_grad=True),
        inference_logprobs=torch.tensor([-200.0, math.log(0.5)]),
        advantages=torch.tensor([1.0, 1.0]),
        loss_mask=torch.tensor([True, True]),
    )
    out, grad = run_loss(loss_cfg(), inputs)
    assert math.isfinite(out.loss.item())
    assert all(math.isfinite(g) for g in grad)
    assert grad[0] == pytest.approx(2 * 0.001 * (-0.01 + 200.0), rel=1e-5)


def test_metrics_ignore_what_sits_outside_the_loss_mask():
    # Position 0 is not a loss token and its values are garbage (a ratio that overflows).
    inputs = LossInputs(
        trainer_logprobs=torch.tensor([-0.01, math.log(0.5)], requires_grad=True),
        inference_logprobs=torch.tensor([-200.0, math.log(0.5)]),
        advantages=torch.tensor([1.0, 1.0]),
        loss_mask=torch.tensor([False, True]),
    )
    out, _ = run_loss(loss_cfg(), inputs)
    assert out.metrics == pytest.approx(
        {"masked_fraction": 0.0, "mismatch_kl": 0.0, "ratio_mean": 1.0}
    )


# -- custom losses ---------------------------------------------------------------------------

CUSTOM = """
    from trainspec.trainers.rl.loss import LossOutputs

    CALLS = []
    NOT_A_FUNCTION = 3

    def scaled(inputs, *, scale, tag="none"):
        CALLS.append({"scale": scale, "tag": tag})
        loss = (inputs.trainer_logprobs * inputs.loss_mask).sum() * scale
        return LossOutputs(loss=loss, metrics={"scale": float(scale)})

    def not_outputs(inputs):
        return 1.0
"""


@pytest.fixture
def write_module(tmp_path, monkeypatch):
    """Write a module into tmp_path, importable by name for this test only."""
    monkeypatch.syspath_prepend(str(tmp_path))
    names: list[str] = []

    def write(name: str, source: str) -> str:
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        names.append(name)
        return name

    yield write
    for name in names:
        sys.modules.pop(name, None)


@pytest.mark.parametrize("sep", [":", "."])
def test_custom_loss_is_called_with_its_kwargs_and_its_result_returned(write_module, sep):
    module = write_module("custom_loss_ok", CUSTOM)
    cfg = loss_cfg(
        type="custom", import_path=f"{module}{sep}scaled", kwargs={"scale": 2.0, "tag": "x"}
    )
    inputs = make_inputs()
    out = build_loss(cfg)(inputs)

    assert sys.modules[module].CALLS == [{"scale": 2.0, "tag": "x"}]
    assert isinstance(out, LossOutputs)
    assert out.metrics == {"scale": 2.0}
    expected = 2.0 * sum(math.log(p) for p, _, _, m in TOKENS if m)
    assert out.loss.item() == pytest.approx(expected, rel=1e-5)
    out.loss.backward()
    assert inputs.trainer_logprobs.grad.tolist() == [2.0 * m for *_, m in TOKENS]


@pytest.mark.parametrize(
    ("import_path", "problem"),
    [
        ("custom_loss_nowhere:scaled", "no module named 'custom_loss_nowhere'"),
        ("custom_loss_errs:missing", "has no attribute 'missing'"),
        ("custom_loss_errs.NOT_A_FUNCTION", "is a int, not a function"),
        ("scaled", "does not name a module and function"),
    ],
    ids=["module-not-found", "attribute-missing", "not-callable", "no-module-part"],
)
def test_custom_loss_import_errors_are_setup_errors(write_module, import_path, problem):
    write_module("custom_loss_errs", CUSTOM)
    with pytest.raises(SetupError) as info:
        build_loss(loss_cfg(type="custom", import_path=import_path))
    assert info.value.path == "loss.import_path"
    assert problem in info.value.problem
    assert info.value.fix
    assert "Traceback" not in info.value.render()


def test_custom_kwargs_the_function_does_not_take_are_refused_when_built(write_module):
    module = write_module("custom_loss_kwargs", CUSTOM)
    cfg = loss_cfg(type="custom", import_path=f"{module}:scaled", kwargs={"scael": 2.0})
    with pytest.raises(SetupError) as info:
        build_loss(cfg)
    assert info.value.path == "loss.kwargs"
    assert sys.modules[module].CALLS == []


def test_custom_loss_returning_something_else_is_a_setup_error(write_module):
    module = write_module("custom_loss_bad_return", CUSTOM)
    loss = build_loss(loss_cfg(type="custom", import_path=f"{module}:not_outputs"))
    with pytest.raises(SetupError, match="returned float, not LossOutputs") as info:
        loss(make_inputs())
    assert info.value.path == "loss.import_path"


BOOM = """
    raise RuntimeError("custom_loss_boom was imported")
"""


def test_validation_does_not_import_the_custom_module(write_module, tmp_path):
    module = write_module("custom_loss_boom", BOOM)
    import_path = f"{module}:anything"

    cfg = loss_cfg(type="custom", import_path=import_path)
    assert cfg.import_path == import_path

    toml = tmp_path / "rl.toml"
    toml.write_text(f'[loss]\ntype = "custom"\nimport_path = "{import_path}"\n')
    out, err = io.StringIO(), io.StringIO()
    assert validate_config(["--kind", "rl", str(toml)], out, err) == 0, out.getvalue()
    assert module not in sys.modules

    # Building the loss is where it is imported, and its failure is a SetupError.
    with pytest.raises(SetupError) as info:
        build_loss(cfg)
    assert info.value.path == "loss.import_path"
    assert "RuntimeError: custom_loss_boom was imported" in info.value.problem


def test_imitation_loss_is_the_weighted_negative_log_likelihood():
    from trainspec.trainers.rl.train import imitation_loss
    from trainspec.trainers.wire.batch import RLMicroBatch

    logprobs = torch.tensor([[-0.5, -2.0, -1.0, -4.0]], requires_grad=True)
    mb = RLMicroBatch(
        input_ids=torch.zeros(1, 4, dtype=torch.long),
        position_ids=torch.arange(4).unsqueeze(0),
        targets=torch.zeros(1, 4, dtype=torch.long),
        loss_mask=torch.tensor([[True, True, True, False]]),
        advantages=torch.zeros(1, 4),
        inference_logprobs=torch.zeros(1, 4),
        ce_weights=torch.tensor([[1.0, 0.5, 0.0, 1.0]]),  # the last is outside the loss mask
    )
    loss = imitation_loss(logprobs, mb)
    assert loss.item() == pytest.approx(0.5 + 0.5 * 2.0)
    loss.backward()
    assert logprobs.grad.tolist() == [[-1.0, -0.5, 0.0, 0.0]]
