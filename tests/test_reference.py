"""The config reference (docs/reference/, written by `make gen`): a page per command of the kinds
registry, an anchor per key of every kind (the dotted path), the refused-at-start mark and the
per-mode values of "auto" keys on the right blocks, links between the pages that resolve, and
errors and `--help SECTION` that link to anchors that exist."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import pytest
from helpers.support import ROOT

from trainspec.cli.entrypoint import run_entrypoint
from trainspec.config.reference_links import (
    anchor,
    embedded,
    link,
    page,
    page_name,
    reference_keys,
)
from trainspec.config.schema_info import schema_info
from trainspec.kinds import ALL_KINDS, KIND_INFO

sys.path.insert(0, str(ROOT / "scripts"))
from reference_refused import REFUSED  # noqa: E402

DOCS = ROOT / "docs" / "reference"
ID = re.compile(r'<a id="([^"]+)"></a>')
LINK = re.compile(r"\]\(([^)\s]*)\)")


def text(name: str) -> str:
    return (DOCS / name).read_text()


def ids(name: str) -> set[str]:
    page = text(name)
    slugs = {
        re.sub(r"[^\w\s-]", "", line.lstrip("#").strip()).strip().lower().replace(" ", "-")
        for line in page.splitlines()
        if line.startswith("#")
    }
    return set(ID.findall(page)) | slugs


def block(name: str, key: str) -> str:
    """The block of `key` on page `name`: from its anchor to the blank line after it."""
    page = text(name)
    start = page.index(f'<a id="{key}"></a>')
    return page[start : page.index("\n\n", start)]


def resolves(target: str, here: str) -> bool:
    """A link from page `here` (a file of DOCS) or from the repository root (docs/reference/...)
    names a page that exists and an anchor on it."""
    path, _, fragment = target.partition("#")
    name = Path(path).name if path else here
    if not (DOCS / name).is_file():
        return False
    return not fragment or fragment in ids(name)


def test_a_page_per_command_of_the_kinds_registry_and_nothing_else():
    pages = {"index.md"} | {page_name(kind) for kind in KIND_INFO}
    assert {path.name for path in DOCS.iterdir()} == pages
    index = text("index.md")
    for kind in KIND_INFO:
        assert f"]({page_name(kind)})" in index
    assert not (ROOT / "docs" / "reference.md").exists()


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_every_key_of_every_kind_has_an_anchor_on_its_command_page(kind):
    info = schema_info(kind)
    paths = [*info.keys, *reference_keys(info)]  # with the keys of arrays of tables
    inside = embedded(info.schema)  # [trainer] of rl: its keys are on rl-trainer's page
    assert len(paths) > 20
    wrong = []
    for path in paths:
        if len(path) > 1 and path[0] in inside:
            expected = f"{page(inside[path[0]])}#{anchor(path[1:])}"
        else:
            expected = f"{page(kind)}#{anchor(path)}"
        target = link(kind, path)
        file, _, fragment = target.partition("#")
        if target != expected or f'<a id="{fragment}"></a>' not in text(Path(file).name):
            wrong.append(f"{path}: {target}")
    assert wrong == []


def test_the_rl_command_page_points_to_the_pages_of_the_configs_it_holds():
    assert embedded(schema_info("rl_run").schema) == {
        "trainer": "rl",
        "orchestrator": "orchestrator",
    }
    assert '<a id="trainer"></a>' in text("rl.md")
    assert "trainer.optim" not in ids("rl.md")
    assert "](rl-trainer.md)" in block("rl.md", "trainer")


def test_a_key_inside_an_embedded_config_links_to_that_commands_page():
    assert link("rl_run", ("trainer", "optim", "lr")) == "docs/reference/rl-trainer.md#optim.lr"
    assert link("rl_run", ("orchestrator", "train", "source", 0, "name")) == (
        "docs/reference/orchestrator.md#train.source.name"
    )
    assert link("sft", ("env_vars", "MY_VAR")) == "docs/reference/sft.md#env_vars"
    assert link("sft", ("no_such_key",)) == "docs/reference/sft.md"


@pytest.mark.parametrize("command", sorted(REFUSED))
def test_what_a_command_refuses_at_start_is_marked_on_its_block(command):
    name = f"{command}.md"
    for path, why in REFUSED[command].items():
        key = path.replace("[]", "")
        assert f"**Refused at start**: {why}" in block(name, key), key
        assert f"- [`{key}`](#{key}): {why}" in text(name)
    assert "**Refused at start**" in block("sft.md", "model.impl")
    assert "**Refused at start**" not in block("sft.md", "model.name")


def test_an_auto_key_shows_its_value_for_each_command():
    for kind in ALL_KINDS:
        for path, key in schema_info(kind).keys.items():
            if key.auto is None or path[0] in ("trainer", "orchestrator"):
                continue
            here = block(page_name(kind), anchor(path))
            assert '**Auto**: `"auto"` resolves per command' in here
            for mode, value in key.auto.items():
                command = KIND_INFO[mode].command  # type: ignore[index]
                shown = f"`{json.dumps(value)}` here ({command})" if mode == kind else command
                assert shown in here and f"`{json.dumps(value)}`" in here, (path, mode)
    weight_decay = block("sft.md", "optim.weight_decay")
    assert "`0.01` here (sft); rl-trainer `0.0`" in weight_decay


def test_a_rule_is_listed_on_the_keys_it_names():
    assert "[`validate_cp`](#rule-validate_cp)" in block("sft.md", "model.cp")
    assert '<a id="rule-validate_cp"></a>' in text("sft.md")


@pytest.mark.parametrize("name", sorted(path.name for path in DOCS.glob("*.md")))
def test_every_link_of_the_reference_resolves(name):
    broken = [
        target
        for target in LINK.findall(text(name))
        if not target.startswith("http") and not resolves(target, name)
    ]
    assert broken == []


def run(kind: str, prog: str, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_entrypoint(kind, prog, list(argv), out, err, lambda *a: None)  # type: ignore[arg-type]
    return code, out.getvalue(), err.getvalue()


def test_an_error_about_a_key_links_to_its_anchor(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[optim]\nlr = "fast"\nlearning_rate = 1\n\n[[eval.source]]\nname = 3\n')
    code, _, err = run("sft", "sft", str(path))
    assert code == 1
    seen = re.findall(r"^    see: (\S+)$", err, re.M)
    assert "docs/reference/sft.md#optim.lr" in seen  # a value of the wrong type
    assert "docs/reference/sft.md#optim" in seen  # an unknown key: its table
    assert "docs/reference/sft.md#eval.source.name" in seen  # a key of an array's table
    assert all(resolves(target, "") for target in seen), seen
    trainer = tmp_path / "rl.toml"
    trainer.write_text('[trainer.optim]\nlr = "fast"\n')
    code, _, err = run("rl_run", "rl", str(trainer))
    assert "    see: docs/reference/rl-trainer.md#optim.lr\n" in err


def test_a_rules_error_and_the_json_and_github_reports_carry_the_link(tmp_path):
    import json
    import subprocess
    import sys

    path = tmp_path / "short.toml"
    path.write_text('max_steps = 3\n\n[scheduler]\ntype = "cosine"\nwarmup_steps = 20\n')
    link = "docs/reference/sft.md#scheduler.warmup_steps"
    code, _, err = run("sft", "sft", str(path))
    assert code == 1 and f"    see: {link}\n" in err  # a rule's error: its key's entry
    assert resolves(link, "")
    cli = [sys.executable, "-m", "trainspec.cli.validate_config", str(path), "--kind", "sft"]
    report = json.loads(subprocess.run([*cli, "--format", "json"], capture_output=True).stdout)
    assert [e.get("reference") for e in report["errors"]] == [link]
    github = subprocess.run([*cli, "--format", "github"], capture_output=True, text=True).stdout
    assert github.rstrip().endswith(f"(see {link})"), github


def test_help_links_to_the_command_page_and_a_section_to_its_anchor():
    _, out, _ = run("sft", "sft", "--help")
    assert out.endswith("the config reference: docs/reference/sft.md\n")
    _, out, _ = run("rl_run", "rl", "--help", "trainer.optim")
    assert out.endswith("the config reference: docs/reference/rl-trainer.md#optim\n")
    assert resolves("docs/reference/rl-trainer.md#optim", "")
