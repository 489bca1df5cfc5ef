"""Recall@5/10/20 per question category and split on the realistic conversations of
bench/recall_dataset.py, through the project's own functions, on the embedded Postgres.

    python -m bench.recall_eval                  # load (schema bench_recall), evaluate, keep data
    python -m bench.recall_eval --reuse          # evaluate the data already loaded
    python -m bench.recall_eval --paths chat,kb_hybrid --json out.json

Each conversation is one user (memories) and one knowledge base. Every turn ("Name: words") is
written with its real timestamp: `record_chat_message(speaker=name)` (first speaker role "user",
second "assistant"), `save_memory(kind="episodic", speaker=name)` (dedupe as configured) and one
KB document per turn dated with the turn's time (`ingest_texts`). Paths: `chat` = `recall(kind="chat")`, `episodic` and
`episodic_plain` = `recall(kind="episodic", scoring=weighted|plain)`, `kb_dense`, `kb_keyword`,
`kb_hybrid`, `kb_graph`, `kb_fusion` = `knowledge.retrieve(strategy=...)`; `kb_router` = the router's
retrieval route with its default workers (one gather, the hybrid, dense and keyword rankings,
graphs/router/evidence.py `merge_runs`), `kb_router_rrf` = the same lists fused by reciprocal rank
fusion, as the router merged them before hybrid's order became the merged order. A question's recall@k is the share of its
evidence turns in the first k results (an episodic memory counts for every turn merged into it);
recalls do not record access, so questions do not influence each other. Held-in conversations
are for tuning, held-out ones only confirm. Figures are reported per question style
(`paraphrase`: worded away from the evidence; `worded`: reusing its words), per category and per
evidence count; tuning ranks weights by the mean of the two styles' R@10, so they hold on both.
Also prints the p50/p95 latency of each path.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import replace
from datetime import timedelta

import psycopg

from bench.recall_dataset import (
    CATEGORIES,
    HELD_IN_CONVERSATIONS,
    STYLES,
    Conversation,
    Question,
    build_conversations,
)
from graphs.router.evidence import merge_runs
from store import hybrid, knowledge, memory
from store.backend import backend_for
from store.knowledge.search import KnowledgeBaseCorpus, kb_policy
from store.memory.hybrid import MemoryCorpus, memory_policy
from store.postgres import postgres_uri, store

SCHEMA = "bench_recall"
# The code before issue 14 had none of these; checked so this file can measure it too.
SAVE_SPEAKER = "speaker" in inspect.signature(memory.save_memory).parameters
CHAT_SPEAKER = "speaker" in inspect.signature(memory.record_chat_message).parameters
KB_DATES = "date" in inspect.signature(knowledge.ingest_text).parameters
KS = (5, 10, 20)
PATHS = (
    "chat",
    "episodic",
    "episodic_plain",
    "kb_dense",
    "kb_keyword",
    "kb_hybrid",
    "kb_graph",
    "kb_fusion",
    "kb_rrf",
    "kb_router",
    "kb_router_rrf",
)
ROUTER_PLAN = ("hybrid", "dense", "keyword")  # the router's default workers


def user_of(conv: Conversation) -> str:
    """The memory user holding conversation `conv`."""
    return f"recall_c{conv.index}"


def kb_of(conv: Conversation) -> str:
    """The knowledge base holding conversation `conv`."""
    return f"recall_c{conv.index}"


async def load(pg_store, conversations: list[Conversation]) -> dict[str, str]:
    """Write every turn through the three paths; returns memory id -> ... mapping as
    {"chat:<id>": turn id, "episodic:<id>": turn ids joined by ","}."""
    owners: dict[str, str] = {}
    merged = 0
    for conv in conversations:
        user = user_of(conv)
        await memory.forget_user(pg_store, user)
        for turn in conv.turns:
            chat = await memory.record_chat_message(
                pg_store,
                user,
                turn.role,
                turn.text,
                f"session-{turn.session}",
                now=turn.at,
                **({"speaker": turn.speaker} if CHAT_SPEAKER else {}),
            )
            owners[f"chat:{chat['id']}"] = turn.id
            saved = await memory.save_memory(
                pg_store,
                user,
                "episodic",
                turn.text,
                source="extraction",
                now=turn.at,
                **({"speaker": turn.speaker} if CHAT_SPEAKER else {}),
            )
            key = f"episodic:{saved['id']}"
            if saved["action"] == "updated":
                merged += 1
                owners[key] = owners.get(key, "") + "," + turn.id
            else:
                owners[key] = turn.id
        if kb_of(conv) in [kb["name"] for kb in await knowledge.list_kbs(pg_store)]:
            await knowledge.delete_kb(pg_store, kb_of(conv))
        await knowledge.create_kb(pg_store, kb_of(conv), f"conversation {conv.index}")
        documents = [
            {"text": t.text, "source": f"turn:{t.id}", "title": t.id, **({"date": t.at} if KB_DATES else {})}
            for t in conv.turns
        ]
        await knowledge.ingest_texts(pg_store, kb_of(conv), documents, chunk_size=2000, chunk_overlap=0)
        print(f"  loaded conversation {conv.index}: {len(conv.turns)} turns", flush=True)
    owners["_merged"] = str(merged)
    return owners


async def search(pg_store, path: str, conv: Conversation, query: str, owners: dict, now) -> list[set[str]]:
    """Ranked results of one path, each as the set of turn ids it stands for."""
    if path == "kb_rrf":  # the hybrid strategy before issue 14: RRF (k=60) of 50 candidates each
        rankings = []
        for strategy in ("dense", "keyword"):
            found = await knowledge.retrieve(pg_store, kb_of(conv), query, strategy=strategy, top_k=50)
            rankings.append([r["source"].removeprefix("turn:") for r in found["retrieval_results"]])
        return [{turn} for turn, _ in knowledge.reciprocal_rank_fusion(rankings)[: max(KS)]]
    if path.startswith("kb_router"):  # the router's retrieval route: one gather, a ranking per worker, the merge
        handle = await knowledge.open(pg_store, kb_of(conv))
        gathered = await handle.gather(query, top_k=max(KS), strategies=ROUTER_PLAN)
        runs = [
            {
                "kb": handle.name,
                "agent_type": strategy,
                "retrieval_results": knowledge.rank(gathered, strategy)["retrieval_results"],
            }
            | (
                {} if path == "kb_router_rrf" else {"strategy": strategy}
            )  # without strategies the merge fuses the lists
            for strategy in ROUTER_PLAN
        ]
        return [{source["source"].removeprefix("turn:")} for source in merge_runs(runs, max(KS))]
    if path.startswith("kb_"):
        result = await knowledge.retrieve(pg_store, kb_of(conv), query, strategy=path[3:], top_k=max(KS))
        return [{r["source"].removeprefix("turn:")} for r in result["retrieval_results"]]
    kind = "chat" if path == "chat" else "episodic"
    scoring = "plain" if path.endswith("plain") else "weighted"
    results = await memory.recall(
        pg_store,
        user_of(conv),
        query,
        kind,
        top_k=max(KS),
        scoring=scoring,
        record_access=False,
        now=now,
    )
    return [set(owners.get(f"{kind}:{r['id']}", "").split(",")) for r in results]


async def evaluate(pg_store, conversations: list[Conversation], paths: list[str], owners: dict) -> dict:
    """{path: {"recall": {split: {category: {k: mean}}}, "ms": [...], "per_question": {...}}}."""
    report: dict = {}
    for path in paths:
        sums: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
        latencies, per_question = [], {}
        for conv in conversations:
            now = conv.turns[-1].at + timedelta(days=1)
            for question in conv.questions:
                started = time.perf_counter()
                ranked = await search(pg_store, path, conv, question.text, owners, now)
                latencies.append((time.perf_counter() - started) * 1000)
                wanted = set(question.evidence)
                per_question[question.id] = []
                for k in KS:
                    found = set().union(*ranked[:k]) if ranked else set()
                    value = len(wanted & found) / len(wanted)
                    per_question[question.id].append(value)
                    for split in (question.split, "all"):
                        for group in groups_of(question):
                            sums[split][group][k].append(value)
        report[path] = {
            "recall": {
                split: {
                    cat: {k: statistics.mean(v) for k, v in ks.items()} | {"n": len(ks[KS[0]])}
                    for cat, ks in cats.items()
                }
                for split, cats in sums.items()
            },
            "ms": {"p50": statistics.median(latencies), "p95": statistics.quantiles(latencies, n=20)[-1]},
            "per_question": per_question,
        }
    return report


def evidence_group(question: Question) -> str:
    """The question's evidence count as a row name: "1 turn", "2 turns", "3+ turns"."""
    count = len(question.evidence)
    return "1 turn" if count == 1 else "2 turns" if count == 2 else "3+ turns"


