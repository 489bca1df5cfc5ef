"""What chat clients (agent-chat-ui) get: a readable, editable plan approval, cards whose scripts
need no second request, and "Mark as Resolved" read as dismissing the question."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from graphs.plan_execute import graph as plan_graph
from graphs.plan_execute.plan import PlanError
from graphs.plan_execute.plan_text import MAX_PLAN_TEXT, parse_plan_text, plan_text
from graphs.runtime import hitl
from server.errors import ApiError
from server.resolve import resolved
from server.ui_cards import card_html
from tests.fakes import ScriptedChatModel

ROOT = Path(__file__).resolve().parents[2]
STEPS = [
    {
        "id": "a",
        "description": "Multiply 17 by 23",
        "tool": "calculator",
        "args": {"expression": "17*23"},
        "depends_on": [],
    },
    {"id": "b", "description": "Think the product over", "tool": None, "args": {}, "depends_on": ["a"]},
]


# --- the plan as text ------------------------------------------------------------------------


def test_a_plan_reads_as_numbered_steps_and_reads_back_the_same():
    text = plan_text(STEPS)
    assert text == (
        "1. [a] Multiply 17 by 23\n"
        '   tool: calculator {"expression": "17*23"}\n'
        "2. [b] Think the product over\n"
        "   after: a"
    )
    assert parse_plan_text(text) == [
        {
            "id": "a",
            "description": "Multiply 17 by 23",
            "depends_on": [],
            "tool": "calculator",
            "args": {"expression": "17*23"},
        },
        {"id": "b", "description": "Think the product over", "depends_on": ["a"]},
    ]


def test_edited_plan_text_is_read_as_a_person_writes_it():
    edited = plan_text(STEPS).replace("17*23", "19*19") + "\n3) Say it out loud\n   in one sentence\n\n"
    steps = parse_plan_text(edited)
    assert steps[0]["args"] == {"expression": "19*19"}
    assert steps[2] == {"id": "s3", "description": "Say it out loud in one sentence", "depends_on": []}


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[{'id': 1", "line 1 is not a step"),
        ("", "the plan has no steps"),
        ("1. [a] x\n   tool: calculator {expression: 1}", "line 2: the arguments of calculator are not valid JSON"),
        ('1. [a] x\n   tool: calculator ["2*3"]', "must be a JSON object"),
        ("1. [a] x\n   tool:", "line 2: 'tool:' needs the tool's name"),
        ("1. x" + " y" * MAX_PLAN_TEXT, "at most 64,000 are read"),
    ],
)
def test_plan_text_that_cannot_be_read_is_refused_naming_the_line(text, error):
    with pytest.raises(PlanError, match=error):
        parse_plan_text(text)


def test_a_request_description_keeps_its_asterisks_in_markdown():
    assert hitl.markdown_text("What is 17*23 and 5*6? <b>") == r"What is 17\*23 and 5\*6? \<b\>"


# --- the approval request and its answers (the graph with the scripted model) -------------------


def _plan_answer(steps: list[dict]) -> dict:
    return {"content": "", "tool_calls": [{"name": "Plan", "args": {"steps": steps}}]}


async def _paused(model_slot, answers: list) -> tuple:
    model_slot["model"] = ScriptedChatModel(responses=answers)
    graph = plan_graph.builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "review"}}
    context = plan_graph.PlanExecuteContext(model="scripted:test", remember=False, approve_plan=True)
    await graph.ainvoke({"messages": [HumanMessage("What is 17*23?")]}, config, context=context)
    return graph, config, context


async def test_the_plan_approval_is_titled_and_shows_the_numbered_plan_in_its_form(model_slot):
    graph, config, _ = await _paused(model_slot, [_plan_answer(STEPS[:1])])
    value = (await graph.aget_state(config)).tasks[0].interrupts[0].value
    [request] = value["action_requests"]
    assert request["name"] == value["review_configs"][0]["action_name"] == "Review the plan"
    assert request["args"] == {"steps": plan_text(STEPS[:1])}  # the form's one field, as text
    assert request["description"].startswith(r"Plan for: What is 17\*23?")
    assert value["plan"][0]["args"] == {"expression": "17*23"}  # the graph's own fields beside it


async def test_an_edit_of_the_plan_text_runs_the_edited_call_and_its_card_shows_it(model_slot):
    graph, config, context = await _paused(model_slot, [_plan_answer(STEPS[:1]), "It is 361."])
    edited = plan_text(STEPS[:1]).replace("17*23", "19*19")
    edit = {"type": "edit", "edited_action": {"name": "Review the plan", "args": {"steps": edited}}}
    cards: list[dict] = []
    async for chunk in graph.astream(
        Command(resume={"decisions": [edit]}), config, context=context, stream_mode="custom"
    ):
        if chunk.get("event") == "ui" and chunk["name"] == "plan_step":
            cards.append(chunk["props"])
    state = (await graph.aget_state(config)).values
    assert state["execution_log"][0]["args"] == {"expression": "19*19"} and state["execution_log"][0]["result"] == "361"
    assert cards[0]["status"] == "running" and cards[0]["args"] == {"expression": "19*19"}


async def test_an_ignore_decision_ends_the_pause_without_running_the_plan(model_slot):
    graph, config, context = await _paused(model_slot, [_plan_answer(STEPS[:1])])
    await graph.ainvoke(Command(resume=hitl.IGNORE), config, context=context)
    snapshot = await graph.aget_state(config)
    assert snapshot.next == () and not snapshot.tasks
    assert snapshot.values["execution_log"] == [] and snapshot.values["review"] == "ignore"
    assert isinstance(snapshot.values["messages"][-1], AIMessage)
    assert "set aside" in snapshot.values["messages"][-1].content


# --- "Mark as Resolved" ------------------------------------------------------------------------


def test_a_goto_end_command_becomes_the_dismissing_resume():
    body = json.dumps({"input": {}, "command": {"goto": "__end__"}, "stream_mode": ["values"]}).encode()
    assert json.loads(resolved(body) or b"") == {
        "input": {},
        "command": {"resume": {"decisions": [{"type": "ignore"}]}},
        "stream_mode": ["values"],
    }
    assert resolved(json.dumps({"command": {"goto": ["__end__"]}}).encode()) is not None


@pytest.mark.parametrize(
    "body",
    [
        {"command": {"goto": "__end__", "resume": "yes"}},  # a real answer wins
        {"command": {"goto": "planner"}},
        {"input": {"messages": [{"role": "user", "content": "__end__"}]}},
        "not json __end__",
    ],
)
def test_other_run_bodies_pass_untouched(body):
    raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    assert resolved(raw) is None


# --- cards with their scripts inline --------------------------------------------------------------


def _bundle(root: Path, script: str = "var __LGUI_react = {render(){}};") -> None:
    (root / "public" / "react").mkdir(parents=True)
    (root / "public" / "react" / "entrypoint.js").write_text(script)
    (root / "public" / "react" / "entrypoint.css").write_text("div{color:red}")
    (root / "schemas.json").write_text(
        json.dumps({"react": {"assets": ["entrypoint.js", "entrypoint.css"], "name": "react"}})
    )


def test_a_card_comes_with_its_script_inline_and_nothing_left_to_fetch(tmp_path):
    _bundle(tmp_path, 'var __LGUI_react = {render(){}}; const s = "</script>";')
    html = card_html(tmp_path, "react", "plan_step")
    assert "src=" not in html and "href=" not in html
    assert '<script>var __LGUI_react = {render(){}}; const s = "<\\/script>";</script>' in html
    assert "<style>div{color:red}</style>" in html
    assert html.endswith('<script>__LGUI_react.render("plan_step", "{{shadowRootId}}")</script>')
    assert html.count("{{shadowRootId}}") == 1


def test_a_graph_without_cards_is_a_clear_404(tmp_path):
    with pytest.raises(ApiError) as missing:
        card_html(tmp_path, "react", "plan_step")
    assert missing.value.code == "UI_NOT_FOUND" and "Node.js" in missing.value.message
    _bundle(tmp_path)
    with pytest.raises(ApiError, match="'memory_writer' has no chat-client cards"):
        card_html(tmp_path, "memory_writer", "plan_step")


def test_the_bundle_location_is_where_the_langgraph_server_writes_it(tmp_path):
    """The one reach-in (server/ui_cards.py): fails when langgraph-api moves its UI bundle. Read in
    a child process with the settings `langgraph dev` gives the server (its config module needs them)."""
    env = {**os.environ, "REDIS_URI": "fake", "DATABASE_URI": ":memory:", "MIGRATIONS_PATH": "__inmem"}
    env["LANGGRAPH_UI_BUNDLER"] = "true"  # what `langgraph dev` sets (langgraph_api/cli.py)
    probe = (
        "import json; from langgraph_api.js import ui; from server.ui_cards import ui_dir; "
        "print(json.dumps([str(ui_dir()), str(ui.UI_ROOT_DIR), str(ui.UI_SCHEMAS_FILE), str(ui.UI_PUBLIC_DIR)]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    here, root, schemas, public = map(Path, json.loads(out.stdout.strip().splitlines()[-1]))
    assert here == root == tmp_path / ".langgraph_api" / "ui"  # beside the server's working folder
    assert schemas == root / "schemas.json" and public == root / "public"
    # The client fills in the first `{{shadowRootId}}` of the HTML only: the cards never write it.
    assert "{{shadowRootId}}" not in (ROOT / "ui" / "components.tsx").read_text()


def test_a_researcher_counts_its_sources_as_the_report_numbers_them():
    """The researcher card's "sources found" and the research card's count agree: the same page
    found twice (another letter case, a final slash) is one source in both."""
    from graphs.deep_research.citations import number_sources
    from graphs.deep_research.researcher import _finish

    hits = [{"url": "https://Pumps.example/history/", "title": "Wind pumps"}, {"url": "https://pumps.example/history"}]
    state = {"researcher_id": "r1.1", "round": 1, "question": "How old are wind pumps?", "hits": hits, "pages": []}
    [entry] = _finish(state, "success", None)["research_log"]
    assert entry["sources_found"] == len(number_sources(hits)) == 1
