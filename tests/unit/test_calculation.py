"""Numeric word problems reach the calculator (graphs/runtime/calculation.py), in react, with a
scripted model: the detector, the calculation asked for as a structured answer and run as a
calculator call, and the check of the final answer."""

from __future__ import annotations

from decimal import Decimal

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

import tools.registry as registry
from graphs.react.graph import builder
from graphs.runtime.calculation import (
    DRAFT_CALCULATION,
    NOT_COMPUTED_NOTE,
    _factors,
    check_answer,
    confirming_part,
    final_figure,
    is_word_problem,
    numbers,
)
from graphs.runtime.context import Context
from tests.fakes import ScriptedChatModel

RENT = "I earn 4,250 a month and spend 37% on rent. How much is left each year after rent?"


@pytest.fixture(autouse=True)
def only_the_calculator(monkeypatch):
    async def available_tools():
        return {"calculator": registry.builtin_tools()["calculator"]}, []

    monkeypatch.setattr(registry, "available_tools", available_tools)


@pytest.mark.parametrize(
    "text",
    [
        RENT,
        "A room is 4.5 m by 3.2 m and tiles cost 18 euros per square metre. What do the tiles cost?",
        "What is 17% of 2340?",
        "How many seconds are there in 3 days?",
        "what's 12 times 3",
        "What is (45 + 55) * 3 - 17?",
        "Five of us share a 156 euro bill and 10 euro tip. What does each pay?",
    ],
)
def test_a_question_with_quantities_is_a_word_problem(text):
    assert is_word_problem(text)


@pytest.mark.parametrize(
    "text",
    [
        "What time is it in Tokyo?",
        "I have 3 cats and 2 dogs.",  # no question
        "What happened in 1989?",  # a year is no quantity
        "Is my 14:30 meeting on 2026-11-28 still on?",  # a time and a date
        "Which city do I live in?",
        "Tell me about Qwen2.5 and GPT4?",  # digits inside names
        "Summarize: " + "In 2019 sales were 12 units and 40 returns. " * 20 + "What changed?",  # a document
        "I have 2 kids aged 5 and 7, what books do you recommend?",  # numbers, no arithmetic asked
        "What's the weather for the next 3 days in 2 cities?",
        "Can you suggest 3 names for my 2 cats?",
        "Is GPT-4 better than GPT-3 for 2 languages?",
    ],
)
def test_other_messages_are_not(text):
    assert not is_word_problem(text)


def test_numbers_reads_digit_groups_and_leaves_out_years_and_times():
    assert numbers("4,250 a month, 37% in 2026 at 14:30; 1\u202f048\u202f576? 2.5") == [4250, 37, 1048576, 2.5]


def _turn(answer: str, result: str | None) -> tuple[list, AIMessage]:
    messages: list = [HumanMessage(RENT)]
    if result is not None:
        call = {"name": "calculator", "args": {"expression": "4250*12*0.63"}, "id": "c1"}
        messages += [AIMessage("", tool_calls=[call]), ToolMessage(result, tool_call_id="c1", name="calculator")]
    return messages, AIMessage(answer)


@pytest.mark.parametrize(
    "answer",
    ["You keep 32,130 a year.", "About 32130.00 per year", "That leaves $32,130."],
)
def test_an_answer_stating_the_result_is_kept(answer):
    messages, final = _turn(answer, "32130")
    assert check_answer(messages, final, step=2).content == answer


def test_an_answer_missing_the_result_gets_it_added():
    messages, final = _turn("\\boxed{0}", "32130")
    checked = check_answer(messages, final, step=2)
    assert checked.content.startswith("\\boxed{0}") and "(Calculator: 4250*12*0.63 = 32130)" in checked.content


def test_a_rounded_result_counts_as_stated():
    messages, final = _turn("Each pays 0.33.", "0.3333333333333333 (exact: 1/3)")
    assert check_answer(messages, final, step=2).content == "Each pays 0.33."
    messages, final = _turn("Each pays 0.", "0.4")
    assert "Calculator" in check_answer(messages, final, step=2).content  # 0 does not state 0.4


