"""SFT reads the data people have: directories written by save_to_disk (a Dataset, a DatasetDict
split by name), globs of files, ShareGPT conversations, OpenAI content parts and tools given as
JSON text; what it cannot read is a SetupError naming the source, split, file:line or row."""

from __future__ import annotations

import json

import pytest
import torch

from trainspec.config import load
from trainspec.trainers.chat.render import Renderer, row_messages
from trainspec.trainers.core.tokenizer import build_tokenizer
from trainspec.trainers.errors import SetupError
from trainspec.trainers.sft.data import build_sft_data, load_rows

torch.set_num_threads(1)
# ChatML that also renders the tools, so a test can see whether they reached the template.
TOOLS_TEMPLATE = (
    "{% if tools %}<|im_start|>tools\n{{ tools | tojson }}<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]


def config(**overrides):
    base = {"model.name": "builtin:tiny-qwen3", "data.shuffle": False, "data.seq_len": 200}
    return load("sft", [], {**base, "data.batch_size": 1, **overrides}).config


@pytest.fixture(scope="module")
def tokenizer():
    cfg = config()
    return build_tokenizer(cfg.tokenizer, cfg.model)


def chat(user: str, answer: str) -> dict:
    return {
        "messages": [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
    }


def numbered(n: int, tag: str = "q") -> list[dict]:
    return [chat(f"{tag}{i:03d}", f"a{i:03d}") for i in range(n)]


def write_jsonl(path, rows) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def save(rows, path) -> str:
    import datasets

    datasets.Dataset.from_list(rows).save_to_disk(str(path))
    return str(path)


def save_dict(splits: dict, path) -> str:
    import datasets

    datasets.DatasetDict(
        {name: datasets.Dataset.from_list(rows) for name, rows in splits.items()}
    ).save_to_disk(str(path))
    return str(path)


def users(**overrides) -> list[str]:
    """The first message's text of every row the sources give."""
    rows, _ = load_rows(config(**overrides).data)
    return [row_messages(row, "data.name")[0]["content"] for row in rows]


def refusal(tokenizer, **overrides) -> SetupError:
    with pytest.raises(SetupError) as caught:
        build_sft_data(config(**overrides).data, tokenizer, rank=0, world_size=1)
    return caught.value


def trained_text(tokenizer, **overrides) -> tuple[str, str]:
    """(all text, trained text) of the first packed row."""
    data = build_sft_data(config(**overrides).data, tokenizer, rank=0, world_size=1)
    batch = data.next_step()[0]
    ids, labels = batch.input_ids[0].tolist(), batch.labels[0].tolist()
    trained = [label for label in labels if label >= 0]
    return tokenizer.decode(ids), tokenizer.decode(trained)


# -- save_to_disk ---------------------------------------------------------------------------


def test_a_saved_dataset_is_the_train_split(tmp_path, tokenizer):
    name = save(numbered(3), tmp_path / "saved")
    assert users(**{"data.name": name}) == ["q000", "q001", "q002"]
    text, trained = trained_text(tokenizer, **{"data.name": name})
    assert "q002" in text and "a000<|im_end|>" in trained and "q000" not in trained
    error = refusal(tokenizer, **{"data.name": name, "data.splits": ["test"]})
    assert error.path == "data.splits"
    assert "one saved Dataset" in error.problem and "'test'" in error.problem
    assert "network" not in error.fix


def test_a_saved_dataset_dict_is_split_by_name(tmp_path, tokenizer):
    name = save_dict({"train": numbered(2), "test": numbered(1, tag="t")}, tmp_path / "dict")
    assert users(**{"data.name": name}) == ["q000", "q001"]
    assert users(**{"data.name": name, "data.splits": ["test"]}) == ["t000"]
    both = users(**{"data.name": name, "data.splits": ["train", "test"]})
    assert set(both) == {"q000", "q001", "t000"}
    error = refusal(tokenizer, **{"data.name": name, "data.splits": ["validation"]})
    assert error.path == "data.splits"
    assert name in error.problem and "no split 'validation'" in error.problem
    assert "its splits are 'train', 'test'" in error.problem
    assert "'train', 'test'" in error.fix


def test_the_train_split_of_a_saved_dataset_dict_follows_the_held_out_names(tmp_path, tokenizer):
    sft = save_dict({"train_sft": numbered(1), "test_sft": numbered(1, tag="t")}, tmp_path / "a")
    assert users(**{"data.name": sft}) == ["q000"]
    assert users(**{"data.name": sft, "data.splits": ["test"]}) == ["t000"]
    only = save_dict({"data": numbered(1, tag="d"), "validation": numbered(1)}, tmp_path / "b")
    assert users(**{"data.name": only}) == ["d000"]
    two = save_dict({"train_sft": numbered(1), "train_gen": numbered(1)}, tmp_path / "c")
    error = refusal(tokenizer, **{"data.name": two})
    assert error.path == "data.name" and "no split 'train'" in error.problem
    assert "'train_sft', 'train_gen'" in error.problem


def test_subsets_of_saved_datasets_are_subdirectories(tmp_path, tokenizer):
    save_dict({"train": numbered(1, tag="a")}, tmp_path / "mix" / "a")
    save(numbered(1, tag="b"), tmp_path / "mix" / "b")
    overrides = {"data.name": str(tmp_path / "mix"), "data.probabilities": [1.0, 0.0]}
    assert users(**overrides, **{"data.subsets": ["a", "b"]}) == ["a000"]
    assert users(**{"data.name": str(tmp_path / "mix"), "data.subsets": ["b"]}) == ["b000"]
    # Without subsets, the directory holds no data file (save_to_disk's own files are none).
    error = refusal(tokenizer, **{"data.name": str(tmp_path / "mix")})
    assert "holds no .jsonl, .json or .parquet file" in error.problem
    assert "save_to_disk" in error.fix


# -- globs ----------------------------------------------------------------------------------


def test_a_glob_reads_the_files_it_matches_sorted(tmp_path):
    import datasets

    folder = tmp_path / "chats"
    write_jsonl(folder / "b.jsonl", numbered(1, tag="b"))
    write_jsonl(folder / "a.jsonl", numbered(2, tag="a"))
    write_jsonl(folder / "deep" / "c.jsonl", numbered(1, tag="c"))
    (folder / "notes.txt").write_text("not data\n")
    rows, where = load_rows(config(**{"data.name": str(folder / "*.jsonl")}).data)
    assert len(rows) == 3
    assert where == [
        f"{folder / 'a.jsonl'}:1",
        f"{folder / 'a.jsonl'}:2",
        f"{folder / 'b.jsonl'}:1",
    ]
    assert users(**{"data.name": str(folder / "**" / "*.jsonl")}) == [
        "a000",
        "a001",
        "b000",
        "c000",
    ]
    data = tmp_path / "data"
    data.mkdir()
    for shard, tag in [("train-00001-of-00002", "y"), ("train-00000-of-00002", "x"), ("test", "t")]:
        datasets.Dataset.from_list(numbered(1, tag=tag)).to_parquet(str(data / f"{shard}.parquet"))
    assert users(**{"data.name": str(data / "train-*.parquet")}) == ["x000", "y000"]


def test_a_bad_row_in_a_globbed_file_is_named_by_file_and_line(tmp_path, tokenizer):
    good = write_jsonl(tmp_path / "a.jsonl", numbered(1))
    bad = write_jsonl(tmp_path / "b.jsonl", [*numbered(1), {"text": "no chat"}])
    error = refusal(tokenizer, **{"data.name": str(tmp_path / "*.jsonl")})
    assert error.path == "data.name"
    assert error.problem.startswith(f"{bad}:2: the row has neither messages")
    assert good not in error.problem


def test_a_glob_that_matches_no_data_file_is_a_setup_error(tmp_path, tokenizer):
    pattern = str(tmp_path / "nowhere" / "*.jsonl")
    error = refusal(tokenizer, **{"data.name": pattern})
    assert error.path == "data.name"
    assert error.problem == f"the pattern {pattern!r} matches nothing"
    (tmp_path / "notes.txt").write_text("x\n")
    error = refusal(tokenizer, **{"data.name": str(tmp_path / "*")})
    assert "matches 1 path(s), none a .jsonl, .json or .parquet file" in error.problem
    write_jsonl(tmp_path / "train.jsonl", numbered(1))
    error = refusal(tokenizer, **{"data.name": str(tmp_path / "*.jsonl"), "data.splits": ["test"]})
    assert error.path == "data.splits" and "'test'" in error.problem


# -- ShareGPT -------------------------------------------------------------------------------


def sharegpt(*turns: tuple[str, str]) -> dict:
    return {"conversations": [{"from": speaker, "value": text} for speaker, text in turns]}


def test_sharegpt_speakers_map_to_roles():
    row = sharegpt(
        ("system", "s"),
        ("human", "q"),
        ("gpt", "a"),
        ("tool", "t"),
        ("function_response", "f"),
        ("gpt", "b"),
    )
    assert row_messages(row, "data.name") == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a"},
        {"role": "tool", "content": "t"},
        {"role": "tool", "content": "f"},
        {"role": "assistant", "content": "b"},
    ]
    role_keys = {
        "conversations": [{"role": "user", "content": "q"}, {"role": "gpt", "content": "a"}]
    }
    assert row_messages(role_keys, "data.name") == chat("q", "a")["messages"]


def test_sharegpt_rows_train_like_messages(tmp_path, tokenizer):
    row = sharegpt(("human", "q000"), ("gpt", "a000"))
    text, trained = trained_text(
        tokenizer, **{"data.name": write_jsonl(tmp_path / "s.jsonl", [row])}
    )
    expected = trained_text(
        tokenizer, **{"data.name": write_jsonl(tmp_path / "m.jsonl", [chat("q000", "a000")])}
    )
    assert (text, trained) == expected and trained == "a000<|im_end|>\n"
    # From Parquet (through Arrow, and load_rows' column check) alike.
    name = str(tmp_path / "s.parquet")
    import datasets

    datasets.Dataset.from_list([row, {**row, "id": 7}]).to_parquet(name)
    assert users(**{"data.name": name}) == ["q000", "q000"]


def test_a_bad_sharegpt_turn_is_named_by_file_and_line(tmp_path, tokenizer):
    rows = [sharegpt(("human", "q"), ("gpt", "a")), {"conversations": [{"from": "human"}]}]
    path = write_jsonl(tmp_path / "s.jsonl", rows)
    error = refusal(tokenizer, **{"data.name": path})
    assert error.problem.startswith(f"{path}:2: conversations[0].value is null, not text")


# -- content parts --------------------------------------------------------------------------


def parts(*texts: str) -> list[dict]:
    return [{"type": "text", "text": text} for text in texts]


def test_text_parts_are_joined_in_order(tmp_path, tokenizer):
    row = {
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": parts("q0", "0", "0")},
            {"role": "assistant", "content": parts("a000")},
        ]
    }
    messages = row_messages(row, "data.name")
    assert [m["content"] for m in messages] == ["s", "q000", "a000"]
    plain = {"messages": [*messages]}
    text, trained = trained_text(
        tokenizer, **{"data.name": write_jsonl(tmp_path / "p.jsonl", [row])}
    )
    expected = trained_text(tokenizer, **{"data.name": write_jsonl(tmp_path / "t.jsonl", [plain])})
    assert (text, trained) == expected and "q000" in text


