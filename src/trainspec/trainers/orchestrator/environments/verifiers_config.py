"""A verifiers environment's config, from a source's `env` table: checked by verifiers' own
config classes, each error at the source's dotted path.

    config = env_config(source.env, "orchestrator.train.source[0].env")
    # a pydantic error -> SetupErrors at orchestrator.train.source[0].env.taskset.turns, ...

* `taskset.id` may be a local file ("my_taskset.py", relative to the working directory): it is
  imported as the module named after the file (local_taskset), and loads like an installed
  taskset.
* errors_at turns any pydantic ValidationError of verifiers' config classes into SetupErrors
  under a dotted path (env_servers.py checks a source's `serve` table with it).
* An env table that sets no `timeout.episode` gets trainspec's own bound (the schema's default,
  an hour, over the env's `setup()` and `run()`) rather than verifiers' none, or an env
  class's own default, so an episode that never ends cannot hang a step;
  `timeout.episode = "None"` lifts it.
* Without the verifiers library (`pip install 'trainspec[envs]'`) import_verifiers is a
  SetupError that says how to install it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from trainspec.config_model import written
from trainspec.generated.environment import EnvTimeoutConfig

from ...errors import SetupError, SetupErrors

INSTALL_FIX = (
    "pip install 'trainspec[envs]' (the verifiers library), or use a built-in taskset "
    '("builtin:reverse-text") or your own data and reward'
)


def import_verifiers(path: str):
    """verifiers.v1, or a SetupError at `path` when the library is not installed."""
    try:
        import verifiers.v1 as vf
    except ImportError:
        raise SetupError(
            path, "names a verifiers taskset, and the verifiers library is not installed",
            INSTALL_FIX,
        ) from None  # fmt: skip
    return vf


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def local_taskset(env: dict[str, Any], path: str) -> dict[str, Any]:
    """`env` with a taskset id that is a local .py file imported, and named by its module."""
    taskset = env.get("taskset")
    if not isinstance(taskset, dict):
        return env
    ident = taskset.get("id")
    if not isinstance(ident, str) or not ident.endswith(".py"):
        return env
    file = Path(ident).resolve()
    if not file.is_file():
        raise SetupError(
            f"{path}.taskset.id",
            f"= {ident!r}: there is no such file (relative to {Path.cwd()})",
            "give the path of your taskset module, or the id of an installed taskset",
        )
    name = file.stem.replace("-", "_").lower()
    loaded = sys.modules.get(name)
    if loaded is None or getattr(loaded, "__file__", None) != str(file):
        spec = importlib.util.spec_from_file_location(name, file)
        assert spec is not None and spec.loader is not None  # a .py file always has both
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # the user's module failed to import: say where and why
            del sys.modules[name]
            raise SetupError(
                f"{path}.taskset.id",
                f"= {ident!r} cannot be imported: {type(exc).__name__}: {first_line(exc)}",
                "fix the module (python -c 'import runpy; runpy.run_path(\"" + ident + "\")' "
                "shows the whole error)",
            ) from None
    return {**env, "taskset": {**taskset, "id": name}}


def errors_at(path: str, exc, fix: str) -> SetupErrors:
    """A pydantic ValidationError of verifiers' config classes, each error at its dotted path
    under `path`; a key the class does not have is said so, with its own fix."""
    errors = []
    for error in exc.errors():
        where = ".".join([path, *(str(part) for part in error["loc"])])
        if error["type"] == "extra_forbidden":
            owner = where.rsplit(".", 2)[-2] if where.count(".") > 1 else "table"
            errors.append(
                SetupError(
                    where,
                    f"is not a setting of this {owner}: its class (verifiers, or the "
                    "package that defines it) has no such key",
                    "check the spelling against its settings, or remove it",
                )
            )
        else:
            errors.append(SetupError(where, f"{error['msg']} (got {error.get('input')!r})", fix))
    return SetupErrors(errors)


EPISODE_BOUND_S = EnvTimeoutConfig.model_fields["episode"].default  # the schema's


def bounded(env: dict[str, Any]) -> dict[str, Any]:
    """The written `env` table with trainspec's episode bound where it sets none."""
    timeout = env.get("timeout", {})
    if not isinstance(timeout, dict) or "episode" in timeout:  # set ("None": no bound), or
        return env  # not a table, which verifiers' class refuses with its path
    return {**env, "timeout": {**timeout, "episode": EPISODE_BOUND_S}}


def env_config(env, path: str):
    """The verifiers config of a source's `env` table (its generated class, or the table as a
    dict), checked by verifiers' own classes: the keys written, each taskset's, task's,
    harness's and env's own among them."""
    from pydantic import ValidationError

    vf = import_verifiers(f"{path}.taskset.id")
    env = bounded(local_taskset(written(env), path))
    try:
        return vf.resolve_env_config(env)
    except ValidationError as exc:
        raise errors_at(
            path, exc, "fix the value; the environment's settings are its own (see its docs)"
        ) from None
    except (ImportError, TypeError, ValueError, AttributeError) as exc:  # the plugin is missing
        raise SetupError(
            f"{path}.taskset.id",
            f"= {env.get('taskset', {}).get('id')!r} cannot be loaded: {first_line(exc)}",
            "install the taskset's package, or give the path of a module file "
            '(id = "my_taskset.py")',
        ) from None
