"""What a run writes down of its config keeps no secret (run/redaction.py): config.json and
config.toml in the run directory (also written whole, for the owner alone), W&B's config."""

from __future__ import annotations

import json
import stat

from trainspec.config import load
from trainspec.trainers.run.redaction import REDACTED, redacted
from trainspec.trainers.run.run_dir import write_resolved_config

SECRETS = ("hf_abc123", "Bearer xyz", "s3cret", "pa55", "uu1d")


def secret_config():
    return load("sft", [], {
        "env_vars": {"HF_TOKEN": "hf_abc123", "NCCL_DEBUG": "INFO"},
        "heartbeat": {"url": "https://user:pa55@hb.example/ping/uu1d?token=s3cret"},
        "eval": {"source": [{"env": {"taskset": {"id": "builtin:reverse-text"}}}]},
        "eval.client.headers": {"Authorization": "Bearer xyz"},
        "eval.client.api_key_var": "MY_KEY",
    }).config  # fmt: skip


def test_headers_secret_env_values_and_url_secrets_are_taken_out_and_the_rest_stays():
    document = redacted(json.loads(secret_config().model_dump_json()))
    assert document["env_vars"] == {"HF_TOKEN": REDACTED, "NCCL_DEBUG": "INFO"}
    assert document["eval"]["client"]["headers"] == {"Authorization": REDACTED}
    assert document["eval"]["client"]["api_key_var"] == "MY_KEY"  # names a variable: no secret
    # the ping URL's path too (hc-ping.com/<uuid>); other URLs keep theirs
    assert document["heartbeat"]["url"] == "https://user:redacted@hb.example/redacted?redacted"
    assert redacted({"base_url": "http://127.0.0.1:8000/v1"}) == {
        "base_url": "http://127.0.0.1:8000/v1"
    }


def test_an_env_value_that_looks_like_a_secret_is_taken_out_under_any_name():
    looks = {
        "MY_CRED_X": "hf_" + "a1B2" * 9,
        "OPENAI": "sk-proj-" + "x9Y8" * 6,
        "WANDB_X": "0123456789abcdef" * 2 + "01234567",  # 40 hex digits
        "AWS_ID": "AKIAIOSFODNN7EXAMPLE",
        "AUTHZ_HDR": "Bearer abc.def",
        "PADDED": "  " + "0123456789abcdef" * 2 + "\n",
    }
    plain = {
        "NCCL_DEBUG": "INFO",
        "CUDA_VISIBLE_DEVICES": "0,1,2,3",
        "HF_HOME": "/scratch/cache/huggingface_hub_cache_dir_2",
        "MODEL": "Qwen3-30B-A3B-Instruct-2507",
        "MODEL_ID": "Qwen/Qwen3-0.6B-Instruct-2507-FP8",
        "NODE": "compute-node-gpu-h100-042",
        "RUN": "exp_2025_lr_sweep_batch64",
        "RUN_ID": "123e4567-e89b-12d3-a456-426614174000",
        "HF_HUB_ENABLE_HF_TRANSFER": "hf_transfer",
        "REGION": "ASIA_PACIFIC_1",
        "NCCL_SOCKET_IFNAME": "eth0",
        "LONG_WORD": "abcdefghijklmnopqrstuvwxyzabc",  # letters alone: a word, not a key
    }
    document = redacted({"env_vars": looks | plain})
    assert document["env_vars"] == dict.fromkeys(looks, REDACTED) | plain


def test_the_run_directory_records_no_secret_and_still_validates(tmp_path):
    write_resolved_config(secret_config(), tmp_path, "sft")
    for name in ("config.json", "config.toml"):
        text = (tmp_path / name).read_text()
        assert not any(secret in text for secret in SECRETS), name
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name
    again = load("sft", [str(tmp_path / "config.toml")]).config
    assert again.env_vars == {"HF_TOKEN": REDACTED, "NCCL_DEBUG": "INFO"}
    from trainspec.config import validate

    document = json.loads((tmp_path / "config.json").read_text())
    assert validate("sft", document).config.model_dump() == again.model_dump()
