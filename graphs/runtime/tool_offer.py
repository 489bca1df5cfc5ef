"""Which tools a model call offers: only those this turn can use.

Every tool schema offered is prompt text the model reads on every call (16 built-in tools are
about 4,000 tokens, most of a small model's prompt). When a run leaves `tools` unset (every
tool), a tool whose data or service is not there for this run is left out of the model call:

- memory lookups (searches, profile, recent activity, chat history, delete) only when the run's
  user has something stored; `save_memory` whenever there is a store;
- knowledge-base tools only when a knowledge base exists;
- `web_search` only when a search provider is configured (WEB_SEARCH_PROVIDER or a key/URL);
- `web_read` only when it has a URL to read: with `web_search` offered, or when a user message
  of the conversation holds an http(s) URL.

A run that names its `tools` is offered exactly those. The checks read the store once per model
call (two small lookups); what a turn offers changes only when its user's data does, so the
prompt's tool block stays the same, and cacheable, from call to call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.tools import BaseTool
from langgraph.store.base import BaseStore

from store import memory
from store.knowledge import list_kbs
from tools.errors import ToolError
from tools.knowledge import KNOWLEDGE_TOOLS
from tools.memory import MEMORY_TOOLS, save_memory
from tools.web_read import web_read
from tools.web_search import choose_provider, search_config, web_search

MEMORY_LOOKUPS = frozenset(fn.__name__ for fn in MEMORY_TOOLS if fn is not save_memory)
KNOWLEDGE = frozenset(fn.__name__ for fn in KNOWLEDGE_TOOLS)
STORE_TOOLS = MEMORY_LOOKUPS | KNOWLEDGE | {save_memory.__name__}
_URL = re.compile(r"https?://\S", re.IGNORECASE)


def web_search_configured() -> bool:
    """True when `web_search` has a provider to use without naming one."""
    try:
        choose_provider(None, search_config())
    except ToolError:
        return False
    return True


async def has_memories(store: BaseStore, user_id: str) -> bool:
    """True when anything is stored for `user_id` (memories, profile or chat history)."""
    return bool(await store.asearch(memory.user_prefix(user_id), limit=1))


def _user_gave_url(messages: Sequence[BaseMessage]) -> bool:
    return any(isinstance(m, HumanMessage) and _URL.search(m.text) for m in messages)


async def tools_for_turn(
    tools: list[BaseTool],
    store: BaseStore | None,
    user_id: str,
    *,
    named: bool,
    messages: Sequence[BaseMessage] = (),
) -> list[BaseTool]:
    """The part of `tools` worth offering this turn (all of them when the run `named` its tools);
    `messages` is the conversation so far."""
    if named:
        return tools
    names = {tool.name for tool in tools}
    dropped: set[str] = set()
    if store is None:
        dropped |= STORE_TOOLS
    else:
        if names & MEMORY_LOOKUPS and not (user_id and await has_memories(store, user_id)):
            dropped |= MEMORY_LOOKUPS
        if names & KNOWLEDGE and not await list_kbs(store):
            dropped |= KNOWLEDGE
    searchable = web_search.__name__ in names and web_search_configured()
    if not searchable:
        dropped.add(web_search.__name__)
        if not _user_gave_url(messages):
            dropped.add(web_read.__name__)
    return [tool for tool in tools if tool.name not in dropped]
