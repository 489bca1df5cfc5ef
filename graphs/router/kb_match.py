"""Which knowledge base a message is about, by meaning: the message's embedding against each
phrase of each knowledge base's name and description.

Word overlap (graphs/router/intent.py `match_kb`) misses a question that says the same thing in
other words ("How do I get my travel costs paid back?" beside a staff handbook with "expense
reimbursement rules"), and a small chat model often misses it too. The configured embedder
(store/embeddings.py) does not: the message is compared with the knowledge base's name, its
whole description and each phrase of it (split at punctuation and at "and"/"with"/"or"), and the
best phrase gives the knowledge base's similarity. Only the knowledge bases passed in are
compared: the caller passes those the run's user may read. Codes (words mixing letters and
digits, such as an order number or a generated name "kb_0df67dae") carry no meaning and are left
out on both sides: an embedder finds two unrelated codes alike.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import cast

import numpy as np

from store.embeddings import get_embeddings
from store.lru import LRU

logger = logging.getLogger(__name__)

_PHRASE_SPLIT = re.compile(r"[:;,.!?()\n/]+|\s+(?:and|with|or)\s+", re.IGNORECASE)
_CODE = re.compile(r"(?<![a-z0-9])(?=[a-z]*\d)(?=\d*[a-z])[a-z0-9]+(?![a-z0-9])", re.IGNORECASE)  # letters and digits
_CACHE_SIZE = 512
_cache: LRU[tuple[int, str], np.ndarray] = LRU(_CACHE_SIZE)
"""Unit vectors of knowledge-base phrases by (embedder, phrase): a bounded LRU cache
(store/lru.py) of `_CACHE_SIZE` phrases (they change only with a knowledge base)."""


@dataclass(frozen=True)
class KBMatch:
    """A knowledge base's similarity to a message and the phrase of its description that gave it."""

    name: str
    similarity: float
    phrase: str


def kb_phrases(kb: dict) -> list[str]:
    """The texts a message is compared with: the name, the description and its phrases."""
    description = " ".join(str(kb.get("description") or "").split())
    name = " ".join(word for word in re.split(r"[\s_-]+", without_codes(str(kb["name"]))) if word.lower() != "kb")
    parts = [name, description]
    parts += [phrase.strip() for phrase in _PHRASE_SPLIT.split(description)]
    return list(dict.fromkeys(part for part in parts if len(part) >= 3))


def without_codes(text: str) -> str:
    """`text` without its codes (words mixing letters and digits), spaces made single."""
    return " ".join(_CODE.sub(" ", text).split())


async def _vectors(texts: list[str]) -> list[np.ndarray]:
    """Embeddings of `texts`, the knowledge-base phrases cached (they change only with a KB)."""
    embeddings = get_embeddings()
    key = id(embeddings)
    found = {text: _cache.get((key, text)) for text in dict.fromkeys(texts)}
    missing = [text for text, vector in found.items() if vector is None]
    if missing:
        for text, vector in zip(missing, await embeddings.aembed_documents(missing), strict=True):
            array = np.asarray(vector, dtype=np.float32)
            found[text] = _cache.put((key, text), array / (np.linalg.norm(array) or 1.0))
    return [cast(np.ndarray, found[text]) for text in texts]


async def rank_kbs(message: str, kbs: list[dict]) -> list[KBMatch]:
    """The knowledge bases `kbs`, most similar to `message` first; [] when there is nothing to
    compare or the embedder fails (routing then goes on without this signal; logged). A knowledge
    base with no phrase to compare (its name a code such as `hr2024`, no description) is left out."""
    message = without_codes(message)
    if not kbs or not message.strip():
        return []
    phrases = {str(kb["name"]): kb_phrases(kb) for kb in kbs}
    try:
        query = np.asarray((await get_embeddings().aembed_documents([message]))[0], dtype=np.float32)
        query = query / (np.linalg.norm(query) or 1.0)
        flat = [phrase for parts in phrases.values() for phrase in parts]
        vectors = dict(zip(flat, await _vectors(flat), strict=True))
    except Exception as exc:  # an embedder that is down must not stop routing
        logger.warning("knowledge-base similarity unavailable: %s", str(exc) or type(exc).__name__)
        return []
    matches = []
    for name, parts in phrases.items():
        if not parts:  # a name that is only a code and no description: nothing to compare
            continue
        similarity, phrase = max((float(vectors[phrase] @ query), phrase) for phrase in parts)
        matches.append(KBMatch(name, round(similarity, 3), phrase))
    return sorted(matches, key=lambda match: (-match.similarity, match.name))
