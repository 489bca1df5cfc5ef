"""README's snippets run against a real `langgraph dev`, failure paths included."""

from __future__ import annotations

import contextlib
import io
import re
import textwrap

import pytest

from tests.integration.conftest import API_KEYS, ROOT, key

pytestmark = pytest.mark.integration


def readme_snippet(marker: str) -> str:
    """The README's python block that contains `marker`."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    (block,) = [b for b in blocks if marker in b]
    return block


async def run_snippet(code: str, client) -> str:
    """Run a README snippet (top-level awaits) with `client` bound; what it printed."""
    namespace: dict = {}
    exec("async def snippet(client):\n" + textwrap.indent(code, "    "), namespace)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        await namespace["snippet"](client)
    return printed.getvalue()


async def test_the_plan_execute_snippet_reports_a_plan_that_could_not_be_made(dev_server, openai_server):
    code = readme_snippet('"plan_execute"')
    task = "Weather in Paris and Rome tomorrow, and which is warmer?"
    assert task in code
    k = key()
    # the planner answers in prose every time: no valid plan, so no approval stop
    openai_server.script(k, [{"content": "I would rather not plan this."}] * 3)
    printed = await run_snippet(code.replace(task, f"{k} {task}"), dev_server.client("alice"))
    assert printed.startswith("failed ") and "plan" in printed.lower(), printed


async def test_the_react_snippet_uses_the_configured_model(dev_server, openai_server):
    code = readme_snippet('"react"')
    assert '"model"' not in code.split("context=")[1].split("\n")[0].split("#")[0]
    question, readme_client = "What is 17% of 2340?", 'get_client(url="http://127.0.0.1:2024")'
    assert question in code and readme_client in code
    code = code.replace(readme_client, f'get_client(url="{dev_server.url}", api_key="{API_KEYS["alice"]}")')
    k = key()
    calculate = {"name": "calculator", "args": {"expression": "17% of 2340"}, "id": "r1"}
    openai_server.script(k, [{"content": "", "tool_calls": [calculate]}, {"content": "It is 397.8."}])
    printed = await run_snippet(code.replace(question, f"{k} {question}"), dev_server.client("alice"))
    assert "397.8" in printed and "error" not in printed.split("\n")[-2], printed
    request = [r for r in openai_server.requests() if k in str(r.get("messages"))][-1]
    assert request["model"] == "scripted"  # AGENT_MODEL of the test server
