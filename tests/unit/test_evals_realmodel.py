"""The real-model eval tier's own logic (evals/realmodel/) on scripted data: wire parsing (usage
and cached tokens, streamed answers, tool calls written as text, schema checks), the recording
proxy, task loading and selection, scoring, the summary and the results table, and one run of
`python -m evals.realmodel` against the scripted OpenAI-compatible server. No real model."""

from __future__ import annotations

import json

import httpx
import pytest

from evals.realmodel import report, run
from evals.realmodel.scoring import contains_number_or_text, score
from evals.realmodel.tasks import SUITES, Task, TaskError, load_tasks, select
from evals.realmodel.wire import (
    RecordingProxy,
    assemble_stream,
    call_tool_checks,
    check_call,
    parse_sse,
    recheck,
    text_tool_calls,
    usage_of,
)
from tests.openai_server import run_openai_server

CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    },
}


# --- usage and cached tokens ------------------------------------------------------------------------


def test_usage_reads_cached_tokens_from_prompt_tokens_details_first():
    body = {
        "usage": {"prompt_tokens": 4400, "completion_tokens": 30, "prompt_tokens_details": {"cached_tokens": 4100}},
        "timings": {"cache_n": 9, "prompt_n": 300},
    }
    assert usage_of(body) == {
        "prompt_tokens": 4400,
        "completion_tokens": 30,
        "cached_tokens": 4100,
        "cached_source": "prompt_tokens_details",
    }


def test_usage_falls_back_to_llama_cpp_timings_then_to_none():
    llama = {"usage": {"prompt_tokens": 733, "completion_tokens": 12}, "timings": {"cache_n": 732, "prompt_n": 1}}
    assert usage_of(llama)["cached_tokens"] == 732 and usage_of(llama)["cached_source"] == "timings.cache_n"
    only_timings = {"timings": {"cache_n": 5, "prompt_n": 20, "predicted_n": 7}}
    assert usage_of(only_timings) == {
        "prompt_tokens": 25,
        "completion_tokens": 7,
        "cached_tokens": 5,
        "cached_source": "timings.cache_n",
    }
    plain = usage_of({"usage": {"prompt_tokens": 10, "completion_tokens": 2}})
    assert plain["cached_tokens"] is None and plain["cached_source"] is None


def test_a_streamed_answer_is_assembled_with_its_tool_call_pieces_and_final_usage():
    raw = (
        b"".join(
            f"data: {json.dumps(event)}\n\n".encode()
            for event in [
                {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Let me "}}]},
                {"choices": [{"index": 0, "delta": {"content": "compute."}}]},
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {"index": 0, "id": "c1", "function": {"name": "calculator", "arguments": '{"expr'}}
                                ]
                            },
                        }
                    ]
                },
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {"tool_calls": [{"index": 0, "function": {"arguments": 'ession": "1+1"}'}}]},
                        }
                    ]
                },
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
                {
                    "choices": [],
                    "usage": {
                        "prompt_tokens": 50,
                        "completion_tokens": 9,
                        "prompt_tokens_details": {"cached_tokens": 40},
                    },
                    "timings": {"cache_n": 40},
                },
            ]
        )
        + b"data: [DONE]\n\n"
    )
    body = assemble_stream(parse_sse(raw))
    message = body["choices"][0]["message"]
    assert message["content"] == "Let me compute."
    assert message["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": '{"expression": "1+1"}'}}
    ]
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    assert usage_of(body)["cached_tokens"] == 40


# --- tool calls written as text, and their validity ------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        '```json\n{"name": "calculator", "arguments": {"expression": "0.17*2340"}}\n```',
        '{{"name": "calculator", "arguments": {"expression": "0.17*2340"}}}',
        '<tool_call>\n{"name": "calculator", "arguments": {"expression": "0.17*2340"}}\n</tool_call>',
        '<tools><function name="calculator" arguments=\'{"expression": "0.17*2340"}\'/></tools>',
        'Sure! {"name": "calculator", "parameters": {"expression": "0.17*2340"}}',
    ],
)
def test_tool_calls_written_as_text_are_recognised_in_every_common_shape(content):
    [call] = text_tool_calls(content)
    assert call["name"] == "calculator"
    arguments = call["arguments"] if isinstance(call["arguments"], dict) else json.loads(call["arguments"])
    assert arguments == {"expression": "0.17*2340"}


