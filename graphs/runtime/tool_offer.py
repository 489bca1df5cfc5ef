"""Which tools a model call offers: only those this turn can use.

Every tool schema offered is prompt text the model reads on every call (16 built-in tools are
about 4,000 tokens, most of a small model's prompt). When a run leaves `tools` unset (every
tool), a tool whose data or service is not there for this run is left out of the model call:

- a memory lookup only when the run's user has the data it reads: `search_episodic_memory`
  episodic memories, `search_semantic_memory` semantic ones, `delete_memory` either,
  `get_user_profile` a profile, `search_chat_history` recorded chat, `keyword_search`,
  `time_filter` and `get_recent_activity` any of these; `save_memory` whenever there is a store;
- knowledge-base tools only when a knowledge base exists;
- `web_search` when it has a provider to use: the configured one, else keyless DuckDuckGo (a
  WEB_SEARCH_PROVIDER that is not set up leaves it out);
- `web_read` only when it has a URL to read: with `web_search` offered, or when a user message
  of the conversation holds an http(s) URL.

A run that names its `tools` is offered exactly those. The checks read the store once per model
call (two small lookups); what a turn offers changes only when its user's data does, so the
prompt's tool block stays the same, and cacheable, from call to call.

`tool_schemas` is what the model reads of each offered tool: its name, its argument schema (with
the arguments' own descriptions and examples) and the first sentence of its description. A
tool's full description documents its output and limits for people (docs/tools.md) and is
several times longer (the calculator's alone is ~600 tokens); the model sees the output in the
tool's result and the limits in its error messages.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
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
_SENTENCE_END = re.compile(r"(?<=[.!?])(?<!e\.g\.)(?<!i\.e\.)\s+(?=[A-Z])|\n\s*\n")


def web_search_configured() -> bool:
    """True when `web_search` has a provider to use without naming one."""
    try:
        choose_provider(None, search_config())
    except ToolError:
        return False
    return True


# What each memory lookup reads (store/memory kinds); a lookup is offered when one is present.
LOOKUP_KINDS: dict[str, frozenset[str]] = {
    "search_episodic_memory": frozenset({"episodic"}),
    "search_semantic_memory": frozenset({"semantic"}),
    "delete_memory": frozenset(memory.MEMORY_KINDS),
    "get_user_profile": frozenset({"profile"}),
    "search_chat_history": frozenset({"chat"}),
}
_ANY_TEXT = frozenset(memory.TEXT_KINDS)


async def stored_kinds(store: BaseStore, user_id: str) -> set[str]:
    """The kinds of data stored for `user_id` (`episodic`, `semantic`, `profile`, `chat`)."""
    prefix = memory.user_prefix(user_id)
    namespaces = await store.alist_namespaces(prefix=prefix, max_depth=len(prefix) + 1)
    return {ns[len(prefix)] for ns in namespaces if len(ns) > len(prefix)}


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
        if names & MEMORY_LOOKUPS:
            kinds = await stored_kinds(store, user_id) if user_id else set()
            dropped |= {name for name in MEMORY_LOOKUPS if not kinds & LOOKUP_KINDS.get(name, _ANY_TEXT)}
        if names & KNOWLEDGE and not await list_kbs(store):
            dropped |= KNOWLEDGE
    searchable = web_search.__name__ in names and web_search_configured()
    if not searchable:
        dropped.add(web_search.__name__)
        if not _user_gave_url(messages):
            dropped.add(web_read.__name__)
    return [tool for tool in tools if tool.name not in dropped]


def first_sentence(description: str) -> str:
    """The first sentence of a tool description (all of it when it has one), spaces collapsed."""
    text = description.strip()
    head = _SENTENCE_END.split(text, maxsplit=1)[0].strip()
    return " ".join((head or text).split())


def tool_schemas(tools: Sequence[BaseTool]) -> list[dict[str, Any]]:
    """The OpenAI tool schemas a model call offers for `tools`: each tool's name and argument
    schema as they are, its description cut to its first sentence (see the module docstring)."""
    schemas = []
    for tool in tools:
        schema = convert_to_openai_tool(tool)
        function = schema["function"]
        if function.get("description"):
            function["description"] = first_sentence(function["description"])
        parameters = function.get("parameters")
        if isinstance(parameters, dict) and parameters.get("description") == tool.description:
            del parameters["description"]  # the full description again, at the schema's top
        schemas.append(schema)
    return schemas
