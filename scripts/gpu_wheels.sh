#!/usr/bin/env bash
# The wheels trainspec needs on the lent GPU machine beyond its image (which has torch,
# transformers, peft, safetensors, tokenizers, pytest, ...; nothing can be fetched there),
# downloaded here into .wheels/ for Python 3.12 on x86-64 Linux. scripts/gpu_check.sh installs
# them from there with --no-index.
#
#     scripts/gpu_wheels.sh        # then carry .wheels to the GPU machine beside the tree
set -euo pipefail
cd "$(dirname "$0")/.."
# The versions this checkout's .venv runs (make install), so both machines run the same ones.
NAMES="pydantic pydantic-core annotated-types typing-inspection jsonschema-rs tree-sitter \
tree-sitter-toml tomlkit datasets dill multiprocess pyzmq"
mapfile -t PACKAGES < <(.venv/bin/python - $NAMES <<'PY'
import sys
from importlib.metadata import version
for name in sys.argv[1:]:
    print(f"{name}=={version(name)}")
PY
)
PLATFORMS=()
for n in 17 27 28 31 34; do PLATFORMS+=(--platform "manylinux_2_${n}_x86_64"); done
python3 -m pip download --quiet --quiet --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp "${PLATFORMS[@]}" --platform manylinux2014_x86_64 -d .wheels "${PACKAGES[@]}"
du -sh .wheels
