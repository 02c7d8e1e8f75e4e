"""core/world.py: a process group of one (a trainer alone on its node) listens on loopback,
not on the address the host name resolves to; a setting of the user's stays. Each case in a
fresh process of its own (a process group is made once per process)."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import struct
import subprocess
import sys

GROUP_OF_ONE = """
import json, os
from helpers.listeners import listening
from trainspec.trainers.core.world import init_world
init_world(600)
print(json.dumps({"ifname": os.environ.get("GLOO_SOCKET_IFNAME"),
                  "listening": sorted(listening({os.getpid()}))}))
"""


def group_of_one(**env: str) -> dict:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("GLOO_SOCKET_IFNAME", "MASTER_ADDR", "RANK", "WORLD_SIZE")}  # fmt: skip
    tests = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    done = subprocess.run(
        [sys.executable, "-c", GROUP_OF_ONE],
        env={**clean, **env, "PYTHONPATH": tests}, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_a_group_of_one_uses_the_loopback_interface():
    seen = group_of_one()
    assert seen["ifname"] == "lo"
    assert all(address.startswith("127.") for address in seen["listening"]), seen


def has_ipv4(name: str) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:  # SIOCGIFADDR: the interface's IPv4 address
            fcntl.ioctl(probe.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))
        except OSError:
            return False
    return True


def test_the_users_interface_is_kept():
    """An interface the user names (here the machine's first with an IPv4 address that is not
    loopback) wins."""
    (mine, *_) = [name for _, name in socket.if_nameindex() if name != "lo" and has_ipv4(name)]
    seen = group_of_one(GLOO_SOCKET_IFNAME=mine)
    assert seen["ifname"] == mine
    assert not all(address.startswith("127.") for address in seen["listening"]), seen
