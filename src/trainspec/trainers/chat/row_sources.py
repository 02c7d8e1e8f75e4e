"""Where SFT rows come from, built from `[data]` (or `[val.data]`): a built-in task, local
.jsonl / .json / .parquet files or directories (split by file name), a glob of such files, a
directory written by `datasets`' save_to_disk (a Dataset, or a DatasetDict split by name), or a
hub dataset; several subsets or splits interleaved by `probabilities`.

    rows, where = load_rows(config.data)     # a datasets.Dataset; where[i]: "file:line" or None

Local JSON files are checked row by row before `datasets` reads them (row_checks.py), so a bad row
is named by file and line; `where` keeps those locations for the errors found later. A glob
("data/train-*.parquet", "chats/**/*.jsonl") is expanded, sorted, and read like that list of
files: the rows of the train split. A subset is a subdirectory of a local directory.
"""

from __future__ import annotations

import glob
import logging
from pathlib import Path

from ..builtin import is_builtin
from ..core.hub import go_offline_unless_reachable
from ..errors import SetupError
from .row_checks import check_json_files
from .tasks import BUILTIN_DATASETS, load_builtin_dataset

log = logging.getLogger(__name__)

FILE_FORMATS = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}
OFFLINE_FIX = (
    "check the name and the network, or use a local .jsonl/.json/.parquet file or directory, "
    f"or {', '.join(BUILTIN_DATASETS)}"
)
ROW_COLUMNS = ("messages", "conversations", "prompt", "completion", "tools")
HELD_OUT_SPLITS = ("test", "validation", "valid", "val", "eval", "dev")
# The files save_to_disk writes beside the data: a Dataset's, and a DatasetDict's.
SAVED_DATASET = ("dataset_info.json", "state.json")
SAVED_DATASET_DICT = "dataset_dict.json"
GLOB_CHARACTERS = "*?["


def _names_split(stem: str, split: str) -> bool:
    return stem == split or stem.startswith((f"{split}-", f"{split}_", f"{split}."))


def _held_out(stem: str) -> bool:
    return any(_names_split(stem, s) for s in HELD_OUT_SPLITS)


