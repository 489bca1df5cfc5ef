"""Arithmetic in words reaches the calculator: one mechanism for every agent that offers it.

A user's numeric word problem ("I earn 4,250 a month and spend 37% on rent. How much is left each
year?") is often answered from the model's own arithmetic, which small models get wrong (one
reasons in LaTeX and answers `\\boxed{0}`). Models of every size reliably write the *calculation*
when asked for it as a structured answer (a grammar-constrained `json_schema` on
OpenAI-compatible servers), so:

- `is_word_problem(text)`: a small deterministic detector: a question with numbers and a word
  that asks for arithmetic (how much, a cost, a total, a rate, a percentage, an operation);
- `ask_calculation(...)`: asks the model (graphs/runtime/structured.py) for the arithmetic
  expression that answers the question, checked by evaluating it, and returns it as a normal
  `calculator` tool call, which the agent's tool node runs: the transcript, the events and the
  stream show it like any call the model makes, and the model answers from its result;
- `check_answer(...)`: a turn's final answer to a word problem states the calculator's result,
  or a note adds it; with no result, a figure of the answer the tools did not produce is marked
  as not computed.

When (AGENT_CALCULATION, context `calculation`): `after` (default) asks only when the model
answered a word problem without running the calculator (a model that calls it pays nothing);
that answer, the draft, often sets the problem up right and gets only its arithmetic wrong, while
the bare expression can get a unit factor wrong (a train's 270 km in 2 h 15 min: the draft
reasons 270 / 2.25 = 120 km/h, the expression is `(270 / 2.25) * 3600`). So when the expression
uses a number the user did not give (a factor: 60, 3600, 12) and the draft's final figure is not
its result, a part of the expression that gives the draft's figure is the calculation
(`confirming_part`: `270 / 2.25` of `(270 / 2.25) * 3600`); with none, the model is asked once
more for the calculation its draft sets up; it is taken when
the calculator confirms the draft's figure with it (the figure still comes from the tool), else
the first one stands (an expression of the user's numbers only is kept: a draft can be wrong and
self-consistent, 35 * 18 - 420 for savings that grow);
`before` asks before the turn's first model call (cheapest for a small model on a CPU, which
would otherwise write its own arithmetic first); `off` never.
"""

from __future__ import annotations

import ast
import re
import uuid
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, Field

from graphs.runtime.events import emit
from graphs.runtime.prompts import with_preamble
from graphs.runtime.structured import StructuredOutputError, ainvoke_structured
from tools.calculator import calculator

CALCULATOR = calculator.__name__
MAX_PROBLEM_CHARS = 600
"""A longer message is a document to read, not a word problem: the detector leaves it alone."""
HISTORY_MESSAGES = 6
"""The conversation's last user messages and answers the calculation request reads."""

CALCULATION_PROMPT = """Write the calculation that answers the user's last message as one arithmetic
expression for a calculator: the numbers the user gave, with + - * / ** and parentheses; a
percentage as 37% or 0.37. Only the expression: no words, units, variables, equals signs or LaTeX."""

DRAFT_CALCULATION = """Write the calculation your answer above sets up, as one arithmetic expression
of the numbers it uses, so that a calculator checks its figure."""
"""The second request of `after` when the draft's figure is not the first calculation's result."""

NOT_COMPUTED_NOTE = "(These figures were not computed with a tool: please check them.)"
COMPUTED_NOTE = "(Calculator: {expression} = {result})"

_NUMBER = re.compile(r"(?<![\w.,])\d{1,3}(?:[,\u202f\u00a0]\d{3})+(?:\.\d+)?(?!\w)|(?<![\w.,])\d+(?:\.\d+)?(?![\w])")
_TIME_OR_DATE = re.compile(r"\d{1,2}:\d{2}|\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{2,4}")
_YEAR = re.compile(r"(?:19|20)\d\d")
_QUESTION = re.compile(
    r"\?|^\s*(?:how|what|what's|whats|which|calculate|compute|work out|find)\b", re.IGNORECASE | re.MULTILINE
)
_QUANTITY_CUE = re.compile(
    r"\bhow\s+(?:much|many|long|far|fast|old|often)\b|\bsquare\s+root\b|\bsquared\b|\bcubed\b|\bpower\s+of\b"
    r"|%|\bper\s?cent\b|\bper\b|\beach\b|\bcosts?\b|\bprice\b|\bpa(?:y|ys|id)\b|\btotal\b|\bsum\b"
    r"|\bleft\b|\bremain(?:s|ing)?\b|\baverage\b|\bspeed\b|\brate\b|\btimes\b|\bmultipl(?:y|ied)\b"
    r"|\bdivided\b|\bplus\b|\bminus\b|\bdifference\b|\btwice\b|\bhalf\b|\bdouble\b|\btriple\b"
    r"|\b(?:calculate|compute|work\s+out)\b|\d\s*[-+*/^\u00d7]\s*\d",
    re.IGNORECASE,
)
"""Words that ask for arithmetic: a question with numbers but none of these ("I have 2 kids aged
5 and 7: what books do you recommend?") is left to the model."""
_DIGIT_GROUP = re.compile(r"(?<=\d)[,\u202f\u00a0](?=\d{3}\b)")
_RESULT = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


