"""Redaction of configured values that can carry secrets, wherever they could be echoed.

Configuration such as MCP server connections holds URLs (query strings and userinfo often carry
tokens), headers and environment variables. Error messages from libraries repeat them (an HTTP
error names the URL it failed on), and so do log lines. `redact` removes them from any text
before it reaches a response or a log: every value registered with `register_secrets` (or passed
in), the userinfo of every URL, and the values of every URL query parameter. `secrets_in` lists
the values of a configuration entry worth hiding; `install_log_redaction` puts a filter on the
process's log handlers that applies `redact` to every record.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

MASK = "***"
MIN_SECRET_LENGTH = 6
# A URL's query values shorter than this (`format=json`, `region=eu`) are too common to hide
# everywhere; inside URLs every query value is hidden anyway.
MIN_QUERY_SECRET_LENGTH = 8
# Keys of a configuration entry whose values name things rather than hold them (an MCP stdio
# server's `args` are mostly paths: its secrets belong in `env`).
PLAIN_KEYS = frozenset({"transport", "command", "args", "cwd", "encoding", "encoding_error_handler"})

# Schemes are bounded in length so that long words cost linear time.
_URL_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]{0,30}://)[^/\s@'\"<>]+@")
_URL_QUERY_VALUE = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]{0,30}://[^\s'\"<>?#]*\?)(?P<query>[^\s'\"<>#]*)")
_QUERY_PAIR = re.compile(r"(?P<name>[^&=;]*)(?P<eq>=?)(?P<value>[^&;]*)")

_registered: set[str] = set()
_sources: list[Callable[[], Iterable[str]]] = []
_lock = threading.Lock()


def _mask_query(match: re.Match[str]) -> str:
    pairs = _QUERY_PAIR.sub(lambda pair: f"{pair['name']}={MASK}" if pair["eq"] else pair["name"], match["query"])
    return match["head"] + pairs


def secrets_in(config: Any) -> list[str]:
    """The values of a configuration entry (a mapping, list or string) that may be secret: every
    string except those under PLAIN_KEYS, and for URLs also their password and long query
    values (user names and the rest of a URL's userinfo and query are hidden by `redact`'s URL
    rules wherever a URL appears)."""
    found: list[str] = []

    def visit(value: Any, key: str | None) -> None:
        if isinstance(value, Mapping):
            for name, item in value.items():
                if str(name) not in PLAIN_KEYS:
                    visit(item, str(name))
        elif isinstance(value, list | tuple):
            for item in value:
                visit(item, key)
        elif isinstance(value, str) and value:
            found.append(value)
            if "://" in value:
                try:
                    parts = urlsplit(value)
                except ValueError:
                    return
                if parts.password:
                    found.append(parts.password)
                found.extend(
                    v for _, v in parse_qsl(parts.query, keep_blank_values=False) if len(v) >= MIN_QUERY_SECRET_LENGTH
                )

    visit(config, None)
    return [value for value in dict.fromkeys(found) if len(value) >= MIN_SECRET_LENGTH]


def register_secrets(values: Iterable[str]) -> None:
    """Have `redact` (and the log filter) hide these values from now on."""
    with _lock:
        _registered.update(v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH)


def add_secret_source(source: Callable[[], Iterable[str]]) -> None:
    """Have `redact` also hide the values `source()` returns when it runs: secrets that live
    for a while only, such as the credentials sent with a run request (tools/credentials.py)."""
    with _lock:
        if source not in _sources:
            _sources.append(source)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with the registered, the sources' and the given secrets, URL userinfo and URL
    query values replaced by `***`."""
    if not text:
        return text
    with _lock:
        values = set(_registered)
        sources = list(_sources)
    for source in sources:
        values.update(v for v in source() if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH)
    values.update(v for v in secrets if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH)
    for value in sorted(values, key=len, reverse=True):  # a whole URL before its parts
        if value in text:
            text = text.replace(value, MASK)
    if "://" not in text:
        return text
    text = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    return _URL_QUERY_VALUE.sub(_mask_query, text)


class RedactingFilter(logging.Filter):
    """A log filter applying `redact` to each record's message (formatted with its arguments;
    the values of structlog's event dicts) and to its traceback: a traceback that names a
    secret is replaced by its redacted text."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, dict):  # structlog's event dict: keep it a dict
            record.msg = {key: redact(v) if isinstance(v, str) else v for key, v in record.msg.items()}
        else:
            try:
                message = record.getMessage()
            except Exception:  # a broken record is the logging module's to report
                return True
            cleaned = redact(message)
            if cleaned != message:
                record.msg, record.args = cleaned, None
        if record.exc_info:
            text = logging.Formatter().formatException(record.exc_info)
            cleaned = redact(text)
            if cleaned != text:
                record.exc_info, record.exc_text = None, cleaned
                if isinstance(record.msg, dict):
                    record.msg = {**record.msg, "exception": cleaned}
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


_FILTER = RedactingFilter()
# Loggers of the libraries that print configured URLs (HTTP clients log every request's URL).
LIBRARY_LOGGERS = ("httpx", "httpcore", "mcp", "mcp.client.streamable_http", "mcp.client.sse", "mcp.client.stdio")


def configured_secrets() -> list[str]:
    """The secret settings' values (`SecretStr`), and the userinfo and query values of the URL
    settings (`*_URL`, `*_URI`)."""
    from pydantic import SecretStr

    from settings import VARIABLES, settings

    config = settings()
    found: list[str] = []
    for name in VARIABLES:
        value = getattr(config, name, None)
        if isinstance(value, SecretStr):
            found.append(value.get_secret_value())
        elif isinstance(value, str) and name.endswith(("_URL", "_URI")) and "://" in value:
            found.extend(secret for secret in secrets_in(value) if secret != value)
    return [value for value in found if len(value) >= MIN_SECRET_LENGTH]


def install_log_redaction() -> None:
    """Register the configured secrets and put the redacting filter on the root logger's
    handlers and on the loggers of the HTTP and MCP client libraries (idempotent)."""
    register_secrets(configured_secrets())
    targets: list[logging.Filterer] = [*logging.getLogger().handlers]
    targets += [logging.getLogger(name) for name in LIBRARY_LOGGERS]
    for target in targets:
        if _FILTER not in target.filters:
            target.addFilter(_FILTER)
