"""The deep_research graph: scripted models per role, web tools against a loopback search engine + pages."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from graphs.deep_research.budget import fit_texts, is_context_length_error
from graphs.deep_research.citations import cite_notes, cite_sources, number_sources, validate_report
from graphs.deep_research.context import ResearchContext, research_context_fields
from graphs.deep_research.graph import builder
from graphs.deep_research.researcher import (
    NOTES_TOKENS,
    notes_max_tokens,
    search_providers,
    search_unreachable,
    search_with_fallback,
)
from graphs.runtime.models import ModelCallError, register_model_provider
from graphs.runtime.ui import is_progress
from store import knowledge
from tests.fakes import ScriptedChatModel
from tests.web_servers import LoopbackServer, RecordedRequest, Reply
from tools import web_read as web_read_module
from tools import web_search as web_search_module
from tools.cache import TTLCache

ROOT = Path(__file__).resolve().parents[2]
SEARCH_DELAY_S = 0.25

# The fixed corpus: topic -> pages (path, title, text). A query finds the pages of every topic it names.
CORPUS = {
    "kettle": [
        ("/doc/kettle-basics", "Solar kettles", "A solar kettle boils one litre of water in about twenty minutes."),
        ("/doc/kettle-mirror", "Parabolic mirrors", "The parabolic mirror of a solar kettle focuses sunlight."),
    ],
    "pump": [
        ("/doc/pump-history", "Wind pumps", "Wind pumps have lifted ground water on farms since the 1850s."),
        ("/doc/pump-output", "Pump output", "A mid-size wind pump lifts about 5000 litres of water a day."),
    ],
    "clock": [
        ("/doc/clock-tides", "Tide clocks", "A tide clock turns once every 12 hours and 25 minutes."),
    ],
    "oven": [
        ("/doc/oven-box", "Box ovens", "A solar box oven reaches 150 degrees Celsius on a clear day."),
    ],
    "dryer": [
        ("/doc/dryer-crops", "Solar dryers", "Solar crop dryers halve the drying time of mangoes."),
    ],
    "still": [
        ("/doc/still-water", "Solar stills", "A solar still yields about four litres of drinking water a day."),
    ],
}


def page(title: str, text: str) -> str:
    filler = " ".join(f"{text}" for _ in range(3))
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head><body>"
        f"<article><h1>{title}</h1><p>{text}</p><p>{filler}</p>"
        "<p>This page is part of a small fixed corpus served on loopback for tests.</p></article></body></html>"
    )


class SearchEngine:
    """A SearXNG-compatible /search plus the corpus pages, recording when each search ran."""

    def __init__(self, server: LoopbackServer) -> None:
        self.server = server
        self.timings: list[tuple[str, float, float]] = []
        self.failing: set[str] = set()
        self.lock = threading.Lock()
        server.routes["/search"] = self.search
        for pages in CORPUS.values():
            for path, title, text in pages:
                server.routes[path] = Reply(body=page(title, text))

    def url(self, path: str) -> str:
        return self.server.url(path)

    def search(self, request: RecordedRequest) -> Reply:
        query = request.query["q"][0]
        start = time.monotonic()
        time.sleep(SEARCH_DELAY_S)  # long enough for concurrent searches to overlap
        with self.lock:
            self.timings.append((query, start, time.monotonic()))
        if "all" in self.failing or any(word in query for word in self.failing):
            return Reply(status=500, body="engine down", content_type="text/plain")
        results = [
            {"url": self.url(path), "title": title, "content": text}
            for topic, pages in CORPUS.items()
            if topic in query
            for path, title, text in pages
        ]
        return Reply(body=json.dumps({"query": query, "results": results}), content_type="application/json")

    def intervals(self, topics: list[str]) -> list[tuple[float, float]]:
        """Per topic (one researcher each): from its first search's start to its last search's end."""
        spans = []
        for topic in topics:
            times = [(s, e) for q, s, e in self.timings if topic in q]
            spans.append((min(s for s, _ in times), max(e for _, e in times)))
        return spans


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The largest number of intervals that overlap at one moment."""
    points = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda p: (p[0], p[1]))
    running = best = 0
    for _, delta in points:
        running += delta
        best = max(best, running)
    return best


