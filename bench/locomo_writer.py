"""What a model's memory writer adds to chat recall on LoCoMo: the writer reads each turn of a
part of a conversation the way the product runs it after a turn (the speaker's message and the
reply to it, `graphs.memory_writer.extract.extract_and_save`), saves the memories it extracts
with the id of the turn they came from, and those memories feed the speakers' person/attribute
indexes (store/aspects.py) next to what the deterministic consolidation reads from the turns.

    python -m bench.locomo_writer PATH --conversation 0 --sessions 9 --schema S --json out.json
    python -m bench.locomo_writer PATH --conversation 0 --sessions 9 --schema S --reuse   # no model calls

The model is `AGENT_MODEL` (e.g. `openai:qwen2.5-coder-1.5b` with `OPENAI_BASE_URL` pointing
at an OpenAI-compatible server; see evals/realmodel). PATH is LoCoMo's data as for
bench/locomo_eval.py. Only the first `--sessions` sessions of the conversation are loaded, and
only the questions whose evidence lies in them are asked, so a run fits in about an hour of a
small model on a laptop-class CPU (`--budget-min` stops the writer earlier: the figures then say
how many turns it read). Chat recall R@10 is reported on the same questions three
times: before the writer (the turns' own index), after it, and per slice (list questions, 2+
evidence turns), with the writer's figures (calls, seconds per call, memories saved, the share
with turn ids). `--reuse` evaluates a schema a previous run wrote (its memories rebuilt into
the indexes), without calling the model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

import psycopg
from langchain_core.messages import AIMessage, HumanMessage

from bench.locomo_eval import Conversation, chat_owners, evaluate, load, name_of, read_conversations
from graphs.memory_writer.extract import extract_and_save
from graphs.runtime.models import load_chat_model
from store import aspects, memory
from store.backend import backend_for
from store.postgres import postgres_uri, store

SCHEMA = "bench_locomo_writer"


def part_of(conv: Conversation, sessions: int) -> Conversation:
    """The conversation's first `sessions` sessions and the questions answered inside them."""
    turns = [t for t in conv.turns if t.session <= sessions]
    inside = {t.id for t in turns}
    questions = [q for q in conv.questions if set(q.evidence) <= inside]
    return Conversation(conv.index, conv.speakers, turns, questions)


def words(text: str, speaker: str) -> str:
    """A stored turn's words without its "Name: " prefix."""
    return text.removeprefix(f"{speaker}:").strip()


async def write_memories(
    pg_store, conv: Conversation, keys: dict[str, str], model_spec: str, timeout: float, budget_s: float | None
) -> dict:
    """Run the writer once per turn (the turn as the user's message, the next turn of the same
    session by the other speaker as the reply), in order, until `budget_s` seconds have gone;
    return its figures."""
    model = load_chat_model(model_spec, temperature=0, timeout=timeout)
    seconds, counts, failures = [], {"created": 0, "updated": 0, "profile_fields": 0, "dropped": 0}, 0
    for position, turn in enumerate(conv.turns):
        if budget_s is not None and sum(seconds) > budget_s:
            print(f"  budget spent: the writer read {position} of {len(conv.turns)} turns", flush=True)
            break
        nxt = conv.turns[position + 1] if position + 1 < len(conv.turns) else None
        messages = [HumanMessage(words(turn.text, turn.speaker))]
        if nxt is not None and nxt.session == turn.session and nxt.speaker != turn.speaker:
            messages.append(AIMessage(words(nxt.text, nxt.speaker)))
        started = time.perf_counter()
        try:
            result = await extract_and_save(
                pg_store,
                name_of(conv),
                messages,
                model,
                f"session-{turn.session}",
                speaker=turn.speaker,
                turn_ids=[keys[turn.id]] if turn.id in keys else [],
                timeout=timeout,
            )
        except Exception as error:  # a failed extraction writes nothing; count it and go on
            failures += 1
            print(f"  {turn.id}: writer failed: {type(error).__name__}: {str(error)[:160]}", flush=True)
            continue
        finally:
            seconds.append(time.perf_counter() - started)
        for name in counts:
            counts[name] += int(result.get(name) or 0)
        if position % 10 == 0:
            print(f"  {turn.id}: {position + 1}/{len(conv.turns)} turns, {sum(seconds):.0f} s", flush=True)
    return {
        "calls": len(seconds),
        "failures": failures,
        "seconds_p50": statistics.median(seconds) if seconds else 0.0,
        "seconds_total": sum(seconds),
        **counts,
    }


