"""What each command refuses at start, for the config reference: per command, the dotted path a
refusal names and, in a few words, what is refused (the value or the case) and why.

The refusals themselves are code (src/trainspec/trainers/refusals.py and each command's own
refusals.py), which builds a SetupError naming the path when a config asks for it; this table
says the same for readers. It is kept true by tests/test_reference_refused.py: its paths are
exactly those of the field-coverage tables (tests/helpers/field_refusals.py,
tests/trainers/rl/rl_field_refusals.py, tests/trainers/rl_run/test_rl_run_field_coverage.py),
whose tests prove each row is refused naming its path. A path under an array of tables is
written with `[]` (`eval.source[].ratio`).

Only what this build cannot honour is here; a start-time check of values that can never work
together (a batch the processes cannot split) is not a refusal of the setting.
"""

from __future__ import annotations

NOT_BUILT = "not in this build"

MODEL = {
    "model.impl": '"custom": this build has no custom model implementation',
    "model.conversion_dir": "any: weights are converted only for the custom implementation",
    "model.attn": '"flash_attention_2/3/4" without a CUDA GPU and the flash-attn package; '
    '"flex_attention" off a GPU',
    "model.vlm": f"any: vision-language training is {NOT_BUILT}",
    "model.full_offload": f"any: the CPU optimizer overlapped with backward is {NOT_BUILT}",
    "model.quantization": f"any: FP8 training is {NOT_BUILT}",
    "model.index_cache": "any: sparse-attention index caching needs the custom implementation",
    "model.cp": f"above 1: context parallelism is {NOT_BUILT}",
    "model.ep": f"above 1: expert parallelism is {NOT_BUILT}",
    "model.ep_comm_backend": f'"deepep": DeepEP (expert parallelism) is {NOT_BUILT}',
    "model.moe_fused_kernel": "true: the fused MoE kernel needs the custom implementation",
    "model.debug.force_balanced_routing": "true: a hook of the custom MoE implementation",
    "model.ac_offloading.max_inflight_activations": "other than 5: activations are offloaded "
    "as autograd saves them, with no pipeline depth to set",
    "model.dp_replicate": "above 1 with one process: each replica needs a process",
    "memory_profiler_path": "on a CPU: the memory profiler records CUDA memory",
}

RENDERER = {
    "renderer.name": '"custom": this build loads no renderer class of your own',
    "renderer.thinking_retention": "with the tokenizer's chat template (no named renderer): "
    "retention is a feature of the named renderers",
    "renderer.tool_parser": 'with name = "default": nothing sampled is parsed',
    "renderer.reasoning_parser": 'with name = "default": nothing sampled is parsed',
}

EVAL_PLAIN = "evaluation samples at the temperature and token cap only"

SFT = {
    **MODEL,
    **RENDERER,
    "weight_broadcast": "without [eval] (it feeds only the online evals); "
    '"nccl" and "nixl" (the evals reload the server from weight files)',
    "inference": "any setting inside it when no vLLM server is started (no GPU): the evals "
    "then run in the trainer's process",
    "eval.client": "any setting when no server is started; per-rollout headers and admin URLs "
    "with one",
    "eval.concurrency.initial_inflight": "any: the evals keep a fixed number in flight",
    "eval.concurrency.min_inflight": "other than 1: the evals keep a fixed number in flight",
    "eval.env_server_base_port": "other than 5000 when no eval source starts an environment server",
    "eval.sampling.top_p": f"any: {EVAL_PLAIN}",
    "deployment.type": '"multi_node" with [eval]: its inference nodes come with SLURM, which '
    "this build does not start for sft",
}

RL_TRAINER = {
    **MODEL,
    "weight_broadcast.type": '"nccl" without a CUDA GPU; "nixl" (ModelExpress is not started)',
    "metrics_server": "any: this build serves no Prometheus endpoint (read metrics.jsonl)",
    "enable_router_replay": "true: rollouts carry no MoE routing decisions to replay",
}

EVAL_SAMPLING = {
    f"{table}.{key}": f"any: {EVAL_PLAIN}"
    for table in ("eval.sampling", "eval.source[].sampling")
    for key in ("top_p", "top_k", "min_p", "reasoning_effort", "extra_body")
}
SERVER_ONLY = "a frozen model's server is one engine, addressed at base_url"

ORCHESTRATOR = {
    "weight_broadcast.type": '"nccl" with the in-process sampler; "nixl" (ModelExpress is '
    "not started)",
    "tasks_per_minute": "any: this build does not rate-limit episodes",
    "env_server_base_port": "other than 5000 when no source starts an environment server",
    "inference_metrics_roles": "any: disaggregated (prefill/decode) inference is not in this build",
    "collect_inference_metrics": "false: a server's /metrics is never copied",
    "monitors.prime": "any: this build does not upload to the Prime Intellect platform",
    "model.vlm": "any: this build samples text-only models",
    "model.lora": "any: the orchestrator samples with the full weights the trainer broadcasts",
    "model.client": "any setting: the sampler's address is [sampler] base_url",
    "concurrency.initial_inflight": "any, with the in-process sampler (no KV cache to follow)",
    "concurrency.min_inflight": "other than 1, with the in-process sampler",
    "ckpt.skip_progress": "true: the orchestrator's step is the one the trainer resumed from",
    "pad_to_multiple_of": "a value that does not divide seq_len",
    "train.sampling.extra_body": "any, with the in-process sampler: request extras go to a server",
    "train.source[].curriculum": f"any: curricula are {NOT_BUILT}",
    "eval.source[].ratio": "other than 1: an eval source evaluates its first num_examples",
    **EVAL_SAMPLING,
    "algo.type": f'"hierarchical_grpo": {NOT_BUILT}',
    "algo.filter": f"any: rollout filters of your own are {NOT_BUILT}",
    "algo.teacher.extra_headers_from_state": f"any: {SERVER_ONLY}",
    "algo.teacher.admin_base_url": f"any: {SERVER_ONLY}",
    "algo.sampling.source.extra_headers_from_state": f"any: {SERVER_ONLY}",
    "algo.sampling.source.admin_base_url": f"any: {SERVER_ONLY}",
    **{f"algo.{path}": why for path, why in RENDERER.items()},
    **RENDERER,
}

RL = {
    "slurm.shared_fs": "false: the job runs this Python environment and reads its files from "
    "the run directory, on every node",
    "deployment.type": '"multi_node" without [slurm]: several nodes come from a SLURM allocation',
    "monitors.prime": "any: this build does not upload to the Prime Intellect platform",
    "inference": "any setting inside it when no vLLM server is started (no GPU): the "
    "orchestrator then samples in process",
}

# command -> dotted path -> what is refused, and why
REFUSED: dict[str, dict[str, str]] = {
    "sft": SFT,
    "rl-trainer": RL_TRAINER,
    "orchestrator": ORCHESTRATOR,
    "rl": RL,
}
