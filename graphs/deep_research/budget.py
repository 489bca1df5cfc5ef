"""Token budget of research prompts: approximate sizes, proportional truncation, context-length errors."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import Runnable, RunnableConfig

from graphs.runtime.events import emit
from graphs.runtime.models import ainvoke_with_retries

if TYPE_CHECKING:
    from graphs.deep_research.context import ResearchContext

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


CONTEXT_RETRIES = 3
"""How many times a prompt refused as too long is halved and sent again."""


def fit_to_budget(texts: list[str], budget_tokens: int, *, stage: str) -> list[str]:
    """`fit_texts`, reporting a cut as a `notes_truncated` event (reason `budget`)."""
    fitted, truncated = fit_texts(texts, budget_tokens)
    if truncated:
        _truncated(stage, "budget", texts, fitted)
    return fitted


async def invoke_fitted(
    model: Runnable,
    prompt_for: Callable[[list[str]], str],
    fitted: list[str],
    config: RunnableConfig,
    context: ResearchContext,
    *,
    stage: str,
    step: int,
) -> Any:
    """Call `model` on `prompt_for(fitted)`; when the model refuses the prompt as too long, halve
    the texts and try again (at most `CONTEXT_RETRIES` times), each cut a `notes_truncated` event
    (reason `context_length_exceeded`). Other errors are raised."""
    for attempt in range(CONTEXT_RETRIES + 1):
        try:
            return await ainvoke_with_retries(
                model,
                [HumanMessage(prompt_for(fitted))],
                config,
                retries=context.model_retries,
                timeout=context.model_timeout,
                step=step,
            )
        except Exception as exc:
            if not is_context_length_error(exc) or attempt == CONTEXT_RETRIES:
                raise
            before = fitted
            fitted, _ = fit_texts(fitted, sum(map(approx_tokens, fitted)) // 2)
            _truncated(stage, "context_length_exceeded", before, fitted)
    raise AssertionError("unreachable")


def _truncated(stage: str, reason: str, before: list[str], after: list[str]) -> None:
    emit(
        "notes_truncated",
        stage=stage,
        reason=reason,
        tokens_before=sum(map(approx_tokens, before)),
        tokens_after=sum(map(approx_tokens, after)),
    )
