"""A scripted chat model that emits real tool calls, for graph tests without an LLM.

`ScriptedChatModel(responses=[...])` answers each model call with the next scripted item:

- `str`: a plain text answer;
- `dict`: `{"content": str, "tool_calls": [{"name", "args", "id"?}], "reasoning": str?}`;
- `AIMessage`: used as given (tool call ids filled in when missing);
- an `Exception` instance: raised when that turn is reached (model API errors);
- a callable `(messages) -> any of the above`, for answers computed from the conversation.

The cursor lives in a shared `ScriptState`, so copies made by `bind_tools`, `bind` or
`model_copy` consume one script. Running past its end raises `ScriptExhaustedError`.
Streaming splits text into word chunks and tool calls into `tool_call_chunks` (id and name
first, JSON arguments in further pieces), with reasoning in
`additional_kwargs["reasoning_content"]`, the key `AIMessage.content_blocks` reads as a
reasoning block (DeepSeek, vLLM, Ollama style). The helpers `scripted_message`,
`split_tokens`, `split_arguments` and `approx_tokens` are shared with `tests.openai_server`.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field, model_validator

REASONING_KEY = "reasoning_content"
ARGUMENT_PIECE_CHARS = 8
_TOKEN_RE = re.compile(r"\s*\S+\s*|\s+")
_COUNT_RE = re.compile(r"\w+|[^\w\s]")


class ScriptExhaustedError(RuntimeError):
    """The model was called more often than the script has responses (a test bug)."""


class ScriptItemError(TypeError):
    """A scripted item has a shape this module does not understand (a test bug)."""


@dataclass
class ScriptedCall:
    """What the model saw on one call: the input messages, bound tools and call kwargs."""

    messages: list[BaseMessage]
    tools: list[dict]
    kwargs: dict[str, Any]

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools bound for this call."""
        return [tool["function"]["name"] for tool in self.tools]


class ScriptState:
    """The script, its cursor and the call log, shared by every copy of one model."""

    def __init__(self, responses: list[Any]) -> None:
        self.responses = list(responses)
        self.cursor = 0
        self.next_tool_call_id = 1
        self.calls: list[ScriptedCall] = []
        self.lock = threading.Lock()

    def take(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> AIMessage:
        """Record the call, advance the cursor and return the scripted answer."""
        with self.lock:
            tools = list(kwargs.get("tools") or [])
            extra = {k: v for k, v in kwargs.items() if k != "tools"}
            self.calls.append(ScriptedCall(list(messages), tools, extra))
            if self.cursor >= len(self.responses):
                raise ScriptExhaustedError(
                    f"ScriptedChatModel has no response for call #{len(self.calls)}: "
                    f"all {len(self.responses)} scripted responses were used. "
                    f"Last input message: {_describe(messages[-1]) if messages else '(none)'}"
                )
            item = self.responses[self.cursor]
            self.cursor += 1
            if callable(item) and not isinstance(item, (BaseMessage, Exception)):
                item = item(list(messages))
            if isinstance(item, BaseException):
                raise item
            return scripted_message(item, self._new_tool_call_id)

    def _new_tool_call_id(self) -> str:
        call_id = f"call_{self.next_tool_call_id}"
        self.next_tool_call_id += 1
        return call_id


def _describe(message: BaseMessage) -> str:
    text = message.text
    return f"{message.type}: {text[:200]!r}"


def scripted_message(item: Any, new_tool_call_id: Callable[[], str]) -> AIMessage:
    """Turn a scripted item (str, dict or AIMessage) into an AIMessage with tool call ids."""
    if isinstance(item, str):
        return AIMessage(content=item)
    if isinstance(item, AIMessage):
        if all(call.get("id") for call in item.tool_calls):
            return item
        calls = [{**call, "id": call.get("id") or new_tool_call_id()} for call in item.tool_calls]
        return item.model_copy(update={"tool_calls": calls})
    if isinstance(item, dict):
        unknown = set(item) - {"content", "tool_calls", "reasoning"}
        if unknown:
            raise ScriptItemError(f"Unknown keys {sorted(unknown)} in scripted response {item!r}")
        tool_calls = []
        for call in item.get("tool_calls") or []:
            if "name" not in call:
                raise ScriptItemError(f"Scripted tool call without a name: {call!r}")
            tool_calls.append(
                {
                    "name": call["name"],
                    "args": dict(call.get("args") or {}),
                    "id": call.get("id") or new_tool_call_id(),
                    "type": "tool_call",
                }
            )
        additional_kwargs = {}
        if item.get("reasoning"):
            additional_kwargs[REASONING_KEY] = item["reasoning"]
        return AIMessage(
            content=item.get("content") or "",
            tool_calls=tool_calls,
            additional_kwargs=additional_kwargs,
        )
    raise ScriptItemError(f"Scripted response must be str, dict, AIMessage, Exception or callable, got {item!r}")


def split_tokens(text: str) -> list[str]:
    """Split text into word-sized pieces whose concatenation is the text."""
    return _TOKEN_RE.findall(text)


def split_arguments(arguments: str) -> list[str]:
    """Split a JSON argument string into small pieces, as providers stream them."""
    return [arguments[i : i + ARGUMENT_PIECE_CHARS] for i in range(0, len(arguments), ARGUMENT_PIECE_CHARS)]


def approx_tokens(text: str) -> int:
    """A rough token count: words plus punctuation marks."""
    return len(_COUNT_RE.findall(text))


def _message_tokens(message: BaseMessage) -> int:
    count = approx_tokens(message.text)
    for call in getattr(message, "tool_calls", None) or []:
        count += approx_tokens(call["name"]) + approx_tokens(json.dumps(call["args"]))
    return count


def _usage(messages: Sequence[BaseMessage], answer: AIMessage) -> dict[str, int]:
    input_tokens = sum(_message_tokens(m) for m in messages)
    output_tokens = _message_tokens(answer) + approx_tokens(answer.additional_kwargs.get(REASONING_KEY) or "")
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
    }


