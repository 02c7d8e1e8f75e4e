"""torchrun's rendezvous on one node kept to loopback: nothing it starts listens on an address
another machine can reach.

    with loopback_rendezvous():            # around elastic_launch(settings, ...)(...)
        ...                                # settings: rdzv_endpoint and local_addr on LOOPBACK

torch's elastic agent hosts two TCPStores (the rendezvous's, and the one its workers meet at),
and a TCPStore server binds every interface whatever host it is given: torch has no setting
for it. Given a socket already listening (`master_listen_fd`), it serves on that one instead,
so while the launch runs the agent's stores are made on a socket bound to 127.0.0.1 (the
rendezvous endpoint and the workers' MASTER_ADDR are 127.0.0.1 too). The workers' own sockets
(gloo's, NCCL's bootstrap) follow GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME, set to the loopback
interface unless the environment sets them. Several nodes need the network: their launch is
left as torch makes it.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator

LOOPBACK = "127.0.0.1"
INTERFACE = "lo"
SOCKET_VARIABLES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")


def loopback_store(host_name: str, port: int, world_size=None, is_master=False, **options):
    """torch's TCPStore; its server (is_master) on a socket bound to 127.0.0.1 alone."""
    import torch.distributed as dist

    if not is_master:
        return dist.TCPStore(host_name, port, world_size, is_master, **options)
    server = socket.create_server((LOOPBACK, port), backlog=1024)
    bound = server.getsockname()[1]
    # the store owns the socket from here on (detach: Python will not close it)
    return dist.TCPStore(
        host_name, bound, world_size, True, master_listen_fd=server.detach(), **options
    )


@contextlib.contextmanager
def loopback_rendezvous() -> Iterator[None]:
    """While it lasts, the elastic agent's stores listen on 127.0.0.1 only, and the workers it
    starts use the loopback interface (unless the environment names another)."""
    from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend as backend
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import (
        DynamicRendezvousHandler as Handler,
    )

    def workers_store(self, master_addr: str, master_port: int):
        return loopback_store(master_addr, master_port, is_master=True, multi_tenant=True)

    saved_store, saved_server = backend.TCPStore, Handler._create_tcp_store_server
    added = [name for name in SOCKET_VARIABLES if name not in os.environ]
    backend.TCPStore = loopback_store  # type: ignore[misc,assignment]  # the rendezvous's store
    Handler._create_tcp_store_server = workers_store  # type: ignore[method-assign]
    os.environ.update(dict.fromkeys(added, INTERFACE))
    try:
        yield
    finally:
        backend.TCPStore = saved_store  # type: ignore[misc]
        Handler._create_tcp_store_server = saved_server  # type: ignore[method-assign]
        for name in added:
            os.environ.pop(name, None)