def test_prose_and_plain_json_are_not_tool_calls():
    assert text_tool_calls("17% of 2340 is 397.8.") == []
    assert text_tool_calls('{"route": "general", "reason": "chat"}') == []
    assert text_tool_calls(None) == []


def test_check_call_names_what_is_wrong():
    offered = {"calculator": CALCULATOR["function"]["parameters"]}
    assert check_call("calculator", {"expression": "1+1"}, offered) is None
    assert check_call("calculator", '{"expression": "1+1"}', offered) is None
    assert "not offered" in check_call("web_search", {"query": "x"}, offered)
    assert "not JSON" in check_call("calculator", "{expression: 1}", offered)
    assert "'expression' is a required property" in check_call("calculator", {}, offered)
    assert "is not of type 'string'" in check_call("calculator", {"expression": 5}, offered)


def test_call_checks_count_structured_calls_and_text_calls_only_when_none_came_back():
    request = {"tools": [CALCULATOR], "messages": [{"role": "user", "content": "1+1?"}]}
    structured = {
        "choices": [
            {
                "message": {
                    "content": '{"name": "calculator", "arguments": {"expression": "2"}}',
                    "tool_calls": [{"function": {"name": "calculator", "arguments": "{}"}}],
                }
            }
        ]
    }
    checks = call_tool_checks(request, structured)
    assert (checks["structured"], checks["structured_valid"], checks["text"]) == (1, 0, 0)
    assert checks["problems"] == ["calculator: 'expression' is a required property"]
    as_text = {
        "choices": [{"message": {"content": '```\n{"name": "calculator", "arguments": {"expression": "2"}}\n```'}}]
    }
    checks = call_tool_checks(request, as_text)
    assert (checks["structured"], checks["text"], checks["text_valid"], checks["text_names"]) == (
        0,
        1,
        1,
        ["calculator"],
    )
    no_tools = call_tool_checks({"messages": []}, as_text)
    assert no_tools["text"] == 0 and no_tools["offered"] == []


def test_a_forced_tools_arguments_written_as_bare_json_count_as_a_text_call():
    plan_tool = {
        "type": "function",
        "function": {
            "name": "Plan",
            "parameters": {
                "type": "object",
                "properties": {"steps": {"type": "array", "items": {"type": "object"}}},
                "required": ["steps"],
            },
        },
    }
    request = {"tools": [plan_tool], "tool_choice": {"type": "function", "function": {"name": "Plan"}}}
    content = '```json\n{"steps": [{"id": "s1", "description": "12 squared"}]}\n```'
    checks = call_tool_checks(request, {"choices": [{"message": {"content": content}}]})
    assert (checks["text"], checks["text_valid"], checks["text_names"]) == (1, 1, ["Plan"])
    wrong = call_tool_checks(request, {"choices": [{"message": {"content": '{"plan": []}'}}]})
    assert wrong["text_valid"] == 0 and wrong["problems"] == ["(as text) Plan: 'steps' is a required property"]
    not_forced = call_tool_checks({"tools": [plan_tool]}, {"choices": [{"message": {"content": content}}]})
    assert not_forced["text"] == 0
    recorded = {"content": content, "tool_calls": [], "request": request}
    assert recheck(recorded) == checks
    older = {"content": '{"plan": []}', "tool_calls": [], "tools": ["Plan"], "tool_choice": request["tool_choice"]}
    assert recheck(older)["text"] == 1  # without the schemas, the names and shape are still checked


# --- the recording proxy ------------------------------------------------------------------------------------


