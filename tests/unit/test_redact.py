"""settings/redact.py: configured values that can carry secrets never reach error text or logs."""

from __future__ import annotations

import logging

from settings import redact as redaction
from tools import mcp

CONNECTION = {
    "transport": "streamable_http",
    "url": "https://deploy:pa55word-x@mcp.example.com/mcp?token=tok-12345&region=eu",
    "headers": {"Authorization": "Bearer hdr-abcdef"},
}
STDIO = {
    "transport": "stdio",
    "command": "python",
    "args": ["server.py"],
    "env": {"K": "env-777x"},
}


def test_secrets_in_a_connection():
    found = redaction.secrets_in(CONNECTION) + redaction.secrets_in(STDIO)
    for value in ("pa55word-x", "tok-12345", "Bearer hdr-abcdef", "env-777x", CONNECTION["url"]):
        assert value in found, value
    for name in ("streamable_http", "python", "server.py", "eu"):  # names and paths, not secrets
        assert name not in found


def test_redact_hides_given_secrets_userinfo_and_query_values():
    text = f"Client error '401' for url '{CONNECTION['url']}' using Bearer hdr-abcdef"
    cleaned = redaction.redact(text, redaction.secrets_in(CONNECTION))
    assert "tok-12345" not in cleaned and "pa55word" not in cleaned and "hdr-abcdef" not in cleaned
    assert "Client error '401'" in cleaned
    # any URL, registered or not
    other = redaction.redact("GET http://u:p-word@h.example/a?key=k-998877&x=1 failed")
    assert "p-word" not in other and "k-998877" not in other and "h.example/a?key=***&x=***" in other


def test_mcp_errors_and_log_lines_are_redacted(monkeypatch, caplog):
    import json

    monkeypatch.setenv("MCP_SERVERS", json.dumps({"vault": CONNECTION}))
    monkeypatch.delenv("MCP_SERVERS_FILE", raising=False)
    mcp.mcp_servers_config()  # reading the configuration registers its secrets
    error = RuntimeError(f"connection to {CONNECTION['url']} refused (Bearer hdr-abcdef)")
    described = mcp._describe(error)
    assert "tok-12345" not in described and "hdr-abcdef" not in described and "refused" in described
    logger = logging.getLogger("httpx")
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    keep = Keep()
    logger.addHandler(keep)
    try:
        logger.warning("HTTP Request: POST %s", CONNECTION["url"])
    finally:
        logger.removeHandler(keep)
    assert records and "tok-12345" not in records[0] and "pa55word" not in records[0]


def test_log_records_with_tracebacks_are_redacted():
    redaction.register_secrets(["tb-secret-424242"])
    logger = logging.getLogger("redact-test")
    logger.propagate = False
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    keep = Keep()
    keep.addFilter(redaction._FILTER)
    logger.addHandler(keep)
    try:
        try:
            raise RuntimeError("GET http://h.example/x?key=tb-secret-424242 failed")
        except RuntimeError:
            logger.exception("call failed with %s", "tb-secret-424242")
        logger.warning({"event": "structured", "url": "http://h.example/?token=tb-secret-424242"})
    finally:
        logger.removeHandler(keep)
    assert len(lines) == 2 and "RuntimeError" in lines[0] and "Traceback" in lines[0]
    assert all("tb-secret-424242" not in line for line in lines), lines
