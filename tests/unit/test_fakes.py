"""The chat-model test doubles: ScriptedChatModel and the scripted OpenAI-compatible server."""

from __future__ import annotations

import json
import math
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, TypedDict

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI, OpenAIEmbeddings
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import BaseModel

from tests.fakes import ScriptedChatModel, ScriptExhaustedError, ScriptItemError
from tests.openai_server import ScriptError, embed_text, run_openai_server, spawn_openai_server


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


TWO_CALLS = {
    "content": "",
    "reasoning": "I need both tools at once",
    "tool_calls": [
        {"name": "add", "args": {"a": 2, "b": 40}},
        {"name": "shout", "args": {"text": "a longer argument string"}},
    ],
}
# What both doubles must aggregate TWO_CALLS into (ids assigned in order).
EXPECTED_TWO_CALLS = [
    {"name": "add", "args": {"a": 2, "b": 40}, "id": "call_1", "type": "tool_call"},
    {"name": "shout", "args": {"text": "a longer argument string"}, "id": "call_2", "type": "tool_call"},
]


def aggregate(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    total = chunks[0]
    for chunk in chunks[1:]:
        total = total + chunk
    return total


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=False)) / (
        math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    )


# -- ScriptedChatModel ---------------------------------------------------------------------


def test_stream_of_two_parallel_tool_calls_aggregates_to_tool_calls():
    model = ScriptedChatModel(responses=[TWO_CALLS])
    chunks = list(model.bind_tools([add, shout]).stream("go"))

    call_chunks = [c.tool_call_chunks[0] for c in chunks if c.tool_call_chunks]
    assert len(call_chunks) > 4  # id/name chunk plus argument pieces for each call
    heads = [c for c in call_chunks if c["name"]]
    assert [(h["index"], h["name"], h["id"]) for h in heads] == [
        (0, "add", "call_1"),
        (1, "shout", "call_2"),
    ]
    total = aggregate(chunks)
    assert total.tool_calls == EXPECTED_TWO_CALLS
    assert total.additional_kwargs["reasoning_content"] == "I need both tools at once"
    assert total.content_blocks[0] == {
        "type": "reasoning",
        "reasoning": "I need both tools at once",
    }
    assert total.response_metadata["finish_reason"] == "tool_calls"
    assert total.usage_metadata["output_tokens"] > 0
    assert total.usage_metadata["input_tokens"] > 0


def test_text_streams_as_several_token_chunks():
    model = ScriptedChatModel(responses=["The answer is forty two."])
    chunks = list(model.stream("question"))
    texts = [c.content for c in chunks if c.content]
    assert len(texts) == 5
    assert "".join(texts) == "The answer is forty two."
    assert aggregate(chunks).response_metadata["finish_reason"] == "stop"


async def test_astream_and_ainvoke_follow_the_script():
    model = ScriptedChatModel(responses=["first reply here", TWO_CALLS])
    chunks = [c async for c in model.astream("hi")]
    assert aggregate(chunks).content == "first reply here"
    reply = await model.ainvoke("again")
    assert [c["name"] for c in reply.tool_calls] == ["add", "shout"]


def test_invoke_returns_tool_calls_reasoning_and_usage():
    model = ScriptedChatModel(responses=[TWO_CALLS])
    reply = model.invoke([HumanMessage("compute")])
    assert [c["id"] for c in reply.tool_calls] == ["call_1", "call_2"]
    assert reply.additional_kwargs["reasoning_content"] == "I need both tools at once"
    assert reply.usage_metadata["total_tokens"] > 0


def test_bind_tools_copies_share_the_cursor_and_record_calls():
    model = ScriptedChatModel(responses=["one", "two", "three"])
    first = model.bind_tools([add])
    second = model.bind_tools([add, shout], tool_choice="auto")
    assert first.invoke("a").content == "one"
    assert second.invoke("b").content == "two"
    assert model.model_copy().invoke("c").content == "three"

    assert model.remaining == 0
    assert [call.tool_names for call in model.calls] == [["add"], ["add", "shout"], []]
    assert model.calls[1].kwargs == {"tool_choice": "auto"}
    assert model.calls[0].tools[0]["function"]["parameters"]["required"] == ["a", "b"]
    assert [call.messages[-1].content for call in model.calls] == ["a", "b", "c"]


