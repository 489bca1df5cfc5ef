"""A user's memories opened once: `open(store, user_id, config=...)` -> `MemorySpace`.

Opening checks the user id (its namespace label, store/memory/validate.py) and reads the
settings once (`config`, by default the MEMORY_* variables); the space owns every operation on
that user's memories, so a caller cannot reach another user's namespace or read settings per
call. The functions of `store.memory` stay for one-off calls; they are what the space calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langgraph.store.base import BaseStore

from store.memory.config import MemoryConfig, memory_config
from store.memory.read import get_profile, keyword_search, recall, recent_activity, time_filter
from store.memory.validate import user_label
from store.memory.write import delete_memory, forget_user, record_chat_message, save_memory, update_profile


@dataclass(frozen=True)
class MemorySpace:
    """The memories of user `user_id` in `store`, ranked and written with `config`."""

    store: BaseStore
    user_id: str
    config: MemoryConfig

    async def recall(self, query: str, kind: str, **options: Any) -> list[dict]:
        """`store.memory.recall` of this user (options: top_k, category, role, scoring,
        record_access, turns, now)."""
        return await recall(self.store, self.user_id, query, kind, config=self.config, **options)

    async def save(self, kind: str, text: str, **fields: Any) -> dict:
        """`store.memory.save_memory` for this user (fields: category, importance, source,
        thread_id, keywords, speaker, subject, now)."""
        return await save_memory(self.store, self.user_id, kind, text, config=self.config, **fields)

    async def record_chat_message(
        self, role: str, text: str, thread_id: str | None, *, speaker: str | None = None, now: datetime | None = None
    ) -> dict:
        """`store.memory.record_chat_message` for this user."""
        return await record_chat_message(
            self.store, self.user_id, role, text, thread_id, speaker=speaker, now=now, config=self.config
        )

    async def keyword_search(self, keywords: list[str], memory_type: str = "all", limit: int = 10) -> list[dict]:
        return await keyword_search(self.store, self.user_id, keywords, memory_type, limit)

    async def time_filter(
        self,
        start_date: str | None = None,
        end_date: str | None = None,
        days_ago: int | None = None,
        limit: int = 10,
        *,
        now: datetime | None = None,
    ) -> list[dict]:
        return await time_filter(
            self.store, self.user_id, start_date, end_date, days_ago, limit, now=now, config=self.config
        )

    async def recent_activity(self, limit: int = 10, *, now: datetime | None = None) -> list[dict]:
        return await recent_activity(self.store, self.user_id, limit, now=now, config=self.config)

    async def get_profile(self, categories: list[str] | None = None) -> dict:
        return await get_profile(self.store, self.user_id, categories)

    async def update_profile(
        self, fields: dict, *, turn_ids: list[str] | None = None, now: datetime | None = None
    ) -> dict:
        return await update_profile(self.store, self.user_id, fields, turn_ids=turn_ids, now=now, config=self.config)

    async def delete(self, memory_id: str) -> dict:
        """Delete one memory of this user by id (`store.memory.delete_memory`)."""
        return await delete_memory(self.store, self.user_id, memory_id)

    async def forget(self) -> int:
        """Delete every memory, profile and chat message of this user; returns how many items."""
        return await forget_user(self.store, self.user_id)


def open(store: BaseStore, user_id: str, *, config: MemoryConfig | None = None) -> MemorySpace:
    """The memory space of `user_id`; ValueError for an id that cannot name one."""
    user_label(user_id)
    return MemorySpace(store, user_id, config or memory_config())
