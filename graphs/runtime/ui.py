"""Generative-UI messages for chat clients (agent-chat-ui), made from the custom events.

`emit` (graphs/runtime/events.py) calls `push_for_event` for every event: the events listed in
`UI_MESSAGES` also go out as a LangGraph UI message (the `UIMessage` that `langgraph.graph.ui.push_ui_message` streams, with `"event": "ui"`) on the
same `custom` stream, so a graph emits one event and SDK clients and chat clients both get it.
One UI message per card: its id is fixed by the run and the card's key, and later events update
it in place (`merge`), so a step's card goes from started to completed. docs/events.md lists
which UI message each event becomes.

agent-chat-ui shows a card only under the AI message its `metadata.message_id` names, below that
message's text. A card is linked when pushed to the run's progress message
(`progress_message_id`): an empty AI message that plan_execute and deep_research add to
`messages` before their long phase (`start_progress`), so steps and researchers show while the
run goes on, above the answer that follows. At the end of the turn `link_to_answer` leaves them
there (moving them under the answer would put the answer above them: the text would jump), links
the turn's other cards (those pushed while no progress message was shown) under the answer, and
removes the progress messages no card is linked to. Models never see progress messages
(`chat_messages`).

Tool calls have no card of their own: a chat client shows react's tool calls from its messages,
and a plan step's call is its step's card (one card per tool call).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config, get_stream_writer
from langgraph.graph.ui import AnyUIMessage, UIMessage, ui_message_reducer

UIMessages = Annotated[list[AnyUIMessage], ui_message_reducer]
"""The `ui` state channel chat clients read (agent-chat-ui renders `values.ui`)."""

Props = dict[str, Any]


def _pick(event: dict, *names: str) -> Props:
    return {name: event[name] for name in names if name in event}


def _plan_step(status: str) -> Callable[[dict], tuple[str, Props]]:
    def build(event: dict) -> tuple[str, Props]:
        return event["step_id"], {"status": status, **_pick(event, *(k for k in event if k not in ("event", "ts")))}

    return build


# event kind -> (UI component name, builder of (card key, props))
UI_MESSAGES: dict[str, tuple[str, Callable[[dict], tuple[str, Props] | None]]] = {
    "route_decided": (
        "route_decision",
        lambda e: ("route", _pick(e, "route", "kb_prefix", "method", "confidence", "reason")),
    ),
    "progress": (  # the routing stage has no card: the route decision follows at once
        "retrieval_progress",
        lambda e: (
            ("retrieval", _pick(e, "stage", "completed", "total", "agent_type", "retrieval_count", "error"))
            if e["stage"] != "routing"
            else None
        ),
    ),
    "plan_created": ("plan", lambda e: ("plan", {"steps": e["steps"], "status": "planned"})),
    "plan_reviewed": ("plan", lambda e: ("plan", {"steps": e["steps"], "status": e["action"]})),
    "plan_step_started": ("plan_step", _plan_step("running")),
    "plan_step_completed": (
        "plan_step",
        lambda e: (e["step_id"], _pick(e, "step_id", "status", "duration_ms", "result_preview")),
    ),
    "plan_step_failed": ("plan_step", _plan_step("failed")),
    "plan_step_skipped": ("plan_step", lambda e: (e["step_id"], _pick(e, "step_id", "status", "reason"))),
    "research_plan": (
        "research_progress",
        lambda e: ("research", {"sub_questions": e["sub_questions"], "stage": "planned"}),
    ),
    "research_round": ("research_progress", lambda e: ("research", {"round": e["round"], "stage": "researching"})),
    "report_writing": (
        "research_progress",
        lambda e: ("research", {"stage": "writing", "sources_total": e["sources"], "notes": e["notes"]}),
    ),
    "researcher_started": (
        "researcher",
        lambda e: (
            e["researcher_id"],
            {"status": "running", **_pick(e, "researcher_id", "round", "question", "queries")},
        ),
    ),
    "researcher_finished": (
        "researcher",
        lambda e: (
            e["researcher_id"],
            _pick(e, "researcher_id", "round", "question", "status", "sources_found", "sources_read", "error"),
        ),
    ),
    "citations_checked": (
        "citations",
        lambda e: (
            "citations",
            _pick(e, "cited", "removed", "invented_urls", "invalid_numbers", "attributed", "sources"),
        ),
    ),
}


def _run_id() -> str:
    config = get_config()
    metadata = config.get("metadata") or {}
    return str(metadata.get("run_id") or config.get("run_id") or "")


PROGRESS_ID_PREFIX = "progress-"
"""Id prefix of the progress messages (`start_progress`); never a model's message id."""


def progress_message_id() -> str:
    """The id of this run's progress message, which the cards pushed in the run are linked to."""
    return f"{PROGRESS_ID_PREFIX}{_run_id()}"


def is_progress(message: BaseMessage) -> bool:
    return bool(message.id and message.id.startswith(PROGRESS_ID_PREFIX))


def chat_messages(messages: list[AnyMessage]) -> list[AnyMessage]:
    """`messages` without progress messages: what a model or the chat history should see."""
    return [m for m in messages if not is_progress(m)]