@pytest.fixture(autouse=True)
def environment(monkeypatch):
    for name in (
        "WEB_SEARCH_PROVIDER",
        "TAVILY_API_KEY",
        "JINA_API_KEY",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "http_proxy",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WEB_ALLOW_LOOPBACK", "1")
    monkeypatch.setenv("AGENT_RETRY_BASE_DELAY", "0.01")
    monkeypatch.setattr(web_search_module, "SEARCH_CACHE", TTLCache())
    monkeypatch.setattr(web_read_module, "READ_CACHE", TTLCache())


@pytest.fixture
def engine(monkeypatch):
    with LoopbackServer() as server:
        monkeypatch.setenv("SEARXNG_URL", server.base_url)
        yield SearchEngine(server)


@pytest.fixture
def models():
    """One scripted model per role: scripted:research, scripted:compress, scripted:report."""
    slot: dict[str, ScriptedChatModel] = {}
    register_model_provider("scripted", lambda name, **kw: slot[name])
    return slot


def planned(*topics: str, brief: str = "Compare low-tech water and sun devices.") -> dict:
    return {
        "tool_calls": [
            {
                "name": "ResearchPlan",
                "args": {
                    "brief": brief,
                    "sub_questions": [
                        {"question": f"What about the {t}?", "queries": [f"{t} facts", f"{t} numbers"]} for t in topics
                    ],
                },
            }
        ]
    }


def reflection(*topics: str) -> dict:
    return {
        "tool_calls": [
            {
                "name": "Reflection",
                "args": {
                    "gaps": [{"question": f"What about the {t}?", "queries": [f"{t} facts"]} for t in topics],
                },
            }
        ]
    }


def compress_notes(messages) -> str:
    """Notes citing each source the researcher was given, by its exact URL."""
    prompt = messages[-1].content
    urls = re.findall(r"^URL: (\S+)", prompt, flags=re.M)
    question = re.search(r"Your sub-question: (.*)", prompt).group(1)
    return "\n".join(f"- Finding {n} on {question} [{url}]" for n, url in enumerate(urls, 1))


def report_citing(extra: str = "") -> callable:
    """A report citing every listed source by number, plus `extra` text (e.g. invented citations)."""

    def write(messages) -> str:
        prompt = messages[-1].content
        listed = re.findall(r"^\[(\d+)\] (.*?): (\S+)$", prompt, flags=re.M)
        body = " ".join(f"Fact {n} [{n}]." for n, _, _ in listed)
        sources = "\n".join(f"[{n}] {title}: {url}" for n, title, url in listed)
        return f"# Report\n\n{body} {extra}\n\n## Sources\n{sources}"

    return write


def compressions(count: int) -> list:
    return [compress_notes] * count


def set_models(models, research: list, compress: list, report: list) -> None:
    models["research"] = ScriptedChatModel(responses=research)
    models["compress"] = ScriptedChatModel(responses=compress)
    models["report"] = ScriptedChatModel(responses=report)


def context(**overrides) -> ResearchContext:
    values = dict(
        model="scripted:main",
        research_model="scripted:research",
        compression_model="scripted:compress",
        report_model="scripted:report",
        remember=False,
        tool_retries=0,
        max_research_rounds=1,
    )
    return ResearchContext(**{**values, **overrides})


async def run(
    ctx: ResearchContext, message="Research low-tech devices", *, thread="t1", graph=None, resume=None, store=None
):
    """Run (or resume) the graph; return (state, custom events, message chunks, graph)."""
    graph = graph or builder.compile(checkpointer=InMemorySaver(), store=store)
    config = {"configurable": {"thread_id": thread}}
    events, chunks = [], []
    payload = Command(resume=resume) if resume is not None else {"messages": [HumanMessage(message)]}
    async for mode, chunk in graph.astream(payload, config, context=ctx, stream_mode=["custom", "messages"]):
        (events if mode == "custom" else chunks).append(chunk)
    return (await graph.aget_state(config)), events, chunks, graph


def kinds(events, kind):
    return [e for e in events if e["event"] == kind]


async def test_researchers_run_in_parallel_and_the_report_cites_only_retrieved_sources(engine, models):
    invented = "Also see [9] and [the lab](https://invented.example/study) and https://fake.example/x."
    set_models(models, [planned("kettle", "pump", "clock")], compressions(3), [report_citing(invented)])
    snapshot, events, chunks, _ = await run(context(max_concurrent_research_units=3))
    state = snapshot.values

    # Three researchers searched at the same time (overlap measured on the search engine).
    assert most_at_once(engine.intervals(["kettle", "pump", "clock"])) == 3
    assert len(engine.timings) == 6  # two queries per sub-question

    order = [e["event"] for e in events]
    assert order.index("research_brief") < order.index("research_plan") < order.index("researcher_started")
    assert order.index("report_writing") > max(i for i, k in enumerate(order) if k == "researcher_finished")
    finished = kinds(events, "researcher_finished")
    assert sorted(e["question"] for e in finished) == [
        "What about the clock?",
        "What about the kettle?",
        "What about the pump?",
    ]
    assert all(e["status"] == "success" and e["sources_read"] == e["sources_found"] for e in finished)
    assert {e["question"]: e["sources_read"] for e in finished}["What about the kettle?"] == 2

    # Only retrieved URLs survive; the invented ones are removed and counted.
    retrieved = {engine.url(path) for pages in CORPUS.values() for path, _, _ in pages}
    cited_urls = set(re.findall(r"https?://\S+", state["report"]))
    assert cited_urls and cited_urls <= retrieved
    assert "invented.example" not in state["report"] and "fake.example" not in state["report"]
    [check] = kinds(events, "citations_checked")
    assert check["removed"] == 3 and check["invalid_numbers"] == [9]
    assert set(check["invented_urls"]) == {"https://invented.example/study", "https://fake.example/x"}
    assert check["cited"] == 5 and "3 citation(s)" in state["report"]
    assert "the lab" in state["report"]  # the link text stays, without the invented URL

    # State for clients; the final AI message is the validated report.
    assert state["brief"] == "Compare low-tech water and sun devices."
    assert state["plan"] == ["What about the kettle?", "What about the pump?", "What about the clock?"]
    assert len(state["notes"]) == 3 and {s["url"] for s in state["sources"]} == {
        engine.url(p) for t in ("kettle", "pump", "clock") for p, _, _ in CORPUS[t]
    }
    assert isinstance(state["messages"][-1], AIMessage) and state["messages"][-1].content == state["report"]
    # it keeps its model call's metadata, and was written from the web
    report_metadata = state["messages"][-1].response_metadata
    assert report_metadata["web_search"] is True and report_metadata["model"] and report_metadata["created_at"]

    # Only the report streams as chat tokens; planning and compression are not streamed.
    nodes = {meta["langgraph_node"] for chunk, meta in chunks if chunk.content}
    assert nodes == {"write_report"}
    streamed = [chunk for chunk, meta in chunks if chunk.content and meta["langgraph_node"] == "write_report"]
    assert len(streamed) > 5 and streamed[0].id == state["messages"][-1].id

    # Each role used its own model; the notes reached the report writer as numbered citations.
    report_prompt = models["report"].calls[0].messages[-1].content
    assert "[1]" in report_prompt and "Finding 1 on What about the kettle?" in report_prompt
    assert not re.search(r"Finding \d+ on .*\[https?://", report_prompt)
    assert len(models["compress"].calls) == 3 and len(models["research"].calls) == 1


def compress_facts(messages) -> str:
    """Notes stating each source's fact (the corpus text), cited by its exact URL."""
    prompt = messages[-1].content
    texts = {path: text for pages in CORPUS.values() for path, _, text in pages}
    urls = re.findall(r"^URL: (\S+)", prompt, flags=re.M)
    return "\n".join(f"- {next(t for p, t in texts.items() if url.endswith(p))} [{url}]" for url in urls)


UNCITED_REPORT = (
    "# Water devices\n\nSolar stills give about 4 litres of drinking water a day.\n\n"
    "- Wind pumps have lifted ground water on farms since the 1850s\n"
    "- A mid-size wind pump lifts roughly 5,000 litres of water each day.\n\n"
    "## Conclusion\nThese devices deserve more attention from planners.\n"
)


async def test_a_report_without_citation_markers_is_cited_from_the_notes(engine, models):
    """A small model's report drops every [n]: each stated finding gets its note's source, the
    opinion none, and the Sources section lists what is now cited."""
    set_models(models, [planned("still", "pump")], [compress_facts] * 2, [UNCITED_REPORT])
    snapshot, events, _, _ = await run(context())
    report = snapshot.values["report"]

    [check] = kinds(events, "citations_checked")
    assert check["attributed"] == 3 and check["cited"] == 3 and check["removed"] == 0
    body, sources = report.split("## Sources")
    numbered = dict(re.findall(r"^\[(\d+)\] .*?: (\S+)$", sources, flags=re.M))
    cites = {line.split(" [")[0]: numbered[n] for line in body.splitlines() for n in re.findall(r"\[(\d+)\]", line)}
    assert cites == {
        "Solar stills give about 4 litres of drinking water a day": engine.url("/doc/still-water"),
        "- Wind pumps have lifted ground water on farms since the 1850s": engine.url("/doc/pump-history"),
        "- A mid-size wind pump lifts roughly 5,000 litres of water each day": engine.url("/doc/pump-output"),
    }
    assert "These devices deserve more attention from planners.\n" in body


def compress_facts_without_addresses(messages) -> str:
    """Notes as a small model wrote them (real model, research-pump): each source's fact in
    other words, and no address at all."""
    prompt = messages[-1].content
    texts = {path: text for pages in CORPUS.values() for path, _, text in pages}
    urls = re.findall(r"^URL: (\S+)", prompt, flags=re.M)
    found = [next(t for p, t in texts.items() if url.endswith(p)) for url in urls]
    return "Research notes:\n" + "\n".join(f"{n}. As the document says, {t}" for n, t in enumerate(found, 1))


async def test_notes_without_any_address_are_cited_from_the_sources_that_support_them(engine, models):
    set_models(models, [planned("still", "pump")], [compress_facts_without_addresses] * 2, [UNCITED_REPORT])
    snapshot, events, _, _ = await run(context())
    [check] = kinds(events, "citations_checked")
    assert check["cited"] == 3 and check["removed"] == 0
    body, sources = snapshot.values["report"].split("## Sources")
    numbered = dict(re.findall(r"^\[(\d+)\] .*?: (\S+)$", sources, flags=re.M))
    cites = {line.split(" [")[0]: numbered[n] for line in body.splitlines() for n in re.findall(r"\[(\d+)\]", line)}
    assert cites["- A mid-size wind pump lifts roughly 5,000 litres of water each day"] == engine.url(
        "/doc/pump-output"
    )
    assert cites["Solar stills give about 4 litres of drinking water a day"] == engine.url("/doc/still-water")


def test_cite_sources_adds_the_supporting_sources_address_and_nothing_else():
    sources = [
        {
            "url": "https://a.example/still",
            "content": "Solar stills\nA solar still yields about four litres of water a day.",
        },
        {"url": "https://a.example/pump", "content": "A mid-size wind pump lifts about 5000 litres of water a day."},
    ]
    notes = (
        "#### Finding 1\nThe mid-size wind pump mentioned in the document lifts about 5000 litres of water a day."
        " A solar still yields forty litres a day.\n2. The sources do not say how high a pump lifts water."
    )
    cited, count = cite_sources(notes, sources)
    assert count == 1
    assert "lifts about 5000 litres of water a day. [https://a.example/pump] A solar still yields forty" in cited
    assert "forty litres a day.\n" in cited and cited.endswith("how high a pump lifts water.")
    already = (
        "A solar still yields about four litres of water a day [https://a.example/still]. The pump lifts 5000 litres."
    )
    assert cite_sources(already, sources) == (already, 0)  # notes that cite a source stay as they are


async def test_waves_rounds_and_cuts_respect_the_limits(engine, models):
    set_models(
        models,
        [planned("kettle", "pump", "clock", "oven", "dryer"), reflection("still", "kettle", "dryer", "oven")],
        compressions(6),
        [report_citing()],
    )
    ctx = context(max_sub_questions=4, max_concurrent_research_units=2, max_research_rounds=2)
    snapshot, events, _, _ = await run(ctx)
    state = snapshot.values

    [plan] = kinds(events, "research_plan")
    assert plan["dropped"] == ["What about the dryer?"] and len(plan["sub_questions"]) == 4
    rounds = kinds(events, "research_round")
    assert [(e["round"], e["wave"], len(e["sub_questions"])) for e in rounds] == [(1, 1, 2), (1, 2, 2), (2, 3, 2)]
    # Reflection: already-researched questions are skipped, the rest cut to the concurrency limit.
    [gaps] = kinds(events, "research_reflection")
    assert gaps["gaps"] == ["What about the still?", "What about the dryer?"]
    assert gaps["dropped"] == []
    # Never more than two researchers at once, measured on the search engine.
    topics = ["kettle", "pump", "clock", "oven", "still", "dryer"]
    spans = engine.intervals(topics)
    assert most_at_once(spans) == 2
    assert len(kinds(events, "researcher_started")) == 6 and len(state["research_log"]) == 6
    assert len(models["research"].calls) == 2  # plan + one reflection: the last round does not reflect
    assert state["plan"][-2:] == ["What about the still?", "What about the dryer?"]


async def test_addresses_given_as_search_queries_are_not_searched(engine, models):
    """A small model copies source addresses from the notes into its queries: those are dropped,
    and a sub-question left with none is searched by itself."""
    plan = planned("kettle")
    plan["tool_calls"][0]["args"]["sub_questions"][0]["queries"] = ["http://127.0.0.1:1/doc/kettle", "kettle facts"]
    gap = reflection("still")
    gap["tool_calls"][0]["args"]["gaps"][0]["queries"] = ["https://example.org/still"]
    set_models(models, [plan, gap], compressions(2), [report_citing()])
    _, events, _, _ = await run(context(max_research_rounds=2))
    started = {e["question"]: e["queries"] for e in kinds(events, "researcher_started")}
    assert started == {"What about the kettle?": ["kettle facts"], "What about the still?": []}
    searched = [query for query, *_ in engine.timings]
    assert not [q for q in searched if "://" in q]
    assert "What about the still?" in searched


def test_notes_are_bounded_by_what_was_read():
    low, high = NOTES_TOKENS
    assert notes_max_tokens(["short page"]) == low
    assert notes_max_tokens(["word " * 40_000]) == high
    middle = notes_max_tokens(["word " * 1_000])
    assert low < middle < high
    assert notes_max_tokens(["word " * 40_000], ceiling=300) == 300


async def test_the_compression_model_is_asked_for_bounded_notes(engine, monkeypatch):
    built: dict[str, dict] = {}
    slot = {
        "research": ScriptedChatModel(responses=[planned("kettle")]),
        "compress": ScriptedChatModel(responses=compressions(1)),
        "report": ScriptedChatModel(responses=[report_citing()]),
    }

    def provider(name, **kw):
        built[name] = kw
        return slot[name]

    register_model_provider("scripted", provider)
    await run(context())
    assert NOTES_TOKENS[0] <= built["compress"]["max_tokens"] <= NOTES_TOKENS[1]
    assert "max_tokens" not in built["report"]  # the report is as long as the research needs
    built.clear()
    slot["research"] = ScriptedChatModel(responses=[planned("kettle")])
    slot["compress"] = ScriptedChatModel(responses=compressions(1))
    slot["report"] = ScriptedChatModel(responses=[report_citing()])
    await run(context(max_tokens=100), thread="t2")
    assert built["compress"]["max_tokens"] == 100  # the run's own limit, when lower, wins


async def test_notes_left_empty_by_the_bound_are_asked_for_again_without_it(engine, monkeypatch):
    """A reasoning model can spend a small bound on its reasoning and write no notes."""
    built: list[dict] = []
    slot = {
        "research": ScriptedChatModel(responses=[planned("kettle")]),
        "compress": ScriptedChatModel(responses=["", compress_notes]),
        "report": ScriptedChatModel(responses=[report_citing()]),
    }

    def provider(name, **kw):
        if name == "compress":
            built.append(kw)
        return slot[name]

    register_model_provider("scripted", provider)
    snapshot, _, _, _ = await run(context())
    assert [kw.get("max_tokens") for kw in built] == [NOTES_TOKENS[0], None]
    assert "Finding 1 on What about the kettle?" in snapshot.values["notes"][0]["text"]


async def test_a_failing_researcher_does_not_fail_the_report(engine, models):
    engine.failing.add("pump")
    set_models(models, [planned("kettle", "pump")], compressions(1), [report_citing()])
    snapshot, events, _, _ = await run(context())
    state = snapshot.values
    statuses = {e["question"]: e for e in kinds(events, "researcher_finished")}
    assert statuses["What about the kettle?"]["status"] == "success"
    failed = statuses["What about the pump?"]
    assert failed["status"] == "error" and "HTTP 500" in failed["error"] and failed["sources_found"] == 0
    assert [e["status"] for e in sorted(state["research_log"], key=lambda e: e["question"])] == ["success", "error"]
    assert state["report"].startswith("# Report") and engine.url("/doc/kettle-basics") in state["report"]
    assert not kinds(events, "research_failed")


class ModelDown(Exception):
    """Shaped like a persistent 400 from the model API (not retried)."""

    status_code = 400


async def test_a_failing_compression_is_recorded_and_the_report_goes_on(engine, models):
    def compress_or_fail(messages):
        return ModelDown("bad request") if "kettle" in messages[-1].content.split("\n")[0] else compress_notes(messages)

    set_models(models, [planned("kettle", "pump")], [compress_or_fail] * 2, [report_citing()])
    snapshot, events, _, _ = await run(context())
    state = snapshot.values
    log = {entry["question"]: entry for entry in state["research_log"]}
    assert log["What about the kettle?"]["status"] == "error"
    assert "compression failed" in log["What about the kettle?"]["error"]
    assert log["What about the pump?"]["status"] == "success"
    assert {s["url"] for s in state["sources"]} == {engine.url(p) for p, _, _ in CORPUS["pump"]}
    assert state["report"].startswith("# Report")

    set_models(models, [planned("kettle")], [ModelDown("bad request")], [])
    snapshot, events, _, _ = await run(context(), thread="t2")
    [failure] = kinds(events, "research_failed")
    assert failure["error"].startswith("every researcher failed: compression failed")
    answer = snapshot.values["messages"][-1].content
    assert "try again later" in answer and "compression_model" not in answer and "settings" not in answer


async def test_every_provider_failing_ends_with_a_clear_error(engine, models, caplog):
    engine.failing.add("all")
    set_models(models, [planned("kettle", "pump")], [], [])
    snapshot, events, _, _ = await run(context(tool_retries=1))
    state = snapshot.values
    [failure] = kinds(events, "research_failed")
    assert failure["failures"] == 2 and "SearXNG search failed with HTTP 500" in failure["error"]
    answer = state["messages"][-1]
    assert isinstance(answer, AIMessage) and answer.content.startswith("I could not research this")
    assert "HTTP 500" in answer.content and state["report"] == ""
    # the first error and a count of the others, not all four one after the other
    assert answer.content.count("HTTP 500") == 1 and "(and 3 more errors)" in answer.content
    # operator hints (setting names) go to the log, not to the person asking
    assert "WEB_SEARCH_PROVIDER" not in answer.content and "settings" not in answer.content
    assert "try again later" in answer.content
    assert any("WEB_SEARCH_PROVIDER" in record.getMessage() for record in caplog.records)
    assert failure["error"].endswith("(and 3 more errors)")
    assert models["report"].calls == [] and models["compress"].calls == []
    assert len(engine.timings) == 8  # 2 researchers x 2 queries x (1 try + 1 retry)


async def test_searches_that_find_nothing_are_not_reported_as_a_search_outage(engine, models):
    set_models(models, [planned("zeppelin", "airship")], [], [])
    snapshot, events, _, _ = await run(context())
    [failure] = kinds(events, "research_failed")
    assert failure["error"] == "the web searches found no sources for it"
    answer = snapshot.values["messages"][-1].content
    assert answer.startswith("I could not research this: the web searches found no sources for it")
    assert "not working" not in answer and "failed" not in answer and "other words" in answer
    assert snapshot.values["report"] == "" and models["report"].calls == []


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class SlowModel(ScriptedChatModel):
    """A scripted model whose answers wait for `released`: a CPU model still prefilling a long
    prompt on a loaded machine. It waits without blocking the event loop, and a cancelled call
    never answers."""

    released: asyncio.Event

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        await self.released.wait()
        return self._generate(messages, stop, **kwargs)

    async def _astream(self, messages, stop=None, run_manager=None, **kwargs):
        await self.released.wait()
        async for chunk in super()._astream(messages, stop, run_manager, **kwargs):
            yield chunk


async def test_an_unreachable_search_provider_ends_the_run_without_waiting_for_the_planning_model(
    models, monkeypatch, caplog
):
    monkeypatch.setenv("SEARXNG_URL", f"http://127.0.0.1:{closed_port()}")
    set_models(models, [], [], [])
    released = asyncio.Event()  # never set: the plan would come only after the run's end
    models["research"] = SlowModel(responses=[planned("kettle", "pump")], released=released)
    # The bound only keeps a regression from hanging the suite: the old code waits for the plan.
    snapshot, events, _, _ = await asyncio.wait_for(run(context(tool_retries=1)), 20)
    state = snapshot.values
    [failure] = kinds(events, "research_failed")
    assert failure["error"].startswith("web search cannot be reached: searxng: SearXNG search is unreachable")
    assert failure["failures"] == 1
    answer = state["messages"][-1]
    assert isinstance(answer, AIMessage) and answer.content.startswith("I could not research this")
    assert "SearXNG search is unreachable" in answer.content and "try again later" in answer.content
    assert "SEARXNG_URL" not in answer.content and "settings" not in answer.content
    assert any("WEB_SEARCH_PROVIDER" in record.getMessage() for record in caplog.records)
    assert not kinds(events, "research_plan") and not kinds(events, "researcher_started")
    assert state["report"] == "" and state["plan"] == [] and state["research_log"] == []
    assert models["compress"].calls == [] and models["report"].calls == []


async def test_the_connection_check_tells_unreachable_from_failing_providers(engine, monkeypatch):
    engine.failing.add("all")  # answers HTTP 500 to every search: reachable, the searches tell the rest
    assert await search_unreachable(context()) == []
    assert engine.server.requests_to("/search") == []  # a connection check, not a search

    down = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("JINA_API_KEY", "test-key")
    monkeypatch.setenv("JINA_SEARCH_URL", down + "/jina")
    assert search_providers() == ["searxng", "jina"]
    assert await search_unreachable(context()) == []  # SearXNG still answers: research goes on

    monkeypatch.setenv("SEARXNG_URL", down)
    reasons = await search_unreachable(context())
    assert [r.split(":")[0] for r in reasons] == ["searxng", "jina"]
    assert "SearXNG search is unreachable" in reasons[0] and "Jina search is unreachable" in reasons[1]


async def test_plan_only_answers_with_the_plan(engine, models):
    set_models(models, [planned("kettle", "pump")], [], [])
    snapshot, events, _, _ = await run(context(plan_only=True))
    answer = snapshot.values["messages"][-1]
    assert "**Research plan**" in answer.content and "1. What about the kettle?" in answer.content
    assert "kettle facts; kettle numbers" in answer.content
    assert kinds(events, "research_plan") and not kinds(events, "researcher_started")
    assert engine.timings == [] and snapshot.next == ()


async def test_clarification_interrupts_and_resumes_with_the_answer(engine, models):
    set_models(
        models,
        [
            {
                "tool_calls": [
                    {
                        "name": "ClarifyDecision",
                        "args": {"need_clarification": True, "question": "Which device do you mean?"},
                    }
                ]
            },
            planned("kettle"),
        ],
        compressions(1),
        [report_citing()],
    )
    ctx = context(allow_clarification=True)
    snapshot, events, _, graph = await run(ctx, "Research the device")
    assert snapshot.next == ("ask_user",)
    [pending] = snapshot.interrupts
    assert pending.value["question"] == "Which device do you mean?"
    [request] = pending.value["action_requests"]  # LangChain's standard HITL request (agent-chat-ui's form)
    assert request["name"] == "clarifying_question" and request["args"]["answer"] == ""
    assert pending.value["review_configs"][0]["allowed_decisions"] == ["edit", "respond"]
    assert kinds(events, "clarification_requested")[0]["question"] == "Which device do you mean?"
    assert engine.timings == []

    snapshot, _, _, _ = await run(ctx, graph=graph, resume={"answer": "  "})  # empty: asked again
    assert snapshot.next == ("ask_user",)
    again = snapshot.interrupts[0].value
    assert again["question"] == "Which device do you mean?" and again["error"] == "The answer was empty."
    snapshot, _, _, _ = await run(ctx, graph=graph, resume="the solar kettle")
    messages = snapshot.values["messages"]
    assert [m.content for m in messages[1:3]] == ["Which device do you mean?", "the solar kettle"]
    plan_prompt = models["research"].calls[1].messages[-1].content
    assert "the solar kettle" in plan_prompt
    assert snapshot.values["report"].startswith("# Report") and snapshot.next == ()


def clarifying(question="Which device do you mean?"):
    return {"tool_calls": [{"name": "ClarifyDecision", "args": {"need_clarification": True, "question": question}}]}


@pytest.mark.parametrize(
    "answer",
    [
        {"decisions": [{"type": "respond", "message": "the solar kettle"}]},
        # agent-chat-ui's form: an edit of the request's `answer` field (every field sent back as text)
        {
            "decisions": [
                {
                    "type": "edit",
                    "edited_action": {
                        "name": "clarifying_question",
                        "args": {"question": "Which device do you mean?", "answer": "the solar kettle"},
                    },
                }
            ]
        },
        "the solar kettle",  # the older shapes keep working
        {"answer": "the solar kettle"},
    ],
)
async def test_the_question_is_answered_with_standard_decisions_or_the_older_shapes(engine, models, answer):
    set_models(models, [clarifying(), planned("kettle")], compressions(1), [report_citing()])
    ctx = context(allow_clarification=True)
    _, _, _, graph = await run(ctx, "Research the device")
    snapshot, _, _, _ = await run(ctx, graph=graph, resume={"decisions": [{"type": "approve"}]})
    assert "'respond' or 'edit'" in snapshot.interrupts[0].value["error"]  # not an answer: asked again
    snapshot, _, _, _ = await run(ctx, graph=graph, resume=answer)
    assert [m.content for m in snapshot.values["messages"][1:3]] == ["Which device do you mean?", "the solar kettle"]
    assert snapshot.values["report"].startswith("# Report") and snapshot.next == ()


async def test_a_chat_message_sent_while_the_question_waits_is_its_answer(engine, models):
    set_models(models, [clarifying(), planned("kettle")], compressions(1), [report_citing()])
    ctx = context(allow_clarification=True)
    _, _, _, graph = await run(ctx, "Research the device")
    snapshot, events, _, _ = await run(ctx, "the solar kettle", graph=graph)
    assert not kinds(events, "clarification_requested")  # not asked again
    assert [(m.type, m.content) for m in snapshot.values["messages"][:3]] == [
        ("human", "Research the device"),
        ("ai", "Which device do you mean?"),
        ("human", "the solar kettle"),
    ]
    assert "the solar kettle" in models["research"].calls[1].messages[-1].content
    assert snapshot.values["report"].startswith("# Report") and snapshot.next == ()


async def test_clarification_is_skipped_when_off_or_not_needed(engine, models):
    set_models(
        models,
        [
            {"tool_calls": [{"name": "ClarifyDecision", "args": {"need_clarification": False, "question": ""}}]},
            planned("kettle"),
        ],
        compressions(1),
        [report_citing()],
    )
    snapshot, events, _, _ = await run(context(allow_clarification=True))
    assert snapshot.next == () and not kinds(events, "clarification_requested")
    assert snapshot.values["report"]


class ContextTooLong(Exception):
    """Shaped like openai.BadRequestError for an over-long prompt."""

    status_code = 400
    code = "context_length_exceeded"


async def test_a_context_length_error_truncates_the_notes_and_retries(engine, models):
    set_models(
        models,
        [planned("kettle", "pump")],
        compressions(2),
        [
            ContextTooLong("This model's maximum context length is 1000 tokens."),
            report_citing(),
        ],
    )
    snapshot, events, _, _ = await run(context())
    [truncated] = [e for e in kinds(events, "notes_truncated") if e["stage"] == "report"]
    assert truncated["reason"] == "context_length_exceeded"
    assert truncated["tokens_after"] < truncated["tokens_before"]
    first, second = (len(call.messages[-1].content) for call in models["report"].calls)
    assert second < first
    assert snapshot.values["report"].startswith("# Report")
    assert kinds(events, "model_error")  # reported by the runtime, then recovered from


async def test_notes_are_cut_to_fit_the_context_window(engine, models):
    long_notes = lambda messages: compress_notes(messages) + "\n" + "Detail. " * 3000  # noqa: E731
    set_models(models, [planned("kettle", "pump")], [long_notes, long_notes], [report_citing()])
    snapshot, events, _, _ = await run(context(context_window_tokens=4000))
    [truncated] = [e for e in kinds(events, "notes_truncated") if e["stage"] == "report"]
    assert truncated["reason"] == "budget" and truncated["tokens_after"] <= 3000
    prompt = models["report"].calls[0].messages[-1].content
    assert len(prompt) / 4 <= 4000 * 0.75 + 10
    assert prompt.count("[... truncated to fit the model's context]") == 2


async def test_malformed_plans_are_retried_then_fail_clearly(engine, models):
    set_models(models, ["no tool call", planned("kettle")], compressions(1), [report_citing()])
    snapshot, _, _, _ = await run(context())
    assert snapshot.values["report"] and "could not be used" in models["research"].calls[1].messages[-1].content

    set_models(models, ["nope", "still nope", "never"], [], [])
    with pytest.raises(Exception, match="did not return a valid ResearchPlan after 3 attempts"):
        await run(context(), thread="t2")


async def test_a_follow_up_turn_starts_a_fresh_research(engine, models):
    set_models(models, [planned("kettle"), planned("clock")], compressions(2), [report_citing(), report_citing()])
    snapshot, _, _, graph = await run(context())
    snapshot, _, _, _ = await run(context(), "Now the tide clocks", graph=graph)
    state = snapshot.values
    assert state["plan"] == ["What about the clock?"] and [n["question"] for n in state["notes"]] == [
        "What about the clock?"
    ]
    assert {s["url"] for s in state["sources"]} == {engine.url("/doc/clock-tides")}
    assert len(state["research_log"]) == 1 and "kettle" not in state["report"]
    # Two answers; each turn's progress message stays above its answer with the turn's cards.
    assert sum(isinstance(m, AIMessage) and not is_progress(m) for m in state["messages"]) == 2


async def test_researchers_also_search_the_knowledge_bases(engine, models, store):
    await knowledge.create_kb(store, "farm", "farm manuals")
    await knowledge.ingest_text(
        store,
        "farm",
        "Our wind pump needs new leather seals every spring.",
        "manuals/pump care.md",
        "Pump care",
        format="markdown",
    )
    set_models(models, [planned("pump")], compressions(1), [report_citing()])
    snapshot, events, _, _ = await run(context(knowledge_bases=["farm", "missing"]), store=store)
    state = snapshot.values
    kb_sources = [s for s in state["sources"] if s["kind"] == "kb"]
    assert [s["url"] for s in kb_sources] == ["kb://farm/manuals/pump%20care.md"]
    assert "kb://farm/manuals/pump%20care.md" in state["report"]
    compress_prompt = models["compress"].calls[0].messages[-1].content
    assert "leather seals" in compress_prompt
    [entry] = state["research_log"]
    assert entry["status"] == "success" and any("'missing'" in e for e in entry["errors"])
    assert kinds(events, "researcher_finished")[0]["sources_found"] == 3  # two web pages + one passage


async def test_researchers_read_only_the_knowledge_bases_their_user_may_read(models, store):
    from types import SimpleNamespace

    from langgraph.runtime import ServerInfo

    from graphs.deep_research.researcher import _kb_passages

    await knowledge.create_kb(store, "diary", "private notes", owner="bob")
    await knowledge.ingest_text(store, "diary", "The spare key hides under the blue flowerpot.", "diary.txt")

    def runtime(identity: str):
        user = SimpleNamespace(identity=identity, permissions=[])
        info = ServerInfo(assistant_id="a", graph_id="deep_research", user=user)
        return SimpleNamespace(store=store, server_info=info, context=context(knowledge_bases=["diary"]))

    passages, errors = await _kb_passages(runtime("alice"), "where is the spare key?")
    assert passages == [] and any("Unknown knowledge base 'diary'" in e for e in errors)
    passages, errors = await _kb_passages(runtime("bob"), "where is the spare key?")
    assert errors == [] and any("flowerpot" in p["content"] for p in passages)


async def test_search_falls_back_to_the_next_provider_and_defaults_to_duckduckgo(engine, models, monkeypatch):
    assert search_providers() == ["searxng"]
    monkeypatch.delenv("SEARXNG_URL")
    assert search_providers() == ["duckduckgo"]  # no provider configured: the keyless scraper

    jina_hit = {"title": "Kettle", "url": "https://kettles.example/", "description": "Boils water."}
    engine.server.routes["/jina"] = Reply(body=json.dumps({"data": [jina_hit]}), content_type="application/json")
    monkeypatch.setenv("JINA_API_KEY", "test-key")
    monkeypatch.setenv("JINA_SEARCH_URL", engine.url("/jina"))
    monkeypatch.setenv("SEARXNG_URL", engine.server.base_url)
    assert search_providers() == ["searxng", "jina"]
    engine.failing.add("all")  # SearXNG answers 500: after its retry, Jina answers
    results = await search_with_fallback("kettle facts", context(tool_retries=1))
    assert [r["url"] for r in results] == ["https://kettles.example/"]
    assert len(engine.server.requests_to("/search")) == 2

    monkeypatch.setenv("WEB_SEARCH_PROVIDER", "searxng")  # an explicit choice has no fallback
    assert search_providers() == ["searxng"]
    with pytest.raises(RuntimeError, match="searxng: SearXNG search failed with HTTP 500"):
        await search_with_fallback("pump facts", context())


def test_citation_validation_maps_the_models_numbering_and_drops_inventions():
    catalog = number_sources(
        [
            {"url": "https://a.example/one", "title": "One"},
            {"url": "https://b.example/two/", "title": "Two"},
            {"url": "https://a.example/one#frag", "title": "duplicate"},
        ]
    )
    assert [(s["n"], s["url"]) for s in catalog] == [(1, "https://a.example/one"), (2, "https://b.example/two/")]
    report = (
        "# T\n\nAlpha [1]. Beta [2, 3]. Gamma [4].\n\n"
        "## References\n1. Two - https://b.example/two\n2. One: https://a.example/one.\n"
        "3. Made up: https://nowhere.example/paper\n"
    )
    check = validate_report(report, catalog)
    # The model's [1] is catalog 2, its [2] catalog 1; [3] was invented; [4] never listed.
    assert "Alpha [2]. Beta [1]. Gamma." in check.report
    assert check.invented_urls == ["https://nowhere.example/paper"] and check.removed_numbers == [3, 4]
    assert check.cited == [1, 2] and "nowhere.example" not in check.report
    assert check.report.rstrip().endswith("[1] One: https://a.example/one\n[2] Two: https://b.example/two/")


def test_citation_validation_keeps_a_clean_report_unchanged_in_substance():
    catalog = number_sources([{"url": "https://a.example/x", "title": "X"}])
    check = validate_report("Claim [1].\n\n## Sources\n[1] X: https://a.example/x\n", catalog)
    assert check.removed == 0 and check.cited == [1]
    assert check.report == "Claim [1].\n\n## Sources\n\n[1] X: https://a.example/x\n"
    assert "removed" not in check.report


def test_notes_urls_become_numbers_and_unknown_ones_are_marked():
    catalog = number_sources([{"url": "https://a.example/x", "title": "X"}])
    text = cite_notes("- fact [https://a.example/x]\n- other [https://evil.example/y].", catalog)
    assert text == "- fact [1]\n- other [source not retrieved]."


ATTRIBUTION_CATALOG = number_sources(
    [{"url": "https://a.example/still", "title": "Stills"}, {"url": "https://a.example/pump", "title": "Pumps"}]
)
ATTRIBUTION_NOTES = [
    cite_notes(
        "### Water\n- A solar still yields about four litres of drinking water a day [https://a.example/still].\n"
        "- Wind pumps have lifted ground water on farms since the 1850s. A mid-size wind pump lifts about"
        " 5000 litres of water a day [https://a.example/pump].",
        ATTRIBUTION_CATALOG,
    )
]


def attributed(report: str):
    return validate_report(report, ATTRIBUTION_CATALOG, notes=ATTRIBUTION_NOTES)


def test_uncited_sentences_that_paraphrase_a_cited_note_get_its_number():
    check = attributed(
        "# Water\n\nSolar stills produce roughly 4 litres of drinking water each day. A mid-size wind"
        " pump can lift 5,000 litres of water daily.\n- Wind pumps lifted ground water on farms since the"
        " 1850s\n\n| Device | Output |\n|---|---|\n| Solar still | 4 litres of drinking water a day |\n"
    )
    assert check.attributed == 4 and check.cited == [1, 2] and check.removed == 0
    assert "each day [1]. A mid-size wind pump can lift 5,000 litres of water daily [2].\n" in check.report
    assert "- Wind pumps lifted ground water on farms since the 1850s [2]\n" in check.report
    assert "| Solar still | 4 litres of drinking water a day [1] |" in check.report
    assert "| Device | Output |\n" in check.report and check.report.startswith("# Water\n")
    assert check.report.rstrip().endswith("[1] Stills: https://a.example/still\n[2] Pumps: https://a.example/pump")


def test_a_finding_whose_source_is_on_a_line_below_is_cited_from_it():
    """Notes as a small model wrote them (real model, research-oven): the finding, then its source
    on a line of its own; a heading starts the next finding, whose sentence does not take the
    previous finding's source."""
    notes = (
        "### What temperature does a solar box oven reach?\n#### Finding 1:\nThe solar box oven reaches 150"
        " degrees Celsius on a clear day.\n\n**Source:** [https://a.example/oven]\n\n#### Finding 2:\nThe"
        " oven's glass lid was invented by a Swiss scientist in 1767.\n\n#### Finding 3:\n- **Fact**: A"
        " solar still yields about four litres of drinking water a day.\n- **Source**: [https://a.example/still]"
    )
    catalog = number_sources(
        [{"url": "https://a.example/oven", "title": "Ovens"}, {"url": "https://a.example/still", "title": "Stills"}]
    )
    report = (
        "# Ovens\n\nThe solar box oven reaches a temperature of 150 degrees Celsius on a clear day. A Swiss"
        " scientist invented the oven's glass lid in 1767. A solar still yields four litres of water a day."
    )
    check = validate_report(report, catalog, notes=[cite_notes(notes, catalog)])
    assert "on a clear day [1]. A Swiss scientist invented the oven's glass lid in 1767. A solar still" in check.report
    assert "four litres of water a day [2]." in check.report
    assert check.attributed == 2 and check.cited == [1, 2]


def test_unsupported_sentences_and_number_mismatches_get_no_citation():
    unsupported = (
        "## Conclusion\nWind pumps are the best choice for farms. The research could not establish how"
        " much water a wind pump lifts in winter. A solar still yields 40 litres of drinking water a day."
    )
    check = attributed(unsupported)
    assert check.attributed == 0 and check.cited == [] and "[" not in check.report
    assert "Sources" not in check.report
    # Numbers must match exactly: the note's four litres (a day) support 4, not 40; opinions
    # sharing the topic's words (3 of 5: under two thirds) and negations the note lacks stay uncited.
    assert attributed("A solar still yields 4 litres of drinking water a day.").report.startswith(
        "A solar still yields 4 litres of drinking water a day [1]."
    )


def test_sentences_that_cite_are_left_as_they_are():
    check = attributed(
        "Solar stills give 4 litres of drinking water a day [2]. Wind pumps lifted water on farms since the 1850s [2]."
    )
    assert check.attributed == 0 and check.cited == [2]
    assert check.report.startswith("Solar stills give 4 litres of drinking water a day [2]. Wind pumps")
    # No notes given: nothing is attributed (validate_report as before).
    assert validate_report("A solar still yields 4 litres of drinking water a day.", ATTRIBUTION_CATALOG).cited == []


def test_fit_texts_cuts_the_longest_first():
    texts, cut = fit_texts(["a" * 100, "b" * 4000], 300)
    assert cut and texts[0] == "a" * 100 and len(texts[1]) <= 1100
    assert fit_texts(["short"], 100) == (["short"], False)


def test_context_length_errors_are_recognised_through_the_runtime_wrapper():
    wrapped = ModelCallError("The model call failed")
    wrapped.__cause__ = ContextTooLong("too long")
    assert is_context_length_error(wrapped)
    assert not is_context_length_error(ModelCallError("HTTP 500"))


@pytest.mark.parametrize(
    "bad",
    [
        {"max_concurrent_research_units": 0},
        {"max_research_rounds": 0},
        {"research_model": "nocolon"},
        {"knowledge_bases": "edu"},
        {"plan_only": "maybe"},
    ],
)
def test_bad_context_values_are_refused(models, bad):
    with pytest.raises(ValueError, match="Invalid context field"):
        context(**bad)


def test_role_models_default_to_the_main_model(models):
    ctx = ResearchContext(model="scripted:main")
    assert [ctx.model_for(role) for role in ("research", "compression", "report")] == ["scripted:main"] * 3


def test_research_context_fields_are_documented():
    doc = (ROOT / "docs" / "configuration.md").read_text()
    for name, description in research_context_fields():
        assert description and f"| `{name}` |" in doc, name
