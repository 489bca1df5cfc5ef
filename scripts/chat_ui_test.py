"""Browser test: every graph used from LangChain's agent-chat-ui in headless Chromium (outside CI).

`scripts/chat-ui-test [--out DIR] [--client-dir DIR] [--client-src URL_OR_PATH] [--rebuild]`

1. Builds agent-chat-ui from its public repository (cloned into `--client-dir`, default
   `~/.cache/agent-engine/agent-chat-ui`, outside this repository) with `npm install` and
   `next build`; its `next/font/google` font (downloaded at build time) is replaced by the system
   font so the build needs only the npm registry; its `next.config.mjs` stays as published (no
   `/ui/*` pass-through: the server sends the cards with their scripts, server/ui_cards.py).
   `puppeteer-core` is installed beside it; the browser is Debian's `chromium`
   (`apt-get install -y chromium`), nothing is downloaded.
2. Starts the scripted OpenAI-compatible model (tests/openai_server.py), the embedded Postgres
   (schema `chat_ui_test`) with tests/data/kb ingested, `langgraph dev` on this repository (its
   `ui` entry bundles ui/components.tsx) and the client (`next start`).
3. Drives one scenario per graph (scripts/chat_ui_browser.mjs) and writes a screenshot of each end
   state to `--out` (default `.data/chat-ui-test/`): react (streamed answer, tool card and tool
   call shown once: no card of ours beside the client's), router (retrieval answer, route / progress / citations cards with the sources),
   plan_execute (Approve, Edit with a changed plan, Reject, and "approve" typed as a message;
   plan and step cards; `plan_live` also takes `plan_live_midrun.png` while a slow step runs,
   its step cards already showing), deep_research (the clarifying question answered in the form, research
   progress card); and the approval scenarios of `hitl_scenarios` (a readable plan edited 17*23 ->
   19*19, "Mark as Resolved" on a plan and on a question, answers below their cards, the cards
   through the client's API passthrough).; Stop and a failed model call in react
   (`stop`, `model_error`: see `stop_and_failure_scenarios`). Exit status 0 when every scenario
   reached its end state.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from scripts.free_port import free_port
from tests.openai_server import spawn_openai_server

ROOT = Path(__file__).resolve().parents[1]
CLIENT_REPO = "https://github.com/langchain-ai/agent-chat-ui"
KB_NAME = "chatui_demo"
KB_DESCRIPTION = "Greenhouse irrigation guide with controller fault codes, lighthouse keeper notes, staff handbook"
FONT_IMPORT = 'import { Inter } from "next/font/google";\n'
FONT_CALL = """const inter = Inter({
  subsets: ["latin"],
  preload: true,
  display: "swap",
});
"""
FONT_OFFLINE = 'const inter = { className: "font-sans" }; // system font: no download at build time\n'


def run(cmd: list[str], cwd: Path, env: dict | None = None) -> None:
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=cwd, env=env, check=True)


def build_client(client_dir: Path, source: str, rebuild: bool) -> None:
    """Clone, patch the font out, install and build agent-chat-ui with its own settings (skipped
    when already built so)."""
    if not (client_dir / ".git").exists():
        client_dir.parent.mkdir(parents=True, exist_ok=True)
        run(["git", "clone", "--depth", "1", source, str(client_dir)], cwd=client_dir.parent)
    layout = client_dir / "src" / "app" / "layout.tsx"
    text = layout.read_text()
    if FONT_IMPORT in text:
        layout.write_text(text.replace(FONT_IMPORT, "").replace(FONT_CALL, FONT_OFFLINE))
    changed = subprocess.run(["git", "diff", "--quiet", "--", "next.config.mjs"], cwd=client_dir).returncode
    if changed:  # an earlier version of this script added a `/ui/*` rewrite: back to the stock file
        run(["git", "checkout", "--", "next.config.mjs"], cwd=client_dir)
        rebuild = True
    if not (client_dir / "node_modules" / "next").exists():
        run(["npm", "install", "--no-audit", "--no-fund"], cwd=client_dir)
    if not (client_dir / "node_modules" / "puppeteer-core").exists():
        run(["npm", "install", "--no-audit", "--no-fund", "--no-save", "puppeteer-core"], cwd=client_dir)
    if rebuild or not (client_dir / ".next" / "BUILD_ID").exists():
        run(["npx", "next", "build"], cwd=client_dir, env={**os.environ, "NEXT_TELEMETRY_DISABLED": "1"})


@contextlib.contextmanager
def process(cmd: list[str], cwd: Path, env: dict, log: Path) -> Iterator[subprocess.Popen]:
    """A background process (its own process group), stopped afterwards."""
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            yield proc
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 15)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=20)


def wait_http(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the process exited:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=5).status_code < 500:
                return
        time.sleep(1)
    raise TimeoutError(f"{url} did not answer:\n{log.read_text()[-3000:]}")


RESEARCH_ASK = {
    "tool_calls": [
        {
            "name": "ClarifyDecision",
            "id": "c1",
            "args": {"need_clarification": True, "question": "Which climate will the devices be used in?"},
        }
    ]
}
"""deep_research's clarifying question, as the scripted model asks it."""