def _shown_progress(messages: list[AnyMessage]) -> set[str]:
    """Ids of the progress messages in `messages`."""
    return {m.id for m in messages if is_progress(m) and m.id}


def _unanswered(message: Mapping[str, Any], shown: set[str]) -> bool:
    """A card of the turn not yet placed: unlinked, or linked to a progress message that is not
    in the thread (pushed while none was shown, or before an approval pause)."""
    linked = str(message.get("metadata", {}).get("message_id") or "")
    return message.get("type") == "ui" and (
        not linked or (linked.startswith(PROGRESS_ID_PREFIX) and linked not in shown)
    )


def _linked(message: Mapping[str, Any], message_id: str) -> dict:
    return {**message, "metadata": {**message.get("metadata", {}), "merge": False, "message_id": message_id}}


def start_progress(state: Mapping[str, Any], update: dict | None = None, *, replaced: tuple[str, ...] = ()) -> dict:
    """`update` plus this run's progress message (an empty AI message agent-chat-ui renders the
    run's cards under while the run goes on) and the turn's earlier cards moved under it (a plan
    made before an approval pause was linked to that run's progress message). Earlier cards named
    in `replaced` are removed instead: this run pushes their new version (the reviewed plan)."""
    update = dict(update or {})
    progress_id = progress_message_id()
    update["messages"] = [*update.get("messages", []), AIMessage("", id=progress_id)]
    shown = _shown_progress(state.get("messages") or [])
    moved: list[dict] = []
    for m in state.get("ui") or []:
        if not _unanswered(m, shown) or m.get("metadata", {}).get("message_id") == progress_id:
            continue
        moved.append({"type": "remove-ui", "id": m["id"]} if m.get("name") in replaced else _linked(m, progress_id))
    if moved:
        update["ui"] = [*update.get("ui", []), *moved]
    return update


def push_for_event(event: dict) -> dict | None:
    """Stream the UI message of `event`, if its kind has one; return it."""
    entry = UI_MESSAGES.get(event["event"])
    if entry is None:
        return None
    name, build = entry
    built = build(event)
    if built is None:
        return None
    key, props = built
    config = get_config()
    message: UIMessage = {
        "type": "ui",
        "id": f"{name}:{_run_id()}:{key}",
        "name": name,
        "props": props,
        "metadata": {
            "merge": True,
            "run_id": config.get("run_id"),
            "tags": config.get("tags"),
            "name": config.get("run_name"),
            "event": event["event"],
            "message_id": progress_message_id(),
        },
    }
    # What `push_ui_message(..., merge=True)` streams, plus `"event": "ui"` so SDK clients that read
    # every custom item's `event` keep working; then the same write to the `ui` state channel.
    out = {**message, "event": "ui"}
    get_stream_writer()(out)
    _write_state(config, message)
    return out


_DEFERRED: ContextVar[list[UIMessage] | None] = ContextVar("deferred_ui_writes", default=None)


@contextmanager
def deferred_state_writes() -> Iterator[list[UIMessage]]:
    """Inside: UI messages still stream at once, but reach the `ui` channel only through the list
    this yields, for the node to return with its update. A node stopped half-way (a cancelled run)
    then leaves no write behind: LangGraph counts a task with writes as done and would not run it
    again on resume (react's `tools` node keeps its pending calls resumable this way)."""
    deferred: list[UIMessage] = []
    token = _DEFERRED.set(deferred)
    try:
        yield deferred
    finally:
        _DEFERRED.reset(token)


def _write_state(config: RunnableConfig, message: UIMessage) -> None:
    """Add `message` to the running graph's `ui` channel, the way `push_ui_message` does (the
    library has no public call for a state write without its own stream write), or to the list
    of `deferred_state_writes` when one is open."""
    deferred = _DEFERRED.get()
    if deferred is not None:
        deferred.append(message)
        return
    from langgraph._internal._constants import CONFIG_KEY_SEND  # what push_ui_message uses

    send = (config.get("configurable") or {}).get(CONFIG_KEY_SEND)
    if send is not None:
        send([("ui", message)])


def link_to_answer(state: Mapping[str, Any], config: RunnableConfig) -> dict:
    """At the end of a turn: link the UI messages not yet placed (this turn's, from every run of
    it: a plan made before an approval pause too) under the turn's answer (the last AI message);
    cards under a progress message in the thread stay there, above the answer, and the progress
    messages without a card are removed (`start_progress`)."""
    messages = state.get("messages") or []
    answer = messages[-1] if messages and isinstance(messages[-1], AIMessage) else None
    if answer is None or not answer.id or is_progress(answer):
        return {}
    shown = _shown_progress(messages)
    update: dict = {}
    cards = [m for m in state.get("ui") or [] if m.get("type") == "ui"]
    linked = [_linked(m, answer.id) for m in cards if _unanswered(m, shown)]
    if linked:
        update["ui"] = linked
    with_cards = {str(m.get("metadata", {}).get("message_id")) for m in cards}
    progress = [RemoveMessage(id=m) for m in sorted(shown - with_cards)]
    if progress:
        update["messages"] = progress
    return update
