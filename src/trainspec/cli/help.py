"""--help text for config settings, generated from the schema descriptions and defaults."""

from __future__ import annotations

import json
import textwrap

from trainspec.config.schema_info import NO_DEFAULT, schema_info


def config_flags_help(kind: str, width: int = 100) -> str:
    lines = []
    for path, key in schema_info(kind).keys.items():
        if key.renamed_to:
            continue  # an old name: validate-config says where it went
        if (
            key.is_table
            and not key.is_switch
            and "type" not in schema_info(kind).children.get(path, [])
        ):
            continue  # a plain table: its keys are listed one by one
        flag = "--" + ".".join(path)
        if key.is_switch:
            flag += f", --no-{'.'.join(path)}"
        default = "" if key.default is NO_DEFAULT else f" (default: {json.dumps(key.default)})"
        takes = "" if key.is_table else f" Takes {key.expected()}."
        text = f"{key.description}{takes}{default}"
        lines.append(f"  {flag}")
        lines += textwrap.wrap(text, width, initial_indent=" " * 6, subsequent_indent=" " * 6)
    return "\n".join(lines) + "\n"