def groups_of(question: Question) -> list[str]:
    """The report rows a question counts in: its style's category, evidence count and all (and
    "five" for the five categories the first version of the set had, the figure to compare)."""
    rows = [question.category, evidence_group(question), "all"]
    if question.category != "exchange":
        rows.append("five")
    return [f"{question.style}/{row}" for row in rows]


TUNE_POOL = 100  # what recall(top_k=20) fetches per signal (20 * MEMORY_CANDIDATE_FACTOR)


def _second_weights(path: str) -> tuple[str, tuple[float, ...]]:
    """The weight tuned beside the keyword weight: the neighbour weight (time, name and speaker
    weights as configured)."""
    return ("neighbour", (0.0, 0.3, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8, 0.9, 0.95))


async def tune(pg_store, conversations: list[Conversation], paths: list[str], owners: dict) -> None:
    """Grid of fusion weights on the HELD-IN questions only, through the product's own ranking
    (`store.hybrid.gather` once per question, then its `rank` per weight pair): keyword weight x
    neighbour weight, time, name and speaker weights as configured. Prints R@5/10/20 overall, each category's R@10, and the
    worst category's R@10 minus the better single signal's (negative: fusion lost there): the ten
    best pairs, each signal alone, then every second weight at the configured keyword weight."""
    held_in = [c for c in conversations if c.index in HELD_IN_CONVERSATIONS]
    for path in paths:
        if path not in ("chat", "episodic", "kb_hybrid"):
            continue
        rows = []
        config, kb_config = memory.memory_config(), knowledge.knowledge_config()
        config = replace(config, neighbour_weight=config.neighbour_weight or 1.0)  # fetch the neighbours
        kind = "chat" if path == "chat" else "episodic"
        for conv in held_in:
            now = conv.turns[-1].at + timedelta(days=1)
            entry = await knowledge.get_kb(pg_store, kb_of(conv))
            for question in conv.questions:
                if path == "kb_hybrid":
                    corpus: hybrid.Corpus = KnowledgeBaseCorpus(pg_store, kb_of(conv), entry)
                    policy = kb_policy(replace(kb_config, neighbour_weight=kb_config.neighbour_weight or 1.0))
                else:
                    corpus = MemoryCorpus(pg_store, memory.namespace(user_of(conv), kind), {}, config, now)
                    policy = memory_policy(config, kind)
                rows.append((question, await hybrid.gather(corpus, policy, question.text, TUNE_POOL, now)))
        second, second_weights = _second_weights(path)
        grid = {}
        for i in range(21):
            for other in second_weights:
                keyword_weight = round(0.05 * i, 2)
                per: dict = defaultdict(lambda: defaultdict(list))
                for question, signal in rows:
                    if path == "kb_hybrid":
                        weights = replace(policy, keyword_weight=keyword_weight, neighbour_weight=other)
                        ranked = [{r.item.value["source"].removeprefix("turn:")} for r in hybrid.rank(signal, weights)]
                    else:
                        weights = replace(policy, keyword_weight=keyword_weight, neighbour_weight=other)
                        ranked = [
                            set(owners.get(f"{kind}:{r.item.key}", "").split(",")) for r in hybrid.rank(signal, weights)
                        ]
                    wanted = set(question.evidence)
                    for k in KS:
                        found = set().union(*ranked[:k]) if ranked else set()
                        value = len(wanted & found) / len(wanted)
                        for group in groups_of(question):
                            per[group][k].append(value)
                for k in KS:  # "all": the mean of the styles' figures, so weights hold on both
                    per["all"][k] = [statistics.mean(statistics.mean(per[f"{s}/all"][k]) for s in STYLES)]
                grid[(keyword_weight, other)] = {
                    c: {k: statistics.mean(v) for k, v in ks.items()} for c, ks in per.items()
                }
        dense_only, keyword_only = grid[(0.0, 0.0)], grid[(1.0, 0.0)]
        singles = {c: max(dense_only[c][10], keyword_only[c][10]) for c in dense_only}
        print(f"\ntuning {path} on {len(rows)} held-in questions (keyword weight, {second} weight)")
        best = sorted(grid.items(), key=lambda kv: -kv[1]["all"][10])
        configured = (
            (kb_config.hybrid_keyword_weight, kb_config.neighbour_weight)
            if path == "kb_hybrid"
            else (config.keyword_weight, memory.memory_config().neighbour_weight)
        )
        shown = [*best[:10], ((0.0, 0.0), dense_only), ((1.0, 0.0), keyword_only)]
        shown += [(weights, grid[weights]) for weights in sorted(grid) if weights[0] == configured[0]]
        for (kw, ow), figures in shown:
            worst = min((figures[c][10] - singles[c], c) for c in figures if c != "all")
            cats = " ".join(
                f"{c}={100 * figures[c][10]:.1f}"
                for c in sorted(figures)
                if c.endswith("/all") or c.endswith("/five") or "turn" in c
            )
            print(
                f"  kw={kw:.2f} {second}={ow:.2f}: R@5 {100 * figures['all'][5]:.1f} R@10 "
                f"{100 * figures['all'][10]:.1f} R@20 {100 * figures['all'][20]:.1f} | worst vs best single "
                f"{100 * worst[0]:+.1f} ({worst[1]}) | {cats}"
            )


