"""Long-term memory per user in LangGraph's store: save with dedupe, recall with weighted scoring.

Namespaces are `("memories", <user label>, kind)` with kind one of `episodic` (events,
experiences), `semantic` (facts and preferences, with a `category`), `profile` (one item, key
`"profile"`, a dict of fields) and `chat` (raw user/assistant messages). The user label is the
user id with `%` and `.` percent-encoded (LangGraph namespace labels cannot hold a period), so two
different ids never share a namespace. Only the value's `"text"` is embedded (`index=["text"]`).

`recall(..., scoring="weighted")` re-ranks a candidate pool from the vector index
(`top_k * MEMORY_CANDIDATE_FACTOR`) with the four ingredients of the design this follows:

    score = w_sim * relevance + w_imp * importance + w_rec * freshness
            + w_acc * min(access_count * step, cap)

`relevance` is the store's similarity divided by the best candidate's, so the similarity term
spans [0, 1] like the others instead of the narrow band raw cosine scores occupy. `freshness`
is the time decay `0.5 ** (days / half_life)`, by kind: an episodic event decays with its age
(from its last content update); a semantic fact does not age by itself but decays by how much
older it is than the newest memory of the same category whose similarity is within
MEMORY_SUPERSEDE_MARGIN of its own among the candidates (a newer statement of the same thing
wins, a lone durable fact keeps 1.0); chat turns decay with their age only when
MEMORY_CHAT_HALF_LIFE_DAYS is set. Candidates with the same text are returned once (the best
scored). `scoring="plain"` keeps the store's own `asearch` order.

Recalls bump `access_count` / `last_accessed_at` with `index=False` puts: both AsyncPostgresStore
(upsert of the row only, `store_vectors` untouched) and InMemoryStore keep the existing vector on
such an update; the text is unchanged, so the vector is still right.

Keyword, time-range, recent-activity listings and `forget_user` need predicates the store's
`asearch` filter cannot express (substring match, timestamp ranges, ordering by our timestamps).
On AsyncPostgresStore they run as one bounded SQL query on its `store` table, scoped to the
user's exact namespace prefixes; on any other BaseStore they scan the user's namespaces page by
page (at most MEMORY_SCAN_LIMIT items per kind) and filter in Python.

Every function validates all its input before writing anything and raises ValueError with the
accepted values or format.
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from langgraph.store.base import BaseStore, GetOp, Item, PutOp, SearchOp
from langgraph.store.postgres.aio import AsyncPostgresStore
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from store.clean import strip_nul

ROOT = "memories"
KINDS = ("episodic", "semantic", "profile", "chat")
MEMORY_KINDS = ("episodic", "semantic")
TEXT_KINDS = ("episodic", "semantic", "chat")
CATEGORIES = ("preference", "fact", "skill", "relationship", "goal", "other")
ROLES = ("user", "assistant")
SOURCES = ("tool", "extraction", "chat")
SCORINGS = ("weighted", "plain")
PROFILE_KEY = "profile"

MAX_LIMIT = 100
MAX_POOL = 200
SCAN_PAGE = 100
MAX_KEYWORDS = 20
MAX_KEYWORD_CHARS = 100
MAX_PROFILE_FIELDS = 100
MAX_PROFILE_KEY_CHARS = 64
MAX_PROFILE_VALUE_CHARS = 1000
MAX_ID_CHARS = 256
PROFILE_FACTS_PER_CATEGORY = 10
PROFILE_FACTS_SCANNED = 50
DATE_FORMAT_HELP = "ISO 8601: 'YYYY-MM-DD' or 'YYYY-MM-DDTHH:MM[:SS][+HH:MM]' (UTC when no offset)"


@dataclass(frozen=True)
class MemoryConfig:
    """Memory settings, read from the environment by `memory_config()`."""

    dedupe_threshold: float = 0.9
    half_life_days: float = 30.0
    chat_half_life_days: float = 0.0
    supersede_margin: float = 0.1
    ttl_days: float | None = None
    max_text_chars: int = 8000
    weight_similarity: float = 0.6
    weight_importance: float = 0.2
    weight_recency: float = 0.1
    weight_access: float = 0.1
    access_step: float = 0.1
    access_cap: float = 0.5
    candidate_factor: int = 5
    scan_limit: int = 5000


_ENV_FIELDS = {
    "MEMORY_DEDUPE_THRESHOLD": ("dedupe_threshold", float),
    "MEMORY_HALF_LIFE_DAYS": ("half_life_days", float),
    "MEMORY_CHAT_HALF_LIFE_DAYS": ("chat_half_life_days", float),
    "MEMORY_SUPERSEDE_MARGIN": ("supersede_margin", float),
    "MEMORY_TTL_DAYS": ("ttl_days", float),
    "MEMORY_MAX_TEXT_CHARS": ("max_text_chars", int),
    "MEMORY_WEIGHT_SIMILARITY": ("weight_similarity", float),
    "MEMORY_WEIGHT_IMPORTANCE": ("weight_importance", float),
    "MEMORY_WEIGHT_RECENCY": ("weight_recency", float),
    "MEMORY_WEIGHT_ACCESS": ("weight_access", float),
    "MEMORY_ACCESS_STEP": ("access_step", float),
    "MEMORY_ACCESS_CAP": ("access_cap", float),
    "MEMORY_CANDIDATE_FACTOR": ("candidate_factor", int),
    "MEMORY_SCAN_LIMIT": ("scan_limit", int),
}


def memory_config() -> MemoryConfig:
    """Read the MEMORY_* variables (unset or empty: the default; MEMORY_TTL_DAYS 0: no TTL;
    MEMORY_CHAT_HALF_LIFE_DAYS 0: chat turns do not decay)."""
    values: dict[str, Any] = {}
    for env, (name, kind) in _ENV_FIELDS.items():
        raw = os.environ.get(env, "").strip()
        if not raw:
            continue
        try:
            values[name] = kind(raw)
        except ValueError:
            raise ValueError(f"{env}={raw!r} is not a valid {kind.__name__}") from None
        if not math.isfinite(values[name]) or values[name] < 0:
            raise ValueError(f"{env}={raw!r} must be a finite number >= 0")
    config = MemoryConfig(**values)
    if not 0 < config.dedupe_threshold <= 1:
        raise ValueError("MEMORY_DEDUPE_THRESHOLD must be in (0, 1]")
    if config.half_life_days <= 0:
        raise ValueError("MEMORY_HALF_LIFE_DAYS must be > 0")
    if config.max_text_chars < 1 or config.candidate_factor < 1 or config.scan_limit < 1:
        raise ValueError(
            "MEMORY_MAX_TEXT_CHARS, MEMORY_CANDIDATE_FACTOR and MEMORY_SCAN_LIMIT must be >= 1"
        )
    if config.ttl_days == 0:
        config = MemoryConfig(**{**config.__dict__, "ttl_days": None})
    return config


# ---------------------------------------------------------------- scoring


def recency_factor(age_days: float, half_life_days: float) -> float:
    """1.0 for a fresh memory, halving every `half_life_days` (future timestamps count as 0)."""
    return 0.5 ** (max(age_days, 0.0) / half_life_days)


def access_boost(access_count: int, config: MemoryConfig) -> float:
    """`min(access_count * step, cap)`: frequently recalled memories rank a little higher."""
    return min(max(access_count, 0) * config.access_step, config.access_cap)


def relevance(similarity: float, best_similarity: float) -> float:
    """Similarity relative to the best candidate's: 1.0 for the best, 0 for similarity <= 0."""
    return max(similarity, 0.0) / best_similarity if best_similarity > 0 else 0.0


