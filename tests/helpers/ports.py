"""A free TCP port on loopback, for the servers the tests start (vLLM, the model server, env
servers, transports, slurmctld)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick; another process may take it before the
    caller binds it, which the tests' servers would report as a failed start)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
