"""process/loopback_rendezvous.py on real sockets: a store made while it lasts serves on
127.0.0.1 alone (torch's own binds every interface), clients reach it, and leaving it puts
torch's store and the environment back as they were."""

from __future__ import annotations

import os

import torch.distributed as dist
from helpers.listeners import listening
from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend as backend

from trainspec.trainers.process.loopback_rendezvous import (
    SOCKET_VARIABLES,
    loopback_rendezvous,
    loopback_store,
)


def listens_now() -> set[str]:
    return listening({os.getpid()})


def test_a_store_serves_on_loopback_alone_and_its_clients_reach_it():
    before = listens_now()
    plain = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    everywhere = listens_now() - before
    assert any(address.startswith(("0.0.0.0:", ":::")) for address in everywhere), everywhere
    server = loopback_store("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    mine = listens_now() - before - everywhere
    assert mine == {f"127.0.0.1:{server.port}"}, mine
    client = loopback_store("127.0.0.1", server.port, is_master=False)
    client.set("key", "value")
    assert server.get("key") == b"value"
    del plain


def test_leaving_puts_torch_and_the_environment_back(monkeypatch):
    for name in SOCKET_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "ib0")  # the user's: kept
    real = backend.TCPStore
    with loopback_rendezvous():
        assert backend.TCPStore is loopback_store
        assert os.environ["GLOO_SOCKET_IFNAME"] == "lo"
        assert os.environ["NCCL_SOCKET_IFNAME"] == "ib0"
    assert backend.TCPStore is real
    assert "GLOO_SOCKET_IFNAME" not in os.environ and os.environ["NCCL_SOCKET_IFNAME"] == "ib0"
