"""The `react` graph: model <-> tools loop, bounded by `max_steps`.

call_model --(tool calls)--> tools --> call_model ... --(answer: the turn is recorded)--> END

A model message asking for tools waits in `pending_tool_calls` and joins `messages` with its
results, so a run stopped between the two leaves no tool call without a result in the thread.
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import UTC, datetime

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from graphs.react.prompts import STEP_LIMIT_PROMPT, SUMMARY_SECTION, SYSTEM_PROMPT, TIME_NOTE
from graphs.react.state import InputState, State
from graphs.runtime.calculation import CALCULATOR, ask_calculation, check_answer, is_word_problem, needs_calculation
from graphs.runtime.context import Context
from graphs.runtime.deadline import RunDeadlineExceeded
from graphs.runtime.events import emit
from graphs.runtime.failures import explain_failures
from graphs.runtime.history import needs_summary, summarize
from graphs.runtime.memory_answer import NOT_ANSWERED_NOTE, answer_from_notes
from graphs.runtime.memory_recall import Recalled, recall_for_turn
from graphs.runtime.memory_schedule import remember_turn
from graphs.runtime.models import (
    NOSTREAM_TAGS,
    ainvoke_with_retries,
    ainvoke_with_tools,
    load_chat_model,
    stamp_answer,
)
from graphs.runtime.prompts import with_preamble
from graphs.runtime.structured import StructuredOutputError
from graphs.runtime.tool_correction import (
    correct_repeated_calls,
    failed_on_arguments,
    failure_answer,
    is_empty_answer,
)
from graphs.runtime.tool_offer import MEMORY_LOOKUPS, tools_for_turn
from graphs.runtime.tool_runner import run_tool_calls
from graphs.runtime.ui import link_to_answer
from tools.identity import run_user_id
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
    prompt = context.system_prompt or with_preamble(SYSTEM_PROMPT)
    if summary:
        prompt += SUMMARY_SECTION.format(summary=summary)
    if last_step:
        prompt += "\n\n" + STEP_LIMIT_PROMPT.format(max_steps=context.max_steps)
    return prompt


def _with_time(messages: list[AnyMessage], recalled: str = "") -> list[AnyMessage]:
    """`messages` with the current date and hour and the turn's recalled memories (`recalled`,
    last: what a small model reads last weighs most) added to the latest user message (in the
    prompt only). Per-call text goes last so the system prompt and the tool block before it are
    the same on every call, a prefix the model server's cache can reuse."""
    note = TIME_NOTE.format(now=datetime.now(UTC).strftime("%Y-%m-%d %H:00")) + recalled
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, HumanMessage):
            content = message.content
            if isinstance(content, str):
                content = content + note
            else:
                content = [*content, {"type": "text", "text": note}]
            return [*messages[:index], message.model_copy(update={"content": content}), *messages[index + 1 :]]
    return messages


