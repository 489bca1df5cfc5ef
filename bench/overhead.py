"""Framework overhead per turn and per-step persistence cost, with a zero-latency scripted model.

    python -m bench.overhead [--turns N] [--rounds R] [--profile]

A turn is 2 model calls + 1 calculator call (the model asks for `calculator("17*23")`, then
answers from its result), in a new thread each time, memory off:
- `react` vs LangChain's `create_agent` with the same model, the same calculator tool and an
  in-memory saver, driven by `ainvoke` and by `astream` (messages + updates + custom), rounds
  interleaved so machine load hits both alike; the ratio is react / create_agent;
- `react` with the Postgres saver (store/postgres.py `checkpointer`, schema `bench_persistence`,
  dropped afterwards) vs the in-memory saver: extra milliseconds per checkpoint written.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import os
import pstats
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable

from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from graphs.react.graph import builder
from graphs.react.prompts import SYSTEM_PROMPT
from graphs.runtime.context import Context
from graphs.runtime.models import register_model_provider
from tests.fakes import ScriptedChatModel
from tools.registry import builtin_tools

PROVIDER = "bench"
QUESTION = "What is 17 times 23?"
MODES = ("invoke", "stream")
PERSISTENCE_SCHEMA = "bench_persistence"

Turn = Callable[[], Awaitable[None]]


def _answer(messages: list) -> str | dict:
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return f"17 times 23 is {last.text}."
    return {"tool_calls": [{"name": "calculator", "args": {"expression": "17*23"}}]}


def scripted_model(turns: int) -> ScriptedChatModel:
    """A zero-latency model for `turns` calculator turns (two calls each)."""
    return ScriptedChatModel(responses=[_answer] * (2 * turns))


def react_turn(graph, mode: str) -> Turn:
    """One react turn in a new thread (the `bench:` provider must hold the model)."""
    context = Context(model=f"{PROVIDER}:zero", tools=["calculator"], remember=False)

    async def turn() -> None:
        config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        payload = {"messages": [HumanMessage(QUESTION)]}
        if mode == "invoke":
            await graph.ainvoke(payload, config, context=context)
        else:
            async for _ in graph.astream(
                payload, config, context=context, stream_mode=["messages", "updates", "custom"]
            ):
                pass

    return turn


def agent_turn(agent, mode: str) -> Turn:
    """One `create_agent` turn in a new thread."""

    async def turn() -> None:
        config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        payload = {"messages": [HumanMessage(QUESTION)]}
        if mode == "invoke":
            await agent.ainvoke(payload, config)
        else:
            async for _ in agent.astream(payload, config, stream_mode=["messages", "updates", "custom"]):
                pass

    return turn


async def _time(turn: Turn, n: int) -> list[float]:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        await turn()
        times.append((time.perf_counter() - started) * 1000)
    return times


def _summary(times: list[float]) -> dict:
    ordered = sorted(times)
    return {
        "turns": len(times),
        "median_ms": statistics.median(times),
        "p95_ms": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
    }


async def _interleaved(contestants: dict[str, Turn], turns: int, rounds: int) -> dict[str, list[float]]:
    for turn in contestants.values():  # warm-up: imports, caches, first compilation
        await _time(turn, 3)
    times: dict[str, list[float]] = {name: [] for name in contestants}
    per_round = max(1, turns // rounds)
    for _ in range(rounds):
        for name, turn in contestants.items():
            times[name] += await _time(turn, per_round)
    return times


async def framework_overhead(turns: int = 200, rounds: int = 4) -> dict:
    """Median ms per turn of react and create_agent (invoke and stream), and their ratio."""
    from langchain.agents import create_agent

    total = (turns + 3) * 2 * len(MODES) + 8
    react_model, agent_model = scripted_model(total), scripted_model(total)
    register_model_provider(PROVIDER, lambda name, **kw: react_model)
    graph = builder.compile(checkpointer=InMemorySaver())
    agent = create_agent(
        agent_model, tools=[builtin_tools()["calculator"]], checkpointer=InMemorySaver(), system_prompt=SYSTEM_PROMPT
    )
    report: dict = {}
    for mode in MODES:
        times = await _interleaved(
            {"react": react_turn(graph, mode), "create_agent": agent_turn(agent, mode)}, turns, rounds
        )
        react, baseline = _summary(times["react"]), _summary(times["create_agent"])
        report[mode] = {"react": react, "create_agent": baseline, "ratio": react["median_ms"] / baseline["median_ms"]}
    return report


async def persistence_cost(turns: int = 60, rounds: int = 3) -> dict:
    """Median ms per react turn with the Postgres and the in-memory saver; extra ms per checkpoint."""
    import psycopg

    from store.postgres import checkpointer, postgres_uri

    model = scripted_model((turns + 6) * 2 + 4)
    register_model_provider(PROVIDER, lambda name, **kw: model)
    previous = os.environ.get("POSTGRES_SCHEMA")
    os.environ["POSTGRES_SCHEMA"] = PERSISTENCE_SCHEMA
    uri = await asyncio.to_thread(postgres_uri)
    try:
        async with checkpointer() as saver:
            in_memory = builder.compile(checkpointer=InMemorySaver())
            postgres = builder.compile(checkpointer=saver)
            times = await _interleaved(
                {"postgres": react_turn(postgres, "invoke"), "in_memory": react_turn(in_memory, "invoke")},
                turns,
                rounds,
            )
            thread = {"configurable": {"thread_id": str(uuid.uuid4())}}
            await postgres.ainvoke(
                {"messages": [HumanMessage(QUESTION)]},
                thread,
                context=Context(model=f"{PROVIDER}:zero", tools=["calculator"], remember=False),
            )
            checkpoints = len([c async for c in saver.alist(thread)])
    finally:
        if previous is None:
            os.environ.pop("POSTGRES_SCHEMA", None)
        else:
            os.environ["POSTGRES_SCHEMA"] = previous
        async with await psycopg.AsyncConnection.connect(uri, autocommit=True) as conn:
            await conn.execute(f"DROP SCHEMA IF EXISTS {PERSISTENCE_SCHEMA} CASCADE")
    pg, mem = _summary(times["postgres"]), _summary(times["in_memory"])
    return {
        "postgres": pg,
        "in_memory": mem,
        "ratio": pg["median_ms"] / mem["median_ms"],
        "checkpoints_per_turn": checkpoints,
        "extra_ms_per_checkpoint": (pg["median_ms"] - mem["median_ms"]) / checkpoints,
    }


async def profile_react(turns: int = 100, top: int = 25) -> str:
    """cProfile of `turns` react turns (invoke): the functions with the most cumulative time."""
    model = scripted_model(turns + 4)
    register_model_provider(PROVIDER, lambda name, **kw: model)
    graph = builder.compile(checkpointer=InMemorySaver())
    turn = react_turn(graph, "invoke")
    await turn()
    profiler = cProfile.Profile()
    profiler.enable()
    await _time(turn, turns // 2)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def render_overhead(report: dict) -> str:
    """Framework overhead as text lines."""
    lines = [
        "framework overhead per turn (2 model calls + 1 calculator call, zero-latency model, in-memory saver, memory off)"
    ]
    for mode, row in report.items():
        lines.append(
            f"  {mode:<6} react {row['react']['median_ms']:.2f} ms (p95 {row['react']['p95_ms']:.2f})  "
            f"create_agent {row['create_agent']['median_ms']:.2f} ms (p95 {row['create_agent']['p95_ms']:.2f})  "
            f"ratio {row['ratio']:.2f}x  ({row['react']['turns']} turns each)"
        )
    return "\n".join(lines)


def render_persistence(report: dict) -> str:
    """Persistence cost as text lines."""
    return (
        "persistence per react turn (same turn, invoke)\n"
        f"  postgres saver {report['postgres']['median_ms']:.2f} ms  in-memory saver "
        f"{report['in_memory']['median_ms']:.2f} ms  ratio {report['ratio']:.2f}x  "
        f"{report['checkpoints_per_turn']} checkpoints per turn: "
        f"{report['extra_ms_per_checkpoint']:.2f} ms extra per checkpoint"
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m bench.overhead`."""
    parser = argparse.ArgumentParser(prog="python -m bench.overhead", description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="measured turns per contestant and mode")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--persistence", action="store_true", help="also measure the Postgres saver")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of react turns instead")
    args = parser.parse_args(argv)
    if args.profile:
        print(asyncio.run(profile_react(args.turns)))
        return 0
    print(render_overhead(asyncio.run(framework_overhead(args.turns, args.rounds))))
    if args.persistence:
        print(render_persistence(asyncio.run(persistence_cost(max(20, args.turns // 3), args.rounds))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
