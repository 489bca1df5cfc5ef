"""Eval targets: run a real graph on one example's inputs and return what evaluators read.

A target is `async (inputs, env) -> outputs`. `Targets.sync(...)` turns it into the plain
function `langsmith.evaluate` calls, running every example on one background event loop (model
clients and stores keep their connections across examples) and, offline, with tracing off.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import os
import re
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import langsmith
from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import convert_to_openai_messages
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from evals.corpus import CorpusServer
from graphs.deep_research.context import ResearchContext
from graphs.deep_research.graph import builder as research_builder
from graphs.plan_execute.context import PlanExecuteContext
from graphs.plan_execute.graph import builder as plan_execute_builder
from graphs.react.graph import builder as react_builder
from graphs.router.context import RouterContext
from graphs.router.graph import builder as router_builder
from graphs.runtime.context import Context
from graphs.runtime.memory_schedule import wait_for_local_extractions
from store import knowledge
from tools.registry import select_tools

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@dataclass
class TargetEnv:
    """What every target gets: the model spec, the embeddings for fresh stores, tracing on/off."""

    model: str
    embeddings: Embeddings
    trace: bool = False
    dims: int = field(default=0)

    def new_store(self) -> InMemoryStore:
        """An empty in-memory store indexing memory texts with the configured embeddings."""
        dims = self.dims or len(self.embeddings.embed_query("dimension probe"))
        self.dims = dims
        return InMemoryStore(index={"dims": dims, "embed": self.embeddings, "fields": ["text"]})


Target = Callable[[dict, TargetEnv], Awaitable[dict]]


class BackgroundLoop:
    """One event loop in a daemon thread; `run(coro)` waits for it from any thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="evals-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Awaitable[dict]) -> dict:
        """Run `coro` on the loop in the caller's context (LangSmith's run tree included)."""
        context = contextvars.copy_context()
        result: concurrent.futures.Future = concurrent.futures.Future()

        def start() -> None:
            task = self.loop.create_task(coro, context=context)
            task.add_done_callback(
                lambda t: (
                    result.cancel()
                    if t.cancelled()
                    else result.set_exception(t.exception())
                    if t.exception()
                    else result.set_result(t.result())
                )
            )

        self.loop.call_soon_threadsafe(start)
        return result.result()

    def close(self) -> None:
        """Stop the loop and its thread."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


def as_sync(target: Target, env: TargetEnv, loop: BackgroundLoop) -> Callable[[dict], dict]:
    """The function `langsmith.evaluate` calls for `target`."""

    async def traced_or_not(inputs: dict) -> dict:
        if env.trace:
            return await target(inputs, env)
        # A LangGraph run still uploads traces when a key is set unless tracing is off here.
        with langsmith.tracing_context(enabled=False):
            return await target(inputs, env)

    def run(inputs: dict) -> dict:
        return loop.run(traced_or_not(inputs))

    run.__name__ = getattr(target, "__name__", "target")
    return run


def turn_outputs(messages: list[BaseMessage], first_new: int, **extra) -> dict:
    """Outputs of one turn: its new messages (OpenAI format), final answer, tool calls, errors."""
    new = messages[first_new:]
    answer = new[-1].text if new and isinstance(new[-1], AIMessage) else ""
    calls = [{"name": c["name"], "args": c["args"]} for m in new if isinstance(m, AIMessage) for c in m.tool_calls]
    failed = [m.tool_call_id for m in new if isinstance(m, ToolMessage) and m.status == "error"]
    return {
        "messages": convert_to_openai_messages(new),
        "answer": answer,
        "tool_calls": calls,
        "failed_tool_calls": failed,
        **extra,
    }


async def _ask(graph, text: str, thread_id: str, context: Context) -> tuple[list[BaseMessage], int]:
    config = {"configurable": {"thread_id": thread_id}}
    before = await graph.aget_state(config)
    first_new = len(before.values.get("messages", [])) + 1 if before.values else 1
    state = await graph.ainvoke({"messages": [HumanMessage(text)]}, config, context=context)
    return state["messages"], first_new


async def react_target(inputs: dict, env: TargetEnv) -> dict:
    """`react` on one user message (earlier messages of `inputs.messages` come first, same
    thread); memory off, tools `inputs.tools` (every tool when absent)."""
    graph = react_builder.compile(checkpointer=InMemorySaver(), store=env.new_store())
    context = Context(
        model=env.model,
        user_id=f"eval-{uuid.uuid4().hex[:8]}",
        tools=inputs.get("tools"),
        remember=False,
        **inputs.get("context", {}),
    )
    thread = str(uuid.uuid4())
    messages, first_new = [], 0
    for message in inputs["messages"]:
        messages, first_new = await _ask(graph, message["content"], thread, context)
    state = await graph.aget_state({"configurable": {"thread_id": thread}})
    return turn_outputs(messages, first_new, steps=state.values.get("steps", 0))


async def memory_target(inputs: dict, env: TargetEnv) -> dict:
    """`react` with memory on: each of `inputs.sessions` is a conversation in a thread of its
    own (extraction finishes after every turn), then `inputs.question` is asked in a new thread.
    `inputs.other_user_sessions` are told by another user first (their memories must not leak)."""
    graph = react_builder.compile(checkpointer=InMemorySaver(), store=env.new_store())
    user = f"eval-{uuid.uuid4().hex[:8]}"
    for who, sessions in ((f"{user}-other", inputs.get("other_user_sessions", [])), (user, inputs["sessions"])):
        context = Context(model=env.model, user_id=who, tools=inputs.get("tools"), remember=True)
        for session in sessions:
            thread = str(uuid.uuid4())
            for text in session:
                await _ask(graph, text, thread, context)
                await wait_for_local_extractions()
    context = Context(model=env.model, user_id=user, tools=inputs.get("tools"), remember=False)
    messages, first_new = await _ask(graph, inputs["question"], str(uuid.uuid4()), context)
    return turn_outputs(messages, first_new)


def offline(env: TargetEnv) -> bool:
    """Whether the target runs on the scripted offline policy (no real model, no network)."""
    return env.model.startswith("offline:")


@contextmanager
def environment(values: dict[str, str | None]) -> Iterator[None]:
    """Set (or, for None, unset) environment variables for the block."""
    previous = {key: os.environ.get(key) for key in values}
    try:
        for key, value in values.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


async def router_target(inputs: dict, env: TargetEnv) -> dict:
    """`router`'s decision for `inputs.message`: the knowledge bases `inputs.kbs` ({name,
    description}) exist in a fresh store, `inputs.context` holds `kb` / `auto_route` / ....
    The run stops after `decide_route` (the decision), before any answer path runs."""
    store = env.new_store()
    for kb in inputs.get("kbs", []):
        await knowledge.create_kb(store, kb["name"], kb.get("description", ""))
    graph = router_builder.compile(checkpointer=InMemorySaver(), store=store, interrupt_after=["decide_route"])
    context = RouterContext(
        model=env.model, user_id=f"eval-{uuid.uuid4().hex[:8]}", remember=False, **inputs.get("context", {})
    )
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    await graph.ainvoke({"messages": [HumanMessage(inputs["message"])]}, config, context=context)
    decision = (await graph.aget_state(config)).values.get("decision") or {}
    return {
        key: decision.get(key)
        for key in ("route", "kb_prefix", "worker_name", "method", "confidence", "reason", "requested_kb_prefix")
    }


async def plan_execute_target(inputs: dict, env: TargetEnv) -> dict:
    """`plan_execute` on `inputs.messages` with tools `inputs.tools` (every tool when absent):
    the plan, the execution log, the status, the answer and the tools steps were allowed."""
    context = PlanExecuteContext(
        model=env.model,
        user_id=f"eval-{uuid.uuid4().hex[:8]}",
        remember=False,
        tools=inputs.get("tools"),
        **inputs.get("context", {}),
    )
    graph = plan_execute_builder.compile(checkpointer=InMemorySaver(), store=env.new_store())
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    messages = [HumanMessage(m["content"]) for m in inputs["messages"]]
    state = await graph.ainvoke({"messages": messages}, config, context=context)
    allowed = sorted(t.name for t in await select_tools(context.tools))
    return {
        "plan": state.get("plan", []),
        "execution_log": state.get("execution_log", []),
        "status": state.get("status"),
        "answer": state.get("final_answer") or state["messages"][-1].text,
        "allowed_tools": allowed,
        "waves": state.get("waves", 0),
        "replans": state.get("replans", 0),
    }


_URL = re.compile(r"(?:https?|kb)://[^\s<>\[\]()\"'`]+")


async def deep_research_target(inputs: dict, env: TargetEnv) -> dict:
    """`deep_research` on `inputs.messages`; offline, the web tools search and read the fixed
    corpus of evals/corpus.py on a loopback server. Returns the report, the URLs retrieved in
    the run, the URLs the report cites and what the citation check removed."""
    web: dict[str, str | None] = {}
    if offline(env):
        web = {
            "WEB_SEARCH_PROVIDER": "searxng",
            "SEARXNG_URL": CorpusServer.base_url(),
            "WEB_ALLOW_LOOPBACK": "1",
            **dict.fromkeys(PROXY_VARIABLES),
        }
    context = ResearchContext(
        model=env.model, user_id=f"eval-{uuid.uuid4().hex[:8]}", remember=False, **inputs.get("context", {})
    )
    graph = research_builder.compile(checkpointer=InMemorySaver(), store=env.new_store())
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    messages = [HumanMessage(m["content"]) for m in inputs["messages"]]
    checks = []
    with environment(web):
        async for event in graph.astream({"messages": messages}, config, context=context, stream_mode="custom"):
            checks.append(event)
    state = (await graph.aget_state(config)).values
    report = state.get("report", "")
    [check] = [c for c in checks if c.get("event") == "citations_checked"] or [{}]
    return {
        "report": report,
        "answer": state["messages"][-1].text if state.get("messages") else "",
        "retrieved_urls": sorted({s["url"] for s in state.get("sources", [])}),
        "cited_urls": sorted({u.rstrip(".,;:!?*_'\"") for u in _URL.findall(report)}),
        "removed_urls": check.get("invented_urls", []),
        "removed_numbers": check.get("invalid_numbers", []),
        "attributed_citations": check.get("attributed", 0),  # sentences cited from the notes, not by the model
        "sub_questions": state.get("plan", []),
    }
