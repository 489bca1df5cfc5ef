"""Ingest over HTTP through a real `langgraph dev`, bounded per user (server/ingest_jobs.py):
metered by the chunks it embeds (KB_INGEST_QUOTA_CHUNKS), refused before anything is written
when over it, and one ingest per user at a time, listed by `GET /api/v1/ingests`."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import AGENT_API_KEYS, API_KEYS, DevServer, server_env

pytestmark = pytest.mark.integration

CHUNK_QUOTA = 60
WORDS = [
    "amber",
    "basalt",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "garnet",
    "harbor",
    "indigo",
    "juniper",
    "kestrel",
    "lagoon",
    "meadow",
]


def prose(sentences: int, seed: int = 0) -> bytes:
    """Distinct sentences of about 60 characters each (so chunks differ from one another)."""
    lines = [
        f"The {WORDS[(i + seed) % len(WORDS)]} report {i} notes {WORDS[(3 * i + seed) % len(WORDS)]} "
        f"near {WORDS[(7 * i + seed) % len(WORDS)]}."
        for i in range(sentences)
    ]
    return " ".join(lines).encode()


@pytest.fixture(scope="module")
def ingest_server(pg_uri, openai_server, tmp_path_factory):
    """`langgraph dev` with small chunks (200 characters) and a work quota of CHUNK_QUOTA chunks."""
    env = server_env(
        openai_server,
        POSTGRES_URI=pg_uri,
        POSTGRES_SCHEMA="it_ingest",
        AGENT_API_KEYS=AGENT_API_KEYS,
        AGENT_ADMIN_USERS="ops",
        KB_CHUNK_SIZE="200",
        KB_CHUNK_OVERLAP="20",
        KB_INGEST_QUOTA_CHUNKS=str(CHUNK_QUOTA),
        KB_INGEST_QUOTA_WINDOW="86400",
        KB_INGEST_WORKERS="1",
    )
    server = DevServer(tmp_path_factory.mktemp("ingest-dev"), env)
    server.start()
    yield server
    server.stop()


def api(server: DevServer, who: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {API_KEYS[who]}"}, timeout=300)


async def upload(client: httpx.AsyncClient, kb: str, name: str, data: bytes) -> httpx.Response:
    return await client.post(f"/api/v1/kb/{kb}/documents", files={"files": (name, data, "text/plain")})


async def test_ingest_is_charged_by_the_chunks_it_embeds_and_refused_whole_over_the_quota(ingest_server):
    async with api(ingest_server, "alice") as alice:
        kb = f"w-{uuid.uuid4().hex[:8]}"
        assert (await alice.post("/api/v1/kb", json={"name": kb})).status_code == 201
        first = await upload(alice, kb, "first.txt", prose(70))  # about 18 chunks
        assert first.status_code == 200, first.text
        body = first.json()
        chunks = body["documents"][0]["chunks"]
        assert 15 <= chunks <= 40 and body["work"]["chunks"] == chunks
        assert body["work"]["entities"] > 0 and body["work"]["cpu_seconds"] > 0
        # the same document again is not embedded again, and costs nothing
        again = await upload(alice, kb, "first.txt", prose(70))
        assert again.status_code == 200 and again.json()["work"]["chunks"] == 0
        assert again.json()["documents"][0]["status"] == "unchanged"
        # more chunks than are left: refused whole, nothing of it written
        refused = await upload(alice, kb, "second.txt", prose(185, seed=5))  # about 48 chunks
        assert refused.status_code == 429, refused.text
        error = refused.json()
        assert error["error"] == "QUOTA_EXCEEDED" and error["details"]["kind"] == "ingest_chunks"
        assert "chunks" in error["message"] and int(refused.headers["retry-after"]) > 0
        sources = (await alice.get(f"/api/v1/kb/{kb}/sources")).json()["items"]
        assert [s["source"] for s in sources] == ["first.txt"]
        assert (await alice.get(f"/api/v1/kb/{kb}")).json()["chunks"] == chunks
        # the refused request was not counted: what is left still fits a smaller document
        fits = await upload(alice, kb, "third.txt", prose(CHUNK_QUOTA - chunks - 5, seed=9))
        assert fits.status_code == 200, fits.text
        assert chunks + fits.json()["work"]["chunks"] <= CHUNK_QUOTA


async def test_one_ingest_per_user_at_a_time_while_other_users_wait_their_turn(ingest_server):
    async with api(ingest_server, "ops") as ops, api(ingest_server, "bob") as bob, api(ingest_server, "alice") as alice:
        big, mine = f"big-{uuid.uuid4().hex[:6]}", f"b-{uuid.uuid4().hex[:6]}"
        assert (await ops.post("/api/v1/kb", json={"name": big})).status_code == 201
        assert (await bob.post("/api/v1/kb", json={"name": mine})).status_code == 201
        # an administrator's large ingest holds the one worker ...
        large = asyncio.create_task(upload(ops, big, "large.txt", prose(1500, seed=2)))
        listed: list[dict] = []
        while not listed:
            listed = (await ops.get("/api/v1/ingests")).json()["items"]
            assert not large.done(), large.result().text
            await asyncio.sleep(0.05)
        # ... so bob's ingest waits its turn, listed for bob alone
        queued = asyncio.create_task(upload(bob, mine, "notes.txt", prose(20, seed=4)))
        mine_listed: list[dict] = []
        while not mine_listed:
            mine_listed = (await bob.get("/api/v1/ingests")).json()["items"]
            assert not queued.done(), queued.result().text
            await asyncio.sleep(0.05)
        assert [item["kb"] for item in mine_listed] == [mine] and "user" not in mine_listed[0]
        assert (await alice.get("/api/v1/ingests")).json()["items"] == []
        everyone = (await ops.get("/api/v1/ingests")).json()["items"]
        assert {item["user"] for item in everyone} >= {"ops", "bob"}
        # a second ingest by bob while his first is in progress is refused, and writes nothing
        second = await upload(bob, mine, "more.txt", prose(10, seed=6))
        assert second.status_code == 429, second.text
        refused = second.json()
        assert refused["error"] == "INGEST_BUSY" and refused["details"]["scope"] == "user"
        assert int(second.headers["retry-after"]) > 0
        assert (await ingest_server_ok(ingest_server)) == 200  # the server answers throughout
        # the work runs in a worker process at the lowest CPU priority, not in the server's
        assert ingest_server.process is not None
        assert 19 in descendants_niceness(ingest_server.process.pid).values()
        done_large, done_queued = await asyncio.gather(large, queued)
        assert done_large.status_code == 200 and done_queued.status_code == 200, done_queued.text
        sources = (await bob.get(f"/api/v1/kb/{mine}/sources")).json()["items"]
        assert [s["source"] for s in sources] == ["notes.txt"]
        assert (await bob.get("/api/v1/ingests")).json()["items"] == []
        # once it is done, bob may ingest again
        assert (await upload(bob, mine, "more.txt", prose(10, seed=6))).status_code == 200


def descendants_niceness(pid: int) -> dict[int, int]:
    """The CPU niceness of every process below `pid` (from /proc)."""
    parents: dict[int, tuple[int, int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = (int(fields[1]), int(fields[16]))  # ppid, nice
    below, frontier = {}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, nice) in parents.items():
            if ppid == parent and child not in below:
                below[child] = nice
                frontier.append(child)
    return below


async def ingest_server_ok(server: DevServer) -> int:
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        return (await client.get("/ok")).status_code
