"""store/recovery.py and server/run_recovery.py: a run that lost Postgres is called again once it
answers, within its bounds; the Aegra internals the production stack wraps are checked, and a
version without them is refused by name."""

from __future__ import annotations

import sys
import textwrap

import pytest

from server import run_recovery
from store import recovery
from store.pool import DatabaseUnavailable


@pytest.fixture
def postgres(monkeypatch):
    """Postgres (a name only) answering after each wait unless `back` is False; the waits made."""
    state: dict = {"back": True, "waits": []}

    async def wait_for_postgres(uri: str, timeout: float) -> float | None:
        state["waits"].append((uri, timeout))
        return 0.2 if state["back"] else None

    monkeypatch.setattr(recovery, "wait_for_postgres", wait_for_postgres)
    return state


def attempts(*outcomes):
    """An attempt that raises or returns `outcomes` in turn, and the calls made."""
    calls: list[int] = []

    async def attempt():
        calls.append(1)
        outcome = outcomes[len(calls) - 1]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return attempt, calls


async def test_a_run_that_lost_postgres_is_called_again_once_it_answers(postgres):
    resumed: list[int] = []

    async def before_resume() -> None:
        resumed.append(1)

    attempt, calls = attempts(DatabaseUnavailable(), "done")
    result = await recovery.resume_after_outages(attempt, uri="pg://x", wait=5, retries=2, before_resume=before_resume)
    assert result == "done" and len(calls) == 2 and len(resumed) == 1
    assert postgres["waits"] == [("pg://x", 5)]


async def test_other_errors_and_spent_bounds_raise_as_they_were(postgres):
    attempt, calls = attempts(ValueError("bad input"))
    with pytest.raises(ValueError):
        await recovery.resume_after_outages(attempt, uri="pg://x", wait=5, retries=2)
    assert len(calls) == 1 and postgres["waits"] == []

    attempt, calls = attempts(*[DatabaseUnavailable()] * 3)
    with pytest.raises(DatabaseUnavailable):
        await recovery.resume_after_outages(attempt, uri="pg://x", wait=5, retries=2)
    assert len(calls) == 3 and len(postgres["waits"]) == 2

    attempt, calls = attempts(recovery.gave_up(DatabaseUnavailable()))  # a node already waited it out
    with pytest.raises(DatabaseUnavailable):
        await recovery.resume_after_outages(attempt, uri="pg://x", wait=5, retries=2)
    assert len(calls) == 1 and len(postgres["waits"]) == 2

    postgres["back"] = False
    attempt, calls = attempts(DatabaseUnavailable(), "never")
    with pytest.raises(DatabaseUnavailable):
        await recovery.resume_after_outages(attempt, uri="pg://x", wait=5, retries=2)
    assert len(calls) == 1 and len(postgres["waits"]) == 3

    attempt, calls = attempts(DatabaseUnavailable())
    with pytest.raises(DatabaseUnavailable):
        await recovery.resume_after_outages(attempt, uri="pg://x", wait=0, retries=2)  # DATABASE_RECOVERY_WAIT=0
    assert len(calls) == 1 and len(postgres["waits"]) == 3


EXECUTOR = """
_lease_loss_cancellations: set[str] = set()


async def start_run(run_id, *, user_id):
    return True


async def finalize_run(run_id, thread_id, *, user_id, status, thread_status, output=None, error=None):
    return True


async def _stream_graph(job):
    return None


async def execute_run(job):
    if not await start_run(job.run_id, user_id=job.user):
        return
    {call}
    await finalize_run(job.run_id, job.thread_id, user_id=job.user, status="success", thread_status="idle")
    _lease_loss_cancellations.discard(job.run_id)
"""
WORKER = """
import os
import socket


class WorkerExecutor:
    def __init__(self):
        self._instance_id = f"{socket.gethostname()}-{os.getpid()}"

    def name(self, idx):
        return f"{self._instance_id}-worker-{idx}"
"""
ORM = """
class Run:
    run_id = status = claimed_by = lease_expires_at = updated_at = None


def _get_session_maker():
    return None
"""


def fake_aegra(root, call: str) -> None:
    """An `aegra_api` package under `root` with the pieces server/run_recovery.py wraps, its
    `execute_run` making `call` where Aegra 0.11 calls `_stream_graph`."""
    files = {
        "aegra_api/__init__.py": "",
        "aegra_api/services/__init__.py": "",
        "aegra_api/services/run_executor.py": EXECUTOR.replace("{call}", call),
        "aegra_api/services/worker_executor.py": WORKER,
        "aegra_api/core/__init__.py": "",
        "aegra_api/core/orm.py": ORM,
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


@pytest.fixture
def aegra_at(tmp_path, monkeypatch):
    def load(call: str):
        for name in [m for m in sys.modules if m == "aegra_api" or m.startswith("aegra_api.")]:
            monkeypatch.delitem(sys.modules, name)
        folder = tmp_path / call.replace(" ", "_").replace("(", "").replace(")", "")
        fake_aegra(folder, call)
        monkeypatch.syspath_prepend(str(folder))

    return load


def test_aegras_internals_are_checked_and_a_version_without_them_is_refused(aegra_at):
    aegra_at("await _stream_graph(job)")
    assert run_recovery.check_aegra_hooks() == []
    aegra_at("await stream_graph_v2(job)")  # a version that runs graphs another way
    missing = run_recovery.check_aegra_hooks()
    assert missing == ["aegra_api.services.run_executor.execute_run calling 'await _stream_graph(job)'"]
    with pytest.raises(run_recovery.ServerLibraryChanged, match="_stream_graph") as refused:
        run_recovery.install_aegra_recovery()
    assert "DATABASE_RECOVERY_WAIT=0" in str(refused.value)


async def test_the_servers_own_503_database_unavailable_answer_is_an_outage():
    """A graph calling the server's API in-process (memory scheduling, the thread-owner check)
    gets Postgres' outage as an HTTP error: it is waited out like a lost connection."""
    import httpx
    from langgraph_sdk.errors import APIStatusError

    async def sdk_error(status: int, code: str) -> Exception:
        body = {"error": code, "message": "...", "details": {}}
        response = httpx.Response(status, json=body, request=httpx.Request("GET", "http://server/threads/t"))
        return APIStatusError("...", response=response, body=body)

    assert recovery.outage_to_wait_out(await sdk_error(503, "DATABASE_UNAVAILABLE"))
    assert not recovery.outage_to_wait_out(await sdk_error(503, "QUEUE_UNAVAILABLE"))
    assert not recovery.outage_to_wait_out(await sdk_error(500, "DATABASE_UNAVAILABLE"))
