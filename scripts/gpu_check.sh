#!/usr/bin/env bash
# The GPU path, on one CUDA GPU, in one go (aim: under 8 minutes on an H200):
#   1. the GPU-marked tests: bf16 through FSDP's policy on one process, the optimizer state in
#      pinned host memory, flash-attention 2 (where flash-attn is installed), and with two GPUs
#      `rl` sending its weights to vLLM over NCCL (tests/gpu/test_nccl_broadcast.py; skipped,
#      saying so, on one GPU: NCCL puts each rank on a GPU of its own);
#   2. a bf16 sft run of a random-initialised ~0.6B Qwen3, tok/s and MFU per variant
#      (scripts/gpu_bench.py): the defaults (FSDP2, state offloaded), the state on the GPU,
#      and attn = "flash_attention_2" if flash-attn imports;
#   3. where vLLM imports: `rl` with [inference] on a small random Qwen3 (vLLM started by rl,
#      weights reloaded after every step through vLLM's own routes), 5 steps, and
#      the adaptive concurrency cap it followed (vLLM's KV-cache usage, from /metrics).
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
"$PY" -m pytest -q -rs -p no:cacheprovider -m gpu tests/gpu tests/trainers/run/test_profiler.py 2>&1 \
  | tee "$LOG_DIR/gpu_tests.log" || status=1
echo "== 2. sft on a ~0.6B Qwen3 in bf16"
"$PY" scripts/gpu_bench.py --steps 20 --warmup 5 2>&1 | tee "$LOG_DIR/gpu_bench.log" || status=1
echo "== 3. rl with [inference]: the vLLM server rl starts"
if "$PY" -c "import vllm" 2>/dev/null; then
  RL_DIR="$LOG_DIR/rl-vllm"
  rm -rf "$RL_DIR" && mkdir -p "$RL_DIR"
  "$PY" - "$RL_DIR/model" <<'PY'
import sys
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
from trainspec.trainers.builtin import builtin_model_dir
source = builtin_model_dir("builtin:tiny-qwen3")
config = AutoConfig.from_pretrained(source)
AutoModelForCausalLM.from_config(config).save_pretrained(sys.argv[1])
AutoTokenizer.from_pretrained(source).save_pretrained(sys.argv[1])
PY
  cat > "$RL_DIR/rl.toml" <<TOML
max_steps = 5
seq_len = 256
output_dir = "$RL_DIR/run"

[model]
name = "$RL_DIR/model"

[inference.vllm]
gpu_memory_utilization = 0.3
max_model_len = 512
enforce_eager = true

[orchestrator]
batch_size = 64
group_size = 8

[orchestrator.train.sampling]
max_completion_tokens = 16

[[orchestrator.train.source]]
env.taskset.id = "builtin:reverse-text"
TOML
  timeout 600 "$PY" -m trainspec.trainers.rl_run.main "$RL_DIR/rl.toml" 2>&1 | tee "$LOG_DIR/rl_vllm.log" || status=1
  cp "$RL_DIR/run/logs/inference.log" "$LOG_DIR/" 2>/dev/null || true
  # the adaptive concurrency cap against vLLM's own /metrics: inflight_cap and kv_usage a step
  "$PY" -c "import json,sys; rows=[json.loads(l) for l in open(sys.argv[1])]; print('concurrency:', [(r['step'], r.get('inflight_cap'), r.get('kv_usage')) for r in rows if 'reward' in r])" \
    "$RL_DIR/run/orchestrator/metrics.jsonl" 2>&1 | tee -a "$LOG_DIR/rl_vllm.log" || status=1
else
  echo "vllm does not import here: skipped (make install installs it; pip install 'trainspec[vllm]')"
fi
exit $status