async def stored_memories(pg_store, conv: Conversation) -> dict:
    """How many memories the space holds and how many keep the turns they came from."""
    total = with_turns = 0
    for kind in memory.MEMORY_KINDS:
        ns = memory.namespace(name_of(conv), kind)
        items = await backend_for(pg_store).scan(ns)
        total += len(items)
        with_turns += sum(1 for item in items if item.value.get("turn_ids"))
    return {"memories": total, "with_turn_ids": with_turns}


def figures(report: dict) -> dict:
    """R@10 of the chat path per group, as percentages."""
    recall = report["chat"]["recall"]
    return {group: {"n": row["n"], "R@10": round(100 * row[10], 1)} for group, row in sorted(recall.items())}


async def run(args: argparse.Namespace) -> dict:
    os.environ["POSTGRES_SCHEMA"] = args.schema
    conv = part_of(read_conversations(Path(args.path))[args.conversation], args.sessions)
    listed = [q for q in conv.questions if aspects.asked(q.text)]
    print(
        f"conversation {conv.index}, sessions 1-{args.sessions}: {len(conv.turns)} turns, "
        f"{len(conv.questions)} questions ({len(listed)} list questions)",
        flush=True,
    )
    uri = await asyncio.to_thread(postgres_uri)
    if not args.reuse:
        async with await psycopg.AsyncConnection.connect(uri, autocommit=True) as conn:
            await conn.execute(f"DROP SCHEMA IF EXISTS {args.schema} CASCADE")
    async with store() as pg_store:
        if not args.reuse:
            await load(pg_store, [conv])
        owners = await chat_owners(pg_store, [conv])
        keys = {turn_id: key for key, turn_id in owners.items() if turn_id}
        result: dict = {"conversation": conv.index, "sessions": args.sessions, "turns": len(conv.turns)}
        if not args.reuse:
            await memory.rebuild_aspects(pg_store, name_of(conv))
            result["before"] = figures(await evaluate(pg_store, [conv], ["chat"], owners))
            started = time.perf_counter()
            budget = args.budget_min * 60 if args.budget_min else None
            result["writer"] = await write_memories(pg_store, conv, keys, args.model, args.model_timeout, budget)
            print(f"writer done in {time.perf_counter() - started:.0f} s", flush=True)
        result["stored"] = await stored_memories(pg_store, conv)
        await memory.rebuild_aspects(pg_store, name_of(conv))
        result["after"] = figures(await evaluate(pg_store, [conv], ["chat"], owners))
    return result


def render(result: dict) -> str:
    lines = [json.dumps({k: v for k, v in result.items() if k not in ("before", "after")})]
    lines.append(f"{'R@10, chat':<28} | {'n':>4} | {'before':>7} | {'after':>7}")
    for group, row in result["after"].items():
        before = result.get("before", {}).get(group, {}).get("R@10")
        shown = f"{before:>7.1f}" if before is not None else f"{'-':>7}"
        lines.append(f"{group:<28} | {row['n']:>4} | {shown} | {row['R@10']:>7.1f}")
    return "\n".join(lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.locomo_writer", description=__doc__.split("\n")[0])
    parser.add_argument("path", help="LoCoMo's data/locomo10.json (or a sample file, or a folder of them)")
    parser.add_argument("--conversation", type=int, default=0)
    parser.add_argument("--sessions", type=int, default=9, help="the first N sessions of the conversation")
    parser.add_argument("--schema", default=SCHEMA)
    parser.add_argument("--model", default=os.environ.get("AGENT_MODEL", ""), help="default: AGENT_MODEL")
    parser.add_argument("--model-timeout", type=float, default=600.0, help="seconds per model request")
    parser.add_argument("--budget-min", type=float, default=None, help="stop calling the writer after N minutes")
    parser.add_argument("--reuse", action="store_true", help="evaluate what a previous run wrote, no model calls")
    parser.add_argument("--json", help="also write the result here")
    args = parser.parse_args(argv)
    if not args.reuse and not args.model:
        parser.error("a model is needed: --model provider:name or AGENT_MODEL")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    result = asyncio.run(run(args))
    print(render(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
