"""Fan-out of the new graphs: wall time of N independent pieces of work run in parallel vs one by one.

    python -m bench.fanout [--plan-steps N] [--research-units N] [--delay S] [--rounds R]

- `plan_execute`: a plan of N independent tool steps, each a `bench_wait` tool that waits D
  seconds (served in-process by patching `tools.registry.available_tools`, restored afterwards),
  run with `max_parallel_steps=N` (one wave) vs `max_parallel_steps=1` (N waves, a `continue`
  replan between them), and vs a one-step plan (N x one step);
- `deep_research`: N sub-questions, one researcher each fanned out with `Send`, every web search
  answered by a loopback SearXNG-compatible server after D seconds (the evals' corpus pages),
  run with `max_concurrent_research_units=N` vs `=1`, and vs a one-question run.

The models are the offline evals' scripted policy (evals/offline.py + evals/scripted.py): zero
latency, so the figures are the graphs' own scheduling. Contestants are interleaved per round
(one unmeasured warm-up run first); medians of the rounds are reported, with the most tool calls
(searches) seen in flight at once in each contestant, so a ratio near 1 without overlap shows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from html import escape

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver

import tools.registry as registry
from evals import offline
from evals.corpus import CORPUS
from evals.scripted import plan_script, research_script
from evals.targets import environment
from graphs.deep_research.context import ResearchContext
from graphs.deep_research.graph import builder as research_builder
from graphs.plan_execute.context import PlanExecuteContext
from graphs.plan_execute.graph import builder as plan_builder
from tests.web_servers import LoopbackServer, RecordedRequest, Reply

WAIT_TOOL = "bench_wait"
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")

Span = tuple[float, float]
Run = Callable[[], Awaitable[list[Span]]]
"""One measured graph run; returns the (start, end) times of the waits it caused."""


def most_at_once(spans: list[Span]) -> int:
    """The largest number of intervals that overlap at one moment."""
    points = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    running = best = 0
    for _, delta in points:
        running += delta
        best = max(best, running)
    return best


async def _measure(contestants: dict[str, Run], rounds: int, warm_up: str) -> dict[str, dict]:
    """Wall seconds of each contestant's runs, interleaved per round, after one warm-up run."""
    await contestants[warm_up]()
    seconds: dict[str, list[float]] = {name: [] for name in contestants}
    overlap = dict.fromkeys(contestants, 0)
    for _ in range(rounds):
        for name, run in contestants.items():
            started = time.perf_counter()
            spans = await run()
            seconds[name].append(time.perf_counter() - started)
            overlap[name] = max(overlap[name], most_at_once(spans))
    return {
        name: {"median_s": statistics.median(times), "runs_s": times, "most_at_once": overlap[name]}
        for name, times in seconds.items()
    }


def _figures(n: int, delay: float, rounds: int, measured: dict[str, dict], baseline: str) -> dict:
    parallel, serial, one = measured["parallel"], measured["serial"], measured["one"]
    return {
        "n": n,
        "delay_s": delay,
        "rounds": rounds,
        "parallel": parallel,
        "serial": serial,
        "one": one,
        "baseline": baseline,
        "ratio": parallel["median_s"] / serial["median_s"],
        "ratio_vs_n_x_one": parallel["median_s"] / (n * one["median_s"]),
        "ideal_ratio": 1 / n,
    }


def wait_tool(seconds: float, spans: list[Span]) -> BaseTool:
    """A tool that waits `seconds` and records when it ran in `spans`."""

    @tool(WAIT_TOOL)
    async def bench_wait(step: str) -> str:
        """Wait a fixed time (a stand-in for a slow API call), then report the step as done."""
        start = time.perf_counter()
        await asyncio.sleep(seconds)
        spans.append((start, time.perf_counter()))
        return f"{step} done"

    return bench_wait