def test_exhausted_script_raises_a_clear_error():
    model = ScriptedChatModel(responses=["only"])
    model.invoke("x")
    with pytest.raises(ScriptExhaustedError, match="all 1 scripted responses were used"):
        model.invoke("y")
    with pytest.raises(ScriptExhaustedError):
        list(model.stream("z"))


def test_exception_item_is_raised_and_the_script_goes_on():
    model = ScriptedChatModel(responses=[ConnectionError("model API down"), "recovered"])
    with pytest.raises(ConnectionError, match="model API down"):
        list(model.stream("x"))
    assert model.invoke("x").content == "recovered"


def test_callable_item_answers_from_the_conversation():
    def echo_last(messages):
        return {"content": f"you said {messages[-1].content}"}

    model = ScriptedChatModel(responses=[echo_last, lambda messages: ValueError("bad turn")])
    assert model.invoke("hello").content == "you said hello"
    with pytest.raises(ValueError, match="bad turn"):
        model.invoke("again")


def test_aimessage_item_keeps_given_ids_and_fills_missing_ones():
    item = AIMessage(
        content="",
        tool_calls=[
            {"name": "add", "args": {"a": 1, "b": 1}, "id": "mine"},
            {"name": "add", "args": {"a": 2, "b": 2}, "id": None},
        ],
    )
    model = ScriptedChatModel(responses=[item, {"tool_calls": [{"name": "add", "args": {}}]}])
    assert [c["id"] for c in aggregate(list(model.stream("x"))).tool_calls] == ["mine", "call_1"]
    assert model.invoke("y").tool_calls[0]["id"] == "call_2"


def test_malformed_item_is_reported():
    model = ScriptedChatModel(responses=[{"text": "typo in key"}, 42])
    with pytest.raises(ScriptItemError, match="text"):
        model.invoke("x")
    with pytest.raises(ScriptItemError):
        model.invoke("x")


class Plan(BaseModel):
    steps: list[str]


def test_with_structured_output_reads_a_tool_call_named_after_the_schema():
    model = ScriptedChatModel(responses=[{"tool_calls": [{"name": "Plan", "args": {"steps": ["search", "write"]}}]}])
    assert model.with_structured_output(Plan).invoke("plan it") == Plan(steps=["search", "write"])
    assert model.calls[0].tool_names == ["Plan"]


class AgentState(TypedDict):
    messages: Annotated[list, add_messages]


