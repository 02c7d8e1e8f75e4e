"""A typo in any typed key of a source's `env` and `serve` tables is reported by validate-config
at its file:line:col with the key it meant: an error where verifiers refuses unknown keys, a
warning where the table is open to a plugin's own keys (the env class's, the taskset's, its
task's, a judge's, the harness's), which the plugin checks when the environment loads.

The cases are every key of the generated env and serve classes (schema/environment.json), each
table reached by dotted keys under `[[train.source]]` (a union's variant picked by its tag on the
line before), and the tables inside arrays written inline."""

from __future__ import annotations

import io
import typing

import pytest
from pydantic import BaseModel
from typing_extensions import TypeAliasType

from trainspec.cli.validate_config import run
from trainspec.config_model import union_members
from trainspec.generated import environment as ours

HEAD = '[model]\nname = "m"\n\n[[train.source]]\nenv.taskset.id = "reverse-text"\n'


def typo(key: str) -> str:
    return key[:-1] if len(key) > 4 else key + key[-1]


def _tables(annotation) -> list[type[BaseModel]]:
    """The tables a field holds directly (a list's or a free-form table's are not)."""
    if isinstance(annotation, TypeAliasType):
        annotation = annotation.__value__
    return [
        m
        for m in union_members(annotation)
        if isinstance(m, type) and issubclass(m, BaseModel) and m.__module__ == ours.__name__
    ]


def _free_tables(annotation) -> list[type[BaseModel]]:
    """The tables of a free-form table of tables (`rewards.<name>`)."""
    members = union_members(annotation)
    return [t for m in members if typing.get_origin(m) is dict for t in _tables(m.__args__[1])]


def cases(model: type[BaseModel], path: tuple[str, ...], setup: tuple[str, ...]):
    """(the key's path, the lines that pick the variants above it, whether its table is open)."""
    open_table = model.model_config.get("extra") == "allow"
    for name, field in model.model_fields.items():
        key = (*path, name)
        yield key, setup, open_table
        for inner in _tables(field.annotation):
            tag = inner.model_fields.get("type")
            picks = setup
            if tag is not None and len(_tables(field.annotation)) > 1:
                (value,) = typing.get_args(tag.annotation)
                picks = (*setup, f'{".".join(key)}.type = "{value}"')
            yield from cases(inner, key, picks)
        for inner in _free_tables(field.annotation):
            yield from cases(inner, (*key, "mine"), setup)


CASES = [*cases(ours.EnvConfig, ("env",), ()), *cases(ours.ServeConfig, ("serve",), ())]


def check(tmp_path, text: str, kind: str = "orchestrator") -> tuple[int, str, str]:
    path = tmp_path / "typo.toml"
    path.write_text(text)
    out = io.StringIO()
    return run(["--kind", kind, str(path)], out, io.StringIO()), out.getvalue(), str(path)


def test_the_cases_cover_the_tables():
    keys = {".".join(key) for key, _, _ in CASES}
    assert len(CASES) > 150
    expected = {"env.timeout.episode", "env.agent.runtime.vm", "serve.pool.num_workers",
                "env.taskset.task.rewards.mine.weight", "env.interception.tunnel.port"}  # fmt: skip
    assert expected <= keys


@pytest.mark.parametrize(
    ("key", "setup", "open_table"), CASES, ids=[".".join(key) for key, _, _ in CASES]
)
def test_a_typo_is_reported_at_its_line(tmp_path, key, setup, open_table):
    wrong = ".".join((*key[:-1], typo(key[-1])))
    text = HEAD + "".join(line + "\n" for line in setup) + f"{wrong} = 1\n"
    line = text.count("\n")
    code, report, path = check(tmp_path, text)
    if open_table:  # the plugin's class may take the key: a warning, and the config passes
        where = f"{path}:{line}:1: warning: train.source.0.{wrong} is not one of verifiers' own"
        assert where in report, report
        assert f"did you mean train.source.0.{'.'.join(key)}?" in report
    else:
        where = f"{path}:{line}:1: error: train.source.0.{wrong} is not a known key"
        assert where in report and code == 1, report
        assert f"did you mean train.source.0.{'.'.join(key)}?" in report, report


@pytest.mark.parametrize(
    ("line", "wrong", "meant"),
    [
        ('env.retries.rules = [{ max_retries = 1, mesage = "x" }]', "env.retries.rules.0.mesage",
         "message"),
        ('env.interception = { type = "static", servers = [{ tunel = {} }] }',
         "env.interception.servers.0.tunel", "tunnel"),
        ('env.agent.retries.rules = [{ max_retrie = 1 }]', "env.agent.retries.rules.0.max_retrie",
         "max_retries"),
    ],
)  # fmt: skip
def test_a_typo_in_an_array_of_tables_is_reported_at_its_column(tmp_path, line, wrong, meant):
    code, report, path = check(tmp_path, HEAD + line + "\n")
    column = line.index(wrong.rsplit(".", 1)[1]) + 1
    assert f"{path}:6:{column}: error: train.source.0.{wrong} is not a known key" in report, report
    assert f"did you mean train.source.0.{wrong.rsplit('.', 1)[0]}.{meant}?" in report
    assert code == 1


def test_a_judges_typo_is_a_warning(tmp_path):
    line = 'env.taskset.task.judges = [{ id = "rubric", modle = "gpt-4.1-mini" }]'
    code, report, path = check(tmp_path, HEAD + line + "\n")
    assert code == 0
    at = f"{path}:6:{line.index('modle') + 1}: warning: train.source.0.env.taskset.task.judges.0"
    assert f"{at}.modle is not one of verifiers' own keys of this table; model is" in report


@pytest.mark.parametrize(
    ("kind", "text", "prefix"),
    [
        ("sft", '[[eval.source]]\nenv.taskset.id = "reverse-text"\nenv.timeout.episod = 1\n',
         "eval.source.0"),
        ("rl_run", '[[orchestrator.eval.source]]\nenv.taskset.id = "x"\nenv.timeout.episod = 1\n',
         "orchestrator.eval.source.0"),
        ("rl_run", '[[orchestrator.train.source]]\nenv.taskset.id = "x"\nenv.timeout.episod = 1\n',
         "orchestrator.train.source.0"),
    ],
)  # fmt: skip
def test_every_source_list_has_the_typed_tables(tmp_path, kind, text, prefix):
    code, report, path = check(tmp_path, text, kind)
    assert f"{path}:3:1: error: {prefix}.env.timeout.episod is not a known key" in report, report
    assert f"did you mean {prefix}.env.timeout.episode?" in report and code == 1


def test_a_value_of_the_wrong_type_or_variant_is_reported_where_it_is(tmp_path):
    text = HEAD + 'serve.pool.type = "statc"\nenv.timeout.episode = "soon"\n'
    code, report, path = check(tmp_path, text)
    assert f'{path}:6:19: error: train.source.0.serve.pool.type is "statc", not one of' in report
    assert 'did you mean "static"?' in report
    assert f"{path}:7:23: error: train.source.0.env.timeout.episode should be a number" in report
    assert code == 1
