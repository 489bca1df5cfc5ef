"""Recalled memories show the chat turns they were learnt from: the user's own messages only,
the latest few, read for all results in one batch (InMemoryStore, real local embeddings; the
Postgres path: tests/integration/test_memory_pg.py)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.store.base import GetOp

from graphs.memory_writer.extract import extract_and_save
from store import memory
from tests.fakes import ScriptedChatModel
from tests.unit.test_memory import call_tools, payload, tool_graph


def extraction(**args) -> dict:
    return {"tool_calls": [{"name": "MemoryExtraction", "args": args}]}


def count_get_batches(store, monkeypatch) -> list[int]:
    """Record, per `abatch` call of GetOps, how many it read."""
    batches: list[int] = []
    original = type(store).abatch

    async def abatch(self, ops):
        ops = list(ops)
        if ops and all(isinstance(op, GetOp) for op in ops):
            batches.append(len(ops))
        return await original(self, ops)

    monkeypatch.setattr(type(store), "abatch", abatch)  # the store's class allows no instance attributes
    return batches


async def test_recall_returns_the_turns_a_fact_came_from_in_one_read(store, monkeypatch):
    space = memory.open(store, "ida")
    said = await space.record_chat_message("user", "I moved to Porto last spring, I love it here.", "t1")
    answer = await space.record_chat_message("assistant", "Porto is lovely!", "t1")
    said2 = await space.record_chat_message("user", "My favourite hobby is bouldering.", "t2")
    model = ScriptedChatModel(
        responses=[
            extraction(semantic=[{"text": "The user lives in Porto", "category": "fact"}]),
            extraction(semantic=[{"text": "The user's favourite hobby is bouldering", "category": "preference"}]),
        ]
    )
    first = [HumanMessage("I moved to Porto last spring, I love it here."), AIMessage("Porto is lovely!")]
    await extract_and_save(store, "ida", first, model, "t1", turn_ids=[said["id"], answer["id"]])
    await extract_and_save(
        store, "ida", [HumanMessage("My favourite hobby is bouldering.")], model, "t2", turn_ids=[said2["id"]]
    )
    await space.save("semantic", "The user prefers window seats", category="preference")  # saved by hand

    batches = count_get_batches(store, monkeypatch)
    results = await space.recall("where does the user live and what do they do for fun", "semantic", top_k=5)

    assert batches == [3]  # the three turns of all results in one read
    by_text = {r["text"]: r for r in results}
    porto = by_text["The user lives in Porto"]
    assert [(t["id"], t["role"], t["text"]) for t in porto["turns"]] == [
        (said["id"], "user", "I moved to Porto last spring, I love it here."),
        (answer["id"], "assistant", "Porto is lovely!"),
    ]
    assert porto["turns"][0]["created_at"] == said["created_at"]
    assert [t["text"] for t in by_text["The user's favourite hobby is bouldering"]["turns"]] == [
        "My favourite hobby is bouldering."
    ]
    assert by_text["The user prefers window seats"]["turns"] == []

    bare = await space.recall("where does the user live", "semantic", top_k=5, turns=False)
    assert batches == [3] and all("turns" not in r for r in bare)  # no read when not asked for


async def test_turns_of_another_user_or_deleted_ones_are_never_shown(store):
    mine = memory.open(store, "a.b")
    theirs = memory.open(store, "a%2Eb")  # another user whose label looks alike
    secret = await theirs.record_chat_message("user", "My PIN is 4321.", "x")
    own = await mine.record_chat_message("user", "I play the cello.", "t1")
    gone = await mine.record_chat_message("user", "I also played the violin once.", "t1")
    await mine.save(
        "episodic",
        "The user played the cello at a concert",
        source="extraction",
        turn_ids=[secret["id"], own["id"], gone["id"]],
    )
    await mine.delete(gone["id"])

    [result] = await mine.recall("cello concert", "episodic", top_k=1)

    assert [t["id"] for t in result["turns"]] == [own["id"]]
    assert "4321" not in str(result)


async def test_turns_are_bounded_to_the_latest_and_cut(store):
    space = memory.open(store, "jo")
    long = " ".join(f"On day {i} I ran {i + 3} kilometres before work." for i in range(40))
    ids = [(await space.record_chat_message("user", f"Run number {i}.", "t")).get("id") for i in range(6)]
    ids.append((await space.record_chat_message("user", long, "t"))["id"])
    await space.save("semantic", "The user runs every morning", category="fact", source="extraction", turn_ids=ids)

    [result] = await space.recall("running habit", "semantic", top_k=1)

    assert [t["id"] for t in result["turns"]] == ids[-memory.RECALLED_TURNS :]
    last = result["turns"][-1]
    assert len(last["text"]) == memory.RECALLED_TURN_CHARS and last["truncated"] is True


async def test_profile_shows_the_turns_of_its_fields_and_facts(store):
    space = memory.open(store, "kai")
    said = await space.record_chat_message("user", "I'm a nurse in Lyon.", "t1")
    await space.update_profile({"city": "Lyon", "job": "nurse"}, turn_ids=[said["id"]])
    await space.update_profile({"pet": "cat"})  # set by hand: no turns
    await space.save("semantic", "The user works night shifts", category="fact", turn_ids=[said["id"]])

    profile = await space.get_profile()

    assert set(profile["field_turns"]) == {"city", "job"}
    assert profile["field_turns"]["city"][0]["text"] == "I'm a nurse in Lyon."
    assert profile["facts"]["fact"][0]["turns"][0]["id"] == said["id"]


async def test_the_search_tools_return_the_turns(store):
    space = memory.open(store, "lea")
    said = await space.record_chat_message("user", "We adopted a beagle called Rufus.", "t1")
    await space.save("episodic", "The user adopted a beagle called Rufus", source="extraction", turn_ids=[said["id"]])
    await space.save("semantic", "The user has a beagle", category="relationship", turn_ids=[said["id"]])
    graph = tool_graph(store)

    episodic, semantic = await call_tools(
        graph,
        "lea",
        ("search_episodic_memory", {"query": "adopting a dog"}),
        ("search_semantic_memory", {"query": "pets"}),
    )

    for message in (episodic, semantic):
        [turn] = payload(message)["results"][0]["turns"]
        assert turn["text"] == "We adopted a beagle called Rufus." and turn["role"] == "user"
    # another user's search finds nothing of lea's
    [other] = await call_tools(graph, "max", ("search_episodic_memory", {"query": "adopting a dog"}))
    assert payload(other)["count"] == 0
