"""`python -m bench.embed_bench` measures what it claims: the same texts for each embedder, the
embedder's real calls replayed for the baselines, every figure as a ratio (no timing asserted)."""

from __future__ import annotations

import json
import sys

import numpy as np

from bench import embed_bench
from bench.__main__ import summary
from store.embeddings import get_embeddings
from store.minilm import MiniLM, bundled_model_dir


def test_the_texts_are_the_documentation_cut_as_the_issue_measured():
    windows = embed_bench.windows()
    assert len(windows) == embed_bench.WINDOWS == 442
    assert all(len(w) == embed_bench.WINDOW_CHARS for w in windows)
    assert len(set(windows)) == len(windows)  # no repeats
    turns = embed_bench.chat_turns()
    assert len(turns) == embed_bench.CHAT_TURNS and all(40 <= len(t) <= 800 for t in turns)


def test_the_worker_process_embeds_the_texts_as_the_product_does(tmp_path):
    texts = ["A cat sleeps on the sofa.", "Bond yields rose sharply.", "x " * 300]
    path = tmp_path / "texts.json"
    path.write_text(json.dumps(texts))
    worker = embed_bench.Worker(sys.executable, "ours", bundled_model_dir(), path, {}, threads=1)
    try:
        assert "1 worker thread," in worker.description and "BLAS" in worker.description
        assert worker.round() > 0
        vectors = worker.vectors(tmp_path / "v.npy")
    finally:
        worker.close()
    assert worker.process.returncode == 0
    assert np.allclose(vectors, MiniLM().encode(texts), atol=1e-5)


async def test_recorded_calls_are_the_embedders_own_and_replay_them():
    model = get_embeddings()
    with embed_bench.recording_embedder() as calls:
        model.embed_documents(["one", "two"])
        model.embed_query("three")
        await model.aembed_documents(["four", "five"])  # the store's path, through the query cache
        await model.aembed_documents(["bench: a text seen once"])
    assert [texts for texts, _ in calls] == [["one", "two"], ["three"], ["four", "five"], ["bench: a text seen once"]]
    assert all(seconds > 0 for _, seconds in calls)
    inner = getattr(model, "model", model)
    assert "embed_documents" not in vars(inner) and "embed_documents" not in vars(model)  # the recording is undone
    assert embed_bench.replay(calls) > 0


def test_rows_give_ratios_and_say_when_sentence_transformers_is_skipped():
    ours = {"description": "numpy", "median_s": 10.0, "ours_ratio": 1.0}
    report = {
        "embedder": {"texts": 442, "openblas_variables": {}, "contestants": {"ours": ours}},
        "ingest": {"chunks": 9, "embedded_texts": 20, "seconds": 13.0, "embedding_only_seconds": 10.0, "ratio": 1.3},
        "chat": {
            "turns": 29,
            "embedded_texts_per_turn": 3.0,
            "record_p50_ms": 30.0,
            "embed_p50_ms": 20.0,
            "ratio": 1.5,
        },
    }
    rows = embed_bench.rows(report)
    assert rows[0][3] is None and "skipped" in rows[0][2] and "--st-venv" in rows[0][2]
    assert [r[3] for r in rows[1:]] == [1.3, 1.5]
    st = {"description": "torch", "median_s": 8.0, "ours_ratio": 1.25, "min_cosine_to_ours": 0.99999}
    forced = {"description": "numpy", "median_s": 5.0, "ours_ratio": 2.0}
    report["embedder"]["contestants"].update({"sentence-transformers": st, "ours, OpenBLAS variables unset": forced})
    report["embedder"]["openblas_variables"] = {"OPENBLAS_CORETYPE": "Prescott"}
    rows = embed_bench.rows(report)
    assert rows[0][3] == 1.25 and "min cosine 0.99999" in rows[0][2]
    assert "OPENBLAS_CORETYPE=Prescott" in rows[1][0] and rows[1][3] == 2.0
    section = embed_bench.render(report)
    assert "| 1.25x |" in section and "| 1.30x |" in section and "| 1.50x |" in section


def test_the_section_replaces_its_previous_version_and_the_full_run_keeps_it():
    first = embed_bench.render(
        {"chat": {"turns": 1, "embedded_texts_per_turn": 1, "record_p50_ms": 2, "embed_p50_ms": 1, "ratio": 2.0}}
    )
    second = first.replace("2.00x", "1.10x")
    text = embed_bench.with_section("# Benchmark results\n", first)
    assert text.count("embed:begin") == 1 and "2.00x" in text
    text = embed_bench.with_section(text, second)
    assert text.count("embed:begin") == 1 and "1.10x" in text and "2.00x" not in text
    report = {
        "started_at": "now",
        "note": "",
        "seconds": {"embed": 1.0},
        "machine": {
            "cpu": "cpu",
            "cpus": 2,
            "memory_gb": 4,
            "platform": "linux",
            "python": "3.11",
            "git_commit": "abc",
            "load_average_start": [1, 1, 1],
        },
        "figures": {
            "embed": {
                "chat": {"turns": 3, "embedded_texts_per_turn": 1, "record_p50_ms": 2, "embed_p50_ms": 1, "ratio": 2.0}
            }
        },
    }
    assert (
        "| record a chat turn (p50 of 3, 1.0 texts embedded each) | 2.0 ms | embedding it 1.0 ms | 2.00x |"
        in summary(report)
    )
