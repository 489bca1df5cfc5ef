"""The one chat-model factory every graph uses.

`provider:model` strings: `openai:*` (OpenAI, or any OpenAI-compatible server through
`OPENAI_BASE_URL`: vLLM, Ollama, llama.cpp), `anthropic:*` when `langchain-anthropic` is
installed, and any other provider `init_chat_model` knows. A missing key fails the run at once
with a message naming what to set. A run whose request sent its own key or base URL
(`x-model-api-key`, `x-model-base-url`; tools/credentials.py) calls its `openai:*` models with
them instead of the server's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.constants import TAG_NOSTREAM
from pydantic import SecretStr

from graphs.runtime.deadline import RunDeadlineExceeded, bounded
from graphs.runtime.events import emit
from graphs.runtime.history import repair_tool_history
from graphs.runtime.prompts import ANSWER_WITHOUT_TOOLS, TOOL_CALL_RETRY
from graphs.runtime.retry import RetriesExhausted, call_with_retries
from graphs.runtime.text_tool_calls import recover as recover_text_calls
from graphs.runtime.text_tool_calls import with_calls
from graphs.runtime.tool_offer import tool_schemas
from settings import settings
from settings.redact import redact
from tools import credentials
from tools.identity import check_thread_owner
from tools.net import FetchError, policy_transport

NOSTREAM_TAGS = [TAG_NOSTREAM, "langsmith:nostream"]
"""Tags for a graph's internal model calls (planning, summaries, compression): LangGraph keeps
their tokens off the `messages` stream, so clients see only the answer's tokens."""
WEB_SEARCH_TOOL = "web_search"
"""The tool whose offer makes an answer's `response_metadata.web_search` true (tools/web_search.py)."""


class ModelConfigError(RuntimeError):
    """The requested model cannot be used (no key, unknown provider, missing integration)."""


class ModelCallError(RuntimeError):
    """A model call failed for good (after its retries). Its message is safe to show clients:
    the LangGraph server passes RuntimeError messages on in the run's `error` event."""


# Providers `load_chat_model` accepts: OpenAI (and OpenAI-compatible servers) plus the providers
# `init_chat_model` integrates (each needs its integration package installed).
KNOWN_PROVIDERS = (
    "openai",
    "anthropic",
    "azure_openai",
    "azure_ai",
    "google_genai",
    "google_vertexai",
    "bedrock",
    "bedrock_converse",
    "cohere",
    "fireworks",
    "together",
    "mistralai",
    "huggingface",
    "groq",
    "ollama",
    "deepseek",
    "xai",
    "perplexity",
    "ibm",
    "nvidia",
    "upstage",
)


_KEY_VARIABLES = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "google_genai": "GOOGLE_API_KEY",
    "groq": "GROQ_API_KEY",
    "mistralai": "MISTRAL_API_KEY",
}


_PROVIDERS: dict[str, Callable[..., BaseChatModel]] = {}


def register_model_provider(name: str, factory: Callable[..., BaseChatModel]) -> None:
    """Make `name:<model>` resolve through `factory(model_name, temperature=...)`, plus `top_p=`
    and `max_tokens=` when the run sets them (`reasoning_effort` is set on the model it returns
    when its class has that field).

    The extension point for chat models `init_chat_model` does not know: an application that
    embeds these graphs registers its in-house model class at import (the scripted models of
    the tests and evals join the same way); the context then names it like any provider."""
    _PROVIDERS[name] = factory


def check_model_spec(spec: str) -> tuple[str, str]:
    """Split 'provider:model' into its parts; ValueError when malformed or the provider is unknown."""
    provider, sep, name = spec.partition(":")
    if not sep or not provider.strip() or not name.strip():
        raise ValueError(f"{spec!r} must look like 'provider:model', e.g. 'openai:gpt-4o-mini'")
    if provider not in KNOWN_PROVIDERS and provider not in _PROVIDERS:
        known = ", ".join(sorted({*KNOWN_PROVIDERS, *_PROVIDERS}))
        raise ValueError(f"unknown model provider {provider!r}; known: {known}")
    return provider, name


def report_ignored(parameter: str, value: Any, spec: str, reason: str) -> None:
    """Say on the run's stream that a model parameter the run set is not used (not silently)."""
    emit("model_parameter_ignored", parameter=parameter, value=value, model=spec, reason=reason)


