"""An independent check of memory and knowledge-base recall on LoCoMo (snap-research/locomo: 10
long two-person conversations, 5,882 turns over dated sessions, 1,536 questions with turn-level
evidence), through the project's own write and recall paths, on the embedded Postgres.

    python -m bench.locomo_eval PATH                 # load (schema bench_locomo), evaluate, keep data
    python -m bench.locomo_eval PATH --reuse         # evaluate the data already loaded
    python -m bench.locomo_eval PATH --paths chat --json out.json   # with each question's ranking

PATH is the benchmark's `data/locomo10.json` (a list of samples with `conversation` and `qa`), or
one sample file / a folder of sample files of the same shape (the data is not part of this
repository: fetch it from the benchmark's repository). Each conversation is one memory user and
one knowledge base. Every turn ("Name: words") is written at its session's date and time (turns a
few seconds apart) the way the product writes it: `record_chat_message` with who spoke and the
session as its thread (what the runtime records for each message), and one KB document per turn
dated with its session (`ingest_texts`). Questions of categories 1-4 with evidence (the
adversarial category 5 has no answer in the conversation) are asked through `recall(kind="chat")`
and `knowledge.retrieve(strategy="hybrid")`. recall@k is the share of a question's evidence turns
among the first k results, reported overall, per evidence count (1, 2, 3, 4+) and per category.
With `--pool N`, a second, untimed search per question asks for N results and reports the
ceiling of re-ranking: the R@10 that the best order of those N results would give (each
question's evidence among them, at most 10, over its evidence count), so a miss can be told apart
as one that first-stage retrieval did not find at all from one it ranked too low.

`--paths` also takes `kb_graph`, `kb_fusion` and `bm25` (the KB's keyword strategy: plain BM25
over the same turns). With `bm25` among them, a table of R@10 per slice follows, each path's
figure marked `<` where it is below BM25's of the same run: the slices a question's data names
(`slices`, with `style` and the held-in / held-out `split`, as bench/chat_dataset.py's messy-chat
set does), else whether it names one recorded speaker, both or none, temporal, and 4+ evidence
turns (`list`). With `--reuse`, the registries of people (store/people.py) and the chat's
person/attribute indexes (store/aspects.py, the chat's and the knowledge base's) are rebuilt from the stored turns first.

This is a check, never a tuning set: weights are chosen on bench/recall_eval's held-in questions.
Latency (p50/p95 per recall, query embedding included) is printed with the load average: figures
from a busy machine are not the quiet-machine target.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg

from store import knowledge, memory
from store.backend import backend_for
from store.knowledge import aspects as kb_aspects
from store.knowledge import people as kb_people
from store.knowledge.config import MAX_TOP_K
from store.postgres import postgres_uri, store

SCHEMA = "bench_locomo"
PATHS = ("chat", "kb_hybrid")
ALL_PATHS = (*PATHS, "kb_graph", "kb_fusion", "bm25")
KB_STRATEGY = {"kb_hybrid": "hybrid", "kb_graph": "graph", "kb_fusion": "fusion", "bm25": "keyword"}
BASELINE = "bm25"  # the path every other is compared with, per slice, when it ran
KS = (5, 10, 20)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
TURN_GAP = timedelta(seconds=30)


@dataclass(frozen=True)
class Turn:
    id: str  # the benchmark's dia_id, "D3:12"
    session: int
    at: datetime
    speaker: str
    role: str
    text: str


@dataclass(frozen=True)
class Question:
    id: str
    category: str
    text: str
    evidence: tuple[str, ...]
    split: str = "all"  # "held-in" / "held-out" when the data says so
    style: str = ""  # "worded" / "paraphrase" when the data says so
    slices: tuple[str, ...] = ()


@dataclass
class Conversation:
    index: int
    speakers: tuple[str, str]
    turns: list[Turn] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


def _session_time(text: str) -> datetime:
    """`"1:47 pm on 18 May, 2023"` as a UTC datetime."""
    return datetime.strptime(text.replace(",", "").strip(), "%I:%M %p on %d %B %Y").replace(tzinfo=UTC)


def _samples(path: Path) -> list[dict]:
    if path.is_dir():
        return [json.loads(p.read_text()) for p in sorted(path.glob("*.json"))]
    data = json.loads(path.read_text())
    return data if isinstance(data, list) else [data]


def turn_text(turn: dict, captions: bool = False) -> str:
    """A turn as the product stores it, "Name: words"; a turn that shares a photo ends with the
    benchmark's caption of it with `captions`, the way LoCoMo's own retrieval code writes it
    ("... and shared a photo of ..."); by default text only, what a chat client sends as text."""
    text = f"{turn['speaker']}: {turn['text']}"
    caption = str(turn.get("blip_caption") or "").strip()
    return f"{text.rstrip()} and shared {caption}" if captions and caption else text


def read_conversations(path: Path, captions: bool = False) -> list[Conversation]:
    """The conversations and their answerable questions (categories 1-4 with evidence); with
    `captions`, a shared photo's caption is part of its turn (`turn_text`)."""
    conversations = []
    for index, sample in enumerate(_samples(path)):
        body = sample.get("conversation", sample)
        qa = sample.get("qa", body.get("qa", []))
        a, b = body["speaker_a"], body["speaker_b"]
        conv = Conversation(index, (a, b))
        sessions = sorted(int(m.group(1)) for key in body if (m := re.fullmatch(r"session_(\d+)", key)))
        for number in sessions:
            at = _session_time(body[f"session_{number}_date_time"])
            for position, turn in enumerate(body[f"session_{number}"]):
                conv.turns.append(
                    Turn(
                        turn["dia_id"],
                        number,
                        at + position * TURN_GAP,
                        turn["speaker"],
                        "user" if turn["speaker"] == a else "assistant",
                        turn_text(turn, captions),
                    )
                )
        known = {turn_of(t.id) for t in conv.turns}
        for number, item in enumerate(qa):
            evidence = tuple(
                dict.fromkeys(e for raw in item.get("evidence", []) for e in re.findall(r"D\d+:\d+", raw) if e in known)
            )
            if item.get("category") in CATEGORY_NAMES and evidence:
                category = CATEGORY_NAMES[item["category"]]
                slices = item.get("slices") or derived_slices(item["question"], (a, b), category, evidence)
                conv.questions.append(
                    Question(
                        f"c{index}-q{number}",
                        category,
                        item["question"],
                        evidence,
                        item.get("split", "all"),
                        item.get("style", ""),
                        tuple(slices),
                    )
                )
        conversations.append(conv)
    return conversations


