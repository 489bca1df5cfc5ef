"""Deterministic task success for the real-model tier: no judge model.

`score(task, outputs)` -> {"success": bool, "checks": {name: bool}, "notes": [why a check failed]}.
A task succeeds when every check its `expect` asks for passes:

- react: each `tools_called` tool ran and returned without error; the answer holds every
  `answer_contains` string / one of each `answer_contains_any` group / matches `answer_regex`;
  and the answer is not a tool call written as text;
- router: `route` (and `kb_prefix` when given) equal the decision's, and the decision was made (by
  the model, or heuristics sure of it), not the heuristics' unsure guess left standing after the
  model gave no usable route;
- plan_execute: the plan is a valid DAG over the allowed tools, the run finished with `status`
  and every step completed, the answer holds the expected values;
- deep_research: a report citing at least one source, every cited URL retrieved in the run, the
  expected facts in it; for `fails_clearly_within_s`: with search down the run ends within that
  many seconds with a short failure message that says search failed;
- memory: the answer in the new thread holds the fact, and none of `answer_excludes`;
- memory_writer: the extraction saved at least one memory or profile field, one of them naming
  the fact;
- writer_facts: every item the writer stored from the turn (a memory, or a profile field as
  `key: value`; the profile seeded before the turn does not count unless it changed) is a true
  fact: it names one of the turn's expected `facts` (each a group of alternative words) and none
  of its `traps` (the question asked, the request, the assistant's words, another person's
  attribute as the user's, the writer prompt's example, a calculated value). A stored item that
  names no expected fact is a false fact too. The task succeeds with no false fact, every
  expected fact found and the `profile_kept` fields unchanged; its `counts` (stored, true, false,
  facts expected, facts found) add up to the suite's precision and recall.
"""

from __future__ import annotations

import re

from evals.evaluators import citation_validity, plan_completion, plan_shape
from evals.realmodel.tasks import Task
from evals.realmodel.wire import text_tool_calls
from settings import settings

_DIGIT_GROUPS = re.compile(r"(?<=\d)[,\u202f\u00a0 ](?=\d{3}\b)")
_SEARCH_WORD = re.compile(r"\bsearch", re.IGNORECASE)
CLEAR_MESSAGE_CHARS = 400
"""A failure message longer than this is not 'clear' (today: ~1.5 kB of concatenated errors)."""


def normalize(text: str) -> str:
    """Lower case, digit grouping removed (1,048,576 and 1 048 576 read 1048576)."""
    return _DIGIT_GROUPS.sub("", text or "").lower()


def contains_number_or_text(answer: str, wanted: str) -> bool:
    """`wanted` occurs in the answer; a number must not be part of a longer number (68 is not
    in 168 or 6.8), and `68` also matches `68.0` / `68.00`."""
    text, want = normalize(answer), normalize(wanted)
    if re.fullmatch(r"\d+(\.\d+)?", want):
        return re.search(rf"(?<![\d.]){re.escape(want)}(\.0+)?(?![\d]|\.\d)", text) is not None
    return want in text


def answer_checks(answer: str, expect: dict, prefix: str = "answer") -> tuple[dict[str, bool], list[str]]:
    """The answer expectations of a task: contains, contains_any, excludes, regex."""
    checks: dict[str, bool] = {}
    notes: list[str] = []
    if wanted := expect.get(f"{prefix}_contains"):
        missing = [w for w in wanted if not contains_number_or_text(answer, w)]
        checks[f"{prefix}_contains"] = not missing
        if missing:
            notes.append(f"{prefix} lacks {missing}")
    if groups := expect.get(f"{prefix}_contains_any"):
        missing_groups = [g for g in groups if not any(contains_number_or_text(answer, w) for w in g)]
        checks[f"{prefix}_contains_any"] = not missing_groups
        if missing_groups:
            notes.append(f"{prefix} lacks one of {missing_groups}")
    if banned := expect.get(f"{prefix}_excludes"):
        found = [b for b in banned if normalize(b) in normalize(answer)]
        checks[f"{prefix}_excludes"] = not found
        if found:
            notes.append(f"{prefix} holds {found}")
    if pattern := expect.get(f"{prefix}_regex"):
        checks[f"{prefix}_regex"] = re.search(pattern, answer or "") is not None
        if not checks[f"{prefix}_regex"]:
            notes.append(f"{prefix} does not match {pattern!r}")
    return checks, notes


def _clip(text: str, n: int = 160) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def score_react(outputs: dict, expect: dict) -> tuple[dict[str, bool], list[str]]:
    answer = outputs.get("answer") or ""
    checks, notes = answer_checks(answer, expect)
    ran = {r["name"] for r in outputs.get("tool_results") or [] if r.get("status") != "error"}
    for tool in expect.get("tools_called") or []:
        checks[f"called_{tool}"] = tool in ran
        if tool not in ran:
            called = [c["name"] for c in outputs.get("tool_calls") or []]
            notes.append(f"{tool} did not run (calls: {called or 'none'})")
    checks["answer_not_tool_text"] = not text_tool_calls(answer)
    if not checks["answer_not_tool_text"]:
        notes.append(f"the answer is a tool call written as text: {_clip(answer)!r}")
    return checks, notes


def score_router(outputs: dict, expect: dict) -> tuple[dict[str, bool], list[str]]:
    checks, notes = {}, []
    # The heuristics' unsure guess standing (the model gave no usable route) is no route choice,
    # even when that guess happens to be the expected route.
    unsure = outputs.get("method") == "heuristic" and (outputs.get("confidence") or 0) < settings().ROUTER_CONFIDENCE
    checks["decided"] = not unsure
    if unsure:
        notes.append(f"no route chosen, the unsure heuristic guess stood: {_clip(outputs.get('reason') or '', 200)}")
    for key in ("route", "kb_prefix"):
        if key in expect:
            checks[key] = outputs.get(key) == expect[key]
            if not checks[key]:
                notes.append(f"{key} {outputs.get(key)!r} != {expect[key]!r} ({outputs.get('method')})")
    return checks, notes