def test_the_proxy_forwards_streamed_and_plain_calls_and_records_them():
    with run_openai_server() as server, RecordingProxy(server.base_url) as proxy:
        server.script("stream me", ["Hello there."])
        server.script("plain me", [{"tool_calls": [{"name": "calculator", "args": {"expression": "1+1"}}]}])
        proxy.task = "t1"
        headers = {"Authorization": "Bearer local"}
        with httpx.stream(
            "POST",
            f"{proxy.base_url}/chat/completions",
            headers=headers,
            json={
                "model": "m",
                "stream": True,
                "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": "stream me"}],
            },
            timeout=10,
        ) as response:
            streamed = b"".join(response.iter_bytes())
        proxy.task = "t2"
        plain = httpx.post(
            f"{proxy.base_url}/chat/completions",
            headers=headers,
            json={"model": "m", "tools": [CALCULATOR], "messages": [{"role": "user", "content": "plain me"}]},
            timeout=10,
        ).json()
        models = httpx.get(f"{proxy.base_url}/models", headers=headers, timeout=10)
    assert assemble_stream(parse_sse(streamed))["choices"][0]["message"]["content"] == "Hello there."
    assert plain["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "calculator"
    assert models.status_code == 200
    [first] = proxy.calls_of("t1")
    [second] = proxy.calls_of("t2")
    assert first.stream and first.content == "Hello there." and first.usage["prompt_tokens"] > 0
    assert first.status == 200 and first.error is None
    assert not second.stream and second.tools == ["calculator"]
    assert second.tool_calls == [{"name": "calculator", "arguments": '{"expression": "1+1"}'}]
    assert second.checks["structured_valid"] == 1 and recheck(second.as_dict()) == second.checks
    assert len(proxy.calls) == 2  # /models is forwarded, not recorded as a model call


def test_the_proxy_closes_the_upstream_call_when_the_client_hangs_up():
    with run_openai_server() as server, RecordingProxy(server.base_url) as proxy:
        server.script("slow", [{"content": "late", "delay": 3}])
        proxy.task = "slow"
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(
                f"{proxy.base_url}/chat/completions",
                headers={"Authorization": "Bearer local"},
                json={"model": "m", "tools": [CALCULATOR], "messages": [{"role": "user", "content": "slow"}]},
                timeout=0.5,
            )
        for _ in range(50):
            if proxy.calls_of("slow")[0].error:
                break
            httpx.get(f"{proxy.base_url}/models", headers={"Authorization": "Bearer local"}, timeout=5)
    [call] = proxy.calls_of("slow")
    assert call.client_gone and call.error == "client hung up" and call.content == ""
    assert call.tools == ["calculator"] and call.messages == 1  # what was asked is kept


# --- tasks --------------------------------------------------------------------------------------------------


def test_the_committed_tasks_cover_every_suite_with_a_held_out_third():
    tasks = load_tasks()
    assert len(tasks) >= 40
    assert {t.suite for t in tasks} == set(SUITES)
    for suite in SUITES:
        assert {t.split for t in tasks if t.suite == suite} == {"heldin", "heldout"}, suite
    heldout = sum(t.split == "heldout" for t in tasks)
    assert 0.25 <= heldout / len(tasks) <= 0.4
    assert any(t.expect.get("fails_clearly_within_s") for t in tasks)
    assert any(t.suite == "memory" and t.inputs.get("other_user_sessions") for t in tasks)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "a", "suite": "nope", "split": "heldin", "inputs": {}, "expect": {"x": 1}}', "unknown suite"),
        ('{"id": "a", "suite": "react", "split": "test", "inputs": {}, "expect": {"x": 1}}', "split must be"),
        ('{"id": "a", "suite": "react", "split": "heldin", "inputs": {}}', "exactly id, suite"),
        ('{"id": "a", "suite": "react", "split": "heldin", "inputs": {}, "expect": {}}', "non-empty"),
        ("not json", "not JSON"),
    ],
)
def test_malformed_task_lines_are_refused_with_the_line_number(tmp_path, line, message):
    path = tmp_path / "tasks.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(TaskError, match=f"tasks.jsonl:1: .*{message}"):
        load_tasks(path)


def test_repeated_ids_are_refused(tmp_path):
    row = '{"id": "a", "suite": "react", "split": "heldin", "inputs": {}, "expect": {"x": 1}}\n'
    path = tmp_path / "tasks.jsonl"
    path.write_text(row * 2)
    with pytest.raises(TaskError, match="repeated"):
        load_tasks(path)


def _task(id: str, suite: str, split: str) -> Task:
    return Task(id, suite, split, {}, {"x": 1})


