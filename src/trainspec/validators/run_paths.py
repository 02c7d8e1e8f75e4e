"""Where a run writes: run.dir (by default run.name) names one directory under output_dir.

A run directory is output_dir/run.dir, and `clean = true` deletes what is in it (sft: all of
it). A run.dir that is a path of its own (absolute, `a/b`, `..`) would put the run, and what
`clean` deletes, outside output_dir; a control character (a newline) in it would end a line of
the job script [slurm] writes. Both are refused here, where validate-config can point at the
line that sets them.

    problem = run_dir_problem("../x")     # 'holds "/" ...'; None for a name that fits
"""

from __future__ import annotations

import posixpath
import unicodedata
from pathlib import PurePosixPath
from typing import Any

from .context import RuleContext, show

CONTROL_NAMES = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab", "\0": "a NUL"}


def control_character(text: str) -> str | None:
    """The first control character of `text`, in words ("a newline", "the character '\\x1b'");
    None when there is none."""
    for char in text:
        if unicodedata.category(char) == "Cc":
            return CONTROL_NAMES.get(char, f"the character {char!r}")
    return None


def run_dir_problem(name: str) -> str | None:
    """Why `name` cannot be a run's directory under output_dir; None when it can."""
    if name == "":
        return "is empty, so the run would write into output_dir itself"
    if "/" in name:
        return (
            'holds "/": it is a path, and the run (and what clean = true deletes) would go '
            "outside output_dir"
        )
    if name in (".", ".."):
        where = "output_dir itself" if name == "." else "the directory above output_dir"
        return f"is {where}, not a directory of its own under output_dir"
    found = control_character(name)
    if found is not None:
        return f"holds {found}, which a directory name (and the job script that names it) cannot"
    return None


def run_dir_setting(run: Any) -> tuple[str, str | None]:
    """The setting that names the run directory, and its value: run.dir where the config
    writes it, else run.name (which run.dir defaults to)."""
    if run.dir is not None and ("dir" in run.model_fields_set or run.name is None):
        return "run.dir", run.dir
    return "run.name", run.name


def _fix(path: str, name: str, output_dir: str) -> str:
    leaf = PurePosixPath(name).name
    if "/" in name and leaf not in ("", ".", "..") and control_character(name) is None:
        parent = posixpath.normpath(posixpath.join(output_dir, posixpath.dirname(name)))
        return f"set {path} = {show(leaf)} and output_dir = {show(parent)}, the directory above it"
    return f'give {path} one directory name of its own, such as "my-run"'


def run_dir_is_one_name(cfg: Any, ctx: RuleContext) -> None:
    """run.dir (by default run.name) is one directory name, so the run stays under output_dir.

    Not empty, no "/" (no absolute path), not "." or "..", no control character: the run
    directory, which clean = true empties, is output_dir/run.dir and nothing else."""
    path, name = run_dir_setting(cfg.run)
    if name is None:
        return
    problem = run_dir_problem(name)
    if problem is None:
        return
    also = " (run.dir defaults to run.name)" if path == "run.name" else ""
    ctx.error(path, f"= {show(name)} {problem}{also}", _fix(path, name, cfg.output_dir))
