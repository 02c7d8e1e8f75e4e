"""A stand-in for `vllm serve`, for testing how `rl` starts, waits for, feeds and stops the
server of [inference]: it writes its argv and the environment `rl` gave it to
$STAND_IN_RECORD, then behaves as $STAND_IN_MODE says:

* "serve" (default): serves the model on --port under --served-model-name with
  trainspec.trainers.orchestrator.sampling.model_server, the routes `rl` uses on vLLM included
  (/health, /v1/completions with logprobs, /collective_rpc update_weights_from_path,
  /reset_prefix_cache); a builtin: model is built from its config;
* "crash": prints a vLLM-like error and exits 3 before it is ready;
* "hang": never answers.
"""

from __future__ import annotations

import json
import os
import sys
import time


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def main() -> int:
    args = sys.argv[1:]
    assert args[0] == "serve", args
    keys = ("CUDA_VISIBLE_DEVICES", "VLLM_SERVER_DEV_MODE", "VLLM_LOGGING_LEVEL", "STAND_IN_EXTRA")
    record = {"argv": args, "env": {k: os.environ.get(k) for k in keys}, "pid": os.getpid()}
    with open(os.environ["STAND_IN_RECORD"], "w") as out:
        json.dump(record, out)
    mode = os.environ.get("STAND_IN_MODE", "serve")
    if mode == "crash":
        print("torch.OutOfMemoryError: CUDA out of memory (stand-in)", flush=True)
        return 3
    if mode == "hang":
        time.sleep(3600)
        return 0
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from trainspec.trainers.builtin import builtin_model_dir
    from trainspec.trainers.chat.tasks import template_stop_id
    from trainspec.trainers.orchestrator.sampling.local_sampler import LocalSampler
    from trainspec.trainers.orchestrator.sampling.model_server import ModelServer

    model = args[1]
    source = builtin_model_dir(model) if model.startswith("builtin:") else model
    tokenizer = AutoTokenizer.from_pretrained(source)
    lm = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(source))
    sampler = LocalSampler(lm.eval(), tokenizer, template_stop_id(tokenizer), torch.device("cpu"))
    server = ModelServer(sampler, option(args, "--served-model-name"), "127.0.0.1",
                         int(option(args, "--port")))  # fmt: skip
    print(f"serving at {server.base_url}", flush=True)
    server.httpd.serve_forever(0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
