"""The chat-model factory through the real langchain-openai client and the scripted server."""

from __future__ import annotations

import os

import pytest
from langchain_core.messages import HumanMessage

from graphs.react.graph import graph
from graphs.runtime.context import Context
from graphs.runtime.models import ModelConfigError, is_transient_model_error, load_chat_model


async def test_reasoning_content_survives_streaming_and_plain_calls(openai_endpoint):
    openai_endpoint.script(
        "default",
        [
            {"content": "42", "reasoning": "six times seven"},
            {"content": "43", "reasoning": "one more"},
        ],
    )
    model = load_chat_model("openai:qwen3")
    chunks = [chunk async for chunk in model.astream([HumanMessage("6*7?")])]
    merged = sum(chunks[1:], chunks[0])
    assert merged.content == "42"
    assert merged.additional_kwargs["reasoning_content"] == "six times seven"
    plain = await model.ainvoke([HumanMessage("again")])
    assert plain.additional_kwargs["reasoning_content"] == "one more"
    # no key needed for a compatible server; a placeholder bearer is sent
    assert openai_endpoint.requests()[0]["model"] == "qwen3"


async def test_react_over_the_openai_client_emits_thinking_and_tool_results(openai_endpoint):
    openai_endpoint.script(
        "default",
        [
            {
                "content": "",
                "reasoning": "I should compute.",
                "tool_calls": [{"name": "calculator", "args": {"expression": "2+2"}, "id": "r1"}],
            },
            "4",
        ],
    )
    events = []
    async for mode, chunk in graph.astream(
        {"messages": [HumanMessage("2+2?")]},
        context=Context(model="openai:qwen3", tools=["calculator"]),
        stream_mode=["custom", "values"],
    ):
        if mode == "custom":
            events.append(chunk)
        else:
            final = chunk
    assert [e["text"] for e in events if e["event"] == "thinking"] == ["I should compute."]
    assert final["messages"][-1].content == "4"
    second = openai_endpoint.requests()[-1]
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]


async def test_server_errors_are_retried_then_reported(openai_endpoint, monkeypatch):
    monkeypatch.setenv("AGENT_RETRY_BASE_DELAY", "0.01")
    openai_endpoint.script(
        "default",
        [
            {"error": {"status": 503, "message": "overloaded"}},
            {"error": {"status": 429, "message": "slow down"}},
            "finally",
        ],
    )
    result = await graph.ainvoke({"messages": [HumanMessage("hi")]}, context=Context(model="openai:m", model_retries=2))
    assert result["messages"][-1].content == "finally"
    openai_endpoint.script("default", [{"error": {"status": 401, "message": "bad key"}}])
    with pytest.raises(Exception) as info:
        await graph.ainvoke({"messages": [HumanMessage("hi")]}, context=Context(model="openai:m"))
    assert not is_transient_model_error(info.value)  # 401 is not retried
    assert len([r for r in openai_endpoint.requests() if r.get("status") == 401]) == 1


@pytest.mark.parametrize(
    "spec, message",
    [
        ("gpt-4o", "must look like 'provider:model'"),
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("openai:gpt-4o-mini", "OPENAI_API_KEY"),
    ],
)
def test_unusable_models_fail_with_what_to_set(spec, message, monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ModelConfigError, match=message):
        load_chat_model(spec)


def test_the_private_chatopenai_hooks_we_extend_still_exist_with_their_signatures():
    """ChatOpenAICompatible extends two private ChatOpenAI methods to keep `reasoning_content`
    (langchain-openai does not expose it publicly). If a release renames them or changes their
    parameters, fail here, loudly, rather than silently dropping the reasoning text."""
    import inspect

    from langchain_openai import ChatOpenAI

    chunk = inspect.signature(ChatOpenAI._convert_chunk_to_generation_chunk)
    assert list(chunk.parameters) == ["self", "chunk", "default_chunk_class", "base_generation_info"]
    result = inspect.signature(ChatOpenAI._create_chat_result)
    assert list(result.parameters)[:3] == ["self", "response", "generation_info"]


async def test_top_p_and_max_tokens_reach_the_provider_only_when_set(openai_endpoint):
    openai_endpoint.script("default", ["short answer", "plain answer"])
    context = Context(model="openai:qwen3", top_p=0.5, max_tokens=64, remember=False)
    await graph.ainvoke({"messages": [HumanMessage("hi")]}, context=context)
    await graph.ainvoke({"messages": [HumanMessage("hi")]}, context=Context(model="openai:qwen3", remember=False))
    limited, plain = [r["sampling"] for r in openai_endpoint.requests() if r["path"] == "/v1/chat/completions"]
    assert limited["top_p"] == 0.5 and 64 in (limited.get("max_tokens"), limited.get("max_completion_tokens"))
    assert "top_p" not in plain and "max_tokens" not in plain and "max_completion_tokens" not in plain


@pytest.mark.parametrize("bad", [{"top_p": 0}, {"top_p": 1.5}, {"max_tokens": 0}, {"max_tokens": "64"}])
def test_out_of_range_model_parameters_are_refused(bad):
    with pytest.raises(ValueError, match="Invalid context field"):
        Context(**bad)


def test_the_graphs_load_without_the_openai_client_which_comes_with_the_first_openai_model():
    """A server's start-up imports every graph; `langchain_openai` (and `openai`) wait for the
    first `openai:*` model (graphs/runtime/openai_compatible.py), so a replica answers sooner."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import graphs.router.graph, graphs.react.graph, graphs.memory_writer.graph\n"
        "import graphs.plan_execute.graph, graphs.deep_research.graph, graphs.runtime.structured\n"
        "print(sorted(m for m in ('langchain_openai', 'openai') if m in sys.modules))\n"
        "from graphs.runtime.models import load_chat_model\n"
        "model = load_chat_model('openai:local')\n"
        "print(type(model).__name__, 'langchain_openai' in sys.modules)\n"
    )
    env = {**os.environ, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "k"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "ChatOpenAICompatible True"]