class Calculation(BaseModel):
    """The arithmetic that answers the user's question, for the calculator."""

    expression: str = Field(
        min_length=1,
        max_length=500,
        description="One arithmetic expression that computes the figure the user asks for, e.g. "
        "(12 + 30) * 1.5 / 4: numbers, + - * / ** and parentheses only; no units, words, "
        "variables or LaTeX; a percentage as 37% or 0.37.",
    )


def numbers(text: str) -> list[Decimal]:
    """The quantities written in `text` (digit grouping read: 4,250 is 4250), leaving out
    clock times, dates and years."""
    text = _TIME_OR_DATE.sub(" ", text)
    found = []
    for match in _NUMBER.finditer(text):
        raw = match.group()
        if _YEAR.fullmatch(raw):
            continue
        try:
            found.append(Decimal(_DIGIT_GROUP.sub("", raw)))
        except InvalidOperation:  # pragma: no cover - the pattern only matches numbers
            continue
    return found


def is_word_problem(text: str) -> bool:
    """Whether a user message asks for a figure computed from numbers it gives: a question with a
    quantity and a cue for arithmetic (how much / many / long, a cost, a total, a rate, a
    percentage, an operation, a power or a root). Years, dates, clock times and long messages do
    not count, nor questions whose numbers ask for no arithmetic."""
    if not text or len(text) > MAX_PROBLEM_CHARS or not _QUESTION.search(text):
        return False
    return bool(numbers(text)) and _QUANTITY_CUE.search(_TIME_OR_DATE.sub(" ", text)) is not None


def _turn(messages: Sequence[AnyMessage]) -> tuple[HumanMessage | None, list[AnyMessage]]:
    """The turn's user message and what followed it."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, HumanMessage):
            return message, list(messages[index + 1 :])
    return None, list(messages)


def calculator_results(messages: Sequence[AnyMessage]) -> list[tuple[str, str]]:
    """(expression, result) of every calculator call of the turn that succeeded, in order."""
    _, turn = _turn(messages)
    expressions = {
        call["id"]: str(call["args"].get("expression", ""))
        for message in turn
        if isinstance(message, AIMessage)
        for call in message.tool_calls
        if call["name"] == CALCULATOR
    }
    return [
        (expressions[message.tool_call_id], message.text)
        for message in turn
        if isinstance(message, ToolMessage)
        and message.tool_call_id in expressions
        and getattr(message, "status", "success") != "error"
    ]


def needs_calculation(messages: Sequence[AnyMessage], offered: Sequence[str], mode: str) -> bool:
    """A calculation should be asked for: `mode` is not `off`, the calculator is `offered`, the
    turn's user message is a word problem and no calculator call of the turn succeeded yet."""
    if mode == "off" or CALCULATOR not in offered:
        return False
    question, _ = _turn(messages)
    return question is not None and is_word_problem(question.text) and not calculator_results(messages)


