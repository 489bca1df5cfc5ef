"""The offline eval suites (evals/) against the real graphs: CI fails when a score drops below
evals/thresholds.json."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.messages.utils import convert_to_openai_messages

import tools.registry as registry
from evals import run
from evals.evaluators import (
    answer_contains,
    citation_validity,
    exact_fields,
    fabricated_removed,
    json_shape,
    output_shape,
    plan_completion,
    plan_shape,
    report_structure,
    trajectory_match,
)
from evals.suites import SUITES


@pytest.fixture(autouse=True)
def offline_env(monkeypatch, embeddings):
    """No key: nothing may be uploaded, and the langsmith pytest plugin must not track."""
    monkeypatch.delenv("LANGSMITH_API_KEY", raising=False)
    monkeypatch.setenv("LANGSMITH_TEST_TRACKING", "false")
    monkeypatch.setenv("LANGSMITH_TRACING", "false")


def lines(name: str) -> int:
    return sum(1 for line in (run.DATASETS / SUITES[name].dataset).read_text().splitlines() if line.strip())


def test_offline_suites_meet_their_thresholds_and_write_results(tmp_path, capsys):
    assert run.main(["--out", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    thresholds = json.loads(run.THRESHOLDS.read_text())["offline"]
    for name in SUITES:
        written = json.loads((tmp_path / f"{name}.offline.json").read_text())
        assert written["failures"] == [] and len(written["rows"]) == lines(name)
        assert set(thresholds[name]) <= set(written["means"])
        assert all(mean == 1.0 for mean in written["means"].values()), written["means"]
        assert all(not row["error"] and row["outputs"].get("failed_tool_calls", []) == [] for row in written["rows"])
        assert written["dataset"] == run.dataset_name(SUITES[name])
    assert "trajectory_strict_match" in table and "FAIL" not in table
    memory = json.loads((tmp_path / "memory.offline.json").read_text())
    answers = {row["kind"]: row["outputs"]["answer"] for row in memory["rows"]}
    assert "Lisbon" in answers["fact_update"] and "shellfish" not in answers["isolation"]

    # router: a third of the examples held out, reported separately; the model only where unsure
    router = json.loads((tmp_path / "router.offline.json").read_text())
    splits = [row["split"] for row in router["rows"]]
    assert splits.count("heldout") * 3 == len(splits) and set(router["split_means"]) == {"heldin", "heldout"}
    assert "heldout 1.000" in table
    methods = {row["kind"]: row["outputs"]["method"] for row in router["rows"]}
    assert methods["general_unsure"] == methods["kb_inferred_unsure"] == "llm" and methods["tool_cue"] == "heuristic"
    # plan_execute: the real tools ran in waves and their results reached the answer
    plans = {
        row["kind"]: row["outputs"] for row in json.loads((tmp_path / "plan_execute.offline.json").read_text())["rows"]
    }
    assert plans["parallel"]["waves"] == 1 and plans["chain"]["waves"] == 2
    assert "Asia/Tokyo" in plans["clock"]["answer"] and "48" in plans["chain"]["answer"]
    # deep_research: every cited URL was served by the loopback corpus; invented ones were removed
    reports = {
        row["kind"]: row["outputs"] for row in json.loads((tmp_path / "deep_research.offline.json").read_text())["rows"]
    }
    assert all(url.startswith("http://127.0.0.1:") for o in reports.values() for url in o["cited_urls"])
    assert len(reports["two_questions"]["cited_urls"]) == 4
    assert set(reports["fabricated_url"]["removed_urls"]) == {
        "https://invented.example/oven-study",
        "https://fake.example/ovens",
    }


def test_a_tool_missing_from_the_registry_fails_ci(tmp_path, monkeypatch, capsys):
    real = registry.available_tools

    async def without_calculator():
        tools, problems = await real()
        return {name: t for name, t in tools.items() if name != "calculator"}, problems

    monkeypatch.setattr(registry, "available_tools", without_calculator)
    assert run.main(["react", "--out", str(tmp_path)]) == 1
    printed = capsys.readouterr().out
    result = json.loads((tmp_path / "react.offline.json").read_text())
    failed = {failure.split()[1] for failure in result["failures"]}
    assert {"trajectory_strict_match", "tool_selection", "answer_contains"} <= failed
    assert "FAIL react: tool_selection" in printed
    # the calculator examples fail, the others still pass
    by_kind = [(row["outputs"]["tool_calls"], row["scores"]["tool_selection"]["score"]) for row in result["rows"]]
    assert (
        all(score == (not any(c["name"] == "calculator" for c in calls)) for calls, score in by_kind if calls)
        and sum(score == 0 for _, score in by_kind) == 4
    )


def test_router_heuristics_losing_a_cue_fail_ci(tmp_path, monkeypatch, capsys):
    """Without the tool cues the scripted model still names the right route, but the heuristics
    no longer decide it: route_method catches the regression."""
    import graphs.router.intent as intent

    monkeypatch.setattr(intent, "TOOL_CUES", ())
    assert run.main(["router", "--out", str(tmp_path)]) == 1
    result = json.loads((tmp_path / "router.offline.json").read_text())
    assert [f.split()[1] for f in result["failures"]] == ["route_method"]
    wrong = {row["kind"] for row in result["rows"] if row["scores"]["route_method"]["score"] == 0}
    assert wrong == {"tool_cue"} and result["means"]["route_match"] == 1.0
    assert result["split_means"]["heldout"]["route_method"] < 1.0
    assert "FAIL router: route_method" in capsys.readouterr().out


def test_deep_research_without_citation_check_fails_ci(tmp_path, monkeypatch):
    """A report whose citations are not validated keeps the writer's invented URLs."""
    import graphs.deep_research.graph as research
    from graphs.deep_research.citations import CitationCheck

    monkeypatch.setattr(research, "validate_report", lambda report, catalog, notes: CitationCheck(report=report))
    assert run.main(["deep_research", "--out", str(tmp_path)]) == 1
    result = json.loads((tmp_path / "deep_research.offline.json").read_text())
    assert {f.split()[1] for f in result["failures"]} == {"citation_validity", "fabricated_removed"}
    rows = {row["kind"]: row["scores"] for row in result["rows"]}
    assert rows["fabricated_url"]["citation_validity"]["score"] == 0
    assert "invented.example" in rows["fabricated_url"]["citation_validity"]["comment"]
    assert rows["two_questions"]["citation_validity"]["score"] == 1


