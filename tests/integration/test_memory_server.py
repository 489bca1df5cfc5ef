"""Memory saved in one conversation is recalled from another through a real `langgraph dev` on
Postgres, even when the model guesses the wrong category (the scripted model plays a small model)."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.conftest import key, tool_results, user

pytestmark = pytest.mark.integration


async def test_a_memory_saved_in_one_thread_is_recalled_in_another_despite_a_wrong_category(dev_server, openai_server):
    admin = dev_server.client()  # may act for a fresh user of this test only
    k = key()
    person = f"user-{k}"
    fact = f"The user's favourite colour is teal ({k})"
    openai_server.script(
        f"{k} remember",
        [{"tool_calls": [{"name": "save_memory", "id": "save", "args": {"text": fact}}]}, "Noted."],
    )
    search = {"query": f"favourite colour {k}", "category": "fact", "top_k": 1}
    openai_server.script(
        f"{k} recall",
        [{"tool_calls": [{"name": "search_semantic_memory", "id": "find", "args": search}]}, "Teal."],
    )
    context = {"user_id": person, "remember": False, "recall_answer_similarity": 0}  # the search path
    first = await admin.threads.create()
    await admin.runs.wait(first["thread_id"], "react", input=user(f"{k} remember my colour"), context=context)
    saved = tool_results(await admin.threads.get_state(first["thread_id"]))["save"]
    assert saved["action"] == "created" and saved["category"] == "other"

    second = await admin.threads.create()
    await admin.runs.wait(second["thread_id"], "react", input=user(f"{k} recall my colour"), context=context)
    found = tool_results(await admin.threads.get_state(second["thread_id"]))["find"]
    assert [r["id"] for r in found["results"]] == [saved["id"]]
    assert found["category"] is None and "'fact'" in found["note"]


def extraction(text: str, category: str) -> dict:
    semantic = [{"text": text, "category": category, "importance": 0.8}]
    return {"content": "", "tool_calls": [{"name": "MemoryExtraction", "args": {"semantic": semantic}}]}


@pytest.mark.not_on_aegra("no delayed runs nor thread status under Aegra")
async def test_quick_turns_all_have_their_facts_stored_and_the_writer_waits_for_the_users_run(
    dev_server, openai_server
):
    from datetime import datetime

    from graphs.runtime.memory_schedule import memory_thread_id

    admin = dev_server.client()
    person = f"user-{key()}"
    first, second, third = key(), key(), key()
    # The conversation's model calls pick `first` (its first message); each turn's extraction
    # is asked with that turn alone, so it picks the turn's own key. The third answer takes a
    # while: the user's run is in progress when the writer is due.
    openai_server.script(
        first,
        [
            "Noted.",
            "Nice.",
            {"content": "Good to know.", "delay": 15},
            extraction("The user lives in Lisbon", "fact"),
        ],
    )
    openai_server.script(second, [extraction("The user's favourite colour is teal", "preference")])
    openai_server.script(third, [extraction("The user works as a nurse", "fact")])
    context = {"user_id": person}
    thread = await admin.threads.create()
    tid = thread["thread_id"]
    writer_thread = memory_thread_id(person, tid)
    await admin.runs.wait(tid, "react", input=user(f"{first} I live in Lisbon."), context=context)
    await admin.runs.wait(tid, "react", input=user(f"{second} My favourite colour is teal."), context=context)
    # the second turn replaced the first one's scheduled writer run (MEMORY_EXTRACTION_DELAY is an hour here)
    assert [r["status"] for r in await admin.runs.list(writer_thread)] == ["pending"]

    def due_now():
        """The writer run as a turn schedules it, due now instead of after the delay."""
        writer_input = {"messages": [], "thread_id": tid, "deferrals": 0}
        return admin.runs.create(
            writer_thread,
            "memory_writer",
            input=writer_input,
            context=context,
            multitask_strategy="rollback",
            after_seconds=0,
        )

    busy_turn = await admin.runs.create(tid, "react", input=user(f"{third} I work as a nurse."), context=context)
    while (await admin.threads.get(tid))["status"] != "busy":
        await asyncio.sleep(0.1)
    yielded = await due_now()
    assert (await admin.runs.join(writer_thread, yielded["run_id"]))["result"] == {"deferred": 1}
    await admin.runs.join(tid, busy_turn["run_id"])
    extracting = await due_now()
    done = await admin.runs.join(writer_thread, extracting["run_id"])
    assert done["result"]["turns"] == 3 and done["result"]["pending"] == 0

    semantic = await admin.store.search_items(["memories", person, "semantic"], limit=10)
    stored = {item["value"]["text"]: item["value"] for item in semantic["items"]}
    assert set(stored) == {
        "The user lives in Lisbon",
        "The user's favourite colour is teal",
        "The user works as a nurse",
    }
    chat = await admin.store.search_items(["memories", person, "chat"], limit=10)
    said = {item["value"]["text"]: item["key"] for item in chat["items"]}
    assert said[f"{first} I live in Lisbon."] in stored["The user lives in Lisbon"]["turn_ids"]
    assert said[f"{third} I work as a nurse."] in stored["The user works as a nurse"]["turn_ids"]

    # the run records: the yielding run ended while the user's run was in progress, and the run
    # that extracted started after it ended
    def at(run: dict, field: str) -> datetime:
        return datetime.fromisoformat(run[field])

    user_run = await admin.runs.get(tid, busy_turn["run_id"])
    yielded_run = await admin.runs.get(writer_thread, yielded["run_id"])
    extracting_run = await admin.runs.get(writer_thread, extracting["run_id"])
    assert at(user_run, "created_at") < at(yielded_run, "updated_at") < at(user_run, "updated_at")
    assert at(extracting_run, "created_at") > at(user_run, "updated_at")
    asked = [str(r["messages"]) for r in openai_server.requests() if "Known memories" in str(r.get("messages"))]
    # one model call per turn, none of them while the user's run was in progress (above)
    assert sorted(k for k in (first, second, third) for text in asked if k in text) == sorted([first, second, third])