def report_unmet_tool_choice(tool_choice: str | None, spec: str) -> None:
    """For a model call that offers no tools: a `tool_choice` it cannot meet (`required`, a
    tool's name) is reported, not silently dropped."""
    if tool_choice not in (None, "auto", "none"):
        report_ignored("tool_choice", tool_choice, spec, "this model call offers no tools")


def _with_reasoning_effort(model: BaseChatModel, effort: str | None, spec: str) -> BaseChatModel:
    if effort is None:
        return model
    if "reasoning_effort" in type(model).model_fields:
        return model.model_copy(update={"reasoning_effort": effort})
    report_ignored("reasoning_effort", effort, spec, f"{type(model).__name__} takes no reasoning effort")
    return model


def _request_credentials(spec: str, provider: str) -> credentials.RequestCredentials | None:
    """The model key and base URL the run's request sent, when it sent some."""
    try:
        sent = credentials.current()
    except credentials.CredentialsUnavailable as exc:
        raise ModelConfigError(str(exc)) from None
    if sent is None or not sent.for_model:
        return None
    if provider != "openai":
        raise ModelConfigError(
            "The model key and base URL sent with the request (x-model-api-key, x-model-base-url) are "
            f"for `openai:*` models (OpenAI or an OpenAI-compatible server); this run's model is {spec!r}."
        )
    return sent


def load_chat_model(
    spec: str,
    *,
    temperature: float = 0.0,
    timeout: float | None = None,
    top_p: float | None = None,
    max_tokens: int | None = None,
    reasoning_effort: str | None = None,
) -> BaseChatModel:
    """Build the chat model for `spec` ('provider:model'); raise ModelConfigError if unusable.

    The provider client's own retries are off: `ainvoke_with_retries` retries every provider
    the same way and reports each retry as an event. `timeout` bounds each HTTP request.
    `top_p` and `max_tokens` (None: the provider's default) go to the provider as its client
    names them (`top_p`, `max_tokens`; OpenAI's client sends the latter as `max_completion_tokens`).
    `reasoning_effort` goes to providers whose client takes it; for the others a
    `model_parameter_ignored` event says it is not used.

    Inside a run whose request sent a model key or base URL (tools/credentials.py), `openai:*`
    models use them: the request's key (the server's OPENAI_API_KEY never goes to a base URL
    the request chose) and the request's base URL (else OPENAI_BASE_URL), connections to it
    checked to reach public addresses only unless the operator listed it.
    """
    try:
        provider, name = check_model_spec(spec)
    except ValueError as exc:
        raise ModelConfigError(f"model {exc}") from None
    sent = _request_credentials(spec, provider)
    sampling = {key: value for key, value in (("top_p", top_p), ("max_tokens", max_tokens)) if value is not None}
    if provider in _PROVIDERS:
        model = _PROVIDERS[provider](name, temperature=temperature, **sampling)
        return _with_reasoning_effort(model, reasoning_effort, spec)
    kwargs: dict = {"temperature": temperature, "max_retries": 0, **sampling}
    if timeout is not None:
        kwargs["timeout"] = timeout
    if provider == "openai":
        config = settings()
        base_url = config.OPENAI_BASE_URL
        api_key = config.OPENAI_API_KEY
        if sent is not None:
            base_url = sent.model_base_url or base_url
            api_key = SecretStr(sent.model_api_key) if sent.model_api_key else None
            if sent.model_base_url and not sent.base_url_listed:
                # The graphs call models asynchronously: every connection of this client is checked.
                kwargs["http_async_client"] = httpx.AsyncClient(transport=policy_transport(), trust_env=False)
        elif not api_key and not base_url:
            raise ModelConfigError(
                f"No key for model {spec!r}: set OPENAI_API_KEY, or OPENAI_BASE_URL for an "
                "OpenAI-compatible server (vLLM, Ollama, llama.cpp), or pick another model "
                "in the run's context (`model`) / AGENT_MODEL."
            )
        if reasoning_effort is not None:
            kwargs["reasoning_effort"] = reasoning_effort
        from graphs.runtime.openai_compatible import ChatOpenAICompatible  # langchain_openai on first use

        return ChatOpenAICompatible(
            model=name, base_url=base_url, api_key=api_key or SecretStr("EMPTY"), stream_usage=True, **kwargs
        )
    if provider in _KEY_VARIABLES and not getattr(settings(), _KEY_VARIABLES[provider]):
        raise ModelConfigError(
            f"No key for model {spec!r}: set {_KEY_VARIABLES[provider]}, or pick another model "
            "in the run's context (`model`) / AGENT_MODEL."
        )
    try:
        model = init_chat_model(name, model_provider=provider, **kwargs)
    except ImportError as exc:
        raise ModelConfigError(f"Provider {provider!r} needs its integration package: {exc}") from exc
    except ValueError as exc:
        raise ModelConfigError(f"Cannot use model {spec!r}: {exc}") from exc
    return _with_reasoning_effort(model, reasoning_effort, spec)


