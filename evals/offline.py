"""The offline model: a scripted policy that lets the eval runner drive the real graphs without a key.

It is NOT a model under evaluation. For the turn an example evaluates, it asks for the tool calls of
the example's reference trajectory (only those whose tool the graph actually bound), then answers
with what the real tools returned; any other turn gets a short acknowledgement. Memory extraction
(the `MemoryExtraction` structured call) keeps each user message verbatim as one episodic and one
semantic memory. So offline scores measure the graph, tools, registry, memory store and the eval
runner itself, deterministically: a graph that stops binding a tool, drops or garbles a tool call,
loses a tool result or recalls the wrong memory scores below its threshold. Suites of graphs with
structured outputs (router, plan_execute, deep_research) script their turn with a `TurnScript`
built by evals/scripted.py: structured answers taken from the example's reference, text answers
written from what the graph hands the model.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from graphs.runtime.models import register_model_provider
from tests.fakes import ScriptedCall, ScriptedChatModel, ScriptState, scripted_message

PROVIDER = "offline"
MODEL = f"{PROVIDER}:policy"
EXTRACTION_TOOL = "MemoryExtraction"
ACKNOWLEDGEMENT = "Noted."
_USER_LINE = re.compile(r"^User: (.*)$", re.MULTILINE)


Writer = Callable[[list[BaseMessage], dict], "str | None"]
"""A suite's text answers: (messages, the turn's `extra`) -> text, or None for the default."""


@dataclass
class TurnScript:
    """What the offline model does in one evaluated turn.

    steps: tool calls per model step (react trajectories); structured: arguments of structured
    outputs by schema name (`Plan`, `RouteChoice`, `ResearchPlan`, ...), answered whenever that
    schema's tool is bound; writer + extra: the turn's text answers (plan_execute's synthesis,
    deep_research's notes and report), else the tool results."""

    steps: list[list[dict]] = field(default_factory=list)
    structured: dict[str, dict] = field(default_factory=dict)
    writer: Writer | None = None
    extra: dict = field(default_factory=dict)


def trajectory_steps(trajectory: Iterable[dict]) -> list[list[dict]]:
    """The tool calls of a reference trajectory (message dicts), one list per assistant step."""
    return [
        [{"name": c["name"], "args": c.get("args") or {}} for c in m["tool_calls"]]
        for m in trajectory
        if m.get("role") in ("assistant", "ai") and m.get("tool_calls")
    ]


class OfflinePolicy:
    """Turn scripts by the text of the user message that starts the evaluated turn.

    A model call belongs to the turn whose user message starts its last human message, or, for
    the prompts graphs build around it (plan steps, research notes), the longest scripted user
    message that the last human message contains."""

    def __init__(self) -> None:
        self.scripts: dict[str, TurnScript] = {}

    def add(self, user_text: str, trajectory: Iterable[dict]) -> None:
        """Script the turn started by `user_text` after a reference trajectory (message dicts)."""
        self.add_script(user_text, TurnScript(steps=trajectory_steps(trajectory)))

    def add_script(self, user_text: str, script: TurnScript) -> None:
        """Script the turn started by `user_text`."""
        if self.scripts.get(user_text, script) != script:
            raise ValueError(f"two examples script the same user message differently: {user_text!r}")
        self.scripts[user_text] = script

    def _script(self, text: str) -> TurnScript:
        if text in self.scripts:
            return self.scripts[text]
        inside = [key for key in self.scripts if key and key in text]
        return self.scripts[max(inside, key=len)] if inside else TurnScript()

    def answer(self, messages: list[BaseMessage], tool_names: list[str]) -> dict | str:
        """The next model answer for this conversation, given the tools bound for the call."""
        if EXTRACTION_TOOL in tool_names:
            return _extraction(messages)
        start = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=0)
        turn = messages[start:]
        script = self._script(turn[0].text if turn else "")
        for name in tool_names:
            if name in script.structured:
                return {"tool_calls": [{"name": name, "args": script.structured[name]}]}
        step = sum(isinstance(m, AIMessage) for m in turn)
        planned = script.steps
        if step < len(planned):
            calls = [call for call in planned[step] if call["name"] in tool_names]
            missing = [call["name"] for call in planned[step] if call["name"] not in tool_names]
            if not calls:
                return f"I cannot answer that: the tool(s) {', '.join(missing)} are not available."
            return {"tool_calls": calls}
        if script.writer is not None and (text := script.writer(list(messages), script.extra)) is not None:
            return text
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
    return {
        "tool_calls": [
            {
                "name": EXTRACTION_TOOL,
                "args": {
                    "episodic": items,
                    "semantic": [{**item, "category": "fact"} for item in items],
                    "profile_updates": {},
                },
            }
        ]
    }


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
