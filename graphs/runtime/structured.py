"""Structured model calls (a route, a plan, a research brief, a memory extraction): one way for
every graph.

`ainvoke_structured` asks the model for one object of a pydantic schema and validates it:

- the request (AGENT_STRUCTURED_OUTPUT, `auto` by default): on an OpenAI-compatible server
  (`openai:*` with OPENAI_BASE_URL: vLLM, llama.cpp, Ollama) the server's JSON-schema
  constrained output (`response_format` `json_schema`), which small models follow far better
  than tool calling; elsewhere a forced function call (`tool_choice`). A server that refuses
  `response_format` (HTTP 400/422) is asked again by function call;
- the answer is read from whatever the model produced: the function call's arguments, or a JSON
  object in the text (fenced or bare, or a `{"name": <schema>, "arguments": {...}}` call written
  as text), validated by the schema, then by the caller's `check` (a ValueError names what is
  wrong);
- an invalid answer is re-asked with the problem, up to `attempts` calls in all; when none is
  valid the failure is a `structured_output_failed` event, a warning in the log and a
  `StructuredOutputError` for the caller: never a silent empty result.
"""

from __future__ import annotations

import json
import logging
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeGuard

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import BaseModel, ValidationError

from graphs.runtime.events import emit
from graphs.runtime.models import NOSTREAM_TAGS, ModelCallError, ainvoke_with_retries
from graphs.runtime.prompts import JSON_SCHEMA_PROMPT, STRUCTURED_RETRY
from graphs.runtime.text_tool_calls import find_text_tool_calls
from settings import settings

if TYPE_CHECKING:
    from langchain_openai import ChatOpenAI

logger = logging.getLogger(__name__)

JSON_SCHEMA = "json_schema"
FUNCTION_CALLING = "function_calling"
_DECODER = json.JSONDecoder()


class StructuredOutputError(RuntimeError, ValueError):
    """The model gave no valid structured answer within its attempts. The message says which
    schema, how many attempts and the last problem. A RuntimeError, whose message the LangGraph
    server shows the client, and a ValueError, as a bad model answer."""

    def __init__(self, schema: str, attempts: int, error: str, model: str = "") -> None:
        who = f"The model {model!r}" if model else "The model"
        super().__init__(f"{who} did not return a valid {schema} after {attempts} attempts: {error}")
        self.schema = schema
        self.attempts = attempts
        self.error = error


@dataclass
class Structured:
    """A valid structured answer: `value` (what `check` returned, else the schema object), the
    `attempts` it took and the `method` that produced it."""

    value: Any
    attempts: int
    method: str


def is_chat_openai(model: object) -> TypeGuard[ChatOpenAI]:
    """Whether `model` is a `ChatOpenAI`, without importing `langchain_openai` when no model of
    that class was made (then it cannot be one; graphs/runtime/openai_compatible.py)."""
    module = sys.modules.get("langchain_openai")
    return module is not None and isinstance(model, module.ChatOpenAI)


def structured_method(model: BaseChatModel) -> str:
    """AGENT_STRUCTURED_OUTPUT when set; `auto`: `json_schema` for an OpenAI-compatible server
    (ChatOpenAI with a base URL), else `function_calling`. Only ChatOpenAI is asked by
    `response_format`."""
    chosen = settings().AGENT_STRUCTURED_OUTPUT
    if not is_chat_openai(model) or chosen == FUNCTION_CALLING:
        return FUNCTION_CALLING
    return JSON_SCHEMA if chosen == JSON_SCHEMA or model.openai_api_base else FUNCTION_CALLING


def _request(model: BaseChatModel, schema: type[BaseModel], method: str, tags: Sequence[str]) -> Runnable:
    name = schema.__name__
    if method == JSON_SCHEMA:
        response_format = {
            "type": "json_schema",
            "json_schema": {
                "name": name,
                "description": (schema.__doc__ or "").strip(),
                "schema": schema.model_json_schema(),
            },
        }
        runnable: Runnable = model.bind(response_format=response_format)
    else:
        runnable = model.bind_tools([schema], tool_choice=name)
    return runnable.with_config(tags=[*NOSTREAM_TAGS, *tags], run_name=name)


def _with_schema(messages: Sequence[AnyMessage], schema: type[BaseModel]) -> list[AnyMessage]:
    """`messages` with the schema spelled out in the system message. A server's constrained
    output only restricts which tokens may come next: the model itself never sees the schema
    (OpenAI shows it to the model; llama.cpp and vLLM do not), so without this it does not know
    what the fields mean and tends to fill in the least it may (empty lists)."""
    text = JSON_SCHEMA_PROMPT.format(
        schema=schema.__name__, json_schema=json.dumps(schema.model_json_schema(), ensure_ascii=False)
    )
    history = list(messages)
    if history and isinstance(history[0], SystemMessage) and isinstance(history[0].content, str):
        return [SystemMessage(f"{history[0].content}\n\n{text}"), *history[1:]]
    return [SystemMessage(text), *history]


