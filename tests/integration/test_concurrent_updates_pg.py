"""Concurrent writers of one derived item keep every update on the real Postgres store: chat
messages recorded at the same moment as memories are saved all reach their speaker's
person/attribute index (store/memory/attributes.py) and the registry of people
(store/memory/write.py); chat-log chunks and documents ingested at once all reach the knowledge
base's indexes and registry of people (store/knowledge/aspects.py, store/knowledge/people.py).
Each such item is read and written under a lock of its own (`Backend.update_items`), on our
store and beside a server's own store (Aegra's)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from store import memory
from store.knowledge import aspects as kb_aspects
from store.knowledge import people as kb_people
from store.knowledge.registry import create_kb, get_kb, refresh_stats
from store.memory import attributes
from store.memory.attributes import aspects_namespace
from store.memory.config import PEOPLE_KEY
from store.postgres import store
from tests.integration.conftest import sql
from tests.integration.test_server_store_backend_pg import server_store

pytestmark = pytest.mark.integration

START = datetime(2023, 5, 1, 18, tzinfo=UTC)
JO, SAM = "Jo", "Sam"
# distinct aspect words (store/aspects.py): each message and memory files its ids under a value of its own
_ACTIVITIES = "pottery painting drawing sketching camping hiking swimming running yoga dancing cooking baking \
gardening knitting sewing crochet photography fishing surfing skiing"
_MEMORIES = "archery golf tennis bowling karaoke birdwatching journaling calligraphy"
_NAMES = "Abel Bruno Cyril Dario Emil Felix Gus Hugo Ivo Jules Kai Leon Milo Nico Otto Pablo Quin Rafe Saul Theo"
ACTIVITIES, MEMORIES, NAMES = _ACTIVITIES.split(), _MEMORIES.split(), _NAMES.split()


def filed(index: dict) -> set[str]:
    """Every message id an index holds."""
    return {key for values in (index.get("aspects") or {}).values() for keys in values.values() for key in keys}


async def test_messages_and_memories_written_at_once_all_reach_the_index(pg_schema):
    async with store() as s:
        # the memories' evidence: Jo's earlier messages, of no aspect of their own
        quiet = [
            (await memory.record_chat_message(s, "alice", "user", f"Week {n} was long.", "t", speaker=JO, now=START))[
                "id"
            ]
            for n in range(len(MEMORIES))
        ]
        at = START + timedelta(days=1)
        messages = [
            memory.record_chat_message(s, "alice", "user", f"I spent the day {word}.", "t", speaker=JO, now=at)
            for word in ACTIVITIES
        ]
        saves = [
            memory.save_memory(s, "alice", "semantic", f"Jo loves {word}.", speaker=JO, turn_ids=[turn])
            for word, turn in zip(MEMORIES, quiet, strict=True)
        ]
        written = await asyncio.gather(*messages, *saves)

        item = await s.aget(aspects_namespace(memory.namespace("alice", "chat")), JO)
        assert item is not None
        assert filed(item.value) == {w["id"] for w in written[: len(ACTIVITIES)]} | set(quiet)


async def test_introductions_written_at_once_all_reach_the_registry_of_people(pg_schema):
    # two stores on pools of their own: two server workers recording the same chat
    async with store() as s, store() as other:
        await memory.record_chat_message(s, "alice", "assistant", "Hello there.", "t", speaker=SAM, now=START)
        await asyncio.gather(
            *(
                memory.record_chat_message(
                    (s, other)[n % 2], "alice", "user", f"btw call me {name}", "t", speaker=JO, now=START
                )
                for n, name in enumerate(NAMES)
            )
        )
        item = await s.aget(memory.namespace("alice", "profile"), PEOPLE_KEY)
        assert item is not None
        assert set(item.value["people"][JO]["introduced"]) == set(NAMES)


async def test_chat_log_chunks_and_documents_ingested_at_once_all_reach_the_knowledge_base(pg_schema):
    async with store() as s:
        await create_kb(s, "logs")
        await asyncio.gather(
            *(
                kb_aspects.learn_chunks(s, "logs", [(f"c{n}", f"Jo: I love {word}.")])
                for n, word in enumerate(ACTIVITIES)
            )
        )
        await asyncio.gather(
            *(kb_people.learn_documents(s, "logs", [f"Jo: hi {name}"]) for name in NAMES),
            *(refresh_stats(s, "logs") for _ in NAMES),  # a recount of the entry keeps its `people` mark
        )

        index = await s.aget(kb_aspects.aspects_namespace("logs"), JO)
        assert index is not None and filed(index.value) == {f"c{n}" for n in range(len(ACTIVITIES))}
        registry = await kb_people.registry(s, "logs")
        assert registry is not None
        assert registry["lines"] == len(NAMES) and registry["speakers"] == {JO: len(NAMES)}
        assert (await get_kb(s, "logs"))["people"] is True


async def test_a_servers_own_store_keeps_every_update_too(pg_uri, monkeypatch):
    # Aegra's store: the updates run on the package's pool beside it, against the same table
    schema = f"srv_{uuid.uuid4().hex[:10]}"
    sql(pg_uri, f"CREATE SCHEMA {schema}")
    monkeypatch.setenv("POSTGRES_URI", pg_uri)
    async with server_store(pg_uri, schema) as s:
        chat = memory.namespace("alice", "chat")
        await asyncio.gather(
            *(attributes.learn_turn(s, chat, JO, f"m{n}", f"I went {word}.") for n, word in enumerate(ACTIVITIES))
        )
        item = await s.aget(aspects_namespace(chat), JO)
        assert item is not None and filed(item.value) == {f"m{n}" for n in range(len(ACTIVITIES))}


async def test_profile_fields_written_at_once_are_all_kept(pg_schema, pg_uri, monkeypatch):
    """The memory writer and the turn's profile tool may update one profile at the same time (two
    workers, two pools); each update merges into what the other wrote. Before, each read the old
    profile and the later write dropped the other's fields."""
    monkeypatch.setenv("MEMORY_TTL_DAYS", "2")
    fields = {f"pet_{n}": f"cat number {n}" for n in range(16)}
    async with store() as s, store() as other:
        await asyncio.gather(
            *(
                memory.update_profile((s, other)[n % 2], "alice", {name: value}, turn_ids=[str(uuid.uuid4())])
                for n, (name, value) in enumerate(fields.items())
            )
        )
        profile = await memory.get_profile(s, "alice")
    assert profile["fields"] == fields
    row = sql(
        pg_uri,
        f"SELECT ttl_minutes, expires_at > NOW() + interval '47 hours', value FROM {pg_schema}.store "
        "WHERE prefix = 'memories.alice.profile' AND key = 'profile'",
    )
    assert [(minutes, later) for minutes, later, _ in row] == [(2880, True)]
    assert sorted(row[0][2]["field_turns"]) == sorted(fields)


async def test_a_description_set_while_documents_are_ingested_keeps_the_figures(pg_schema):
    """`create_kb(exist_ok=True, description=...)` updates the registry entry that every ingest
    updates too (`refresh_stats`): it keeps their document and chunk counts. Before, it wrote back
    the figures it had read."""
    from store import knowledge

    async with store() as s, store() as other:
        await knowledge.create_kb(s, "notes")
        done = asyncio.Event()

        async def keep_describing() -> int:
            takes = 0
            while not done.is_set():
                await knowledge.create_kb(other, "notes", f"team notes, take {takes}", exist_ok=True)
                takes += 1
            return takes

        describing = asyncio.ensure_future(keep_describing())
        for n, word in enumerate(ACTIVITIES[:8]):
            await knowledge.ingest_text(s, "notes", f"Note {n}: the {word} meeting moved.", f"n{n}.txt")
        done.set()
        takes = await describing
        entry = await get_kb(s, "notes")
    assert takes > 8
    assert (entry["documents"], entry["chunks"]) == (8, 8)
    assert entry["description"] == f"team notes, take {takes - 1}"
