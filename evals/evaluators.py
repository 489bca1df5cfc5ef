"""Evaluators: `(inputs, outputs, reference_outputs) -> {"key", "score", "comment"}`, as
`langsmith.evaluate` calls them.

Deterministic ones first: trajectory match (agentevals strict / unordered / subset / superset, tool
arguments compared per tool: calculator expressions by value, free-text arguments ignored), tool
selection, answer contains / excludes, output shape, exact field match (routes), JSON shape, plan
shape and completion, report structure, citation validity and removal of fabricated URLs. LLM-as-judge ones (openevals correctness,
helpfulness, groundedness) only when a judge model is configured (`judges(spec)`).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable

from agentevals.trajectory.match import create_trajectory_match_evaluator

from tools.calculator import calculator
from tools.errors import ToolInputError

Evaluator = Callable[..., dict]

_DIGIT_GROUPS = re.compile(r"(?<=\d)[,\u202f\u00a0 ](?=\d{3}\b)")


def same_value(output_args: dict, reference_args: dict) -> bool:
    """Calculator arguments match when both expressions evaluate to the same number."""
    try:
        got = calculator(str(output_args.get("expression", "")))
        want = calculator(str(reference_args.get("expression", "")))
    except ToolInputError:
        return False
    try:
        return math.isclose(float(got), float(want), rel_tol=1e-9, abs_tol=1e-12)
    except (TypeError, ValueError):
        return str(got) == str(want)


def same_text(output_args: dict, reference_args: dict) -> bool:
    """Arguments match ignoring case and surrounding spaces of string values."""

    def norm(args: dict) -> dict:
        return {k: v.strip().lower() if isinstance(v, str) else v for k, v in args.items()}

    return norm(output_args) == norm(reference_args)


# How tool arguments are compared, per tool (others: exact).
FREE_TEXT_TOOLS = (
    "save_memory",
    "search_episodic_memory",
    "search_semantic_memory",
    "keyword_search",
    "search_chat_history",
    "web_search",
    "knowledge_base_search",
    "get_user_profile",
    "get_recent_activity",
    "time_filter",
)
ARG_MATCHERS: dict = {"calculator": same_value, "current_time": same_text} | {
    name: "ignore" for name in FREE_TEXT_TOOLS
}


def trajectory_match(mode: str, args: str = "exact") -> Evaluator:
    """agentevals trajectory match of the turn's messages against `reference_outputs.trajectory`.

    mode: strict (same steps, same calls), unordered (same calls, any order), subset (no call
    outside the reference), superset (every reference call made)."""
    match = create_trajectory_match_evaluator(
        trajectory_match_mode=mode,
        tool_args_match_mode=args,
        tool_args_match_overrides=ARG_MATCHERS if args == "exact" else None,
    )

    def evaluate(outputs: dict, reference_outputs: dict) -> dict:
        key = f"trajectory_{mode}_match"
        if not outputs or "messages" not in outputs:
            return {"key": key, "score": 0, "comment": _error(outputs)}
        result = match(outputs=outputs["messages"], reference_outputs=reference_outputs["trajectory"])
        return {"key": key, "score": int(bool(result["score"]))}

    evaluate.__name__ = f"trajectory_{mode}_match"
    return evaluate


def _reference_calls(reference_outputs: dict) -> list[str]:
    return [
        call["name"]
        for message in reference_outputs["trajectory"]
        if message.get("role") in ("assistant", "ai")
        for call in message.get("tool_calls") or []
    ]


def tool_selection(outputs: dict, reference_outputs: dict) -> dict:
    """The same tools called as in the reference (as a multiset), arguments aside."""
    got = Counter(call["name"] for call in (outputs or {}).get("tool_calls", []))
    want = Counter(_reference_calls(reference_outputs))
    comment = None if got == want else f"called {dict(got)}, expected {dict(want)}"
    return {"key": "tool_selection", "score": int(got == want), "comment": comment}


def _normalize(text: str) -> str:
    return _DIGIT_GROUPS.sub("", text).lower()


def answer_contains(outputs: dict, reference_outputs: dict) -> dict:
    """Every `reference_outputs.answer_contains` string occurs in the final answer (case and
    digit grouping ignored: 1,048,576 matches 1048576). No expectations: no score."""
    wanted = reference_outputs.get("answer_contains") or []
    if not wanted:
        return {"key": "answer_contains", "score": None}
    answer = _normalize((outputs or {}).get("answer", ""))
    missing = [w for w in wanted if _normalize(w) not in answer]
    return {"key": "answer_contains", "score": int(not missing), "comment": f"missing {missing}" if missing else None}


def answer_excludes(outputs: dict, reference_outputs: dict) -> dict:
    """None of `reference_outputs.answer_excludes` (e.g. another user's facts) is in the answer."""
    banned = reference_outputs.get("answer_excludes") or []
    if not banned:
        return {"key": "answer_excludes", "score": None}
    answer = _normalize((outputs or {}).get("answer", ""))
    found = [b for b in banned if _normalize(b) in answer]
    return {"key": "answer_excludes", "score": int(not found), "comment": f"leaked {found}" if found else None}


def output_shape(outputs: dict) -> dict:
    """The turn's JSON shape: OpenAI-format messages, every tool call answered by a tool
    message, and a final assistant message with text."""
    problems = []
    messages = (outputs or {}).get("messages")
    if not isinstance(messages, list) or not messages:
        problems.append(_error(outputs) or "no messages")
    else:
        called = {c["id"] for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls", [])}
        answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
        if called != answered:
            problems.append(f"tool calls without results: {sorted(called - answered)}")
        last = messages[-1]
        if last.get("role") != "assistant" or last.get("tool_calls") or not str(last.get("content") or "").strip():
            problems.append("the turn does not end with an assistant answer")
        if not isinstance(outputs.get("answer"), str):
            problems.append("answer is not a string")
    return {"key": "output_shape", "score": int(not problems), "comment": "; ".join(problems) or None}


def exact_fields(*names: str, key: str = "exact_match") -> Evaluator:
    """Every named output field equals the reference's (e.g. a router's route, kb_prefix and
    worker_name)."""

    def evaluate(outputs: dict, reference_outputs: dict) -> dict:
        wrong = [n for n in names if (outputs or {}).get(n) != reference_outputs.get(n)]
        return {
            "key": key,
            "score": int(not wrong),
            "comment": ", ".join(f"{n}: {(outputs or {}).get(n)!r} != {reference_outputs.get(n)!r}" for n in wrong)
            or None,
        }

    evaluate.__name__ = key
    return evaluate


def json_shape(key: str = "json_shape", **fields: type | tuple[type, ...]) -> Evaluator:
    """The outputs have each named field with a value of the given type(s)."""

    def evaluate(outputs: dict) -> dict:
        wrong = [n for n, kind in fields.items() if not isinstance((outputs or {}).get(n), kind)]
        return {"key": key, "score": int(not wrong), "comment": f"missing or mistyped: {wrong}" if wrong else None}

    evaluate.__name__ = key
    return evaluate


def plan_shape(outputs: dict) -> dict:
    """plan_execute's plan as JSON: a list of steps with unique non-empty ids, `depends_on` lists
    naming other steps of the plan without a cycle (a valid DAG), and tools among those allowed."""
    plan = (outputs or {}).get("plan")
    if not isinstance(plan, list) or not plan:
        return {"key": "plan_shape", "score": 0, "comment": _error(outputs) or "no plan"}
    allowed = set((outputs or {}).get("allowed_tools") or [])
    problems = []
    ids = [step.get("id") if isinstance(step, dict) else None for step in plan]
    if not all(isinstance(i, str) and i.strip() for i in ids) or len(set(ids)) != len(ids):
        problems.append(f"step ids not unique non-empty strings: {ids}")
    deps = {}
    for step in plan:
        if not isinstance(step, dict):
            continue
        depends = step.get("depends_on")
        if not isinstance(depends, list) or any(d not in ids or d == step.get("id") for d in depends):
            problems.append(f"step {step.get('id')!r} depends_on {depends!r}")
            depends = []
        deps[step.get("id")] = depends
        if step.get("tool") is not None and step["tool"] not in allowed:
            problems.append(f"step {step.get('id')!r} uses {step['tool']!r}, not among {sorted(allowed)}")
        if not isinstance(step.get("args", {}), dict) or not str(step.get("description") or "").strip():
            problems.append(f"step {step.get('id')!r} lacks a description or object args")
    if _has_cycle(deps):
        problems.append("depends_on forms a cycle")
    return {"key": "plan_shape", "score": int(not problems), "comment": "; ".join(problems) or None}


def _has_cycle(deps: dict) -> bool:
    done: set = set()
    for start in deps:
        path, stack = set(), [(start, iter(deps.get(start, [])))]
        path.add(start)
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.discard(node)
                done.add(node)
            elif child in path:
                return True
            elif child not in done:
                path.add(child)
                stack.append((child, iter(deps.get(child, []))))
    return False


FINAL_STEP_STATUSES = ("completed", "recovered", "failed", "skipped", "dropped")


def plan_completion(outputs: dict, reference_outputs: dict) -> dict:
    """The run completed: status `reference_outputs.status` (default completed), every step of the
    plan in the execution log with a final status, and (for completed runs) every step succeeded."""
    outputs = outputs or {}
    want = reference_outputs.get("status", "completed")
    problems = []
    if outputs.get("status") != want:
        problems.append(f"status {outputs.get('status')!r} != {want!r}")
    log = {entry.get("step_id"): entry.get("status") for entry in outputs.get("execution_log") or []}
    for step in outputs.get("plan") or []:
        status = log.get(step.get("id"))
        if status not in FINAL_STEP_STATUSES:
            problems.append(f"step {step.get('id')!r} has no final status ({status!r})")
        elif want == "completed" and status not in ("completed", "recovered"):
            problems.append(f"step {step.get('id')!r} {status}")
    if not outputs.get("plan"):
        problems.append(_error(outputs) or "no plan")
    return {"key": "plan_completion", "score": int(not problems), "comment": "; ".join(problems) or None}


_CITED_NUMBER = re.compile(r"\[(\d{1,3})\]")
_SOURCES_SECTION = re.compile(r"^#{1,6}\s*Sources\s*$", re.IGNORECASE | re.MULTILINE)
_SOURCE_ENTRY = re.compile(r"^\[(\d{1,3})\] .+?: (\S+)$", re.MULTILINE)


def report_structure(outputs: dict) -> dict:
    """deep_research's report: a body with numbered citations [n], then a Sources section whose
    entries `[n] Title: URL` list every number the body cites (and nothing else)."""
    report = (outputs or {}).get("report") or ""
    if not report.strip():
        return {"key": "report_structure", "score": 0, "comment": _error(outputs) or "no report"}
    headings = list(_SOURCES_SECTION.finditer(report))
    problems = []
    if not headings:
        problems.append("no Sources section")
        body, listing = report, ""
    else:
        body, listing = report[: headings[-1].start()], report[headings[-1].end() :]
    cited = {int(n) for n in _CITED_NUMBER.findall(body)}
    listed = {int(n) for n, _ in _SOURCE_ENTRY.findall(listing)}
    if not cited:
        problems.append("no numbered citations in the body")
    if cited != listed:
        problems.append(f"cited {sorted(cited)} but Sources lists {sorted(listed)}")
    return {"key": "report_structure", "score": int(not problems), "comment": "; ".join(problems) or None}


def citation_validity(outputs: dict) -> dict:
    """Every URL in the report is one retrieved in the run (zero fabricated), and at least one is cited."""
    outputs = outputs or {}
    cited = outputs.get("cited_urls") or []
    retrieved = set(outputs.get("retrieved_urls") or [])
    fabricated = [url for url in cited if url not in retrieved]
    comment = f"not retrieved: {fabricated}" if fabricated else None if cited else (_error(outputs) or "nothing cited")
    return {"key": "citation_validity", "score": int(bool(cited) and not fabricated), "comment": comment}


def fabricated_removed(outputs: dict, reference_outputs: dict) -> dict:
    """The URLs the example's writer invents (`reference_outputs.fabricated_urls`) were caught by
    the citation check and are absent from the report. No such URLs: no score."""
    invented = reference_outputs.get("fabricated_urls") or []
    if not invented:
        return {"key": "fabricated_removed", "score": None}
    outputs = outputs or {}
    removed = set(outputs.get("removed_urls") or [])
    kept = [url for url in invented if url in (outputs.get("report") or "")]
    missed = [url for url in invented if url not in removed]
    problems = [f"still in the report: {kept}"] * bool(kept) + [f"not reported as removed: {missed}"] * bool(missed)
    return {"key": "fabricated_removed", "score": int(not problems), "comment": "; ".join(problems) or None}


def _error(outputs: dict | None) -> str | None:
    if not outputs:
        return "the target returned nothing (it raised)"
    return outputs.get("error")


JUDGE_PROMPTS = ("correctness", "helpfulness", "groundedness")


def judges(spec: str, which: tuple[str, ...] = JUDGE_PROMPTS) -> list[Evaluator]:
    """openevals LLM-as-judge evaluators scored by the chat model `spec` ('provider:model').

    correctness: the answer against `reference_outputs.reference_answer`; helpfulness: the answer
    for the question; groundedness: the answer against the turn's tool results."""
    from langchain_openai import ChatOpenAI
    from openevals.llm import create_llm_as_judge
    from openevals.prompts import CORRECTNESS_PROMPT, RAG_GROUNDEDNESS_PROMPT, RAG_HELPFULNESS_PROMPT

    from graphs.runtime.models import load_chat_model

    model = load_chat_model(spec, temperature=0)
    # Tool calling, not json_schema: OpenAI-compatible servers (vLLM, Ollama) often lack the latter.
    options = {"method": "function_calling"} if isinstance(model, ChatOpenAI) else None
    prompts = {
        "correctness": CORRECTNESS_PROMPT,
        "helpfulness": RAG_HELPFULNESS_PROMPT,
        "groundedness": RAG_GROUNDEDNESS_PROMPT,
    }
    built = {
        name: create_llm_as_judge(prompt=prompt, judge=model, feedback_key=name, structured_output_kwargs=options)
        for name, prompt in prompts.items()
    }

    def question(inputs: dict) -> str:
        return inputs.get("question") or inputs["messages"][-1]["content"]

    def correctness(inputs: dict, outputs: dict, reference_outputs: dict) -> dict:
        return built["correctness"](
            inputs=question(inputs),
            outputs=(outputs or {}).get("answer", ""),
            reference_outputs=reference_outputs.get("reference_answer", ""),
        )

    def helpfulness(inputs: dict, outputs: dict) -> dict:
        return built["helpfulness"](inputs=question(inputs), outputs=(outputs or {}).get("answer", ""))

    def groundedness(outputs: dict) -> dict:
        context = [m["content"] for m in (outputs or {}).get("messages", []) if m.get("role") == "tool"]
        if not context:
            return {"key": "groundedness", "score": None}
        return built["groundedness"](context=json.dumps(context), outputs=(outputs or {}).get("answer", ""))

    functions = {"correctness": correctness, "helpfulness": helpfulness, "groundedness": groundedness}
    return [functions[name] for name in which]
