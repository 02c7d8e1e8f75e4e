"""The RL trainer loop on real batches: consumption in order across a crash and resume, exact
resume, weight broadcasts the orchestrator loads, trainer and sampler log-probabilities that
agree, and refusals."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch
from helpers.ports import free_port
from rl_support import metrics, rollout, send_steps, trainer_config
from safetensors.torch import load_file

from trainspec.trainers.ckpt import checkpointer as ckpt_module
from trainspec.trainers.errors import SetupError, SetupErrors
from trainspec.trainers.process.liveness import read_sign, trainer_sign
from trainspec.trainers.rl.train import train
from trainspec.trainers.wire.batch import RolloutBatch, Sample, pack_samples
from trainspec.trainers.wire.broadcast import KEEP, READY, broadcast_dir, ready_steps
from trainspec.trainers.wire.transport import build_sender


def weights(path: Path) -> dict[str, torch.Tensor]:
    return load_file(str(path / "model.safetensors"))


def test_fake_data_trains_and_publishes_marked_broadcasts(tmp_path):
    config = trainer_config(tmp_path, data__fake__batch_size=2, max_steps=5)
    assert train(config) == 0
    records = metrics(tmp_path)
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5]
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in records)
    assert "reward" not in records[0]  # fake batches carry no reward
    assert ready_steps(tmp_path) == list(range(6 - KEEP, 6))  # the newest KEEP, marked READY
    assert all((broadcast_dir(tmp_path, s) / READY).exists() for s in ready_steps(tmp_path))
    assert (broadcast_dir(tmp_path, 5) / "config.json").exists()
    sign = read_sign(trainer_sign(tmp_path))  # for an orchestrator that waits on its weights
    assert sign is not None and (sign["state"], sign["how"], sign["step"]) == (
        "ended",
        "finished",
        5,
    )


def test_rollouts_are_trained_once_in_order_then_released(tmp_path):
    config = trainer_config(tmp_path)
    send_steps(config, range(4))
    assert train(config) == 0
    records = metrics(tmp_path)
    # the batch of step n carries reward 0.1 n and is trained at step n + 1
    assert [round(r["reward"], 6) for r in records] == [0.0, 0.1, 0.2, 0.3]
    assert [r["off_policy_steps"] for r in records] == [0, 0, 0, 0]
    assert not list((tmp_path / "rollouts").glob("step_*"))  # no checkpoints: released at once


class Crash(RuntimeError):
    pass


def test_a_crash_and_resume_retrains_uncheckpointed_steps_exactly(tmp_path, monkeypatch):
    straight = trainer_config(tmp_path / "straight", ckpt__interval=2)
    send_steps(straight, range(4))
    assert train(straight) == 0

    crashed = trainer_config(tmp_path / "crashed", ckpt__interval=2)
    send_steps(crashed, range(4))
    real_save = ckpt_module.Checkpointer.save

    def save_or_crash(self, step, **kwargs):
        if step == 3:
            raise Crash("killed before the checkpoint of step 3")
        return real_save(self, step, **kwargs)

    monkeypatch.setattr(ckpt_module.Checkpointer, "save", save_or_crash)
    with pytest.raises(Crash):
        train(trainer_config(tmp_path / "crashed", ckpt__interval=2, max_steps=3))
    sign = read_sign(trainer_sign(tmp_path / "crashed"))
    assert sign is not None and sign["how"].startswith("failed: Crash: killed before"), sign
    monkeypatch.setattr(ckpt_module.Checkpointer, "save", real_save)
    # steps 2 and 3 were not covered by a checkpoint: their batches are still there
    held = sorted(p.name for p in (tmp_path / "crashed" / "rollouts").iterdir())
    assert held == ["step_2", "step_3"]
    resumed = trainer_config(tmp_path / "crashed", ckpt__interval=2, resume={})
    assert train(resumed) == 0

    records = metrics(tmp_path / "crashed")
    assert [r["step"] for r in records][-2:] == [3, 4]
    assert round(records[-1]["reward"], 6) == 0.3  # step 3's batch, trained again after resume
    a = weights(tmp_path / "straight" / "checkpoints" / "step_4" / "weights")
    b = weights(tmp_path / "crashed" / "checkpoints" / "step_4" / "weights")
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=1e-6)


def test_broadcast_equals_the_trainers_weights_and_loads_in_the_orchestrator(tmp_path):
    config = trainer_config(tmp_path, data__fake__batch_size=2, max_steps=2, ckpt__interval=2)
    assert train(config) == 0
    published = weights(broadcast_dir(tmp_path, 2))
    saved = weights(tmp_path / "checkpoints" / "step_2" / "weights")
    # the tied output layer under its own name too (vLLM's reload needs it; hf_export.py)
    assert published.keys() - saved.keys() == {"lm_head.weight"}
    assert torch.equal(published["lm_head.weight"], saved["model.embed_tokens.weight"])
    assert all(torch.equal(published[k], saved[k]) for k in saved)
    assert not torch.equal(
        published["model.embed_tokens.weight"],
        weights(broadcast_dir(tmp_path, 0))["model.embed_tokens.weight"],
    )

    from trainspec.config import load
    from trainspec.trainers.core.tokenizer import build_tokenizer
    from trainspec.trainers.orchestrator.policy import Policy

    orch = load("orchestrator", [], {"output_dir": str(tmp_path)}).config
    tokenizer = build_tokenizer(orch.tokenizer, orch.model)
    policy = Policy(orch, tmp_path, tokenizer, tokenizer.eos_token_id)
    assert policy.wait_for(1, lambda: False)
    assert policy.step == 2
    state = policy.sampler.model.state_dict()
    for name, tensor in saved.items():
        assert torch.equal(state[name], tensor), name


def test_trainer_log_probabilities_equal_the_samplers_on_policy(tmp_path):
    """Sampled with the trainer's starting weights, the first step is exactly on-policy: the
    importance ratio is 1 for every token, so nothing is masked and the mismatch KL is 0."""
    from trainspec.trainers.core.model import load_hf_model
    from trainspec.trainers.core.tokenizer import build_tokenizer
    from trainspec.trainers.orchestrator.sampling.local_sampler import LocalSampler

    config = trainer_config(tmp_path, max_steps=1)
    tokenizer = build_tokenizer(config.tokenizer, config.model)
    lm = load_hf_model(config.model, seed=0)  # what the trainer builds
    sampler = LocalSampler(lm, tokenizer, tokenizer.eos_token_id, torch.device("cpu"))
    prompts = [tokenizer.encode(text) for text in ("abc", "hello there", "xyz!")]
    groups = sampler.sample(prompts, 4, temperature=0.7, max_tokens=6, seed=3)
    samples = [
        Sample(p, c.token_ids, c.logprobs, advantage=1.0 if i % 2 else -1.0)
        for p, group in zip(prompts, groups, strict=True)
        for i, c in enumerate(group)
    ]
    (share,) = pack_samples(samples, seq_len=64, micro_batch_size=4, ranks=1, pad_id=0)
    sender = build_sender(config.rollout_transport, tmp_path, 1)
    sender.send(0, 0, RolloutBatch(0, 0, 0.7, share))
    assert train(config) == 0
    (record,) = metrics(tmp_path)
    assert record["mismatch_kl"] < 1e-6
    assert record["masked_fraction"] == 0.0
    assert abs(record["ratio_mean"] - 1.0) < 1e-4


def test_imitated_tokens_train_on_cross_entropy_alone(tmp_path):
    """sft distillation's batch: every completion token has a cross-entropy weight of 1, so the
    step's loss is the mean negative log-likelihood of those tokens (computed here with the
    trainer's starting weights) and the policy loss sees no token."""
    from trainspec.trainers.core.model import load_hf_model
    from trainspec.trainers.core.tokenizer import build_tokenizer

    config = trainer_config(tmp_path, max_steps=1)
    tokenizer = build_tokenizer(config.tokenizer, config.model)
    lm = load_hf_model(config.model, seed=0)  # what the trainer builds
    pairs = [(tokenizer.encode("abc"), [5, 6, 7]), (tokenizer.encode("hello"), [8, 9])]
    nll = []
    for prompt, completion in pairs:
        ids = torch.tensor([prompt + completion])
        with torch.no_grad():
            logits = lm(input_ids=ids).logits[0].float()
        positions = torch.arange(len(prompt) - 1, len(prompt) - 1 + len(completion))
        nll += (-torch.log_softmax(logits, -1)[positions, completion]).tolist()
    samples = [
        Sample(p, c, [-9.0] * len(c), advantage=5.0, ce_weights=[1.0] * len(c)) for p, c in pairs
    ]  # the advantage and sampler log-probabilities must not matter
    (share,) = pack_samples(samples, seq_len=64, micro_batch_size=4, ranks=1, pad_id=0)
    build_sender(config.rollout_transport, tmp_path, 1).send(0, 0, RolloutBatch(0, 0, 1.0, share))
    assert train(config) == 0
    (record,) = metrics(tmp_path)
    assert record["loss"] == pytest.approx(sum(nll) / len(nll), rel=1e-4)
    assert record["ce_loss"] == pytest.approx(record["loss"])
    assert record["loss_tokens"] == 5


def test_zmq_transport_feeds_the_trainer(tmp_path):
    config = trainer_config(
        tmp_path,
        rollout_transport={"type": "zmq", "port": free_port()},
        max_steps=3,
    )
    sender = build_sender(config.rollout_transport, tmp_path, 1)

    def produce():
        for step in range(3):
            sender.send(step, 0, rollout(step)[0])

    thread = threading.Thread(target=produce)
    thread.start()
    try:
        assert train(config) == 0
    finally:
        thread.join()
        sender.close()
    assert [round(r["reward"], 6) for r in metrics(tmp_path)] == [0.0, 0.1, 0.2]


@pytest.mark.parametrize(
    ("overrides", "path"),
    [
        ({"weight_broadcast": {"type": "nccl"}}, "weight_broadcast.type"),
        ({"metrics_server": {}}, "metrics_server"),
    ],
)
def test_refusals_name_the_setting_and_a_fix(tmp_path, overrides, path):
    config = trainer_config(tmp_path, **overrides)
    with pytest.raises((SetupError, SetupErrors)) as caught:
        train(config)
    text = caught.value.render()
    assert path in text and "fix" in text.lower()
