"""The deep_research suite's offline web: a SearXNG-compatible /search and a small fixed corpus of
pages on a loopback HTTP server (tests/web_servers.py), so the real web tools run without network.

A query finds the pages of every topic word it contains.
"""

from __future__ import annotations

import json
import threading
from html import escape

from tests.web_servers import LoopbackServer, RecordedRequest, Reply

CORPUS: dict[str, list[tuple[str, str, str]]] = {
    "kettle": [
        ("/doc/kettle-basics", "Solar kettles", "A solar kettle boils one litre of water in about twenty minutes."),
        ("/doc/kettle-mirror", "Parabolic mirrors", "The parabolic mirror of a solar kettle focuses sunlight."),
    ],
    "pump": [
        ("/doc/pump-history", "Wind pumps", "Wind pumps have lifted ground water on farms since the 1850s."),
        ("/doc/pump-output", "Pump output", "A mid-size wind pump lifts about 5000 litres of water a day."),
    ],
    "still": [
        ("/doc/still-water", "Solar stills", "A solar still yields about four litres of drinking water a day."),
    ],
    "oven": [
        ("/doc/oven-box", "Box ovens", "A solar box oven reaches 150 degrees Celsius on a clear day."),
    ],
}
"""topic -> pages (path, title, text)."""


def _page(title: str, text: str) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title></head><body>"
        f"<article><h1>{escape(title)}</h1><p>{escape(text)}</p>"
        "<p>This page is part of the fixed corpus of the offline deep_research eval.</p></article></body></html>"
    )


class CorpusServer:
    """The corpus on one loopback server, started on first use and kept for the process."""

    _lock = threading.Lock()
    _server: LoopbackServer | None = None

    @classmethod
    def base_url(cls) -> str:
        """The server's base URL (SEARXNG_URL for the web tools)."""
        with cls._lock:
            if cls._server is None:
                server = LoopbackServer({"/search": cls._search})
                for pages in CORPUS.values():
                    for path, title, text in pages:
                        server.routes[path] = Reply(body=_page(title, text))
                cls._server = server.__enter__()
            return cls._server.base_url

    @classmethod
    def _search(cls, request: RecordedRequest) -> Reply:
        query = request.query.get("q", [""])[0].lower()
        base = cls._server.base_url if cls._server else ""
        results = [
            {"url": base + path, "title": title, "content": text}
            for topic, pages in CORPUS.items()
            if topic in query
            for path, title, text in pages
        ]
        return Reply(body=json.dumps({"query": query, "results": results}), content_type="application/json")
