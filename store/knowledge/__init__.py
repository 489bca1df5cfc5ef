"""Knowledge bases in the LangGraph store: named collections of chunked documents, searched
dense (vectors), keyword (BM25) or hybrid (reciprocal rank fusion of the two).

Layout in the store (any `BaseStore`; the `store.postgres.store()` Postgres store in production):

- `("kb_registry",)` / `<name>`: one item per knowledge base (description, created_at,
  updated_at, document/chunk/character counts, embeddings model; `owner` and `shared`, see
  `registry.readable_by`: who may read it). Not embedded.
- `("kb_docs", <name>)` / `sha256(source)`: one record per ingested document (source, title,
  format, chunk count, fingerprint of its chunks). Not embedded.
- `("kb", <name>)` / `chunk id`: one item per chunk, `content` embedded for dense search.

Chunk ids are `sha256(kb, source, position)`: stable across runs for the same document and
chunking settings. Re-ingesting a source overwrites positions 0..n-1 and deletes the positions
the old version had beyond n, so a source's chunks are replaced, never duplicated; a document
whose chunks are unchanged is skipped (nothing re-embedded).

Keyword search is BM25, through the store's backend (store/backend.py). On the Postgres store it
runs in SQL (store/sql/) over the project's own table `kb_fulltext` (one tsvector per chunk,
GIN-indexed, written on ingest and delete); on other stores (InMemoryStore in unit tests and
evals) store/bm25.py ranks in process.

Modules by job: `config` (constants, KB_* settings), `registry` (names, create/list/get/delete),
`parse` (parsing and chunking), `ingest`, `handle` (`open`: a knowledge base opened once, searched
by gathering a question's signals once and ranking them per strategy), `search` (the corpus, the
ranking policy, the result contract), `extract` (entities
and relations of chunks), `graph` (the knowledge graph: ingest, delete, your own triples; stored
by the backend's graph part), `graph_search` (graph walk, fusion), `retrieve` (one-call searches, through a handle).
"""

from store.bm25 import BM25_B, BM25_K1, bm25_rank, tokenize
from store.fusion import RRF_K, reciprocal_rank_fusion
from store.knowledge.config import (
    CHUNK_NAMESPACE_ROOT,
    DOCUMENT_NAMESPACE_ROOT,
    FORMAT_BY_EXTENSION,
    FORMAT_BY_MEDIA_TYPE,
    MAX_TOP_K,
    REGISTRY_NAMESPACE,
    STRATEGIES,
    TEXT_FORMATS,
    KnowledgeConfig,
    knowledge_config,
)
from store.knowledge.extract import ModelExtractor, OfflineExtractor, entity_key, offline_extract
from store.knowledge.graph import insert_triples
from store.knowledge.handle import PRESETS, Gathered, KnowledgeBase, open, rank
from store.knowledge.ingest import (
    delete_document,
    ingest_bytes,
    ingest_files,
    ingest_path,
    ingest_text,
    ingest_texts,
)
from store.knowledge.parse import (
    Chunk,
    PreparedDocument,
    chunk_pages,
    chunk_text,
    format_for,
    html_to_markdown,
    pdf_pages,
    prepare_bytes,
    prepare_text,
)
from store.knowledge.registry import (
    KBExistsError,
    KBUnknownError,
    chunk_id,
    chunk_namespace,
    create_kb,
    delete_kb,
    document_key,
    document_namespace,
    get_kb,
    is_shared,
    list_kbs,
    readable_by,
    set_shared,
    validate_kb_name,
)
from store.knowledge.retrieve import (
    dense_search,
    fusion_search,
    graph_search,
    hybrid_search,
    keyword_search,
    retrieve,
)
from store.knowledge.search import Hit, common_names, per_document, result_content

__all__ = [
    "BM25_B",
    "BM25_K1",
    "CHUNK_NAMESPACE_ROOT",
    "DOCUMENT_NAMESPACE_ROOT",
    "FORMAT_BY_EXTENSION",
    "FORMAT_BY_MEDIA_TYPE",
    "MAX_TOP_K",
    "PRESETS",
    "REGISTRY_NAMESPACE",
    "RRF_K",
    "STRATEGIES",
    "TEXT_FORMATS",
    "Chunk",
    "Gathered",
    "Hit",
    "KBExistsError",
    "KBUnknownError",
    "KnowledgeBase",
    "KnowledgeConfig",
    "ModelExtractor",
    "OfflineExtractor",
    "PreparedDocument",
    "bm25_rank",
    "chunk_id",
    "chunk_namespace",
    "chunk_pages",
    "chunk_text",
    "common_names",
    "create_kb",
    "delete_document",
    "delete_kb",
    "dense_search",
    "document_key",
    "document_namespace",
    "entity_key",
    "format_for",
    "fusion_search",
    "get_kb",
    "graph_search",
    "html_to_markdown",
    "hybrid_search",
    "ingest_bytes",
    "ingest_files",
    "ingest_path",
    "ingest_text",
    "ingest_texts",
    "insert_triples",
    "is_shared",
    "keyword_search",
    "knowledge_config",
    "list_kbs",
    "offline_extract",
    "open",
    "pdf_pages",
    "per_document",
    "prepare_bytes",
    "prepare_text",
    "rank",
    "readable_by",
    "reciprocal_rank_fusion",
    "result_content",
    "retrieve",
    "set_shared",
    "tokenize",
    "validate_kb_name",
]
