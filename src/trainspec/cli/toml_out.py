"""The resolved config as TOML that validate-config reads back to the same config
(`validate-config FILE --print --format toml`, `sft FILE --print-config --format toml`).

TOML has no null: a null is written as the string "None", trainspec's TOML spelling of null
(see config_model.py). The first line is a `#:schema` line naming the bundled schema, so the
output is itself a config that editors and validate-config check. The text is read back and
validated before it is printed: a config that TOML cannot hold (a null inside a free-form table,
where "None" would stay a string) is refused rather than printed wrong.
"""

from __future__ import annotations

import json
import tomllib
from typing import Any

from trainspec.config.bundle import BUNDLE_DIR, SCHEMA_NAMES
from trainspec.config.loader import check_document, dump_json
from trainspec.config.toml_text import toml_ready
from trainspec.kinds import Kind

from .explain import leaves, lookup


class NotTOML(Exception):
    """The resolved config cannot be written as TOML without changing; says where."""


def resolved_toml(config: Any, kind: Kind) -> str:
    """`config` (valid, of `kind`) as a TOML document that validates back to an equal config."""
    import tomlkit  # only here: writing TOML is rare, importing tomlkit is not free

    document = json.loads(dump_json(config))
    schema = (BUNDLE_DIR / f"{SCHEMA_NAMES[kind]}.json").as_posix()
    header = (
        f"#:schema {schema}\n"
        f"# The resolved {kind} config: every setting, defaults included. TOML has no null:\n"
        '# "None" is null.\n\n'
    )
    text = header + tomlkit.dumps(toml_ready(document))
    again, errors, _ = check_document(kind, tomllib.loads(text))
    if again is None:
        where = errors[0].path if errors else "?"
        raise NotTOML(f"written as TOML, the config no longer validates (at {where})")
    if again != config:
        reread = json.loads(dump_json(again))
        path = next((path for path, value in leaves(document) if lookup(reread, path) != value), ())
        raise NotTOML(
            f"{'.'.join(path) or 'the config'} cannot be written as TOML without changing "
            '(TOML has no null; "None" stays a string there)'
        )
    return text
