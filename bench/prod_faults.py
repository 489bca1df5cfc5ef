"""Fault checks of the production stack (`scripts/prod`: Aegra replicas, Redis, embedded Postgres).

    .venv/bin/python -m bench.prod_faults [--replicas 2] [--port 28600]

Starts the stack on this machine with a scripted OpenAI-compatible model (tests/openai_server.py)
and API keys, then, in order:
1. custom routes (`/api/v1/...`, the MCP endpoint) without a key: 401 on every replica;
2. store scopes: a memory put through the store API lands in `("memories", <user>, ...)`;
3. `kill -9` of the replica running a streamed run: the run completes on another replica, the
   thread's final state has the question once and the answer once;
4. `kill -9` of every replica, then the restart `scripts/prod` does: threads, checkpoints,
   memories and knowledge bases (their graph too: rows in Postgres, walked by the graph worker)
   intact, the run in flight ends in a terminal state;
5. Postgres stopped then started: the answers while it is down, time to recover;
6. Redis stopped then started: the answers while it is down, time to recover;
7. memory extraction of two quick turns: both writer runs succeed, each turn extracted once (`--only debounce`);
8. `kill -9` of Postgres with 10 streamed runs in flight, started again 15 s later: every run ends
   `success`, each thread has its question once and its answer once (`--only postgres-crash` runs
   this one alone after the route checks).
Prints each result and a summary of the figures (time to recover, runs lost, duplicates); exits
1 when a check fails. Takes 3-5 minutes (Aegra's 30 s run lease dominates). Not run in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psycopg
from langgraph_sdk import get_client

from tests.openai_server import spawn_openai_server
from tests.prod_stack import ProdStack, healthy, wait_until

ROOT = Path(__file__).resolve().parent.parent
KEYS = {"alice": "k-alice-faults", "bob": "k-bob-faults", "ops": "k-ops-faults"}
TERMINAL = {"success", "error", "interrupted", "timeout"}


def replica_pids() -> list[int]:
    """Pids of the Aegra replicas (uvicorn processes of this worktree's .venv-prod)."""
    out = subprocess.run(["pgrep", "-f", "uvicorn aegra_api.main:app"], capture_output=True, text=True).stdout
    mine = []
    for pid in map(int, out.split()):
        try:
            if Path(f"/proc/{pid}/cwd").resolve() == ROOT:
                mine.append(pid)
        except OSError:
            continue
    return mine


def claimed_pid(postgres_uri: str, run_id: str) -> int | None:
    """The pid of the replica whose worker holds run `run_id` (Aegra's `runs.claimed_by` is
    `<host>-<pid>-worker-<n>`)."""
    with psycopg.connect(postgres_uri, autocommit=True) as conn:
        row = conn.execute("select claimed_by from runs where run_id = %s", (run_id,)).fetchone()
    if not row or not row[0]:
        return None
    found = re.search(r"-(\d+)-worker-\d+$", row[0])
    return int(found.group(1)) if found else None


def client(url: str, user: str) -> Any:
    return get_client(url=url, api_key=KEYS[user])


def headers(user: str | None) -> dict[str, str]:
    return {"x-api-key": KEYS[user]} if user else {}


class Report:
    def __init__(self) -> None:
        self.failures: list[str] = []
        self.figures: dict[str, Any] = {}

    def summary(self) -> int:
        """Print the figures and the failed checks; the exit status (1: a check failed)."""
        print("\nfigures:", json.dumps(self.figures, indent=2))
        if self.failures:
            print(f"\n{len(self.failures)} check(s) failed:", *self.failures, sep="\n  ")
            return 1
        print("\nevery check passed")
        return 0

    def check(self, ok: bool, what: str) -> None:
        print(("  ok    " if ok else "  FAIL  ") + what, flush=True)
        if not ok:
            self.failures.append(what)


def answer_of(words: int) -> str:
    return " ".join(f"w{i}" for i in range(words))


def human_and_ai_counts(state: dict, key: str, answer: str) -> tuple[int, int]:
    messages = state.get("values", {}).get("messages", [])
    humans = sum(1 for m in messages if m.get("type") == "human" and key in str(m.get("content")))
    ais = sum(1 for m in messages if m.get("type") == "ai" and m.get("content") == answer)
    return humans, ais


async def check_route_auth(stack: ProdStack, report: Report) -> None:
    print("1. custom routes without a key", flush=True)
    async with httpx.AsyncClient(timeout=10) as http:
        for url in stack.urls:
            tools = await http.get(f"{url}/api/v1/tools")
            mcp = await http.post(
                f"{url}/api/v1/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={"accept": "application/json, text/event-stream"},
            )
            kb = await http.get(f"{url}/api/v1/kb")
            report.check(
                (tools.status_code, mcp.status_code, kb.status_code) == (401, 401, 401),
                f"{url}: /api/v1/tools, /api/v1/mcp, /api/v1/kb without a key -> "
                f"{tools.status_code}, {mcp.status_code}, {kb.status_code} (want 401)",
            )
            keyed = await http.get(f"{url}/api/v1/tools", headers=headers("alice"))
            report.check(keyed.status_code == 200, f"{url}: /api/v1/tools with a key -> {keyed.status_code}")


async def check_store_scopes(stack: ProdStack, report: Report, key: str) -> None:
    print("2. store scopes", flush=True)
    url = stack.urls[0]
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        item = {"namespace": ["memories", "alice", "facts"], "key": key, "value": {"text": "alice likes tea"}}
        put = await http.put("/store/items", json=item, headers=headers("alice"))
        report.check(put.status_code in (200, 204), f"alice puts a memory: {put.status_code}")
        params = {"namespace": "memories.alice.facts", "key": key}
        got = await http.get("/store/items", params=params, headers=headers("alice"))
        report.check(got.status_code == 200 and got.json().get("value") == item["value"], "alice reads it back")
        other = await http.get("/store/items", params=params, headers=headers("bob"))
        report.check(other.status_code in (403, 404), f"bob reading alice's memory -> {other.status_code}")
    with psycopg.connect(stack.postgres_uri, autocommit=True) as conn:
        rows = [r[0] for r in conn.execute("select prefix from store where key = %s", (key,)).fetchall()]
    report.check(rows == ["memories.alice.facts"], f"stored under {rows} (want ['memories.alice.facts'])")


async def check_kill_running_replica(stack: ProdStack, model: Any, report: Report) -> str:
    print("3. kill -9 of the replica running a streamed run", flush=True)
    key = f"faultkill{uuid.uuid4().hex[:8]}"
    answer = answer_of(80)
    model.script(key, [{"content": answer, "delay_per_token": 0.1}] * 10)
    first, second = client(stack.urls[0], "alice"), client(stack.urls[-1], "alice")
    thread = await first.threads.create()
    question = {"messages": [{"role": "user", "content": f"{key}: count to eighty"}]}
    run = await first.runs.create(thread["thread_id"], "react", input=question, stream_mode=["messages-tuple"])
    run_id = run["run_id"]
    await asyncio.to_thread(
        wait_until, lambda: claimed_pid(stack.postgres_uri, run_id) is not None, 60, "the run to be claimed"
    )
    victim = claimed_pid(stack.postgres_uri, run_id)
    streamed: list[str] = []
    starts: list[int] = []  # chunks received before each `metadata` event (a run's execution starts)

    async def stream(sdk: Any) -> None:
        async for part in sdk.runs.join_stream(thread["thread_id"], run_id, stream_mode=["messages-tuple"]):
            if part.event == "metadata":
                starts.append(len(streamed))
            elif part.event.startswith("messages") and isinstance(part.data, list) and part.data:
                streamed.append(str(part.data[0].get("content", "")))

    watcher = asyncio.create_task(stream(second))
    await asyncio.sleep(3)  # some tokens streamed
    before = len(streamed)
    assert victim is not None
    os.kill(victim, signal.SIGKILL)
    killed_at = time.monotonic()
    print(f"  killed replica pid {victim} after {before} streamed chunks", flush=True)
    final = await wait_terminal(second, thread["thread_id"], run_id, timeout=180)
    recovered = time.monotonic() - killed_at
    with_timeout = asyncio.wait_for(watcher, 30)
    try:
        await with_timeout
    except (TimeoutError, Exception) as exc:  # the stream may end with the replica; the state decides
        print(f"  (stream ended: {type(exc).__name__})", flush=True)
    state = await second.threads.get_state(thread["thread_id"])
    humans, ais = human_and_ai_counts(state, key, answer)
    report.check(final == "success", f"run ended {final} {recovered:.1f} s after the kill")
    report.check((humans, ais) == (1, 1), f"final state: question x{humans}, answer x{ais} (want 1, 1)")
    report.figures["kill_running_replica_recover_s"] = round(recovered, 1)
    report.figures["kill_running_replica_runs_lost"] = 0 if final == "success" else 1
    report.figures["kill_running_replica_duplicate_messages"] = max(humans - 1, 0) + max(ais - 1, 0)
    # A client that drops what it showed when a `metadata` event says the run started again
    # shows the chunks after the last one.
    after_restart = len(streamed) - (starts[-1] if starts else 0)
    print(f"  stream: {len(streamed)} chunks, metadata events after chunks {starts}", flush=True)
    report.figures["kill_running_replica_stream_chunks"] = {
        "received": len(streamed),
        "answer_tokens": 80,
        "metadata_events_after_chunks": starts,
        "after_the_last_metadata_event": after_restart,
    }
    return thread["thread_id"]


async def wait_terminal(sdk: Any, thread_id: str, run_id: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    status = "?"
    while time.monotonic() < deadline:
        try:
            status = (await sdk.runs.get(thread_id, run_id))["status"]
        except Exception as exc:  # a replica restarting, a backend down: ask again
            status = type(exc).__name__
        if status in TERMINAL:
            return status
        await asyncio.sleep(0.5)
    return status


async def check_kill_every_replica(stack: ProdStack, model: Any, report: Report, done_thread: str, memory: str) -> None:
    print("4. kill -9 of every replica, then restart", flush=True)
    url = stack.urls[0]
    alice = client(url, "alice")
    kb = f"faults-{uuid.uuid4().hex[:6]}"
    async with httpx.AsyncClient(base_url=url, timeout=60, headers=headers("alice")) as http:
        created = await http.post("/api/v1/kb", json={"name": kb})
        upload = await http.post(
            f"/api/v1/kb/{kb}/documents",
            files=[
                ("files", ("tea.md", b"# Tea\nGreen tea is steamed; black tea is oxidised.", "text/markdown")),
                *[("files", (name, text.encode(), "text/plain")) for name, text in GRAPH_DOCUMENTS.items()],
            ],
        )
        report.check(
            created.is_success and upload.is_success,
            f"knowledge base {kb} created: {created.status_code}, documents: {upload.status_code}",
        )
    graph_before = graph_rows(stack.postgres_uri, kb)
    report.check(graph_before[0] > 0, f"knowledge graph in Postgres: {graph_before} (entities, relations)")
    history_before = len(await alice.threads.get_history(done_thread, limit=100))
    state_before = (await alice.threads.get_state(done_thread))["values"]
    key = f"faultall{uuid.uuid4().hex[:8]}"
    model.script(key, [{"content": answer_of(100), "delay_per_token": 0.1}] * 10)
    thread = await alice.threads.create()
    run = await alice.runs.create(
        thread["thread_id"], "react", input={"messages": [{"role": "user", "content": f"{key}: go"}]}
    )
    await asyncio.to_thread(
        wait_until, lambda: claimed_pid(stack.postgres_uri, run["run_id"]) is not None, 60, "the run to start"
    )
    await asyncio.sleep(2)
    pids = replica_pids()
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    print(f"  killed {len(pids)} replicas {pids}", flush=True)
    await asyncio.to_thread(
        wait_until, lambda: all(healthy(u) for u in stack.urls), 120, "every replica to answer again", 0.2
    )
    back = time.monotonic() - killed_at
    report.check(True, f"every replica answers again {back:.1f} s after the kill")
    alice = client(url, "alice")
    final = await wait_terminal(alice, thread["thread_id"], run["run_id"], timeout=180)
    ended = time.monotonic() - killed_at
    report.check(final in TERMINAL, f"the run in flight ended {final} {ended:.1f} s after the kill")
    history_after = len(await alice.threads.get_history(done_thread, limit=100))
    state_after = (await alice.threads.get_state(done_thread))["values"]
    report.check(
        history_after == history_before and state_after == state_before,
        f"earlier thread intact: {history_after} checkpoints (before {history_before}), same state",
    )
    async with httpx.AsyncClient(base_url=url, timeout=60, headers=headers("alice")) as http:
        got = await http.get("/store/items", params={"namespace": "memories.alice.facts", "key": memory})
        report.check(got.status_code == 200, f"memory intact: {got.status_code}")
        hits = await http.post(f"/api/v1/kb/{kb}/search", json={"query": "green tea", "strategy": "keyword"})
        found = hits.status_code == 200 and "steamed" in hits.text
        report.check(found, f"knowledge base intact and searchable: {hits.status_code}")
    graph_after = graph_rows(stack.postgres_uri, kb)
    report.check(graph_after == graph_before, f"knowledge graph intact: {graph_after} (before {graph_before})")
    paths = await graph_answer(alice, model, kb)
    report.check(
        ["Prajor Dynamics", "Edda Delkel"] in paths, f"the graph worker walks the graph after the restart: {paths}"
    )
    report.figures["kill_all_replicas_graph_rows"] = {"before": graph_before, "after": graph_after}
    report.figures["kill_all_replicas_back_s"] = round(back, 1)
    report.figures["kill_all_replicas_run_in_flight"] = f"{final} after {ended:.1f} s"
    report.figures["kill_all_replicas_runs_lost"] = 0 if final in TERMINAL else 1


GRAPH_DOCUMENTS = {
    "company.txt": "Prajor Dynamics is a manufacturer of precision sensors. Prajor Dynamics was founded in 1964 "
    "by Edda Delkel.",
    "founder.txt": "Edda Delkel (born 1931) is an engineer. Edda Delkel was born in Morvenholm and studied "
    "chemistry at the Ostvel Institute.",
}


def graph_rows(postgres_uri: str, kb: str) -> tuple[int, int]:
    """(entities, relations) of knowledge base `kb`'s graph in the package's tables beside
    Aegra's store (the database's default schema)."""
    with psycopg.connect(postgres_uri, autocommit=True) as conn:
        counts = [
            conn.execute(f"select count(*) from {table} where kb = %s", (kb,)).fetchone()
            for table in ("kb_graph_entities", "kb_graph_relations")
        ]
    return (counts[0][0] if counts[0] else 0, counts[1][0] if counts[1] else 0)


async def graph_answer(sdk: Any, model: Any, kb: str) -> list[list[str]]:
    """The entity paths of the sources a router run's graph worker found in `kb`."""
    key = f"graph{uuid.uuid4().hex[:8]}"
    model.script(key, [{"content": "Morvenholm [1]."}])
    thread = await sdk.threads.create()
    question = f"{key} In which town was the founder of Prajor Dynamics born?"
    await sdk.runs.wait(
        thread["thread_id"],
        "router",
        input={"messages": [{"role": "user", "content": question}]},
        context={"kb": kb, "retrieval_agents": ["graph_agent"]},
    )
    state = (await sdk.threads.get_state(thread["thread_id"]))["values"]
    return [source.get("path") or [] for source in state.get("sources", [])]


def redis_command(name: str) -> list[str]:
    """How scripts/prod runs Redis's `name` (redis-server, redis-cli): from PATH, else from the
    Debian packages it unpacked into .data/redis-root."""
    if shutil.which(name):
        return [name]
    root = ROOT / ".data" / "redis-root"
    return ["env", f"LD_LIBRARY_PATH={root / 'usr/lib/x86_64-linux-gnu'}", str(root / "usr" / "bin" / name)]


async def outage(
    stack: ProdStack, report: Report, name: str, stop: list[str], start: list[str], needed_by: set[str]
) -> None:
    """Stop a backend, probe three requests (`needed_by`: those that need it, which must answer
    503; the others must still work), start it again, and time until a run is accepted."""
    url = stack.urls[0]
    alice = client(url, "alice")
    thread = await alice.threads.create()
    subprocess.run(stop, cwd=ROOT, check=True, capture_output=True)
    print(f"  {name} stopped", flush=True)
    answers = {}
    async with httpx.AsyncClient(base_url=url, timeout=30, headers=headers("alice")) as http:
        probes = {
            "get thread": http.get(f"/threads/{thread['thread_id']}"),
            "create run": http.post(
                f"/threads/{thread['thread_id']}/runs",
                json={"assistant_id": "react", "input": {"messages": [{"role": "user", "content": "hi"}]}},
            ),
            "list KBs": http.get("/api/v1/kb"),
        }
        for what, request in probes.items():
            try:
                response = await request
                answers[what] = f"{response.status_code} {response.text[:160]}"
            except httpx.HTTPError as exc:
                answers[what] = f"{type(exc).__name__}"
            print(f"    {what}: {answers[what]}", flush=True)
        started = time.monotonic()
        subprocess.run(start, cwd=ROOT, check=True, capture_output=True)
        backend_up = time.monotonic() - started

        async def accepted() -> str | None:
            """The id of a run the server accepted, else None."""
            try:
                run = await http.post(
                    f"/threads/{thread['thread_id']}/runs",
                    json={"assistant_id": "react", "input": {"messages": [{"role": "user", "content": "ok"}]}},
                )
            except httpx.HTTPError:
                return None
            return run.json()["run_id"] if run.status_code == 200 else None

        accepted_after = None
        succeeded = []
        while time.monotonic() - started < 300:
            if (run_id := await accepted()) is None:
                await asyncio.sleep(0.1)
                continue
            accepted_after = accepted_after or time.monotonic() - started
            status = await wait_terminal(alice, thread["thread_id"], run_id, timeout=120)
            succeeded.append(status)
            if status == "success":
                break
        recovered = time.monotonic() - started
    statuses = {what: answer.split()[0] for what, answer in answers.items()}
    wanted = {what: "503" if what in needed_by else "200" for what in answers}
    report.check(statuses == wanted, f"{name} down: answers {statuses} (want {wanted})")
    report.check(
        bool(succeeded) and succeeded[-1] == "success",
        f"{name} back: a run accepted {accepted_after or -1:.1f} s and a run completed {recovered:.1f} s after "
        f"the start command ({name} itself took {backend_up:.1f} s to start; runs tried: {succeeded})",
    )
    final = {}
    for run in await alice.runs.list(thread["thread_id"]):
        final[run["run_id"]] = await wait_terminal(alice, thread["thread_id"], run["run_id"], timeout=180)
    report.check(
        all(s in TERMINAL for s in final.values()), f"{name}: the thread's runs ended {sorted(final.values())}"
    )
    report.figures[f"{name.lower()}_outage_answers"] = {what: answer[:60] for what, answer in answers.items()}
    report.figures[f"{name.lower()}_run_accepted_s"] = round(accepted_after or -1, 1)
    report.figures[f"{name.lower()}_run_completed_s"] = round(recovered, 1)
    report.figures[f"{name.lower()}_runs_tried"] = succeeded
    report.figures[f"{name.lower()}_start_s"] = round(backend_up, 1)
    report.figures[f"{name.lower()}_thread_runs"] = sorted(final.values())


async def check_memory_debounce(stack: ProdStack, model: Any, report: Report) -> None:
    """Two quick turns of one conversation: two writer runs (Aegra has no `after_seconds`; each
    run waits itself, graphs/runtime/memory_schedule.py) that end `success` and extract each turn
    exactly once between them: the superseded run asks nothing, the other extracts every pending
    turn of the conversation (one model call a turn, graphs/memory_writer/pending.py)."""
    print("7. memory extraction of two quick turns (MEMORY_EXTRACTION_DELAY=15)", flush=True)
    from graphs.runtime.memory_schedule import memory_thread_id

    key = f"faultmem{uuid.uuid4().hex[:8]}"
    # Every call of this conversation (the two answers, the extractions) gets an empty
    # extraction: valid JSON for the writer's structured call, a plain answer for react's.
    empty = json.dumps({"people": [], "semantic": [], "episodic": [], "profile_updates": {}})
    model.script(key, [{"content": empty}] * 10)
    first, second = f"{key} I live in Lisbon", f"{key} I have a cat"
    alice = client(stack.urls[0], "alice")
    thread = await alice.threads.create()
    for text in (first, second):
        await alice.runs.wait(thread["thread_id"], "react", input={"messages": [{"role": "user", "content": text}]})
    memory_thread = memory_thread_id("alice", thread["thread_id"])
    runs = await alice.runs.list(memory_thread)
    ended = [await wait_terminal(alice, memory_thread, run["run_id"], timeout=120) for run in runs]
    extractions = [json.dumps(r) for r in model.requests() if "long-term memory of an assistant" in json.dumps(r)]
    asked_first = sum(1 for r in extractions if "Lisbon" in r)
    asked_second = sum(1 for r in extractions if "a cat" in r)
    report.check(
        len(runs) == 2 and all(status == "success" for status in ended) and asked_first == 1 and asked_second == 1,
        f"{len(runs)} extraction runs ({ended}); the model was asked to extract the first turn "
        f"{asked_first} times, the second {asked_second} (want 2 runs, both success, each turn once)",
    )
    report.figures["debounce"] = {
        "runs": len(runs),
        "first_turn_extractions": asked_first,
        "second_turn_extractions": asked_second,
    }


def postmaster_pid(postgres_uri: str) -> int:
    """The pid of the stack's Postgres server (first line of `postmaster.pid` in its data folder)."""
    with psycopg.connect(postgres_uri, autocommit=True) as conn:
        row = conn.execute("select setting from pg_settings where name = 'data_directory'").fetchone()
    assert row is not None
    return int((Path(row[0]) / "postmaster.pid").read_text().split()[0])


async def check_postgres_crash(stack: ProdStack, model: Any, report: Report, runs: int, down_s: float) -> None:
    """`kill -9` of Postgres with `runs` streamed runs in flight on the replicas, started again
    `down_s` seconds later: every run ends `success` (server/run_recovery.py resumes it from its
    last checkpoint), each thread has its question once and its answer once."""
    print(f"8. kill -9 of Postgres with {runs} streamed runs in flight, back {down_s:g} s later", flush=True)
    answer = answer_of(60)
    flights = []
    for i in range(runs):
        key = f"pgcrash{uuid.uuid4().hex[:8]}"
        model.script(key, [{"content": answer, "delay_per_token": 0.1}] * 10)
        sdk = client(stack.urls[i % len(stack.urls)], "alice")
        thread = await sdk.threads.create()
        run = await sdk.runs.create(
            thread["thread_id"],
            "react",
            input={"messages": [{"role": "user", "content": f"{key}: count"}]},
            stream_mode=["messages-tuple"],
        )
        flights.append({"key": key, "sdk": sdk, "thread": thread["thread_id"], "run": run["run_id"], "chunks": 0})

    async def stream(flight: dict) -> None:
        flight["starts"] = 0
        async for part in flight["sdk"].runs.join_stream(
            flight["thread"], flight["run"], stream_mode=["messages-tuple"]
        ):
            if part.event == "metadata":
                flight["starts"] += 1
            elif part.event.startswith("messages") and isinstance(part.data, list) and part.data:
                flight["chunks"] += 1

    watchers = [asyncio.create_task(stream(flight)) for flight in flights]
    for _ in range(600):  # at most 120 s until every run streams
        if all(flight["chunks"] >= 5 for flight in flights):
            break
        await asyncio.sleep(0.2)
    streaming = sum(1 for flight in flights if flight["chunks"] >= 5)
    pid = postmaster_pid(stack.postgres_uri)
    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    print(f"  killed Postgres (pid {pid}) with {streaming} of {runs} runs streaming", flush=True)
    await asyncio.sleep(down_s)
    py = str(ROOT / ".venv-prod/bin/python")
    started = subprocess.run([py, "-m", "store.postgres", "start"], cwd=ROOT, capture_output=True, text=True)
    back_at = time.monotonic()
    print(f"  Postgres started again {back_at - killed_at:.1f} s after the kill (rc {started.returncode})", flush=True)
    report.check(started.returncode == 0, f"Postgres started again: {started.stderr.strip()[-200:]}")

    async def outcome(flight: dict) -> None:
        flight["status"] = await wait_terminal(flight["sdk"], flight["thread"], flight["run"], timeout=300)
        flight["after_back_s"] = time.monotonic() - back_at

    await asyncio.gather(*(outcome(flight) for flight in flights))
    for watcher in watchers:
        try:
            await asyncio.wait_for(watcher, 30)
        except Exception as exc:  # the stream may end with an error; the run's status and state decide
            print(f"  (a stream ended: {type(exc).__name__})", flush=True)
    duplicates = 0
    counts = []
    for flight in flights:
        state = await flight["sdk"].threads.get_state(flight["thread"])
        humans, ais = human_and_ai_counts(state, flight["key"], answer)
        counts.append((humans, ais))
        duplicates += max(humans - 1, 0) + max(ais - 1, 0)
    succeeded = sum(1 for flight in flights if flight["status"] == "success")
    times = sorted(flight["after_back_s"] for flight in flights if flight["status"] == "success")
    report.check(
        succeeded == runs,
        f"{succeeded}/{runs} runs ended success (statuses {sorted(flight['status'] for flight in flights)}), "
        f"{times[0] if times else -1:.1f}-{times[-1] if times else -1:.1f} s after Postgres was started again",
    )
    report.check(
        all(count == (1, 1) for count in counts),
        f"threads' final state: (question, answer) counts {counts} (want (1, 1) each); duplicates: {duplicates}",
    )
    chunks = [flight["chunks"] for flight in flights]
    starts = [flight.get("starts", 0) for flight in flights]
    print(f"  stream chunks per run {chunks} (answer: 60 tokens), metadata events per run {starts}", flush=True)
    report.figures["postgres_crash"] = {
        "runs": runs,
        "streaming_at_kill": streaming,
        "down_s": round(back_at - killed_at, 1),
        "succeeded": succeeded,
        "duplicate_messages": duplicates,
        "success_after_postgres_back_s": [round(t, 1) for t in times],
        "stream_chunks": chunks,
        "metadata_events": starts,
    }


async def main_async(args: argparse.Namespace) -> int:
    report = Report()
    with spawn_openai_server() as model:
        model.script("default", [{"content": "ok"}] * 200)
        env = {
            **os.environ,
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "test-key",
            "AGENT_MODEL": "openai:scripted",
            "AGENT_API_KEYS": ",".join(f"{user}={key}" for user, key in KEYS.items()),
            "AGENT_ADMIN_USERS": "ops",
            "PORT": str(args.port),
            "LANGSMITH_TRACING": "false",
            "MEMORY_EXTRACTION_DELAY": "15",
        }
        stack = ProdStack(env)
        try:
            started = time.monotonic()
            stack.start(args.replicas)
            print(f"stack up in {time.monotonic() - started:.1f} s: {stack.urls}", flush=True)
            memory = f"m{uuid.uuid4().hex[:8]}"
            await check_route_auth(stack, report)
            if args.only == "postgres-crash":
                await check_postgres_crash(stack, model, report, args.crash_runs, args.crash_down)
                return report.summary()
            if args.only == "debounce":
                await check_memory_debounce(stack, model, report)
                return report.summary()
            await check_store_scopes(stack, report, memory)
            done_thread = await check_kill_running_replica(stack, model, report)
            await check_kill_every_replica(stack, model, report, done_thread, memory)
            await check_memory_debounce(stack, model, report)
            py = str(ROOT / ".venv-prod/bin/python")
            print("5. Postgres stop/start", flush=True)
            await outage(
                stack,
                report,
                "Postgres",
                [py, "-m", "store.postgres", "stop"],
                [py, "-m", "store.postgres", "start"],
                needed_by={"get thread", "create run", "list KBs"},
            )
            print("6. Redis stop/start", flush=True)
            port = stack.redis_url.rsplit(":", 1)[1].split("/")[0]
            redis_dir = stack.data_dir / "redis"
            await outage(
                stack,
                report,
                "Redis",
                [*redis_command("redis-cli"), "-p", port, "shutdown"],
                [
                    *redis_command("redis-server"), "--port", port, "--bind", "127.0.0.1", "--dir", str(redis_dir),
                    "--appendonly", "yes", "--daemonize", "yes", "--pidfile", str(redis_dir / "redis.pid"),
                    "--logfile", str(redis_dir / "redis.log"),
                ],
                needed_by={"create run"},
            )  # fmt: skip
            await check_postgres_crash(stack, model, report, args.crash_runs, args.crash_down)
        finally:
            stack.stop()
    return report.summary()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--port", type=int, default=28600)
    parser.add_argument("--crash-runs", type=int, default=10, help="runs in flight when Postgres is killed")
    parser.add_argument("--crash-down", type=float, default=15, help="seconds Postgres stays down after the kill")
    parser.add_argument(
        "--only",
        choices=["postgres-crash", "debounce"],
        help="start the stack and run only this check (with the route checks)",
    )
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
