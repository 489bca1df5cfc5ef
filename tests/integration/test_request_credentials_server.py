"""A client's own model key, base URL and model parameters per request, through a real
`langgraph dev`: the key reaches the model server the request named, and is found nowhere the
server keeps or prints things (thread state and history, checkpoints and their metadata in
Postgres, the run record, the server's records on disk, its log)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from langgraph_sdk import get_client

from scripts.free_port import free_port
from tests.integration.conftest import AGENT_API_KEYS, API_KEYS, key, sql, user
from tools.credentials import REF_HEADER

pytestmark = [
    pytest.mark.integration,
    pytest.mark.not_on_aegra("Aegra runs requests in other replicas: per-request keys are refused there"),
]


def own_client(dev_server, **headers: str):
    return get_client(url=dev_server.url, api_key=API_KEYS["alice"], headers=headers)


def holding(value: object, secret: str) -> bool:
    """Whether `secret` occurs in `value` (bytes as stored, anything else as JSON)."""
    if isinstance(value, (bytes, memoryview)):
        return secret.encode() in bytes(value)
    return secret in json.dumps(value, default=str)


def checkpoint_rows(pg_uri: str, schema: str, thread_id: str) -> dict[str, list[tuple]]:
    return {
        table: sql(pg_uri, f"SELECT * FROM {schema}.{table} WHERE thread_id = %s", (thread_id,))
        for table in ("checkpoints", "checkpoint_writes", "checkpoint_blobs")
    }


async def test_a_key_sent_with_a_run_reaches_its_model_and_is_kept_nowhere(
    dev_server, openai_server, own_model_server, pg_uri
):
    secret = f"sk-own-{uuid.uuid4().hex}"
    k = key()
    own_model_server.script(k, ["Answered on your own endpoint."])
    client = own_client(dev_server, **{"x-model-api-key": secret, "x-model-base-url": own_model_server.base_url})
    thread = await client.threads.create()  # the headers go with every call: dropped here
    context = {"model": "openai:own-model", "remember": False, "recall_top_k": 0}
    final = await client.runs.wait(thread["thread_id"], "react", input=user(f"{k} hello"), context=context)
    assert final["messages"][-1]["content"] == "Answered on your own endpoint."

    [sent] = [r for r in own_model_server.requests() if k in json.dumps(r["messages"])]
    assert sent["authorization"] == f"Bearer {secret}" and sent["model"] == "own-model"
    assert not [r for r in openai_server.requests() if k in json.dumps(r.get("messages"))]

    thread_id = thread["thread_id"]
    kept = {
        "thread": await client.threads.get(thread_id),
        "state": await client.threads.get_state(thread_id),
        "history": await client.threads.get_history(thread_id, limit=100),
        "runs": await client.runs.list(thread_id),
        **checkpoint_rows(pg_uri, dev_server.schema, thread_id),
    }
    for where, value in kept.items():
        assert not holding(value, secret), f"the key is in the {where}"
        assert not holding(value, own_model_server.base_url), f"the base URL is in the {where}"
    # What the run carries instead: a reference, in its record and its checkpoints' metadata
    # (where any configurable header would be, so the test looks in the right places).
    [run] = kept["runs"]
    assert REF_HEADER in run["kwargs"]["config"]["configurable"]
    assert any(REF_HEADER in json.dumps(row, default=str) for row in kept["checkpoints"])
    on_disk = [p for p in Path(dev_server.workdir, ".langgraph_api").rglob("*") if p.is_file()]
    assert on_disk and not any(holding(p.read_bytes(), secret) for p in on_disk)
    log = dev_server.log_text()
    assert secret not in log and own_model_server.base_url not in log


async def test_a_private_base_url_is_refused_before_anything_is_written(dev_server, own_model_server):
    elsewhere = f"http://127.0.0.1:{free_port()}/v1"  # this machine, not listed by the operator
    client = own_client(dev_server, **{"x-model-api-key": "sk-own-123456", "x-model-base-url": elsewhere})
    thread = await client.threads.create()
    with pytest.raises(Exception) as refused:
        await client.runs.wait(thread["thread_id"], "react", input=user("hello"), context={"model": "openai:m"})
    assert refused.value.response.status_code == 400
    body = refused.value.response.json()
    assert body["error"] == "BASE_URL_NOT_ALLOWED" and "loopback" in body["message"], body
    assert await client.runs.list(thread["thread_id"]) == []
    assert not (await client.threads.get_state(thread["thread_id"]))["values"]
    forged = own_client(dev_server)
    with pytest.raises(Exception) as refused:  # a reference only the server sets
        await forged.runs.wait(thread["thread_id"], "react", input=user("hello"), context={REF_HEADER: "guess"})
    assert refused.value.response.status_code == 422 and await client.runs.list(thread["thread_id"]) == []


async def test_tool_choice_and_reasoning_effort_reach_the_model(dev_server, openai_server):
    client = dev_server.client()
    k = key()
    openai_server.script(
        k, [{"content": "", "tool_calls": [{"name": "calculator", "args": {"expression": "6*7"}}]}, "42"]
    )
    thread = await client.threads.create()
    context = {"tools": ["calculator"], "tool_choice": "calculator", "reasoning_effort": "low", "remember": False}
    final = await client.runs.wait(thread["thread_id"], "react", input=user(f"{k} six times seven"), context=context)
    assert final["messages"][-1]["content"] == "42"
    first, second = [r for r in openai_server.requests() if k in json.dumps(r.get("messages"))]
    assert first["tool_choice"] == {"type": "function", "function": {"name": "calculator"}}
    assert second["tool_choice"] is None
    assert first["sampling"]["reasoning_effort"] == second["sampling"]["reasoning_effort"] == "low"
    with pytest.raises(Exception) as refused:
        await client.runs.create(thread["thread_id"], "react", input=user("x"), context={"reasoning_effort": "max"})
    assert refused.value.response.status_code == 422 and "`reasoning_effort`" in refused.value.response.text


@pytest.fixture(scope="module")
def jina_engine():
    """A loopback search engine speaking Jina's search API; it records the key each call brings."""
    from tests.web_servers import LoopbackServer, Reply

    answer = {"data": [{"title": "Solar kettles", "url": "https://example.org/kettles", "description": "boil water"}]}
    with LoopbackServer({"/search": Reply(body=json.dumps(answer), content_type="application/json")}) as server:
        yield server


