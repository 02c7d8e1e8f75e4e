"""set_by_user, the one answer every command's refusals take to "did the user set this?": a
setting counts by what it holds, so a table read back from JSON (every key written) is judged
like the file it came from."""

from __future__ import annotations

from trainspec.generated.client import ClientConfig
from trainspec.generated.inference import InferenceConfig
from trainspec.trainers.refusals import set_by_user


def test_defaults_set_nothing_even_when_every_key_is_written():
    written = InferenceConfig.model_validate(InferenceConfig().model_dump(mode="json"))
    assert written.model_fields_set  # every key written, as in a resolved config's JSON
    assert set_by_user(written, InferenceConfig(), "inference") == []


def test_each_changed_leaf_is_named_by_its_dotted_path_in_order():
    table = InferenceConfig.model_validate(
        {"vllm": {"max_model_len": 512, "gpu_memory_utilization": 0.5}, "server": {"port": 9}}
    )
    assert set_by_user(table, InferenceConfig(), "inference") == [
        "inference.server.port",
        "inference.vllm.gpu_memory_utilization",
        "inference.vllm.max_model_len",
    ]


def test_dicts_compare_key_by_key_and_no_prefix_gives_bare_keys():
    client = ClientConfig(headers={"X-A": "1"}, skip_model_check=True)
    assert set_by_user(client, ClientConfig()) == ["headers.X-A", "skip_model_check"]


def test_another_variant_of_a_union_is_set_as_a_whole():
    table = InferenceConfig.model_validate({"router": {"type": "llm-d"}})
    assert set_by_user(table, InferenceConfig(), "inference") == ["inference.router"]
