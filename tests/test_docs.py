"""The README and the docs site: every relative link in README.md resolves to a file (and to an
anchor, for links into the docs' Markdown pages), the README stays short and free of dates and
commit hashes, and the site builds with `mkdocs build --strict` (broken links and anchors fail
it). Each checker is also run on a planted mistake, so none can pass by checking nothing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.support import ROOT

README = ROOT / "README.md"
MAX_README_LINES = 250

FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
DATE = re.compile(r"\b(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])\b")
# 7 to 40 hex digits with at least one letter and one digit: a short or full commit hash, not a
# plain number or an English word.
COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")


def prose(text: str) -> str:
    """The text without fenced code blocks and inline code, where a link is not a link."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def links(text: str) -> list[str]:
    return LINK.findall(prose(text))


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading of README.md."""
    text = INLINE_CODE.sub(lambda m: m.group(0)[1:-1], heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def readme_anchors(text: str) -> set[str]:
    return {github_slug(h) for h in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", FENCE.sub("", text), re.M)}


def page_anchors(path: Path) -> set[str]:
    """The ids a docs page has once rendered, as mkdocs renders them (headings through the toc
    extension, `{#id}` attributes, HTML ids)."""
    markdown = pytest.importorskip("markdown")
    html = markdown.markdown(
        path.read_text(encoding="utf-8"),
        extensions=["toc", "attr_list", "fenced_code", "tables", "md_in_html"],
    )
    return set(re.findall(r"\bid=\"([^\"]+)\"", html))


def broken_links(text: str, base: Path) -> list[str]:
    """Every relative link of `text` (a file in `base`) that names no file, or an anchor its
    target lacks."""
    problems = []
    for target in links(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path_part, _, fragment = target.partition("#")
        if not path_part:
            if fragment not in readme_anchors(text):
                problems.append(f"{target}: no heading with this anchor")
            continue
        path = (base / path_part).resolve()
        if not path.exists():
            problems.append(f"{target}: {path_part} does not exist")
            continue
        if fragment and path.suffix == ".md" and fragment not in page_anchors(path):
            problems.append(f"{target}: {path_part} has no anchor #{fragment}")
    return problems


def readme_text() -> str:
    return README.read_text(encoding="utf-8")


def test_readme_links_resolve() -> None:
    found = links(readme_text())
    assert len(found) >= 10, f"the README's links were not found: {found}"
    assert broken_links(readme_text(), ROOT) == []


def test_readme_is_short() -> None:
    lines = readme_text().count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines (at most {MAX_README_LINES})"


def test_readme_has_no_dates_or_commit_hashes() -> None:
    text = readme_text()
    assert [m.group(0) for m in DATE.finditer(text)] == []
    assert [m.group(0) for m in COMMIT.finditer(text)] == []


def test_readme_points_into_the_docs() -> None:
    targets = {t.partition("#")[0] for t in links(readme_text())}
    for page in ("docs/getting-started.md", "docs/reference/index.md", "docs/prime-rl.md"):
        assert page in targets, f"README.md does not link {page}"


# The checkers above, on planted mistakes: each must report what it is there to catch.


def test_link_checker_reports_a_missing_file_and_anchor(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# Page\n\n## A section\n", encoding="utf-8")
    text = (
        "# Title\n\n[ok](docs/page.md#a-section) [gone](docs/missing.md) "
        "[no anchor](docs/page.md#no-such-section) [self](#nowhere) [web](https://example.com)\n"
        "```\n[in code](docs/missing-too.md)\n```\n"
    )
    problems = broken_links(text, tmp_path)
    assert len(problems) == 3, problems
    assert any("missing.md does not exist" in p for p in problems)
    assert any("#no-such-section" in p for p in problems)
    assert any("#nowhere" in p for p in problems)


def test_date_and_commit_patterns_catch_them() -> None:
    assert DATE.search("measured on 2026-12-02 with")
    assert COMMIT.search("a fresh clone of 7dfdbc2 (trl")
    assert COMMIT.search("commit 87401eb3a9c2d1e0f4b5a6c7d8e9f0a1b2c3d4e5")
    assert not COMMIT.search("step 1000000 | 14,408 tok/s | loss 5.5220 | deadbeef")


# The docs site, as `make check` builds it.


def build_site(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=120,
    )


def test_docs_site_builds_strictly(tmp_path: Path) -> None:
    result = build_site(ROOT / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "index.html").exists()
    assert (tmp_path / "site" / "getting-started" / "index.html").exists()


def test_docs_site_build_fails_on_a_broken_link(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    with (docs / "index.md").open("a", encoding="utf-8") as f:
        f.write("\n[broken](guides/sft.md#no-such-section)\n")
    config = tmp_path / "mkdocs.yml"
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    config.write_text(re.sub(r"(?m)^docs_dir: .*$", f"docs_dir: {docs}", text), encoding="utf-8")
    result = build_site(config, tmp_path / "site")
    assert result.returncode != 0
    assert "no-such-section" in result.stderr
