"""server/dev_persistence.py against the installed `langgraph_runtime_inmem`: fails when the
runtime's records, counter or file writes change shape (the module's reach-in)."""

from __future__ import annotations

import importlib
import pickle
import sys
import uuid
from pathlib import Path

import pytest

from server import dev_persistence
from server.dev_persistence import DurableWritesMiddleware, durable_attempts, is_record_write


@pytest.fixture
def runtime(tmp_path, monkeypatch):
    """The in-memory runtime's database module with a fresh counter and store, in a temporary folder."""
    database = importlib.import_module(dev_persistence.RUNTIME)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".langgraph_api").mkdir()
    monkeypatch.setattr(database, "GLOBAL_RETRY_COUNTER", database.InMemoryRetryCounter())
    monkeypatch.setattr(database, "GLOBAL_STORE", database.GlobalStore(filename=database.OPS_FILENAME))
    return database


def test_the_runtime_offers_what_the_module_uses(runtime):
    counter, store = runtime.GLOBAL_RETRY_COUNTER, runtime.GLOBAL_STORE
    for persistent in (counter._counters, store):
        assert callable(persistent.sync) and callable(persistent.load) and isinstance(persistent.filename, str)
    assert callable(counter.increment)
    assert dev_persistence._runtime() is sys.modules[dev_persistence.RUNTIME]


async def test_an_attempt_is_on_disk_before_the_run_and_read_back_at_the_next_start(runtime):
    assert durable_attempts()
    run_id = uuid.uuid4()
    assert await runtime.GLOBAL_RETRY_COUNTER.increment(run_id) == 1
    on_disk = pickle.loads(Path(runtime.RETRY_COUNTER_FILENAME).read_bytes())
    assert on_disk[run_id] == 1
    # The next process: a new counter, empty as the runtime leaves it, reads the counts back.
    runtime.GLOBAL_RETRY_COUNTER = runtime.InMemoryRetryCounter()
    assert not runtime.GLOBAL_RETRY_COUNTER._counters
    assert durable_attempts()
    assert await runtime.GLOBAL_RETRY_COUNTER.increment(run_id) == 2
    assert durable_attempts() and await runtime.GLOBAL_RETRY_COUNTER.increment(run_id) == 3  # wrapped once


async def test_a_successful_record_write_is_on_disk_before_its_response(runtime):
    seen: list[bool] = []

    async def app(scope, receive, send):
        runtime.GLOBAL_STORE["threads"].append({"thread_id": scope["path"], "metadata": {"topic": "patched"}})
        await send({"type": "http.response.start", "status": scope["status"], "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def send(message):
        if message["type"] == "http.response.start":
            path = Path(runtime.OPS_FILENAME)
            seen.append(path.exists() and "/threads/t1" in str(pickle.loads(path.read_bytes())["threads"]))

    middleware = DurableWritesMiddleware(app)
    await middleware({"type": "http", "method": "PATCH", "path": "/threads/t1", "status": 200}, None, send)
    assert seen == [True]
    Path(runtime.OPS_FILENAME).unlink()
    await middleware({"type": "http", "method": "PATCH", "path": "/threads/t2", "status": 404}, None, send)
    assert seen == [True, False]  # a refused write is not worth a write to disk


@pytest.mark.parametrize(
    ("method", "path", "write"),
    [
        ("PATCH", "/threads/abc", True),
        ("POST", "/threads", True),
        ("POST", "/threads/abc/runs/stream", True),
        ("DELETE", "/assistants/x", True),
        ("POST", "/runs/wait", True),
        ("POST", "/threads/search", False),
        ("POST", "/threads/abc/history", False),
        ("POST", "/assistants/count", False),
        ("GET", "/threads/abc", False),
        ("PUT", "/store/items", False),
        ("POST", "/api/v1/kb", False),
    ],
)
def test_which_requests_write_a_record(method, path, write):
    assert is_record_write(method, path) is write


def test_a_failed_periodic_write_does_not_end_the_runtimes_flush_thread(runtime, monkeypatch):
    store = runtime.GLOBAL_STORE

    def broken() -> None:
        raise RuntimeError("dictionary changed size during iteration")

    monkeypatch.setattr(store, "sync", broken)
    assert durable_attempts()
    store.sync()  # the flush loop calls this; an exception there would end its thread for good
    assert store._durable