def test_figures_no_tool_produced_are_marked_as_not_computed():
    messages, final = _turn("You keep 1607.50 a month.", None)
    assert check_answer(messages, final, step=1).content.endswith(NOT_COMPUTED_NOTE)
    messages, final = _turn("Please tell me what you spend on food.", None)  # no figure: nothing claimed
    assert check_answer(messages, final, step=1).content == "Please tell me what you spend on food."


async def run(model_slot, responses, message=RENT, **context):
    model = ScriptedChatModel(responses=responses)
    model_slot["model"] = model
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    events, tokens = [], []
    async for mode, chunk in graph.astream(
        {"messages": [HumanMessage(message)]},
        config,
        context=Context(model="scripted:test", **context),
        stream_mode=["custom", "messages"],
    ):
        (events if mode == "custom" else tokens).append(chunk)
    state = (await graph.aget_state(config)).values
    streamed = "".join(c[0].content for c in tokens if isinstance(c[0].content, str))
    return state, events, streamed, model


def _calculation(expression: str) -> dict:
    return {"tool_calls": [{"name": "Calculation", "args": {"expression": expression}}]}


def _kinds(events, kind):
    return [e for e in events if e["event"] == kind]


async def test_after_an_answer_without_the_calculator_the_calculation_runs_as_a_tool_call(model_slot):
    state, events, streamed, model = await run(
        model_slot,
        [
            "4250 × 0.37 = 1607.50, so \\boxed{0}",
            _calculation("4250 * 12 * (1 - 0.37)"),
            _calculation("4250 * 0.37"),  # the draft's set-up: 1607.5, not its figure 0
            "You keep 32,130 a year.",
        ],
    )
    messages = state["messages"]
    assert [type(m).__name__ for m in messages] == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    request, result, answer = messages[1], messages[2], messages[3]
    assert request.tool_calls[0]["name"] == "calculator"
    assert request.tool_calls[0]["args"] == {"expression": "4250 * 12 * (1 - 0.37)"}
    assert result.content.startswith("32130")
    assert answer.content == "You keep 32,130 a year."
    # The draft never reached the user: not in the thread, not on the token stream.
    assert "boxed" not in streamed and all("boxed" not in m.text for m in messages)
    assert "32,130" in streamed  # the answer itself streams
    assert _kinds(events, "calculation_requested") == [
        {**_kinds(events, "calculation_requested")[0], "when": "after", "expression": "4250 * 12 * (1 - 0.37)"}
    ]
    assert [e["name"] for e in _kinds(events, "tool_call_finished")] == ["calculator"]
    assert _kinds(events, "answer_checked")[0]["stated"] is True
    # The structured calls offered only the schema; the answer's call saw the calculator's result.
    assert model.calls[1].tool_names == model.calls[2].tool_names == ["Calculation"]
    assert any(isinstance(m, ToolMessage) and m.content.startswith("32130") for m in model.calls[3].messages)
    # The draft's figure (0) is not the result: the model was asked for the calculation its draft
    # sets up, which the calculator does not confirm (1607.5): the first calculation stands.
    assert model.calls[2].messages[-2].text.endswith("\\boxed{0}")
    assert model.calls[2].messages[-1].text == DRAFT_CALCULATION
    assert _kinds(events, "calculation_requested")[0]["from_draft"] is False


TRAIN = "A train covers 270 km in 2 hours and 15 minutes. What is its average speed in km per hour?"


async def test_a_part_of_the_expression_that_gives_the_drafts_figure_is_the_calculation(model_slot):
    """Real model, react-train-speed: the draft reasons 270 / 2.25 = 120, the expression adds a
    factor, and asked again it wrote (270 / 2.25) * 100. The part needs no second request."""
    draft = "15 minutes is 0.25 hours, so the time is 2.25 hours and the speed is 270 / 2.25 = \\boxed{120} km/h."
    state, events, _, model = await run(
        model_slot, [draft, _calculation("(270 / 2.25) * 3600"), "Its speed is 120 km per hour."], message=TRAIN
    )
    assert state["messages"][1].tool_calls[0]["args"] == {"expression": "270 / 2.25"}
    assert state["messages"][2].content.startswith("120")
    [requested] = _kinds(events, "calculation_requested")
    assert (requested["expression"], requested["from_draft"]) == ("270 / 2.25", True)
    assert len(model.calls) == 3


