"""`ChatOpenAICompatible`: the chat model class of `openai:*` models (graphs/runtime/models.py).

A module of its own so that `langchain_openai` (and `openai`, about a tenth of a server's
start-up imports) is imported when the first `openai:*` model is made, not when the graphs are
loaded: a replica answers sooner after a restart (server/http.py imports it in the background
once the server is up).
"""

from __future__ import annotations

from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_openai import ChatOpenAI


class ChatOpenAICompatible(ChatOpenAI):
    """`ChatOpenAI` that keeps the `reasoning_content` OpenAI-compatible servers send (vLLM,
    DeepSeek, Ollama, llama.cpp reasoning models), in `additional_kwargs["reasoning_content"]`.
    Plain `ChatOpenAI` drops that non-standard field."""

    def _convert_chunk_to_generation_chunk(
        self, chunk: dict, default_chunk_class: type, base_generation_info: dict | None
    ) -> ChatGenerationChunk | None:
        generation = super()._convert_chunk_to_generation_chunk(chunk, default_chunk_class, base_generation_info)
        choices = chunk.get("choices") or []
        delta = (choices[0].get("delta") or {}) if choices else {}
        if generation is not None and (text := delta.get("reasoning_content")):
            generation.message.additional_kwargs["reasoning_content"] = text
        return generation

    def _create_chat_result(self, response, generation_info: dict | None = None) -> ChatResult:
        result = super()._create_chat_result(response, generation_info)
        raw = response if isinstance(response, dict) else response.model_dump()
        for generation, choice in zip(result.generations, raw.get("choices") or [], strict=False):
            if text := (choice.get("message") or {}).get("reasoning_content"):
                generation.message.additional_kwargs["reasoning_content"] = text
        return result