def _history(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    kept = [m for m in messages if isinstance(m, HumanMessage) or (isinstance(m, AIMessage) and not m.tool_calls)]
    kept = kept[-HISTORY_MESSAGES:]
    while kept and not isinstance(kept[0], HumanMessage):
        kept = kept[1:]
    return [HumanMessage(m.text) if isinstance(m, HumanMessage) else AIMessage(m.text) for m in kept]


def _evaluates(calculation: Calculation) -> str:
    expression = calculation.expression.strip()
    calculator(expression)  # ToolInputError (a ValueError) names what is wrong
    return expression


async def ask_calculation(
    model: BaseChatModel,
    messages: Sequence[AnyMessage],
    config: RunnableConfig | None,
    *,
    when: str,
    retries: int,
    timeout: float | None,
    step: int,
    draft: str = "",
) -> AIMessage:
    """The model's calculation for the turn's word problem as an AI message calling the
    calculator (a `calculation_requested` event says so). With the model's `draft` answer whose
    final figure is not the result of an expression that uses a factor the user did not give,
    the calculation the draft sets up when the calculator gives that figure with it
    (`from_draft` in the event). Raises StructuredOutputError when the model
    gives no expression the calculator accepts."""
    asked = [SystemMessage(with_preamble(CALCULATION_PROMPT)), *_history(messages)]
    options = {"retries": retries, "timeout": timeout, "step": step, "check": _evaluates, "tags": ["calculation"]}
    result = await ainvoke_structured(model, Calculation, asked, config, **options)  # type: ignore[arg-type]
    expression: str = result.value
    figure = final_figure(draft)
    from_draft = False
    first = _value(expression)
    question, _ = _turn(messages)
    factor = _factors(expression, question.text if question else "")
    if factor and figure is not None and first is not None and not _states(str(figure), first):
        part = confirming_part(expression, figure)
        if part is not None:
            expression, from_draft = part, True
        else:
            redo = [*asked, AIMessage(draft), HumanMessage(DRAFT_CALCULATION)]
            try:
                again = await ainvoke_structured(model, Calculation, redo, config, **options)  # type: ignore[arg-type]
            except StructuredOutputError:
                again = None
            if again is not None and _confirms(again.value, figure):
                expression, from_draft = again.value, True
    emit("calculation_requested", step=step, when=when, expression=expression, from_draft=from_draft)
    call = {"name": CALCULATOR, "args": {"expression": expression}, "id": f"call_{uuid.uuid4().hex[:24]}"}
    return AIMessage(content="", tool_calls=[call], response_metadata={"calculation": when})


def confirming_part(expression: str, figure: Decimal) -> str | None:
    """The largest part of `expression` (a parenthesised or operator-bound sub-expression) with
    which the calculator gives `figure` (`_confirms`), or None. The expression a small model
    writes for a word problem often holds its draft's calculation and a unit factor around it
    (`(270 / 2.25) * 3600` for a draft reasoning 270 / 2.25 = 120 km/h): that part is the
    calculation the draft sets up, found without asking the model again."""
    try:
        tree = ast.parse(expression.replace("^", "**"), mode="eval")
    except SyntaxError:
        return None
    parts = [node for node in ast.walk(tree.body) if isinstance(node, ast.BinOp) and node is not tree.body]
    for node in parts:  # breadth first: the largest parts first
        part = ast.unparse(node)
        if _confirms(part, figure):
            return part
    return None


def final_figure(answer: str) -> Decimal | None:
    """The figure an answer ends on: its `\\boxed{...}` one when it has one (LaTeX), else its last
    number; None without a number."""
    boxed = _BOXED.findall(answer)
    found = numbers(boxed[-1] if boxed else answer)
    return found[-1] if found else None


def _factors(expression: str, question: str) -> bool:
    """Whether `expression` uses a number the user's `question` does not give (a unit factor
    such as 60, 3600 or 12, where a small model's expression goes wrong), beyond 1, 100 and a
    given percentage as a fraction (37% as 0.37)."""
    given = set(numbers(question))
    allowed = given | {Decimal(1), Decimal(100)} | {number / 100 for number in given}
    return any(number not in allowed for number in numbers(expression))


def _confirms(expression: str, figure: Decimal) -> bool:
    """Whether the calculator gives `figure` with `expression`, a calculation that does not
    write the figure itself ("0" or "120 * 1" confirms nothing)."""
    value = _value(expression)
    return value is not None and figure not in numbers(expression) and _states(str(figure), value)


def _value(expression: str) -> Decimal | None:
    """The calculator's result for `expression` as a number, None when it gives none."""
    try:
        match = _RESULT.match(calculator(expression).strip())
        return Decimal(match.group()) if match else None
    except (ValueError, InvalidOperation):
        return None


def _states(answer: str, result: Decimal) -> bool:
    """Whether `answer` gives `result`, rounded as written (259.2 for 259.2, 0.33 for 1/3)."""
    for number in numbers(answer):
        places = max(-number.as_tuple().exponent, 0)  # type: ignore[operator]
        if places == 0 and abs(result) < 10 and result != result.to_integral_value():
            continue  # "0" does not state 0.4
        if abs(abs(result) - number) <= Decimal(5) / (Decimal(10) ** (places + 1)):
            return True
    return False


def check_answer(messages: Sequence[AnyMessage], answer: AIMessage, *, step: int) -> AIMessage:
    """The turn's final `answer` to a word problem, made honest about its figures: with a
    calculator result, an answer that does not state it gets it added; without one, an answer
    holding figures the user did not give is marked as not computed. An `answer_checked` event
    says what was found."""
    question, _ = _turn(messages)
    results = calculator_results(messages)
    text = answer.text
    note = ""
    computed = None
    if results:
        expression, output = results[-1]
        match = _RESULT.match(output.strip())
        computed = match.group() if match else None
        if computed is not None and not _states(text, Decimal(computed)):
            note = COMPUTED_NOTE.format(expression=expression, result=output.strip())
    else:
        given = set(numbers(question.text if question else ""))
        if any(number not in given for number in numbers(text)):
            note = NOT_COMPUTED_NOTE
    emit("answer_checked", step=step, computed=computed, stated=not note, note=note)
    if not note:
        return answer
    return answer.model_copy(update={"content": f"{text}\n\n{note}" if text else note})
