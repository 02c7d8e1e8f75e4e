"""Where SFT rows come from, built from `[data]` (or `[val.data]`): a built-in task, local
.jsonl / .json / .parquet files or directories (split by file name), or a hub dataset; several
subsets or splits interleaved by `probabilities`.

    rows, where = load_rows(config.data)     # a datasets.Dataset; where[i]: "file:line" or None

Local JSON files are checked row by row before `datasets` reads them (rows.py), so a bad row
is named by file and line; `where` keeps those locations for the errors found later.
"""

from __future__ import annotations

from pathlib import Path

from ..builtin import is_builtin
from ..core.hub import go_offline_unless_reachable
from ..errors import SetupError
from ..tasks import BUILTIN_DATASETS, load_builtin_dataset
from .rows import check_json_files

FILE_FORMATS = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}
OFFLINE_FIX = (
    "check the name and the network, or use a local .jsonl/.json/.parquet file or directory, "
    f"or {', '.join(BUILTIN_DATASETS)}"
)
ROW_COLUMNS = ("messages", "prompt", "completion", "tools")
HELD_OUT_SPLITS = ("test", "validation", "valid", "val", "eval", "dev")


def _names_split(path: Path, split: str) -> bool:
    return path.stem == split or path.stem.startswith((f"{split}-", f"{split}_", f"{split}."))


def _local_files(path: Path, subset: str | None, split: str, prefix: str) -> tuple[str, list]:
    if subset is not None:
        path = path / subset
        if not path.is_dir():
            raise SetupError(
                f"{prefix}.subsets", f"{str(path)!r} is not a directory", "name a subdirectory"
            )
    if path.is_file():
        files = [path] if path.suffix in FILE_FORMATS and split == "train" else []
    else:
        found = sorted(p for p in path.rglob("*") if p.suffix in FILE_FORMATS)
        named = [p for p in found if _names_split(p, split)]
        # Files named after no split are training data; held-out ones never are.
        others = [p for p in found if not any(_names_split(p, s) for s in HELD_OUT_SPLITS)]
        files = named or (others if split == "train" else [])
    if not files:
        raise SetupError(
            f"{prefix}.name" if split == "train" else f"{prefix}.splits",
            f"{str(path)!r} holds no .jsonl, .json or .parquet file for split {split!r}",
            f"name the files of a split <split>.jsonl or <split>-*.parquet; {OFFLINE_FIX}",
        )
    formats = {FILE_FORMATS[p.suffix] for p in files}
    if len(formats) > 1:
        raise SetupError(f"{prefix}.name", "mixes JSON and Parquet files", "use one format")
    return formats.pop(), [str(p) for p in files]


def _load_source(name: str, subset: str | None, split: str, prefix: str):
    """(rows, where each row is) of one source: `where` names file and line for local JSON
    files (checked row by row first, sft/rows.py), else None."""
    import datasets

    if is_builtin(name):
        if subset is not None:
            raise SetupError(f"{prefix}.subsets", "built-in datasets have no subsets", "use null")
        return load_builtin_dataset(name, split, field=f"{prefix}.name"), None
    path = Path(name).expanduser()
    where = None
    if path.exists():
        fmt, files = _local_files(path, subset, split, prefix)
        if fmt == "json":
            where = check_json_files(files, prefix)
        what = f"{name!r}"
        load = lambda: datasets.load_dataset(fmt, data_files=files, split="train")  # noqa: E731
    elif path.suffix in FILE_FORMATS or name.startswith((".", "/", "~")):
        raise SetupError(f"{prefix}.name", f"{name!r} does not exist", OFFLINE_FIX)
    else:
        go_offline_unless_reachable()  # one probe, rather than a minute of retries
        what = f"{name!r} (subset {subset!r}, split {split!r}) from the hub"
        load = lambda: datasets.load_dataset(name, subset, split=split)  # noqa: E731
    try:
        return load(), where
    except Exception as exc:  # offline, unknown id or split, unreadable file
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SetupError(f"{prefix}.name", f"cannot load {what}: {reason}", OFFLINE_FIX) from None


def load_rows(data_cfg, prefix: str = "data"):
    """The raw rows of the configured sources, interleaved when there are several, and where
    each row is (file:line, for one source of local JSON files; None otherwise)."""
    import datasets

    subsets, splits = data_cfg.subsets, data_cfg.splits
    probabilities, strategy = data_cfg.probabilities, data_cfg.stopping_strategy
    if subsets:
        sources = list(zip(subsets, splits or ["train"] * len(subsets), strict=True))
    else:
        sources = [(None, split) for split in (splits or ["train"])]
    loaded = [_load_source(data_cfg.name, sub, split, prefix) for sub, split in sources]
    parts = [rows for rows, _ in loaded]
    where = loaded[0][1] if len(loaded) == 1 else None
    for part in parts:
        columns = set(part.column_names)
        if "messages" not in columns and not {"prompt", "completion"} <= columns:
            raise SetupError(
                f"{prefix}.name",
                f"rows need a messages column, or prompt and completion; found {sorted(columns)}",
                "convert the dataset to chat messages",
            )
    parts = [p.select_columns([c for c in ROW_COLUMNS if c in p.column_names]) for p in parts]
    if probabilities is not None and len(probabilities) != len(parts):
        raise SetupError(
            f"{prefix}.probabilities",
            f"has {len(probabilities)} entries for {len(parts)} source(s)",
            "give one probability per subset or split",
        )
    if len(parts) == 1:
        return parts[0], where
    weights = list(probabilities) if probabilities is not None else [len(p) for p in parts]
    if sum(weights) <= 0:
        if probabilities is None:
            return parts[0], None  # every source is empty: reported once rendered
        raise SetupError(f"{prefix}.probabilities", "are all zero", "give a positive weight")
    # A source never sampled adds nothing (and could never be exhausted): leave it out.
    sampled = [(p, w) for p, w in zip(parts, weights, strict=True) if w > 0]
    if len(sampled) == 1:
        return sampled[0][0], None
    sampled_weights = [w for _, w in sampled]
    try:
        mixed = datasets.interleave_datasets(
            [p for p, _ in sampled],
            probabilities=[w / sum(sampled_weights) for w in sampled_weights],
            seed=data_cfg.seed,
            stopping_strategy=strategy,
        )
    except Exception as exc:  # columns of different types
        raise SetupError(
            f"{prefix}.name",
            f"the sources cannot be interleaved: {exc}",
            "give every subset and split the same columns and types",
        ) from None
    return mixed, None
