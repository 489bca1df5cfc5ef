"""Long-term memory per user in LangGraph's store: save with dedupe, hybrid recall, weighted scoring.

Namespaces are `("memories", <user label>, kind)` with kind one of `episodic` (events,
experiences), `semantic` (facts and preferences, with a `category`), `profile` (one item, key
`"profile"`, a dict of fields) and `chat` (raw user/assistant messages). The user label is the
user id with `%` and `.` percent-encoded (LangGraph namespace labels cannot hold a period), so two
different ids never share a namespace. Only the value's `"text"` is embedded (`index=["text"]`).

`recall` searches hybrid by default (the pipeline of store/hybrid.py, `hybrid.py` here: vectors, BM25 over the project's
`memory_fulltext` table, and the memories written in a time range the query names, fused by
`store.fusion.fuse`; MEMORY_SEARCH=dense: vectors only) and keeps that order
(MEMORY_SCORING=plain, the default). `recall(..., scoring="weighted")` re-ranks a candidate pool
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
They go through the store's backend (store/backend.py): on the store `store.postgres.store()`
builds, one bounded SQL query of `store/sql/`, scoped to the user's exact namespace prefixes; on
any other BaseStore, a scan of the user's namespaces page by page (at most MEMORY_SCAN_LIMIT items
per kind) filtered in Python.

Every function validates all its input before writing anything and raises ValueError with the
accepted values or format.

Modules by job: `config` (constants, MEMORY_* settings), `times` (clock, stamps, time ranges),
`validate` (input checks, namespaces), `scoring` (the weighted score), `write`, `read`,
`hybrid` (the memories as a corpus of store/hybrid.py), `attributes` (each person's
person/attribute index, fed by chat messages and the memories learnt from them), `space`
(`open(store, user_id)`: one user's memories as a handle, the settings read once; every caller
goes through one).
"""

from store.dates import DATE_FORMAT_HELP
from store.memory.config import (
    ASSISTANT_SPEAKER,
    CATEGORIES,
    KINDS,
    MAX_ID_CHARS,
    MAX_KEYWORD_CHARS,
    MAX_KEYWORDS,
    MAX_LIMIT,
    MAX_POOL,
    MAX_PROFILE_FIELDS,
    MAX_PROFILE_KEY_CHARS,
    MAX_PROFILE_VALUE_CHARS,
    MEMORY_KINDS,
    PROFILE_FACTS_PER_CATEGORY,
    PROFILE_FACTS_SCANNED,
    PROFILE_KEY,
    RECALLED_TURN_CHARS,
    RECALLED_TURNS,
    ROLES,
    ROOT,
    SCAN_PAGE,
    SCORINGS,
    SOURCES,
    TEXT_KINDS,
    MemoryConfig,
    memory_config,
)
from store.memory.read import (
    get_profile,
    keyword_search,
    recall,
    recent_activity,
    time_filter,
)
from store.memory.scoring import (
    access_boost,
    freshness,
    rank_weighted,
    recency_factor,
    relevance,
    weighted_score,
)
from store.memory.space import MemorySpace, open
from store.memory.times import resolve_time_range
from store.memory.validate import namespace, user_prefix
from store.memory.write import (
    delete_memory,
    forget_user,
    rebuild_aspects,
    rebuild_passages,
    rebuild_people,
    record_chat_message,
    save_memory,
    update_profile,
)

__all__ = [
    "ASSISTANT_SPEAKER",
    "CATEGORIES",
    "DATE_FORMAT_HELP",
    "KINDS",
    "MAX_ID_CHARS",
    "MAX_KEYWORDS",
    "MAX_KEYWORD_CHARS",
    "MAX_LIMIT",
    "MAX_POOL",
    "MAX_PROFILE_FIELDS",
    "MAX_PROFILE_KEY_CHARS",
    "MAX_PROFILE_VALUE_CHARS",
    "MEMORY_KINDS",
    "PROFILE_FACTS_PER_CATEGORY",
    "PROFILE_FACTS_SCANNED",
    "PROFILE_KEY",
    "RECALLED_TURNS",
    "RECALLED_TURN_CHARS",
    "ROLES",
    "ROOT",
    "SCAN_PAGE",
    "SCORINGS",
    "SOURCES",
    "TEXT_KINDS",
    "MemoryConfig",
    "MemorySpace",
    "access_boost",
    "delete_memory",
    "forget_user",
    "freshness",
    "get_profile",
    "keyword_search",
    "memory_config",
    "namespace",
    "open",
    "rank_weighted",
    "rebuild_aspects",
    "rebuild_passages",
    "rebuild_people",
    "recall",
    "recency_factor",
    "recent_activity",
    "record_chat_message",
    "relevance",
    "resolve_time_range",
    "save_memory",
    "time_filter",
    "update_profile",
    "user_prefix",
    "weighted_score",
]
