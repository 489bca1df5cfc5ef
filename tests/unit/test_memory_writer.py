"""The LLM memory writer with a scripted model: extraction through structured output, chat
recording, dedupe on save, profile merge, and nothing written when extraction fails."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

import graphs.runtime.events
from graphs.memory_writer.attribution import attribute, text_subject
from graphs.memory_writer.extract import MemoryExtraction, extract_and_save, extract_memories
from graphs.runtime.structured import StructuredOutputError
from store import memory
from tests.fakes import ScriptedChatModel


def extraction(**args) -> dict:
    return {"tool_calls": [{"name": "MemoryExtraction", "args": args}]}


TURN = [
    HumanMessage("Hi! I'm Alice."),
    AIMessage("Hello Alice!"),
    HumanMessage("I moved to Munich last week and I'm now vegetarian."),
    AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Munich"}, "id": "w1"}]),
    ToolMessage("sunny", tool_call_id="w1"),
    AIMessage("Welcome to Munich! Try the Viktualienmarkt."),
]


async def test_extract_memories_parses_the_structured_call_and_shows_known_memories():
    model = ScriptedChatModel(
        responses=[
            extraction(
                episodic=[{"text": "The user moved to Munich", "importance": 0.8}],
                semantic=[{"text": "The user is vegetarian", "category": "preference", "importance": 0.9}],
                profile_updates={"city": "Munich"},
            )
        ]
    )
    result = await extract_memories(
        model, TURN, [{"text": "The user lives in Berlin", "kind": "semantic", "category": "fact"}]
    )

    assert isinstance(result, MemoryExtraction)
    assert result.semantic[0].category == "preference" and result.profile_updates == {"city": "Munich"}
    call = model.calls[0]
    assert call.tool_names == ["MemoryExtraction"]
    prompt = call.messages[-1].text
    assert "- [semantic/fact] The user lives in Berlin" in prompt
    assert "User: I moved to Munich" in prompt and "Assistant: Welcome to Munich" in prompt
    assert "Hi! I'm Alice" not in prompt and "sunny" not in prompt  # only the latest turn


async def test_extraction_saves_memories_and_merges_profile(store):
    await memory.save_memory(
        store, "alice", "semantic", "The user eats vegetarian food", category="preference", importance=0.4
    )
    await memory.update_profile(store, "alice", {"name": "Alice", "city": "Berlin"})
    model = ScriptedChatModel(
        responses=[
            extraction(
                episodic=[{"text": "The user moved to Munich last week", "importance": 0.8}],
                semantic=[
                    {"text": "The user eats vegetarian food.", "category": "preference", "importance": 0.9},
                    {"text": "The user lives in Munich", "category": "fact", "importance": 0.9},
                ],
                profile_updates={"city": "Munich"},
            )
        ]
    )

    counts = await extract_and_save(store, "alice", TURN, model, "thread-1")

    assert counts == {"created": 2, "updated": 1, "profile_fields": 1, "dropped": 0}
    assert "The user eats vegetarian food" in model.calls[0].messages[-1].text
    # chat messages are recorded when the turn ends, not by extraction
    assert await store.asearch(memory.namespace("alice", "chat"), limit=10) == []
    semantic = await store.asearch(memory.namespace("alice", "semantic"), limit=10)
    assert len(semantic) == 2
    assert {s.value["source"] for s in semantic} == {"extraction"}
    # memories are about the user (their id when no name is given); the fact saved without a
    # speaker is the user's too: merged, and now says whose it is
    assert [s.value.get("speaker") for s in semantic] == ["alice", "alice"]
    vegetarian = next(s for s in semantic if "vegetarian" in s.value["text"])
    assert vegetarian.value["importance"] == 0.9
    profile = await memory.get_profile(store, "alice")
    assert profile["fields"] == {"name": "Alice", "city": "Munich"}


async def test_nothing_is_written_when_extraction_fails(store):
    failing = ScriptedChatModel(responses=[RuntimeError("model down")])
    with pytest.raises(RuntimeError, match="model down"):
        await extract_and_save(store, "alice", TURN, failing, "t1")
    invalid = ScriptedChatModel(
        responses=[extraction(semantic=[{"text": "The user likes chess", "category": "hobby", "importance": 0.5}])]
    )
    with pytest.raises(Exception, match="category"):
        await extract_and_save(store, "alice", TURN, invalid, "t1")
    assert await store.alist_namespaces(prefix=("memories",)) == []


async def test_a_turn_without_memories_writes_nothing(store):
    model = ScriptedChatModel(responses=[extraction()])  # an empty extraction, made as asked
    counts = await extract_and_save(store, "bob", [HumanMessage("What's 2+2?"), AIMessage("4")], model, None)
    assert counts == {"created": 0, "updated": 0, "profile_fields": 0, "dropped": 0}
    assert await store.alist_namespaces(prefix=("memories", "bob")) == []
    with pytest.raises(ValueError, match="user_id"):
        await extract_and_save(store, "", TURN, model, None)


async def test_prose_instead_of_the_extraction_is_asked_again_then_fails_loudly(store, caplog, monkeypatch):
    """A model that answers in prose is never taken for a turn with nothing to remember."""
    events: list[dict] = []
    monkeypatch.setattr(graphs.runtime.events, "get_stream_writer", lambda: events.append)
    model = ScriptedChatModel(responses=["The user moved to Munich.", "Sure! The user is vegetarian."])
    with pytest.raises(StructuredOutputError, match="MemoryExtraction after 2 attempts"):
        await extract_and_save(store, "bob", TURN, model, None)
    assert len(model.calls) == 2 and "could not be used" in model.calls[1].messages[-1].text
    failed = [e for e in events if e["event"] == "structured_output_failed"]
    assert failed and failed[0]["schema"] == "MemoryExtraction" and failed[0]["attempts"] == 2
    assert "structured call MemoryExtraction failed" in caplog.text
    assert await store.alist_namespaces(prefix=("memories", "bob")) == []


async def test_an_extraction_written_as_json_text_is_saved(store):
    """Small models write the object as (fenced) text, or as a call written out: both are read."""
    payload = {"semantic": [{"text": "The user is vegetarian", "category": "preference"}], "episodic": []}
    model = ScriptedChatModel(
        responses=[
            "No memories here, sorry.",  # prose first: re-asked
            f'```json\n{{"name": "MemoryExtraction", "arguments": {json.dumps(payload)}}}\n```',
        ]
    )
    counts = await extract_and_save(store, "carol", TURN, model, None)
    assert counts["created"] == 1
    found = await memory.recall(store, "carol", "vegetarian", "semantic")
    assert found and found[0]["text"] == "The user is vegetarian"


SISTER = [HumanMessage("My sister Ana is a dentist in Madrid."), AIMessage("Nice! Madrid is lovely.")]


async def profile_fields(store, user_id: str) -> dict:
    return (await memory.get_profile(store, user_id))["fields"]


async def semantic_values(store, user_id: str) -> list[dict]:
    return [item.value for item in await store.asearch(memory.namespace(user_id, "semantic"), limit=20)]


async def test_another_persons_facts_never_become_the_users_profile_fields(store):
    """What a small model answered for this turn: the sister's job, city and name as the user's
    profile fields, and no memory at all. They stay out of the profile; the fact is kept as a
    memory about her, with whom it is about recorded."""
    model = ScriptedChatModel(
        responses=[
            '```json\n{"profile_updates": {"occupation": "dentist", "city": "Madrid", "name": "Ana"}}\n```',
        ]
    )
    counts = await extract_and_save(store, "dana", SISTER, model, "t1", speaker="Dana")

    assert await profile_fields(store, "dana") == {}
    assert counts == {"created": 1, "updated": 0, "profile_fields": 0, "dropped": 0}
    [saved] = await semantic_values(store, "dana")
    assert saved["text"] == 'The user said about their sister: "My sister Ana is a dentist in Madrid."'
    assert saved["subject"] == "sister" and saved["speaker"] == "Dana" and saved["category"] == "relationship"
    found = await memory.recall(store, "dana", "what does my sister do for a living", "semantic")
    assert found and "dentist" in found[0]["text"]


async def test_a_fact_about_someone_else_marked_as_the_users_is_saved_as_about_them(store):
    """What the small model answered with the people-first schema: it named the sister, wrote her
    fact as a memory but marked it `about: "user"`, and filed her city as the user's."""
    answer = {
        "people": ["sister Ana"],
        "semantic": [
            {
                "about": "user",
                "text": "The user's sister Ana is a dentist in Madrid",
                "category": "relationship",
                "importance": 0.6,
            }
        ],
        "episodic": [],
        "profile_updates": {"city": "Madrid"},
    }
    model = ScriptedChatModel(responses=[extraction(**answer)])
    counts = await extract_and_save(store, "hana", SISTER, model, "t1")

    assert await profile_fields(store, "hana") == {}
    assert counts == {
        "created": 1,
        "updated": 0,
        "profile_fields": 0,
        "dropped": 0,
    }  # her memory holds Madrid: no quote
    [saved] = await semantic_values(store, "hana")
    assert saved["text"] == "The user's sister Ana is a dentist in Madrid" and saved["subject"] == "sister Ana"


