"""Offline turn scripts for the router, plan_execute and deep_research suites (see evals/offline.py).

Each builds the scripted model's part of one example from its reference outputs; everything else
(heuristics, validation, tools, web tools, citation checks) is the real graph's work:

- router: a `RouteChoice` for the reference route, used only when the heuristics are unsure and
  the graph asks the model (the example's `method` says whether that should happen);
- plan_execute: the reference plan as the `Plan` answer, `continue` for every `Replan`, and
  answers written from the step results the graph hands over (never from the reference);
- deep_research: the reference sub-questions as the `ResearchPlan` (its brief is the request
  itself, so the later prompts name their example), no gaps, notes citing every URL the
  researcher was given, and a report citing every listed source, plus the URLs the example asks
  the writer to invent (`outputs.fabricated_urls`).
"""

from __future__ import annotations

import re

from langchain_core.messages import BaseMessage, SystemMessage

from evals.offline import TurnScript, trajectory_steps

_LOG_ENTRY = re.compile(r"^- (\S+) \[(\w+)[^\]]*\] .*\n  (.*)$", re.MULTILINE)
_DEPENDENCY = re.compile(r"^- \S+ \(.*?\): (.*)$", re.MULTILINE)
_SOURCE_URL = re.compile(r"^URL: (\S+)\nTitle: .*\n(.*)$", re.MULTILINE)
_LISTED = re.compile(r"^\[(\d+)\] (.*?): (\S+)$", re.MULTILINE)


def react_script(inputs: dict, outputs: dict) -> TurnScript:
    """The reference trajectory's tool calls (react and memory suites)."""
    return TurnScript(steps=trajectory_steps(outputs.get("trajectory", [])))


def router_script(inputs: dict, outputs: dict) -> TurnScript:
    """The reference route, should the router ask the model."""
    choice = {"route": outputs["route"], "confidence": 0.8, "reason": "offline policy: the reference route"}
    if outputs["route"] == "retrieval":
        choice["kb"] = outputs["kb_prefix"]
    return TurnScript(structured={"RouteChoice": choice})


def plan_script(inputs: dict, outputs: dict) -> TurnScript:
    """The reference plan; answers from the graph's step results."""
    return TurnScript(
        structured={
            "Plan": {"steps": outputs["plan"]},
            "Replan": {"action": "continue", "reason": "offline policy: the plan stands", "steps": []},
        },
        writer=plan_writer,
    )


def plan_writer(messages: list[BaseMessage], extra: dict) -> str | None:
    """The synthesis from the execution log; a reasoning step's result from its dependencies."""
    system = next((m.text for m in messages if isinstance(m, SystemMessage)), "")
    if "Execution log:" in system:
        results = [f"{step}: {result}" for step, _, result in _LOG_ENTRY.findall(system)]
        return "Results: " + "; ".join(results) if results else None
    last = messages[-1].text if messages else ""
    if "Results of the steps this one depends on:" in last:
        return " ".join(_DEPENDENCY.findall(last)) or None
    return None


def research_script(inputs: dict, outputs: dict) -> TurnScript:
    """The reference sub-questions; notes and report from what was retrieved (plus inventions)."""
    request = inputs["messages"][-1]["content"]
    return TurnScript(
        structured={
            "ClarifyDecision": {"need_clarification": False, "question": ""},
            "ResearchPlan": {"brief": request, "sub_questions": outputs["sub_questions"]},
            "Reflection": {"gaps": []},
        },
        writer=research_writer,
        extra={"fabricate": outputs.get("fabricated_urls", [])},
    )


def research_writer(messages: list[BaseMessage], extra: dict) -> str | None:
    """Notes citing each source by URL (compression), or the cited report (writer)."""
    prompt = messages[-1].text if messages else ""
    if "Your sub-question:" in prompt:
        return "\n".join(f"- {text.strip()} [{url}]" for url, text in _SOURCE_URL.findall(prompt)) or None
    listed = _LISTED.findall(prompt)
    if "Numbered sources" not in prompt or not listed:
        return None
    body = " ".join(f"{title} is covered by source [{n}]." for n, title, _ in listed)
    sources = [f"[{n}] {title}: {url}" for n, title, url in listed]
    invented = list(extra.get("fabricate", []))
    if invented:
        body += f" A further study is at {invented[0]}."
        sources += [f"[{len(listed) + i}] Invented: {url}" for i, url in enumerate(invented[1:], 1)]
        body += "".join(f" More in [{len(listed) + i}]." for i in range(1, len(invented)))
    return "# Report\n\n" + body + "\n\n## Sources\n" + "\n".join(sources)
