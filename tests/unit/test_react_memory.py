"""The react graph records each turn and extracts memories in the background, debounced."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from graphs.react.graph import builder
from graphs.runtime.context import Context
from graphs.runtime.memory_schedule import wait_for_local_extractions
from graphs.runtime.models import register_model_provider
from store import memory
from tests.fakes import ScriptedChatModel


def extraction(text: str) -> dict:
    return {
        "tool_calls": [
            {
                "name": "MemoryExtraction",
                "args": {
                    "episodic": [],
                    "semantic": [{"text": text, "category": "preference", "importance": 0.8}],
                    "profile_updates": {},
                },
            }
        ]
    }


@pytest.fixture
def setup(monkeypatch, store):
    # Long enough that nothing fires on its own during a test; tests flush pending extractions.
    monkeypatch.setenv("MEMORY_EXTRACTION_DELAY", "600")
    graph = builder.compile(checkpointer=InMemorySaver(), store=store)
    slot = {}
    register_model_provider("scripted", lambda name, **kw: slot["model"])
    return graph, store, slot


async def turn(graph, text, user="alice", thread="t1", **context):
    return await graph.ainvoke(
        {"messages": [HumanMessage(text)]},
        {"configurable": {"thread_id": thread}},
        context=Context(model="scripted:x", user_id=user, **{"tools": ["calculator"], **context}),
    )


async def test_turn_is_recorded_and_memories_extracted_after_the_delay(setup):
    graph, store, slot = setup
    slot["model"] = model = ScriptedChatModel(responses=["Noted!", extraction("The user loves green tea")])
    await turn(graph, "I love green tea.")
    chat = await store.asearch(memory.namespace("alice", "chat"), limit=10)
    assert sorted(c.value["text"] for c in chat) == ["I love green tea.", "Noted!"]
    assert await store.asearch(memory.namespace("alice", "semantic")) == []  # not yet: debounced
    await wait_for_local_extractions(now=True)
    saved = await store.asearch(memory.namespace("alice", "semantic"))
    assert [s.value["text"] for s in saved] == ["The user loves green tea"]
    assert len(model.calls) == 2
    assert await store.asearch(memory.namespace("bob", "semantic")) == []


async def test_an_extracted_memory_keeps_the_chat_messages_of_its_turn(setup):
    graph, store, slot = setup
    slot["model"] = ScriptedChatModel(responses=["Noted!", extraction("The user loves green tea")])
    await turn(graph, "I love green tea.")
    await wait_for_local_extractions(now=True)
    chat = {c.key for c in await store.asearch(memory.namespace("alice", "chat"), limit=10)}
    [saved] = await store.asearch(memory.namespace("alice", "semantic"))
    assert len(chat) == 2 and set(saved.value["turn_ids"]) == chat


async def test_a_newer_turn_supersedes_a_pending_extraction_and_its_run_extracts_both_turns(setup):
    graph, store, slot = setup
    slot["model"] = model = ScriptedChatModel(
        responses=["First.", "Second.", extraction("The user lives in Porto"), extraction("The user moved to Lisbon")]
    )
    await turn(graph, "I live in Porto.")
    await turn(graph, "Actually I moved to Lisbon.")
    await wait_for_local_extractions(now=True)
    assert len(model.calls) == 4  # two answers, then one extraction per turn, oldest first
    assert "Porto" in model.calls[2].messages[-1].text and "Lisbon" not in model.calls[2].messages[-1].text
    assert "Lisbon" in model.calls[3].messages[-1].text
    assert model.remaining == 0
    chat = await store.asearch(memory.namespace("alice", "chat"), limit=10)
    assert len(chat) == 4  # every message is still recorded
    saved = {item.value["text"] for item in await store.asearch(memory.namespace("alice", "semantic"), limit=10)}
    assert saved == {"The user lives in Porto", "The user moved to Lisbon"}
    assert await store.asearch(("memory_pending",), limit=10) == []  # nothing left waiting


async def test_remember_off_writes_nothing(setup):
    graph, store, slot = setup
    slot["model"] = ScriptedChatModel(responses=["ok"])
    await turn(graph, "secret", remember=False)
    await wait_for_local_extractions(now=True)
    assert await store.alist_namespaces(prefix=("memories",)) == []


async def test_a_memory_saved_in_one_thread_is_found_from_another_despite_a_wrong_category(setup):
    graph, store, slot = setup
    tools = ["save_memory", "search_semantic_memory"]
    slot["model"] = model = ScriptedChatModel(
        responses=[
            {"tool_calls": [{"name": "save_memory", "args": {"text": "The user's favourite colour is teal"}}]},
            "Saved.",
            {
                "tool_calls": [
                    {
                        "name": "search_semantic_memory",
                        "args": {"query": "favourite colour", "category": "fact", "top_k": 1},
                    }
                ]
            },
            "Teal.",
        ]
    )
    await turn(graph, "My favourite colour is teal, remember it.", thread="a", tools=tools, remember=False)
    # (the check that answers from a close memory without tools is off: this is the search path)
    await turn(
        graph, "What is my favourite colour?", thread="b", tools=tools, remember=False, recall_answer_similarity=0
    )
    searched = model.calls[3].messages[-1]
    assert searched.type == "tool" and "teal" in searched.text
    assert [s.value["category"] for s in await store.asearch(memory.namespace("alice", "semantic"))] == ["other"]


def _asked(call) -> str:
    """The user message a model call was shown (with the notes added to it in the prompt)."""
    return [m for m in call.messages if m.type == "human"][-1].text


async def test_memories_about_the_user_are_shown_with_a_question_in_a_new_conversation(setup):
    graph, store, slot = setup
    await memory.save_memory(store, "alice", "semantic", "The user's dog is called Biscuit.", category="other")
    await memory.save_memory(store, "alice", "semantic", "The user is allergic to peanuts.", category="fact")
    await memory.record_chat_message(store, "alice", "user", "My sister Ana is a dentist in Madrid.", "t0")
    await memory.record_chat_message(store, "alice", "assistant", "Your sister is a dentist, nice.", "t0")
    await memory.update_profile(store, "alice", {"dog_breed": "beagle"})
    await memory.save_memory(store, "bob", "semantic", "The user's dog is called Rex.", category="other")
    slot["model"] = model = ScriptedChatModel(
        responses=[
            {"tool_calls": [{"name": "calculator", "args": {"expression": "2+2"}}]},  # a later call of the turn
            "Your dog is Biscuit.",
            "Your sister is a dentist.",
            "Paris.",
        ]
    )
    # The note as the model sees it when no short check answers first (graphs/runtime/memory_answer.py).
    off = {"remember": False, "recall_answer_similarity": 0}
    await turn(graph, "What is my dog's name?", thread="t1", **off)
    first, second = _asked(model.calls[0]), _asked(model.calls[1])
    assert first.startswith("What is my dog's name?\n\n(Current date")
    assert "What you already know about me" in first and first.endswith("without calling a tool.")
    assert "- The user's dog is called Biscuit." in first and "- dog_breed: beagle" in first
    assert "Rex" not in first  # another user's memory: never
    assert "peanuts" not in first and "dentist" not in first  # unrelated memories stay out
    assert second == first  # the turn's later calls show the same note (a cacheable prompt)
    await turn(graph, "What does my sister do for a living?", thread="t2", **off)
    asked = _asked(model.calls[2])
    assert "- My sister Ana is a dentist in Madrid." in asked and "Your sister is a dentist, nice" not in asked
    await turn(graph, "What is the capital of France?", thread="t3", **off)
    assert "already know about me" not in _asked(model.calls[3])  # nothing close: no note


async def test_recall_into_the_prompt_can_be_turned_off_and_skips_this_conversations_messages(setup):
    graph, store, slot = setup
    await memory.record_chat_message(store, "alice", "user", "My dog is called Biscuit.", "t1")
    slot["model"] = model = ScriptedChatModel(responses=["Biscuit.", "Biscuit."])
    await turn(graph, "What is my dog's name?", thread="t1", remember=False)  # said in this conversation
    assert "already know about me" not in _asked(model.calls[0])
    await memory.save_memory(store, "alice", "semantic", "The user's dog is called Biscuit.")
    await turn(graph, "What is my dog's name?", thread="t2", remember=False, recall_top_k=0)
    assert "already know about me" not in _asked(model.calls[1])


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("Which city do I live in?", "The user lives in Lisbon"),
        ("What do I do for a living?", "The user works as a marine biologist"),
        ("Am I allergic to anything?", "The user is allergic to penicillin"),
    ],
)
async def test_a_question_in_the_first_person_recalls_the_memory_written_about_the_user(store, question, answer):
    """Memories say "The user ..." and questions "I" / "my": compared as written, these answers
    were under the note's similarity floor and the note was empty; turned to the third person
    ("Which city does the user live in?") they are shown, and unrelated messages still get none."""
    from graphs.runtime.memory_recall import about_the_user, recall_for_turn

    space = memory.open(store, "carol")
    for text in (
        "The user lives in Lisbon",
        "The user works as a marine biologist",
        "The user is allergic to penicillin",
        "The user has a cat named Pixel",
    ):
        await space.save("semantic", text, category="fact")
    assert about_the_user("Which city do I live in? It's my question") == (
        "Which city does the user live in? It's the user's question"
    )
    note = (await recall_for_turn(store, "carol", question, top_k=5)).note
    assert f"- {answer}" in note
    for unrelated in ("What is 17 * 23?", "What is the weather in Paris today?"):
        assert (await recall_for_turn(store, "carol", unrelated, top_k=5)).note == ""


async def test_one_sentence_kept_as_an_event_and_a_fact_is_recalled_once(store):
    """The writer keeps a sentence a model lists both as an event and as a fact in both kinds (each
    memory tool searches its own kind); the turn's note shows it once."""
    from graphs.runtime.memory_recall import recall_for_turn

    space = memory.open(store, "dora")
    await space.save("episodic", "The user ran the Berlin half marathon in 1:52")
    await space.save("semantic", "The user ran the Berlin half marathon in 1:52", category="fact")
    recalled = await recall_for_turn(store, "dora", "How did my half marathon go?", top_k=5)
    assert recalled.items == ("The user ran the Berlin half marathon in 1:52",)


