"""Ingest metered by work and bounded per user (server/ingest_jobs.py, tools/quota.py
`charge_chunks`, store/knowledge/ingest.py `ingest_files`), in process on an InMemoryStore."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest
from langgraph.store.memory import InMemoryStore

from server import kb as kb_service
from server.ingest_jobs import IngestBusy, IngestRunner
from store import knowledge
from tools import quota
from tools.identity import ADMIN


@dataclass
class User:
    identity: str
    permissions: list[str] = field(default_factory=list)


def prose(sentences: int) -> bytes:
    return " ".join(f"Sentence {i} tells of the lighthouse keeper's log entry {i}." for i in range(sentences)).encode()


async def test_chunk_budget_refuses_what_does_not_fit_without_counting_it(monkeypatch):
    monkeypatch.setenv("KB_INGEST_QUOTA_CHUNKS", "50")
    who = f"u{time.time_ns()}"
    await quota.charge_chunks(None, who, 30)
    with pytest.raises(quota.QuotaExceeded) as over:
        await quota.charge_chunks(None, who, 30)
    assert over.value.kind == "ingest_chunks" and "20 left" in str(over.value) and over.value.retry_after >= 1
    await quota.charge_chunks(None, who, 20)  # the refused 30 were not counted
    with pytest.raises(quota.QuotaExceeded, match="none are left"):
        await quota.charge_chunks(None, who, 0)  # checked before any work
    with pytest.raises(quota.QuotaExceeded, match="split them"):
        await quota.charge_chunks(None, f"v{time.time_ns()}", 51)
    await quota.charge_chunks(None, None, 10**6)  # not a limited user
    monkeypatch.setenv("KB_INGEST_QUOTA_CHUNKS", "0")
    await quota.charge_chunks(None, who, 10**6)  # 0 = unlimited


async def test_ingest_files_counts_the_chunks_to_embed_before_writing_anything():
    store = InMemoryStore()
    await knowledge.create_kb(store, "log", "")
    seen: list[int] = []

    async def refuse(chunks: int) -> None:
        seen.append(chunks)
        raise quota.QuotaExceeded("ingest_chunks", 1, 60, 1)

    files = [(prose(40), "a.txt", "text"), (prose(5), "b.md", "markdown")]
    with pytest.raises(quota.QuotaExceeded):
        await knowledge.ingest_files(store, "log", files, before_write=refuse)
    assert seen and seen[0] > 1
    assert (await knowledge.get_kb(store, "log"))["chunks"] == 0
    assert await kb_service.list_sources(store, "log") == []

    async def record(chunks: int) -> None:
        seen.append(chunks)

    result = await knowledge.ingest_files(store, "log", files, before_write=record)
    assert result["work"]["chunks"] == seen[-1] == seen[0] == sum(d["chunks"] for d in result["documents"])
    assert [d["status"] for d in result["documents"]] == ["created", "created"]
    again = await knowledge.ingest_files(store, "log", files[:1], before_write=record)
    assert seen[-1] == 0 and again["work"]["chunks"] == 0  # unchanged: nothing to embed
    with pytest.raises(ValueError, match="once per call"):
        await knowledge.ingest_files(store, "log", [files[0], files[0]])


async def test_an_upload_over_the_work_quota_writes_nothing(monkeypatch):
    monkeypatch.setenv("KB_INGEST_QUOTA_CHUNKS", "5")
    store = InMemoryStore()
    alice = User(f"alice{time.time_ns()}")
    await kb_service.create_owned_kb(store, alice, "notes")
    first = await kb_service.ingest_uploads(store, "notes", [("one.txt", prose(30), "text/plain")], user=alice)
    used = first["work"]["chunks"]
    assert 0 < used < 5 and first["work"]["cpu_seconds"] >= 0
    with pytest.raises(quota.QuotaExceeded) as over:
        await kb_service.ingest_uploads(
            store, "notes", [("two.txt", prose(5), "text/plain"), ("three.txt", prose(40), "text/plain")], user=alice
        )
    assert over.value.kind == "ingest_chunks"
    assert [s["source"] for s in await kb_service.list_sources(store, "notes")] == ["one.txt"]
    admin = User("ops", [ADMIN])  # administrators are not limited
    assert (await kb_service.ingest_uploads(store, "notes", [("big.txt", prose(80), "text/plain")], user=admin))[
        "work"
    ]["chunks"] > 5


async def test_one_ingest_per_user_at_a_time_and_a_bounded_server_queue(monkeypatch):
    monkeypatch.setenv("KB_INGEST_WORKERS", "1")
    monkeypatch.setenv("KB_INGEST_QUEUE", "2")
    runner = IngestRunner()
    alice, bob, ops = User("alice"), User("bob"), User("ops", [ADMIN])
    async with runner.slot(alice, "kb", ["a.txt"]):
        with pytest.raises(IngestBusy) as busy:
            async with runner.slot(alice, "kb", ["b.txt"]):
                pass
        assert busy.value.scope == "user" and busy.value.retry_after > 0
        assert [item["sources"] for item in runner.in_progress(alice)] == [["a.txt"]]
        assert runner.in_progress(bob) == []  # nobody sees another user's ingests
        async with runner.slot(bob, "kb2", ["c.txt"]), runner.slot(ops, "kb3", ["d.txt"]):
            assert {item["user"] for item in runner.in_progress(ops)} == {"alice", "bob", "ops"}
            with pytest.raises(IngestBusy) as full:  # 1 running + 2 waiting
                async with runner.slot(ops, "kb3", ["e.txt"]):
                    pass
            assert full.value.scope == "server"
    assert runner.in_progress(ops) == []
    async with runner.slot(alice, "kb", ["b.txt"]):  # free again once the first has ended
        pass
