"""web_search: SearXNG and Jina against loopback fakes, Tavily and DuckDuckGo with their clients replaced."""

import json

import ddgs
import langchain_tavily
import pytest
from ddgs.exceptions import DDGSException, RatelimitException
from langchain_core.tools import ToolException

from tests.web_servers import LoopbackServer, RecordedRequest, Reply
from tools import web_search as web_search_module
from tools.cache import TTLCache
from tools.errors import ToolError, ToolInputError, TransientToolError
from tools.web_search import web_search

PROVIDER_ENV = [
    "WEB_SEARCH_PROVIDER",
    "TAVILY_API_KEY",
    "SEARXNG_URL",
    "JINA_API_KEY",
    "JINA_SEARCH_URL",
    "WEB_SEARCH_CACHE_TTL",
    "WEB_SEARCH_TIMEOUT",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
]

SEARXNG_RESULTS = [
    {"url": "https://www.python.org/", "title": "Welcome to Python.org", "content": "The official home of Python."},
    {"url": "https://www.python.org/", "title": "Duplicate", "content": "same URL again"},
    {"url": "javascript:alert(1)", "title": "Not a web page", "content": "dropped"},
    {"url": "https://docs.python.org/3/", "title": "  Python 3\n documentation ", "content": "x " * 400},
    {"url": "https://en.wikipedia.org/wiki/Python_(programming_language)", "title": "", "content": "A language."},
    {"url": "https://realpython.com/", "title": "Real Python", "content": "Tutorials."},
]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(web_search_module, "SEARCH_CACHE", TTLCache())


@pytest.fixture
def server():
    with LoopbackServer() as running:
        yield running


def searxng_route(request: RecordedRequest) -> Reply:
    if request.query.get("format") != ["json"]:
        return Reply(status=403, body="format not enabled", content_type="text/plain")
    payload = {"query": request.query["q"][0], "results": SEARXNG_RESULTS}
    return Reply(body=json.dumps(payload), content_type="application/json")


@pytest.fixture
def searxng(server, monkeypatch):
    server.routes["/search"] = searxng_route
    monkeypatch.setenv("SEARXNG_URL", server.base_url + "/")
    return server


async def test_searxng_results_are_normalised(searxng):
    results = await web_search("python  language", max_results=3)
    assert [r["rank"] for r in results] == [1, 2, 3]
    assert [r["url"] for r in results] == [
        "https://www.python.org/",
        "https://docs.python.org/3/",
        "https://en.wikipedia.org/wiki/Python_(programming_language)",
    ]
    assert [r["domain"] for r in results] == ["python.org", "docs.python.org", "en.wikipedia.org"]
    assert results[0] == {
        "rank": 1,
        "title": "Welcome to Python.org",
        "url": "https://www.python.org/",
        "snippet": "The official home of Python.",
        "domain": "python.org",
    }
    assert results[1]["title"] == "Python 3 documentation"
    assert len(results[1]["snippet"]) == 500 and results[1]["snippet"].endswith("…")
    assert results[2]["title"] == "en.wikipedia.org"  # empty title falls back to the domain
    [request] = searxng.requests
    assert request.path == "/search"
    assert request.query == {"q": ["python language"], "format": ["json"]}


async def test_max_results_limits_and_caps(searxng):
    assert len(await web_search("python", max_results=1)) == 1
    assert len(await web_search("python", max_results=50)) == 4  # all usable hits, capped at 20
    with pytest.raises(ToolInputError):
        await web_search("python", max_results=0)


async def test_jina_provider(server, monkeypatch):
    server.routes["/"] = Reply(
        body=json.dumps(
            {
                "code": 200,
                "data": [
                    {"title": "Jina AI", "url": "https://jina.ai/", "description": "Search foundation.", "content": ""},
                    {"title": "Reader", "url": "https://jina.ai/reader", "description": "", "content": "Reads URLs."},
                ],
            }
        ),
        content_type="application/json",
    )
    monkeypatch.setenv("JINA_API_KEY", "test-key")
    monkeypatch.setenv("JINA_SEARCH_URL", server.url("/"))
    results = await web_search("jina reader")
    assert results == [
        {
            "rank": 1,
            "title": "Jina AI",
            "url": "https://jina.ai/",
            "snippet": "Search foundation.",
            "domain": "jina.ai",
        },
        {"rank": 2, "title": "Reader", "url": "https://jina.ai/reader", "snippet": "Reads URLs.", "domain": "jina.ai"},
    ]
    [request] = server.requests
    assert request.query == {"q": ["jina reader"]}
    assert request.headers["authorization"] == "Bearer test-key"
    assert request.headers["accept"] == "application/json"