def render(report: dict) -> str:
    """Tables: one per path and question style, rows = categories, evidence counts, all (and
    "five": the five categories of the first version of the set), columns = R@5/10/20 per split."""
    lines = []
    splits = ("held-in", "held-out", "all")
    rows = (*CATEGORIES, "1 turn", "2 turns", "3+ turns", "five", "all")
    for path, figures in report.items():
        ms = figures["ms"]
        for style in STYLES:
            lines.append(f"\n{path}, {style} questions  (latency p50 {ms['p50']:.0f} ms, p95 {ms['p95']:.0f} ms)")
            lines.append(f"{'questions':<11} | " + " | ".join(f"{s:^20}" for s in splits))
            lines.append(f"{'':<11} | " + " | ".join(f"{'n':>3} {'R@5':>4} {'R@10':>5} {'R@20':>5}" for _ in splits))
            for name in rows:
                cells = []
                for split in splits:
                    row = figures["recall"].get(split, {}).get(f"{style}/{name}")
                    cells.append(
                        f"{row['n']:>3} {100 * row[5]:>4.1f} {100 * row[10]:>5.1f} {100 * row[20]:>5.1f}"
                        if row
                        else f"{'-':>20}"
                    )
                if any(cell.strip() != "-" for cell in cells):
                    lines.append(f"{name:<11} | " + " | ".join(cells))
    return "\n".join(lines)


