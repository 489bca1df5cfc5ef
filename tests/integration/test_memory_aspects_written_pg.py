"""The memories the writer saves feed the person/attribute indexes (store/memory/attributes.py)
on the real Postgres store: a memory learnt from chat messages files them under the aspect words
of its text in the index of whom it is about, so a list question reaches a message that never
used the word ("I finally finished the vase I shaped on the wheel!", learnt as "Jo took up
pottery"); a memory about the other speaker (by a name they go by) feeds their index, and their
list question searches the messages of whoever told of them; a memory about someone who never
spoke feeds no index; another user's message ids count for nothing; `rebuild_aspects` keeps all
of it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from store import memory
from store.memory.attributes import aspects_namespace
from store.postgres import store
from tests.integration.test_memory_aspects_pg import shown

pytestmark = pytest.mark.integration

START = datetime(2023, 5, 1, 18, tzinfo=UTC)
JO, SAM = "Jo", "Samuel Okafor"
# Small talk of both speakers, no word of a known aspect in it (store/aspects.py).
SMALL_TALK = [
    (JO, "I want more fun things to do on weekends, honestly."),
    (SAM, "What do you do for fun these days? Anything new?"),
    (JO, "I keep telling myself I need a new hobby."),
    (SAM, "Having something you love doing really helps with stress."),
    (JO, "Free time is so rare with everything going on."),
    (SAM, "You should treat yourself to something relaxing."),
    (JO, "My evenings are quiet, mostly tea and early nights."),
    (SAM, "Sounds cozy, I am jealous!"),
]
VASE = "I finally finished the vase I shaped on the wheel!"  # pottery, without the word
KILN = "Glazed it blue, it came out of the kiln today!"
FINISH_LINE = "Sammy finally crossed the finish line after 26 miles, so proud of him!"  # Sam's marathon


async def record(s, user: str) -> dict[str, str]:
    """Six sessions of small talk; Jo's vase, kiln and finish-line messages in sessions 2, 4 and 5,
    each answered by Sam, who introduces himself as Sammy in session 1. Returns text -> id."""
    ids = {}
    for session in range(1, 7):
        at = START + timedelta(days=7 * session)
        said = [(speaker, f"{text} Week {session} was long.") for speaker, text in SMALL_TALK]
        extra = {2: VASE, 4: KILN, 5: FINISH_LINE}.get(session)
        if extra:
            said[3:3] = [(JO, extra), (SAM, "Wow, tell me more!")]
        if session == 1:
            said.append((SAM, "btw everyone calls me Sammy"))
        for position, (speaker, text) in enumerate(said):
            role = "user" if speaker == JO else "assistant"
            written = await memory.record_chat_message(
                s, user, role, text, f"session-{session}", speaker=speaker, now=at + timedelta(minutes=3 * position)
            )
            ids[text if text in (VASE, KILN, FINISH_LINE) else f"{session}:{position}"] = written["id"]
    return ids


async def listed(s, user: str, query: str) -> set[str]:
    results = await memory.recall(s, user, query, "chat", top_k=10, record_access=False)
    return shown(results)  # a message sent in parts shows its parts


async def index_of(s, user: str, person: str) -> dict:
    item = await s.aget(aspects_namespace(memory.namespace(user, "chat")), person)
    return item.value if item else {}


async def test_a_memory_about_the_user_files_its_turns_under_its_words(pg_schema):
    async with store() as s:
        ids = await record(s, "alice")
        question = "What activities does Jo do?"
        assert ids[VASE] not in await listed(s, "alice", question)
        assert await index_of(s, "alice", JO) == {}  # no message of Jo's names an aspect

        reply = ids["2:4"]  # Sam's answer, in the same turn
        saved = await memory.save_memory(
            s, "alice", "episodic", "Jo took up pottery.", speaker=JO, turn_ids=[ids[VASE], reply]
        )
        assert saved["action"] == "created"
        jo = await index_of(s, "alice", JO)
        assert jo["aspects"]["activity"]["pottery"] == [ids[VASE]]  # Jo's message only, not Sam's answer
        assert "told_by" not in jo and await index_of(s, "alice", SAM) == {}
        assert ids[VASE] in await listed(s, "alice", question)

        # an update of the memory files the turns it adds
        again = await memory.save_memory(s, "alice", "episodic", "Jo took up pottery", speaker=JO, turn_ids=[ids[KILN]])
        assert again["action"] == "updated"
        jo = await index_of(s, "alice", JO)
        assert jo["aspects"]["activity"]["pottery"] == [ids[VASE], ids[KILN]]

        # a memory whose text names no aspect changes nothing
        await memory.save_memory(s, "alice", "semantic", "Jo likes quiet evenings.", turn_ids=[ids["1:6"]])
        assert await index_of(s, "alice", JO) == jo


async def test_a_memory_about_another_speaker_feeds_their_index(pg_schema):
    async with store() as s:
        ids = await record(s, "alice")
        question = "What sports does Sammy do?"
        assert ids[FINISH_LINE] not in await listed(s, "alice", question)

        await memory.save_memory(
            s, "alice", "semantic", "Sammy ran a marathon.", speaker=JO, subject="Sammy", turn_ids=[ids[FINISH_LINE]]
        )
        sam = await index_of(s, "alice", SAM)  # "Sammy": the name he introduced himself with
        assert sam["aspects"]["sport"]["marathon"] == [ids[FINISH_LINE]]
        assert sam["told_by"] == [JO]
        assert await index_of(s, "alice", JO) == {}
        assert ids[FINISH_LINE] in await listed(s, "alice", question)  # Jo's message, found for Sam

        # someone who never spoke in the chat has no index to feed
        await memory.save_memory(
            s, "alice", "semantic", "Ana plays tennis.", speaker=JO, subject="sister Ana", turn_ids=[ids[VASE]]
        )
        found = await s.asearch(aspects_namespace(memory.namespace("alice", "chat")), limit=10)
        assert {item.key for item in found} == {SAM}


async def test_message_ids_of_another_user_count_for_nothing(pg_schema):
    async with store() as s:
        ids = await record(s, "alice")
        bobs = await memory.record_chat_message(s, "bob", "user", "Just chatting.", "t", speaker=JO, now=START)
        await memory.save_memory(s, "alice", "episodic", "Jo took up pottery.", speaker=JO, turn_ids=[bobs["id"]])
        assert await index_of(s, "alice", JO) == {} and await index_of(s, "bob", JO) == {}

        await memory.save_memory(s, "alice", "episodic", "Jo goes kayaking.", turn_ids=[bobs["id"], ids[KILN]])
        jo = await index_of(s, "alice", JO)  # saved without a speaker: the user's messages are whose
        assert jo["aspects"]["activity"]["kayak"] == [ids[KILN]]
        assert bobs["id"] not in str(jo) and await index_of(s, "bob", JO) == {}


async def test_rebuild_keeps_what_the_memories_filed(pg_schema):
    async with store() as s:
        ids = await record(s, "alice")
        await memory.save_memory(s, "alice", "episodic", "Jo took up pottery.", speaker=JO, turn_ids=[ids[VASE]])
        await memory.save_memory(
            s, "alice", "semantic", "Sammy ran a marathon.", speaker=JO, subject="Sammy", turn_ids=[ids[FINISH_LINE]]
        )
        await memory.record_chat_message(s, "alice", "user", "We went camping!", "s7", speaker=JO, now=START)
        live = {person: await index_of(s, "alice", person) for person in (JO, SAM)}
        assert "pottery" in live[JO]["aspects"]["activity"] and "camp" in live[JO]["aspects"]["activity"]

        index_ns = aspects_namespace(memory.namespace("alice", "chat"))
        for person in (JO, SAM):
            await s.adelete(index_ns, person)
        rebuilt = await memory.rebuild_aspects(s, "alice")
        assert rebuilt == {JO: live[JO]["aspects"], SAM: live[SAM]["aspects"]}
        assert {person: await index_of(s, "alice", person) for person in (JO, SAM)} == live  # told_by too
        assert ids[FINISH_LINE] in await listed(s, "alice", "What sports does Sammy do?")
