"""Credentials a client sends with one run request: a model key, an OpenAI-compatible base URL
and a web-search key (request headers `x-model-api-key`, `x-model-base-url`, `x-search-api-key`).

They are held in this process's memory only, for the run they came with:

- server/request_credentials.py takes the headers off the request before the LangGraph server
  sees it, checks them (`check_base_url`, AGENT_REQUEST_CREDENTIALS, AGENT_REQUEST_BASE_URLS),
  puts them in `HELD` under a random reference (`hold`) and hands the run that reference alone,
  in the request header `x-agent-credentials`; langgraph.json's `http.configurable_headers`
  copies it into the run's `config.configurable`.
- The model factory (graphs/runtime/models.py) and web search (tools/web_search.py) look the
  reference up (`current`) at each call of the run.

The reference is not a secret: it is stored with the run like every configurable value (run
record, checkpoint metadata), and is worth nothing outside this process or once its entry is
gone; a client cannot send one of its own (server/api_checks.py refuses it). The values
themselves are never written: not to the thread, its checkpoints, the run record or the log
(settings/redact.py hides the held values from every log record and the model errors a run
reports).

`HELD` is bounded: at most AGENT_REQUEST_CREDENTIALS_MAX entries (the least recently used
dropped first), each dropped AGENT_REQUEST_CREDENTIALS_TTL seconds after its request or the
run's last use of it. The holder is per process: a run must execute in the process that
received its request (`langgraph dev`; docs/configuration.md says what holds elsewhere).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from settings import settings
from settings.redact import add_secret_source
from tools.cache import TTLCache

HEADERS = {
    "model_api_key": "x-model-api-key",
    "model_base_url": "x-model-base-url",
    "search_api_key": "x-search-api-key",
}
"""The request headers, by RequestCredentials field."""
REF_HEADER = "x-agent-credentials"
"""The header (and `config.configurable` key) carrying a run's reference to its credentials."""
ANY_PUBLIC = "*"
"""AGENT_REQUEST_BASE_URLS entry: any http(s) URL whose host has public addresses only."""


@dataclass(frozen=True, repr=False)
class RequestCredentials:
    """One request's credentials. `base_url_listed`: the base URL matched an operator's
    AGENT_REQUEST_BASE_URLS entry (it may be private); otherwise every connection to it is
    checked to reach public addresses only (tools.net)."""

    model_api_key: str | None = None
    model_base_url: str | None = None
    search_api_key: str | None = None
    base_url_listed: bool = False

    @property
    def for_model(self) -> bool:
        return bool(self.model_api_key or self.model_base_url)

    def secrets(self) -> list[str]:
        """The values to hide wherever text could echo them."""
        return [value for value in (self.model_api_key, self.model_base_url, self.search_api_key) if value]

    def __repr__(self) -> str:  # never the values
        shown = ", ".join(f"{name}=***" for name in HEADERS if getattr(self, name))
        return f"RequestCredentials({shown})"


class CredentialsUnavailable(RuntimeError):
    """The run names per-request credentials this process no longer holds (expired, dropped, or
    the run executes in another process). A RuntimeError: the server shows its message."""


HELD: TTLCache[RequestCredentials] = TTLCache(max_entries=10000)
"""reference -> the credentials of one run request; bounded (AGENT_REQUEST_CREDENTIALS_MAX,
least recently used dropped first) and expiring AGENT_REQUEST_CREDENTIALS_TTL seconds after
their last use."""


def hold(credentials: RequestCredentials) -> str:
    """Keep `credentials` and return the new reference the run carries."""
    config = settings()
    reference = secrets.token_urlsafe(24)
    HELD.resize(config.AGENT_REQUEST_CREDENTIALS_MAX)
    HELD.set(reference, credentials, ttl=config.AGENT_REQUEST_CREDENTIALS_TTL)
    return reference


def lookup(reference: str) -> RequestCredentials | None:
    """The credentials under `reference` (their time renewed), or None when not held."""
    found = HELD.get(reference)
    if found is not None:
        HELD.set(reference, found, ttl=settings().AGENT_REQUEST_CREDENTIALS_TTL)
    return found


def current(config: Mapping[str, Any] | None = None) -> RequestCredentials | None:
    """The credentials of the run whose `config` is given (default: the running one's, through
    LangGraph's config context), or None when it has none. CredentialsUnavailable when the run
    names some that are no longer held."""
    if config is None:
        from langgraph.config import get_config

        try:
            config = get_config()
        except RuntimeError:  # outside a run
            return None
    reference = (config.get("configurable") or {}).get(REF_HEADER)
    if not reference:
        return None
    found = lookup(str(reference))
    if found is None:
        ttl = settings().AGENT_REQUEST_CREDENTIALS_TTL
        raise CredentialsUnavailable(
            "The credentials sent with this run's request (x-model-api-key, x-model-base-url, "
            "x-search-api-key) are no longer held by this server: they are kept in memory only, "
            f"for {ttl:g} s after the request or their last use, by the server process that received "
            "the request. Send the request again with its headers."
        )
    return found


def live_secrets() -> list[str]:
    """Every held value (for log redaction)."""
    return [value for credentials in HELD.values() for value in credentials.secrets()]


add_secret_source(live_secrets)


def _prefix_match(url: str, entry: str) -> bool:
    target, allowed = urlsplit(url), urlsplit(entry)
    if (target.scheme, target.hostname, target.port) != (allowed.scheme, allowed.hostname, allowed.port):
        return False
    base = allowed.path.rstrip("/")
    return target.path.rstrip("/") == base or target.path.startswith(base + "/")


def check_base_url(url: str) -> bool:
    """Check a requested base URL against the operator's policy: http(s), a host, no
    credentials in it, and an AGENT_REQUEST_BASE_URLS entry it starts with. True when an entry
    other than `*` lists it (it may then be private); False when only `*` admits it (the caller
    checks its addresses are public). ValueError saying why it is refused."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"x-model-base-url is not a valid URL: {exc}.") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError("x-model-base-url must be an http:// or https:// URL.")
    if not parts.hostname:
        raise ValueError("x-model-base-url has no host.")
    if parts.username or parts.password:
        raise ValueError("x-model-base-url must not carry credentials: send the key in x-model-api-key.")
    if port == 0:
        raise ValueError("x-model-base-url has an invalid port.")
    allowed = settings().AGENT_REQUEST_BASE_URLS or [ANY_PUBLIC]
    if any(entry != ANY_PUBLIC and _prefix_match(url, entry) for entry in allowed):
        return True
    if ANY_PUBLIC in allowed:
        return False
    raise ValueError("x-model-base-url is not one of the base URLs this server allows.")
