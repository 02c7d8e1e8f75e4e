"""New policy weights into a running vLLM server, through vLLM's own routes (served in its dev
mode, which `rl` and `sft` switch on for the server they start, bound to loopback):

    reload_weights(client, "http://127.0.0.1:8000", Path("broadcasts/step_3"))   # from files
    join_weight_transfer(client, root, init_info)           # nccl: once, the trainer waiting
    receive_weights(client, root, "step_3", update_info)     # nccl: what the trainer sends now

1. `POST /pause?mode=wait`: no new request is scheduled, the ones in flight finish, so no
   completion mixes two policies;
2. the weights: from a directory, `POST /collective_rpc {"method": "reload_weights", "kwargs":
   {"weights_path": <dir>}}` (each worker reloads it in place with vLLM's model loader); over
   NCCL (wire/broadcast_nccl.py), `POST /start_weight_update`, `/update_weights` (the names,
   dtypes and shapes the trainer wrote; it returns once the workers have received the
   trainer's broadcast) and `/finish_weight_update`;
3. `POST /reset_prefix_cache`: cached KV of the old weights is stale;
4. `POST /update_weight_version {"new_version": "step_3"}`, then `POST /resume`;
5. `GET /weight_info` must answer that version: a server that took the request but serves
   something else stops the run.

A load the server refuses (step 2) leaves it paused, so a half-loaded policy never serves;
the error names the step, and the run stops there (it resumes from its last checkpoint).
`client` is the sampler's (openai_client.py): its `post` and `get` retry a server that is
briefly unreachable and turn every other failure into a SetupError.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ...errors import RunError, SetupError

RPC_PATH = "/collective_rpc"  # vLLM's dev-mode route to a method of every worker
FIELD = "sampler.reload_path"


class JsonClient(Protocol):
    def post(self, url: str, body: dict, *, reload: bool = False) -> dict: ...

    def get(self, url: str) -> dict: ...


def reload_weights(client: JsonClient, root: str, weights_dir: Path) -> str:
    """Load `weights_dir` into the vLLM server at `root` (no /v1); the weight version it then
    serves (the directory's name, e.g. "step_3")."""
    body = {"method": "reload_weights", "kwargs": {"weights_path": str(weights_dir)}}
    return update_served(
        client, root, weights_dir.name, f"({weights_dir})",
        lambda: client.post(f"{root}{RPC_PATH}", body, reload=True),
    )  # fmt: skip


def join_weight_transfer(client: JsonClient, root: str, init_info: dict) -> None:
    """Have the server's workers join the trainer's NCCL group (the trainer waits in it)."""
    try:
        client.post(f"{root}/init_weight_transfer_engine", {"init_info": init_info}, reload=True)
    except SetupError as err:
        raise SetupError(
            "weight_broadcast",
            f"the vLLM server at {root} could not join the trainer's NCCL group: {err.problem}",
            'start the server with --weight-transfer-config \'{"backend": "nccl"}\' on GPUs '
            "other than the trainer's, with weight_broadcast.host reachable from them (rl "
            "does both)",
        ) from None


def receive_weights(client: JsonClient, root: str, version: str, update_info: dict) -> str:
    """Have the server receive the weights the trainer is broadcasting as `version`."""

    def load() -> None:
        client.post(f"{root}/start_weight_update", {}, reload=True)
        client.post(f"{root}/update_weights", {"update_info": update_info}, reload=True)
        client.post(f"{root}/finish_weight_update", {}, reload=True)

    return update_served(client, root, version, "(over NCCL)", load)


def update_served(
    client: JsonClient, root: str, version: str, where: str, load: Callable[[], object]
) -> str:
    """Steps 1 to 5 of the module's docstring around `load`; the version served."""
    client.post(f"{root}/pause?mode=wait", {}, reload=True)
    try:
        load()
    except SetupError as err:
        raise RunError(
            FIELD,
            f"vLLM could not load the weights of {version} {where}: {err.problem}; the "
            "server stays paused, so no partly loaded policy samples",
            "see the server's log (<run dir>/logs/inference.log) for why; the run resumes from "
            "its last checkpoint once that is fixed",
        ) from None
    client.post(f"{root}/reset_prefix_cache", {}, reload=True)
    client.post(f"{root}/update_weight_version", {"new_version": version}, reload=True)
    client.post(f"{root}/resume", {}, reload=True)
    served = client.get(f"{root}/weight_info").get("weight_version")
    if served != version:
        raise RunError(
            FIELD,
            f"the vLLM server at {root} was sent the weights of {version} but serves weight "
            f"version {served!r}",
            "check that no other process updates this server's weights",
        )
    return version
