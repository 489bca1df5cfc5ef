"""Per-request model and search keys (server/request_credentials.py, tools/credentials.py): taken
off the request, held in memory under a reference, used by the run's model and search calls,
never echoed; the base URL policy; tool_choice and reasoning_effort reaching the provider."""

from __future__ import annotations

import json
import logging

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableLambda

from graphs.react.graph import graph
from graphs.runtime.context import Context
from graphs.runtime.models import ModelCallError, ModelConfigError, load_chat_model
from server import request_credentials
from settings.redact import RedactingFilter
from tools import credentials
from tools.credentials import REF_HEADER, RequestCredentials
from tools.web_search import search_config

KEY = "sk-user-4b1d9e77c0ffee"


async def through_middleware(path: str, headers: dict[str, str], method: str = "POST") -> tuple[dict | None, dict]:
    """Send a request through the middleware to an app that records what it received:
    (the headers the app saw or None when refused, the refusal's JSON body or {})."""
    seen: dict = {}
    sent: list[dict] = []

    async def app(scope, receive, send):
        seen["headers"] = {k.decode(): v.decode() for k, v in scope["headers"]}

    async def receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
        "query_string": b"",
    }
    await request_credentials.RequestCredentialsMiddleware(app)(scope, receive, send)
    body = next((json.loads(m["body"]) for m in sent if m["type"] == "http.response.body"), {})
    return seen.get("headers"), body


@pytest.fixture
def in_dev(monkeypatch):
    """As under `langgraph dev`: runs execute in the process that received the request."""
    monkeypatch.setattr(request_credentials, "runs_in_this_process", lambda: True)
    monkeypatch.setattr(request_credentials, "reference_reaches_runs", lambda: True)
    credentials.HELD.clear()


async def test_a_run_request_carries_only_a_reference_to_its_held_credentials(in_dev):
    headers = {"x-api-key": "agent", "x-model-api-key": KEY, "x-agent-credentials": "forged", "x-other": "1"}
    seen, refused = await through_middleware("/threads/t1/runs/stream", headers)
    assert not refused
    assert KEY not in json.dumps(seen) and "forged" not in seen.values()
    assert seen["x-api-key"] == "agent" and seen["x-other"] == "1"
    held = credentials.lookup(seen[REF_HEADER])
    assert held is not None and held.model_api_key == KEY and KEY not in repr(held)


async def test_other_requests_lose_the_headers_and_hold_nothing(in_dev):
    seen, refused = await through_middleware("/threads", {"x-model-api-key": KEY, "x-search-api-key": "tvly-123456"})
    assert not refused and seen == {}
    seen, _ = await through_middleware("/threads/t1/state", {"x-model-api-key": KEY}, method="GET")
    assert seen == {} and len(credentials.HELD) == 0


@pytest.mark.parametrize(
    "base_url, allowed, why",
    [
        ("http://127.0.0.1:8080/v1", None, "loopback"),
        ("http://10.1.2.3/v1", None, "private"),
        ("http://169.254.169.254/latest", None, "link-local"),
        ("http://localhost:11434/v1", None, "loopback"),
        ("ftp://example.com/v1", None, "http:// or https://"),
        ("https://user:pw@example.com/v1", None, "credentials"),
        ("https://example.com/v1", "https://api.openai.com/v1", "not one of the base URLs"),
        ("http://127.0.0.1:8080/v1", "http://127.0.0.1:9090/v1", "not one of the base URLs"),
    ],
)
async def test_a_base_url_the_policy_refuses_stops_the_request(in_dev, monkeypatch, base_url, allowed, why):
    if allowed:
        monkeypatch.setenv("AGENT_REQUEST_BASE_URLS", allowed)
    seen, refused = await through_middleware("/runs/wait", {"x-model-base-url": base_url, "x-model-api-key": KEY})
    assert seen is None, "the request reached the server"
    assert refused["error"] == "BASE_URL_NOT_ALLOWED" and why in refused["message"], refused
    assert KEY not in json.dumps(refused) and len(credentials.HELD) == 0


async def test_an_operator_lists_a_private_base_url(in_dev, monkeypatch):
    monkeypatch.setenv("AGENT_REQUEST_BASE_URLS", "*,http://127.0.0.1:8080/v1")
    seen, refused = await through_middleware("/runs", {"x-model-base-url": "http://127.0.0.1:8080/v1"})
    assert not refused and credentials.lookup(seen[REF_HEADER]).base_url_listed
    seen, refused = await through_middleware("/runs", {"x-model-base-url": "http://127.0.0.1:8080/v2"})
    assert refused["error"] == "BASE_URL_NOT_ALLOWED"