def _json_objects(text: str) -> list[Any]:
    objects, index = [], 0
    while (start := text.find("{", index)) != -1:
        try:
            value, end = _DECODER.raw_decode(text, start)
        except ValueError:
            index = start + 1
            continue
        objects.append(value)
        index = end
    return objects


def _candidate(raw: AIMessage, name: str) -> Any:
    """The arguments the answer holds: its call of `name` (or its only call), else a call of
    `name` written as text, else the first JSON object in its text. None when there is none."""
    calls = raw.tool_calls
    for call in calls:
        if call["name"] == name:
            return call["args"]
    if len(calls) == 1:
        return calls[0]["args"]
    text = raw.text
    found, _ = find_text_tool_calls(text)
    for item in found:
        if item.name.lower() == name.lower():
            args = item.arguments
            return json.loads(args) if isinstance(args, str) else args
    objects = _json_objects(text)
    return objects[0] if objects else None


def _parse(raw: AIMessage, schema: type[BaseModel]) -> BaseModel:
    """The schema object in `raw`; ValueError saying why there is none."""
    try:
        args = _candidate(raw, schema.__name__)
    except ValueError as exc:
        raise ValueError(f"the `{schema.__name__}` arguments are not valid JSON: {exc}") from None
    if args is None:
        raise ValueError(
            f"no `{schema.__name__}` function call was made and the text held no `{schema.__name__}` JSON object"
        )
    try:
        return schema.model_validate(args)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or schema.__name__}: {error['msg']}" for error in exc.errors()
        )
        raise ValueError(f"the `{schema.__name__}` arguments do not match the schema: {problems}") from None


async def ainvoke_structured(
    model: BaseChatModel,
    schema: type[BaseModel],
    messages: Sequence[AnyMessage],
    config: RunnableConfig | None,
    *,
    retries: int,
    timeout: float | None,
    step: int = 0,
    attempts: int = 2,
    check: Callable[[Any], Any] | None = None,
    on_invalid: Callable[[int, str], None] | None = None,
    retry_prompt: str = STRUCTURED_RETRY,
    tags: Sequence[str] = (),
    model_name: str = "",
) -> Structured:
    """Ask `model` for one `schema` object, validated (and `check`ed), re-asking with the problem.

    `check(parsed)` returns the value to give back or raises ValueError naming the problem;
    `on_invalid(attempt, error)` hears about each invalid answer; `retry_prompt` (with `{error}`
    and `{schema}`) is the re-ask. Model call errors (`ModelCallError`) pass through. Raises
    StructuredOutputError after `attempts` invalid answers.
    """
    name = schema.__name__
    method = structured_method(model)
    runnable = _request(model, schema, method, tags)
    history = _with_schema(messages, schema) if method == JSON_SCHEMA else list(messages)
    error = ""
    attempt = 0
    while attempt < attempts:
        attempt += 1
        try:
            raw = await ainvoke_with_retries(runnable, history, config, retries=retries, step=step, timeout=timeout)
        except ModelCallError as exc:
            if method != JSON_SCHEMA or getattr(exc.__cause__, "status_code", None) not in (400, 422):
                raise
            # The server refuses constrained output: ask by function call instead.
            logger.info("%s: the server refused response_format json_schema (%s); using function calling", name, exc)
            method = FUNCTION_CALLING
            runnable = _request(model, schema, method, tags)
            history = list(messages)
            attempt -= 1
            continue
        try:
            parsed = _parse(raw, schema)
            return Structured(check(parsed) if check else parsed, attempt, method)
        except ValueError as exc:
            error = str(exc)
        if on_invalid is not None:
            on_invalid(attempt, error)
        retry = retry_prompt.format(error=error, schema=name)
        if raw.tool_calls:
            calls = [{**call, "id": call.get("id") or f"call_{uuid.uuid4().hex[:24]}"} for call in raw.tool_calls]
            history += [
                raw.model_copy(update={"tool_calls": calls}),
                *(ToolMessage(retry, tool_call_id=call["id"]) for call in calls),
            ]
        else:
            history += [AIMessage(raw.text), HumanMessage(retry)]
    emit("structured_output_failed", schema=name, attempts=attempts, error=error, method=method)
    logger.warning("structured call %s failed after %d attempt(s) (%s): %s", name, attempts, method, error)
    raise StructuredOutputError(name, attempts, error, model_name)