async def _owners_from_store(pg_store, conversations: list[Conversation]) -> dict[str, str]:
    """Rebuild the memory id -> turn mapping of data loaded earlier: the turn written at the
    memory's `created_at` with its text, else every turn with its text or written at that time
    (a dedupe update keeps the first turn's `created_at` and takes the last one's text)."""
    owners: dict[str, str] = {}
    for conv in conversations:
        by_text_time = {(t.text, t.at.isoformat(timespec="microseconds")): t.id for t in conv.turns}
        by_text: dict[str, list[str]] = defaultdict(list)
        for t in conv.turns:
            by_text[t.text].append(t.id)
            by_text[t.at.isoformat(timespec="microseconds")].append(t.id)
        for kind in ("chat", "episodic"):
            ns = memory.namespace(user_of(conv), kind)
            for item in await backend_for(pg_store).scan(ns):
                stamp = item.value.get("created_at")
                turn = by_text_time.get((item.value["text"], stamp))
                owners[f"{kind}:{item.key}"] = turn or ",".join(by_text[item.value["text"]] + by_text[stamp])
    return owners


async def run(args: argparse.Namespace) -> dict:
    os.environ["POSTGRES_SCHEMA"] = args.schema
    conversations = build_conversations()
    conversations = [c for c in conversations if args.conversations is None or c.index in args.conversations]
    uri = await asyncio.to_thread(postgres_uri)
    if not args.reuse:
        async with await psycopg.AsyncConnection.connect(uri, autocommit=True) as conn:
            await conn.execute(f"DROP SCHEMA IF EXISTS {args.schema} CASCADE")
    async with store() as pg_store:
        started = time.perf_counter()
        if args.reuse:
            owners = await _owners_from_store(pg_store, conversations)
        else:
            owners = await load(pg_store, conversations)
            print(
                f"loaded in {time.perf_counter() - started:.0f} s; "
                f"{owners['_merged']} turns merged into another by dedupe"
            )
        questions = sum(len(c.questions) for c in conversations)
        turns = sum(len(c.turns) for c in conversations)
        print(f"{len(conversations)} conversations, {turns} turns, {questions} questions")
        if args.tune:
            await tune(pg_store, conversations, args.paths, owners)
            return {}
        return await evaluate(pg_store, conversations, args.paths, owners)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.recall_eval", description=__doc__.split("\n")[0])
    parser.add_argument("--paths", default=",".join(PATHS), type=lambda s: [p for p in s.split(",") if p])
    parser.add_argument("--reuse", action="store_true", help="evaluate the data already in the schema")
    parser.add_argument("--schema", default=SCHEMA)
    parser.add_argument("--conversations", type=lambda s: [int(x) for x in s.split(",")], default=None)
    parser.add_argument(
        "--tune", action="store_true", help="grid-search the fusion weights on the held-in questions instead"
    )
    parser.add_argument("--json", help="also write the report (with per-question recalls) here")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    """Entry point of `python -m bench.recall_eval`."""
    args = parse_args(argv)
    unknown = set(args.paths) - set(PATHS)
    if unknown:
        raise SystemExit(f"unknown paths {sorted(unknown)}: use {', '.join(PATHS)}")
    report = asyncio.run(run(args))
    print(render(report))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=1, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
