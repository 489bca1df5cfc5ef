"""Token budget of research prompts: approximate sizes, proportional truncation, context-length errors."""

from __future__ import annotations

import math

CHARS_PER_TOKEN = 4
_CONTEXT_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "too many tokens",
    "prompt is too long",
)


def approx_tokens(text: str) -> int:
    """A rough token count of `text` (characters / 4, as `count_tokens_approximately`)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def fit_texts(texts: list[str], budget_tokens: int) -> tuple[list[str], bool]:
    """Cut the longest texts first so that together they fit `budget_tokens`; (texts, truncated)."""
    budget = max(budget_tokens, 0) * CHARS_PER_TOKEN
    if sum(len(text) for text in texts) <= budget:
        return list(texts), False
    # Water-filling: every text keeps min(its length, a common cap) characters.
    lengths = sorted(len(text) for text in texts)
    remaining, cap = budget, 0
    for position, length in enumerate(lengths):
        share = remaining // (len(lengths) - position)
        if length > share:
            cap = share
            break
        remaining -= length
    else:
        cap = lengths[-1]
    marker = "\n[... truncated to fit the model's context]"
    fitted = [text if len(text) <= cap else text[: max(cap - len(marker), 0)].rstrip() + marker for text in texts]
    return fitted, True


def is_context_length_error(exc: BaseException | None) -> bool:
    """Whether the model refused the prompt as too long (OpenAI `context_length_exceeded` and the like),
    looking through wrappers such as `ModelCallError` to the provider's error."""
    seen = 0
    while exc is not None and seen < 5:
        code = getattr(exc, "code", None)
        body = getattr(exc, "body", None)
        if isinstance(body, dict):
            code = code or body.get("code") or (body.get("error") or {}).get("code")
        if code == "context_length_exceeded":
            return True
        status = getattr(exc, "status_code", None)
        if status in (400, 413) and any(marker in str(exc).lower() for marker in _CONTEXT_MARKERS):
            return True
        exc, seen = exc.__cause__, seen + 1
    return False