async def test_memories_say_whom_they_are_about_and_the_profile_keeps_only_the_users_own(store):
    model = ScriptedChatModel(
        responses=[
            extraction(
                people=["sister Ana"],
                semantic=[
                    {"about": "user", "text": "The user lives in Porto", "category": "fact", "importance": 0.8},
                    {
                        "about": "sister Ana",
                        "text": "The user's sister Ana is a dentist in Madrid",
                        "category": "relationship",
                    },
                ],
                episodic=[{"about": "sister Ana", "text": "The user's sister Ana moved to Madrid in May"}],
                # the model also filed the sister's job as the user's
                profile_updates={"city": "Porto", "occupation": "dentist"},
            )
        ]
    )
    turn = [HumanMessage("I live in Porto, and my sister Ana is a dentist in Madrid. She moved there in May.")]
    counts = await extract_and_save(store, "erin", turn, model, "t1")

    assert await profile_fields(store, "erin") == {"city": "Porto"}
    assert counts == {"created": 3, "updated": 0, "profile_fields": 1, "dropped": 0}  # no quote: her memory holds it
    subjects = {v["text"]: v.get("subject") for v in await semantic_values(store, "erin")}
    assert subjects == {"The user lives in Porto": None, "The user's sister Ana is a dentist in Madrid": "sister Ana"}
    [event] = await store.asearch(memory.namespace("erin", "episodic"), limit=5)
    assert event.value["subject"] == "sister Ana" and event.value["speaker"] == "erin"