async def test_provider_choice_order_and_override(searxng, monkeypatch):
    jina_payload = {"data": [{"title": "J", "url": "https://j.example/"}]}
    searxng.routes["/jina"] = Reply(body=json.dumps(jina_payload), content_type="application/json")
    monkeypatch.setenv("JINA_API_KEY", "k")
    monkeypatch.setenv("JINA_SEARCH_URL", searxng.url("/jina"))
    assert (await web_search("q1"))[0]["domain"] == "python.org"  # searxng comes before jina
    monkeypatch.setenv("WEB_SEARCH_PROVIDER", "jina")
    assert (await web_search("q2"))[0]["domain"] == "j.example"
    assert (await web_search("q3", provider="searxng"))[0]["domain"] == "python.org"


async def test_results_are_cached(searxng):
    first = await web_search("cached query")
    again = await web_search("  Cached   QUERY ")
    assert again == first
    assert len(searxng.requests) == 1
    again[0]["title"] = "changed by the caller"
    assert (await web_search("cached query"))[0]["title"] == "Welcome to Python.org"
    await web_search("cached query", max_results=2)
    assert len(searxng.requests) == 2


async def test_cache_ttl_from_environment(searxng, monkeypatch):
    monkeypatch.setenv("WEB_SEARCH_CACHE_TTL", "0")
    await web_search("no cache")
    await web_search("no cache")
    assert len(searxng.requests) == 2


async def test_unconfigured_search_falls_back_to_duckduckgo(fake_ddgs):
    """No provider configured: the keyless DuckDuckGo, as docs/configuration.md says."""
    assert web_search_module.choose_provider(None, web_search_module.search_config()) == "duckduckgo"
    results = await web_search("ducks", max_results=2)
    assert results[0]["domain"] == "duckduckgo.com" and fake_ddgs.calls == [("ducks", 2, 15)]


async def test_unknown_or_unconfigured_provider(monkeypatch, caplog):
    with pytest.raises(ToolInputError, match="bing"):
        await web_search("q", provider="bing")
    with pytest.raises(ToolInputError, match="'jina' is not set up") as caught:
        await web_search("q", provider="jina")
    assert "duckduckgo" in str(caught.value) and "JINA_API_KEY" not in str(caught.value)
    monkeypatch.setenv("WEB_SEARCH_PROVIDER", "tavily")
    with caplog.at_level("WARNING", logger="tools.web_search"), pytest.raises(ToolError) as caught:
        await web_search("q")
    # the operator's hint goes to the log, never to the model or the user
    assert "TAVILY_API_KEY" not in str(caught.value) and "not available" in str(caught.value)
    assert "TAVILY_API_KEY" in caplog.text


