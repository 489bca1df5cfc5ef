"""langgraph.platform.json: the graphs on the server's own checkpointer and store.

On LangGraph Platform the platform provides a Postgres-backed checkpointer and store; `langgraph
dev` with the same config provides its in-memory ones. Either way no custom factory is involved,
and the store's semantic index uses this package's embeddings function.
"""

from __future__ import annotations

import uuid

import pytest
from langgraph_sdk import get_client

from tests.integration.conftest import DevServer, server_env

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def platform_server(openai_server, tmp_path_factory):
    server = DevServer(tmp_path_factory.mktemp("platform"), server_env(openai_server), "langgraph.platform.json")
    server.start()
    yield server
    server.stop()


async def test_react_and_semantic_store_on_the_servers_own_persistence(platform_server, openai_server):
    client = get_client(url=platform_server.url)
    key = f"p{uuid.uuid4().hex[:8]}"
    openai_server.script(
        key,
        [
            {"tool_calls": [{"name": "calculator", "args": {"expression": "2**10"}, "id": "p1"}]},
            "It is 1024.",
        ],
    )
    thread = await client.threads.create()
    final = await client.runs.wait(
        thread["thread_id"], "react", input={"messages": [{"role": "user", "content": f"{key} 2^10?"}]}
    )
    assert final["messages"][-1]["content"] == "It is 1024."
    assert final["execution_log"][0]["tool"] == "calculator"
    ns = ["notes", key]
    await client.store.put_item(ns, "a", {"text": "Dogs love long walks in the park."})
    await client.store.put_item(ns, "b", {"text": "Quarterly revenue grew eight percent."})
    hits = await client.store.search_items(ns, query="puppy going for a stroll", limit=2)
    assert [h["key"] for h in hits["items"]] == ["a", "b"]
    assert hits["items"][0]["score"] > hits["items"][1]["score"]
