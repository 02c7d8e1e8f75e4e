"""What [slurm] writes into the job script without quotes (trainers/slurm/templates/), refused
here so validate-config points at the line that sets it.

The script quotes every value it passes to a command (the `sh` filter); what it cannot quote is
an `#SBATCH --option=value` line (sbatch reads those before any shell does, word by word) and a
comment, which a newline ends: the rest of the value would run as a command. So the #SBATCH
values ([slurm] job_name, partition, nodelist, exclude, account, time) and the parts of the
job log's path on `#SBATCH --output=` (project_dir, output_dir, the run directory) hold no
whitespace or control character, and template_path (named in a comment) no control character.
A multi-node rl job exports the top-level [env_vars] by name: those names are shell variable
names. pre_run_command is a shell command by design, run as written.

    what = unquotable("a b")     # "a space"; None for one word
"""

from __future__ import annotations

import re
from typing import Any

from trainspec.issues import dotted

from .context import RuleContext, show
from .run_paths import control_character, run_dir_problem, run_dir_setting

SBATCH_WORDS = ("job_name", "partition", "nodelist", "exclude", "account", "time")
SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def unquotable(text: str) -> str | None:
    """What in `text` one `#SBATCH` word cannot hold, in words: whitespace, a control character
    or a quote (sbatch reads quotes on those lines: one left open fails the submission); None
    when nothing."""
    found = control_character(text)
    if found is not None:
        return found
    quote = next((char for char in text if char in "'\""), None)
    if quote is not None:
        return f"the quote {quote}"
    space = next((char for char in text if char.isspace()), None)
    if space is None:
        return None
    return "a space" if space == " " else f"the space character {space!r}"


def sbatch_option(key: str) -> str:
    return f"#SBATCH --{key.replace('_', '-')}="


def _log_path_parts(cfg: Any) -> list[tuple[str, str]]:
    """(setting, value) of each part of the job log's path that the config writes: project_dir
    (when output_dir is relative), output_dir and the run directory's name."""
    parts = []
    if not cfg.output_dir.startswith("/"):
        parts.append(("slurm.project_dir", cfg.slurm.project_dir))
    parts.append(("output_dir", cfg.output_dir))
    path, name = run_dir_setting(cfg.run)
    if name is not None and run_dir_problem(name) is None:  # else run_dir_is_one_name says so
        parts.append((path, name))
    return parts


def sbatch_values_are_words(cfg: Any, ctx: RuleContext) -> None:
    """With [slurm], each value on the job script's #SBATCH lines is one word, unquoted.

    No whitespace, quote or control character in job_name, partition, nodelist, exclude,
    account, time, or the parts of the job log's path (project_dir, output_dir, run.dir); no
    control character in template_path, which a comment names."""
    slurm = cfg.slurm
    if slurm is None:
        return
    for key in SBATCH_WORDS:
        value = getattr(slurm, key)
        if value is None:
            continue
        found = "is empty" if value == "" else f"holds {unquotable(value)}"
        if value == "" or unquotable(value) is not None:
            ctx.error(
                f"slurm.{key}",
                f"= {show(value)} {found}: it becomes the one word of `{sbatch_option(key)}`, a "
                "line of the job script that cannot be quoted",
                f"give slurm.{key} as one word, without spaces, quotes or control characters",
            )
    for path, part in _log_path_parts(cfg):
        what = unquotable(part)
        if what is not None:
            ctx.error(
                path,
                f"= {show(part)} holds {what}: with [slurm] it is part of the job log's path "
                "on the `#SBATCH --output=` line of the job script, which cannot be quoted",
                f"give {path} a value without spaces, quotes or control characters",
                related=("slurm",),
            )
    template = slurm.template_path
    control = control_character(template) if template is not None else None
    if control is not None:
        ctx.error(
            "slurm.template_path",
            f"= {show(template)} holds {control}: the job script names its template in a comment, "
            "which it would end (the rest of the path would run as a command)",
            "rename the template file without control characters",
        )


def refused_as_an_env_name(name: str) -> bool:
    """Whether validate_env_var_names refuses `name` already (empty, "=" or NUL)."""
    return not name or "=" in name or "\0" in name


def exported_env_names_are_shell_names(cfg: Any, ctx: RuleContext) -> None:
    """With [slurm] and a multi_node deployment, the [env_vars] names are shell variable names.

    The job script exports each top-level [env_vars] entry by name: letters, digits and "_",
    not starting with a digit."""
    if cfg.slurm is None or cfg.deployment.type != "multi_node":
        return
    for key in cfg.env_vars:
        if refused_as_an_env_name(key) or SHELL_NAME.fullmatch(key):
            continue
        where = ("env_vars", key)
        ctx.error(
            dotted(where),
            f"cannot be exported by the job script ({show(key)}): with [slurm] and a multi_node "
            "deployment the script runs `export NAME=value` for each [env_vars] entry, and a "
            'shell variable is named by letters, digits and "_", not starting with a digit',
            f"rename {show(key)} in [env_vars] (as MY_VAR)",
            related=("slurm", "deployment.type"),
            about_key=True,
            key=where,
        )
