"""A failed run leaves a readable explanation in its thread, and still fails.

When a node raises (a model call that failed for good, a missing key, any error), the graph's
error handler (LangGraph's node error handlers) writes one AI message saying
what went wrong to `messages`, in its own superstep, then sends the run to `report_failure`,
which raises the same error in the next one. So the explanation is committed to the thread (its
state, its history, shown after a reload) and the run still ends with status `error` and the
server's `error` event naming the cause, as SDK clients expect. The message sequence stays valid
(an AI message after the user's), so the next message runs at once.

Interrupts and cancellation are not failures: LangGraph never hands them to the handler.
`explain_failures(builder)` is the one place every chat graph gets this from.
"""

from __future__ import annotations

import uuid
from typing import Any, TypeVar

from langchain_core.messages import AIMessage
from langgraph.errors import NodeError
from langgraph.graph import StateGraph
from langgraph.types import Command

from store.lru import LRU

REPORT_NODE = "report_failure"
HANDLER_NODE = "explain_failure"
MARKER = "run_failure"
"""`response_metadata` key of an explanation: {"id", "error": exception class, "message"}."""
ID_PREFIX = "run-failure-"
SHOWN_ERRORS = (ValueError, RuntimeError)
"""Errors whose message the LangGraph server passes on to clients (docs/events.md `model_error`);
the explanation quotes them. Any other error is named by its class only."""
MESSAGE_CHARS = 1000

Builder = TypeVar("Builder", bound=StateGraph[Any, Any, Any, Any])

_PENDING_MAX = 256
_PENDING: LRU[str, BaseException] = LRU(_PENDING_MAX)
"""The exceptions between the handler's superstep and `report_failure`'s, so the run fails with
the very exception its node raised (same class and message in the `error` event): a bounded LRU
cache (store/lru.py) of `_PENDING_MAX` failures; an entry whose run never reached
`report_failure` (cancelled in between) is dropped eventually."""


def explanation(error: BaseException) -> str:
    """The text a user reads in the thread for a run that failed with `error`."""
    if isinstance(error, SHOWN_ERRORS) and str(error).strip():
        cause = str(error).strip()[:MESSAGE_CHARS]
    else:
        cause = f"an internal error occurred ({type(error).__name__}); the server's log has the details"
    return f"Sorry, I could not finish answering this: {cause}\n\nSend your message again to retry."


def failure_message(error: BaseException) -> AIMessage:
    """The explanation of `error` as the AI message the thread keeps (marked as a failure)."""
    failure_id = uuid.uuid4().hex
    shown = str(error)[:MESSAGE_CHARS] if isinstance(error, SHOWN_ERRORS) else ""
    return AIMessage(
        explanation(error),
        id=ID_PREFIX + failure_id,
        response_metadata={MARKER: {"id": failure_id, "error": type(error).__name__, "message": shown}},
    )


def explain_failure(state: Any, error: NodeError) -> Command:
    """Error handler of every node: write the explanation, then fail in `report_failure`."""
    if error.node == REPORT_NODE:
        raise error.error
    message = failure_message(error.error)
    _PENDING.put(message.response_metadata[MARKER]["id"], error.error)
    return Command(update={"messages": [message]}, goto=REPORT_NODE)


def report_failure(state: Any) -> dict:
    """Raise the error the run's explanation stands for (the same exception when this process
    saw it, else a RuntimeError with its message)."""
    for message in reversed(state.get("messages") or []):
        marker = getattr(message, "response_metadata", {}).get(MARKER)
        if marker:
            raise _PENDING.pop(marker["id"]) or RuntimeError(marker["message"] or marker["error"])
    raise RuntimeError("The run failed.")


def explain_failures(builder: Builder) -> Builder:
    """`builder` with a failed node's explanation written to `messages` before the run fails
    (module doc). Its state must have a `messages` channel with the `add_messages` reducer.

    Every node gets `explain_failure` as its error handler, as `set_node_defaults(error_handler=)`
    would do, but that one adds its handler node to the builder at each `compile()`, so a builder
    compiled twice (the module's graph, then a test's with a checkpointer) is refused. Hence the
    node specs' two fields set here, the one reach-in into LangGraph's builder (tests/unit/
    test_failures.py fails loudly when they change)."""
    builder.add_node(REPORT_NODE, report_failure)
    builder.add_node(HANDLER_NODE, explain_failure)  # type: ignore[arg-type]  # (state, NodeError)
    builder.nodes[HANDLER_NODE].is_error_handler = True
    for spec in builder.nodes.values():
        if not spec.is_error_handler and spec.error_handler_node is None:
            spec.error_handler_node = HANDLER_NODE
    return builder