def _reason(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _subset_path(path: Path, subset: str | None, prefix: str) -> Path:
    if subset is None:
        return path
    if not (path / subset).is_dir():
        raise SetupError(
            f"{prefix}.subsets", f"{str(path / subset)!r} is not a directory", "name a subdirectory"
        )
    return path / subset


def _format_of(files: list[Path], prefix: str) -> str:
    formats = {FILE_FORMATS[p.suffix] for p in files}
    if len(formats) > 1:
        raise SetupError(f"{prefix}.name", "mixes JSON and Parquet files", "use one format")
    return formats.pop()


def _data_file(path: Path) -> bool:
    """A .jsonl/.json/.parquet file, and not one save_to_disk writes beside its data."""
    markers = (*SAVED_DATASET, SAVED_DATASET_DICT)
    saved = path.name in markers and saved_layout(path.parent) is not None
    return path.suffix in FILE_FORMATS and path.is_file() and not saved


def _local_files(path: Path, split: str, prefix: str) -> list[Path]:
    if path.is_file():
        files = [path] if path.suffix in FILE_FORMATS and split == "train" else []
    else:
        found = sorted(p for p in path.rglob("*") if _data_file(p))
        named = [p for p in found if _names_split(p.stem, split)]
        # Files named after no split are training data; held-out ones never are.
        others = [p for p in found if not _held_out(p.stem)]
        files = named or (others if split == "train" else [])
    if not files:
        raise SetupError(
            f"{prefix}.name" if split == "train" else f"{prefix}.splits",
            f"{str(path)!r} holds no .jsonl, .json or .parquet file for split {split!r}",
            "name the files of a split <split>.jsonl or <split>-*.parquet, or point "
            f"{prefix}.name at a directory written by save_to_disk",
        )
    return files


def _glob_files(pattern: str, subset: str | None, split: str, prefix: str) -> list[Path]:
    """The data files a glob matches, sorted: the rows of the train split."""
    if subset is not None:
        raise SetupError(
            f"{prefix}.subsets",
            f"{pattern!r} is a file pattern, which has no subsets",
            "use null, and name the files of the subset in the pattern",
        )
    if split != "train":
        raise SetupError(
            f"{prefix}.splits",
            f"the pattern {pattern!r} names the files of one split, not {split!r}",
            f"use null, and a pattern for each split's files (as {prefix}.name of its run)",
        )
    matches = sorted(glob.glob(str(Path(pattern).expanduser()), recursive=True))
    files = [Path(m) for m in matches if _data_file(Path(m))]
    if not files:
        what = f"{len(matches)} path(s), none a .jsonl, .json or .parquet file" if matches else ""
        raise SetupError(
            f"{prefix}.name",
            f"the pattern {pattern!r} matches {what or 'nothing'}",
            f"check the pattern (a relative one is read from {Path.cwd()})",
        )
    return files


def saved_layout(path: Path) -> str | None:
    """Which save_to_disk wrote `path`: "Dataset", "DatasetDict", or None (neither)."""
    if (path / SAVED_DATASET_DICT).is_file():
        return "DatasetDict"
    if all((path / marker).is_file() for marker in SAVED_DATASET):
        return "Dataset"
    return None


def _pick_split(names: list[str], split: str, path: Path, prefix: str) -> str:
    """The split of a saved DatasetDict that `split` names: that one, else the only one named
    after it ("train_sft"), else for train the only one not named after a held-out split."""
    if split in names:
        return split
    named = [n for n in names if _names_split(n, split)]
    if not named and split == "train":
        named = [n for n in names if not _held_out(n)]
    if len(named) == 1:
        log.info("%s: reading split %r of %s for split %r", prefix, named[0], path, split)
        return named[0]
    present = ", ".join(map(repr, names))
    raise SetupError(
        f"{prefix}.name" if split == "train" else f"{prefix}.splits",
        f"{str(path)!r} (a saved DatasetDict) has no split {split!r}; its splits are {present}",
        f"set {prefix}.splits to the split(s) to read, from {present}",
    )


def _load_saved(path: Path, split: str, prefix: str):
    """The rows of `split` in a directory written by save_to_disk."""
    import datasets

    try:
        saved = datasets.load_from_disk(str(path))
    except Exception as exc:  # a marker file without the data, a newer format
        raise SetupError(
            f"{prefix}.name",
            f"cannot load the saved dataset {str(path)!r}: {_reason(exc)}",
            "save it again with Dataset.save_to_disk or DatasetDict.save_to_disk",
        ) from None
    if isinstance(saved, datasets.DatasetDict):
        return saved[_pick_split(list(saved), split, path, prefix)]
    if split != "train":
        raise SetupError(
            f"{prefix}.splits",
            f"{str(path)!r} is one saved Dataset (its rows are the train split), with no split "
            f"{split!r}",
            f"save a DatasetDict with a {split!r} split, or use null for the train split",
        )
    return saved


def load_source(name: str, subset: str | None, split: str, prefix: str, *, chats: bool = True):
    """(rows, where each row is) of one source: `where` names file and line for local JSON
    files (checked row by row first as chat rows, chat/row_checks.py, unless `chats` is False: the
    orchestrator's prompts have columns of their own), else None."""
    import datasets

    if is_builtin(name):
        if subset is not None:
            raise SetupError(f"{prefix}.subsets", "built-in datasets have no subsets", "use null")
        return load_builtin_dataset(name, split, field=f"{prefix}.name"), None
    path = Path(name).expanduser()
    if path.exists():
        path = _subset_path(path, subset, prefix)
        if path.is_dir() and saved_layout(path):
            return _load_saved(path, split, prefix), None
        files = _local_files(path, split, prefix)
    elif any(c in name for c in GLOB_CHARACTERS):
        files = _glob_files(name, subset, split, prefix)
    elif path.suffix in FILE_FORMATS or name.startswith((".", "/", "~")):
        raise SetupError(f"{prefix}.name", f"{name!r} does not exist", OFFLINE_FIX)
    else:
        go_offline_unless_reachable()  # one probe, rather than a minute of retries
        try:
            return datasets.load_dataset(name, subset, split=split), None
        except Exception as exc:  # offline, unknown id or split
            what = f"{name!r} (subset {subset!r}, split {split!r}) from the hub"
            raise SetupError(
                f"{prefix}.name", f"cannot load {what}: {_reason(exc)}", OFFLINE_FIX
            ) from None
    fmt = _format_of(files, prefix)
    names = [str(p) for p in files]
    where = check_json_files(names, prefix) if fmt == "json" and chats else None
    try:
        return datasets.load_dataset(fmt, data_files=names, split="train"), where
    except Exception as exc:  # an unreadable file, columns that differ between files
        raise SetupError(
            f"{prefix}.name",
            f"cannot load {name!r}: {_reason(exc)}",
            "give every row of every file the same columns, each of one type",
        ) from None


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
    loaded = [load_source(data_cfg.name, sub, split, prefix) for sub, split in sources]
    parts = [rows for rows, _ in loaded]
    where = loaded[0][1] if len(loaded) == 1 else None
    for part in parts:
        columns = set(part.column_names)
        if not {"messages", "conversations"} & columns and not {"prompt", "completion"} <= columns:
            raise SetupError(
                f"{prefix}.name",
                "rows need a messages or conversations column, or prompt and completion; "
                f"found {sorted(columns)}",
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