def test_selection_interleaves_suites_and_splits_and_limits_per_suite():
    tasks = [_task(f"r{i}", "react", "heldin") for i in range(3)] + [_task("ro", "react", "heldout")]
    tasks += [_task("p1", "router", "heldin"), _task("po", "router", "heldout"), _task("m1", "memory", "heldin")]
    assert [t.id for t in select(tasks)] == ["r0", "p1", "m1", "ro", "po", "r1", "r2"]
    assert [t.id for t in select(tasks, limit=2)] == ["r0", "p1", "m1", "ro", "po"]
    assert [t.id for t in select(tasks, only=["router"], split="heldout")] == ["po"]
    assert [t.id for t in select(tasks, ids=["m1", "r2"])] == ["r2", "m1"]
    with pytest.raises(TaskError, match="unknown suite"):
        select(tasks, only=["reactt"])
    with pytest.raises(TaskError, match="unknown task id"):
        select(tasks, ids=["zz"])


# --- scoring ------------------------------------------------------------------------------------------------


def test_numbers_match_whole_numbers_only():
    assert contains_number_or_text("You pay 68 euros.", "68")
    assert contains_number_or_text("You pay 68.00 euros.", "68")
    assert contains_number_or_text("It is 83,810,205.", "83810205")
    assert not contains_number_or_text("You pay 168 euros.", "68")
    assert not contains_number_or_text("You pay 6.8 euros.", "68")
    assert not contains_number_or_text("Result: 68.5", "68")


def test_react_succeeds_only_when_the_tool_ran_and_the_answer_holds_the_value():
    task = Task("t", "react", "heldin", {}, {"tools_called": ["calculator"], "answer_contains": ["397.8"]})
    ran = {"name": "calculator", "status": "success", "content": "397.8"}
    good = {"answer": "17% of 2340 is 397.8.", "tool_results": [ran], "tool_calls": [{"name": "calculator"}]}
    assert score(task, good)["success"]
    from_memory = {"answer": "It is 397.8.", "tool_results": [], "tool_calls": []}
    assert score(task, from_memory)["checks"]["called_calculator"] is False
    failed_tool = {**good, "tool_results": [{**ran, "status": "error"}]}
    assert not score(task, failed_tool)["success"]
    as_text = {"answer": '```json\n{"name": "calculator", "arguments": {"expression": "0.17*2340"}}\n```'}
    result = score(task, as_text)
    assert not result["success"] and result["checks"]["answer_not_tool_text"] is False
    assert any("written as text" in note for note in result["notes"])
    raised = score(task, {"error": "TimeoutError: no result within the task timeout (600 s)"})
    assert not raised["success"] and "task timeout" in raised["notes"][0]


def test_router_plan_and_memory_scoring():
    router = Task("r", "router", "heldin", {}, {"route": "retrieval", "kb_prefix": "hr_policies"})
    assert score(router, {"route": "retrieval", "kb_prefix": "hr_policies", "method": "llm"})["success"]
    wrong = score(router, {"route": "general", "kb_prefix": "", "method": "llm"})
    assert not wrong["success"] and "route 'general' != 'retrieval' (llm)" in wrong["notes"]
    general = Task("g", "router", "heldin", {}, {"route": "general"})
    fallback = {"route": "general", "method": "heuristic", "confidence": 0.3, "reason": "no cue; model unavailable"}
    result = score(general, fallback)
    assert not result["success"] and result["checks"] == {"decided": False, "route": True}
    assert score(general, {**fallback, "confidence": 0.9, "reason": "greeting"})["success"]

    plan = Task(
        "p", "plan_execute", "heldin", {}, {"plan_valid": True, "status": "completed", "answer_contains": ["48"]}
    )
    steps = [
        {"id": "a", "description": "square", "tool": "calculator", "args": {"expression": "12**2"}, "depends_on": []},
        {
            "id": "b",
            "description": "divide",
            "tool": "calculator",
            "args": {"expression": "144/3"},
            "depends_on": ["a"],
        },
    ]
    log = [{"step_id": "a", "status": "completed"}, {"step_id": "b", "status": "completed"}]
    done = {
        "plan": steps,
        "execution_log": log,
        "status": "completed",
        "answer": "144 / 3 = 48",
        "allowed_tools": ["calculator"],
    }
    assert score(plan, done)["success"]
    partial = {**done, "status": "partial", "execution_log": [log[0], {"step_id": "b", "status": "failed"}]}
    checks = score(plan, partial)["checks"]
    assert checks["plan_valid"] and not checks["finished"]
    cyclic = {**done, "plan": [{**steps[0], "depends_on": ["b"]}, steps[1]]}
    assert score(plan, cyclic)["checks"]["plan_valid"] is False

    recall = Task("m", "memory", "heldin", {}, {"answer_contains_any": [["peanut"]], "answer_excludes": ["shellfish"]})
    assert score(recall, {"answer": "You are allergic to peanuts."})["success"]
    assert not score(recall, {"answer": "Peanuts and shellfish."})["success"]
    assert not score(recall, {"answer": "I have no memory of that."})["success"]


