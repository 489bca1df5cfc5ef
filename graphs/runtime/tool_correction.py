"""A tool call that failed on its arguments is corrected, not repeated.

A call whose arguments were wrong (`ToolInputError`: "category applies to semantic memories
only") comes back to the model with the error and a request to correct it
(graphs/runtime/tool_runner.py). A small model often makes the very same call again, until the
step budget runs out. `correct_repeated_calls` catches that repeat: before an identical call runs
again, the model is asked for the tool's arguments once more as a structured answer (the tool's
own argument schema, grammar-constrained on OpenAI-compatible servers), shown the failed call and
its error; arguments that differ from the failed ones replace the repeat, and a
`tool_call_corrected` event says so. A model that corrects its calls itself never pays for it.

When the model writes the failed arguments again there too, the optional arguments the error
names are left out (`without_named_optionals`: "category applies to semantic memories only"
drops `category` when the schema lets it be left out), if the schema accepts what remains. A
turn that still ends on no answer at all (a small model wrote `{}`) ends on what failed, in words,
or on which tools ran when none failed for good (`failure_answer`), never on the empty text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ValidationError

from graphs.runtime.events import emit
from graphs.runtime.structured import StructuredOutputError, ainvoke_structured

INPUT_ERROR = "ToolInputError"
"""`additional_kwargs["error_type"]` of a tool result whose call failed on its arguments."""

CORRECTION_PROMPT = """A call of the tool `{tool}` failed because of its arguments. Write the tool's
arguments again, corrected as the error says, so that the call does what the user asked."""

CORRECTION_REQUEST = """{request}

The failed call: {tool} {args}
The error: {error}"""


def _key(name: str, args: Any) -> str:
    return f"{name}:{json.dumps(args, sort_keys=True, default=str)}"


def _turn_start(messages: Sequence[AnyMessage]) -> int:
    """The index of the turn's user message (0 when there is none)."""
    return max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=0)


def failed_on_arguments(messages: Sequence[AnyMessage]) -> dict[str, tuple[dict, str]]:
    """The turn's calls that failed on their arguments: key -> (arguments, error text)."""
    start = _turn_start(messages)
    errors: dict[str, str] = {
        m.tool_call_id: str(m.text)
        for m in messages[start:]
        if isinstance(m, ToolMessage) and m.additional_kwargs.get("error_type") == INPUT_ERROR
    }
    failed: dict[str, tuple[dict, str]] = {}
    for message in messages[start:]:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if (call_id := call.get("id")) in errors:
                    failed[_key(call["name"], call["args"])] = (call["args"], errors[str(call_id)])
    return failed


async def correct_repeated_calls(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    messages: Sequence[AnyMessage],
    response: AIMessage,
    config: RunnableConfig | None,
    *,
    retries: int,
    timeout: float | None,
    step: int,
) -> AIMessage:
    """`response` with each call that repeats one of the turn's calls that failed on their
    arguments replaced by the model's correction (unchanged when none differs)."""
    failed = failed_on_arguments(messages) if response.tool_calls else {}
    if not failed:
        return response
    by_name = {tool.name: tool for tool in tools}
    request = next((m.text for m in reversed(messages) if isinstance(m, HumanMessage)), "")
    calls, changed = [], False
    for call in response.tool_calls:
        tool = by_name.get(call["name"])
        repeat = failed.get(_key(call["name"], call["args"]))
        if tool is None or repeat is None or not isinstance(tool.tool_call_schema, type):
            calls.append(call)
            continue
        args, error = repeat
        corrected = await _ask(model, tool, request, args, error, config, retries=retries, timeout=timeout, step=step)
        if corrected is None:
            calls.append(call)
            continue
        emit("tool_call_corrected", step=step, name=call["name"], error=error, args=corrected)
        calls.append({**call, "args": corrected})
        changed = True
    return response.model_copy(update={"tool_calls": calls}) if changed else response


async def _ask(
    model: BaseChatModel,
    tool: BaseTool,
    request: str,
    args: dict,
    error: str,
    config: RunnableConfig | None,
    *,
    retries: int,
    timeout: float | None,
    step: int,
) -> dict | None:
    schema: type[BaseModel] = tool.tool_call_schema  # type: ignore[assignment]

    def differs(value: BaseModel) -> dict:
        corrected = value.model_dump(exclude_unset=True)
        if _key(tool.name, corrected) == _key(tool.name, args):
            raise ValueError(f"these are the arguments that failed ({error.splitlines()[0]})")
        return corrected

    prompt: list[AnyMessage] = [
        SystemMessage(CORRECTION_PROMPT.format(tool=tool.name)),
        HumanMessage(
            CORRECTION_REQUEST.format(
                request=request, tool=tool.name, args=json.dumps(args, ensure_ascii=False), error=error.splitlines()[0]
            )
        ),
    ]
    try:
        result = await ainvoke_structured(
            model,
            schema,
            prompt,
            config,
            retries=retries,
            timeout=timeout,
            step=step,
            check=differs,
            tags=["tool_correction"],
        )
    except StructuredOutputError:
        return without_named_optionals(schema, args, error)
    return result.value


def without_named_optionals(schema: type[BaseModel], args: dict, error: str) -> dict | None:
    """`args` without the optional arguments the `error`'s first line names, when there are such
    and `schema` accepts the rest; else None."""
    line = error.splitlines()[0] if error else ""
    named = {
        name
        for name in args
        if name in schema.model_fields
        and not schema.model_fields[name].is_required()
        and re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", line)
    }
    if not named:
        return None
    rest = {name: value for name, value in args.items() if name not in named}
    try:
        schema.model_validate(rest)
    except ValidationError:
        return None
    return rest


def failure_answer(messages: Sequence[AnyMessage]) -> str | None:
    """The answer for a turn whose model wrote none (no word, no figure: `{}`) after calling
    tools: the call that failed and was not made to work later, in words; else which tools ran;
    None when the turn called no tool."""
    start = _turn_start(messages)
    results = [m for m in messages[start:] if isinstance(m, ToolMessage)]
    if not results:
        return None
    unresolved = [
        m
        for i, m in enumerate(results)
        if getattr(m, "status", "") == "error"
        and not any(later.name == m.name and getattr(later, "status", "") != "error" for later in results[i + 1 :])
    ]
    if unresolved:
        last = unresolved[-1]
        reason = str(last.text).splitlines()[0] if last.text else "it failed"
        reason = re.sub(r"^Error calling [\w-]+:\s*", "", reason)
        return f"I could not complete this: the tool `{last.name}` failed ({reason})."
    ran = list(dict.fromkeys(str(m.name) for m in results))
    return "Done: " + ", ".join(f"`{name}`" for name in ran) + " ran without an error."


def is_empty_answer(text: str) -> bool:
    """Whether an answer holds no word and no figure (`{}`, `[]`, blank)."""
    return not re.search(r"[^\W_]", text or "")