async def test_a_rephrased_value_is_judged_by_whom_the_extractions_memories_give_it_to(store):
    model = ScriptedChatModel(
        responses=[
            extraction(
                people=["brother"],
                semantic=[
                    {"about": "brother", "text": "The user's brother pulls teeth for a living", "category": "fact"}
                ],
                profile_updates={"occupation": "Dental surgeon", "language": "Portuguese"},
            )
        ]
    )
    turn = [HumanMessage("My brother pulls teeth for a living. I speak Portuguese at home.")]
    counts = await extract_and_save(store, "finn", turn, model, None)
    assert await profile_fields(store, "finn") == {"language": "Portuguese"}
    assert counts == {
        "created": 1,
        "updated": 0,
        "profile_fields": 1,
        "dropped": 1,
    }  # the rephrased job: not in the user's words


async def test_a_memory_about_someone_else_never_merges_with_the_users_own(store):
    await memory.save_memory(store, "gia", "semantic", "Works as a dentist in Madrid", category="fact")
    saved = await memory.save_memory(
        store, "gia", "semantic", "Works as a dentist in Madrid", category="fact", subject="sister Ana"
    )
    assert saved["action"] == "created" and saved["subject"] == "sister Ana"
    again = await memory.save_memory(
        store, "gia", "semantic", "Works as a dentist in Madrid.", category="fact", subject="sister Ana"
    )
    assert again["action"] == "updated" and again["id"] == saved["id"]


def test_the_extraction_schema_asks_who_first_and_every_field():
    """Constrained output writes the required fields in the schema's order: the other people and
    each memory's `about` come before any text, and the memories before the profile."""
    schema = MemoryExtraction.model_json_schema()
    assert schema["required"] == ["people", "semantic", "episodic", "profile_updates"]
    for item in ("SemanticItem", "EpisodicItem"):
        assert schema["$defs"][item]["required"][0] == "about"


@pytest.mark.parametrize(
    ("text", "people", "expected"),
    [
        ("My sister Ana is a dentist in Madrid.", [], {"dentist": "sister", "Madrid": "sister", "Ana": "sister"}),
        ("My sister Ana is a dentist in Madrid.", ["sister Ana"], {"dentist": "sister Ana", "Madrid": "sister Ana"}),
        ("I live in Madrid near my sister Ana.", [], {"Madrid": "user"}),
        ("My sister Ana and I live in Madrid.", [], {"Madrid": "user"}),
        ("I work with my boss in Madrid as a nurse.", [], {"Madrid": "user", "nurse": "user"}),
        ("My sister is a dentist and I am a nurse.", [], {"dentist": "sister", "nurse": "user"}),
        ("My sister, who lives in Madrid, is a dentist.", [], {"Madrid": "sister", "dentist": "sister"}),
        ("I live in Madrid, where my sister works as a dentist.", [], {"Madrid": "user", "dentist": "sister"}),
        ("Dentist is what my sister does.", [], {"Dentist": "sister"}),
        ("I met Tom yesterday. He is a pilot in Oslo.", ["Tom"], {"pilot": "Tom", "Oslo": "Tom"}),
        ("My name is Alice and my dog Biscuit loves the park.", [], {"Alice": None, "Biscuit": None}),
    ],
)
def test_who_the_users_words_give_a_value_to(text, people, expected):
    found = {value: (a.about if (a := attribute(value, text, people)) else None) for value in expected}
    assert found == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The user's sister Ana is a dentist in Madrid", "sister Ana"),
        ("Ana works as a dentist", "sister Ana"),
        ("The user's boss moved to Oslo", "boss"),
        ("The user lives in Porto near their sister", "user"),
        ("The user's favourite colour is teal", None),
        ("The user's dog is called Biscuit", None),
    ],
)
def test_whom_a_memory_text_is_about(text, expected):
    assert text_subject(text, ["sister Ana"]) == expected
