"""The `react` graph: model <-> tools loop, bounded by `max_steps`.

call_model --(tool calls)--> tools --> call_model ... --(answer: the turn is recorded)--> END
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import UTC, datetime

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from graphs.react.prompts import STEP_LIMIT_PROMPT, SUMMARY_SECTION, SYSTEM_PROMPT
from graphs.react.state import InputState, State
from graphs.runtime.context import Context
from graphs.runtime.events import emit
from graphs.runtime.history import needs_summary, summarize
from graphs.runtime.memory_schedule import remember_turn
from graphs.runtime.models import NOSTREAM_TAGS, ainvoke_with_retries, load_chat_model
from graphs.runtime.tool_runner import run_tool_calls
from graphs.runtime.ui import link_to_answer
from tools.registry import select_tools


def _reasoning_text(message: AIMessage) -> str:
    text = message.additional_kwargs.get("reasoning_content") or ""
    if isinstance(message.content, list):
        text += "".join(
            block.get("reasoning", "") or block.get("thinking", "")
            for block in message.content
            if isinstance(block, dict) and block.get("type") in ("reasoning", "thinking")
        )
    return text


def _system_prompt(context: Context, summary: str, last_step: bool) -> str:
    prompt = context.system_prompt or SYSTEM_PROMPT.format(now=datetime.now(UTC).isoformat(timespec="seconds"))
    if summary:
        prompt += SUMMARY_SECTION.format(summary=summary)
    if last_step:
        prompt += "\n\n" + STEP_LIMIT_PROMPT.format(max_steps=context.max_steps)
    return prompt


async def call_model(state: State, runtime: Runtime[Context], config: RunnableConfig) -> dict:
    """One model step: summarize if over budget, then answer or request tool calls."""
    context = runtime.context
    messages = state["messages"]
    new_turn = isinstance(messages[-1], HumanMessage)
    step = 1 if new_turn else state.get("steps", 0) + 1
    last_step = step >= context.max_steps
    emit("step", step=step, max_steps=context.max_steps)

    model = load_chat_model(context.model, temperature=context.temperature, timeout=context.model_timeout)
    update: dict = {"steps": step}
    summary = state.get("summary", "")
    if needs_summary(messages, context.context_window_tokens):

        def summary_call(prompt: list) -> Awaitable[AIMessage]:
            return ainvoke_with_retries(
                model,
                prompt,
                {"tags": [*NOSTREAM_TAGS, "summarize"]},
                retries=context.model_retries,
                step=step,
                timeout=context.model_timeout,
            )

        result = await summarize(summary_call, messages, summary, context.context_window_tokens)
        if result is not None:
            summary, removals, kept = result
            messages = messages[len(messages) - kept :]
            update.update(summary=summary, messages=removals)
            emit("history_summarized", summarized_messages=len(removals), kept_messages=kept)

    tools = [] if last_step else await select_tools(context.tools)
    bound = model.bind_tools(tools) if tools else model
    prompt = [SystemMessage(_system_prompt(context, summary, last_step)), *messages]
    response = await ainvoke_with_retries(
        bound, prompt, config, retries=context.model_retries, step=step, timeout=context.model_timeout
    )

    if reasoning := _reasoning_text(response):
        emit("thinking", step=step, text=reasoning)
    if last_step:
        emit("step_limit_reached", step=step, max_steps=context.max_steps)
        if response.tool_calls:
            # Never leave a tool call without its result: drop calls made past the limit.
            wanted = ", ".join(call["name"] for call in response.tool_calls)
            response = AIMessage(
                id=response.id,
                content=response.text
                or f"I reached the step limit ({context.max_steps} model calls) before finishing; "
                f"I still wanted to call: {wanted}.",
            )
    update["messages"] = [*update.get("messages", []), response]
    if not response.tool_calls:  # the answer: the turn is over
        await remember_turn([*messages, response], runtime, config)
        update |= link_to_answer({"messages": [response], "ui": state.get("ui")}, config)
    return update


async def call_tools(state: State, runtime: Runtime[Context], config: RunnableConfig) -> dict:
    """Run every tool call of the last model message, concurrently."""
    context = runtime.context
    tools = await select_tools(context.tools)
    return await run_tool_calls(
        state,
        config,
        tools,
        step=state.get("steps", 0),
        timeout_s=context.tool_timeout,
        retries=context.tool_retries,
    )


def route_after_model(state: State) -> str:
    """Tools if the model asked for them, else the turn is over."""
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


# Nodes take (state, runtime, config), which LangGraph runs but add_node's overloads do not type
# (langgraph 1.2 has no runtime + config protocol): hence the `type: ignore`s on add_node below
# (mypy reports the first such call as call-overload, later ones as arg-type).
builder = StateGraph(State, input_schema=InputState, context_schema=Context)
builder.add_node("call_model", call_model)  # type: ignore[call-overload, arg-type]
builder.add_node("tools", call_tools)  # type: ignore[call-overload, arg-type]
builder.add_edge(START, "call_model")
builder.add_conditional_edges("call_model", route_after_model, ["tools", END])
builder.add_edge("tools", "call_model")

graph = builder.compile(name="react")
