"""A run directory belongs to one run: it records what defines the run, and a later start that
trains something else is refused before anything in the directory changes.

    document = claim_run_dir(config, "sft", run_dir, setting="run.name", clean=config.clean)

`claim_run_dir` (rank 0, before anything else touches the directory) takes its lock (lock.py),
empties it under `clean` (the lock aside; only a directory whose `identity.json` marks it as a
run's, so a mistyped output_dir never empties someone's files), then compares the run's
identity (trainspec.config.identity: the settings that change what is trained) with the one
recorded at the first start, `identity.json`; a directory written before trainspec recorded
identities has its `config.json` read instead. A difference is a SetupError naming each setting
with both values. Then it writes the resolved config of this start, `config.json` and
`config.toml` (both validate back to it), and returns it as a document.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import tomlkit

from trainspec.config import ConfigError, dump_json, validate
from trainspec.config.bundle import BUNDLE_DIR, SCHEMA_NAMES
from trainspec.config.toml_text import toml_ready
from trainspec.issues import toml_value
from trainspec.kinds import Kind
from trainspec.run_identity import DEFAULT, differences, run_identity

from ..errors import SetupError
from .atomic_files import write_atomic
from .lock import LOCK_FILE, lock_run_dir
from .redaction import redacted

log = logging.getLogger(__name__)

IDENTITY_FILE = "identity.json"
SHOWN_DIFFERENCES = 6
SHOWN_FILES = 6


def claim_run_dir(
    config, kind: Kind, run_dir: Path, *, setting: str, clean: bool | None
) -> dict[str, Any]:
    """Lock, (clean,) check and record the run directory; the resolved config as a document.
    `setting` chose the directory (run.name, output_dir); `clean` is the config's own, or None
    for a kind that has none."""
    if clean:
        refuse_unmarked(run_dir)  # before the lock, which leaves a file in the directory
    lock_run_dir(run_dir, kind, setting=setting)
    if clean:
        empty(run_dir)
    identity = run_identity(config, kind)
    recorded = recorded_identity(run_dir, kind)
    if recorded is None:
        write_json(run_dir / IDENTITY_FILE, identity)
    else:
        how = "set clean = true to delete that run" if clean is not None else f"delete {run_dir}"
        refuse_another_run(run_dir, recorded, identity, setting, clean=f"{how} and start over")
    return write_resolved_config(config, run_dir, kind)


def is_run_dir(run_dir: Path) -> bool:
    """Whether trainspec's identity file marks the directory as a run's: identity.json, a JSON
    object naming the trainer kind (written at a run's first start)."""
    try:
        recorded = json.loads((run_dir / IDENTITY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(recorded, dict) and recorded.get("kind") in ("sft", "rl")


def refuse_unmarked(run_dir: Path) -> list[Path]:
    """What `clean` would delete in the directory (its lock aside); a SetupError, when it holds
    anything and its identity file does not mark it as a run's."""
    if not run_dir.is_dir():
        return []
    children = sorted(child for child in run_dir.iterdir() if child.name != LOCK_FILE)
    if children and not is_run_dir(run_dir):
        shown = ", ".join(child.name for child in children[:SHOWN_FILES])
        more = f" and {len(children) - SHOWN_FILES} more" if len(children) > SHOWN_FILES else ""
        raise SetupError(
            "clean",
            f"= true would delete everything in {run_dir} ({shown}{more}), and no "
            f"{IDENTITY_FILE} there marks it as a trainspec run's directory: clean deletes only "
            "those",
            "point run.dir (or output_dir) at a directory of its own for this run; or, if "
            "those files are to go, delete them yourself and start again",
        )
    return children


def empty(run_dir: Path) -> None:
    """Delete everything in the run directory but its lock (which this process holds), when
    its identity file marks it as a run's (else refuse_unmarked's SetupError, nothing
    deleted)."""
    children = refuse_unmarked(run_dir)
    for child in children:
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def recorded_identity(run_dir: Path, kind: Kind) -> dict[str, Any] | None:
    """The identity the directory's run was started with; None for a directory no run has
    started in (or one whose old config.json no longer validates: nothing to compare)."""
    path = run_dir / IDENTITY_FILE
    if path.is_file():
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SetupError(
                "output_dir",
                f"cannot read {path}: {exc}",
                "restore the file, or set clean = true to start this run over",
            ) from None
    legacy = run_dir / "config.json"
    if not legacy.is_file():
        return None
    try:
        document = json.loads(legacy.read_text(encoding="utf-8"))
        return run_identity(validate(kind, document).config, kind)
    except (OSError, ValueError, ConfigError) as exc:
        log.warning("%s does not validate as a %s config (%s); not compared", legacy, kind, exc)
        return None


def _shown(value: Any) -> str:
    return "its default" if value is DEFAULT else toml_value(value)


def refuse_another_run(
    run_dir: Path, recorded: dict[str, Any], identity: dict[str, Any], setting: str, *, clean: str
) -> None:
    """A SetupError naming what differs; `clean` says how to start over in the directory."""
    found = differences(recorded, identity)
    if not found:
        return
    listed = "; ".join(
        f"{path} = {_shown(new)} here, {_shown(old)} there"
        for path, old, new in found[:SHOWN_DIFFERENCES]
    )
    more = f" (and {len(found) - SHOWN_DIFFERENCES} more)" if len(found) > SHOWN_DIFFERENCES else ""
    raise SetupError(
        setting,
        f"{run_dir} belongs to another run, which trains something else: {listed}{more}",
        f"give this run its own {setting}; or {clean}; or, to build on that run, give this one "
        f'its own {setting} and resume.dir = "{run_dir}/checkpoints/step_<N>"',
    )


def write_json(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(document, indent=2) + "\n")


def write_resolved_config(config, run_dir: Path, kind: Kind) -> dict[str, Any]:
    """run_dir/config.json and run_dir/config.toml, written whole (atomic_files.py), secrets
    taken out (redaction.py); both validate back to this config but for those."""
    run_dir.mkdir(parents=True, exist_ok=True)
    document = redacted(json.loads(dump_json(config)))
    write_atomic(run_dir / "config.json", json.dumps(document, indent=2) + "\n", private=True)
    schema = BUNDLE_DIR / f"{SCHEMA_NAMES[kind]}.json"
    header = f"#:schema {schema}\n# the resolved config of this run's latest start\n"
    text = header + tomlkit.dumps(toml_ready(document))
    write_atomic(run_dir / "config.toml", text, private=True)
    return document