def plan(expression: str, description: str) -> dict:
    step = {"id": "a", "description": description, "tool": "calculator", "args": {"expression": expression}}
    return {"content": "", "tool_calls": [{"name": "Plan", "args": {"steps": [step | {"depends_on": []}]}}]}


def scenarios() -> list[tuple[dict, list]]:
    """(scenario for the browser driver, the scripted model's answers for it)."""
    slow = 0.02  # seconds between streamed tokens: the answer visibly streams
    research_ask = RESEARCH_ASK
    research_plan = {
        "tool_calls": [
            {
                "name": "ResearchPlan",
                "id": "p1",
                "args": {
                    "brief": "Low-tech water devices for a hot, dry climate.",
                    "sub_questions": [
                        {"question": "How fast does a solar kettle boil water?", "queries": ["solar kettle"]},
                        {"question": "How old are wind pumps?", "queries": ["wind pump history"]},
                    ],
                },
            }
        ]
    }
    step_card = '[data-ui="plan_step"]'
    live_plan = {
        "content": "",
        "tool_calls": [
            {
                "name": "Plan",
                "args": {
                    "steps": [
                        {
                            "id": "a",
                            "description": "multiply 6 by 7",
                            "tool": "calculator",
                            "args": {"expression": "6*7"},
                        },
                        {"id": "b", "description": "think the result over", "depends_on": ["a"]},
                    ]
                },
            }
        ],
    }
    return [
        (
            {
                "name": "react",
                "assistant": "react",
                "message": "uiReact What is 17% of 2340?",
                # One card per tool call: the client's own; the graph adds none for it.
                "steps": [{"waitText": "17% of 2340 is 397.8."}, {"noCard": '[data-ui="tool_progress"]'}],
            },
            [
                {"tool_calls": [{"name": "calculator", "args": {"expression": "0.17*2340"}, "id": "call1"}]},
                {"content": "17% of 2340 is 397.8.", "delay_per_token": slow},
            ],
        ),
        (
            {
                "name": "router_sources",
                "assistant": "router",
                "message": "uiRouter What does fault code ZX-4480 mean?",
                "steps": [
                    {"waitText": "tank float switch is stuck"},
                    {"waitCard": '[data-ui="citations"] li'},
                    {"waitCard": '[data-ui="route_decision"]'},
                ],
            },
            [{"content": "Fault ZX-4480 means the tank float switch is stuck [1].", "delay_per_token": slow}],
        ),
        (
            {
                "name": "plan_approve",
                "assistant": "plan_execute",
                "message": "uiPlanA What is 6 times 7?",
                "steps": [{"click": "Approve"}, {"waitText": "6 times 7 is 42."}, {"waitCard": step_card}],
            },
            [plan("6*7", "multiply 6 by 7"), {"content": "6 times 7 is 42.", "delay_per_token": slow}],
        ),
        (
            {  # progress while the run goes on: step a done and step b running, shot mid-run
                "name": "plan_live",
                "assistant": "plan_execute",
                "message": "uiPlanL What is 6 times 7, thought over?",
                "steps": [
                    {"click": "Approve"},
                    {"waitCard": '[data-ui="plan_step"][data-status="completed"]'},
                    {"waitCard": '[data-ui="plan_step"][data-status="running"]'},
                    {"shot": "plan_live_midrun"},
                    {"waitText": "Thought over: 42."},
                ],
            },
            [
                live_plan,
                {"content": "", "tool_calls": [{"name": "Replan", "args": {"action": "continue", "reason": "ok"}}]},
                {"content": "42 it is, after some thought.", "delay": 8},
                {"content": "Thought over: 42.", "delay_per_token": slow},
            ],
        ),
        (
            {
                "name": "plan_edit",
                "assistant": "plan_execute",
                "message": "uiPlanE What is 6 times 7?",
                "steps": [
                    {"fill": {"label": "Steps", "find": "6*7", "replace": "9*9"}},
                    {"click": "Submit"},
                    {"waitText": "The edited plan computed 81."},
                    {"waitCard": step_card},
                ],
            },
            [plan("6*7", "multiply"), {"content": "The edited plan computed 81.", "delay_per_token": slow}],
        ),
        (
            {
                "name": "plan_reject",
                "assistant": "plan_execute",
                "message": "uiPlanR What is 6 times 7?",
                "steps": [
                    {"fill": {"label": "Reason", "text": "not now"}},
                    {"click": "Submit rejection"},
                    {"waitText": "The plan was rejected"},
                ],
            },
            [plan("6*7", "multiply 6 by 7")],
        ),
        (
            {
                "name": "plan_typed_approve",
                "assistant": "plan_execute",
                "message": "uiPlanT What is 6 times 7?",
                "steps": [
                    {"waitText": "Edit/Approve"},
                    {"send": "approve"},
                    {"waitText": "Approved by message: 42."},
                    {"waitCard": step_card},
                ],
            },
            [plan("6*7", "multiply 6 by 7"), {"content": "Approved by message: 42.", "delay_per_token": slow}],
        ),
        (
            {
                "name": "research_clarify",
                "assistant": "deep_research",
                "message": "uiResearch Research low-tech water devices",
                "steps": [
                    {"fill": {"label": "Answer", "text": "A hot, dry one"}},
                    {"click": "Submit"},
                    {"waitText": "How fast does a solar kettle boil water?"},
                    {"waitCard": '[data-ui="research_progress"]'},
                ],
            },
            [research_ask, research_plan],
        ),
    ]


