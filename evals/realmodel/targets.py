"""The real-model tier's targets: run one task's graph in-process and return what scoring reads.

The graphs are compiled here with an in-memory checkpointer and store (memory texts indexed with
the configured embeddings), exactly as evals/targets.py does for the offline suites; router and
plan_execute reuse those targets. deep_research always searches and reads the loopback corpus of
evals/corpus.py (with `"search": "down"`: a search engine that refuses connections).
"""

from __future__ import annotations

import socket
import time
import uuid

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver

from evals.corpus import CorpusServer
from evals.realmodel.wire import check_call
from evals.targets import (
    _URL,
    PROXY_VARIABLES,
    TargetEnv,
    _ask,
    environment,
    plan_execute_target,
    router_target,
)
from graphs.deep_research.context import ResearchContext
from graphs.deep_research.graph import builder as research_builder
from graphs.memory_writer.graph import builder as writer_builder
from graphs.react.graph import builder as react_builder
from graphs.runtime.context import Context
from graphs.runtime.memory_schedule import wait_for_local_extractions
from store import memory
from tools.registry import select_tools


async def offered_schemas(names: list[str] | None) -> dict[str, dict]:
    """name -> parameters JSON schema of the tools a run with `tools=names` may call."""
    return {
        tool.name: convert_to_openai_tool(tool)["function"].get("parameters") or {"type": "object"}
        for tool in await select_tools(names)
    }


def turn_record(messages: list[BaseMessage], first_new: int, offered: dict[str, dict]) -> dict:
    """One turn's answer, the tool calls the graph executed (each checked against the tools the
    run offered), their results and the model's unparseable calls (`invalid_tool_calls`)."""
    new = messages[first_new:]
    answer = new[-1].text if new and isinstance(new[-1], AIMessage) else ""
    calls, invalid = [], []
    for message in new:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                calls.append(
                    {
                        "name": call["name"],
                        "args": call["args"],
                        "problem": check_call(call["name"], call["args"], offered),
                    }
                )
            invalid += [{"name": c.get("name"), "error": c.get("error")} for c in message.invalid_tool_calls]
    results = [{"name": m.name, "status": m.status, "content": m.text[:500]} for m in new if isinstance(m, ToolMessage)]
    return {"answer": answer, "tool_calls": calls, "invalid_tool_calls": invalid, "tool_results": results}


async def react_task(inputs: dict, env: TargetEnv) -> dict:
    """`react` on the user messages of `inputs.messages` (one thread), memory off."""
    graph = react_builder.compile(checkpointer=InMemorySaver(), store=env.new_store())
    context = Context(
        model=env.model,
        user_id=f"eval-{uuid.uuid4().hex[:8]}",
        tools=inputs.get("tools"),
        remember=False,
        **inputs.get("context", {}),
    )
    offered = await offered_schemas(context.tools)
    thread = str(uuid.uuid4())
    messages: list[BaseMessage] = []
    first_new = 0
    for message in inputs["messages"]:
        messages, first_new = await _ask(graph, message["content"], thread, context)
    return turn_record(messages, first_new, offered)


async def _memories(store, user_id: str) -> list[str]:
    """What is stored about the user: each memory's text, and each profile field as `key: value`
    (a stated city or job lands in the profile, which the graphs read back as well)."""
    texts = []
    for kind in memory.MEMORY_KINDS:
        for item in await store.asearch(memory.namespace(user_id, kind), limit=100):
            texts.append(str(item.value.get("text", "")))
    fields = (await memory.get_profile(store, user_id, categories=[])).get("fields") or {}
    texts += [f"{key}: {value}" for key, value in fields.items()]
    return texts


async def memory_task(inputs: dict, env: TargetEnv) -> dict:
    """`react` with memory on: each of `inputs.sessions` in a thread of its own (background
    extraction finishes after every turn), then `inputs.question` in a new thread. Sessions of
    `inputs.other_user_sessions` are told by another user first; `inputs.seed` are semantic
    memories saved for the user beforehand (the question is then answered from what recall finds)."""
    store = env.new_store()
    graph = react_builder.compile(checkpointer=InMemorySaver(), store=store)
    user = f"eval-{uuid.uuid4().hex[:8]}"
    for text in inputs.get("seed", []):
        await memory.open(store, user).save("semantic", text)
    told = []
    for who, sessions in ((f"{user}-other", inputs.get("other_user_sessions", [])), (user, inputs["sessions"])):
        context = Context(model=env.model, user_id=who, tools=inputs.get("tools"), remember=True)
        offered = await offered_schemas(context.tools)
        for session in sessions:
            thread = str(uuid.uuid4())
            for text in session:
                messages, first_new = await _ask(graph, text, thread, context)
                await wait_for_local_extractions(now=True)
                if who == user:
                    told.append(turn_record(messages, first_new, offered))
    saved = await _memories(store, user)
    context = Context(model=env.model, user_id=user, tools=inputs.get("tools"), remember=False)
    offered = await offered_schemas(context.tools)
    messages, first_new = await _ask(graph, inputs["question"], str(uuid.uuid4()), context)
    return {**turn_record(messages, first_new, offered), "told": told, "saved_memories": saved}


