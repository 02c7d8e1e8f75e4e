"""Type-check src/trainspec with mypy, generated classes included.

    python scripts/typecheck.py          # make check runs it

The package is installed from two directories (src/trainspec, and generated/ as
trainspec.generated, see [tool.setuptools] in pyproject.toml), which mypy cannot follow through
the editable install's import hook: an unresolved `trainspec.generated` would make every config
`Any` and the rules unchecked. So the package is staged as one tree, mypy runs on it, and its
paths are mapped back to the repository's. Settings live in [tool.mypy] of pyproject.toml.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IGNORE = shutil.ignore_patterns("__pycache__")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="typecheck-") as tmp:
        stage = Path(tmp) / "trainspec"
        shutil.copytree(ROOT / "src" / "trainspec", stage, ignore=IGNORE)
        shutil.copytree(ROOT / "generated", stage / "generated", ignore=IGNORE)
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "mypy",
                "--config-file",
                str(ROOT / "pyproject.toml"),
                "--cache-dir",
                str(ROOT / ".mypy_cache"),
                "-p",
                "trainspec",
            ],
            cwd=tmp,
            capture_output=True,
            text=True,
        )
        output = (result.stdout + result.stderr).replace("trainspec/generated/", "generated/")
        output = output.replace("trainspec/", "src/trainspec/")
        sys.stdout.write(output)
        return result.returncode


if __name__ == "__main__":
    raise SystemExit(main())
