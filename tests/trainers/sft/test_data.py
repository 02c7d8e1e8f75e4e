"""SFT data: role masks, row formats, packing, shuffling, file and hub sources, interleaving,
resume, sharding across ranks, fake data and validation batches, on the built-in tokenizer."""

from __future__ import annotations

import json

import pytest
import torch

from trainspec.config import load
from trainspec.trainers.chat.render import render_messages, row_messages, trained_roles
from trainspec.trainers.core.lm import IGNORE_INDEX as IGNORE
from trainspec.trainers.core.tokenizer import build_tokenizer
from trainspec.trainers.errors import SetupError
from trainspec.trainers.sft.data import (
    MicroBatch,
    build_sft_data,
    build_val_batches,
    describe_sample,
    load_rows,
)
from trainspec.trainers.sft.packing import build_row, pack

torch.set_num_threads(1)
HEADER = 1 + len("assistant\n")  # <|im_start|> "assistant\n": one token per byte


def config(**overrides):
    base = {"model.name": "builtin:tiny-qwen3"}
    return load("sft", [], {**base, **overrides}).config


@pytest.fixture(scope="module")
def tokenizer():
    cfg = config()
    return build_tokenizer(cfg.tokenizer, cfg.model)


@pytest.fixture
def offline(monkeypatch):
    """Make hub look-ups fail at once, as they do without a network (no retries)."""
    import datasets.config
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)


def chat(user: str, answer: str) -> dict:
    return {
        "messages": [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
    }


def write_jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def numbered(n: int, tag: str = "q") -> list[dict]:
    """Conversations of 29 tokens that can be told apart by their text: <|im_start|> "user\n"
    "q000" <|im_end|> "\n" <|im_start|> "assistant\n" "a000" <|im_end|> "\n"."""
    return [chat(f"{tag}{i:03d}", f"a{i:03d}") for i in range(n)]


def documents(micro_batches: list[MicroBatch], tokenizer) -> list[str]:
    """The user text of every document in the batches, in order."""
    out = []
    for mb in micro_batches:
        for ids, pos in zip(mb.input_ids.tolist(), mb.position_ids.tolist(), strict=True):
            starts = [t for t, p in enumerate(pos) if p == 0] + [len(ids)]
            for a, b in zip(starts, starts[1:], strict=False):
                text = tokenizer.decode(ids[a:b])
                if "user\n" in text:
                    out.append(text.split("user\n")[1].split("<|im_end|>")[0])
    return out


def rows_of(micro_batches: list[MicroBatch]) -> list[tuple]:
    return [
        (tuple(i), tuple(p), tuple(label))
        for mb in micro_batches
        for i, p, label in zip(
            mb.input_ids.tolist(), mb.position_ids.tolist(), mb.labels.tolist(), strict=True
        )
    ]


# -- rendering ------------------------------------------------------------------------------


def test_assistant_mask_on_a_hand_checked_conversation(tokenizer):
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "ih"},
    ]
    ((ids, mask),) = render_messages(tokenizer, messages, trained_roles(config().data.loss_mask))
    assert ids == tokenizer.apply_chat_template(messages, tokenize=True, return_dict=False)
    trained = [t for t, m in zip(ids, mask, strict=True) if m]
    # "ih" + <|im_end|> + "\n": the assistant header belongs to the user turn.
    assert len(trained) == 4
    assert tokenizer.decode(trained) == "ih<|im_end|>\n"
    assert mask[-4:] == [True] * 4 and not any(mask[:-4])


def test_user_and_system_masks(tokenizer):
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "ih"},
    ]
    loss_mask = config(
        **{
            "data.loss_mask.system": True,
            "data.loss_mask.user": True,
            "data.loss_mask.assistant": False,
        }
    ).data.loss_mask
    ((ids, mask),) = render_messages(tokenizer, messages, trained_roles(loss_mask))
    # One token per byte, one per special: <|im_start|> "system\n" "sys" <|im_end|> "\n".
    system = 1 + 7 + 3 + 1 + 1
    # <|im_start|> "user\n" "hi" <|im_end|> "\n", then the header <|im_start|> "assistant\n".
    user = (1 + 5 + 2 + 1 + 1) + HEADER
    assert mask == [True] * (system + user) + [False] * 4


def test_multi_turn_with_tool_messages(tokenizer):
    messages = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "bb"},
        {"role": "tool", "content": "ccc"},
        {"role": "assistant", "content": "dddd"},
    ]
    ((_, mask),) = render_messages(tokenizer, messages, trained_roles(config().data.loss_mask))
    assert sum(mask) == (2 + 2) + (4 + 2)  # both answers with their end of turn
    loss_mask = config(**{"data.loss_mask.tool": True}).data.loss_mask
    ((_, mask),) = render_messages(tokenizer, messages, trained_roles(loss_mask))
    tool = (1 + 5 + 3 + 1 + 1) + HEADER  # <|im_start|> "tool\n" "ccc" <|im_end|> "\n"
    assert sum(mask) == 10 + tool