def hitl_scenarios() -> list[tuple[dict, list]]:
    """Questions to the user: the plan approval read and edited, "Mark as Resolved", and answers
    that stay below their cards when the run ends."""
    slow = 0.02
    multiply = plan("17*23", "Multiply 17 by 23")
    ask = RESEARCH_ASK
    research = {
        "tool_calls": [
            {
                "name": "ResearchPlan",
                "id": "p1",
                "args": {
                    "brief": "Low-tech water devices.",
                    "sub_questions": [{"question": "How old are wind pumps?", "queries": ["wind pump history"]}],
                },
            }
        ]
    }
    return [
        (
            {  # readable: title, numbered steps with 17*23 as written, the buttons shown; edited
                "name": "plan_edit_text",
                "assistant": "plan_execute",
                "message": "uiPlanX What is 17*23?",
                "steps": [
                    {"waitText": "Review the plan"},
                    {
                        "fieldHas": {
                            "label": "Steps",
                            "text": '1. [a] Multiply 17 by 23\n   tool: calculator {"expression": "17*23"}',
                        }
                    },
                    {"visible": "Approve"},
                    {"visible": "Submit rejection"},
                    {"still": "plan_edit_text_review"},
                    {"fill": {"label": "Steps", "find": "17*23", "replace": "19*19"}},
                    {"click": "Submit"},
                    {"waitText": "The edited plan computed 361."},
                    {"cardText": 'calculator {"expression":"19*19"}'},
                    {"below": "The edited plan computed 361."},
                ],
            },
            [multiply, {"content": "The edited plan computed 361.", "delay_per_token": slow}],
        ),
        (
            {  # the client's production setup: the server reached through its /api passthrough
                "name": "router_passthrough",
                "assistant": "router",
                "passthrough": True,
                "message": "uiRouterP What does fault code ZX-4480 mean?",
                "steps": [{"waitText": "tank float switch is stuck"}, {"waitCard": '[data-ui="citations"] li'}],
            },
            [{"content": "Fault ZX-4480 means the tank float switch is stuck [1].", "delay_per_token": slow}],
        ),
        (
            {  # "Mark as Resolved" ends the pause: the form goes, the thread answers the next message
                "name": "plan_resolved",
                "assistant": "plan_execute",
                "message": "uiPlanM What is 17*23?",
                "steps": [
                    {"click": "Mark as Resolved"},
                    {"waitText": "The plan was set aside"},
                    {"gone": "Mark as Resolved"},
                ],
            },
            [multiply],
        ),
        (
            {
                "name": "research_resolved",
                "assistant": "deep_research",
                "message": "uiResearchM Research low-tech water devices",
                "steps": [
                    {"click": "Mark as Resolved"},
                    {"waitText": "How old are wind pumps?"},
                    {"gone": "Mark as Resolved"},
                ],
            },
            [ask, research],
        ),
    ]


