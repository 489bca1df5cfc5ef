"""Memory saved in one conversation is recalled from another through a real `langgraph dev` on
Postgres, even when the model guesses the wrong category (the scripted model plays a small model)."""

from __future__ import annotations

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
    context = {"user_id": person, "remember": False}
    first = await admin.threads.create()
    await admin.runs.wait(first["thread_id"], "react", input=user(f"{k} remember my colour"), context=context)
    saved = tool_results(await admin.threads.get_state(first["thread_id"]))["save"]
    assert saved["action"] == "created" and saved["category"] == "other"

    second = await admin.threads.create()
    await admin.runs.wait(second["thread_id"], "react", input=user(f"{k} recall my colour"), context=context)
    found = tool_results(await admin.threads.get_state(second["thread_id"]))["find"]
    assert [r["id"] for r in found["results"]] == [saved["id"]]
    assert found["category"] is None and "'fact'" in found["note"]