def test_prompt_completion_rows(tokenizer):
    as_strings = row_messages({"prompt": "hi", "completion": "ih"}, "data.name")
    assert as_strings == chat("hi", "ih")["messages"]
    as_lists = row_messages(
        {
            "prompt": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}],
            "completion": [{"role": "assistant", "content": "ih"}],
        },
        "data.name",
    )
    assert [m["role"] for m in as_lists] == ["system", "user", "assistant"]
    with pytest.raises(SetupError) as caught:
        row_messages({"text": "plain"}, "data.name")
    assert caught.value.path == "data.name"


def test_template_that_rewrites_history_is_a_setup_error(tokenizer, tmp_path):
    rewriting = (
        "{% for m in messages %}{% if loop.last %}{{ m['content'] }}"
        "{% else %}[{{ m['role'] }}]{% endif %}{% endfor %}"
    )
    cfg = config(**{"tokenizer.chat_template": rewriting})
    with pytest.raises(SetupError) as caught:
        render_messages(
            build_tokenizer(cfg.tokenizer, cfg.model),
            chat("hi", "ih")["messages"],
            trained_roles(cfg.data.loss_mask),
        )
    assert caught.value.path == "tokenizer.chat_template"
    # Through the dataset pipeline, too (where rendering runs inside datasets.map).
    cfg = config(
        **{
            "tokenizer.chat_template": rewriting,
            "data.name": write_jsonl(tmp_path / "d.jsonl", numbered(3)),
        }
    )
    with pytest.raises(SetupError) as caught:
        build_sft_data(cfg.data, build_tokenizer(cfg.tokenizer, cfg.model), rank=0, world_size=1)
    assert caught.value.path == "tokenizer.chat_template"


# -- packing --------------------------------------------------------------------------------


def test_greedy_packing_plan():
    # 5 and 4 share a row; 8 does not fit next to them; 3 does not fit next to 8; 20 is cut.
    rows = pack([5, 4, 8, 3, 20, 1], order=[0, 1, 2, 3, 4, 5], seq_len=10)
    assert rows == [[(0, 5), (1, 4)], [(2, 8)], [(3, 3)], [(4, 10)]]  # 1 token: no target


def test_row_positions_and_labels():
    first = ([10, 11, 12], [False, True, True])
    second = ([20, 21, 22, 23], [False, False, True, True])
    input_ids, position_ids, labels = build_row([first, second], seq_len=10, pad_id=99)
    assert input_ids.tolist() == [10, 11, 12, 20, 21, 22, 23, 99, 99, 99]
    assert position_ids.tolist() == [0, 1, 2, 0, 1, 2, 3, 0, 1, 2]
    # Each position predicts the next token of its own document where that token is trained;
    # the last token of a document and the padding predict nothing.
    assert labels.tolist() == [11, 12, IGNORE, IGNORE, 22, 23, IGNORE, IGNORE, IGNORE, IGNORE]


