"""List questions over a chat history on the real Postgres store: recording a turn folds it into
its speaker's person/attribute index (store/aspects.py), which links each value to the ids of the
turns that said it; a list question naming a person gets the items said in four sessions into
its first ten results, where the first stage alone ranks small talk about the topic above them;
one user's index never serves another user; `rebuild_aspects` builds the same index from the
stored turns. A knowledge base of the same chat log (a document per turn) keeps an index per
speaker of its lines, serves the list question from it likewise (the same after the gathered signals pass as data), and
loses it when deleted."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from store import knowledge, memory
from store.knowledge.aspects import aspects_namespace as kb_aspects_namespace
from store.memory.attributes import aspects_namespace
from store.postgres import store

pytestmark = pytest.mark.integration

START = datetime(2023, 5, 1, 18, tzinfo=UTC)
# Jo's hobbies, each said once, in four sessions; around them both speakers talk about hobbies
# in general, which is what a question worded "hobbies" is close to.
HOBBY_TURNS = {
    1: "Jo: I just signed up for a pottery class yesterday, it calms me down.",
    2: "Jo: We went camping with the whole family two weekends ago.",
    3: "Jo: I'm off to go swimming with the kids now!",
    5: "Jo: I painted a sunset over the lake last night.",
}
SMALL_TALK = [
    "Jo: Hobbies are so important for staying sane, honestly.",
    "Sam: What do you do for fun these days? Any new hobbies?",
    "Sam: My hobbies keep me going when work is stressful.",
    "Jo: I keep telling myself I need more time for my hobbies.",
    "Sam: Having a hobby you love really helps with stress.",
    "Jo: It's hard to find time for fun with the kids around.",
]


def shown_parts(result: dict, field: str = "id") -> list[str]:
    """The parts of the message sent in parts a result stands for (store/parts.py)."""
    return [part[field] for part in result.get("parts", [])]


def shown(results: list[dict]) -> set[str]:
    """The messages recall results show: their own and their parts."""
    return {key for r in results for key in [r["id"], *shown_parts(r)]}


def session_turns() -> list[tuple[int, datetime, str]]:
    """(session, time, "Name: words") of six sessions: small talk about hobbies in each (no two
    texts alike), Jo's hobby turns in four."""
    turns = []
    for session in range(1, 7):
        at = START + timedelta(days=7 * session)
        texts = [f"{text} Week {session} was long." for text in SMALL_TALK]
        if session in HOBBY_TURNS:
            texts.insert(3, HOBBY_TURNS[session])
        # three minutes apart: each its own message, none sent in parts (store/parts.py)
        turns += [(session, at + timedelta(minutes=3 * position), text) for position, text in enumerate(texts)]
    return turns


async def record_sessions(s, user: str) -> dict[int, str]:
    """Six sessions: small talk about hobbies in each, Jo's hobby turns in four; returns session ->
    the id of its hobby turn."""
    ids = {}
    for session, at, text in session_turns():
        speaker = text.split(":", 1)[0]
        role = "user" if speaker == "Jo" else "assistant"
        written = await memory.record_chat_message(s, user, role, text, f"session-{session}", speaker=speaker, now=at)
        if text == HOBBY_TURNS.get(session):
            ids[session] = written["id"]
    return ids


async def test_a_list_question_gets_the_items_of_four_sessions_into_its_first_ten(pg_schema, monkeypatch):
    async with store() as s:
        ids = await record_sessions(s, "alice")
        query = "What are Jo's hobbies?"
        monkeypatch.setenv("MEMORY_LIST_INTERLEAVE", "0")
        first_stage = await memory.recall(s, "alice", query, "chat", top_k=10, record_access=False)
        monkeypatch.setenv("MEMORY_LIST_INTERLEAVE", "1")
        listed = await memory.recall(s, "alice", query, "chat", top_k=10, record_access=False)
        assert set(ids.values()) <= shown(listed)
        assert not set(ids.values()) <= shown(first_stage)  # the index is what brings them
        assert [r["score"] for r in listed] == sorted((r["score"] for r in listed), reverse=True)
        one_thing = await memory.recall(
            s, "alice", "What is Jo's favourite hobby?", "chat", top_k=10, record_access=False
        )
        monkeypatch.setenv("MEMORY_LIST_INTERLEAVE", "0")
        plain = await memory.recall(s, "alice", "What is Jo's favourite hobby?", "chat", top_k=10, record_access=False)
        assert [r["id"] for r in one_thing] == [r["id"] for r in plain]  # not a list: first stage only