def freshness(kind: str, age_days: float, outdated_days: float, config: MemoryConfig) -> float:
    """Time decay by kind: an event fades with its age; a semantic fact with `outdated_days`,
    how much older it is than the newest comparable fact (0 while it is the newest); a chat
    turn with its age only when MEMORY_CHAT_HALF_LIFE_DAYS is set."""
    if kind == "semantic":
        return recency_factor(outdated_days, config.half_life_days)
    if kind == "chat":
        half_life = config.chat_half_life_days
        return recency_factor(age_days, half_life) if half_life else 1.0
    return recency_factor(age_days, config.half_life_days)


def weighted_score(
    relevance: float, importance: float, freshness: float, access_count: int, config: MemoryConfig
) -> float:
    """The weighted recall score: relevance, importance, freshness and access frequency."""
    return (
        config.weight_similarity * relevance
        + config.weight_importance * importance
        + config.weight_recency * freshness
        + config.weight_access * access_boost(access_count, config)
    )


def rank_weighted(
    hits: list[Item], kind: str, config: MemoryConfig, now: datetime
) -> list[tuple[Item, float]]:
    """The candidates ordered by `weighted_score`, best first, each text once."""
    best = max((hit.score or 0.0 for hit in hits), default=0.0)
    scored = []
    for hit in hits:
        outdated = _outdated_days(hit, hits, config, now) if kind == "semantic" else 0.0
        score = weighted_score(
            relevance(hit.score or 0.0, best),
            float(hit.value.get("importance", 0.5)),
            freshness(kind, _age_days(hit.value, now), outdated, config),
            int(hit.value.get("access_count", 0)),
            config,
        )
        scored.append((score, hit.score or 0.0, _written_at(hit.value, now), hit))
    scored.sort(key=lambda entry: entry[:3], reverse=True)
    seen: set[str] = set()
    ranked = []
    for score, _, _, hit in scored:
        if hit.value.get("text") not in seen:
            seen.add(hit.value.get("text"))
            ranked.append((hit, score))
    return ranked