def test_plan_and_report_evaluators_reject_broken_outputs():
    def step(step_id, tool="calculator", deps=()):
        return {"id": step_id, "description": "d", "tool": tool, "args": {}, "depends_on": list(deps)}

    good = {
        "plan": [step("a"), step("b", None, ["a"])],
        "allowed_tools": ["calculator"],
        "status": "completed",
        "execution_log": [{"step_id": "a", "status": "completed"}, {"step_id": "b", "status": "recovered"}],
    }
    assert plan_shape(good)["score"] == 1 and plan_completion(good, {})["score"] == 1
    assert "cycle" in plan_shape({**good, "plan": [step("a", deps=["b"]), step("b", deps=["a"])]})["comment"]
    assert "'web_search'" in plan_shape({**good, "plan": [step("a", "web_search")]})["comment"]
    assert "depends_on ['z']" in plan_shape({**good, "plan": [step("a", deps=["z"])]})["comment"]
    assert plan_shape({**good, "plan": [step("a"), step("a")]})["score"] == 0
    unfinished = {**good, "execution_log": good["execution_log"][:1]}
    assert "step 'b' has no final status" in plan_completion(unfinished, {})["comment"]
    assert plan_completion({**good, "status": "partial"}, {})["score"] == 0

    report = (
        "# R\n\nKettles boil fast [1] and pumps lift water [2].\n\n## Sources\n[1] K: http://a/1\n[2] P: http://a/2\n"
    )
    assert report_structure({"report": report})["score"] == 1
    assert "no Sources section" in report_structure({"report": "Kettles [1]."})["comment"]
    assert "cited [1, 2, 3]" in report_structure({"report": report.replace("[2].", "[2][3].")})["comment"]
    retrieved = {"retrieved_urls": ["http://a/1", "http://a/2"]}
    assert citation_validity({**retrieved, "cited_urls": ["http://a/1"]})["score"] == 1
    assert citation_validity({**retrieved, "cited_urls": ["http://a/1", "http://x/9"]})["score"] == 0
    assert citation_validity({**retrieved, "cited_urls": []})["score"] == 0
    invented = {"fabricated_urls": ["http://x/9"]}
    assert fabricated_removed({"report": report, "removed_urls": ["http://x/9"]}, invented)["score"] == 1
    assert fabricated_removed({"report": report + "http://x/9", "removed_urls": ["http://x/9"]}, invented)["score"] == 0
    assert fabricated_removed({"report": report}, {})["score"] is None


def test_trajectory_match_compares_calculator_expressions_by_value():
    reference = {
        "trajectory": [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"name": "calculator", "args": {"expression": "0.17*2340"}}],
            },
            {"role": "tool", "content": "397.8"},
            {"role": "assistant", "content": "397.8"},
        ]
    }

    def outputs(expression: str) -> dict:
        messages = [
            AIMessage("", tool_calls=[{"name": "calculator", "args": {"expression": expression}, "id": "c1"}]),
            ToolMessage("397.8", tool_call_id="c1"),
            AIMessage("It is 397.8"),
        ]
        return {"messages": convert_to_openai_messages(messages), "answer": "It is 397.8"}

    strict = trajectory_match("strict")
    assert strict(outputs("2340 * 17 / 100"), reference)["score"] == 1
    assert strict(outputs("2340 * 0.18"), reference)["score"] == 0
    assert (
        strict({"messages": outputs("2340*0.17")["messages"][:1] + outputs("1")["messages"][2:]}, reference)["score"]
        == 0
    )
    assert output_shape(outputs("1"))["score"] == 1
    assert output_shape({"messages": outputs("1")["messages"][:1], "answer": ""})["score"] == 0
    assert answer_contains({"answer": "2^20 = 1,048,576"}, {"answer_contains": ["1048576"]})["score"] == 1
    assert answer_contains({"answer": "about a million"}, {"answer_contains": ["1048576"]})["score"] == 0
    assert answer_contains({"answer": "hi"}, {"answer_contains": []})["score"] is None


