"""What agent-chat-ui sends and gets, through a real `langgraph dev`: "Mark as Resolved" ends a
paused question, the plan approval is edited as text, and the cards come with their scripts."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.integration.conftest import API_KEYS, key, user

pytestmark = pytest.mark.integration

RESOLVE = {"goto": "__end__"}
"""agent-chat-ui's "Mark as Resolved" (use-interrupted-actions.tsx: `command: {goto: END}`)."""


def plan(*steps: dict) -> dict:
    return {"content": "", "tool_calls": [{"name": "Plan", "args": {"steps": list(steps)}}]}


async def test_mark_as_resolved_ends_a_plan_approval_without_running_it(dev_server, openai_server):
    client = dev_server.client("alice")
    k = key()
    openai_server.script(
        k, [plan({"id": "a", "description": "6*7", "tool": "calculator", "args": {"expression": "6*7"}})]
    )
    tid = (await client.threads.create())["thread_id"]
    context = {"approve_plan": True}
    await client.runs.wait(tid, "plan_execute", input=user(f"{k} compute"), context=context)
    assert (await client.threads.get_state(tid))["next"] == ["approve"]
    parts = [p async for p in client.runs.stream(tid, "plan_execute", command=RESOLVE, context=context)]
    assert not [p for p in parts if p.event == "error"], parts
    state = await client.threads.get_state(tid)
    assert state["next"] == [] and not state["tasks"]  # no longer paused
    assert (await client.threads.get(tid))["status"] == "idle"
    values = state["values"]
    assert values["execution_log"] == [] and values["review"] == "ignore"
    assert "set aside" in values["messages"][-1]["content"]
    # The thread goes on: the next message is a new request.
    openai_server.script(
        k, [plan({"id": "b", "description": "2+2", "tool": "calculator", "args": {"expression": "2+2"}})]
    )
    await client.runs.wait(tid, "plan_execute", input=user(f"{k} again"), context=context)
    assert (await client.threads.get_state(tid))["tasks"][0]["interrupts"][0]["value"]["plan"][0]["id"] == "b"


async def test_mark_as_resolved_lets_the_research_go_on_without_an_answer(dev_server, openai_server):
    client = dev_server.client("alice")
    k = key()
    ask = {
        "tool_calls": [
            {"name": "ClarifyDecision", "id": "c1", "args": {"need_clarification": True, "question": "Which climate?"}}
        ]
    }
    research = {
        "tool_calls": [
            {
                "name": "ResearchPlan",
                "id": "p1",
                "args": {
                    "brief": "Water devices.",
                    "sub_questions": [{"question": "How old are wind pumps?", "queries": ["wind pump"]}],
                },
            }
        ]
    }
    openai_server.script(k, [ask, research])
    context = {"allow_clarification": True, "plan_only": True}
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "deep_research", input=user(f"{k} research water devices"), context=context)
    assert (await client.threads.get_state(tid))["next"] == ["ask_user"]
    await client.runs.wait(tid, "deep_research", command=RESOLVE, context=context)
    state = await client.threads.get_state(tid)
    assert state["next"] == [] and not state["tasks"]
    assert "How old are wind pumps?" in state["values"]["messages"][-1]["content"]