def test_the_recalled_items_fit_the_note_budget():
    from graphs.runtime.memory_recall import CHARS_PER_TOKEN, fit_items

    long = "Transect three showed bleaching on a third of the corals near the shore, " * 40
    kept = fit_items(["The user lives in Lisbon", long, "The user has a cat named Pixel"], 50)
    assert kept[0] == "The user lives in Lisbon"
    assert kept[1].endswith("…") and len(kept[1]) < len(long)
    assert sum(len(text) for text in kept) <= 50 * CHARS_PER_TOKEN
    assert len(kept) == 2  # nothing is left for the third
    assert fit_items(["The user lives   in\nLisbon"], 300) == ["The user lives in Lisbon"]
    assert fit_items(["The user lives in Lisbon"], 0) == []


async def test_a_long_message_from_another_conversation_is_cut_to_the_budget(setup):
    graph, store, slot = setup
    report = "My reef survey near Lisbon: " + ", ".join(f"transect {n} showed bleaching" for n in range(200))
    await memory.record_chat_message(store, "alice", "user", report, "t0")
    slot["model"] = model = ScriptedChatModel(responses=["It showed bleaching."] * 3)
    question = "What did my reef survey near Lisbon show?"
    await turn(graph, question, thread="t1", remember=False, recall_max_tokens=8000)
    assert "transect 199 showed bleaching" in _asked(model.calls[0])  # a budget it fits: all of it
    await turn(graph, question, thread="t2", remember=False)  # the default budget, 300 tokens
    cut = _asked(model.calls[1])
    assert "- My reef survey near Lisbon: transect 0 showed bleaching" in cut
    assert "transect 199" not in cut and "…" in cut and len(cut) < len(report) / 3
    await turn(graph, question, thread="t3", remember=False, recall_max_tokens=60)
    assert len(_asked(model.calls[2])) < 600


async def test_a_message_the_user_sent_in_parts_is_recalled_whole(store):
    """The user told of the cat's name in three messages within a minute, in another
    conversation: the note shows the message whole, not the part that matched."""
    from datetime import UTC, datetime, timedelta

    from graphs.runtime.memory_recall import recall_for_turn

    at = datetime(2024, 3, 1, 9, tzinfo=UTC)
    said = ["we got a kitten!!", "her name is Mochi 🍡", "after the rice cake lol"]
    for i, text in enumerate(said):
        await memory.record_chat_message(store, "erin", "user", text, "old", now=at + timedelta(seconds=20 * i))
    await memory.record_chat_message(store, "erin", "user", "work was long today", "old", now=at + timedelta(hours=3))
    recalled = await recall_for_turn(store, "erin", "What is my kitten called?", top_k=5)
    assert " ".join(said) in recalled.items
    assert not any(item in said for item in recalled.items)  # no part on its own