async def test_the_tool_offers_no_provider_and_its_errors_name_no_setting(monkeypatch):
    """The model sees only query and max_results, and a misconfigured server's error tells it
    nothing about environment variables."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from tools.registry import builtin_tools

    tool = builtin_tools()["web_search"]
    schema = convert_to_openai_tool(tool)["function"]
    assert set(schema["parameters"]["properties"]) == {"query", "max_results"}
    assert "provider" not in json.dumps(schema) and "tavily" not in json.dumps(schema).lower()
    monkeypatch.setenv("WEB_SEARCH_PROVIDER", "tavily")
    with pytest.raises(ToolError) as caught:  # the tool runner shows the model str(error)
        await tool.ainvoke({"query": "q"})
    assert "TAVILY" not in str(caught.value) and "API_KEY" not in str(caught.value)


async def test_a_refused_key_is_logged_for_the_operator_not_told_to_the_model(server, monkeypatch, caplog):
    server.routes["/jina"] = Reply(status=401, body='{"message": "bad key"}', content_type="application/json")
    monkeypatch.setenv("JINA_API_KEY", "k")
    monkeypatch.setenv("JINA_SEARCH_URL", server.url("/jina"))
    with caplog.at_level("WARNING", logger="tools.json_api"), pytest.raises(ToolError) as caught:
        await web_search("q")
    assert "401" in str(caught.value) and "API key" not in str(caught.value)
    assert "API key" in caplog.text


async def test_empty_query_is_an_input_error(searxng):
    with pytest.raises(ToolInputError, match="query"):
        await web_search("   ")
    assert searxng.requests == []


@pytest.mark.parametrize(("status", "transient"), [(500, True), (503, True), (429, True), (403, False), (400, False)])
async def test_provider_http_errors(server, monkeypatch, status, transient):
    server.routes["/search"] = Reply(status=status, body="nope", content_type="text/plain")
    monkeypatch.setenv("SEARXNG_URL", server.base_url)
    with pytest.raises(ToolError, match=str(status)) as caught:
        await web_search("q")
    assert isinstance(caught.value, TransientToolError) is transient


async def test_provider_timeout_and_bad_json(server, monkeypatch):
    monkeypatch.setenv("SEARXNG_URL", server.base_url)
    monkeypatch.setenv("WEB_SEARCH_TIMEOUT", "0.3")
    server.routes["/search"] = Reply(body="{}", content_type="application/json", delay=5)
    with pytest.raises(TransientToolError, match="timed out"):
        await web_search("slow")
    server.routes["/search"] = Reply(body="<html>not json</html>")
    with pytest.raises(ToolError, match="not JSON"):
        await web_search("html")


async def test_provider_error_reason_and_non_object_json(server, monkeypatch):
    monkeypatch.setenv("SEARXNG_URL", server.base_url)
    server.routes["/search"] = Reply(status=400, body=json.dumps({"error": "format json is disabled"}))
    with pytest.raises(ToolError, match="HTTP 400.*format json is disabled"):
        await web_search("reason")
    server.routes["/search"] = Reply(body="[1, 2]", content_type="application/json")
    with pytest.raises(ToolError, match="not an object") as caught:
        await web_search("list")
    assert not isinstance(caught.value, TransientToolError)


class FakeDDGS:
    calls: list = []
    outcome: object = None

    def __init__(self, timeout=5, **kwargs):
        self.timeout = timeout

    def text(self, query, max_results=10, **kwargs):
        FakeDDGS.calls.append((query, max_results, self.timeout))
        if isinstance(FakeDDGS.outcome, Exception):
            raise FakeDDGS.outcome
        return FakeDDGS.outcome


@pytest.fixture
def fake_ddgs(monkeypatch):
    FakeDDGS.calls = []
    FakeDDGS.outcome = [
        {"title": "DuckDuckGo", "href": "https://duckduckgo.com/", "body": "Privacy search."},
        {"title": "Wiki", "href": "https://en.wikipedia.org/wiki/DuckDuckGo", "body": "An article."},
    ]
    monkeypatch.setattr(ddgs, "DDGS", FakeDDGS)
    return FakeDDGS


async def test_duckduckgo_when_chosen(fake_ddgs, monkeypatch):
    monkeypatch.setenv("WEB_SEARCH_PROVIDER", "duckduckgo")
    results = await web_search("ducks", max_results=2)
    assert [(r["rank"], r["domain"], r["snippet"]) for r in results] == [
        (1, "duckduckgo.com", "Privacy search."),
        (2, "en.wikipedia.org", "An article."),
    ]
    assert fake_ddgs.calls == [("ducks", 2, 15)]


async def test_duckduckgo_errors(fake_ddgs, monkeypatch):
    monkeypatch.setenv("WEB_SEARCH_PROVIDER", "duckduckgo")
    fake_ddgs.outcome = RatelimitException("202 Ratelimit")
    with pytest.raises(TransientToolError, match="rate limited"):
        await web_search("one")
    fake_ddgs.outcome = DDGSException("No results found.")
    assert await web_search("two") == []


class FakeTavilySearch:
    instances: list = []
    outcome: object = None

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.queries = []
        FakeTavilySearch.instances.append(self)

    async def ainvoke(self, tool_input):
        self.queries.append(tool_input)
        if isinstance(FakeTavilySearch.outcome, Exception):
            raise FakeTavilySearch.outcome
        return FakeTavilySearch.outcome


@pytest.fixture
def fake_tavily(monkeypatch):
    FakeTavilySearch.instances = []
    FakeTavilySearch.outcome = {
        "query": "q",
        "results": [
            {"title": "Tavily", "url": "https://tavily.com/", "content": "Search API for agents.", "score": 0.9},
            {"title": "Docs", "url": "https://docs.tavily.com/", "content": "Reference.", "score": 0.5},
        ],
    }
    monkeypatch.setattr(langchain_tavily, "TavilySearch", FakeTavilySearch)
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-test")
    return FakeTavilySearch


async def test_tavily_provider(fake_tavily):
    results = await web_search("agent search", max_results=4)
    assert [(r["rank"], r["title"], r["domain"], r["snippet"]) for r in results] == [
        (1, "Tavily", "tavily.com", "Search API for agents."),
        (2, "Docs", "docs.tavily.com", "Reference."),
    ]
    [tool] = fake_tavily.instances
    assert tool.kwargs == {"max_results": 4, "tavily_api_key": "tvly-test"}
    assert tool.queries == [{"query": "agent search"}]


async def test_tavily_errors(fake_tavily):
    fake_tavily.outcome = {"error": Exception("Error 429: Too Many Requests")}
    with pytest.raises(TransientToolError, match="429"):
        await web_search("a")
    fake_tavily.outcome = {"error": ValueError("Error 401: Unauthorized")}
    with pytest.raises(ToolError, match="401") as caught:
        await web_search("b")
    assert not isinstance(caught.value, TransientToolError)
    fake_tavily.outcome = ToolException("No search results found for 'c'. Suggestions: ...")
    assert await web_search("c") == []
