#!/usr/bin/env bash
# The GPU path, on one CUDA GPU, in one go (aim: under 8 minutes on an H200):
#   1. the GPU-marked tests: bf16 through FSDP's policy on one process, the optimizer state in
#      pinned host memory, flash-attention 2 (where flash-attn is installed);
#   2. a bf16 sft run of a random-initialised ~0.6B Qwen3, tok/s and MFU per variant
#      (scripts/gpu_bench.py): the defaults (FSDP2, state offloaded), the state on the GPU,
#      and attn = "flash_attention_2" if flash-attn imports.
#
#     scripts/gpu_check.sh [LOG_DIR]
#
# On a machine with trainspec installed (make install with a CUDA torch) it runs as it is.
# On the lent H200 (torch and transformers in its image, nothing to fetch) run
# scripts/gpu_wheels.sh here first and carry .wheels along: this installs trainspec from the
# tree and its missing dependencies from there, offline, keeping the image's torch.
set -euo pipefail
cd "$(dirname "$0")/.."
LOG_DIR=${1:-${OUT:-/tmp/gpu-check}}
mkdir -p "$LOG_DIR"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
if ! "$PY" -c "import trainspec.trainers" 2>/dev/null; then
  [ -d .wheels ] || { echo "trainspec is not installed and .wheels/ is missing: run scripts/gpu_wheels.sh" >&2; exit 2; }
  "$PY" -m pip install --quiet --no-index --no-deps .wheels/*.whl
  "$PY" -m pip install --quiet --no-index --no-deps --no-build-isolation -e .
fi
"$PY" -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'cuda', torch.cuda.is_available())"

status=0
echo "== 1. GPU-marked tests"
"$PY" -m pytest -q -p no:cacheprovider -m gpu tests/gpu tests/trainers/run/test_profiler.py 2>&1 \
  | tee "$LOG_DIR/gpu_tests.log" || status=1
echo "== 2. sft on a ~0.6B Qwen3 in bf16"
"$PY" scripts/gpu_bench.py --steps 20 --warmup 5 2>&1 | tee "$LOG_DIR/gpu_bench.log" || status=1
exit $status
