"""The package layout keeps its shape: imports flow one way, down the layers below, with no
import circle, counting the imports inside functions and under TYPE_CHECKING (each is a
dependency all the same); no module imports another's private names; and no module grows past
MAX_LINES.

Read from the source with `ast`, nothing imported. A planted upward import, circle, private
import or long file fails the matching test (test_a_planted_* below)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"

# Bottom to top: a module may import from its own layer and the layers below it. A module's
# layer is that of the longest prefix naming it.
LAYERS: list[tuple[str, ...]] = [
    # the config layer: no torch
    (
        "trainspec",
        "trainspec.generated",
        "trainspec.issues",
        "trainspec.kinds",
        "trainspec.schema_walk",
        "trainspec.closed_pipe",
        "trainspec.config_model",
        "trainspec.run_identity",
    ),
    ("trainspec.validators",),
    ("trainspec.config",),
    ("trainspec.cli",),
    # the trainers' shared parts
    ("trainspec.trainers", "trainspec.trainers.errors", "trainspec.trainers.builtin"),
    ("trainspec.trainers.process", "trainspec.trainers.run"),
    ("trainspec.trainers.core",),
    ("trainspec.trainers.ckpt",),
    ("trainspec.trainers.chat",),
    ("trainspec.trainers.refusals",),
    ("trainspec.trainers.wire",),
    ("trainspec.trainers.serving",),
    ("trainspec.trainers.parts", "trainspec.trainers.session"),
    ("trainspec.trainers.slurm",),
    # the commands; sft's online evals, `eval` and `inference` use the orchestrator's eval
    # sources and model server
    ("trainspec.trainers.orchestrator",),
    ("trainspec.trainers.rl",),
    ("trainspec.trainers.sft", "trainspec.trainers.inference", "trainspec.trainers.eval"),
    ("trainspec.trainers.rl_run",),
    # what a SLURM job runs (any command), and the verifiers taskset over the built-in task
    ("trainspec.trainers.slurm.job", "trainspec_reverse_text"),
]
MAX_LINES = 330


def modules(root: Path = SRC) -> dict[str, Path]:
    found = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules `name` imports, anywhere in it: `from p import x` is module p.x when
    that is a module, else p (x is a name in it)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in known else module
                       for a in node.names]  # fmt: skip
        else:
            continue
        for target in targets:
            while target and target not in known and "." in target:
                target = target.rpartition(".")[0]
            if target in known and target != name:
                found.add(target)
    return found


def graph(root: Path = SRC) -> dict[str, set[str]]:
    known = modules(root)
    known.update({m: Path() for m in ("trainspec.generated",)})  # generated/, beside src/
    return {name: imports(name, path, known) for name, path in modules(root).items()}


def layer(name: str) -> int:
    best, rank = -1, None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), index
    if rank is None:
        raise AssertionError(f"{name} is in no layer: add it to LAYERS in {__file__}")
    return rank


def upward(edges: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{source} -> {target}"
        for source, targets in edges.items()
        for target in targets
        if layer(target) > layer(source)
    )


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def private_imports(root: Path = SRC) -> list[str]:
    """`from module import _name` of the project's own modules: a private name is its
    module's own; what another module needs is made public, with a name."""
    return sorted(
        f"{path.relative_to(root)}:{node.lineno}: {alias.name}"
        for path in root.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
        and (node.level or (node.module or "").startswith("trainspec"))
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__")
    )


def long_files(root: Path = SRC) -> list[str]:
    return sorted(
        f"{path.relative_to(root)}: {count} lines"
        for path in root.rglob("*.py")
        if (count := len(path.read_text().splitlines())) > MAX_LINES
    )


def test_every_module_is_in_a_layer():
    for name in modules():
        layer(name)


def test_no_import_points_up_the_layers():
    assert upward(graph()) == []


def test_no_import_circle():
    assert circles(graph()) == []


def test_no_private_name_is_imported_from_another_module():
    assert private_imports() == []


def test_no_module_is_over_the_line_limit():
    assert long_files() == [], f"split these by what they do (at most {MAX_LINES} lines)"


# -- the checks can fail -------------------------------------------------------------------


def plant(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    "where",
    ["top", "function", "relative"],
)
def test_a_planted_upward_import_is_found(tmp_path, where):
    body = {
        "top": "from trainspec.trainers.sft.train import train\n",
        "function": "def f():\n    from trainspec.trainers.sft import train\n",
        "relative": "def f():\n    from ..sft.train import train\n",
    }[where]
    root = plant(
        tmp_path,
        {
            "trainspec/__init__.py": "",
            "trainspec/trainers/__init__.py": "",
            "trainspec/trainers/sft/__init__.py": "",
            "trainspec/trainers/sft/train.py": "from ..chat.render import x\n",
            "trainspec/trainers/chat/__init__.py": "",
            "trainspec/trainers/chat/render.py": body,
        },
    )
    assert upward(graph(root)) == ["trainspec.trainers.chat.render -> trainspec.trainers.sft.train"]


def test_a_planted_circle_is_found(tmp_path):
    root = plant(
        tmp_path,
        {
            "trainspec/__init__.py": "",
            "trainspec/a.py": "from trainspec import b\n",
            "trainspec/b.py": "def f():\n    from . import c\n",
            "trainspec/c.py": "import trainspec.a\n",
            "trainspec/d.py": "from trainspec.a import x\n",
        },
    )
    assert circles(graph(root)) == [["trainspec.a", "trainspec.b", "trainspec.c"]]


def test_a_planted_private_import_is_found(tmp_path):
    root = plant(
        tmp_path,
        {
            "trainspec/a.py": "def f():\n    from .b import _helper, public\n",
            "trainspec/b.py": "from trainspec.a import f\nfrom os import _exit\n",
        },
    )
    assert private_imports(root) == ["trainspec/a.py:2: _helper"]


def test_a_planted_long_file_is_found(tmp_path):
    root = plant(tmp_path, {"trainspec/x.py": "pass\n" * (MAX_LINES + 1), "trainspec/y.py": ""})
    assert long_files(root) == [f"trainspec/x.py: {MAX_LINES + 1} lines"]
