"""A stand-in for vLLM's OpenAI-compatible server, for what the real one cannot be made to do on
demand: crash while it starts, never come up, and be stopped while it starts. The tests put it
where `vllm_plan.vllm_command()` is (`[python, stand_in_vllm.py]`), so it is called with the
arguments that follow vLLM's module: `--model M --served-model-name N --host H --port P ...`.

It writes its argv, the environment `rl` (or `sft`) gave it and its pid to $STAND_IN_RECORD,
then behaves as $STAND_IN_MODE says:

* "hang" (default): never answers (sleeps), as a server that does not come up;
* "crash": prints a vLLM-like error and exits 3 before it is ready.

Whole runs against a serving server use the real vLLM (the real-engine tests).
"""

from __future__ import annotations

import json
import os
import sys
import time

RECORDED = ("CUDA_VISIBLE_DEVICES", "VLLM_SERVER_DEV_MODE", "VLLM_LOGGING_LEVEL", "STAND_IN_EXTRA",
            "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")  # fmt: skip


def main() -> int:
    args = sys.argv[1:]
    assert args[0] == "--model", args
    # A variable absent is recorded as null (a CPU server has no CUDA_VISIBLE_DEVICES).
    record = {"argv": args, "env": {k: os.environ.get(k) for k in RECORDED}, "pid": os.getpid()}
    path = os.environ["STAND_IN_RECORD"]
    with open(path + ".part", "w") as out:  # whole when it appears: the tests poll for it
        json.dump(record, out)
    os.replace(path + ".part", path)
    mode = os.environ.get("STAND_IN_MODE", "hang")
    if mode == "crash":
        print("torch.OutOfMemoryError: CUDA out of memory (stand-in)", flush=True)
        return 3
    if mode != "hang":
        print(f"stand-in vLLM: unknown STAND_IN_MODE {mode!r}", file=sys.stderr, flush=True)
        return 2
    time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
