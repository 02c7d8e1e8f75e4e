"""`sft`'s online evals on the real vLLM (its CPU build here, `make install`): with [eval] and
[inference] the launcher starts the server, and at each eval step the trainer's weights are
reloaded into it and the evals sample there. The greedy answers it scores are those of the
step's own checkpoint played in process (HF's forward on the same weights), so the server
served exactly that step's weights.
"""

from __future__ import annotations

import os
import shutil

import pytest
import torch
from helpers.ports import free_port
from test_online_evals import RT, _rows, config_of, evaluate_checkpoint, evaluated, rows, scores

from trainspec.trainers.builtin import builtin_model_dir
from trainspec.trainers.serving.vllm_plan import vllm_installed

__all__ = ["_rows", "rows"]  # the fixtures of test_online_evals, used here too

pytestmark = pytest.mark.skipif(
    not vllm_installed() and not os.environ.get("CI"),
    reason="vLLM is not installed (make install installs it)",
)


def test_online_evals_sample_on_the_server_sft_starts_with_each_steps_weights(tmp_path, capsys):
    from transformers import AutoConfig, AutoModelForCausalLM

    from trainspec.trainers.sft.main import launch

    model = tmp_path / "model"
    shutil.copytree(builtin_model_dir("builtin:tiny-qwen3"), model)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model)).save_pretrained(model)
    greedy = {"interval": 2, "num_examples": 4, "sampling": {"max_completion_tokens": 16},
              "source": [{"name": "greedy", "env": RT}]}  # fmt: skip
    config = config_of(
        tmp_path,
        max_steps=2,
        eval=greedy,
        ckpt={"interval": 2},
        inference={"server": {"port": free_port()}, "vllm": {"enforce_eager": True}},
        **{
            "model.name": str(model),
            "model.debug.num_layers": None,  # served whole
            "deployment.num_infer_gpus": 1,
        },  # fmt: skip
    )
    assert launch(config) == 0
    said = capsys.readouterr().err
    assert "sft: starting vLLM (its CPU build)" in said and "vLLM serves" in said
    by_step = evaluated(config)
    assert sorted(by_step) == [0, 2]
    (record,) = by_step[2]
    assert scores(record) == evaluate_checkpoint(config, 2)