SLOW_ANSWER = (
    "Once upon a time, a keeper lived by the sea. "
    + "Each night he climbed the stairs to light the lamp. " * 40
    + "SLOW-ANSWER-END"
)


def stop_and_failure_scenarios() -> list[tuple[dict, list]]:
    """Stop and a failed model call, in react (issue 38 items 9 and 10).

    `stop`: Stop mid-answer, then a new message: its answer comes at once (the stopped run was
    cancelled on the server, not queued in front of it), and after a reload the thread holds no
    rest of the stopped answer. `model_error`: the model call fails; the explanation stays in the
    thread (after the error toast and after a reload) and the next message is answered.
    """
    return [
        (
            {
                "name": "stop",
                "assistant": "react",
                "message": "uiStop Tell me a long story about the lighthouse keeper.",
                "steps": [
                    {"waitText": "Once upon a time, a keeper lived by the sea."},
                    {"shot": "stop_streaming"},
                    {"click": "Cancel"},
                    {"send": "Are you there?"},
                    {"waitText": "Here I am after the stop."},
                    {"reload": True},
                    {"waitText": "Here I am after the stop."},
                    {"absentText": "SLOW-ANSWER-END"},
                ],
            },
            [{"content": SLOW_ANSWER, "delay_per_token": 0.1}, {"content": "Here I am after the stop."}],
        ),
        (
            {
                "name": "model_error",
                "assistant": "react",
                "message": "uiFail Which bicycle tyre pressure do you suggest?",
                "steps": [
                    {"waitText": "Sorry, I could not finish answering this"},
                    {"shot": "model_error_explained", "running": False},
                    {"reload": True},
                    {"waitText": "the model refused uiFail"},
                    {"send": "Are you there?"},
                    {"waitText": "Back after the failure."},
                ],
            },
            [
                {"error": {"status": 400, "message": "the model refused uiFail: the prompt was rejected"}},
                {"content": "Back after the failure."},
            ],
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / ".data" / "chat-ui-test")
    parser.add_argument("--client-dir", type=Path, default=Path.home() / ".cache" / "agent-engine" / "agent-chat-ui")
    parser.add_argument("--client-src", default=CLIENT_REPO, help="git URL or path of agent-chat-ui")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--rebuild", action="store_true", help="run `next build` again")
    parser.add_argument("--only", nargs="*", help="scenario names to run (default: all)")
    args = parser.parse_args(argv)
    if not Path(args.chromium).exists():
        sys.exit("no Chromium: apt-get install -y chromium (or pass --chromium PATH)")
    args.out.mkdir(parents=True, exist_ok=True)
    api_port = free_port()  # any free port: the client is told it (?apiUrl=, LANGGRAPH_API_URL)
    build_client(args.client_dir, args.client_src, args.rebuild)

    python = str(ROOT / ".venv" / "bin" / "python")
    (ROOT / ".langgraph_api" / "ui" / "schemas.json").unlink(missing_ok=True)  # rebuilt by the server
    uri = subprocess.run(
        [python, "-m", "store.postgres", "start"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    plan_list = scenarios() + hitl_scenarios() + stop_and_failure_scenarios()
    with spawn_openai_server() as model:
        for scenario, answers in plan_list:
            model.script(scenario["message"].split()[0], answers)
        env = {
            **os.environ,
            "POSTGRES_URI": uri,
            "POSTGRES_SCHEMA": "chat_ui_test",
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "scripted",
            "AGENT_MODEL": "openai:scripted",
            "MEMORY_EXTRACTION_DELAY": "3600",
            # What the scenarios need without a context form (a deployment would use assistants):
            "ROUTER_KB": KB_NAME,
            "AGENT_APPROVE_PLAN": "true",
            "RESEARCH_ALLOW_CLARIFICATION": "true",
            "RESEARCH_PLAN_ONLY": "true",
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
            "LANGGRAPH_NO_VERSION_CHECK": "true",
            "LANGSMITH_TRACING": "false",
            "NEXT_TELEMETRY_DISABLED": "1",
        }
        kb_dir = str(ROOT / "tests" / "data" / "kb")
        run([python, "-m", "server.cli", "ingest", KB_NAME, kb_dir, "--description", KB_DESCRIPTION], ROOT, env)
        ui_port = free_port()
        api_log, ui_log = args.out / "langgraph-dev.log", args.out / "next.log"
        langgraph = str(ROOT / ".venv" / "bin" / "langgraph")
        with (
            process(
                [langgraph, "dev", "--no-browser", "--port", str(api_port), "--n-jobs-per-worker", "8"],
                ROOT,
                env,
                api_log,
            ) as api,
            process(
                ["npx", "next", "start", "-p", str(ui_port)],
                args.client_dir,
                {**env, "LANGGRAPH_API_URL": f"http://127.0.0.1:{api_port}"},  # its API passthrough's target
                ui_log,
            ) as ui,
        ):
            api_url, ui_url = f"http://127.0.0.1:{api_port}", f"http://127.0.0.1:{ui_port}"
            wait_ui_bundle(api, api_log)
            wait_http(f"{api_url}/ok", api, api_log)
            wait_http(ui_url, ui, ui_log)
            config = {
                "clientDir": str(args.client_dir),
                "uiUrl": ui_url,
                "apiUrl": api_url,
                "chromium": args.chromium,
                "outDir": str(args.out),
                "scenarios": [scenario for scenario, _ in plan_list],
                "only": args.only,
            }
            driver = subprocess.run(["node", str(ROOT / "scripts" / "chat_ui_browser.mjs"), json.dumps(config)])
    print(f"screenshots and logs: {args.out}")
    return driver.returncode


def wait_ui_bundle(proc: subprocess.Popen, log: Path, timeout_s: float = 300) -> None:
    """Wait until the server's UI bundler (npx @langchain/langgraph-ui) has built ui/components.tsx.

    Watched on disk: the server caches the bundle list at the first `/ui` request, so asking it
    before the bundle exists would keep every card missing until a restart.
    """
    schemas = ROOT / ".langgraph_api" / "ui" / "schemas.json"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"langgraph dev exited:\n{log.read_text()[-3000:]}")
        if schemas.exists() and "router" in schemas.read_text():
            return
        time.sleep(1)
    raise TimeoutError(f"the UI bundle was not built:\n{log.read_text()[-3000:]}")


if __name__ == "__main__":
    raise SystemExit(main())
