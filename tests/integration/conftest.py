"""Real services for integration tests: embedded Postgres + pgvector, the scripted OpenAI-compatible
server, and `langgraph dev` serving langgraph.json, driven through langgraph-sdk.

With `--server aegra` (tests/conftest.py), the `dev_server` fixture is the production stack
instead: `scripts/prod` with two Aegra replicas on the session's Postgres and a Redis of its own,
every client request going to the next replica in turn. Tests marked `not_on_aegra` are then
skipped with the reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest

from scripts.free_port import free_port
from store.postgres import ensure_embedded_postgres, stop_embedded_postgres
from tests.openai_server import run_openai_server
from tests.prod_stack import ProdStack, RoundRobin

ROOT = Path(__file__).resolve().parents[2]
KB_DATA = ROOT / "tests" / "data" / "kb"
LANGGRAPH = Path(sys.executable).with_name("langgraph")
START_TIMEOUT_S = 120


@pytest.fixture(scope="session")
def pg_uri(tmp_path_factory) -> str:
    """A fresh embedded Postgres (with pgvector) for the session, stopped afterwards."""
    data_dir = tmp_path_factory.mktemp("postgres") / "data"
    previous = os.environ.get("EMBEDDED_POSTGRES_DIR")
    os.environ["EMBEDDED_POSTGRES_DIR"] = str(data_dir)
    uri = ensure_embedded_postgres()
    yield uri
    stop_embedded_postgres()
    if previous is None:
        os.environ.pop("EMBEDDED_POSTGRES_DIR", None)
    else:
        os.environ["EMBEDDED_POSTGRES_DIR"] = previous


@pytest.fixture
def pg_schema(pg_uri, monkeypatch) -> str:
    """A schema of its own for one test: POSTGRES_URI / POSTGRES_SCHEMA point there."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("POSTGRES_URI", pg_uri)
    monkeypatch.setenv("POSTGRES_SCHEMA", schema)
    return schema


def sql(uri: str, query: str, params: tuple = ()) -> list[tuple]:
    """Run one query on the test Postgres and return its rows."""
    with psycopg.connect(uri, autocommit=True) as conn:
        cursor = conn.execute(query, params)
        return cursor.fetchall() if cursor.description else []


def statement_runs(s, monkeypatch, statement: str) -> list[str]:
    """The `tsquery` parameter of every run of `statement` by store `s`'s SQL from now on."""
    runs: list[str] = []
    fetch = s.sql._fetch

    async def spy(query, params=None):
        if query is statement:
            runs.append(params["tsquery"])
        return await fetch(query, params)

    monkeypatch.setattr(s.sql, "_fetch", spy)
    return runs


def cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    """Run `python -m server.cli` with `args` in the project folder."""
    return subprocess.run(
        [sys.executable, "-m", "server.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
    )


def key() -> str:
    """A unique marker: the scripted server picks the script whose key is in the first user message."""
    return f"k{uuid.uuid4().hex[:10]}"


def user(text: str) -> dict:
    """A run input with one user message."""
    return {"messages": [{"role": "user", "content": text}]}


def tool_messages(state: dict) -> dict[str, dict]:
    """tool_call_id -> {"status", "content"} of a thread state's tool messages (JSON content parsed)."""
    found = {}
    for m in state["values"]["messages"]:
        if m["type"] == "tool":
            try:
                content = json.loads(m["content"])
            except ValueError:
                content = m["content"]
            found[m["tool_call_id"]] = {"status": m.get("status"), "content": content}
    return found


async def wait_status(client, thread_id, run_id, wanted: set[str], timeout: float = 30) -> str:
    """Poll a run until its status is one of `wanted` (or `timeout` seconds pass); its status."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        status = (await client.runs.get(thread_id, run_id))["status"]
        if status in wanted or asyncio.get_running_loop().time() > deadline:
            return status
        await asyncio.sleep(0.05)


async def stored_item(client, namespace: list[str], key: str) -> dict | None:
    """A store item read through the API, or None when there is none (`langgraph_api` answers
    null, Aegra 404)."""
    from langgraph_sdk.errors import NotFoundError

    try:
        return await client.store.get_item(namespace, key)
    except NotFoundError:
        return None


def tool_results(state: dict) -> dict:
    """tool_call_id -> content of a thread state's tool messages (JSON parsed)."""
    return {call_id: message["content"] for call_id, message in tool_messages(state).items()}


@pytest.fixture(scope="session")
def openai_server():
    """The scripted OpenAI-compatible server the graphs' models talk to."""
    with run_openai_server() as server:
        yield server


def absolute_config(workdir: Path, config_name: str = "langgraph.json") -> Path:
    """The named config with its `./` paths made absolute, written to `workdir/langgraph.json`.

    `langgraph dev` keeps its thread and run records in `.langgraph_api/` under its working
    folder and resolves factory paths against it; this lets a test server run in a folder of its own.
    """
    config = json.loads((ROOT / config_name).read_text())

    def absolute(path: str) -> str:
        return str(ROOT / path[2:]) if path.startswith("./") else path

    config["dependencies"] = [str(ROOT) if d == "." else absolute(d) for d in config["dependencies"]]
    config["graphs"] = {name: absolute(path) for name, path in config["graphs"].items()}
    for key in ("checkpointer", "store", "auth"):
        if "path" in config.get(key, {}):
            config[key]["path"] = absolute(config[key]["path"])
    if "app" in config.get("http", {}):
        config["http"]["app"] = absolute(config["http"]["app"])
    if "embed" in config.get("store", {}).get("index", {}):
        config["store"]["index"]["embed"] = absolute(config["store"]["index"]["embed"])
    # The generative-UI bundle is built by `npx @langchain/langgraph-ui` from paths inside the project
    # folder; these servers run elsewhere and the tests read UI messages, not the bundle
    # (scripts/chat-ui-test builds and renders it).
    config.pop("ui", None)
    target = workdir / "langgraph.json"
    target.write_text(json.dumps(config, indent=2))
    return target


# Why a test does not run on Aegra (`@pytest.mark.not_on_aegra(reason)`): what Aegra lacks.
AEGRA_PER_USER = (
    "Aegra keeps threads, runs and store items per authenticated user: an administrator cannot "
    "read, search or act on another user's"
)
AEGRA_NO_MULTITASK = "Aegra ignores multitask_strategy: a second run on a busy thread starts at once instead of pending"
AEGRA_NO_ROLLBACK = "Aegra has no cancel(action='rollback')"
AEGRA_NO_DELAYED_RUNS = (
    "Aegra has no after_seconds: extraction is debounced by the run's own wait (checked by python -m bench.prod_faults)"
)

# The API keys of the session's dev server (server/auth.py): two users and an administrator.
API_KEYS = {"alice": "key-alice-7f3c", "bob": "key-bob-91d2", "ops": "key-ops-c0de"}
AGENT_API_KEYS = ",".join(f"{user}={key}" for user, key in API_KEYS.items())
"""API_KEYS as the AGENT_API_KEYS setting (`user=key,...`)."""
ADMIN_USER = "ops"


class DevServer:
    """`langgraph dev` on a free loopback port, in its own working folder."""

    kind = "dev"
    # Where the factories of langgraph.json keep checkpoints and the store (POSTGRES_SCHEMA).
    schema = "it_server"

    def __init__(self, workdir: Path, env: dict[str, str], config_name: str = "langgraph.json") -> None:
        self.workdir = workdir
        self.config = absolute_config(workdir, config_name)
        self.env = env
        self.process: subprocess.Popen | None = None
        self.url = ""
        self.log_path = workdir / "server.log"

    def start(self) -> None:
        """Start the server and wait until it answers `/ok`."""
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [
                str(LANGGRAPH),
                "dev",
                "--config",
                str(self.config),
                "--port",
                str(port),
                "--no-browser",
                "--no-reload",
                "--n-jobs-per-worker",
                "4",
            ],
            cwd=self.workdir,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"langgraph dev exited:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/ok", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        raise TimeoutError(f"langgraph dev did not start:\n{self.log()}")

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 20 s)."""
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def client(self, user: str | None = ADMIN_USER):
        """A langgraph-sdk client authenticated as `user` (API_KEYS), or without a key (None)."""
        from langgraph_sdk import get_client

        return get_client(url=self.url, api_key=API_KEYS[user] if user else None)

    def log(self) -> str:
        """The server's output so far (last 8000 characters)."""
        return self.log_path.read_text(errors="replace")[-8000:]

    def log_text(self) -> str:
        """The server's whole output so far."""
        return self.log_path.read_text(errors="replace")

    async def failure_message(self, client, thread_id: str, parts: list) -> str:
        """What a failed run streamed (`parts`) tells its client of the cause: its error event's message."""
        errors = [part.data for part in parts if part.event == "error"]
        assert errors, parts
        return errors[0]["message"]


