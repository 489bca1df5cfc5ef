"""A failed run leaves a readable explanation in its thread, and still fails.

When a node raises (a model call that failed for good, a missing key, any error), the graph's
error handler (LangGraph's node error handlers) writes one AI message saying
what went wrong to `messages`, in its own superstep, then sends the run to `report_failure`,
which raises the same error in the next one. So the explanation is committed to the thread (its
state, its history, shown after a reload) and the run still ends with status `error` and the
server's `error` event naming the cause, as SDK clients expect. The message sequence stays valid
(an AI message after the user's), so the next message runs at once.

Interrupts and cancellation are not failures: LangGraph never hands them to the handler.

Postgres going away (a crash, a restart) is not the run's answer either: the handler waits for
Postgres to answer again (at most `DATABASE_RECOVERY_WAIT` s, at most `DATABASE_RECOVERY_RETRIES`
times a run; store/recovery.py) and runs the failed node again, from the same state, so nothing is
explained and each message reaches the thread once. Past those bounds, or for a node fed by a
`Send` (its input is not the graph's state, so it cannot be run again from here), the failure is
explained and the run fails with `DatabaseUnavailable`, which no one waits out again.

`explain_failures(builder)` is the one place every chat graph gets this from.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, TypeVar

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.errors import NodeError
from langgraph.graph import StateGraph
from langgraph.types import Command

from settings import settings
from store.lru import LRU
from store.recovery import database_uri, gave_up, outage_to_wait_out, wait_for_postgres
from tools.server_api import server_run_key

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

logger = logging.getLogger(__name__)

_PENDING_MAX = 256
_PENDING: LRU[str, BaseException] = LRU(_PENDING_MAX)
"""The exceptions between the handler's superstep and `report_failure`'s, so the run fails with
the very exception its node raised (same class and message in the `error` event): a bounded LRU
cache (store/lru.py) of `_PENDING_MAX` failures; an entry whose run never reached
`report_failure` (cancelled in between) is dropped eventually."""
_OUTAGE_WAITS: LRU[str, int] = LRU(_PENDING_MAX)
"""How many times each run (thread and server run) waited for Postgres in a node's handler."""


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


def _handler(rerunnable: frozenset[str]) -> Any:
    """The error handler of a graph's nodes; `rerunnable`: the nodes that read the graph's state
    (not a `Send` payload), which a `Command(goto=...)` can run again."""

    async def explain_failure(state: Any, error: NodeError, config: RunnableConfig) -> Command:
        """Write the explanation, then fail in `report_failure`; when Postgres went away, wait
        for it and run the node again instead (module doc)."""
        if error.node == REPORT_NODE:
            raise error.error
        failure = error.error
        if outage_to_wait_out(failure):
            if error.node in rerunnable and await _waited_out(error.node, config):
                return Command(goto=error.node)
            failure = gave_up(failure)
        message = failure_message(failure)
        _PENDING.put(message.response_metadata[MARKER]["id"], failure)
        return Command(update={"messages": [message]}, goto=REPORT_NODE)

    return explain_failure


async def _waited_out(node: str, config: RunnableConfig) -> bool:
    """Whether Postgres answers again within DATABASE_RECOVERY_WAIT s, for a run that has not
    waited DATABASE_RECOVERY_RETRIES times already."""
    uri, wait, retries = database_uri(), settings().DATABASE_RECOVERY_WAIT, settings().DATABASE_RECOVERY_RETRIES
    configurable = config.get("configurable") or {}
    run = f"{configurable.get('thread_id')}:{server_run_key(configurable)}"
    waits = _OUTAGE_WAITS.get(run) or 0
    if uri is None or wait <= 0 or waits >= retries:
        return False
    _OUTAGE_WAITS.put(run, waits + 1)
    logger.warning(
        "Node %s lost Postgres; waiting up to %g s to run it again (%d of %d)", node, wait, waits + 1, retries
    )
    waited = await wait_for_postgres(uri, wait)
    if waited is None:
        logger.error("Postgres did not answer within %g s: the run fails", wait)
        return False
    logger.info("Postgres answers again after %.1f s: node %s runs again", waited, node)
    return True


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
    rerunnable = frozenset(name for name, spec in builder.nodes.items() if spec.input_schema is builder.state_schema)
    builder.add_node(REPORT_NODE, report_failure)
    builder.add_node(HANDLER_NODE, _handler(rerunnable))  # (state, NodeError, config)
    builder.nodes[HANDLER_NODE].is_error_handler = True
    for spec in builder.nodes.values():
        if not spec.is_error_handler and spec.error_handler_node is None:
            spec.error_handler_node = HANDLER_NODE
    return builder