_TRANSIENT_NAMES = {
    "APIConnectionError",
    "APITimeoutError",
    "RateLimitError",
    "InternalServerError",
    "ServiceUnavailableError",
    "OverloadedError",
    "ConnectError",
    "ReadTimeout",
    "RemoteProtocolError",
}


def is_transient_model_error(exc: BaseException) -> bool:
    """Connection failures, timeouts, 408/409/429 and 5xx answers: worth another try."""
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, ConnectionError)):
        return True
    if any(cls.__name__ in _TRANSIENT_NAMES for cls in type(exc).__mro__):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status in (408, 409, 429) or status >= 500)


def _error_text(exc: BaseException, timeout: float | None) -> str:
    """What a failed call is reported with: never a secret it repeats (a provider's error naming
    the key or base URL the request sent, configured secrets; settings/redact.py)."""
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) and not str(exc) and timeout:
        return f"no answer within {timeout:g} s"
    text = str(exc) or type(exc).__name__
    if isinstance(exc.__cause__, FetchError):  # a request's base URL refused at connect time
        text = f"{text} {exc.__cause__}"
    return redact(text)[:1000]


async def ainvoke_with_retries(
    model: Runnable,
    messages: list[AnyMessage],
    config: RunnableConfig | None,
    *,
    retries: int,
    step: int,
    timeout: float | None = None,
) -> Any:
    """Call the model, each attempt bounded by `timeout` seconds, retrying transient API errors
    (and timeouts) at most `retries` times with exponential backoff (at most 8 s apart).

    Every graph calls its models through here. Before the call, the history is repaired so no
    tool call goes out without its result (a run interrupted while tools ran leaves such calls).
    Each retry is reported as a `model_retrying` event; a persistent or non-transient error is
    reported as `model_error` and raised as `ModelCallError`, whose message the server shows.
    """
    await check_thread_owner(config)
    messages = repair_tool_history(messages)

    def on_retry(attempt: int, exc: BaseException, delay: float) -> None:
        emit("model_retrying", step=step, attempt=attempt, error=_error_text(exc, timeout), delay_s=round(delay, 3))

    async def attempt() -> Any:
        # Each attempt is bounded by the run's deadline too (RunDeadlineExceeded once it passed).
        limit = bounded(timeout, "model")
        return await asyncio.wait_for(model.ainvoke(messages, config), limit)

    try:
        result = await call_with_retries(
            attempt,
            retries=retries,
            is_transient=is_transient_model_error,
            on_retry=on_retry,
        )
    except RetriesExhausted as failed:
        exc, error = failed.error, _error_text(failed.error, timeout)
        if isinstance(exc, RunDeadlineExceeded):
            raise exc from None
        emit("model_error", step=step, error=error, error_type=type(exc).__name__)
        if isinstance(exc, (ModelConfigError, ModelCallError)):
            raise exc from None
        raise ModelCallError(
            f"The model call failed ({type(exc).__name__}, attempt {failed.attempts}): {error}"
        ) from exc
    report_usage(result, step)
    stamp_answer(result, model)
    return result


def _offered_tools(model: Any) -> set[str]:
    """The names of the tools bound to a model runnable (`bind_tools`), found through its bindings."""
    for _ in range(4):
        tools = (getattr(model, "kwargs", None) or {}).get("tools")
        if tools:
            return {str((tool.get("function") or tool).get("name")) for tool in tools if isinstance(tool, dict)}
        model = getattr(model, "bound", None) or getattr(model, "first", None)
        if model is None:
            break
    return set()


def _model_name(model: Any) -> str | None:
    """The model a runnable calls (through `bind_tools` / structured-output bindings)."""
    for _ in range(4):
        name = getattr(model, "model_name", None) or getattr(model, "model", None)
        if isinstance(name, str) and name:
            return name
        model = getattr(model, "bound", None) or getattr(model, "first", None)
        if model is None:
            return None
    return None