@contextmanager
def serving(*extra: BaseTool) -> Iterator[None]:
    """The tool registry serves only `extra` for the block (in this process), then is restored."""
    original = registry.available_tools

    async def available_tools() -> tuple[dict[str, BaseTool], list[dict]]:
        return {t.name: t for t in extra}, []

    registry.available_tools = available_tools  # type: ignore[assignment]
    try:
        yield
    finally:
        registry.available_tools = original  # type: ignore[assignment]


async def plan_fanout(steps: int = 4, delay: float = 0.2, rounds: int = 3) -> dict:
    """plan_execute: `steps` independent `delay`-second tool steps in one wave vs one step per wave."""
    spans: list[Span] = []
    policy = offline.OfflinePolicy()
    model = offline.install(policy)
    graph = plan_builder.compile(checkpointer=InMemorySaver())

    def contestant(count: int, parallel: int) -> Run:
        async def run() -> list[Span]:
            task = f"Run {count} benchmark steps ({uuid.uuid4().hex[:8]})."
            plan = [
                {
                    "id": f"s{i}",
                    "description": f"wait {i}",
                    "tool": WAIT_TOOL,
                    "args": {"step": f"s{i}"},
                    "depends_on": [],
                }
                for i in range(1, count + 1)
            ]
            policy.add_script(task, plan_script({}, {"plan": plan}))
            context = PlanExecuteContext(
                model=model,
                user_id="bench",
                remember=False,
                tools=None,  # every tool served: only bench_wait
                approve_plan=False,
                max_plan_steps=max(count, 1),
                max_parallel_steps=parallel,
                tool_retries=0,
            )
            spans.clear()
            config: RunnableConfig = {"configurable": {"thread_id": str(uuid.uuid4())}}
            state = await graph.ainvoke({"messages": [HumanMessage(task)]}, config, context=context)
            log = state.get("execution_log", [])
            done = [e for e in log if e["status"] == "completed" and e["result"].endswith(" done")]
            if state.get("status") != "completed" or len(done) != count:
                raise RuntimeError(f"plan_execute did not run the {count} steps: {state.get('status')}, log {log}")
            return list(spans)

        return run

    with serving(wait_tool(delay, spans)):
        measured = await _measure(
            {"parallel": contestant(steps, steps), "serial": contestant(steps, 1), "one": contestant(1, 1)},
            rounds,
            warm_up="parallel",
        )
    return _figures(steps, delay, rounds, measured, "max_parallel_steps=1")


class SlowSearch:
    """A SearXNG-compatible /search answering after `delay` seconds, and the evals' corpus pages.

    A query finds the pages of every corpus topic it names; each search's (start, end) is recorded.
    """

    def __init__(self, server: LoopbackServer, delay: float) -> None:
        self.server, self.delay = server, delay
        self.spans: list[tuple[str, float, float]] = []
        self.lock = threading.Lock()
        server.routes["/search"] = self.search
        for pages in CORPUS.values():
            for path, title, text in pages:
                body = f"<html><head><title>{escape(title)}</title></head><body><p>{escape(text)}</p></body></html>"
                server.routes[path] = Reply(body=body)

    def search(self, request: RecordedRequest) -> Reply:
        query = request.query.get("q", [""])[0].lower()
        start = time.perf_counter()
        time.sleep(self.delay)
        with self.lock:
            self.spans.append((query, start, time.perf_counter()))
        results = [
            {"url": self.server.url(path), "title": title, "content": text}
            for topic, pages in CORPUS.items()
            if topic in query
            for path, title, text in pages
        ]
        return Reply(body=json.dumps({"query": query, "results": results}), content_type="application/json")

    def spans_of(self, marker: str) -> list[Span]:
        """The searches whose query contains `marker`."""
        with self.lock:
            return [(s, e) for q, s, e in self.spans if marker in q]