def _outdated_days(hit: Item, hits: list[Item], config: MemoryConfig, now: datetime) -> float:
    """How much older `hit` is than the newest comparable candidate: same category, similarity
    at least its own minus MEMORY_SUPERSEDE_MARGIN (0 when it is the newest)."""
    floor = (hit.score or 0.0) - config.supersede_margin
    written = _written_at(hit.value, now)
    newest = max(
        (
            _written_at(other.value, now)
            for other in hits
            if other.value.get("category") == hit.value.get("category")
            and (other.score or 0.0) >= floor
        ),
        default=written,
    )
    return max((newest - written).total_seconds() / 86400, 0.0)


# ---------------------------------------------------------------- time and validation


def _now() -> datetime:
    return datetime.now(UTC)


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def _parse_stamp(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def _written_at(value: dict, now: datetime) -> datetime:
    return _parse_stamp(value.get("updated_at") or value.get("created_at")) or now


def _age_days(value: dict, now: datetime) -> float:
    return (now - _written_at(value, now)).total_seconds() / 86400


def _expired(value: dict, now: datetime) -> bool:
    expires = _parse_stamp(value.get("expires_at"))
    return expires is not None and expires <= now


def _user_label(user_id: Any) -> str:
    if not isinstance(user_id, str) or not user_id.strip():
        raise ValueError("user_id must be a non-empty string")
    if len(user_id) > MAX_ID_CHARS:
        raise ValueError(f"user_id is longer than {MAX_ID_CHARS} characters")
    return user_id.replace("%", "%25").replace(".", "%2E")


def user_prefix(user_id: str) -> tuple[str, str]:
    """The namespace prefix under which all of one user's memories live."""
    return (ROOT, _user_label(user_id))


def namespace(user_id: str, kind: str) -> tuple[str, str, str]:
    """The store namespace of one user's memories of one kind."""
    return (*user_prefix(user_id), _choice(kind, KINDS, "kind"))


def _choice(value: Any, allowed: Sequence[str], name: str) -> str:
    if value not in allowed:
        raise ValueError(f"Unknown {name} {value!r}; valid: {', '.join(allowed)}")
    return value


def _text(text: Any, config: MemoryConfig, name: str = "text") -> str:
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{name} must be a non-empty string")
    if len(text) > config.max_text_chars:
        raise ValueError(
            f"{name} has {len(text)} characters; the limit is {config.max_text_chars} "
            "(MEMORY_MAX_TEXT_CHARS). Save a shorter summary."
        )
    return text.strip()


def _limit(value: Any, name: str = "limit", maximum: int = MAX_LIMIT) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise ValueError(f"{name} must be an integer from 1 to {maximum}, got {value!r}")
    return value


def _importance(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"importance must be a number from 0 to 1, got {value!r}")
    return float(value)


def _category(kind: str, category: Any) -> str | None:
    if kind != "semantic":
        if category is not None:
            raise ValueError("category applies to semantic memories only")
        return None
    return _choice(category if category is not None else "other", CATEGORIES, "category")


def _optional_id(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_ID_CHARS:
        raise ValueError(f"{name} must be a non-empty string of at most {MAX_ID_CHARS} characters")
    return value


def _keywords(keywords: Any) -> list[str]:
    if isinstance(keywords, str) or not isinstance(keywords, (list, tuple)):
        raise ValueError("keywords must be a list of strings, e.g. ['meeting', 'project']")
    cleaned = [k.strip() for k in keywords if isinstance(k, str) and k.strip()]
    if len(cleaned) != len(keywords) or not cleaned:
        raise ValueError("keywords must be a non-empty list of non-empty strings")
    if len(cleaned) > MAX_KEYWORDS or any(len(k) > MAX_KEYWORD_CHARS for k in cleaned):
        raise ValueError(
            f"at most {MAX_KEYWORDS} keywords of at most {MAX_KEYWORD_CHARS} characters each"
        )
    return list(dict.fromkeys(cleaned))


def _result(item: Item, score: float | None, **extra: Any) -> dict:
    return {"id": item.key, **item.value, "score": score, **extra}


# ---------------------------------------------------------------- writes


def _ttl_minutes(store: BaseStore, value: dict, config: MemoryConfig) -> float | None:
    # The row's expiry follows the value's `expires_at` by the real clock, so a write with an
    # overridden `now` (imports, replays) expires in the store when the value says it does.
    expires = _parse_stamp(value.get("expires_at"))
    if not (config.ttl_days and store.supports_ttl and expires):
        return None
    return (expires - _now()).total_seconds() / 60


def _with_expiry(value: dict, config: MemoryConfig, now: datetime) -> dict:
    if config.ttl_days:
        return {**value, "expires_at": _stamp(now + timedelta(days=config.ttl_days))}
    return value


def _put_op(
    store: BaseStore, ns: tuple, key: str, value: dict, reindex: bool, config: MemoryConfig
) -> PutOp:
    # index=False keeps the stored vector (Postgres upserts the row only); used when the
    # text did not change.
    index = ["text"] if reindex else False
    return PutOp(ns, key, strip_nul(value), index=index, ttl=_ttl_minutes(store, value, config))


async def save_memory(
    store: BaseStore,
    user_id: str,
    kind: str,
    text: str,
    *,
    category: str | None = None,
    importance: float = 0.5,
    source: str = "tool",
    thread_id: str | None = None,
    keywords: list[str] | None = None,
    now: datetime | None = None,
) -> dict:
    """Save an episodic or semantic memory, or update a near-duplicate of it.

    An existing memory of the same kind (and category) whose similarity to `text` is at least
    MEMORY_DEDUPE_THRESHOLD is updated instead: text replaced, importance = max(old, new),
    `updated_at` bumped. Returns the memory with `"action": "created" | "updated"`
    (an update also carries `similarity` and `previous_text`). `now` overrides the clock for
    imports and replays.
    """
    config = memory_config()
    ns = namespace(user_id, _choice(kind, MEMORY_KINDS, "kind"))
    text = _text(text, config)
    category = _category(kind, category)
    importance = _importance(importance)
    source = _choice(source, SOURCES, "source")
    thread_id = _optional_id(thread_id, "thread_id")
    keywords = _keywords(keywords) if keywords else None
    now = now or _now()
    stamp = _stamp(now)

    hits = await store.asearch(
        ns, query=text, filter={"category": category} if category else None, limit=3,
        refresh_ttl=False,
    )
    duplicate = next((h for h in hits if not _expired(h.value, now)), None)
    if duplicate and (duplicate.score or 0) >= config.dedupe_threshold:
        old = duplicate.value
        value = {
            **old,
            "text": text,
            "importance": max(float(old.get("importance", 0)), importance),
            "updated_at": stamp,
            "source": source,
        }
        if thread_id:
            value["thread_id"] = thread_id
        if keywords:
            value["keywords"] = list(dict.fromkeys([*(old.get("keywords") or []), *keywords]))
        value = _with_expiry(value, config, now)
        reindex = text != old.get("text")
        await store.abatch([_put_op(store, ns, duplicate.key, value, reindex, config)])
        return {
            "id": duplicate.key, **value, "action": "updated",
            "similarity": duplicate.score, "previous_text": old.get("text"),
        }

    value = {
        "text": text,
        "kind": kind,
        **({"category": category} if category else {}),
        "importance": importance,
        "created_at": stamp,
        "updated_at": stamp,
        "last_accessed_at": None,
        "access_count": 0,
        "source": source,
        **({"thread_id": thread_id} if thread_id else {}),
        **({"keywords": keywords} if keywords else {}),
    }
    value = _with_expiry(value, config, now)
    key = str(uuid.uuid4())
    await store.abatch([_put_op(store, ns, key, value, True, config)])
    return {"id": key, **value, "action": "created"}


async def record_chat_message(
    store: BaseStore,
    user_id: str,
    role: str,
    text: str,
    thread_id: str | None,
    *,
    now: datetime | None = None,
) -> dict:
    """Append one raw chat message to the user's history (no dedupe).

    Text longer than MEMORY_MAX_TEXT_CHARS is cut to that length and marked `"truncated": true`
    (a chat log keeps what it can rather than refusing the turn).
    """
    config = memory_config()
    ns = namespace(user_id, "chat")
    role = _choice(role, ROLES, "role")
    if not isinstance(text, str) or not text.strip():
        raise ValueError("text must be a non-empty string")
    thread_id = _optional_id(thread_id, "thread_id")
    truncated = len(text) > config.max_text_chars
    stamp = _stamp(now or _now())
    value = {
        "text": text[: config.max_text_chars].strip(),
        "kind": "chat",
        "role": role,
        "importance": 0.5,
        "created_at": stamp,
        "updated_at": stamp,
        "last_accessed_at": None,
        "access_count": 0,
        "source": "chat",
        **({"thread_id": thread_id} if thread_id else {}),
        **({"truncated": True} if truncated else {}),
    }
    value = _with_expiry(value, config, now or _now())
    key = str(uuid.uuid4())
    await store.abatch([_put_op(store, ns, key, value, True, config)])
    return {"id": key, **value}


def _profile_fields(fields: Any) -> dict[str, str | None]:
    if not isinstance(fields, dict) or not fields:
        raise ValueError("fields must be a non-empty dict of field name -> text (None removes)")
    checked: dict[str, str | None] = {}
    for name, value in fields.items():
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_PROFILE_KEY_CHARS:
            raise ValueError(
                f"profile field names must be non-empty strings of at most "
                f"{MAX_PROFILE_KEY_CHARS} characters, got {name!r}"
            )
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        too_long = isinstance(value, str) and len(value) > MAX_PROFILE_VALUE_CHARS
        if value is not None and (not isinstance(value, str) or too_long):
            raise ValueError(
                f"profile field {name!r} must be text of at most {MAX_PROFILE_VALUE_CHARS} "
                "characters, or None to remove it"
            )
        checked[name.strip()] = value.strip() if isinstance(value, str) else None
    return checked


async def update_profile(
    store: BaseStore, user_id: str, fields: dict, *, now: datetime | None = None
) -> dict:
    """Merge `fields` into the user's profile (a value None removes that field); returns it."""
    config = memory_config()
    ns = namespace(user_id, "profile")
    changes = _profile_fields(fields)
    current = await store.aget(ns, PROFILE_KEY, refresh_ttl=False)
    now = now or _now()
    stamp = _stamp(now)
    old = current.value if current and not _expired(current.value, now) else {}
    merged = {**(old.get("fields") or {}), **changes}
    merged = {name: value for name, value in merged.items() if value is not None}
    if len(merged) > MAX_PROFILE_FIELDS:
        raise ValueError(f"a profile holds at most {MAX_PROFILE_FIELDS} fields")
    value = {
        "text": "; ".join(f"{name}: {text}" for name, text in merged.items()),
        "kind": "profile",
        "fields": merged,
        "importance": 1.0,
        "created_at": old.get("created_at") or stamp,
        "updated_at": stamp,
        "last_accessed_at": old.get("last_accessed_at"),
        "access_count": old.get("access_count", 0),
        "source": "tool",
    }
    value = _with_expiry(value, config, now)
    await store.abatch([_put_op(store, ns, PROFILE_KEY, value, False, config)])
    return {"id": PROFILE_KEY, **value, "score": None}


async def delete_memory(store: BaseStore, user_id: str, memory_id: str) -> dict:
    """Delete one memory of this user by id (any kind). Never touches another user's items.

    Returns `{"id", "deleted": bool, "kind"}` (`kind` None when nothing was found).
    """
    labels = [namespace(user_id, kind) for kind in KINDS]
    memory_id = _optional_id(memory_id, "memory_id")
    if memory_id is None:
        raise ValueError("memory_id must be a non-empty string")
    found = await store.abatch([GetOp(ns, memory_id, False) for ns in labels])
    for ns, item in zip(labels, found, strict=True):
        if item is not None:
            await store.adelete(ns, memory_id)
            return {"id": memory_id, "deleted": True, "kind": ns[2]}
    return {"id": memory_id, "deleted": False, "kind": None}


async def forget_user(store: BaseStore, user_id: str) -> int:
    """Delete every memory, profile and chat message of the user; returns how many items."""
    prefix = user_prefix(user_id)
    if isinstance(store, AsyncPostgresStore):
        joined = ".".join(prefix)
        async with _pg_cursor(store) as cur:
            await cur.execute(
                "DELETE FROM store WHERE prefix = %s OR prefix LIKE %s",
                (joined, f"{_escape_like(joined)}.%"),
            )
            return cur.rowcount
    deleted = 0
    for ns in await store.alist_namespaces(prefix=prefix, limit=1000):
        while items := await store.asearch(ns, limit=SCAN_PAGE, refresh_ttl=False):
            await store.abatch([PutOp(item.namespace, item.key, None) for item in items])
            deleted += len(items)
    return deleted


# ---------------------------------------------------------------- reads


async def recall(
    store: BaseStore,
    user_id: str,
    query: str,
    kind: str,
    *,
    top_k: int = 5,
    category: str | None = None,
    role: str | None = None,
    scoring: str = "weighted",
    record_access: bool = True,
    now: datetime | None = None,
) -> list[dict]:
    """Semantic search over one kind of the user's memories (episodic, semantic or chat).

    `scoring="weighted"` re-ranks `top_k * MEMORY_CANDIDATE_FACTOR` vector candidates with
    `rank_weighted`; `"plain"` keeps the store's similarity order (duplicates included). Each
    result carries `score` (the ranking score) and `similarity` (the store's). With
    `record_access`, the returned memories get `access_count + 1` and `last_accessed_at` = now
    (the vector is kept).
    """
    config = memory_config()
    ns = namespace(user_id, _choice(kind, TEXT_KINDS, "kind"))
    query = _text(query, config, "query")
    top_k = _limit(top_k, "top_k")
    scoring = _choice(scoring, SCORINGS, "scoring")
    if category is not None and kind != "semantic":
        raise ValueError("category applies to semantic memories only")
    if category is not None:
        _choice(category, CATEGORIES, "category")
    if role is not None and kind != "chat":
        raise ValueError("role applies to chat history only")
    if role is not None:
        _choice(role, ROLES, "role")
    now = now or _now()

    wanted = {k: v for k, v in (("category", category), ("role", role)) if v is not None}
    pool = min(top_k * config.candidate_factor, MAX_POOL)
    hits = await store.asearch(
        ns, query=query, filter=wanted or None, limit=pool, refresh_ttl=False
    )
    hits = [hit for hit in hits if not _expired(hit.value, now)]
    if scoring == "weighted":
        ranked = rank_weighted(hits, kind, config, now)
    else:
        ranked = [(hit, hit.score or 0.0) for hit in hits]
    ranked = ranked[:top_k]
    if record_access and ranked:
        ranked = await _record_access(store, ranked, config, now)
    return [_result(hit, score, similarity=hit.score) for hit, score in ranked]


async def _record_access(
    store: BaseStore, ranked: list[tuple[Item, float]], config: MemoryConfig, now: datetime
) -> list[tuple[Item, float]]:
    touched, ops = [], []
    for hit, score in ranked:
        value = {
            **hit.value,
            "access_count": int(hit.value.get("access_count", 0)) + 1,
            "last_accessed_at": _stamp(now),
        }
        value = _with_expiry(value, config, now)
        ops.append(_put_op(store, hit.namespace, hit.key, value, False, config))
        hit.value = value
        touched.append((hit, score))
    await store.abatch(ops)
    return touched


def _kinds_for(memory_type: str) -> tuple[str, ...]:
    memory_type = _choice(memory_type, (*TEXT_KINDS, "all"), "memory_type")
    return TEXT_KINDS if memory_type == "all" else (memory_type,)


async def keyword_search(
    store: BaseStore,
    user_id: str,
    keywords: list[str],
    memory_type: str = "all",
    limit: int = 10,
) -> list[dict]:
    """Memories whose text contains ANY of the keywords (case-insensitive substring).

    `memory_type`: episodic, semantic, chat, or all (the three). Ranked by how many keywords
    match, then newest first; `score` = matched keywords / keywords, `matched_keywords` lists them.
    """
    kinds = _kinds_for(memory_type)
    keywords = _keywords(keywords)
    limit = _limit(limit)
    items = await _list_items(store, user_id, kinds, limit=limit, keywords=keywords)
    results = []
    for item in items:
        haystack = _haystack(item.value).casefold()
        matched = [k for k in keywords if k.casefold() in haystack]
        results.append(_result(item, len(matched) / len(keywords), matched_keywords=matched))
    return results


def _haystack(value: dict) -> str:
    return f"{value.get('text', '')} {' '.join(value.get('keywords') or [])}"


def _parse_when(text: Any, name: str, end: bool) -> datetime | None:
    if text is None or text == "":
        return None
    if not isinstance(text, str):
        raise ValueError(f"{name} must be a string in {DATE_FORMAT_HELP}")
    try:
        if len(text.strip()) == 10:
            day = date.fromisoformat(text.strip())
            moment = datetime(day.year, day.month, day.day, tzinfo=UTC)
            return moment + timedelta(days=1) if end else moment
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{name}={text!r} is not a valid date; use {DATE_FORMAT_HELP}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def resolve_time_range(
    start_date: str | None = None,
    end_date: str | None = None,
    days_ago: int | None = None,
    *,
    now: datetime | None = None,
) -> tuple[datetime | None, datetime | None]:
    """The [start, end) range for `time_filter`. A date-only `end_date` includes that whole day;
    `days_ago` N means from N days before now. Raises ValueError on bad or contradictory input."""
    start = _parse_when(start_date, "start_date", end=False)
    end = _parse_when(end_date, "end_date", end=True)
    if days_ago is not None:
        valid = isinstance(days_ago, int) and not isinstance(days_ago, bool)
        if not valid or not 0 <= days_ago <= 36500:
            raise ValueError(f"days_ago must be an integer from 0 to 36500, got {days_ago!r}")
        if start is not None:
            raise ValueError("give either start_date or days_ago, not both")
        start = (now or _now()) - timedelta(days=days_ago)
    if start is None and end is None:
        raise ValueError(
            "give start_date, end_date or days_ago (for the latest items use recent activity)"
        )
    if start is not None and end is not None and start >= end:
        raise ValueError(f"start_date ({_stamp(start)}) must be before end_date ({_stamp(end)})")
    return start, end


async def time_filter(
    store: BaseStore,
    user_id: str,
    start_date: str | None = None,
    end_date: str | None = None,
    days_ago: int | None = None,
    limit: int = 10,
    *,
    now: datetime | None = None,
) -> list[dict]:
    """Episodic and semantic memories created within a time range, newest first.

    Dates are ISO 8601 (see `resolve_time_range`); `score` is the recency factor
    0.5 ** (age_days / MEMORY_HALF_LIFE_DAYS).
    """
    _user_label(user_id)
    start, end = resolve_time_range(start_date, end_date, days_ago, now=now)
    limit = _limit(limit)
    now = now or _now()
    items = await _list_items(store, user_id, MEMORY_KINDS, limit=limit, start=start, end=end)
    half_life = memory_config().half_life_days
    return [_result(item, recency_factor(_age_days(item.value, now), half_life)) for item in items]


async def recent_activity(
    store: BaseStore, user_id: str, limit: int = 10, *, now: datetime | None = None
) -> list[dict]:
    """The latest created or updated episodic and semantic memories, newest `updated_at` first;
    `score` is the recency factor."""
    limit = _limit(limit)
    now = now or _now()
    items = await _list_items(store, user_id, MEMORY_KINDS, limit=limit, order="updated_at")
    half_life = memory_config().half_life_days
    return [_result(item, recency_factor(_age_days(item.value, now), half_life)) for item in items]


async def get_profile(
    store: BaseStore, user_id: str, categories: list[str] | None = None
) -> dict:
    """The user's structured profile plus their semantic facts grouped by category.

    Returns `{"fields": {...}, "created_at", "updated_at", "facts": {category: [memory, ...]}}`,
    up to 10 facts per category, most important first (`score` = importance), chosen among the
    50 most recently written of that category. `categories` limits the categories (None: all).
    """
    profile_ns = namespace(user_id, "profile")
    semantic_ns = namespace(user_id, "semantic")
    if categories is None:
        wanted = list(CATEGORIES)
    elif isinstance(categories, (list, tuple)) and not isinstance(categories, str):
        wanted = [_choice(c, CATEGORIES, "category") for c in dict.fromkeys(categories)]
    else:
        raise ValueError(f"categories must be a list of: {', '.join(CATEGORIES)}")
    ops = [GetOp(profile_ns, PROFILE_KEY, False)] + [
        SearchOp(semantic_ns, {"category": c}, PROFILE_FACTS_SCANNED, 0, None, False)
        for c in wanted
    ]
    profile, *per_category = await store.abatch(ops)
    now = _now()
    value = profile.value if profile and not _expired(profile.value, now) else {}
    facts = {}
    for category, items in zip(wanted, per_category, strict=True):
        live = [item for item in items if not _expired(item.value, now)]
        live.sort(key=_importance_then_recency, reverse=True)
        facts[category] = [
            _result(item, float(item.value.get("importance", 0)))
            for item in live[:PROFILE_FACTS_PER_CATEGORY]
        ]
    return {
        "fields": value.get("fields") or {},
        "created_at": value.get("created_at"),
        "updated_at": value.get("updated_at"),
        "facts": facts,
    }


def _importance_then_recency(item: Item) -> tuple[float, str]:
    return float(item.value.get("importance", 0)), item.value.get("updated_at") or ""


# ---------------------------------------------------------------- listing backends


async def _list_items(
    store: BaseStore,
    user_id: str,
    kinds: Iterable[str],
    *,
    limit: int,
    keywords: list[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    order: str = "created_at",
) -> list[Item]:
    """Items of the user's `kinds` matching ANY keyword and the [start, end) range on
    `created_at`, ordered by matched keyword count (when keywords are given), then `order`
    newest first, at most `limit`."""
    namespaces = [namespace(user_id, kind) for kind in kinds]
    if isinstance(store, AsyncPostgresStore):
        return await _pg_list_items(store, namespaces, limit, keywords, start, end, order)
    config = memory_config()
    now = _now()
    candidates: list[tuple[int, Item]] = []
    for ns in namespaces:
        for item in await _scan(store, ns, config.scan_limit):
            value = item.value
            if _expired(value, now):
                continue
            created = _parse_stamp(value.get("created_at"))
            if not _within(created, start, end):
                continue
            matched = 0
            if keywords:
                haystack = _haystack(value).casefold()
                matched = sum(k.casefold() in haystack for k in keywords)
                if not matched:
                    continue
            candidates.append((matched, item))
    oldest = datetime.min.replace(tzinfo=UTC)
    candidates.sort(
        key=lambda pair: (pair[0], _parse_stamp(pair[1].value.get(order)) or oldest), reverse=True
    )
    return [item for _, item in candidates[:limit]]


def _within(moment: datetime | None, start: datetime | None, end: datetime | None) -> bool:
    if start is None and end is None:
        return True
    if moment is None:
        return False
    return (start is None or moment >= start) and (end is None or moment < end)


async def _scan(store: BaseStore, ns: tuple, max_items: int) -> list[Item]:
    items: list[Item] = []
    while len(items) < max_items:
        page = await store.asearch(ns, limit=SCAN_PAGE, offset=len(items), refresh_ttl=False)
        items.extend(page)
        if len(page) < SCAN_PAGE:
            break
    return items[:max_items]


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


@asynccontextmanager
async def _pg_cursor(store: AsyncPostgresStore) -> AsyncIterator[Any]:
    if isinstance(store.conn, AsyncConnectionPool):
        async with store.conn.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            yield cur
    else:
        async with store.conn.cursor(row_factory=dict_row) as cur:
            yield cur


async def _pg_list_items(
    store: AsyncPostgresStore,
    namespaces: list[tuple],
    limit: int,
    keywords: list[str] | None,
    start: datetime | None,
    end: datetime | None,
    order: str,
) -> list[Item]:
    haystack = "coalesce(value->>'text', '') || ' ' || coalesce(value->>'keywords', '')"
    where = ["prefix = ANY(%(prefixes)s)", "(expires_at IS NULL OR expires_at > NOW())"]
    params: dict[str, Any] = {"prefixes": [".".join(ns) for ns in namespaces], "limit": limit}
    ranking = ""
    if keywords:
        params["patterns"] = [f"%{_escape_like(k)}%" for k in keywords]
        where.append(f"{haystack} ILIKE ANY(%(patterns)s)")
        ranking = (
            f"(SELECT count(*) FROM unnest(%(patterns)s::text[]) AS p(pattern) "
            f"WHERE {haystack} ILIKE p.pattern) DESC, "
        )
    if start is not None:
        where.append("(value->>'created_at')::timestamptz >= %(start)s")
        params["start"] = start
    if end is not None:
        where.append("(value->>'created_at')::timestamptz < %(end)s")
        params["end"] = end
    order_column = {"created_at": "created_at", "updated_at": "updated_at"}[order]
    sql = (
        "SELECT prefix, key, value, created_at, updated_at FROM store WHERE "
        + " AND ".join(where)
        + f" ORDER BY {ranking}(value->>'{order_column}')::timestamptz DESC NULLS LAST, key"
        + " LIMIT %(limit)s"
    )
    async with _pg_cursor(store) as cur:
        await cur.execute(sql, params)
        rows = await cur.fetchall()
    now = _now()
    return [
        Item(
            value=row["value"],
            key=row["key"],
            namespace=tuple(row["prefix"].split(".")),
            created_at=row["created_at"],
            updated_at=row["updated_at"],
        )
        for row in rows
        if not _expired(row["value"], now)
    ]