def test_research_scoring_checks_citations_and_the_search_down_message():
    task = Task("d", "deep_research", "heldin", {}, {"citations_valid": True, "report_contains_any": [["150"]]})
    retrieved = ["http://127.0.0.1:1/doc/oven-box"]
    good = {
        "report": "Ovens reach 150 C [1].\n\n## Sources\n[1] Box: x",
        "cited_urls": retrieved,
        "retrieved_urls": retrieved,
    }
    assert score(task, good)["success"]
    invented = {**good, "cited_urls": [*retrieved, "https://invented.example/x"]}
    assert score(task, invented)["checks"]["citations_valid"] is False
    assert score(task, {"report": "", "answer": "Research failed."})["checks"]["report_written"] is False

    down = Task("s", "deep_research", "heldin", {}, {"fails_clearly_within_s": 60})
    clear = {"elapsed_s": 12.0, "failure_message": "Research failed: every web search failed (connection refused)."}
    assert score(down, clear)["success"]
    slow = score(down, {**clear, "elapsed_s": 95.0})
    assert not slow["success"] and "took 95.0 s" in slow["notes"][0]
    rambling = score(down, {**clear, "failure_message": "every web search failed: " + "DNS error; " * 150})
    assert rambling["checks"]["message_clear"] is False
    planning = {"elapsed_s": 30.0, "failure_message": "did not return a valid ResearchPlan after 3 attempts"}
    assert score(down, planning)["checks"]["message_clear"] is False  # a failure, but not about search
    raised = {"elapsed_s": 3.0, "failure_message": "RuntimeError: search engine unreachable", "error": "x"}
    assert score(down, raised)["success"]


def test_writer_scoring_needs_a_saved_memory_naming_the_fact():
    task = Task("w", "memory_writer", "heldin", {}, {"extracts": True, "memory_contains_any": ["sushi"]})
    assert score(task, {"memories": ["The user's favourite food is sushi"]})["success"]
    nothing = score(task, {"memories": [], "result": {"created": 0, "updated": 0, "profile_fields": 0}})
    assert not nothing["success"] and nothing["checks"] == {"extracted": False, "names_the_fact": False}
    assert not score(task, {"memories": ["The user likes food"]})["success"]


async def test_a_fact_saved_as_profile_fields_counts_as_extracted(model_slot, embeddings):
    from evals.realmodel.targets import writer_task
    from evals.targets import TargetEnv
    from tests.fakes import ScriptedChatModel

    extraction = {"episodic": [], "semantic": [], "profile_updates": {"city": "Porto", "occupation": "nurse"}}
    model_slot["model"] = ScriptedChatModel(
        responses=[{"tool_calls": [{"name": "MemoryExtraction", "args": extraction}]}]
    )
    turn = [
        {"role": "user", "content": "I live in Porto and work as a nurse."},
        {"role": "assistant", "content": "Hi!"},
    ]
    outputs = await writer_task({"messages": turn}, TargetEnv(model="scripted:test", embeddings=embeddings))

    assert outputs["result"]["profile_fields"] == 2 and "city: Porto" in outputs["memories"]
    task = Task("w", "memory_writer", "heldin", {}, {"extracts": True, "memory_contains_any": ["porto"]})
    assert score(task, outputs)["success"]


# --- summary and the committed table --------------------------------------------------------------------------


def _call(prompt: int, cached: int | None, structured=0, valid=0, text=0) -> dict:
    checks = {"structured": structured, "structured_valid": valid, "text": text, "text_valid": text}
    return {"usage": {"prompt_tokens": prompt, "cached_tokens": cached}, "checks": checks, "wall_s": 2.0}


