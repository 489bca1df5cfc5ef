"""What the shared runtime does for models that do not follow the API to the letter: tool calls
written as text, structured answers in prose or JSON text, prompts that cache, token usage, the
model timeout of a local openai_endpoint and the run deadline. Scripted models only."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel, Field

import graphs.runtime.events
import tools.registry as registry
from graphs.react.graph import builder
from graphs.runtime.context import Context
from graphs.runtime.models import load_chat_model, report_usage
from graphs.runtime.structured import FUNCTION_CALLING, JSON_SCHEMA, ainvoke_structured, structured_method
from graphs.runtime.text_tool_calls import check_text_tool_calls, find_text_tool_calls
from graphs.runtime.tool_offer import MEMORY_LOOKUPS, tool_schemas, tools_for_turn
from store import memory
from tests.fakes import ScriptedChatModel

executed: list[dict] = []


@tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    executed.append({"a": a, "b": b})
    return str(a + b)


@tool
async def slow(seconds: float) -> str:
    """Wait `seconds`, then answer."""
    await asyncio.sleep(seconds)
    return "done"


@pytest.fixture(autouse=True)
def test_tools(monkeypatch):
    executed.clear()
    monkeypatch.setenv("AGENT_RETRY_BASE_DELAY", "0.01")

    async def available_tools():
        return {"add": add, "slow": slow}, []

    monkeypatch.setattr(registry, "available_tools", available_tools)


async def run_react(model_slot, responses, context=None, message="What is 2 + 3?", config=None):
    model = ScriptedChatModel(responses=responses)
    model_slot["model"] = model
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": str(uuid.uuid4())}, **(config or {})}
    events = []
    async for chunk in graph.astream(
        {"messages": [HumanMessage(message)]},
        config,
        context=Context(model="scripted:test", remember=False, **(context or {})),
        stream_mode="custom",
    ):
        events.append(chunk)
    return (await graph.aget_state(config)).values, events, model


def kinds(events, kind):
    return [e for e in events if e["event"] == kind]


# --- tool calls written as text ------------------------------------------------------------

SHAPES = {
    "fenced": 'I will add them.\n```json\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n```',
    "bare": '{"name": "add", "arguments": {"a": 2, "b": 3}}',
    "doubled braces": '{{"name": "add", "arguments": {{"a": 2, "b": 3}}}}}',
    "list": '[{"name": "add", "arguments": {"a": 2, "b": 3}}]',
    "tool_call tag": '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>',
    "function tag": '<tools><function name="add" arguments=\'{"a": 2, "b": 3}\'/></tools>',
    "arguments as a string": '{"name": "add", "arguments": "{\\"a\\": 2, \\"b\\": 3}"}',
    "openai function object": '{"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 3}}}',
}


@pytest.mark.parametrize("shape", SHAPES)
def test_each_text_shape_is_found_validated_and_cut_from_the_text(shape):
    found, rest = find_text_tool_calls(SHAPES[shape])
    calls, errors = check_text_tool_calls(found, [add])
    assert errors == []
    assert [(c["name"], c["args"]) for c in calls] == [("add", {"a": 2, "b": 3})]
    assert calls[0]["id"] and "arguments" not in rest and "{" not in rest


def test_invalid_text_calls_name_their_problem_and_plain_json_is_no_call():
    found, _ = find_text_tool_calls(
        '{"name": "add", "arguments": {"a": "two", "b": 3}} {"name": "add", "arguments": {"a": 1}}'
        ' {"name": "delete_everything", "arguments": {}}'
    )
    calls, errors = check_text_tool_calls(found, [add])
    assert calls == [] and len(errors) == 3
    assert "a: Input should be a valid integer" in errors[0]
    assert "b: Field required" in errors[1]
    assert "no tool named 'delete_everything'" in errors[2]
    # A JSON answer that is not a call (other keys) is left alone.
    assert find_text_tool_calls('{"name": "Alice", "age": 30}')[0] == []
    assert find_text_tool_calls("The answer is 5.")[0] == []


@pytest.mark.parametrize("shape", ["fenced", "doubled braces", "function tag"])
async def test_react_runs_a_tool_call_written_as_text(model_slot, shape):
    state, events, model = await run_react(model_slot, [SHAPES[shape], "2 + 3 = 5"])

    assert executed == [{"a": 2, "b": 3}]
    call_message = state["messages"][1]
    assert call_message.tool_calls[0]["name"] == "add" and "arguments" not in call_message.text
    assert isinstance(state["messages"][2], ToolMessage) and state["messages"][2].content == "5"
    assert state["messages"][-1].content == "2 + 3 = 5"
    recovered = kinds(events, "tool_calls_recovered")
    assert len(recovered) == 1 and recovered[0]["recovered"] == 1 and recovered[0]["names"] == ["add"]


async def test_recovery_can_be_switched_off(model_slot):
    state, events, _ = await run_react(model_slot, [SHAPES["fenced"]], context={"recover_tool_calls": False})
    assert executed == [] and state["messages"][-1].content == SHAPES["fenced"]
    assert kinds(events, "tool_calls_recovered") == []


async def test_an_invalid_text_call_is_never_run_and_the_model_is_asked_once_more(model_slot):
    bad = '```json\n{"name": "add", "arguments": {"a": "two"}}\n```'
    state, events, model = await run_react(model_slot, [bad, SHAPES["bare"], "5"])

    assert executed == [{"a": 2, "b": 3}]  # only the corrected call ran
    reask = model.calls[1].messages[-1]
    assert isinstance(reask, HumanMessage) and "b: Field required" in reask.text
    first, second = kinds(events, "tool_calls_recovered")
    assert (first["recovered"], first["invalid"], first["reasked"]) == (0, 1, True)
    assert (second["recovered"], second["reasked"]) == (1, True)
    assert state["messages"][-1].content == "5"


async def test_a_call_still_invalid_after_the_reask_is_dropped_and_the_model_answers_without_tools(model_slot):
    bad = '{"name": "add", "arguments": {"a": "two"}}'
    state, _, model = await run_react(model_slot, [bad, bad, "I cannot add 'two' and nothing."])
    assert executed == [] and len(model.calls) == 3
    assert model.calls[2].tools == [] and "without calling any tool" in model.calls[2].messages[-1].text
    answer = state["messages"][-1]
    assert not answer.tool_calls and answer.text == "I cannot add 'two' and nothing."


async def test_a_call_still_invalid_without_tools_leaves_a_plain_message(model_slot):
    bad = '{"name": "add", "arguments": {"a": "two"}}'
    state, _, model = await run_react(model_slot, [bad, bad, bad])
    assert executed == [] and len(model.calls) == 3
    answer = state["messages"][-1]
    assert not answer.tool_calls and "could not make a valid tool call" in answer.text and "{" not in answer.text


# --- structured calls -----------------------------------------------------------------------


class Verdict(BaseModel):
    """A verdict."""

    label: str = Field(description="yes or no")
    score: float = Field(ge=0, le=1)


async def test_an_openai_compatible_server_is_asked_for_json_schema_output(openai_endpoint):
    openai_endpoint.script("default", ['{"label": "yes", "score": 0.9}'])
    model = load_chat_model("openai:local")
    assert structured_method(model) == JSON_SCHEMA
    result = await ainvoke_structured(model, Verdict, [HumanMessage("Is it?")], None, retries=0, timeout=10)

    assert result.value == Verdict(label="yes", score=0.9) and result.attempts == 1
    request = openai_endpoint.requests()[-1]
    assert request["response_format"]["type"] == "json_schema"
    assert request["response_format"]["json_schema"]["name"] == "Verdict"
    assert request["response_format"]["json_schema"]["schema"]["required"] == ["label", "score"]
    assert request["tools"] == []
    # The server constrains the output; the model itself is shown the schema (field meanings).
    system = request["messages"][0]
    assert system["role"] == "system" and "`Verdict` JSON object" in system["content"]
    assert "yes or no" in system["content"]


async def test_a_server_refusing_json_schema_is_asked_by_function_call(openai_endpoint, monkeypatch):
    openai_endpoint.script(
        "default",
        [
            {"error": {"status": 400, "message": "response_format json_schema is not supported"}},
            {"tool_calls": [{"name": "Verdict", "args": {"label": "no", "score": 0.1}}]},
        ],
    )
    result = await ainvoke_structured(
        load_chat_model("openai:local"), Verdict, [HumanMessage("Is it?")], None, retries=0, timeout=10
    )
    assert (result.value.label, result.attempts, result.method) == ("no", 1, FUNCTION_CALLING)
    refused, asked = openai_endpoint.requests()[-2:]
    assert refused["response_format"]["type"] == "json_schema"
    assert "response_format" not in asked and [t["function"]["name"] for t in asked["tools"]] == ["Verdict"]
    monkeypatch.setenv("AGENT_STRUCTURED_OUTPUT", "function_calling")
    assert structured_method(load_chat_model("openai:local")) == FUNCTION_CALLING


async def test_a_structured_answer_is_validated_and_asked_again_with_the_problem(monkeypatch):
    events: list[dict] = []
    monkeypatch.setattr(graphs.runtime.events, "get_stream_writer", lambda: events.append)
    model = ScriptedChatModel(
        responses=[
            '{"label": "yes", "score": 7}',  # out of range, as text
            {"tool_calls": [{"name": "Verdict", "args": {"label": "maybe", "score": 0.5}}]},  # fails `check`
            {"tool_calls": [{"name": "Verdict", "args": {"label": "no", "score": 0.2}}]},
        ]
    )
    assert structured_method(model) == FUNCTION_CALLING
    invalid: list[tuple[int, str]] = []

    def check(verdict: Verdict) -> str:
        if verdict.label not in ("yes", "no"):
            raise ValueError(f"label {verdict.label!r} is not yes or no")
        return verdict.label

    result = await ainvoke_structured(
        model,
        Verdict,
        [HumanMessage("Is it?")],
        None,
        retries=0,
        timeout=10,
        attempts=3,
        check=check,
        on_invalid=lambda attempt, error: invalid.append((attempt, error)),
    )
    assert (result.value, result.attempts) == ("no", 3)
    assert "score: Input should be less than or equal to 1" in invalid[0][1]
    assert invalid[1] == (2, "label 'maybe' is not yes or no")
    assert isinstance(model.calls[2].messages[-1], ToolMessage)  # the call made is answered
    assert model.calls[0].kwargs.get("tool_choice") and kinds(events, "structured_output_failed") == []


# --- prompts that cache, tools per turn, usage ----------------------------------------------


async def test_react_prompt_keeps_per_call_text_last(model_slot):
    state, _, model = await run_react(model_slot, [SHAPES["bare"], "5"])
    first, second = model.calls
    system = first.messages[0]
    assert isinstance(system, SystemMessage) and system == second.messages[0]
    assert "time" not in system.text.lower() and not any(ch.isdigit() for ch in system.text)
    assert first.tools == second.tools
    question = first.messages[1]
    assert question.text.startswith("What is 2 + 3?") and "Current date and hour, UTC:" in question.text
    assert second.messages[1] == question  # same prefix on the turn's next call
    assert state["messages"][0].content == "What is 2 + 3?"  # the note is in the prompt only


@tool
def convert(amount: float, unit: str) -> str:
    """Convert an amount between units, e.g. km to miles. Units: km, mi, kg, lb.

    Returns {"amount", "unit"}; refuses unknown units with an explanation. Results are rounded
    to 6 significant digits. i.e. 1 km is "0.621371 mi".
    """
    executed.append({"amount": amount, "unit": unit})
    return f"{amount} {unit}"


async def test_the_model_reads_each_offered_tool_with_its_first_sentence_only(model_slot, monkeypatch):
    async def available_tools():
        return {"add": add, "convert": convert}, []

    monkeypatch.setattr(registry, "available_tools", available_tools)
    call = '{"name": "convert", "arguments": {"amount": 2, "unit": "km"}}'
    _, _, model = await run_react(model_slot, [call, "2 km"], message="2 km in miles?")

    offered = {schema["function"]["name"]: schema["function"] for schema in model.calls[0].tools}
    assert offered["convert"]["description"] == "Convert an amount between units, e.g. km to miles."
    assert offered["add"]["description"] == "Add two integers."
    parameters = offered["convert"]["parameters"]
    assert set(parameters["properties"]) == {"amount", "unit"} and parameters["required"] == ["amount", "unit"]
    assert "Returns" not in json.dumps(model.calls[0].tools)
    # the call written as text is still checked against the tool itself, and runs
    assert executed == [{"amount": 2.0, "unit": "km"}]
    # the biggest built-in description, as the model reads it
    (schema,) = tool_schemas([registry.builtin_tools()["calculator"]])
    assert schema["function"]["description"].startswith("Evaluate a math expression")
    assert len(json.dumps(schema)) < 600


async def test_a_turn_offers_the_same_tools_on_every_call_until_the_next_message(model_slot, store, monkeypatch):
    builtin = registry.builtin_tools()
    memory_tools = {name: builtin[name] for name in ("add", "save_memory", "search_semantic_memory") if name in builtin}

    async def available_tools():
        return {"add": add, **memory_tools}, []

    monkeypatch.setattr(registry, "available_tools", available_tools)
    save = {"tool_calls": [{"name": "save_memory", "args": {"text": "The user likes teal"}}]}
    model_slot["model"] = model = ScriptedChatModel(responses=[save, "Noted.", "You like teal."])
    graph = builder.compile(checkpointer=InMemorySaver(), store=store)
    config = {"configurable": {"thread_id": "t1"}}
    context = Context(model="scripted:test", user_id="dana", remember=False)
    await graph.ainvoke({"messages": [HumanMessage("Remember that I like teal.")]}, config, context=context)
    await graph.ainvoke({"messages": [HumanMessage("What colour do I like?")]}, config, context=context)

    first, second, next_turn = ([tool["function"]["name"] for tool in call.tools] for call in model.calls)
    assert "save_memory" in first and "search_semantic_memory" not in first  # nothing saved yet
    # the memory saved mid-turn does not change the tool block of the turn's next call ...
    assert second == first
    # ... the next message's turn offers what the user now has
    assert "search_semantic_memory" in next_turn


async def test_tools_offered_follow_what_the_user_and_the_deployment_have(store, monkeypatch):
    monkeypatch.delenv("WEB_SEARCH_PROVIDER", raising=False)
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    monkeypatch.delenv("JINA_API_KEY", raising=False)
    monkeypatch.delenv("SEARXNG_URL", raising=False)
    every = list(registry.builtin_tools().values())

    offered = {t.name for t in await tools_for_turn(every, store, "dana", named=False)}
    assert "save_memory" in offered and not offered & MEMORY_LOOKUPS
    assert not offered & {"knowledge_base_search", "list_knowledge_bases"}
    assert {"calculator", "weather", "current_time"} <= offered
    # no provider configured: DuckDuckGo needs no key, so search (and reading its results) is offered
    assert {"web_search", "web_read"} <= offered
    # without web_search, web_read comes only with a URL to read in the user's message
    no_search = [t for t in every if t.name != "web_search"]
    offered = {t.name for t in await tools_for_turn(no_search, store, "dana", named=False)}
    assert "web_read" not in offered
    with_url = [HumanMessage("Summarise https://example.org/post please")]
    offered = {t.name for t in await tools_for_turn(no_search, store, "dana", named=False, messages=with_url)}
    assert "web_read" in offered and "web_search" not in offered

    await memory.save_memory(store, "dana", "semantic", "The user likes teal", category="preference")
    monkeypatch.setenv("SEARXNG_URL", "http://127.0.0.1:8888")
    offered = {t.name for t in await tools_for_turn(every, store, "dana", named=False)}
    assert {"web_search", "web_read"} <= offered
    reads_semantic = {"search_semantic_memory", "delete_memory", "keyword_search", "time_filter", "get_recent_activity"}
    assert offered & MEMORY_LOOKUPS == reads_semantic  # no episodic memories, profile or chat yet
    await memory.update_profile(store, "dana", {"city": "Lisbon"})
    offered = {t.name for t in await tools_for_turn(every, store, "dana", named=False)}
    assert offered & MEMORY_LOOKUPS == reads_semantic | {"get_user_profile"}
    assert not {t.name for t in await tools_for_turn(every, store, "erin", named=False)} & MEMORY_LOOKUPS
    assert len(await tools_for_turn(every, store, "erin", named=True)) == len(every)  # named: as given


def test_usage_reports_prompt_and_cached_tokens(monkeypatch):
    events: list[dict] = []
    monkeypatch.setattr(graphs.runtime.events, "get_stream_writer", lambda: events.append)
    message = AIMessage(
        "hi",
        usage_metadata={
            "input_tokens": 1200,
            "output_tokens": 5,
            "total_tokens": 1205,
            "input_token_details": {"cache_read": 1100},
        },
    )
    report_usage({"raw": message, "parsed": None}, step=2)
    assert report_usage(AIMessage("no usage"), step=3) is None
    assert [(e["step"], e["input_tokens"], e["cached_tokens"], e["output_tokens"]) for e in events] == [
        (2, 1200, 1100, 5)
    ]


async def test_usage_of_an_openai_compatible_server_is_an_event(openai_endpoint, model_slot, monkeypatch):
    openai_endpoint.script("default", ["5"])
    monkeypatch.setenv("OPENAI_BASE_URL", openai_endpoint.base_url)
    graph = builder.compile(checkpointer=InMemorySaver())
    events = [
        chunk
        async for chunk in graph.astream(
            {"messages": [HumanMessage("2+3?")]},
            {"configurable": {"thread_id": "usage"}},
            context=Context(model="openai:local", remember=False),
            stream_mode="custom",
        )
    ]
    (usage,) = kinds(events, "model_usage")
    assert usage["input_tokens"] > 0 and usage["cached_tokens"] == 0 and usage["output_tokens"] > 0


def test_model_timeout_fits_the_endpoint(monkeypatch):
    monkeypatch.delenv("AGENT_MODEL_TIMEOUT", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
    assert Context(model="openai:qwen").model_timeout == 900
    assert Context(model="anthropic:claude").model_timeout == 120  # not the local server
    monkeypatch.setenv("AGENT_LOCAL_MODEL_TIMEOUT", "1500")
    assert Context(model="openai:qwen").model_timeout == 1500
    monkeypatch.setenv("OPENAI_BASE_URL", "https://api.example.com/v1")
    assert Context(model="openai:qwen").model_timeout == 120
    monkeypatch.setenv("AGENT_MODEL_TIMEOUT", "30")
    assert Context(model="openai:qwen").model_timeout == 30
    assert Context(model="openai:qwen", model_timeout=45).model_timeout == 45


# --- the run deadline -----------------------------------------------------------------------


async def test_a_run_past_its_deadline_ends_with_a_message(model_slot):
    slow_call = {"tool_calls": [{"name": "slow", "args": {"seconds": 5}}]}
    state, events, model = await run_react(
        model_slot,
        [slow_call, "never reached"],
        context={"run_timeout": 0.5, "tool_timeout": 10, "tool_retries": 0},
        config={"run_id": str(uuid.uuid4())},
    )
    assert len(model.calls) == 1  # the model is not called past the deadline
    tool_message = state["messages"][2]
    assert isinstance(tool_message, ToolMessage) and tool_message.status == "error"
    answer = state["messages"][-1]
    assert isinstance(answer, AIMessage) and "ran out of time" in answer.text and "0.5 s" in answer.text
    (exceeded,) = kinds(events, "run_deadline_exceeded")
    assert exceeded["deadline_s"] == 0.5 and exceeded["stage"] == "model" and exceeded["elapsed_s"] >= 0.5


async def test_a_slow_model_is_cut_at_the_deadline(model_slot):
    class SlowModel(ScriptedChatModel):
        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
            await asyncio.sleep(5)
            return await super()._agenerate(messages, stop, run_manager, **kwargs)

    model = SlowModel(responses=["late"])
    model_slot["model"] = model
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "slow"}, "run_id": str(uuid.uuid4())}
    events = [
        chunk
        async for chunk in graph.astream(
            {"messages": [HumanMessage("hi")]},
            config,
            context=Context(model="scripted:test", remember=False, run_timeout=0.3, model_retries=1),
            stream_mode="custom",
        )
    ]
    answer = (await graph.aget_state(config)).values["messages"][-1]
    assert "ran out of time" in answer.text
    assert len(kinds(events, "run_deadline_exceeded")) == 1 and kinds(events, "model_error") == []
