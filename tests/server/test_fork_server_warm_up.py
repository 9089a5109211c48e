"""The lint worker's fork server warms up after its first fork, not before (server/child.py, issue 25)."""

from __future__ import annotations

import selectors
import socket
import threading
import time
import types
from pathlib import Path

from gpulint.server.child import after_first_fork


def test_the_warm_up_waits_for_the_first_fork_request(tmp_path: Path) -> None:
    calls: list[int] = []
    module = types.SimpleNamespace(selectors=selectors, main=lambda: None)
    assert after_first_fork(lambda: calls.append(1), module)
    assert module.selectors is not selectors and module.selectors.EVENT_READ == selectors.EVENT_READ
    address = str(tmp_path / "fork-server")
    with socket.socket(socket.AF_UNIX) as listener, module.selectors.DefaultSelector() as selector:
        listener.bind(address)
        listener.listen()
        selector.register(listener, selectors.EVENT_READ)
        assert selector.select(0) == [] and calls == []  # idle before any request: no warm-up yet
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(address)
            assert selector.select(5) and calls == []  # the first request is served before warming up
            listener.accept()[0].close()
        assert selector.select(0) == [] and calls == [1]  # then, with nothing waiting: warm up once
        assert selector.select(0) == [] and calls == [1]


def test_a_waiting_request_goes_before_the_warm_up(tmp_path: Path) -> None:
    calls: list[int] = []
    module = types.SimpleNamespace(selectors=selectors, main=lambda: None)
    after_first_fork(lambda: calls.append(1), module)
    address = str(tmp_path / "fork-server")
    with socket.socket(socket.AF_UNIX) as listener, module.selectors.DefaultSelector() as selector:
        listener.bind(address)
        listener.listen()
        selector.register(listener, selectors.EVENT_READ)
        with socket.socket(socket.AF_UNIX) as first, socket.socket(socket.AF_UNIX) as second:
            first.connect(address)
            second.connect(address)
            assert selector.select(5)
            listener.accept()[0].close()
            assert selector.select(0) and calls == []  # the second request is still waiting
            listener.accept()[0].close()
        assert selector.select(0) == [] and calls == [1]


def test_a_loop_without_selectors_is_left_alone() -> None:
    module = types.SimpleNamespace(main=lambda: None)
    assert not after_first_fork(lambda: None, module)
    assert not hasattr(module, "selectors")


def test_the_warm_up_waits_until_the_fork_server_has_been_idle(tmp_path: Path) -> None:
    """With `idle_s`, a request that comes within it is served first; the warm-up follows `idle_s`
    of nothing to do (the first worker's lint does not share the CPU with it)."""
    calls: list[float] = []
    module = types.SimpleNamespace(selectors=selectors, main=lambda: None)
    after_first_fork(lambda: calls.append(time.monotonic()), module, idle_s=0.3)
    address = str(tmp_path / "fork-server")
    with socket.socket(socket.AF_UNIX) as listener, module.selectors.DefaultSelector() as selector:
        listener.bind(address)
        listener.listen()
        selector.register(listener, selectors.EVENT_READ)
        clients = [socket.socket(socket.AF_UNIX) for _ in range(3)]
        try:
            clients[0].connect(address)
            assert selector.select(None)
            listener.accept()[0].close()
            threading.Timer(0.05, clients[1].connect, (address,)).start()
            assert selector.select(None) and calls == []  # came within idle_s: served, no warm-up yet
            listener.accept()[0].close()
            threading.Timer(0.6, clients[2].connect, (address,)).start()
            started = time.monotonic()
            assert selector.select(None)  # idle for 0.3 s: warms up, then waits on
            assert len(calls) == 1 and calls[0] - started >= 0.29
        finally:
            for client in clients:
                client.close()