def _row(id: str, suite: str, split: str, success: bool, calls: list[dict], **checks) -> dict:
    return {
        "id": id,
        "suite": suite,
        "split": split,
        "ran": True,
        "wall_s": 10.0,
        "timed_out": False,
        "error": None,
        "score": {"success": success, "checks": checks or {"x": success}, "notes": [] if success else ["why"]},
        "figures": report.task_figures(calls, {"tool_calls": [{"name": "calculator", "args": {}, "problem": None}]}),
    }


def test_the_summary_counts_tokens_caching_and_tool_call_validity_per_split():
    rows = [
        _row("a", "react", "heldin", True, [_call(4400, 5, structured=1, valid=1), _call(4450, 4400)]),
        _row("b", "react", "heldout", False, [_call(4400, 4, text=1)]),
        {"id": "c", "suite": "react", "split": "heldout", "ran": False},
    ]
    summary = report.summarize_run(rows)["react"]
    everything = summary["all"]
    assert everything["tasks"] == 2 and everything["succeeded"] == 1 and everything["success"] == 0.5
    assert everything["model_calls_per_task"] == 1.5
    assert everything["prompt_tokens_per_call"] == pytest.approx((4400 + 4450 + 4400) / 3)
    assert everything["cached_tokens_per_call"] == pytest.approx((5 + 4400 + 4) / 3)
    assert everything["tool_call_attempts"] == 2 and everything["tool_calls_as_text"] == 1
    assert everything["tool_call_validity"] == 0.5
    assert everything["executed_tool_calls"] == 2 and everything["executed_validity"] == 1.0
    assert summary["heldin"]["success"] == 1.0 and summary["heldout"]["success"] == 0.0
    assert report.failure_examples(rows) == {"react": ["`b`: why"]}


def test_the_results_table_keeps_the_other_column(tmp_path):
    meta = {
        "commit": "abc123",
        "dirty": False,
        "date": "2026-11-25 07:00 UTC",
        "model": "openai:m",
        "endpoint": "http://127.0.0.1:18080/v1",
        "model_timeout": "900 s",
        "task_timeout_s": 600.0,
        "tasks_total": 52,
        "tasks_run": 1,
        "selection": "ids a",
        "wall_min": 1.0,
        "load_start": "1.00 1.00 1.00",
        "load_end": "2.00 2.00 2.00",
        "cpus": 2,
    }
    rows = [_row("a", "router", "heldin", False, [_call(2000, 1900, text=1)], route=False)]
    summary = {"meta": meta, "suites": report.summarize_run(rows), "examples": report.failure_examples(rows)}
    json_path, md_path = tmp_path / "r.json", tmp_path / "r.md"
    report.update_results("before", summary, json_path, md_path)
    page = md_path.read_text()
    assert "**before**: commit `abc123`" in page and "**after**: not measured yet." in page
    assert "| router route choice | ≥ 90 % | 0 % (heldin 0 %) | not run |" in page
    report.update_results("after", {**summary, "meta": {**meta, "commit": "def456"}}, json_path, md_path)
    stored = json.loads(json_path.read_text())
    assert stored["before"]["meta"]["commit"] == "abc123" and stored["after"]["meta"]["commit"] == "def456"
    assert "## Per graph: before" in md_path.read_text() and "## Per graph: after" in md_path.read_text()
    with pytest.raises(ValueError, match="column"):
        report.update_results("later", summary, json_path, md_path)