def score_plan(outputs: dict, expect: dict) -> tuple[dict[str, bool], list[str]]:
    checks, notes = {}, []
    if expect.get("plan_valid"):
        shape = plan_shape(outputs)
        checks["plan_valid"] = bool(shape["score"])
        if shape["comment"]:
            notes.append(f"plan: {shape['comment']}")
    if "status" in expect:
        finished = plan_completion(outputs, {"status": expect["status"]})
        checks["finished"] = bool(finished["score"])
        if finished["comment"]:
            notes.append(f"finished: {finished['comment']}")
    more, more_notes = answer_checks(outputs.get("answer") or "", expect)
    return checks | more, notes + more_notes


def score_research(outputs: dict, expect: dict) -> tuple[dict[str, bool], list[str]]:
    checks, notes = {}, []
    if "fails_clearly_within_s" in expect:
        limit = float(expect["fails_clearly_within_s"])
        elapsed = outputs.get("elapsed_s")
        message = outputs.get("failure_message") or ""
        checks["ended_in_time"] = isinstance(elapsed, (int, float)) and elapsed <= limit
        checks["failure_reported"] = bool(message.strip())
        # It must say that search failed: "search" as a word of its own (not inside "ResearchPlan").
        checks["message_clear"] = 0 < len(message) <= CLEAR_MESSAGE_CHARS and _SEARCH_WORD.search(message) is not None
        if not checks["ended_in_time"]:
            notes.append(f"took {elapsed} s (limit {limit:g} s)")
        if not checks["message_clear"]:
            notes.append(f"message ({len(message)} chars): {_clip(message, 200)!r}")
        return checks, notes
    report = outputs.get("report") or ""
    checks["report_written"] = bool(report.strip())
    if expect.get("citations_valid"):
        validity = citation_validity(outputs)
        checks["citations_valid"] = bool(validity["score"])
        if validity["comment"]:
            notes.append(f"citations: {validity['comment']}")
    more, more_notes = answer_checks(report, expect, prefix="report")
    if not report.strip():
        notes.append(f"no report: {_clip(outputs.get('answer') or outputs.get('error') or '', 200)!r}")
    return checks | more, notes + more_notes


def score_memory(outputs: dict, expect: dict) -> tuple[dict[str, bool], list[str]]:
    return answer_checks(outputs.get("answer") or "", expect)


def score_writer(outputs: dict, expect: dict) -> tuple[dict[str, bool], list[str]]:
    texts = outputs.get("memories") or []
    checks = {"extracted": bool(texts)}
    notes = [] if texts else [f"nothing extracted (result {outputs.get('result')})"]
    if words := expect.get("memory_contains_any"):
        checks["names_the_fact"] = any(normalize(w) in normalize(t) for t in texts for w in words)
        if texts and not checks["names_the_fact"]:
            notes.append(f"saved {[_clip(t, 80) for t in texts]} name none of {words}")
    return checks, notes


def fact_counts(outputs: dict, expect: dict) -> tuple[dict[str, int], list[str], list[str]]:
    """(counts, false items, facts not found) of a writer_facts task (see the module docstring)."""
    before = set(outputs.get("before") or [])
    stored = [t for t in outputs.get("memories") or [] if t not in before]
    facts = expect.get("facts") or []
    traps = [normalize(t) for t in expect.get("traps") or []]

    def names(text: str, words: list[str]) -> bool:
        return any(contains_number_or_text(text, w) for w in words)

    false = [t for t in stored if any(trap in normalize(t) for trap in traps) or not any(names(t, f) for f in facts)]
    missing = [f for f in facts if not any(names(t, f) for t in stored if t not in false)]
    counts = {
        "stored": len(stored),
        "true": len(stored) - len(false),
        "false": len(false),
        "facts": len(facts),
        "found": len(facts) - len(missing),
    }
    return counts, false, [f[0] for f in missing]


def score_facts(outputs: dict, expect: dict) -> tuple[dict[str, bool], list[str]]:
    _, false, missing = fact_counts(outputs, expect)
    checks = {"no_false_fact": not false, "facts_found": not missing}
    notes = [f"false: {[_clip(t, 90) for t in false]}"] if false else []
    notes += [f"not found: {missing}"] if missing else []
    if kept := expect.get("profile_kept"):
        stored = set(outputs.get("memories") or [])
        changed = [f"{k}: {v}" for k, v in kept.items() if f"{k}: {v}" not in stored]
        checks["profile_kept"] = not changed
        notes += [f"profile lost {changed}"] if changed else []
    return checks, notes


SCORERS = {
    "react": score_react,
    "router": score_router,
    "plan_execute": score_plan,
    "deep_research": score_research,
    "memory": score_memory,
    "memory_writer": score_writer,
    "writer_facts": score_facts,
}


def score(task: Task, outputs: dict | None) -> dict:
    """A task's checks and success; a target that raised or timed out fails with its error."""
    if not outputs or (outputs.get("error") and task.expect.get("fails_clearly_within_s") is None):
        error = (outputs or {}).get("error") or "no outputs"
        return {"success": False, "checks": {"ran": False}, "notes": [_clip(str(error), 300)]}
    checks, notes = SCORERS[task.suite](outputs, task.expect)
    scored: dict = {"success": bool(checks) and all(checks.values()), "checks": checks, "notes": notes}
    if task.suite == "writer_facts":
        scored["counts"] = fact_counts(outputs, task.expect)[0]
    return scored
