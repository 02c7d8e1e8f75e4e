"""What a SLURM job runs: a resolved config `sft` or `rl` wrote when it submitted the job (without
[slurm], so it trains here), read back and started as the command would start it.

    python -m trainspec.trainers.slurm.job sft RUN/configs/sft.json     # the sft command
    python -m trainspec.trainers.slurm.job rl  RUN/configs/rl.json      # the rl command, one node
    python -m trainspec.trainers.slurm.job inference RUN/configs/inference.json   # `inference`
    # multi-node rl, each side on its nodes:
    python -m trainspec.trainers.slurm.job trainer RUN/rl-trainer.json \
        --nodes 2 --procs-per-node 8 --node-rank 0 [--set rollout_transport.host=ADDR]
    python -m trainspec.trainers.slurm.job orchestrator RUN/rl-orchestrator.json \
        [--set rollout_transport.host=ADDR] [--set sampler.base_url=URL --wait-for-server]

`--set dotted.key=value` puts what only the job knows into the config before it is validated:
the addresses of the nodes SLURM gave it. `trainer --nodes` runs torchrun's elastic agent in
this process (as `sft` does for its workers): this node's workers meet the other trainer nodes'
at MASTER_ADDR:MASTER_PORT (c10d); a failed worker or a stop signal is one line, not a
traceback. `--wait-for-server` waits for the inference server at sampler.base_url (GET /health,
up to model.client.wait_for_ready_timeout) before the orchestrator starts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from trainspec.config import ConfigError, validate
from trainspec.kinds import Kind

from ..process.exit import exit_process

KINDS: dict[str, Kind] = {
    "sft": "sft",
    "rl": "rl_run",
    "trainer": "rl",
    "orchestrator": "orchestrator",
    "inference": "inference",
}
MODULE = "trainspec.trainers.slurm.job"


def put(document: dict, dotted: str, value: str) -> None:
    *parents, leaf = dotted.split(".")
    for part in parents:
        document = document.setdefault(part, {})
    document[leaf] = value


def wait_for_server(base_url: str, timeout_s: float) -> bool:
    import httpx

    url = base_url.rstrip("/").removesuffix("/v1") + "/health"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(2)
    sys.stderr.write(f"orchestrator: the inference server at {url} not ready in {timeout_s} s\n")
    return False


def trainer_agent(config, args) -> int:
    """torchrun's agent for this trainer node: its workers run this module on the same config."""
    from torch.distributed.launcher.api import LaunchConfig

    from ..process.workers import launch_workers

    settings = LaunchConfig(
        min_nodes=args.nodes,
        max_nodes=args.nodes,
        nproc_per_node=args.procs_per_node,
        run_id=f"job_{os.environ.get('SLURM_JOB_ID', 'local')}",
        rdzv_backend="c10d",
        rdzv_endpoint=f"{os.environ['MASTER_ADDR']}:{os.environ.get('MASTER_PORT', '29500')}",
        rdzv_configs={"is_host": args.node_rank == 0},
        max_restarts=0,
        monitor_interval=0.5,
    )
    worker = ["-m", MODULE, "trainer", args.config]
    for item in args.set:
        worker += ["--set", item]
    return launch_workers("rl-trainer", settings, worker, config.control)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}")
    parser.add_argument("side", choices=sorted(KINDS))
    parser.add_argument("config")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--nodes", type=int, default=0, help="trainer: nodes of the trainer")
    parser.add_argument("--procs-per-node", type=int, default=1)
    parser.add_argument("--node-rank", type=int, default=0)
    parser.add_argument("--wait-for-server", action="store_true")
    args = parser.parse_args(argv)
    with open(args.config) as handle:
        document = json.load(handle)
    for item in args.set:
        key, _, value = item.partition("=")
        put(document, key, value)
    config: Any
    try:
        config = validate(KINDS[args.side], document).config
    except ConfigError as err:
        sys.stderr.write(f"{args.side}: {args.config} does not validate:\n{err}\n")
        return 1
    if args.side == "sft":
        from ..sft.main import launch

        return launch(config)
    if args.side == "rl":
        from ..rl_run.main import launch

        return launch(config)
    if args.side == "inference":
        from ..inference.main import launch

        return launch(config)
    if args.side == "trainer":
        if args.nodes:
            return trainer_agent(config, args)
        from ..rl.main import launch

        return launch(config)
    timeout = config.model.client.wait_for_ready_timeout
    if args.wait_for_server and not wait_for_server(config.sampler.base_url, timeout):
        return 1
    from ..orchestrator.main import launch

    return launch(config)


if __name__ == "__main__":
    exit_process(main(sys.argv[1:]))