def test_the_part_that_confirms_a_figure():
    assert confirming_part("(270 / 2.25) * 3600", Decimal(120)) == "270 / 2.25"
    assert confirming_part("((4250 - 4250 * 0.37)) * 12", Decimal("2677.5")) == "4250 - 4250 * 0.37"
    assert confirming_part("270 * 3600 / 2.25", Decimal(120)) is None  # no part gives it
    assert confirming_part("120 * 1 * 60", Decimal(120)) is None  # a part writing the figure confirms nothing
    assert confirming_part("37% of 4250", Decimal(1)) is None  # not an expression Python reads: no part


async def test_a_draft_whose_set_up_the_calculator_confirms_gives_the_calculation(model_slot):
    draft = "15 minutes is 0.25 hours, so the time is 2.25 hours and the speed is 270 / 2.25 = \\boxed{120} km/h."
    state, events, _, model = await run(
        model_slot,
        [draft, _calculation("270 * 3600 / 2.25"), _calculation("270 / 2.25"), "Its speed is 120 km per hour."],
        message=TRAIN,
    )
    request = state["messages"][1]
    assert request.tool_calls[0]["args"] == {"expression": "270 / 2.25"}
    assert state["messages"][2].content.startswith("120")  # the figure still comes from the calculator
    [requested] = _kinds(events, "calculation_requested")
    assert (requested["expression"], requested["from_draft"]) == ("270 / 2.25", True)
    assert len(model.calls) == 4


async def test_an_expression_of_the_users_numbers_only_is_kept_whatever_the_draft(model_slot):
    draft = "35 × 18 = 630 and 630 - 420 = 210, so you will have \\boxed{210} euros."  # wrong, consistent
    message = "I already have 420 euros saved and I put away 35 euros every week. How much will I have after 18 weeks?"
    state, events, _, model = await run(
        model_slot, [draft, _calculation("420 + 35 * 18"), "You will have 1050 euros."], message=message
    )
    assert len(model.calls) == 3 and _kinds(events, "calculation_requested")[0]["from_draft"] is False
    assert state["messages"][2].content.startswith("1050")


def test_a_factor_is_a_number_the_user_did_not_give():
    assert _factors("(270 / 2.25) * 3600", TRAIN) and _factors("4250 * 12 * 0.63", RENT)
    assert not _factors("420 + 35 * 18", "I have 420 and add 35 a week. How much after 18 weeks?")
    assert not _factors("4250 * (1 - 0.37)", RENT) and not _factors("4250 * 37 / 100", RENT)


async def test_a_draft_that_states_the_result_costs_no_second_calculation(model_slot):
    draft = "The speed is 270 / 2.25, about 120 km/h."  # right, but not from the calculator
    state, events, _, model = await run(
        model_slot, [draft, _calculation("270 / 2.25"), "Its speed is 120 km per hour."], message=TRAIN
    )
    assert len(model.calls) == 3 and _kinds(events, "calculation_requested")[0]["from_draft"] is False
    assert state["messages"][-1].content == "Its speed is 120 km per hour."


def test_the_final_figure_of_a_draft():
    assert final_figure("so the speed is \\(\\boxed{120}\\) km per hour, not 7200") == 120
    assert final_figure("Rent is 1,607.50, so 32,130 is left in 2024.") == 32130
    assert final_figure("I cannot tell.") is None