def tiny_agent(model: ScriptedChatModel):
    async def agent(state: AgentState) -> dict:
        reply = await model.bind_tools([add, shout]).ainvoke(state["messages"])
        return {"messages": [reply]}

    graph = StateGraph(AgentState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([add, shout]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "agent")
    return graph.compile()


async def test_stream_mode_messages_yields_text_and_tool_call_chunks():
    model = ScriptedChatModel(responses=[TWO_CALLS, "Both tools have answered now."])
    streamed = [
        item
        async for item in tiny_agent(model).astream({"messages": [HumanMessage("use tools")]}, stream_mode="messages")
    ]
    agent_chunks = [m for m, meta in streamed if meta["langgraph_node"] == "agent" and isinstance(m, AIMessageChunk)]
    by_id: dict[str, list[AIMessageChunk]] = {}
    for chunk in agent_chunks:
        by_id.setdefault(chunk.id, []).append(chunk)
    tool_turn, text_turn = (aggregate(chunks) for chunks in by_id.values())

    assert sum(1 for c in agent_chunks if c.tool_call_chunks) > 4
    assert [(c["name"], c["args"]) for c in tool_turn.tool_calls] == [
        ("add", {"a": 2, "b": 40}),
        ("shout", {"text": "a longer argument string"}),
    ]
    assert sum(1 for c in by_id[text_turn.id] if c.content) == 5
    assert text_turn.content == "Both tools have answered now."

    tool_results = {m.tool_call_id: m.content for m, _ in streamed if isinstance(m, ToolMessage)}
    assert tool_results == {"call_1": "42", "call_2": "A LONGER ARGUMENT STRING"}
    second_input = model.calls[1].messages
    assert [m.type for m in second_input] == ["human", "ai", "tool", "tool"]


# -- scripted OpenAI-compatible server -----------------------------------------------------


@pytest.fixture(scope="module")
def module_server():
    with run_openai_server() as server:
        yield server


@pytest.fixture
def server(module_server):
    module_server.reset()
    return module_server


def chat(server, **kwargs) -> ChatOpenAI:
    return ChatOpenAI(base_url=server.base_url, api_key="test", model="test-model", max_retries=0, **kwargs)


def test_openai_client_streams_text_in_token_chunks(server):
    server.script("default", ["Streaming works fine here"])
    chunks = list(chat(server, stream_usage=True).stream("hello"))
    assert len([c for c in chunks if c.content]) == 4
    total = aggregate(chunks)
    assert total.content == "Streaming works fine here"
    assert total.response_metadata["finish_reason"] == "stop"
    assert total.usage_metadata["output_tokens"] > 0
    [record] = server.requests()
    assert record["stream"] is True
    assert record["model"] == "test-model"
    assert record["messages"] == [{"role": "user", "content": "hello"}]


def test_openai_client_aggregates_two_parallel_streamed_tool_calls(server):
    server.script("default", [TWO_CALLS])
    model = chat(server).bind_tools([add, shout])
    chunks = list(model.stream([HumanMessage("use both")]))
    assert len([c for c in chunks if c.tool_call_chunks]) > 4
    total = aggregate(chunks)
    assert total.tool_calls == EXPECTED_TWO_CALLS
    assert total.response_metadata["finish_reason"] == "tool_calls"
    [record] = server.requests()
    assert [t["function"]["name"] for t in record["tools"]] == ["add", "shout"]


def test_openai_client_non_streaming_text_and_tool_calls(server):
    tool_call = {"tool_calls": [{"name": "add", "args": {"a": 1, "b": 2}}]}
    server.script("default", ["plain answer", tool_call])
    model = chat(server).bind_tools([add])
    assert model.invoke("first").content == "plain answer"
    reply = model.invoke("second")
    assert reply.tool_calls == [{"name": "add", "args": {"a": 1, "b": 2}, "id": "call_1", "type": "tool_call"}]
    assert [r["stream"] for r in server.requests()] == [False, False]


def test_reasoning_content_is_on_the_wire_but_chat_openai_drops_it(server):
    reasoning = {"reasoning": "think step by step", "content": "42"}
    server.script("default", [reasoning, reasoning, reasoning])
    raw = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
    stream = raw.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}], stream=True)
    wire = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content", "") for c in stream if c.choices)
    assert wire == "think step by step"

    # langchain-openai's ChatOpenAI reads only official OpenAI fields: reasoning_content
    # from vLLM/DeepSeek-style servers is dropped, streamed or not.
    streamed = aggregate(list(chat(server).stream("q")))
    assert streamed.content == "42"
    assert "reasoning_content" not in streamed.additional_kwargs
    assert "reasoning_content" not in chat(server).invoke("q").additional_kwargs


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (500, openai.InternalServerError),
        (429, openai.RateLimitError),
        (401, openai.AuthenticationError),
    ],
)
def test_scripted_http_errors_surface_as_openai_errors(server, status, error_type):
    server.script("default", [{"error": {"status": status, "message": "scripted failure"}}, "ok"])
    with pytest.raises(error_type, match="scripted failure"):
        chat(server).invoke("x")
    assert chat(server).invoke("x").content == "ok"
    assert [r["status"] for r in server.requests()] == [status, 200]


def test_missing_key_is_refused(server):
    server.script("default", ["never served"])
    reply = httpx.post(
        f"{server.base_url}/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "x"}]},
        trust_env=False,
    )
    assert reply.status_code == 401
    assert reply.json()["error"]["code"] == "invalid_api_key"
    blank = openai.OpenAI(
        base_url=server.base_url,
        api_key="unused",
        default_headers={"Authorization": "Bearer"},
        max_retries=0,
    )
    with pytest.raises(openai.AuthenticationError, match="bearer token"):
        blank.models.list()
    # An empty key never reaches the server: the openai client refuses it up front.
    with pytest.raises(openai.OpenAIError, match="api_key"):
        ChatOpenAI(base_url=server.base_url, api_key="", max_retries=0).invoke("x")
    models = openai.OpenAI(base_url=server.base_url, api_key="test").models.list()
    assert "scripted-chat" in [m.id for m in models.data]


