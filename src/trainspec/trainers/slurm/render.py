"""The job script from its Jinja template: the bundled one for the command and deployment, or
[slurm] template_path.

    text = render(template_path, "single_node_sft.sbatch.j2", context)   # SetupError on failure
    check_syntax(text, "slurm.template_path")                             # bash -n

A template of your own is found first and may include the bundled pieces beside it
(`{% include "_setup.sh.j2" %}`: the header, setup, node and supervisor parts). The filter `sh`
quotes a value (a list: each item) for the shell. An undefined name is an error, not an empty
string, so a template that asks for something the launcher does not give fails at start.

What a template writes without `sh` stays on its line: a value holding a control character (a
newline, which would end an `#SBATCH` line or a comment and run the rest as a command) is
refused, unless it is shell already (`Shell`: quoted by `sh`, or pre_run_command, a command
the config gives as one).
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from trainspec.validators.run_paths import control_character

from ..errors import SetupError

BUNDLED = Path(__file__).resolve().parent / "templates"
TEMPLATE_PATH = "slurm.template_path"


class Shell(str):
    """Text the job script holds as it is: quoted for the shell, or a command by design."""


def shell_quoted(value) -> Shell:
    if isinstance(value, list | tuple):
        return Shell(" ".join(shlex.quote(str(item)) for item in value))
    return Shell(shlex.quote(str(value)))


def on_its_line(value):
    """Jinja's finalize: every `{{ ... }}` a template writes; one that is not Shell and holds a
    control character is refused (it would end its line: an `#SBATCH` line, a comment)."""
    if isinstance(value, str) and not isinstance(value, Shell):
        found = control_character(value)
        if found is not None:
            raise SetupError(
                "slurm",
                f"the job script would hold {value!r} unquoted, and {found} in it would end its "
                "line (an `#SBATCH` line, a comment): the rest would run as a command",
                "rid the config's paths and names (and the directory the command runs from) of "
                "control characters; in a template of your own, quote values with `| sh`",
            )
    return value


def render(template_path: Path | None, bundled: str, context: dict) -> str:
    import jinja2

    search = [str(BUNDLED)]
    name = bundled
    if template_path is not None:
        search.insert(0, str(template_path.parent))
        name = template_path.name
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(search),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
        finalize=on_its_line,
    )
    environment.filters["sh"] = shell_quoted
    where = str(template_path) if template_path is not None else f"the bundled {bundled}"
    try:
        return environment.get_template(name).render(context)
    except jinja2.TemplateSyntaxError as err:
        raise SetupError(
            TEMPLATE_PATH,
            f"{err.filename or where}:{err.lineno}: {err.message}",
            "fix the template (Jinja syntax)",
        ) from None
    except jinja2.TemplateError as err:
        raise SetupError(
            TEMPLATE_PATH,
            f"{where} does not render: {err}",
            "use only the names the bundled templates use (trainers/slurm/templates/)",
        ) from None


def check_syntax(text: str, where: str) -> None:
    """bash -n: the rendered script parses (a template of your own can break it)."""
    try:
        result = subprocess.run(
            ["bash", "-n"], input=text, capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return  # no bash here to ask; sbatch's node runs it
    if result.returncode != 0:
        raise SetupError(
            TEMPLATE_PATH,
            f"the script rendered from {where} is not valid bash: {result.stderr.strip()}",
            "fix the template",
        )
