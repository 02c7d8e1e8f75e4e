"""Which processes run under a command and what they listen on, read from /proc: how the
tests check that nothing a run starts listens beyond loopback.

    seen = watch_listeners(process)          # polled until it exits: every address seen
    assert seen and all(a.startswith(LOOPBACK) for a in seen)
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

LOOPBACK = ("127.", "::1:", "::ffff:127.")  # 127.0.0.0/8 (127.0.1.1 on Debian too), ::1


def descendants(root: int) -> set[int]:
    """`root` and every process below it, vLLM's own session included (by parent pid)."""
    parents: dict[int, int] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        found.update(children)
        frontier += children
    return found


def listening(pids: set[int]) -> set[str]:
    """The addresses the processes `pids` listen on (TCP, IPv4 and IPv6), as "addr:port"."""
    inodes: set[str] = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].split(":")
                found.add(f"{_address(address)}:{int(port, 16)}")
    return found


def _address(hex_address: str) -> str:
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words)


def watch_listeners(process: subprocess.Popen, timeout_s: float) -> set[str]:
    """Every address a process under `process` listened on while it ran (polled), until it
    exits or `timeout_s` passes (then it is killed)."""
    seen: set[str] = set()
    deadline = time.monotonic() + timeout_s
    while process.poll() is None and time.monotonic() < deadline:
        seen |= listening(descendants(process.pid))
        time.sleep(0.2)
    if process.poll() is None:
        process.kill()
    return seen
