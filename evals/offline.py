"""The offline model: a scripted policy that lets the eval runner drive the real graphs without a key.

It is NOT a model under evaluation. For the turn an example evaluates, it asks for the tool calls of
the example's reference trajectory (only those whose tool the graph actually bound), then answers
with what the real tools returned; any other turn gets a short acknowledgement. Memory extraction
(the `MemoryExtraction` structured call) keeps each user message verbatim as one episodic and one
semantic memory. So offline scores measure the graph, tools, registry, memory store and the eval
runner itself, deterministically: a graph that stops binding a tool, drops or garbles a tool call,
loses a tool result or recalls the wrong memory scores below its threshold.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from graphs.runtime.models import register_model_provider
from tests.fakes import ScriptedCall, ScriptedChatModel, ScriptState, scripted_message

PROVIDER = "offline"
MODEL = f"{PROVIDER}:policy"
EXTRACTION_TOOL = "MemoryExtraction"
ACKNOWLEDGEMENT = "Noted."
_USER_LINE = re.compile(r"^User: (.*)$", re.MULTILINE)


class OfflinePolicy:
    """Reference tool steps by the text of the user message that starts the evaluated turn."""

    def __init__(self) -> None:
        self.steps: dict[str, list[list[dict]]] = {}

    def add(self, user_text: str, trajectory: Iterable[dict]) -> None:
        """Script the turn started by `user_text` after a reference trajectory (message dicts)."""
        steps = [
            [{"name": c["name"], "args": c.get("args") or {}} for c in m["tool_calls"]]
            for m in trajectory
            if m.get("role") in ("assistant", "ai") and m.get("tool_calls")
        ]
        if self.steps.get(user_text, steps) != steps:
            raise ValueError(f"two examples script the same user message differently: {user_text!r}")
        self.steps[user_text] = steps

    def answer(self, messages: list[BaseMessage], tool_names: list[str]) -> dict | str:
        """The next model answer for this conversation, given the tools bound for the call."""
        if EXTRACTION_TOOL in tool_names:
            return _extraction(messages)
        start = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=0)
        turn = messages[start:]
        step = sum(isinstance(m, AIMessage) for m in turn)
        planned = self.steps.get(turn[0].text if turn else "", [])
        if step < len(planned):
            calls = [call for call in planned[step] if call["name"] in tool_names]
            missing = [call["name"] for call in planned[step] if call["name"] not in tool_names]
            if not calls:
                return f"I cannot answer that: the tool(s) {', '.join(missing)} are not available."
            return {"tool_calls": calls}
        results = [_result_text(m) for m in turn if isinstance(m, ToolMessage)]
        return " ".join(results) if results else ACKNOWLEDGEMENT


def _result_text(message: ToolMessage) -> str:
    """A tool result as an answer would quote it: the best search hit, else the whole content."""
    text = message.text
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if isinstance(value, dict) and isinstance(value.get("results"), list):
        return value["results"][0]["text"] if value["results"] else "Nothing found."
    return text


def _extraction(messages: list[BaseMessage]) -> dict:
    said = _USER_LINE.findall(messages[-1].text if messages else "")
    items = [{"text": text, "importance": 0.6} for text in said]
    return {"tool_calls": [{"name": EXTRACTION_TOOL, "args": {
        "episodic": items,
        "semantic": [{**item, "category": "fact"} for item in items],
        "profile_updates": {},
    }}]}


class _PolicyScript(ScriptState):
    """A never-ending script: every call is answered by the policy."""

    def __init__(self, policy: OfflinePolicy) -> None:
        super().__init__([])
        self.policy = policy

    def take(self, messages: list[BaseMessage], kwargs: dict) -> AIMessage:
        tools = list(kwargs.get("tools") or [])
        call = ScriptedCall(list(messages), tools, {k: v for k, v in kwargs.items() if k != "tools"})
        # Unique ids: the graph builds a new model per step, and ids must not repeat in a thread.
        return scripted_message(
            self.policy.answer(list(messages), call.tool_names), lambda: f"call_{uuid.uuid4().hex[:12]}"
        )


def install(policy: OfflinePolicy) -> str:
    """Make `offline:policy` resolve to a scripted model driven by `policy`; returns that spec."""
    register_model_provider(
        PROVIDER, lambda name, **kw: ScriptedChatModel(model_name=name, script=_PolicyScript(policy))
    )
    return MODEL