class AegraServer:
    """The production stack (scripts/prod): `replicas` Aegra replicas serving aegra.json on the
    given Postgres, with a Redis and a data folder (logs) of their own. Its clients send each
    request to the next replica in turn, so a test's thread is created on one replica, its runs
    streamed from another, its state read from either."""

    kind = "aegra"
    schema = "public"  # Aegra keeps checkpoints and the store in its own tables

    def __init__(self, workdir: Path, env: dict[str, str], replicas: int = 2) -> None:
        self.replicas = replicas
        self.stack = ProdStack(env, data_dir=workdir)
        self.url = ""

    def start(self) -> None:
        """Start the stack on free ports and wait until every replica answers."""
        self.stack.env["PORT"] = str(free_port())
        self.stack.start(self.replicas, timeout=START_TIMEOUT_S * 3)
        self.url = self.stack.urls[0]

    def stop(self) -> None:
        self.stack.stop()

    def client(self, user: str | None = ADMIN_USER):
        """A langgraph-sdk client authenticated as `user` (API_KEYS), or without a key (None),
        whose requests go to each replica in turn."""
        from langgraph_sdk.client import LangGraphClient

        headers = {"x-api-key": API_KEYS[user]} if user else {}
        http = httpx.AsyncClient(
            base_url=self.url,
            transport=RoundRobin(self.stack.urls),
            headers=headers,
            timeout=httpx.Timeout(connect=5, read=300, write=300, pool=5),
        )
        return LangGraphClient(http)

    def log(self) -> str:
        """The stack's output and the replicas' logs (last 8000 characters)."""
        return self.stack.log()[-8000:]

    def log_text(self) -> str:
        return self.stack.log()

    async def failure_message(self, client, thread_id: str, parts: list) -> str:
        """What a failed run streamed (`parts`) tells its client of the cause: Aegra's error event
        says only '<type>: execution failed', the run's record has the message (`error_message`)."""
        assert [part for part in parts if part.event == "error"], parts
        run_id = next(part.data["run_id"] for part in parts if part.event == "metadata")
        return (await client.runs.get(thread_id, run_id))["error_message"] or ""


def make_server(request: pytest.FixtureRequest, workdir: Path, env: dict[str, str]) -> DevServer | AegraServer:
    """A server for `env`: `langgraph dev`, or the Aegra stack under `--server aegra` (Redis and
    the replicas' logs in `workdir`)."""
    if request.config.getoption("--server") == "aegra":
        # Each turn's memory extraction run waits out MEMORY_EXTRACTION_DELAY in a worker slot
        # under Aegra (no delayed runs): room for a session's worth of them.
        return AegraServer(workdir, {**env, "N_JOBS_PER_WORKER": "100"})
    return DevServer(workdir, env)


def server_env(openai_server, **extra: str) -> dict[str, str]:
    """Environment for a test server: the scripted model, offline, no tracing."""
    return {
        **os.environ,
        "OPENAI_BASE_URL": openai_server.base_url,
        "OPENAI_API_KEY": "test-key",
        "AGENT_MODEL": "openai:scripted",
        "AGENT_RETRY_BASE_DELAY": "0.01",
        # Memory extraction runs are scheduled but stay pending unless a test asks otherwise.
        "MEMORY_EXTRACTION_DELAY": "3600",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "LANGSMITH_TRACING": "false",
        "BG_JOB_MAX_RETRIES": "2",  # as scripts/serve
        "PYTHONPATH": str(ROOT),
        **extra,
    }


@pytest.fixture(scope="session")
def own_model_server():
    """A second scripted model server: the OpenAI-compatible endpoint a client brings with its
    own key (`x-model-base-url`), which the session's server lists in AGENT_REQUEST_BASE_URLS."""
    with run_openai_server() as server:
        yield server


@pytest.fixture(scope="session")
def dev_server(request, pg_uri, openai_server, own_model_server, tmp_path_factory):
    """One `langgraph dev` (or Aegra stack, `--server aegra`) for the session, on the test
    Postgres and the scripted model server."""
    workdir = tmp_path_factory.mktemp("langgraph-dev")
    env = server_env(
        openai_server,
        POSTGRES_URI=pg_uri,
        POSTGRES_SCHEMA="it_server",
        AGENT_API_KEYS=AGENT_API_KEYS,
        AGENT_ADMIN_USERS=ADMIN_USER,
        # `*`: any public base URL; the second scripted server, on loopback, listed by the operator.
        AGENT_REQUEST_BASE_URLS=f"*,{own_model_server.base_url}",
    )
    server = make_server(request, workdir, env)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def restartable(tmp_path, openai_server, monkeypatch):
    """A dev server on a Postgres of its own, which the test may stop and start."""
    data_dir = tmp_path / "pg" / "data"
    monkeypatch.setenv("EMBEDDED_POSTGRES_DIR", str(data_dir))
    uri = ensure_embedded_postgres()
    env = server_env(
        openai_server,
        POSTGRES_URI=uri,
        POSTGRES_SCHEMA="restart",
        EMBEDDED_POSTGRES_DIR=str(data_dir),
        DATABASE_RECOVERY_WAIT="4",  # a run waits this long for Postgres to come back
    )
    server = DevServer(tmp_path, env)
    server.start()
    yield server
    server.stop()
    stop_embedded_postgres()