async def test_before_asks_for_the_calculation_ahead_of_the_first_answer(model_slot):
    state, events, _, model = await run(
        model_slot, [_calculation("4250*12*0.63"), "That leaves 32130 per year."], calculation="before"
    )
    assert model.calls[0].tool_names == ["Calculation"]
    assert len(model.calls) == 2
    assert state["messages"][-1].content == "That leaves 32130 per year."
    assert _kinds(events, "calculation_requested")[0]["when"] == "before"


async def test_a_model_that_calls_the_calculator_pays_nothing_extra(model_slot):
    call = {"name": "calculator", "args": {"expression": "4250*12*(1-0.37)"}}
    state, events, streamed, model = await run(model_slot, [{"tool_calls": [call]}, "You keep 32,130 a year."])
    assert len(model.calls) == 2 and not _kinds(events, "calculation_requested")
    assert state["messages"][-1].content == "You keep 32,130 a year."


async def test_an_expression_the_calculator_refuses_is_asked_again(model_slot):
    state, _, _, model = await run(
        model_slot,
        [
            "\\boxed{0}",
            _calculation("\\frac{4250}{2}"),
            _calculation("4250*12*0.63"),
            _calculation("0 * 4250"),  # the draft's figure written into the expression confirms nothing
            "32130 a year.",
        ],
    )
    assert "could not be used" in model.calls[2].messages[-1].text  # the calculator's objection, re-asked
    assert state["messages"][-1].content == "32130 a year."
    assert state["messages"][1].tool_calls[0]["args"] == {"expression": "4250*12*0.63"}


async def test_without_a_usable_calculation_the_answer_is_marked_as_not_computed(model_slot):
    state, events, _, _ = await run(model_slot, ["You keep 1607.50.", _calculation("x"), _calculation("y")])
    answer = state["messages"][-1]
    assert answer.content == f"You keep 1607.50.\n\n{NOT_COMPUTED_NOTE}"
    assert _kinds(events, "structured_output_failed") and not _kinds(events, "calculation_requested")


async def test_off_leaves_the_answer_alone_and_other_questions_are_not_touched(model_slot):
    state, events, _, model = await run(model_slot, ["\\boxed{0}"], calculation="off")
    assert state["messages"][-1].content == "\\boxed{0}" and len(model.calls) == 1
    state, events, _, model = await run(model_slot, ["Hello! How can I help?"], message="Hi there, how are you?")
    assert len(model.calls) == 1 and not _kinds(events, "answer_checked")


async def test_tool_choice_none_is_respected(model_slot):
    state, events, _, model = await run(model_slot, ["About 32,000."], tool_choice="none")
    assert len(model.calls) == 1 and not _kinds(events, "calculation_requested")
    assert state["messages"][-1].content.endswith(NOT_COMPUTED_NOTE)  # and not presented as computed


def test_the_mode_is_checked():
    with pytest.raises(ValueError, match="calculation"):
        Context(model="scripted:test", calculation="sometimes")


def save_note_tool(monkeypatch) -> list[tuple[str, str | None]]:
    """The only tool of the run: `save_note`, refusing a category on an episodic note (as
    save_memory does); returns the (kind, category) of each call it ran."""
    from langchain_core.tools import tool

    from tools.errors import ToolInputError

    ran: list[tuple[str, str | None]] = []

    @tool
    def save_note(text: str, kind: str = "semantic", category: str | None = None) -> str:
        """Save a note."""
        ran.append((kind, category))
        if kind == "episodic" and category is not None:
            raise ToolInputError("category applies to semantic memories only")
        return "saved"

    async def available_tools():
        return {"save_note": save_note}, []

    monkeypatch.setattr(registry, "available_tools", available_tools)
    return ran