async def call_model(state: State, runtime: Runtime[Context], config: RunnableConfig) -> dict:
    """One model step: summarize if over budget, then answer or request tool calls."""
    context = runtime.context
    messages = state["messages"]
    new_turn = isinstance(messages[-1], HumanMessage)
    step = 1 if new_turn else state.get("steps", 0) + 1
    last_step = step >= context.max_steps
    emit("step", step=step, max_steps=context.max_steps)

    model = load_chat_model(context.model, **context.sampling(), timeout=context.model_timeout)
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

    if last_step:
        tools = []
    else:
        tools = await _offered_tools(runtime, messages, None if new_turn else state.get("turn_tools"))
        update["turn_tools"] = [tool.name for tool in tools]
    turn_recall = Recalled()
    if new_turn:
        thread_id = (config.get("configurable") or {}).get("thread_id")
        turn_recall = await recall_for_turn(
            runtime.store,
            run_user_id(runtime),
            messages[-1].text,
            top_k=context.recall_top_k,
            thread_id=thread_id,
            max_tokens=context.recall_max_tokens,
        )
        recalled = update["turn_recall"] = turn_recall.note
    else:
        recalled = state.get("turn_recall", "")
    # A numeric word problem's figure comes from the calculator (graphs/runtime/calculation.py).
    calculate = context.tool_choice != "none" and needs_calculation(
        messages, [tool.name for tool in tools], context.calculation
    )
    call_config = config
    try:
        if not calculate and _answers_from_memory(context, turn_recall):
            # A recalled memory very close to the question: answered from it when it answers it
            # (graphs/runtime/memory_answer.py), else the turn goes on with the note and the tools
            # (without the memory lookups when the model found that no memory answers it).
            note_model = load_chat_model(context.model, temperature=context.temperature, timeout=context.model_timeout)
            checked = await answer_from_notes(
                note_model,
                messages[-1].text,
                turn_recall.items,
                config,
                retries=context.model_retries,
                timeout=context.model_timeout,
                step=step,
            )
            if checked.answer is not None:
                stamp_answer(checked.answer, note_model)
                return update | await _finish(state, runtime, config, messages, checked.answer, update)
            if checked.unanswered:  # no memory answers: none is offered again as the answer
                recalled = update["turn_recall"] = recalled + NOT_ANSWERED_NOTE
                tools = [tool for tool in tools if tool.name not in MEMORY_LOOKUPS]
                update["turn_tools"] = [tool.name for tool in tools]
        if calculate and context.calculation == "before" and new_turn:
            if (request := await _calculation(context, messages, config, "before", step)) is not None:
                return update | {"pending_tool_calls": request}
        elif calculate and context.calculation == "after":
            # Its answer is replaced when it skips the calculator: kept off the token stream.
            call_config = {**config, "tags": [*(config.get("tags") or []), *NOSTREAM_TAGS]}
    except RunDeadlineExceeded as exc:
        return update | {"messages": [*update.get("messages", []), AIMessage(str(exc))]}
    prompt = [SystemMessage(_system_prompt(context, summary, last_step)), *_with_time(messages, recalled)]
    try:
        response = await ainvoke_with_tools(
            model,
            tools,
            prompt,
            call_config,
            retries=context.model_retries,
            step=step,
            timeout=context.model_timeout,
            recover=context.recover_tool_calls,
            tool_choice=context.tool_choice_for(first_call=new_turn),
        )
    except RunDeadlineExceeded as exc:  # the run's time is up: say so as the answer
        return update | {"messages": [*update.get("messages", []), AIMessage(str(exc))]}

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
    if calculate and context.calculation == "after" and not response.tool_calls:
        # The model answered a word problem without the calculator: its draft gives way to the
        # calculation, run as a tool call; the model answers from the result.
        try:
            request = await _calculation(context, messages, config, "after", step, response.text)
        except RunDeadlineExceeded:
            request = None
        if request is not None:
            return update | {"pending_tool_calls": request}
    if response.tool_calls:
        # A call that failed on its arguments is corrected before it runs again.
        try:
            if failed_on_arguments(messages):
                response = await correct_repeated_calls(
                    load_chat_model(context.model, temperature=context.temperature, timeout=context.model_timeout),
                    tools,
                    messages,
                    response,
                    config,
                    retries=context.model_retries,
                    timeout=context.model_timeout,
                    step=step,
                )
        except RunDeadlineExceeded:
            pass  # the repeat runs as it is; the next step ends the run
        # Held aside until the tools answer: `messages` never commits a call without its result.
        update["pending_tool_calls"] = response
        return update
    if is_empty_answer(response.text) and (failure := failure_answer(messages)) is not None:
        response = response.model_copy(update={"content": failure})  # "{}" is no answer to show
    offered = update.get("turn_tools") or state.get("turn_tools") or []
    if context.calculation != "off" and CALCULATOR in offered and is_word_problem(_question(messages)):
        response = check_answer(messages, response, step=step)
    return update | await _finish(state, runtime, config, messages, response, update)