async def test_a_plan_edited_as_text_in_the_form_runs_the_edited_call(dev_server, openai_server):
    """agent-chat-ui shows the form's `steps` field as it is (a text box) and sends it back as text."""
    client = dev_server.client("alice")
    k = key()
    step = {"id": "a", "description": "Multiply 17 by 23", "tool": "calculator", "args": {"expression": "17*23"}}
    openai_server.script(k, [plan(step), "It is 361."])
    context = {"approve_plan": True}
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "plan_execute", input=user(f"{k} What is 17*23?"), context=context)
    [request] = (await client.threads.get_state(tid))["tasks"][0]["interrupts"][0]["value"]["action_requests"]
    assert request["name"] == "Review the plan"
    assert request["args"]["steps"] == '1. [a] Multiply 17 by 23\n   tool: calculator {"expression": "17*23"}'
    assert "17\\*23" in request["description"]  # markdown-escaped: shown as 17*23
    edited = {"name": request["name"], "args": {"steps": request["args"]["steps"].replace("17*23", "19*19")}}
    cards = []
    async for part in client.runs.stream(
        tid,
        "plan_execute",
        command={"resume": {"decisions": [{"type": "edit", "edited_action": edited}]}},
        context=context,
        stream_mode=["custom"],
    ):
        if part.event == "custom" and part.data.get("name") == "plan_step":
            cards.append(part.data["props"])
    final = (await client.threads.get_state(tid))["values"]
    assert final["messages"][-1]["content"] == "It is 361." and final["execution_log"][0]["result"] == "361"
    assert cards and all(c.get("args", {"expression": "19*19"}) == {"expression": "19*19"} for c in cards)
    kept = [m["props"] for m in final["ui"] if m["name"] == "plan_step"]
    assert kept[0]["tool"] == "calculator" and kept[0]["args"] == {"expression": "19*19"}


def _write_bundle(workdir) -> None:
    """What the server's UI bundler (`npx @langchain/langgraph-ui`) writes beside the server."""
    root = workdir / ".langgraph_api" / "ui"
    (root / "public" / "react").mkdir(parents=True, exist_ok=True)
    (root / "public" / "react" / "entrypoint.js").write_text("var __LGUI_react = (() => ({ render() {} }))();")
    (root / "schemas.json").write_text(json.dumps({"react": {"assets": ["entrypoint.js"], "name": "react"}}))


async def test_a_card_comes_with_its_script_so_the_chat_ui_fetches_nothing_from_its_own_address(dev_server):
    _write_bundle(dev_server.workdir)
    headers = {"x-api-key": API_KEYS["alice"]}
    async with httpx.AsyncClient(base_url=dev_server.url, headers=headers, timeout=30) as http:
        answer = await http.post("/ui/react", json={"name": "plan_step"})
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/html")
        assert "src=" not in answer.text  # nothing for the browser to ask the chat UI's own origin for
        assert "<script>var __LGUI_react" in answer.text
        assert answer.text.endswith('<script>__LGUI_react.render("plan_step", "{{shadowRootId}}")</script>')
        missing = await http.post("/ui/memory_writer", json={"name": "plan_step"})
        assert missing.status_code == 404 and missing.json()["error"] == "UI_NOT_FOUND"
        unnamed = await http.post("/ui/react", json={})
        assert unnamed.status_code == 422 and unnamed.json()["error"] == "VALIDATION_ERROR"
        # agent-chat-ui's API passthrough forwards the body with no content type.
        bare = await http.post("/ui/react", content=b'{"name": "plan_step"}', headers={"content-type": ""})
        assert bare.status_code == 200 and bare.text == answer.text
        big = await http.post("/ui/react", json={"name": "x" * 5000})
        assert big.status_code == 413 and big.json()["error"] == "PAYLOAD_TOO_LARGE"
        assert (
            await httpx.AsyncClient(base_url=dev_server.url).post("/ui/react", json={"name": "x"})
        ).status_code == 401


async def test_a_client_set_to_an_assistant_gets_its_graphs_cards(dev_server):
    """agent-chat-ui asks for the cards of its assistant id: an assistant's cards are its graph's."""
    _write_bundle(dev_server.workdir)
    assistant = await dev_server.client("alice").assistants.create(graph_id="react", name="cards via an assistant")
    headers = {"x-api-key": API_KEYS["alice"]}
    async with httpx.AsyncClient(base_url=dev_server.url, headers=headers, timeout=30) as http:
        answer = await http.post(f"/ui/{assistant['assistant_id']}", json={"name": "plan_step"})
        assert answer.status_code == 200, answer.text
        assert answer.text.endswith('<script>__LGUI_react.render("plan_step", "{{shadowRootId}}")</script>')
        unknown = await http.post("/ui/00000000-0000-4000-8000-000000000000", json={"name": "plan_step"})
        assert unknown.status_code == 404 and unknown.json()["error"] == "UI_NOT_FOUND"
