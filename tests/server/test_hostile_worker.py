"""Issue 22, item 6: linting never blocks the server, and a newer version of a document wins.

Linting ran on the event loop: a 0.9 MB buffer blocked every request for 14-29 s per edit. It
now runs in a worker process (gpulint/server/worker.py); a newer job for the same document
stops the running one (the process is killed: pure-Python work cannot be interrupted
otherwise) and drops the queued ones. The first tests drive the worker itself with jobs that
sleep or die; the others drive the server with a buffer that takes seconds to lint.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Awaitable, Callable

import pytest

from gpulint.server.worker import JobFailed, Superseded, Worker
from tests.server.wire import ADAM, TRAIN, Wire, codes, large_module

JOBS = "tests.server.jobs_for_tests"
BOUND_S = 60.0  # any wait below: far longer than the work needs, far shorter than a job left running
LARGE = large_module(400)  # about 4 s of linting on a 2-core machine: far longer than answering a request


async def _until_exists(path: Path) -> None:
    deadline = time.monotonic() + BOUND_S
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared: the job did not start"
        await asyncio.sleep(0.05)


def _run(scenario: Callable[[Worker], Awaitable[None]], size: int = 2) -> None:
    """The scenario with a worker of `size` children running the test jobs; every child ends after it."""
    async def main() -> None:
        worker = Worker(JOBS, size)
        try:
            await scenario(worker)
        finally:
            worker.stop()

    asyncio.run(main())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_newer_job_for_a_document_stops_the_running_one(tmp_path: Path) -> None:
    async def scenario(worker: Worker) -> None:
        started = tmp_path / "started"
        old = asyncio.ensure_future(worker.run("doc", "mark_and_sleep", str(started), 3 * BOUND_S))
        await _until_exists(started)
        old_pid = int(started.read_text())
        new_pid = await asyncio.wait_for(worker.run("doc", "pid"), BOUND_S)
        with pytest.raises(Superseded):
            await asyncio.wait_for(old, BOUND_S)
        assert new_pid != old_pid and not _alive(old_pid)  # killed, and a fresh worker took the job

    _run(scenario)


def test_queued_jobs_of_a_superseded_document_never_run(tmp_path: Path) -> None:
    async def scenario(worker: Worker) -> None:  # one child: the jobs below wait for it
        started = tmp_path / "started"
        other = asyncio.ensure_future(worker.run("other", "mark_and_sleep", str(started), 1.0))
        await _until_exists(started)
        stale = asyncio.ensure_future(worker.run("doc", "record", str(tmp_path / "stale")))
        await asyncio.sleep(0)
        newest = asyncio.ensure_future(worker.run("doc", "record", str(tmp_path / "newest")))
        assert await asyncio.wait_for(newest, BOUND_S) == str(tmp_path / "newest")
        with pytest.raises(Superseded):
            await stale
        assert not (tmp_path / "stale").exists()  # superseded while queued: never ran
        assert await asyncio.wait_for(other, BOUND_S) == int(started.read_text())  # another document's job

    _run(scenario, size=1)


def test_a_busy_child_does_not_hold_up_another_documents_job(tmp_path: Path) -> None:
    async def scenario(worker: Worker) -> None:
        started = tmp_path / "started"
        busy = asyncio.ensure_future(worker.run("large", "mark_and_sleep", str(started), 3 * BOUND_S))
        await _until_exists(started)
        assert await asyncio.wait_for(worker.run("small", "pid"), BOUND_S) != int(started.read_text())
        assert not busy.done()
        busy.cancel()

    _run(scenario)


def test_a_job_that_fails_or_kills_its_worker_is_reported_and_the_next_one_runs() -> None:
    async def scenario(worker: Worker) -> None:
        with pytest.raises(JobFailed, match="ValueError: a bug in a rule"):
            await asyncio.wait_for(worker.run("doc", "fail"), BOUND_S)
        with pytest.raises(JobFailed, match="the lint worker stopped .*exit code 3"):
            await asyncio.wait_for(worker.run("doc", "die"), BOUND_S)
        assert await asyncio.wait_for(worker.run("doc", "pid"), BOUND_S) != os.getpid()

    _run(scenario)


def test_a_cancelled_wait_stops_its_job_and_frees_the_worker(tmp_path: Path) -> None:
    """A request the editor cancels ($/cancelRequest) must not leave its job running."""
    async def scenario(worker: Worker) -> None:
        started = tmp_path / "started"
        waiting = asyncio.ensure_future(worker.run("doc", "mark_and_sleep", str(started), 3 * BOUND_S))
        await _until_exists(started)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert await asyncio.wait_for(worker.run("other", "pid"), BOUND_S) != int(started.read_text())

    _run(scenario)


def test_requests_are_answered_while_a_large_buffer_is_linted(wire: Wire, tmp_path: Path) -> None:
    wire.initialize(tmp_path)
    small = wire.open(tmp_path / "small.py", TRAIN)
    assert codes(wire.diagnostics(small)) == ["GPU101", "GPU201"]
    large = wire.open(tmp_path / "large.py", LARGE)
    on_finding = {"line": 7, "character": 10}
    hover = wire.request("textDocument/hover", {"textDocument": {"uri": small}, "position": on_finding})
    actions = wire.request("textDocument/codeAction", {"textDocument": {"uri": small},
                                                       "range": {"start": on_finding, "end": on_finding},
                                                       "context": {"diagnostics": []}})
    code_hover = wire.request("textDocument/hover", {"textDocument": {"uri": large},
                                                     "position": {"line": 0, "character": LARGE.index("GPU101")}})
    answers = [wire.response(i, BOUND_S) for i in (hover, actions, code_hover)]
    assert not wire.published(large)  # all three answered while the large buffer was still being linted
    assert "GPU201" in answers[0]["result"]["contents"]["value"]
    assert any("fused=True" in action["title"] for action in answers[1]["result"])
    assert answers[2]["result"]["contents"]["value"].startswith("# dataloader-without-pin-memory (GPU101)")
    # and it does finish: GPU001 and GPU201 in each function (the loader of a dataset passed in is undecided)
    assert len(wire.diagnostics(large, timeout=4 * BOUND_S)["diagnostics"]) == 2 * 400


def test_the_newest_version_of_a_document_wins(wire: Wire, tmp_path: Path) -> None:
    """Keystrokes into a buffer being linted: the lint of the old text stops, only the newest is published."""
    wire.initialize(tmp_path)
    uri = wire.open(tmp_path / "train.py", LARGE)
    for version in range(2, 5):
        wire.change(uri, version, LARGE + "#" * version)
    wire.change(uri, 5, TRAIN + ADAM)
    first = wire.diagnostics(uri, timeout=BOUND_S)
    assert first["version"] == 5 and codes(first) == ["GPU101", "GPU201", "GPU201"]
    wire.settle(1.0)
    assert [p["version"] for p in wire.published(uri)] == [5]  # nothing for the text it replaced