async def test_operator_switch_crons_and_other_servers(in_dev, monkeypatch):
    seen, refused = await through_middleware("/runs/crons", {"x-model-api-key": KEY})
    assert seen is None and refused["error"] == "INVALID_REQUEST" and "cron" in refused["message"]
    monkeypatch.setenv("AGENT_REQUEST_CREDENTIALS", "false")
    seen, refused = await through_middleware("/threads/t/runs", {"x-model-api-key": KEY})
    assert seen is None and refused["error"] == "REQUEST_CREDENTIALS_DISABLED"
    monkeypatch.delenv("AGENT_REQUEST_CREDENTIALS")
    monkeypatch.setattr(request_credentials, "runs_in_this_process", lambda: False)
    seen, refused = await through_middleware("/threads/t/runs", {"x-model-api-key": KEY})
    assert seen is None and refused["error"] == "NOT_SUPPORTED_ON_THIS_SERVER"
    monkeypatch.setattr(request_credentials, "runs_in_this_process", lambda: True)
    monkeypatch.setattr(request_credentials, "reference_reaches_runs", lambda: False)  # no configurable_headers
    seen, refused = await through_middleware("/threads/t/runs", {"x-model-api-key": KEY})
    assert seen is None and refused["error"] == "NOT_SUPPORTED_ON_THIS_SERVER"


def run_config(held: RequestCredentials) -> dict:
    return {"configurable": {REF_HEADER: credentials.hold(held)}}