def test_writer_facts_count_every_stored_item_that_is_not_an_expected_fact_as_false():
    car = Task(
        "car",
        "writer_facts",
        "heldin",
        {},
        {"facts": [["car"]], "traps": ["colour: blue"], "profile_kept": {"favourite_colour": "teal"}},
    )
    good = score(
        car, {"memories": ["favourite_colour: teal", "The user bought a new car"], "before": ["favourite_colour: teal"]}
    )
    assert good["success"] and good["counts"] == {"stored": 1, "true": 1, "false": 0, "facts": 1, "found": 1}
    bad = score(
        car,
        {
            "memories": ["favourite_colour: blue", "The user bought a car, colour: blue"],
            "before": ["favourite_colour: teal"],
        },
    )
    assert not bad["success"] and bad["counts"] == {"stored": 2, "true": 0, "false": 2, "facts": 1, "found": 0}
    assert bad["checks"] == {"no_false_fact": False, "facts_found": False, "profile_kept": False}
    question = Task("q", "writer_facts", "heldout", {}, {"facts": [], "traps": ["hash map"]})
    stored_question = score(question, {"memories": ["What is a hash map?", "The user likes trees"], "before": []})
    assert stored_question["counts"]["false"] == 2 and not stored_question["success"]
    rows = [
        {**_row("car", "writer_facts", "heldin", True, []), "score": good},
        {**_row("car2", "writer_facts", "heldin", False, []), "score": bad},
        {**_row("q", "writer_facts", "heldout", False, []), "score": stored_question},
    ]
    summary = report.summarize_run(rows)["writer_facts"]
    assert summary["all"]["writer_stored"] == 5 and summary["all"]["writer_false_facts"] == 4
    assert summary["all"]["writer_precision"] == pytest.approx(1 / 5)
    assert summary["all"]["writer_recall"] == pytest.approx(1 / 2)
    assert summary["heldout"]["writer_recall"] is None  # no fact expected there
    assert "precision 20 %, recall 50 %, 4 false fact(s) of 5 stored over 3 turns" in report.writer_line(summary["all"])


def test_a_run_of_selected_tasks_gets_a_section_of_its_own_and_the_page_keeps_its_notes(tmp_path):
    meta = {
        "commit": "abc123",
        "date": "2026-11-27 20:00 UTC",
        "model": "openai:m",
        "endpoint": "http://127.0.0.1:18080/v1",
        "model_timeout": "900 s",
        "task_timeout_s": 1200.0,
        "tasks_total": 81,
        "tasks_run": 1,
        "selection": "suites writer_facts",
        "wall_min": 1.0,
        "load_start": "1.00",
        "load_end": "2.00",
        "cpus": 2,
    }
    rows = [_row("a", "react", "heldin", True, [_call(2000, 1900)])]
    summary = {"meta": meta, "suites": report.summarize_run(rows), "examples": {}}
    json_path, md_path = tmp_path / "r.json", tmp_path / "r.md"
    md_path.write_text("# Results\n\nA note written by hand.\n")
    report.update_results("baseline", summary, json_path, md_path, partial=True)
    report.update_results("final", {**summary, "meta": {**meta, "commit": "def456"}}, json_path, md_path, partial=True)
    page = md_path.read_text()
    assert page.startswith("# Results\n\nA note written by hand.\n")
    assert "## baseline" in page and "## final" in page and "**final**: commit `def456`" in page
    assert page.count(report.PARTIAL_MARKER) == 1
    assert set(json.loads(json_path.read_text())["partial"]) == {"baseline", "final"}


# --- one run end to end against the scripted server -------------------------------------------------------------