def test_packed_rows_from_a_file(tokenizer, tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", numbered(7))
    cfg = config(
        **{
            "data.name": path,
            "data.seq_len": 100,
            "data.batch_size": 4,
            "data.micro_batch_size": 4,
            "data.shuffle": False,
        }
    )
    data = build_sft_data(cfg.data, tokenizer, rank=0, world_size=1)
    (mb,) = data.next_step()
    assert mb.input_ids.shape == (4, 100)
    # Three 29-token documents per row; the epoch ends in a row of one, then starts again.
    assert documents([mb], tokenizer) == [f"q{i:03d}" for i in [0, 1, 2, 3, 4, 5, 6, 0, 1, 2]]
    assert (mb.position_ids == 0).sum(dim=1).tolist() == [3 + 1, 3 + 1, 1 + 1, 3 + 1]  # + pad
    assert set(mb.labels[2, 30:].tolist()) == {IGNORE} and data.epoch == 1
    row = mb.position_ids[0].tolist()
    assert row[:29] == row[29:58] == row[58:87] == list(range(29))
    assert row[87:] == list(range(13))  # the padding is a document of its own
    labels = mb.labels[0].tolist()
    assert labels[28] == labels[57] == labels[86] == IGNORE  # document ends predict nothing
    # Positions 22..27 predict "a000", <|im_end|> (258) and "\n"; the header before is not a target.
    assert labels[21:28] == [IGNORE, *b"a000", 258, ord("\n")]
    assert set(labels[87:]) == {IGNORE} and set(mb.input_ids[0, 87:].tolist()) == {259}
    assert mb.num_targets == 10 * 6  # "a00N" + <|im_end|> + "\n" per document
    text = describe_sample(mb, tokenizer)
    assert "⟦a000<|im_end|>\n⟧│" in text and "3 document(s)" in text and "[13 × pad]" in text


def test_packed_documents_do_not_attend_to_each_other(tokenizer):
    from transformers import AutoConfig, AutoModelForCausalLM

    from trainspec.trainers.builtin import builtin_model_dir

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(
        AutoConfig.from_pretrained(builtin_model_dir("builtin:tiny-qwen3"))
    ).eval()
    a, b = [5, 6, 7, 8, 9], [40, 41, 42]
    input_ids, position_ids, _ = build_row([(a, [True] * 5), (b, [True] * 3)], 10, 259)
    with torch.no_grad():
        packed = model(input_ids=input_ids[None], position_ids=position_ids[None], use_cache=False)
        alone = model(input_ids=torch.tensor([b]), use_cache=False)
    torch.testing.assert_close(packed.logits[0, 5:8], alone.logits[0], atol=1e-5, rtol=1e-4)


# -- order, epochs and resume ---------------------------------------------------------------


def first_docs(tokenizer, path, steps=3, **overrides):
    cfg = config(**{"data.name": path, "data.seq_len": 40, "data.batch_size": 4, **overrides})
    data = build_sft_data(cfg.data, tokenizer, rank=0, world_size=1)
    return [doc for _ in range(steps) for doc in documents(data.next_step(), tokenizer)], data


def test_shuffle_is_seeded_and_changes_per_epoch(tokenizer, tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", numbered(6))
    in_order, _ = first_docs(tokenizer, path, **{"data.shuffle": False})
    assert in_order == [f"q{i:03d}" for i in range(6)] * 2
    seed0, data = first_docs(tokenizer, path, **{"data.seed": 0})
    assert first_docs(tokenizer, path, **{"data.seed": 0})[0] == seed0
    assert first_docs(tokenizer, path, **{"data.seed": 1})[0] != seed0
    assert sorted(seed0[:6]) == sorted(seed0[6:]) == in_order[:6]  # each epoch is a permutation
    assert seed0[:6] != seed0[6:]  # epoch 1 reshuffled (seed + 1)
    assert data.epoch == 1


def test_resume_gives_the_same_rows(tokenizer, tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", numbered(7))
    cfg = config(**{"data.name": path, "data.seq_len": 70, "data.batch_size": 2})
    straight = build_sft_data(cfg.data, tokenizer, rank=0, world_size=1)
    for _ in range(3):
        straight.next_step()
    state = json.loads(json.dumps(straight.state_dict()))  # survives a checkpoint as JSON
    assert state["epoch"] == 1  # 4 rows per epoch: the resume starts inside the second epoch
    expected = [rows_of(straight.next_step()) for _ in range(5)]  # crosses two epochs
    resumed = build_sft_data(cfg.data, tokenizer, rank=0, world_size=1)
    resumed.load_state_dict(state)
    assert [rows_of(resumed.next_step()) for _ in range(5)] == expected
    assert resumed.epoch == straight.epoch


def test_ranks_share_the_global_rows(tokenizer, tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", numbered(9))
    cfg = config(
        **{"data.name": path, "data.seq_len": 70, "data.batch_size": 4, "data.micro_batch_size": 1}
    )
    one = build_sft_data(cfg.data, tokenizer, rank=0, world_size=1)
    two = [build_sft_data(cfg.data, tokenizer, rank=r, world_size=2) for r in range(2)]
    for _ in range(4):
        shares = [data.next_step() for data in two]
        assert [len(share) for share in shares] == [2, 2]
        assert rows_of(shares[0]) + rows_of(shares[1]) == rows_of(one.next_step())
    with pytest.raises(SetupError) as caught:
        build_sft_data(cfg.data, tokenizer, rank=0, world_size=3)
    assert caught.value.path == "data.batch_size"


# -- sources --------------------------------------------------------------------------------


def test_jsonl_parquet_and_directories(tokenizer, tmp_path):
    import datasets

    rows = numbered(4)
    jsonl = write_jsonl(tmp_path / "d.jsonl", rows)
    parquet = tmp_path / "d.parquet"
    datasets.Dataset.from_list(rows).to_parquet(str(parquet))
    folder = tmp_path / "folder"
    folder.mkdir()
    write_jsonl(folder / "train.jsonl", rows[:3])
    write_jsonl(folder / "test.jsonl", numbered(2, tag="t"))
    plain = tmp_path / "plain"  # files named after no split are training data, test.* is not
    (plain / "sub").mkdir(parents=True)
    write_jsonl(plain / "a.jsonl", numbered(1, tag="a"))
    write_jsonl(plain / "sub" / "b.jsonl", numbered(1, tag="b"))
    write_jsonl(plain / "test.jsonl", numbered(1, tag="t"))
    prompt_completion = write_jsonl(
        tmp_path / "pc.jsonl", [{"prompt": "q000", "completion": "a000"}]
    )
    for name, splits, expected in [
        (jsonl, None, ["q000", "q001", "q002", "q003"]),
        (str(parquet), None, ["q000", "q001", "q002", "q003"]),
        (str(folder), None, ["q000", "q001", "q002"]),
        (str(folder), ["test"], ["t000", "t001"]),
        (prompt_completion, None, ["q000"]),
        (str(plain), None, ["a000", "b000"]),
    ]:
        overrides = {"data.name": name, "data.shuffle": False, "data.seq_len": 200}
        if splits:
            overrides["data.splits"] = splits
        cfg = config(**{**overrides, "data.batch_size": 1})
        data = build_sft_data(cfg.data, tokenizer, rank=0, world_size=1)
        assert documents(data.next_step(), tokenizer) == expected, name  # one row: one epoch
    with pytest.raises(SetupError) as caught:
        build_sft_data(
            config(**{"data.name": jsonl, "data.splits": ["test"]}).data,
            tokenizer,
            rank=0,
            world_size=1,
        )
    assert caught.value.path == "data.splits"


def test_bad_rows_and_missing_files(tokenizer, tmp_path):
    for name in [
        write_jsonl(tmp_path / "x.jsonl", [{"text": "no chat"}]),
        str(tmp_path / "no.jsonl"),
    ]:
        with pytest.raises(SetupError) as caught:
            build_sft_data(config(**{"data.name": name}).data, tokenizer, rank=0, world_size=1)
        assert caught.value.path == "data.name"
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"messages": [\n')
    with pytest.raises(SetupError) as caught:
        build_sft_data(config(**{"data.name": str(broken)}).data, tokenizer, rank=0, world_size=1)
    assert caught.value.path == "data.name"


def test_interleaving_with_probabilities(tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    write_jsonl(folder / "train.jsonl", numbered(40, tag="a"))
    write_jsonl(folder / "test.jsonl", numbered(40, tag="b"))

    def sources(**overrides):
        cfg = config(**{"data.name": str(folder), "data.splits": ["train", "test"], **overrides})
        rows, _ = load_rows(cfg.data)
        return [row["messages"][0]["content"][0] for row in rows]

    only_a = sources(**{"data.probabilities": [1.0, 0.0]})
    assert set(only_a) == {"a"} and len(only_a) == 40
    mostly_a = sources(
        **{"data.probabilities": [0.8, 0.2], "data.stopping_strategy": "first_exhausted"}
    )
    assert mostly_a.count("a") == 40 and 0 < mostly_a.count("b") < 20  # stops when a runs out
    assert (
        sources(**{"data.probabilities": [0.8, 0.2], "data.stopping_strategy": "first_exhausted"})
        == mostly_a
    )
    assert (
        sources(
            **{
                "data.probabilities": [0.8, 0.2],
                "data.stopping_strategy": "first_exhausted",
                "data.seed": 5,
            }
        )
        != mostly_a
    )
    both = sources()  # weighted by size, until both are exhausted
    assert both.count("a") >= 40 and both.count("b") >= 40


def test_builtin_source_and_its_errors(tokenizer):
    cfg = config(
        **{"data.name": "builtin:reverse-text", "data.splits": ["test"], "data.batch_size": 2}
    )
    data = build_sft_data(cfg.data, tokenizer, rank=0, world_size=1)
    assert all(mb.num_targets > 0 for mb in data.next_step())
    for overrides, path in [
        ({"data.name": "builtin:nope"}, "data.name"),
        ({"data.subsets": ["x"], "data.splits": ["test"]}, "data.subsets"),
    ]:
        cfg = config(**{"data.name": "builtin:reverse-text", **overrides})
        with pytest.raises(SetupError) as caught:
            build_sft_data(cfg.data, tokenizer, rank=0, world_size=1)
        assert caught.value.path == path


def test_hub_offline_is_a_setup_error(tokenizer, offline):
    cfg = config(**{"data.name": "PrimeIntellect/Reverse-Text-SFT"})
    with pytest.raises(SetupError) as caught:
        build_sft_data(cfg.data, tokenizer, rank=0, world_size=1)
    assert caught.value.path == "data.name"
    assert "builtin:reverse-text" in caught.value.fix and ".jsonl" in caught.value.fix
    val = config(**{"val.data.name": "PrimeIntellect/Reverse-Text-SFT"}).val.data
    with pytest.raises(SetupError) as caught:
        build_val_batches(val, tokenizer, rank=0, world_size=1)
    assert caught.value.path == "val.data.name"


def test_worker_processes_render_the_same(tokenizer, tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", numbered(8))
    out = []
    for workers in (1, 2):
        cfg = config(**{"data.name": path, "data.num_workers": workers, "data.batch_size": 4})
        out.append(rows_of(build_sft_data(cfg.data, tokenizer, rank=0, world_size=1).next_step()))
    assert out[0] == out[1]


# -- fake data ------------------------------------------------------------------------------


def fake(tokenizer, rank=0, world_size=1, **overrides):
    cfg = config(**{"data.type": "fake", "data.seq_len": 32, "data.batch_size": 4, **overrides})
    return build_sft_data(cfg.data, tokenizer, rank=rank, world_size=world_size)


def test_fake_fixed_increasing(tokenizer):
    mbs = fake(tokenizer, **{"data.micro_batch_size": 2}).next_step()
    assert [mb.input_ids.shape for mb in mbs] == [(2, 32), (2, 32)]
    for mb in mbs:
        assert (mb.position_ids == torch.arange(32)).all()
        steps = (mb.input_ids[:, 1:] - mb.input_ids[:, :-1]) % len(tokenizer)
        assert (steps == 1).all()
        assert (mb.labels[:, :-1] == mb.input_ids[:, 1:]).all() and (
            mb.labels[:, -1] == IGNORE
        ).all()


def test_fake_variable_random(tokenizer):
    data = fake(
        tokenizer, **{"data.length": "variable", "data.input_ids": "random", "data.seed": 3}
    )
    mbs = [data.next_step() for _ in range(3)]
    ids = torch.cat([mb.input_ids for step in mbs for mb in step])
    positions = torch.cat([mb.position_ids for step in mbs for mb in step])
    assert int(ids.max()) < len(tokenizer) and int(ids.min()) >= 0
    assert (positions == 0).sum() > len(positions)  # several documents per row
    again = fake(
        tokenizer, **{"data.length": "variable", "data.input_ids": "random", "data.seed": 3}
    )
    assert rows_of(again.next_step()) == rows_of(mbs[0])
    other = fake(
        tokenizer, **{"data.length": "variable", "data.input_ids": "random", "data.seed": 4}
    )
    assert rows_of(other.next_step()) != rows_of(mbs[0])


def test_fake_ranks_and_resume(tokenizer):
    one = fake(tokenizer)
    one.next_step()
    two = [fake(tokenizer, rank=r, world_size=2) for r in range(2)]
    for data in two:
        data.load_state_dict(one.state_dict())
    assert rows_of(two[0].next_step()) + rows_of(two[1].next_step()) == rows_of(one.next_step())


# -- validation -----------------------------------------------------------------------------


def test_val_batches_are_equal_in_number_across_ranks(tokenizer, tmp_path):
    path = write_jsonl(tmp_path / "v.jsonl", numbered(7))
    overrides = {
        "val.data.name": path,
        "val.data.seq_len": 70,
        "val.data.batch_size": 4,
        "val.data.micro_batch_size": 1,
    }
    val = config(**overrides).val.data
    whole = build_val_batches(val, tokenizer, rank=0, world_size=1)
    shares = [build_val_batches(val, tokenizer, rank=r, world_size=2) for r in range(2)]
    # 7 documents, two per 70-token row: 4 rows, one step of 4.
    assert len(whole) == 4 and [len(share) for share in shares] == [2, 2]
    assert sum(mb.num_targets for mb in whole) == 7 * 6
    assert sum(mb.num_targets for share in shares for mb in share) == 7 * 6
    val = config(**{**overrides, "val.data.seq_len": 40}).val.data  # 7 rows: 2 steps of 4
    shares = [build_val_batches(val, tokenizer, rank=r, world_size=4) for r in range(4)]
    assert [len(share) for share in shares] == [2, 2, 2, 2]
    assert shares[3][1].num_targets == 0  # the 8th row is padding
    assert sum(mb.num_targets for share in shares for mb in share) == 7 * 6
    with pytest.raises(SetupError) as caught:
        build_val_batches(val, tokenizer, rank=0, world_size=3)
    assert caught.value.path == "val.data.batch_size"
