"""`python -m bench` pieces do the work they claim to measure (no timing is asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

import tools.registry as registry
from bench import fanout, overhead, server
from bench.__main__ import summary
from graphs.react.graph import builder
from graphs.runtime.models import register_model_provider
from tools.registry import builtin_tools


async def test_react_and_create_agent_turns_do_the_same_work():
    react_model, agent_model = overhead.scripted_model(1), overhead.scripted_model(1)
    register_model_provider(overhead.PROVIDER, lambda name, **kw: react_model)
    react = overhead.react_turn(builder.compile(checkpointer=InMemorySaver()), "stream")
    agent = overhead.agent_turn(
        create_agent(agent_model, tools=[builtin_tools()["calculator"]], checkpointer=InMemorySaver()), "invoke"
    )
    await react()
    await agent()
    for model in (react_model, agent_model):
        assert model.remaining == 0  # two model calls each
        result = model.calls[1].messages[-1]
        assert isinstance(result, ToolMessage) and result.text == "391"  # the real calculator ran
        assert model.calls[0].tool_names and "calculator" in model.calls[0].tool_names


def test_server_config_serves_react_and_echo_from_absolute_paths(tmp_path):
    config = json.loads(server.resolved_config(tmp_path).read_text())
    assert set(config["graphs"]) == {"react", "echo"}
    for spec in [*config["graphs"].values(), config["checkpointer"]["path"]]:
        assert Path(spec.partition(":")[0]).is_file(), spec
    assert Path(config["dependencies"][0]) == Path(server.ROOT)


def test_ingest_load_serves_the_project_config_and_uploads_the_asked_size(tmp_path):
    from bench import ingest_load

    config = json.loads(ingest_load.project_config(tmp_path).read_text())
    assert {"react", "router"} <= set(config["graphs"]) and config["http"]["app"].startswith("/")
    assert Path(config["store"]["path"].partition(":")[0]).is_file()  # the Postgres store: ingest in a worker
    text = ingest_load.document(300).decode()
    assert 300 * 1024 <= len(text) < 301 * 1024 and "(Record 2.)" in text


def test_summary_lists_each_figure_with_its_baseline_and_failures():
    row = {"median_ms": 10.0, "p95_ms": 12.0, "turns": 5}
    report = {
        "started_at": "now",
        "note": "measured under load",
        "seconds": {"overhead": 1.0, "server": 2.0},
        "machine": {
            "cpu": "cpu",
            "cpus": 2,
            "memory_gb": 4,
            "platform": "linux",
            "python": "3.11",
            "git_commit": "abc",
            "load_average_start": [1, 1, 1],
            "load_average_end": [2, 2, 2],
        },
        "figures": {
            "overhead": {"invoke": {"react": row, "create_agent": {**row, "median_ms": 8.0}, "ratio": 1.25}},
            "server": {"error": "RuntimeError: langgraph dev exited"},
        },
    }
    text = summary(report)
    assert "| react turn, invoke (median) | 10.00 ms | create_agent 8.00 ms | 1.25x |" in text
    assert "| server | failed: RuntimeError: langgraph dev exited | | |" in text
    assert "measured under load" in text and "2 CPUs" in text


async def test_plan_fanout_runs_the_steps_of_a_wave_at_once_and_one_by_one_in_the_baseline():
    original = registry.available_tools
    figures = await fanout.plan_fanout(steps=3, delay=0.05, rounds=1)
    assert registry.available_tools is original  # the bench tool is served only during the run
    # Overlap, not timing: all three waits in flight together, never two in the baseline.
    assert figures["parallel"]["most_at_once"] == 3
    assert figures["serial"]["most_at_once"] == 1 and figures["one"]["most_at_once"] == 1
    assert figures["ratio"] == figures["parallel"]["median_s"] / figures["serial"]["median_s"]
    assert figures["ideal_ratio"] == 1 / 3 and figures["baseline"] == "max_parallel_steps=1"


async def test_research_fanout_searches_at_once_and_one_by_one_in_the_baseline():
    figures = await fanout.research_fanout(units=2, delay=0.05, rounds=1)
    assert figures["parallel"]["most_at_once"] == 2
    assert figures["serial"]["most_at_once"] == 1
    assert figures["ratio_vs_n_x_one"] == figures["parallel"]["median_s"] / (2 * figures["one"]["median_s"])
    text = summary(
        {
            "started_at": "now",
            "note": "",
            "seconds": {"research_fanout": 1.0},
            "machine": {
                "cpu": "cpu",
                "cpus": 2,
                "memory_gb": 4,
                "platform": "linux",
                "python": "3.11",
                "git_commit": "abc",
                "load_average_start": [1, 1, 1],
            },
            "figures": {"research_fanout": figures},
        }
    )
    assert "| deep_research: 2 researchers, each search 0.05 s (median wall), parallel |" in text
    assert f"max_concurrent_research_units=1 {figures['serial']['median_s']:.3f} s | {figures['ratio']:.2f}x |" in text


def test_locomo_reader_keeps_answerable_questions_and_their_turns(tmp_path):
    from bench.locomo_eval import evidence_bucket, read_conversations

    sample = {
        "sample_id": "x",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:47 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a cat."},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Lovely!"},
            ],
            "session_2_date_time": "9:00 am on 10 May, 2023",
            "session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "How is the cat?"}],
        },
        "qa": [
            {"question": "What did Ana adopt?", "answer": "a cat", "evidence": ["D1:1"], "category": 4},
            {"question": "Who asked?", "answer": "Ben", "evidence": ["D1:2; D2:1", "D9:9"], "category": 1},
            {"question": "Adversarial?", "evidence": ["D1:1"], "category": 5},
            {"question": "No evidence?", "answer": "x", "evidence": [], "category": 2},
        ],
    }
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps([sample]))
    (conv,) = read_conversations(path)
    assert [(t.id, t.role, t.text) for t in conv.turns] == [
        ("D1:1", "user", "Ana: I adopted a cat."),
        ("D1:2", "assistant", "Ben: Lovely!"),
        ("D2:1", "assistant", "Ben: How is the cat?"),
    ]
    assert conv.turns[0].at.isoformat() == "2023-05-08T13:47:00+00:00" and conv.turns[1].at > conv.turns[0].at
    assert [(q.category, q.evidence) for q in conv.questions] == [
        ("single-hop", ("D1:1",)),
        ("multi-hop", ("D1:2", "D2:1")),
    ]
    assert [evidence_bucket(q) for q in conv.questions] == ["1", "2"]


def test_locomo_ceiling_is_the_best_order_of_the_pool():
    from bench.locomo_eval import ceiling

    wanted = {"D1:1", "D2:4", "D3:3", "D7:2"}
    pool = ["D9:9", "D2:4", "D8:1", "D1:1", "D3:3"]
    assert ceiling(wanted, pool, 10) == 0.75  # three of four found, order does not matter
    assert ceiling(wanted, pool, 2) == 0.5  # but no more than k fit in the first k
    assert ceiling({"D5:5"}, pool, 10) == 0.0


def test_locomo_counts_the_turns_a_result_shows_its_parts_included():
    from bench.locomo_eval import _shown, found_in

    owners = {"m1": "D1:3.1", "m2": "D1:3.2", "m3": "D1:4", "m4": "D2:1"}
    # a message sent in parts shows its parts: each turn once, its own first
    assert _shown(["m2", "m1", "m3"], owners.get) == ["D1:3", "D1:4"]
    assert _shown(["turn:D2:1", "turn:D2:2.1"], lambda source: source) == ["D2:1", "D2:2"]
    results = [["D1:3", "D1:4"], ["D2:1"], ["D5:5"]]
    assert found_in(results, 1) == {"D1:3", "D1:4"}  # the first result shows two turns
    assert found_in(results, 2) == {"D1:3", "D1:4", "D2:1"}
    assert found_in([], 10) == set()


def test_locomo_pool_outside_what_searches_return_is_refused_before_any_work(tmp_path):
    from bench.locomo_eval import main

    for bad in ("5", "51"):
        with pytest.raises(SystemExit, match="--pool must be from 10 to 50"):
            main([str(tmp_path / "missing.json"), "--pool", bad])