def test_a_run_against_a_scripted_endpoint_scores_and_writes_everything(tmp_path, monkeypatch, embeddings):
    tasks = [
        {
            "id": "calc",
            "suite": "react",
            "split": "heldin",
            "inputs": {"messages": [{"role": "user", "content": "What is 17% of 2340?"}], "tools": ["calculator"]},
            "expect": {"tools_called": ["calculator"], "answer_contains": ["397.8"]},
        },
        {
            "id": "as-text",
            "suite": "react",
            "split": "heldout",
            "inputs": {
                "messages": [{"role": "user", "content": "Compute 2 to the power of 16."}],
                "tools": ["calculator"],
            },
            "expect": {"tools_called": ["calculator"], "answer_contains": ["65536"]},
        },
        {
            "id": "route",
            "suite": "router",
            "split": "heldin",
            "inputs": {"message": "Tell me a joke about cats.", "kbs": []},
            "expect": {"route": "general"},
        },
        {
            "id": "extract",
            "suite": "memory_writer",
            "split": "heldout",
            "inputs": {
                "messages": [
                    {"role": "user", "content": "My favourite food is sushi."},
                    {"role": "assistant", "content": "Nice!"},
                ]
            },
            "expect": {"extracts": True, "memory_contains_any": ["sushi"]},
        },
    ]
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    monkeypatch.setattr(report, "RESULTS_JSON", tmp_path / "results.json")
    monkeypatch.setattr(report, "RESULTS_MD", tmp_path / "results.md")
    with run_openai_server() as server:
        server.script(
            "17% of 2340",
            [{"tool_calls": [{"name": "calculator", "args": {"expression": "0.17*2340"}}]}, "It is 397.8."],
        )
        server.script(
            "power of 16",
            ['```json\n{"name": "calculator", "arguments": {"expression": "2**16"}}\n```', "2**16 is 65536."],
        )
        server.script(
            "joke",
            [
                {
                    "tool_calls": [
                        {"name": "RouteChoice", "args": {"route": "general", "confidence": 0.9, "reason": "chat"}}
                    ]
                }
            ],
        )
        extraction = {
            "episodic": [],
            "semantic": [{"text": "The user's favourite food is sushi", "category": "preference", "importance": 0.6}],
            "profile_updates": {},
        }
        server.script("sushi", [{"tool_calls": [{"name": "MemoryExtraction", "args": extraction}]}])
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "local")
        monkeypatch.setenv("AGENT_MODEL", "openai:scripted")
        code = run.main(
            ["--tasks-file", str(path), "--out", str(tmp_path), "--column", "before", "--model-timeout", "30"]
        )
        sent = server.requests()
    assert code == 0
    [log] = tmp_path.glob("realmodel-*Z.jsonl")
    rows = {row["id"]: row for row in map(json.loads, log.read_text().splitlines())}
    assert rows["calc"]["score"]["success"] and rows["calc"]["figures"]["model_calls"] == 2
    assert rows["calc"]["figures"]["structured_valid"] == 1 and rows["calc"]["figures"]["executed_valid"] == 1
    # a call written as text is recovered and run, and counted as text
    assert rows["as-text"]["score"]["success"] and rows["as-text"]["figures"]["text_tool_calls"] == 1
    assert rows["route"]["score"]["success"] and rows["route"]["outputs"]["method"] == "llm"
    assert rows["extract"]["score"]["success"]
    assert all(call["usage"]["prompt_tokens"] > 0 for row in rows.values() for call in row["calls"])
    assert len(sent) == sum(row["figures"]["model_calls"] for row in rows.values())  # every call was recorded
    stored = json.loads((tmp_path / "results.json").read_text())["before"]
    assert stored["meta"]["tasks_run"] == 4 and stored["meta"]["model_timeout"] == "30 s"
    assert (
        stored["suites"]["react"]["heldin"]["success"] == 1.0 and stored["suites"]["react"]["heldout"]["success"] == 1.0
    )
    assert (
        "| react tool tasks succeed | ≥ 90 % | 100 % (heldin 100 %, heldout 100 %) | not run |"
        in (tmp_path / "results.md").read_text()
    )


def test_finished_runs_combine_into_one_summary_scored_again(tmp_path):
    tasks = [
        Task("g", "router", "heldin", {}, {"route": "general"}),
        Task("r", "router", "heldout", {}, {"route": "react"}),
    ]
    fallback = {"route": "general", "method": "heuristic", "confidence": 0.3, "reason": "model unavailable"}
    first = {"id": "g", "suite": "router", "split": "heldin", "ran": True, "wall_s": 5.0, "outputs": fallback}
    first |= {
        "score": {"success": True, "checks": {"route": True}, "notes": []},
        "figures": report.task_figures([], {}),
    }
    second = {**first, "id": "r", "split": "heldout", "outputs": {"route": "react", "method": "llm", "confidence": 0.8}}
    repeated = {**first, "outputs": {"route": "general", "method": "llm", "confidence": 0.9}}
    one, two = tmp_path / "realmodel-1.jsonl", tmp_path / "realmodel-2.jsonl"
    one.write_text(json.dumps(first) + "\n")
    two.write_text(json.dumps(second) + "\n" + json.dumps(repeated) + "\n")
    (tmp_path / "realmodel-1.summary.json").write_text(json.dumps({"meta": {"commit": "abc", "selection": "ids g"}}))
    summary = run.combine_runs([one, two], tasks)
    router = summary["suites"]["router"]
    assert router["heldin"]["success"] == 0.0  # scored again: the unsure guess standing is no route choice
    assert router["heldout"]["success"] == 1.0 and router["all"]["tasks"] == 2
    assert summary["meta"]["commit"] == "abc" and summary["meta"]["tasks_run"] == 2
    assert summary["meta"]["selection"].endswith("(2 run(s) combined)")