def stamp_answer(result: Any, model: Any) -> None:
    """Record on the model's message when it was produced (`response_metadata.created_at`, UTC
    ISO 8601), by which model (`response_metadata.model`, unless the provider named it
    already) and whether it could search the web (`response_metadata.web_search`: the
    `web_search` tool was offered to it); its token usage is the message's `usage_metadata`, as
    the provider reported it."""
    message = result.get("raw") if isinstance(result, dict) else result
    if not isinstance(message, AIMessage):
        return
    message.response_metadata.setdefault("created_at", datetime.now(UTC).isoformat(timespec="milliseconds"))
    name = message.response_metadata.get("model_name") or _model_name(model)
    if name:
        message.response_metadata.setdefault("model", name)
    message.response_metadata.setdefault("web_search", WEB_SEARCH_TOOL in _offered_tools(model))


def report_usage(result: Any, step: int) -> dict | None:
    """Emit `model_usage` with the prompt, cached-prompt and output tokens of one model call, as
    the provider reported them (`usage_metadata`; `input_token_details.cache_read` is the part
    of the prompt served from the provider's prefix cache). None when the provider reported none."""
    message = result.get("raw") if isinstance(result, dict) else result
    usage = getattr(message, "usage_metadata", None)
    if not usage:
        return None
    details = usage.get("input_token_details") or {}
    return emit(
        "model_usage",
        step=step,
        input_tokens=usage.get("input_tokens", 0),
        cached_tokens=details.get("cache_read", 0) or 0,
        output_tokens=usage.get("output_tokens", 0),
    )


async def ainvoke_with_tools(
    model: BaseChatModel,
    tools: list[BaseTool],
    messages: list[AnyMessage],
    config: RunnableConfig | None,
    *,
    retries: int,
    step: int,
    timeout: float | None = None,
    recover: bool = True,
    tool_choice: str | None = None,
) -> AIMessage:
    """Call `model` with `tools` offered (through `ainvoke_with_retries`) and return its message.

    With `recover` (context `recover_tool_calls`), tool calls the model wrote as text instead of
    making them (graphs/runtime/text_tool_calls.py) become real tool calls when they name an
    offered tool with arguments its schema accepts. Invalid ones are never run: the model is asked
    once more with the problems, and if it still writes invalid calls their text is dropped
    from the answer. Each recovery is a `tool_calls_recovered` event.

    `tool_choice` (`auto`, `none`, `required` or an offered tool's name; None: the provider's
    default, auto) goes to the provider with the tools; with `none`, tool calls written as text
    are not recovered either. Asked of a call that offers no tools, `required` or a tool's name
    cannot be met: a `model_parameter_ignored` event says so.
    """
    if tools:
        choice = {"tool_choice": tool_choice} if tool_choice else {}
        bound = model.bind_tools(tool_schemas(tools), **choice)
    else:
        bound = model
        report_unmet_tool_choice(tool_choice, _model_name(model) or "")
    recover = recover and tool_choice != "none"
    response = await ainvoke_with_retries(bound, messages, config, retries=retries, step=step, timeout=timeout)
    if not recover or not tools:
        return response
    found = recover_text_calls(response, tools)
    if found is None:
        return response
    reasked = False
    if found.errors and not found.calls:
        reasked = True
        emit(
            "tool_calls_recovered",
            step=step,
            recovered=0,
            invalid=len(found.errors),
            names=[],
            errors=found.errors,
            reasked=True,
        )
        retry = [
            *messages,
            AIMessage(response.text),
            HumanMessage(TOOL_CALL_RETRY.format(errors="; ".join(found.errors))),
        ]
        response = await ainvoke_with_retries(bound, retry, config, retries=retries, step=step, timeout=timeout)
        found = recover_text_calls(response, tools)
        if found is None:
            return response
    emit(
        "tool_calls_recovered",
        step=step,
        recovered=len(found.calls),
        invalid=len(found.errors),
        names=[call["name"] for call in found.calls],
        errors=found.errors,
        reasked=reasked,
    )
    if found.calls:
        return with_calls(response, found)
    # Still invalid after the re-ask: never run them, and keep their raw text out of the answer.
    text = found.content
    if not text and reasked:
        # Nothing but invalid calls, twice: the model answers without tools, from what it has
        # (the conversation, the notes in the prompt), rather than the user reading the errors.
        plain = [*messages, HumanMessage(ANSWER_WITHOUT_TOOLS.format(errors="; ".join(found.errors)))]
        answer = await ainvoke_with_retries(model, plain, config, retries=retries, step=step, timeout=timeout)
        again = recover_text_calls(answer, tools)
        text = answer.text if again is None else again.content
        if text:
            response = answer
    text = text or "I could not make a valid tool call for this request: " + "; ".join(found.errors)
    return response.model_copy(update={"content": text})
