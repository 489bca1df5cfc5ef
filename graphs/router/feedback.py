"""Feedback on an answer (up/down + comment), recorded against the run that produced it.

With a LangSmith key configured (`LANGSMITH_API_KEY`), feedback goes to LangSmith with
`create_feedback` on the run id (the server traces each run under its run id); otherwise it is
written to the store under `("memories", <user>, "feedback")`, keyed by run id, where the user
reads it back (`client.store.search_items(["memories", user, "feedback"])`). Either way it is
also appended to the thread's `feedback_log`, and the record carries what it is about
(`about_answer`): the question, the graph and route (agent type) that answered, and the answer's
metadata (model, time, web search, token usage).

Which runs feedback may name: the thread's state is its owner's to write (`threads.update_state`),
so its `answered_runs` only helps say what went wrong; on a server, the server's own run records
decide (`check_thread_run`): the run must be one of this thread's, so nobody reaches another
thread's run, whoever owns it.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from langchain_core.messages import AnyMessage, HumanMessage
from langgraph.store.base import BaseStore

from store import memory
from tools.server_api import thread_run

SCORES = {"up": 1, "down": 0}
ANSWER_METADATA = ("created_at", "model", "web_search")
"""The answer's `response_metadata` fields a feedback record keeps (with its `usage_metadata`)."""
FEEDBACK_KEY = "user_score"
MAX_COMMENT_CHARS = 4000


def feedback_namespace(user_id: str) -> tuple[str, ...]:
    """Where a user's feedback lives in the store (inside the user's own memory prefix)."""
    return (*memory.user_prefix(user_id), "feedback")


def langsmith_configured() -> bool:
    """Whether LangSmith has an API key (read the way the LangSmith client reads it)."""
    from langsmith import utils

    return bool(utils.get_env_var("API_KEY"))


def _langsmith_client():
    from langsmith import Client

    return Client()


def validate(feedback: object, answered_runs: list[dict]) -> dict:
    """The checked feedback request {"run_id", "score", "comment"}; ValueError says what is wrong."""
    if not isinstance(feedback, dict):
        raise ValueError('feedback must be an object {"run_id", "score": "up"|"down", "comment"?}')
    run_id = str(feedback.get("run_id") or "").strip()
    score = feedback.get("score")
    comment = feedback.get("comment") or ""
    if score not in SCORES:
        raise ValueError(f"feedback score must be 'up' or 'down', got {score!r}")
    if not isinstance(comment, str) or len(comment) > MAX_COMMENT_CHARS:
        raise ValueError(f"feedback comment must be text of at most {MAX_COMMENT_CHARS} characters")
    known = [run["run_id"] for run in answered_runs if run.get("run_id")]
    if run_id not in known:
        raise ValueError(f"run {run_id!r} answered nothing on this thread; answered runs: {', '.join(known) or 'none'}")
    return {"run_id": run_id, "score": score, "comment": comment}


async def check_thread_run(thread_id: str | None, run_id: str, act_as: str | None = None) -> None:
    """Refuse feedback on a run the server does not record on this thread (ValueError); for
    graphs running on a LangGraph server, before anything is recorded or sent. `act_as`: the
    user the feedback run was authenticated as (the thread's owner on servers that keep threads
    per user)."""
    if not thread_id or await thread_run(thread_id, run_id, act_as=act_as) is None:
        raise ValueError(f"run {run_id!r} is not a run of this thread; feedback is refused")


def about_answer(messages: list[AnyMessage], answered_runs: list[dict], run_id: str) -> dict:
    """What feedback on run `run_id` is about, from the thread: `question` (the user's message the
    run answered), `graph` ("router") and `agent_type` (the route that answered: general,
    retrieval, react, plan_execute, deep_research), `message_id` and the answer's `metadata`
    (`created_at`, `model`, `web_search`, `usage`). After a clear, the question and metadata are
    gone with the messages (null)."""
    run: dict = next((r for r in reversed(answered_runs) if r.get("run_id") == run_id), {})
    message_id = run.get("message_id")
    ids = [message.id for message in messages]
    at = ids.index(message_id) if message_id in ids else None
    question = None
    metadata: dict | None = None
    if at is not None:
        answer = messages[at]
        asked = [m for m in messages[:at] if isinstance(m, HumanMessage)]
        question = asked[-1].text if asked else None
        kept = answer.response_metadata or {}
        metadata = {name: kept[name] for name in ANSWER_METADATA if name in kept}
        if usage := getattr(answer, "usage_metadata", None):
            metadata["usage"] = dict(usage)
    return {
        "question": question,
        "graph": "router",
        "agent_type": run.get("route"),
        "message_id": message_id,
        "metadata": metadata,
    }


async def record_feedback(
    store: BaseStore | None, user_id: str, thread_id: str | None, request: dict, about: dict | None = None
) -> dict:
    """Record checked feedback in LangSmith when configured, else in the store; return the record.
    `about`: what it is about (`about_answer`), kept in the record (LangSmith: the feedback's `extra`)."""
    record = {
        **request,
        **(about or {}),
        "thread_id": thread_id,
        "user_id": user_id,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if langsmith_configured():
        client = _langsmith_client()
        created = await asyncio.to_thread(
            client.create_feedback,
            request["run_id"],
            key=FEEDBACK_KEY,
            score=SCORES[request["score"]],
            comment=request["comment"] or None,
            **({"extra": about} if about else {}),
        )
        return {**record, "sink": "langsmith", "feedback_id": str(getattr(created, "id", "") or "")}
    if store is None:
        raise ValueError("feedback needs LANGSMITH_API_KEY or a store; this graph runs without either")
    record["sink"] = "store"
    await store.aput(feedback_namespace(user_id), request["run_id"], record, index=False)
    return record
