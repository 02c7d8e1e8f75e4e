"""Generate everything derived from schema/: pydantic classes and bundled schemas in
generated/, and the config reference in docs/reference/ (index.md and a page per command).

    python scripts/gen.py            # write generated/
    python scripts/gen.py --check    # exit 1 if generated/ or docs/reference/ differs from what
                                     # would be written

The generator's options live in [tool.datamodel-codegen] of pyproject.toml.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Run by path, the script has scripts/ on sys.path, not the repository root that holds tools/
# (the schema bundler and the classes' view, shared with the parity proof: python -m tools.parity).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gen_docs import write_reference

from tools.bundle_schema import write_bundle
from tools.gen_view import lazy_tables, view
from trainspec.kinds import SCHEMA_NAMES

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "schema"
GENERATED = ROOT / "generated"
REFERENCE = ROOT / "docs" / "reference"
BUNDLED = ("base_trainer", *SCHEMA_NAMES.values())  # the shared base, then one per kind


def generate(out: Path, schema: Path = SCHEMA) -> None:
    """Write every generated file into `out` (an empty directory)."""
    codegen = Path(sys.executable).with_name("datamodel-codegen")
    with tempfile.TemporaryDirectory() as tmp:
        classes_view = Path(tmp) / "schema"  # the schema without its TOML input conventions
        view(schema, classes_view)
        lazy_tables(classes_view)  # sft's [eval] and [inference]: loaded when set
        subprocess.run(
            [str(codegen), "--input", str(classes_view), "--output", str(out)],
            cwd=ROOT,
            check=True,
        )
    for name in BUNDLED:
        write_bundle(schema, name, out / "schemas")


def generate_reference(bundles: Path, out: Path) -> None:
    write_reference(bundles, out)


def _tree(path: Path) -> dict[str, Path]:
    return {
        str(p.relative_to(path)): p
        for p in sorted(path.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def differences(expected: Path, actual: Path, label: str = "generated") -> list[str]:
    """What differs between the tree `expected` and the tree `actual` (called `label`)."""
    want, have = _tree(expected), _tree(actual) if actual.is_dir() else {}
    diffs = [f"missing: {label}/{name}" for name in sorted(want.keys() - have.keys())]
    extra = sorted(have.keys() - want.keys())
    diffs += [f"not written by make gen: {label}/{name}" for name in extra]
    diffs += [
        f"differs: {label}/{name}"
        for name in sorted(want.keys() & have.keys())
        if not filecmp.cmp(want[name], have[name], shallow=False)
    ]
    return diffs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare, write nothing")
    parser.add_argument("--output", type=Path, default=GENERATED, help=argparse.SUPPRESS)
    parser.add_argument("--schema", type=Path, default=SCHEMA, help=argparse.SUPPRESS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "generated"
        generate(fresh, args.schema)
        reference = Path(tmp) / "reference"
        generate_reference(fresh / "schemas", reference)
        if args.check:
            diffs = differences(fresh, args.output)
            diffs += differences(reference, REFERENCE, "docs/reference")
            for line in diffs:
                print(line, file=sys.stderr)
            if diffs:
                print(
                    "generated/ or docs/reference/ is stale: run `make gen` and commit the result.",
                    file=sys.stderr,
                )
                return 1
            return 0
        if args.output.exists():
            shutil.rmtree(args.output)
        shutil.copytree(fresh, args.output)
        if args.output == GENERATED:  # a copy elsewhere (the drift tests) leaves the docs alone
            if REFERENCE.exists():
                shutil.rmtree(REFERENCE)
            shutil.copytree(reference, REFERENCE)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