def turn_of(message_id: str) -> str:
    """The turn a message is part of: "D3:12" of a turn sent as several messages, "D3:12.2"
    (bench/locomo_messy.py), or of itself."""
    return re.sub(r"\.\d+$", "", message_id)


def derived_slices(question: str, speakers: tuple[str, str], category: str, evidence: tuple) -> list[str]:
    """The slices of a question whose data names none: whether it names one recorded speaker,
    both, or none (as spelt in the turns), temporal, evidence in 4+ turns."""
    named = {name for name in speakers if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", question)}
    slices = ["both speakers" if len(named) == 2 else "name recorded" if named else "no speaker named"]
    if category == "temporal":
        slices.append("temporal")
    if len(evidence) >= 4:
        slices.append("list")
    return slices


def name_of(conv: Conversation) -> str:
    """The memory user and the knowledge base holding conversation `conv`."""
    return f"locomo_c{conv.index}"


async def load(pg_store, conversations: list[Conversation]) -> None:
    for conv in conversations:
        user = name_of(conv)
        await memory.forget_user(pg_store, user)
        for turn in conv.turns:
            await memory.record_chat_message(
                pg_store, user, turn.role, turn.text, f"session-{turn.session}", speaker=turn.speaker, now=turn.at
            )
        if user in [kb["name"] for kb in await knowledge.list_kbs(pg_store)]:
            await knowledge.delete_kb(pg_store, user)
        await knowledge.create_kb(pg_store, user, f"LoCoMo conversation {conv.index}")
        documents = [{"text": t.text, "source": f"turn:{t.id}", "title": t.id, "date": t.at} for t in conv.turns]
        await knowledge.ingest_texts(pg_store, user, documents, chunk_size=2000, chunk_overlap=0)
        print(f"  loaded conversation {conv.index}: {len(conv.turns)} turns", flush=True)


async def search(
    pg_store, path: str, conv: Conversation, query: str, owners: dict[str, str], now, top_k: int = max(KS)
) -> list[list[str]]:
    """The ranked results of one path, each as the turn ids it shows: its own, then those of the
    other parts of a message sent in parts that it stands for (`parts`). A turn sent as several
    messages counts once per result that shows it."""
    if path in KB_STRATEGY:
        found = await knowledge.retrieve(pg_store, name_of(conv), query, strategy=KB_STRATEGY[path], top_k=top_k)
        return [
            _shown([r["source"], *(part["source"] for part in r.get("parts", []))], lambda source: source)
            for r in found["retrieval_results"]
        ]
    results = await memory.recall(pg_store, name_of(conv), query, "chat", top_k=top_k, record_access=False, now=now)
    return [_shown([r["id"], *(part["id"] for part in r.get("parts", []))], owners.get) for r in results]


def _shown(ids: list[str], owner) -> list[str]:
    """The turns a result shows, its own first, each once."""
    return list(dict.fromkeys(turn_of((owner(key) or "").removeprefix("turn:")) for key in ids))


def found_in(results: list[list[str]], k: int) -> set[str]:
    """The turns the first `k` results show."""
    return set().union(*map(set, results[:k]))


def ceiling(wanted: set[str], pool: list[str], k: int) -> float:
    """The recall@k the best order of `pool` would give: its evidence, at most k, over all evidence."""
    return min(len(wanted & set(pool)), k) / len(wanted)


async def chat_owners(pg_store, conversations: list[Conversation]) -> dict[str, str]:
    """Chat memory id -> turn id, by the turn's text and time."""
    owners = {}
    for conv in conversations:
        by_text_time = {(t.text[: memory.memory_config().max_text_chars].strip(), t.at): t.id for t in conv.turns}
        ns = memory.namespace(name_of(conv), "chat")
        for item in await backend_for(pg_store).scan(ns):
            at = datetime.fromisoformat(item.value["created_at"])
            owners[item.key] = by_text_time.get((item.value["text"], at), "")
    return owners


def groups_of(question: Question) -> list[str]:
    """The report's rows a question counts in."""
    groups = ["all", f"evidence {evidence_bucket(question)}", question.category]
    groups += [f"slice {name}" for name in question.slices]
    if question.style:
        groups += [f"style {question.style}", *(f"{question.style}: {name}" for name in question.slices)]
    return groups


def evidence_bucket(question: Question) -> str:
    return "4+" if len(question.evidence) >= 4 else str(len(question.evidence))


async def evaluate(
    pg_store, conversations: list[Conversation], paths: list[str], owners: dict, pool: int | None = None
) -> dict:
    report: dict = {}
    for path in paths:
        sums: dict = defaultdict(lambda: defaultdict(list))
        latencies, per_question = [], {}
        for conv in conversations:
            now = conv.turns[-1].at + timedelta(days=1)
            for question in conv.questions:
                started = time.perf_counter()
                results = await search(pg_store, path, conv, question.text, owners, now)
                ranked = [shown[0] for shown in results]
                latencies.append((time.perf_counter() - started) * 1000)
                wanted = set(question.evidence)
                per_question[question.id] = {
                    "question": question.text,
                    "category": question.category,
                    "evidence": list(question.evidence),
                    "ranked": ranked[: max(KS)],
                    "shown": results[: max(KS)],
                }
                values = {k: len(wanted & found_in(results, k)) / len(wanted) for k in KS}
                if pool:
                    deeper = await search(pg_store, path, conv, question.text, owners, now, top_k=pool)
                    values["ceiling"] = ceiling(wanted, sorted(found_in(deeper, pool)), 10)
                for k, value in values.items():
                    for group in groups_of(question):
                        sums[group][k].append(value)
                        if question.split != "all":
                            sums[f"{group} @{question.split}"][k].append(value)
        report[path] = {
            "recall": {
                g: {k: statistics.mean(v) for k, v in ks.items()} | {"n": len(ks[KS[0]])} for g, ks in sums.items()
            },
            "ms": {"p50": statistics.median(latencies), "p95": statistics.quantiles(latencies, n=20)[-1]},
            "pool": pool,
            "per_question": per_question,
        }
    return report


def render(report: dict, load_average: tuple[float, float, float]) -> str:
    groups = ["all", "evidence 1", "evidence 2", "evidence 3", "evidence 4+", *CATEGORY_NAMES.values()]
    lines = [
        f"load average during the run (1/5/15 min): {load_average[0]:.1f} {load_average[1]:.1f} {load_average[2]:.1f}"
    ]
    for path, figures in report.items():
        ms = figures["ms"]
        lines.append(f"\n{path}  (latency p50 {ms['p50']:.0f} ms, p95 {ms['p95']:.0f} ms)")
        pool = figures.get("pool")
        ceiling_head = f" {'best R@10 of ' + str(pool):>16}" if pool else ""
        lines.append(f"{'questions':<12} | {'n':>4} {'R@5':>5} {'R@10':>5} {'R@20':>5}{ceiling_head}")
        for group in groups:
            row = figures["recall"].get(group)
            if row:
                best = f" {100 * row['ceiling']:>16.1f}" if pool else ""
                lines.append(
                    f"{group:<12} | {row['n']:>4} {100 * row[5]:>5.1f} {100 * row[10]:>5.1f} {100 * row[20]:>5.1f}{best}"
                )
    if any(group.startswith("slice ") for figures in report.values() for group in figures["recall"]):
        lines += ["", *render_slices(report)]
    return "\n".join(lines)


def render_slices(report: dict, k: int = 10) -> list[str]:
    """R@k per slice and path, held-in and held-out apart when the data has a split, each path's
    figure marked `<` where it is below BM25's of the same run (`BASELINE`)."""
    recall = {path: figures["recall"] for path, figures in report.items()}
    rows = sorted(
        {group.split(" @")[0] for figures in recall.values() for group in figures},
        key=lambda g: (not g.startswith("all"), not g.startswith("slice"), not g.startswith("style"), g),
    )
    splits = sorted({g.split(" @")[1] for figures in recall.values() for g in figures if " @" in g}) or [""]
    baseline = recall.get(BASELINE)
    head = (
        f"{'R@' + str(k) + ' per slice' + (' (' + ' / '.join(splits) + ')' if splits != [''] else ''):<44} | {'n':>9}"
    )
    lines = [head + "".join(f" | {path:>13}" for path in recall)]
    below = []
    for group in rows:
        keys = [f"{group} @{split}" if split else group for split in splits]
        first = next(iter(recall.values()))
        counts = "/".join(str(first.get(key, {}).get("n", 0)) for key in keys)
        cells = []
        for path, figures in recall.items():
            parts = []
            for key in keys:
                row = figures.get(key)
                if not row:
                    parts.append("   -")
                    continue
                value = 100 * row[k]
                worse = (
                    baseline is not None
                    and path != BASELINE
                    and key in baseline
                    and value < 100 * baseline[key][k] - 1e-9
                )
                if worse:
                    below.append(f"{path} on {key}: {value:.1f} < {100 * baseline[key][k]:.1f}")
                parts.append(f"{value:5.1f}{'<' if worse else ' '}")
            cells.append("/".join(parts))
        lines.append(f"{group:<44} | {counts:>9}" + "".join(f" | {cell:>13}" for cell in cells))
    if baseline is not None:
        lines.append(f"below {BASELINE} of this run ({len(below)}): " + ("; ".join(below) if below else "none"))
    return lines


async def run(args: argparse.Namespace) -> dict:
    os.environ["POSTGRES_SCHEMA"] = args.schema
    conversations = read_conversations(Path(args.path), captions=args.captions)
    if args.conversations is not None:
        conversations = [c for c in conversations if c.index in args.conversations]
    uri = await asyncio.to_thread(postgres_uri)
    if not args.reuse:
        async with await psycopg.AsyncConnection.connect(uri, autocommit=True) as conn:
            await conn.execute(f"DROP SCHEMA IF EXISTS {args.schema} CASCADE")
    async with store() as pg_store:
        if not args.reuse:
            started = time.perf_counter()
            await load(pg_store, conversations)
            print(f"loaded in {time.perf_counter() - started:.0f} s", flush=True)
        if args.reuse:  # data recorded before the registries of people existed
            for conv in conversations:
                if "chat" in args.paths:
                    await memory.rebuild_people(pg_store, name_of(conv))
                    await memory.rebuild_aspects(pg_store, name_of(conv))
                if set(args.paths) & set(KB_STRATEGY):
                    await kb_people.rebuild(pg_store, name_of(conv))
                    await kb_aspects.rebuild(pg_store, name_of(conv))
        owners = await chat_owners(pg_store, conversations) if "chat" in args.paths else {}
        questions = sum(len(c.questions) for c in conversations)
        turns = sum(len(c.turns) for c in conversations)
        print(f"{len(conversations)} conversations, {turns} turns, {questions} questions", flush=True)
        return await evaluate(pg_store, conversations, args.paths, owners, args.pool)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.locomo_eval", description=__doc__.split("\n")[0])
    parser.add_argument("path", help="LoCoMo's data/locomo10.json (or a sample file, or a folder of them)")
    parser.add_argument("--paths", default=",".join(PATHS), type=lambda s: [p for p in s.split(",") if p])
    parser.add_argument("--reuse", action="store_true", help="evaluate the data already in the schema")
    parser.add_argument(
        "--captions",
        action="store_true",
        help="a turn that shares a photo ends with the benchmark's caption of it (give it to load and --reuse alike)",
    )
    parser.add_argument("--schema", default=SCHEMA)
    parser.add_argument("--conversations", type=lambda s: [int(x) for x in s.split(",")], default=None)
    parser.add_argument(
        "--pool",
        type=int,
        default=None,
        help="also report the best R@10 any order of the first N results would give (an untimed second search)",
    )
    parser.add_argument("--json", help="also write the report here")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    """Entry point of `python -m bench.locomo_eval`."""
    args = parse_args(argv)
    unknown = set(args.paths) - set(ALL_PATHS)
    if unknown:
        raise SystemExit(f"unknown paths {sorted(unknown)}: use {', '.join(ALL_PATHS)}")
    if args.pool is not None and not 10 <= args.pool <= MAX_TOP_K:
        raise SystemExit(
            f"--pool must be from 10 to {MAX_TOP_K} (the most a knowledge search returns), got {args.pool}"
        )
    if not Path(args.path).exists():
        raise SystemExit(f"no such file or folder: {args.path} (LoCoMo's data/locomo10.json)")
    report = asyncio.run(run(args))
    text = render(report, os.getloadavg())
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