async def writer_task(inputs: dict, env: TargetEnv) -> dict:
    """`memory_writer` on one finished turn (`inputs.messages`): what it saved."""
    store = env.new_store()
    graph = writer_builder.compile(store=store)
    user = f"eval-{uuid.uuid4().hex[:8]}"
    state = await graph.ainvoke(
        {"messages": inputs["messages"], "thread_id": str(uuid.uuid4())},
        context=Context(model=env.model, user_id=user, remember=False),
    )
    return {"result": state.get("result"), "memories": await _memories(store, user)}


async def facts_task(inputs: dict, env: TargetEnv) -> dict:
    """`memory_writer` on one finished turn (`inputs.messages`) for a user whose profile already
    holds `inputs.profile`: everything stored afterwards (`memories`, the seeded profile fields as
    `key: value` too) and what was stored before (`before`), for precision and recall."""
    store = env.new_store()
    graph = writer_builder.compile(store=store)
    user = f"eval-{uuid.uuid4().hex[:8]}"
    if inputs.get("profile"):
        await memory.open(store, user).update_profile(inputs["profile"])
    before = await _memories(store, user)
    state = await graph.ainvoke(
        {"messages": inputs["messages"], "thread_id": str(uuid.uuid4())},
        context=Context(model=env.model, user_id=user, remember=False),
    )
    return {"result": state.get("result"), "memories": await _memories(store, user), "before": before}


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def research_task(inputs: dict, env: TargetEnv) -> dict:
    """`deep_research` over the loopback corpus (or, `inputs.search == "down"`, an unreachable
    search engine): the report, retrieved and cited URLs, the failure message and the time."""
    down = inputs.get("search") == "down"
    web: dict[str, str | None] = {
        "WEB_SEARCH_PROVIDER": "searxng",
        "SEARXNG_URL": f"http://127.0.0.1:{closed_port()}" if down else CorpusServer.base_url(),
        "WEB_ALLOW_LOOPBACK": "1",
        **dict.fromkeys(PROXY_VARIABLES),
    }
    context = ResearchContext(
        model=env.model, user_id=f"eval-{uuid.uuid4().hex[:8]}", remember=False, **inputs.get("context", {})
    )
    graph = research_builder.compile(checkpointer=InMemorySaver(), store=env.new_store())
    config: RunnableConfig = {"configurable": {"thread_id": str(uuid.uuid4())}}
    messages: list[AnyMessage] = [HumanMessage(m["content"]) for m in inputs["messages"]]
    events: list[dict] = []
    started = time.monotonic()
    error = None
    with environment(web):
        try:
            async for event in graph.astream({"messages": messages}, config, context=context, stream_mode="custom"):
                events.append(event)
        except Exception as exc:  # with search down a failed run is the outcome scored
            if not down:
                raise
            error = f"{type(exc).__name__}: {exc}"
    elapsed = round(time.monotonic() - started, 1)
    state = (await graph.aget_state(config)).values
    report = state.get("report", "")
    answer = state["messages"][-1].text if state.get("messages") else ""
    [check] = [e for e in events if e.get("event") == "citations_checked"] or [{}]
    failed = [e for e in events if e.get("event") == "research_failed"]
    return {
        "report": report,
        "answer": answer[:3000],
        "retrieved_urls": sorted({s["url"] for s in state.get("sources", [])}),
        "cited_urls": sorted({u.rstrip(".,;:!?*_'\"") for u in _URL.findall(report)}),
        "removed_urls": check.get("invented_urls", []),
        "attributed_citations": check.get("attributed", 0),  # sentences cited from the notes, not by the model
        "sub_questions": state.get("plan", []),
        "elapsed_s": elapsed,
        "failure_message": (error or (answer if not report.strip() else "")) if down else "",
        "failure_event": failed[0] if failed else None,
    }


TARGETS = {
    "react": react_task,
    "router": router_target,
    "plan_execute": plan_execute_target,
    "deep_research": research_task,
    "memory": memory_task,
    "memory_writer": writer_task,
    "writer_facts": facts_task,
}