async def _finish(
    state: State, runtime: Runtime[Context], config: RunnableConfig, messages: list, response: AIMessage, update: dict
) -> dict:
    """The state update that ends the turn with `response`, the answer: recorded, linked."""
    done: dict = {"messages": [*update.get("messages", []), response], "pending_tool_calls": None}
    await remember_turn([*messages, response], runtime, config)  # the answer: the turn is over
    done |= link_to_answer({"messages": [response], "ui": state.get("ui")}, config)
    return done


def _answers_from_memory(context: Context, recalled: Recalled) -> bool:
    """Whether the turn first asks if its recalled memories answer it: one is at least
    `recall_answer_similarity` close (0: never) and the run does not force a tool call."""
    threshold = context.recall_answer_similarity
    forced = context.tool_choice not in (None, "auto", "none")
    return bool(recalled.items) and threshold > 0 and recalled.best >= threshold and not forced


def _question(messages: list[AnyMessage]) -> str:
    """The text of the turn's user message."""
    return next((m.text for m in reversed(messages) if isinstance(m, HumanMessage)), "")


async def _calculation(
    context: Context, messages: list[AnyMessage], config: RunnableConfig, when: str, step: int, draft: str = ""
) -> AIMessage | None:
    """The turn's calculation as a calculator call (graphs/runtime/calculation.py; `draft`: the
    model's answer without the calculator); None when the model gave no usable expression (the
    turn goes on without it)."""
    model = load_chat_model(context.model, temperature=context.temperature, timeout=context.model_timeout)
    try:
        return await ask_calculation(
            model,
            messages,
            config,
            when=when,
            retries=context.model_retries,
            timeout=context.model_timeout,
            step=step,
            draft=draft,
        )
    except StructuredOutputError:
        return None


async def _offered_tools(
    runtime: Runtime[Context], messages: list[AnyMessage], turn_tools: list[str] | None = None
) -> list[BaseTool]:
    """The tools this turn can use (graphs/runtime/tool_offer.py); on a turn's later calls
    (`turn_tools`: the names its first call offered) the same ones."""
    context = runtime.context
    tools = await select_tools(context.tools)
    if turn_tools is not None:
        return [tool for tool in tools if tool.name in turn_tools]
    user = run_user_id(runtime)
    offered = await tools_for_turn(tools, runtime.store, user, named=bool(context.tools), messages=messages)
    chosen = [tool for tool in tools if tool.name == context.tool_choice and tool not in offered]
    return [*offered, *chosen]  # the tool `tool_choice` names is always offered


async def call_tools(state: State, runtime: Runtime[Context], config: RunnableConfig) -> dict:
    """Run every tool call of the model's pending message, concurrently; commit the message and
    its results to `messages` together."""
    context = runtime.context
    request = state.get("pending_tool_calls")
    if request is None:
        return {}
    tools = await select_tools(context.tools)
    done = await run_tool_calls(
        {**state, "messages": [*state["messages"], request]},
        config,
        tools,
        step=state.get("steps", 0),
        timeout_s=context.tool_timeout,
        retries=context.tool_retries,
    )
    return {**done, "messages": [request, *done["messages"]], "pending_tool_calls": None}


def route_after_model(state: State) -> str:
    """Tools if the model asked for them, else the turn is over."""
    request = state.get("pending_tool_calls")
    return "tools" if isinstance(request, AIMessage) and request.tool_calls else END


# Nodes take (state, runtime, config), which LangGraph runs but add_node's overloads do not type
# (langgraph 1.2 has no runtime + config protocol): hence the `type: ignore`s on add_node below
# (mypy reports the first such call as call-overload, later ones as arg-type).
builder = StateGraph(State, input_schema=InputState, context_schema=Context)
builder.add_node("call_model", call_model)  # type: ignore[call-overload, arg-type]
builder.add_node("tools", call_tools)  # type: ignore[call-overload, arg-type]
builder.add_edge(START, "call_model")
builder.add_conditional_edges("call_model", route_after_model, ["tools", END])
builder.add_edge("tools", "call_model")

graph = explain_failures(builder).compile(name="react")