async def test_a_call_repeated_after_failing_on_its_arguments_is_corrected_before_it_runs(model_slot, monkeypatch):
    """The tool's own argument schema is asked for (shown the failed call and its error); the
    corrected call runs instead of the repeat."""
    ran = save_note_tool(monkeypatch)
    bad = {"name": "save_note", "args": {"text": "I ran a half marathon", "kind": "episodic", "category": "goal"}}
    fixed = {"text": "I ran a half marathon", "kind": "episodic", "category": None}
    state, events, _, model = await run(
        model_slot,
        [
            {"tool_calls": [bad]},
            {"tool_calls": [bad]},  # the same call again
            {"tool_calls": [{"name": "save_note", "args": bad["args"]}]},  # the correction repeats it: re-asked
            {"tool_calls": [{"name": "save_note", "args": fixed}]},
            "Saved it.",
        ],
        message="Save this as an episodic memory in the category goal: I ran a half marathon.",
    )
    assert ran == [("episodic", "goal"), ("episodic", None)]
    assert state["messages"][-1].content == "Saved it."
    asked = model.calls[2]
    assert asked.tool_names == ["save_note"] and "category applies to semantic memories only" in asked.messages[-1].text
    [corrected] = _kinds(events, "tool_call_corrected")
    assert corrected["args"] == fixed and corrected["name"] == "save_note"


async def test_a_model_that_repeats_the_failed_call_everywhere_gets_it_without_the_named_argument(
    model_slot, monkeypatch
):
    """Real model, react-save-memory-error: the same failing call, then the same arguments twice
    as the correction, then `{}` as the answer. The optional argument the error names is left
    out; a turn that still ends on no words says what failed."""
    ran = save_note_tool(monkeypatch)
    bad = {"name": "save_note", "args": {"text": "I ran a half marathon", "kind": "episodic", "category": "goal"}}
    same = {"tool_calls": [{"name": "save_note", "args": bad["args"]}]}
    state, events, _, model = await run(
        model_slot,
        [{"tool_calls": [bad]}, {"tool_calls": [bad]}, same, same, "Saved it."],
        message="Save this as an episodic memory in the category goal: I ran a half marathon.",
    )
    assert ran == [("episodic", "goal"), ("episodic", None)]
    [corrected] = _kinds(events, "tool_call_corrected")
    assert corrected["args"] == {"text": "I ran a half marathon", "kind": "episodic"}
    assert state["messages"][-1].content == "Saved it."

    ran.clear()
    state, _, _, _ = await run(
        model_slot,
        [{"tool_calls": [bad]}, "{}\n"],
        message="Save this as an episodic memory in the category goal: I ran a half marathon.",
    )
    assert state["messages"][-1].content == (
        "I could not complete this: the tool `save_note` failed (category applies to semantic memories only)."
    )
    # Real model: the corrected call ran, then the model answered `{}`: no failure is reported.
    state, _, _, _ = await run(
        model_slot,
        [{"tool_calls": [bad]}, {"tool_calls": [bad]}, same, same, "{}\n"],
        message="Save this as an episodic memory in the category goal: I ran a half marathon.",
    )
    assert state["messages"][-1].content == "Done: `save_note` ran without an error."


def test_only_optional_arguments_the_error_names_are_left_out():
    from pydantic import BaseModel

    from graphs.runtime.tool_correction import is_empty_answer, without_named_optionals

    class Args(BaseModel):
        text: str
        kind: str = "semantic"
        category: str | None = None

    args = {"text": "x", "kind": "episodic", "category": "goal"}
    assert without_named_optionals(Args, args, "category applies to semantic memories only") == {
        "text": "x",
        "kind": "episodic",
    }
    assert without_named_optionals(Args, args, "text is too long") is None  # required: never left out
    assert without_named_optionals(Args, args, "subcategory is unknown") is None  # named as a part of a word only
    assert is_empty_answer("{}\n") and is_empty_answer("") and is_empty_answer(" [] ")
    assert not is_empty_answer("0") and not is_empty_answer("Saved.")


async def test_a_call_corrected_by_the_model_itself_costs_nothing_extra(model_slot, monkeypatch):
    ok = {"name": "calculator", "args": {"expression": "2+2"}}
    state, events, _, model = await run(
        model_slot,
        [{"tool_calls": [{"name": "calculator", "args": {"expression": "2+"}}]}, {"tool_calls": [ok]}, "4"],
        message="Add two and two.",
    )
    assert len(model.calls) == 3 and not _kinds(events, "tool_call_corrected")