async def test_the_request_key_and_base_url_reach_the_model_never_the_server_key(openai_endpoint, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-operator-000000")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # the server's own: not used
    openai_endpoint.script("default", ["with your key", "keyless"])
    context = Context(model="openai:byo", remember=False)
    held = RequestCredentials(model_api_key=KEY, model_base_url=openai_endpoint.base_url, base_url_listed=True)
    result = await graph.ainvoke({"messages": [HumanMessage("hi")]}, run_config(held), context=context)
    assert result["messages"][-1].content == "with your key"
    keyless = RequestCredentials(model_base_url=openai_endpoint.base_url, base_url_listed=True)
    await graph.ainvoke({"messages": [HumanMessage("hi")]}, run_config(keyless), context=context)
    first, second = [r["authorization"] for r in openai_endpoint.requests()]
    assert first == f"Bearer {KEY}" and "sk-operator" not in second


async def test_an_unlisted_base_url_is_checked_at_connect_time(openai_endpoint):
    """A host that passed the request's check but resolves to this machine when called (DNS
    rebinding) is never reached: connections of a base URL the operator did not list are checked."""
    openai_endpoint.script("default", ["should not be asked"])
    held = RequestCredentials(model_api_key=KEY, model_base_url=openai_endpoint.base_url)
    context = Context(model="openai:byo", remember=False, model_retries=0)
    with pytest.raises(ModelCallError) as failed:
        await graph.ainvoke({"messages": [HumanMessage("hi")]}, run_config(held), context=context)
    assert openai_endpoint.requests() == []
    assert "loopback address" in str(failed.value) and KEY not in str(failed.value)


async def test_a_provider_error_repeating_the_key_is_reported_without_it(openai_endpoint):
    openai_endpoint.script("default", [{"error": {"status": 401, "message": f"Incorrect API key provided: {KEY}"}}])
    held = RequestCredentials(model_api_key=KEY, model_base_url=openai_endpoint.base_url, base_url_listed=True)
    with pytest.raises(ModelCallError) as failed:
        await graph.ainvoke(
            {"messages": [HumanMessage("hi")]}, run_config(held), context=Context(model="openai:byo", remember=False)
        )
    assert KEY not in str(failed.value) and "Incorrect API key provided: ***" in str(failed.value)
    record = logging.LogRecord(
        "httpx", logging.INFO, __file__, 1, "calling %s with %s", (held.model_base_url, KEY), None
    )
    RedactingFilter().filter(record)
    assert KEY not in record.getMessage() and held.model_base_url not in record.getMessage()


def test_expired_credentials_and_other_providers_fail_saying_so(monkeypatch):
    config = {"configurable": {REF_HEADER: "gone"}}
    with pytest.raises(ModelConfigError, match="no longer held"):
        RunnableLambda(lambda _: load_chat_model("openai:m")).invoke(None, config)
    held = run_config(RequestCredentials(model_api_key=KEY))
    with pytest.raises(ModelConfigError, match="for `openai:\\*` models"):
        RunnableLambda(lambda _: load_chat_model("anthropic:claude")).invoke(None, held)


def test_a_search_key_sent_with_the_request_is_the_search_providers(monkeypatch):
    monkeypatch.delenv("WEB_SEARCH_PROVIDER", raising=False)
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    config = run_config(RequestCredentials(search_api_key="tvly-user-123456"))
    found = RunnableLambda(lambda _: search_config()).invoke(None, config)
    assert (found.provider, found.tavily_api_key) == ("tavily", "tvly-user-123456")
    monkeypatch.setenv("WEB_SEARCH_PROVIDER", "jina")
    found = RunnableLambda(lambda _: search_config()).invoke(None, config)
    assert (found.provider, found.jina_api_key) == ("jina", "tvly-user-123456")
    assert search_config().jina_api_key is None  # outside the run: the server's settings only


async def test_tool_choice_and_reasoning_effort_reach_the_provider(openai_endpoint):
    openai_endpoint.script(
        "default", [{"content": "", "tool_calls": [{"name": "calculator", "args": {"expression": "6*7"}}]}, "42"]
    )
    tools = ["calculator", "current_time"]
    context = Context(model="openai:m", tools=tools, tool_choice="calculator", reasoning_effort="low", remember=False)
    result = await graph.ainvoke({"messages": [HumanMessage("6*7?")]}, context=context)
    assert result["messages"][-1].content == "42"
    first, second = openai_endpoint.requests()
    assert first["tool_choice"] == {"type": "function", "function": {"name": "calculator"}}
    assert second["tool_choice"] is None  # later calls of the turn decide, so the turn can end
    assert first["sampling"]["reasoning_effort"] == second["sampling"]["reasoning_effort"] == "low"


async def test_tool_choice_none_holds_for_the_whole_turn(openai_endpoint):
    openai_endpoint.script("default", ["no tools"])
    context = Context(model="openai:m", tools=["calculator"], tool_choice="none", remember=False)
    await graph.ainvoke({"messages": [HumanMessage("6*7?")]}, context=context)
    assert openai_endpoint.requests()[0]["tool_choice"] == "none"


async def test_parameters_a_call_cannot_use_are_reported(model_slot):
    from tests.fakes import ScriptedChatModel

    model_slot["model"] = ScriptedChatModel(responses=["answer"])
    context = Context(
        model="scripted:m",
        tools=["calculator"],
        tool_choice="required",
        reasoning_effort="high",
        max_steps=1,
        remember=False,
    )
    events = [
        chunk
        async for chunk in graph.astream({"messages": [HumanMessage("hi")]}, context=context, stream_mode="custom")
    ]
    ignored = {e["parameter"]: e for e in events if e["event"] == "model_parameter_ignored"}
    assert (
        ignored["reasoning_effort"]["value"] == "high" and "ScriptedChatModel" in ignored["reasoning_effort"]["reason"]
    )
    assert ignored["tool_choice"]["value"] == "required" and "no tools" in ignored["tool_choice"]["reason"]


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"tool_choice": "sometimes"}, "neither one of auto, none, required nor a tool's name"),
        ({"tool_choice": "web_read", "tools": ["calculator"]}, "not one of the run's `tools`"),
        ({"reasoning_effort": "max"}, "not one of none, minimal, low, medium, high, xhigh"),
    ],
)
def test_bad_tool_choice_and_reasoning_effort_are_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        Context(**fields)


def test_an_agent_with_fewer_tools_drops_a_tool_choice_it_cannot_offer():
    context = Context(tools=["calculator", "current_time"], tool_choice="calculator")
    assert context.restricted_to(["search_chat_history"]).tool_choice is None
    assert context.restricted_to(["calculator"]).tool_choice == "calculator"
    assert Context(tool_choice="required").restricted_to([]).tool_choice == "required"


def test_memory_extraction_of_a_turn_with_its_own_model_key_uses_the_servers_model():
    from graphs.runtime.memory_schedule import _extraction_model

    assert _extraction_model("openai:own") == {"model": "openai:own"}  # outside a run
    config = run_config(RequestCredentials(model_api_key=KEY))
    assert RunnableLambda(lambda _: _extraction_model("openai:own")).invoke(None, config) == {}
    config = run_config(RequestCredentials(search_api_key="tvly-user-123456"))
    assert RunnableLambda(lambda _: _extraction_model("openai:own")).invoke(None, config) == {"model": "openai:own"}
