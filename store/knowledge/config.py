"""Knowledge-base constants and settings (KB_CHUNK_SIZE, KB_CHUNK_OVERLAP, KB_TEXT_SEARCH_CONFIG)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

REGISTRY_NAMESPACE = ("kb_registry",)
CHUNK_NAMESPACE_ROOT = "kb"
DOCUMENT_NAMESPACE_ROOT = "kb_docs"
STRATEGIES = ("dense", "keyword", "hybrid")
MAX_TOP_K = 50
RRF_K = 60
BM25_K1 = 1.2
BM25_B = 0.75
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
TS_CONFIG = re.compile(r"[a-z_]{1,63}")


@dataclass(frozen=True)
class KnowledgeConfig:
    chunk_size: int
    chunk_overlap: int
    text_search_config: str


def knowledge_config() -> KnowledgeConfig:
    """Read chunking and full-text settings from the environment (at call time)."""
    config = KnowledgeConfig(
        chunk_size=int(os.environ.get("KB_CHUNK_SIZE", "800")),
        chunk_overlap=int(os.environ.get("KB_CHUNK_OVERLAP", "120")),
        text_search_config=os.environ.get("KB_TEXT_SEARCH_CONFIG", "english").strip() or "english",
    )
    if not TS_CONFIG.fullmatch(config.text_search_config):
        raise ValueError(f"KB_TEXT_SEARCH_CONFIG={config.text_search_config!r} is not a text search configuration name")
    return config