def test_a_part_that_is_not_text_is_refused(tmp_path, tokenizer):
    image = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    bad = {"messages": [{"role": "user", "content": [*parts("look"), image]}]}
    path = write_jsonl(tmp_path / "p.jsonl", [*numbered(1), bad])
    error = refusal(tokenizer, **{"data.name": path})
    assert error.path == "data.name"
    assert error.problem == (
        f"{path}:2: messages[0].content[1] is a part of type 'image_url': "
        "text-only models take text parts only"
    )
    assert "text" in error.fix
    # From Parquet, the row is named by its number.
    import datasets

    name = str(tmp_path / "p.parquet")
    datasets.Dataset.from_list(
        [{"messages": [{"role": "user", "content": parts("a")}]}, bad]
    ).to_parquet(name)
    error = refusal(tokenizer, **{"data.name": name})
    assert error.problem.startswith("row 2: messages[0].content[1] is a part of type 'image_url'")


# -- tools ----------------------------------------------------------------------------------


def rendered(tokenizer, rows: list[dict]) -> dict:
    cfg = config()
    return Renderer(tokenizer, cfg.data.loss_mask, "data.name", 200)(
        {key: [row.get(key) for row in rows] for key in rows[0]}, list(range(len(rows)))
    )


def test_tools_given_as_json_text_reach_the_template(tmp_path):
    cfg = config(**{"tokenizer.chat_template": TOOLS_TEMPLATE})
    tokenizer = build_tokenizer(cfg.tokenizer, cfg.model)
    as_list = {**chat("q", "a"), "tools": TOOLS}
    as_text = {**chat("q", "a"), "tools": json.dumps(TOOLS)}
    out = rendered(tokenizer, [as_text, as_list, {**chat("q", "a"), "tools": ""}])
    assert out["error"] == ["", "", ""]
    assert out["input_ids"][0] == out["input_ids"][1]
    assert '"name": "add"' in tokenizer.decode(out["input_ids"][0])
    assert "add" not in tokenizer.decode(out["input_ids"][2])  # empty text: no tools


@pytest.mark.parametrize(
    ("tools", "problem"),
    [
        ("[{'type': 'function'}]", "tools is text that is not JSON (Expecting property name"),
        (json.dumps(TOOLS[0]), "tools is the JSON text of an object, not of a list"),
        ('["add"]', "tools[0] is text, not a tool object"),
    ],
    ids=["not-json", "not-a-list", "not-objects"],
)
def test_tools_that_are_not_a_list_are_refused_by_file_and_line(
    tmp_path, tokenizer, tools, problem
):
    path = write_jsonl(tmp_path / "t.jsonl", [chat("q", "a"), {**chat("q", "a"), "tools": tools}])
    error = refusal(tokenizer, **{"data.name": path})
    assert error.path == "data.name"
    assert error.problem.startswith(f"{path}:2: {problem}")
    assert "JSON text" in error.fix
    # Wherever rows come from, the renderer refuses them too, rather than dropping the tools.
    out = rendered(tokenizer, [{**chat("q", "a"), "tools": tools}])
    assert json.loads(out["error"][0])[1].startswith(problem)
