"""Knowledge-base constants and settings (KB_CHUNK_SIZE, KB_CHUNK_OVERLAP, KB_TEXT_SEARCH_CONFIG)."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from datetime import timedelta

from settings import settings

REGISTRY_NAMESPACE = ("kb_registry",)
CHUNK_NAMESPACE_ROOT = "kb"
DOCUMENT_NAMESPACE_ROOT = "kb_docs"
PEOPLE_NAMESPACE_ROOT = "kb_people"  # one item per knowledge base: its people (store/knowledge/people.py)
PEOPLE_KEY = "people"
ASPECTS_NAMESPACE_ROOT = (
    "kb_aspects"  # one item per speaker of a chat log: their person/attribute index (store/aspects.py)
)
LIST_DEPTH = 200  # a list question's vector search for the chunks its person/attribute index names: this many deep
STRATEGIES = ("dense", "keyword", "hybrid", "graph", "fusion")
MAX_TOP_K = 50
COMMON_NAME_SHARE = 0.1  # a query name this share of a KB's chunks hold is left out of its vector
NEIGHBOUR_GAP = timedelta(hours=1)  # documents dated further apart are not neighbours in hybrid search
EXCHANGE_FIELD = "exchange"  # a chat line's chunk: the question it answers and it, embedded beside its content
PAGE_SIZE = 500
PUT_BATCH = 128
GROUP_CHUNKS = 512
GROUP_DOCUMENTS = 256

FORMAT_BY_EXTENSION = {
    ".txt": "text",
    ".text": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}
FORMAT_BY_MEDIA_TYPE = {
    "text/plain": "text",
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/pdf": "pdf",
}
TEXT_FORMATS = ("text", "markdown", "html")

KB_NAME = re.compile(r"[a-z0-9_-]{1,64}")


@dataclass(frozen=True)
class KnowledgeConfig:
    chunk_size: int
    chunk_overlap: int
    text_search_config: str
    hybrid_keyword_weight: float = 0.8
    time_weight: float = 1.0
    name_weight: float = 0.5
    neighbour_weight: float = 0.8
    neighbour_turns: int = 2
    keyword_floor: float = 0.3
    list_interleave: int = 1
    answer_weight: float = 0.9


def knowledge_config() -> KnowledgeConfig:
    """The KB_* settings (settings/): field `x` is KB_X."""
    values = settings()
    return KnowledgeConfig(**{f.name: getattr(values, f"KB_{f.name.upper()}") for f in fields(KnowledgeConfig)})