async def test_the_index_links_each_value_to_its_turns_and_serves_its_own_user_only(pg_schema, monkeypatch):
    async with store() as s:
        ids = await record_sessions(s, "alice")
        bob_turn = await memory.record_chat_message(
            s, "bob", "user", "Jo: I joined a kickboxing gym and went surfing.", "t", speaker="Jo", now=START
        )
        index_ns = aspects_namespace(memory.namespace("alice", "chat"))
        jo = await s.aget(index_ns, "Jo")
        assert jo is not None
        activities = jo.value["aspects"]["activity"]
        assert activities["pottery"] == [ids[1]] and activities["camp"] == [ids[2]]
        assert jo.value["aspects"]["sport"]["swim"] == [ids[3]]
        assert bob_turn["id"] not in str(jo.value)  # bob's Jo is indexed under bob
        assert "surf" not in str(jo.value)
        sam = await s.aget(index_ns, "Sam")
        assert sam is None or not set(ids.values()) & set(str(sam.value).split("'"))

        results = await memory.recall(s, "alice", "What sports does Jo do?", "chat", top_k=10, record_access=False)
        assert bob_turn["id"] not in shown(results)
        assert ids[3] in shown(results)
        bobs = await memory.recall(s, "bob", "What sports does Jo do?", "chat", top_k=10, record_access=False)
        assert {r["id"] for r in bobs} == {bob_turn["id"]}

        rebuilt = await memory.rebuild_aspects(s, "alice")
        assert rebuilt["Jo"] == jo.value["aspects"]
        await memory.forget_user(s, "alice")
        assert await s.aget(index_ns, "Jo") is None


async def test_a_knowledge_base_of_the_chat_serves_the_list_question_from_its_index(pg_schema, monkeypatch):
    async with store() as s:
        await knowledge.create_kb(s, "chatlog", "a chat log")
        turns = session_turns()
        documents = [
            {"text": text, "source": f"turn:{number}", "title": f"turn {number}", "date": at}
            for number, (_, at, text) in enumerate(turns)
        ]
        await knowledge.ingest_texts(s, "chatlog", documents, chunk_size=2000, chunk_overlap=0)
        wanted = {f"turn:{number}" for number, (_, _, text) in enumerate(turns) if text in HOBBY_TURNS.values()}
        query = "What are Jo's hobbies?"

        async def sources() -> set[str]:
            found = await knowledge.retrieve(s, "chatlog", query, strategy="hybrid", top_k=10)
            return {source for r in found["retrieval_results"] for source in [r["source"], *shown_parts(r, "source")]}

        listed = await sources()
        monkeypatch.setenv("KB_LIST_INTERLEAVE", "0")
        first_stage = await sources()
        assert wanted <= listed and not wanted <= first_stage

        monkeypatch.setenv("KB_LIST_INTERLEAVE", "1")
        kb = await knowledge.open(s, "chatlog")
        gathered = await kb.gather(query, top_k=10)
        assert {hit.value["source"] for hit in gathered.listed} >= wanted
        passed = knowledge.Gathered.from_data(json.loads(json.dumps(gathered.as_data())))  # as the router sends it
        assert knowledge.rank(passed, "hybrid") == knowledge.rank(gathered, "hybrid")

        index_ns = kb_aspects_namespace("chatlog")
        jo = await s.aget(index_ns, "Jo")
        assert jo is not None and "pottery" in jo.value["aspects"]["activity"]
        await knowledge.delete_kb(s, "chatlog")
        assert await s.aget(index_ns, "Jo") is None