@pytest.fixture(scope="module")
def jina_server(pg_uri, openai_server, jina_engine, tmp_path_factory):
    """`langgraph dev` whose web_search is Jina's API on the loopback engine, with the operator's key."""
    from tests.integration.conftest import DevServer, server_env

    env = server_env(
        openai_server,
        POSTGRES_URI=pg_uri,
        POSTGRES_SCHEMA="it_search_key",
        AGENT_API_KEYS=AGENT_API_KEYS,
        WEB_SEARCH_PROVIDER="jina",
        JINA_SEARCH_URL=jina_engine.url("/search"),
        JINA_API_KEY="operator-jina-key",
        WEB_ALLOW_LOOPBACK="1",
        AGENT_TOOL_RETRIES="0",
    )
    server = DevServer(tmp_path_factory.mktemp("search-key"), env)
    server.start()
    yield server
    server.stop()


async def test_a_search_key_sent_with_a_run_reaches_the_search_provider_and_is_kept_nowhere(
    jina_server, jina_engine, openai_server, pg_uri
):
    secret = f"jina-own-{uuid.uuid4().hex}"
    k = key()
    openai_server.script(
        k,
        [
            {"tool_calls": [{"name": "web_search", "args": {"query": f"solar kettles {k}"}, "id": "s1"}]},
            "Solar kettles boil water.",
        ],
    )
    client = own_client(jina_server, **{"x-search-api-key": secret})
    thread = await client.threads.create()
    context = {"remember": False, "recall_top_k": 0, "tools": ["web_search"]}
    final = await client.runs.wait(
        thread["thread_id"], "react", input=user(f"{k} search solar kettles"), context=context
    )
    assert final["messages"][-1]["content"] == "Solar kettles boil water."
    [call] = [r for r in jina_engine.requests_to("/search") if k in r.query["q"][0]]
    assert call.headers["authorization"] == f"Bearer {secret}"  # the client's key, not the operator's

    # a run without the header searches with the operator's key
    other = await client.threads.create()
    plain = get_client(url=jina_server.url, api_key=API_KEYS["alice"])
    k2 = key()
    openai_server.script(
        k2,
        [{"tool_calls": [{"name": "web_search", "args": {"query": f"kettles {k2}"}, "id": "s2"}]}, "Done."],
    )
    await plain.runs.wait(other["thread_id"], "react", input=user(f"{k2} search kettles"), context=context)
    [call] = [r for r in jina_engine.requests_to("/search") if k2 in r.query["q"][0]]
    assert call.headers["authorization"] == "Bearer operator-jina-key"

    thread_id = thread["thread_id"]
    kept = {
        "state": await client.threads.get_state(thread_id),
        "history": await client.threads.get_history(thread_id, limit=100),
        "runs": await client.runs.list(thread_id),
        **{
            table: sql(pg_uri, f"SELECT * FROM it_search_key.{table} WHERE thread_id = %s", (thread_id,))
            for table in ("checkpoints", "checkpoint_writes", "checkpoint_blobs")
        },
    }
    for where, value in kept.items():
        assert not holding(value, secret), f"the search key is in the {where}"
    assert secret not in jina_server.log_text()