def test_datasets_are_langsmith_examples_named_by_content_hash(tmp_path, monkeypatch):
    examples = run.load_examples(run.DATASETS / "react_tools.jsonl")
    assert all(e.inputs["messages"] and "trajectory" in e.outputs for e in examples)
    assert [e.id for e in examples] == [e.id for e in run.load_examples(run.DATASETS / "react_tools.jsonl")]

    monkeypatch.setattr(run, "DATASETS", tmp_path)
    path = tmp_path / SUITES["react"].dataset
    path.write_text('{"inputs": {"messages": []}, "outputs": {"trajectory": []}}\n')
    first = run.dataset_name(SUITES["react"])
    path.write_text('{"inputs": {"messages": []}, "outputs": {"trajectory": [], "answer_contains": ["x"]}}\n')
    assert first.startswith("agent-engine-react-") and run.dataset_name(SUITES["react"]) != first

    path.write_text('{"inputs": {}, "outputs": {}}\n{"input": {"q": 1}}\n')
    with pytest.raises(run.DatasetError, match=r"react_tools.jsonl:2: .*'inputs' and 'outputs'"):
        run.load_examples(path)


def test_online_mode_needs_a_key_and_a_real_model(monkeypatch):
    with pytest.raises(SystemExit, match="LANGSMITH_API_KEY"):
        run.run_suites(["react"], online=True, model="openai:gpt-4o-mini")
    monkeypatch.setenv("LANGSMITH_API_KEY", "lsv2-test")
    monkeypatch.delenv("AGENT_MODEL", raising=False)
    with pytest.raises(SystemExit, match="real model"):
        run.run_suites(["react"], online=True)
    with pytest.raises(SystemExit, match="unknown suite"):
        run.run_suites(["nope"])


def test_llm_judges_run_only_when_a_judge_model_is_configured(tmp_path):
    from graphs.runtime.models import register_model_provider
    from tests.fakes import ScriptedChatModel

    verdict = {"tool_calls": [{"name": "score", "args": {"reasoning": "matches the reference", "score": True}}]}
    judge = ScriptedChatModel(responses=[verdict] * 2 * lines("react"))
    register_model_provider("scripted-judge", lambda name, **kw: judge)
    (result,) = run.run_suites(["react"], judge="scripted-judge:x", out=tmp_path)
    assert result.means["correctness"] == 1.0 and result.means["helpfulness"] == 1.0
    assert judge.remaining == 0
    prompts = [" ".join(m.text for m in call.messages) for call in judge.calls]
    assert any("17% of 2340 is 397.8." in p for p in prompts)  # correctness saw the reference answer
    (plain,) = run.run_suites(["react"], out=tmp_path)
    assert "correctness" not in plain.means


class RecordingClient:
    """The three LangSmith client calls `sync_dataset` makes, recorded."""

    def __init__(self, existing: set[str]) -> None:
        self.existing, self.created, self.examples = existing, [], []

    def has_dataset(self, *, dataset_name: str) -> bool:
        return dataset_name in self.existing

    def create_dataset(self, name: str, description: str):
        self.created.append(name)
        self.existing.add(name)
        return type("Dataset", (), {"id": "ds-1"})()

    def create_examples(self, *, dataset_id: str, examples: list[dict]) -> None:
        self.examples += examples


def test_online_dataset_is_created_once_per_content_hash():
    suite = SUITES["memory"]
    examples = run.load_examples(run.DATASETS / suite.dataset)
    client = RecordingClient(set())
    name = run.sync_dataset(client, suite, examples)
    assert name == run.dataset_name(suite) and client.created == [name]
    assert [e["inputs"] for e in client.examples] == [e.inputs for e in examples]
    assert all(set(e) == {"id", "inputs", "outputs", "metadata"} for e in client.examples)
    assert run.sync_dataset(client, suite, examples) == name and client.created == [name]  # not again


def test_exact_field_and_json_shape_evaluators_for_structured_outputs():
    route = exact_fields("route", "kb_prefix", key="route_match")
    reference = {"route": "kb", "kb_prefix": "edu"}
    assert route({"route": "kb", "kb_prefix": "edu", "extra": 1}, reference) == {
        "key": "route_match",
        "score": 1,
        "comment": None,
    }
    assert route({"route": "kb", "kb_prefix": "hr"}, reference)["comment"] == "kb_prefix: 'hr' != 'edu'"
    shape = json_shape(steps=list, title=str)
    assert shape({"steps": [], "title": "t"})["score"] == 1
    assert shape({"steps": "one"})["comment"] == "missing or mistyped: ['steps', 'title']"