class ScriptedChatModel(BaseChatModel):
    """A chat model that plays back a script of answers, tool calls included.

    `calls` lists what the model saw on each call (messages, bound tool schemas, kwargs);
    `remaining` tells how many scripted responses are left.
    """

    responses: list[Any] = Field(default_factory=list, exclude=True)
    script: ScriptState | None = Field(default=None, exclude=True)
    model_name: str = "scripted"

    @model_validator(mode="after")
    def _share_script(self) -> ScriptedChatModel:
        if self.script is None:
            self.script = ScriptState(responses=list(self.responses))
        return self

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def calls(self) -> list[ScriptedCall]:
        """Every call so far, in order, across all copies of this model."""
        return self.script.calls

    @property
    def remaining(self) -> int:
        """How many scripted responses have not been used yet."""
        return len(self.script.responses) - self.script.cursor

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable | Any],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable:
        """Bind tools (converted to OpenAI tool schemas); the copy shares this script."""
        formatted = [convert_to_openai_tool(tool) for tool in tools]
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=formatted, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        answer = self.script.take(messages, kwargs)
        finish_reason = "tool_calls" if answer.tool_calls else "stop"
        update: dict[str, Any] = {
            "response_metadata": {
                "finish_reason": finish_reason,
                "model_name": self.model_name,
                **answer.response_metadata,
            }
        }
        if answer.usage_metadata is None:
            update["usage_metadata"] = _usage(messages, answer)
        message = answer.model_copy(update=update)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        # BaseChatModel fires on_llm_new_token for each yielded chunk (LangGraph's
        # stream_mode="messages" listens there), so this does not call run_manager itself.
        answer = self.script.take(messages, kwargs)
        for chunk in self._chunks(messages, answer):
            yield ChatGenerationChunk(message=chunk)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        answer = self.script.take(messages, kwargs)
        for chunk in self._chunks(messages, answer):
            await asyncio.sleep(0)
            yield ChatGenerationChunk(message=chunk)

    def _chunks(self, messages: list[BaseMessage], answer: AIMessage) -> list[AIMessageChunk]:
        """Break an answer into the chunks a streaming provider would send."""
        msg_id = answer.id
        chunks: list[AIMessageChunk] = []
        reasoning = answer.additional_kwargs.get(REASONING_KEY) or ""
        for piece in split_tokens(reasoning):
            chunks.append(AIMessageChunk(content="", additional_kwargs={REASONING_KEY: piece}, id=msg_id))
        if isinstance(answer.content, str):
            chunks.extend(AIMessageChunk(content=piece, id=msg_id) for piece in split_tokens(answer.content))
        elif answer.content:
            chunks.append(AIMessageChunk(content=answer.content, id=msg_id))
        for index, call in enumerate(answer.tool_calls):
            chunks.append(
                AIMessageChunk(
                    content="",
                    id=msg_id,
                    tool_call_chunks=[tool_call_chunk(name=call["name"], args="", id=call["id"], index=index)],
                )
            )
            for piece in split_arguments(json.dumps(call["args"])):
                chunks.append(
                    AIMessageChunk(
                        content="",
                        id=msg_id,
                        tool_call_chunks=[tool_call_chunk(name=None, args=piece, id=None, index=index)],
                    )
                )
        chunks.append(
            AIMessageChunk(
                content="",
                id=msg_id,
                usage_metadata=answer.usage_metadata or _usage(messages, answer),
                response_metadata={
                    "finish_reason": "tool_calls" if answer.tool_calls else "stop",
                    "model_name": self.model_name,
                },
                chunk_position="last",
            )
        )
        return chunks