async def research_fanout(units: int = 3, delay: float = 0.2, rounds: int = 3) -> dict:
    """deep_research: `units` researchers at once vs one at a time, each search taking `delay` seconds."""
    policy = offline.OfflinePolicy()
    model = offline.install(policy)
    graph = research_builder.compile(checkpointer=InMemorySaver())
    topics = list(CORPUS)

    def contestant(server: SlowSearch, count: int, concurrent: int) -> Run:
        async def run() -> list[Span]:
            # A fresh marker in every query: the search cache never answers for the engine.
            marker = uuid.uuid4().hex[:8]
            request = f"Research {count} low-tech devices ({marker})."
            questions = [
                {
                    "question": f"What about the {topics[i % len(topics)]} ({i + 1})?",
                    "queries": [f"{topics[i % len(topics)]} facts {marker}"],
                }
                for i in range(count)
            ]
            policy.add_script(
                request, research_script({"messages": [{"content": request}]}, {"sub_questions": questions})
            )
            context = ResearchContext(
                model=model,
                user_id="bench",
                remember=False,
                allow_clarification=False,
                plan_only=False,
                knowledge_bases=None,
                max_sub_questions=count,
                max_concurrent_research_units=concurrent,
                max_research_rounds=1,
                tool_retries=0,
            )
            config: RunnableConfig = {"configurable": {"thread_id": str(uuid.uuid4())}}
            state = await graph.ainvoke({"messages": [HumanMessage(request)]}, config, context=context)
            log = state.get("research_log", [])
            if len(log) != count or any(e["status"] != "success" for e in log) or not state.get("report"):
                raise RuntimeError(f"deep_research did not research the {count} sub-questions: {log}")
            return server.spans_of(marker)

        return run

    with LoopbackServer() as loopback:
        server = SlowSearch(loopback, delay)
        web = {
            "WEB_SEARCH_PROVIDER": "searxng",
            "SEARXNG_URL": loopback.base_url,
            "WEB_ALLOW_LOOPBACK": "1",
            **dict.fromkeys(PROXY_VARIABLES),
        }
        with environment(web):
            measured = await _measure(
                {
                    "parallel": contestant(server, units, units),
                    "serial": contestant(server, units, 1),
                    "one": contestant(server, 1, 1),
                },
                rounds,
                warm_up="parallel",
            )
    return _figures(units, delay, rounds, measured, "max_concurrent_research_units=1")


def render(title: str, report: dict) -> str:
    """One benchmark's figures as text lines."""
    p, s, o = report["parallel"], report["serial"], report["one"]
    return (
        f"{title}: N={report['n']}, each wait {report['delay_s']:.2f} s, median of {report['rounds']} runs\n"
        f"  parallel {p['median_s']:.3f} s (at most {p['most_at_once']} at once)  "
        f"{report['baseline']} {s['median_s']:.3f} s (at most {s['most_at_once']} at once)  "
        f"ratio {report['ratio']:.2f}x (ideal {report['ideal_ratio']:.2f}x)\n"
        f"  one-item run {o['median_s']:.3f} s: parallel vs N x one {report['ratio_vs_n_x_one']:.2f}x"
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m bench.fanout`."""
    parser = argparse.ArgumentParser(prog="python -m bench.fanout", description=__doc__.splitlines()[0])
    parser.add_argument("--plan-steps", type=int, default=4, help="independent plan steps (default 4)")
    parser.add_argument("--research-units", type=int, default=3, help="sub-questions / researchers (default 3)")
    parser.add_argument("--delay", type=float, default=0.2, help="seconds each tool call / search waits")
    parser.add_argument("--rounds", type=int, default=3, help="measured runs per contestant (default 3)")
    args = parser.parse_args(argv)
    os.environ.setdefault("LANGSMITH_TRACING", "false")
    print(render("plan_execute wave", asyncio.run(plan_fanout(args.plan_steps, args.delay, args.rounds))))
    print(render("deep_research fan-out", asyncio.run(research_fanout(args.research_units, args.delay, args.rounds))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