def test_first_user_message_picks_the_script_even_across_threads(server):
    server.script("default", ["from default"])
    server.script("run-alpha", ["alpha one", "alpha two"])
    server.script("run-beta", ["beta one", "beta two"])
    model = chat(server)

    def conversation(key: str) -> list[str]:
        history = [HumanMessage(f"task {key}: go")]
        answers = []
        for turn in range(2):
            reply = model.invoke(history)
            answers.append(reply.content)
            history += [reply, HumanMessage(f"turn {turn} done")]
        return answers

    with ThreadPoolExecutor(max_workers=2) as pool:
        alpha, beta = pool.map(conversation, ["run-alpha", "run-beta"])
    assert alpha == ["alpha one", "alpha two"]
    assert beta == ["beta one", "beta two"]
    assert model.invoke("unrelated").content == "from default"
    with pytest.raises(openai.BadRequestError, match="exhausted"):
        model.invoke("task run-alpha: again")


def test_delayed_items_are_served_streamed_and_not(server):
    late = {"content": "late but here", "delay": 0.01, "delay_per_token": 0.01}
    server.script("default", [late, late, {"error": {"status": 503}, "delay": 0.01}])
    assert aggregate(list(chat(server).stream("x"))).content == "late but here"
    assert chat(server).invoke("x").content == "late but here"
    with pytest.raises(openai.APIStatusError, match="Scripted HTTP 503"):
        chat(server).invoke("x")


def test_slow_stream_records_client_disconnect(server):
    words = " ".join(f"w{i}" for i in range(40))
    server.script("default", [{"content": words, "delay_per_token": 0.05}])
    with httpx.stream(
        "POST",
        f"{server.base_url}/chat/completions",
        json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]},
        headers={"Authorization": "Bearer test"},
        trust_env=False,
    ) as reply:
        lines = reply.iter_lines()
        contents = []
        for line in lines:
            if line.startswith("data: ") and '"content": "w' in line:
                contents.append(json.loads(line[6:])["choices"][0]["delta"]["content"])
                if len(contents) == 2:
                    break
    assert contents == ["w0 ", "w1 "]
    deadline = time.monotonic() + 10
    while server.requests()[0]["status"] == "streaming" and time.monotonic() < deadline:
        time.sleep(0.05)
    [record] = server.requests()
    assert record["status"] == "disconnected"
    assert record["chunks_sent"] < 40


def test_bad_script_item_is_rejected(server):
    with pytest.raises(ScriptError, match="status"):
        server.script("default", [{"error": {"message": "no status"}}])
    with pytest.raises(ScriptError, match="Unknown keys"):
        server.script("default", [{"contents": "typo"}])


def test_embeddings_are_deterministic_normalised_and_word_sensitive(server):
    embeddings = OpenAIEmbeddings(base_url=server.base_url, api_key="test", check_embedding_ctx_length=False)
    query = embeddings.embed_query("postgres vector index tuning")
    assert len(query) == 384
    assert all(isinstance(x, float) for x in query)
    assert math.isclose(sum(x * x for x in query), 1.0, rel_tol=1e-5)
    near, far = embeddings.embed_documents(["tuning a postgres vector index", "bake sourdough bread at home"])
    assert cosine(query, near) > cosine(query, far) + 0.5
    assert embeddings.embed_query("postgres vector index tuning") == pytest.approx(query)
    assert query == pytest.approx(embed_text("postgres vector index tuning", 384), abs=1e-6)
    assert len(embed_text("", 16)) == 16


def test_standalone_server_process_serves_the_same_api():
    with spawn_openai_server(embedding_dim=32) as server:
        server.script("proc-key", ["from the process"])
        model = ChatOpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        assert model.invoke("proc-key question").content == "from the process"
        vector = OpenAIEmbeddings(
            base_url=server.base_url, api_key="test", check_embedding_ctx_length=False
        ).embed_query("hello")
        assert len(vector) == 32
        assert [r["path"] for r in server.requests()] == ["/v1/chat/completions", "/v1/embeddings"]


def test_the_script_is_the_key_occurring_first_in_the_first_user_message(server):
    server.script("k-own", ["own answer"])
    server.script("k-other", ["other answer"])
    server.script("k-own-longer", ["longer answer"])
    # what the runtime appends after the user's words (recalled memories quoting another
    # conversation's key) does not pick the script; at one position the longest key wins
    assert chat(server).invoke("k-own: hi\n\nWhat you already know about me: k-other").content == "own answer"
    assert chat(server).invoke("k-own-longer says hi").content == "longer answer"
