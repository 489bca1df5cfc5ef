"""Calculator tool: exact arithmetic and common math functions through a whitelisted AST evaluator.

The expression is parsed with `ast` and walked node by node; nothing is ever passed to eval/exec.
Exact values are `Fraction`s, inexact ones are `float`s. Every operation whose result could be huge
(powers, factorials, long literals) is sized up before it runs, and every exact intermediate result
is checked against the digit limit, so hostile input is refused before any expensive work.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings

from tools.calculator_eval import (  # noqa: F401  (CalculatorLimits, calculator_limits: re-exported)
    _BINARY_OPS,
    _BITWISE_OPS,
    _CONSTANTS,
    _FUNCTIONS,
    _PERCENT,
    CalculatorLimits,
    _Evaluator,
    _render,
    calculator_limits,
)
from tools.errors import ToolInputError

MAX_DEPTH = 200  # deepest nesting evaluated; keeps the recursive evaluator far from Python's limit
MAX_NODES = 1000  # numbers, names, operators and calls in one expression

_TEXT_REPLACEMENTS = {"^": "**", "×": "*", "÷": "/", "−": "-", "π": "pi"}
# Operators in words, as people (and small models) write them: "2 to the power of 10",
# "5 squared", "12 times 3", "10 divided by 4". Only whole-word phrases between operands.
_WORD_OPERATORS = [
    (re.compile(r"\s*\b(?:raised\s+)?to\s+the\s+power\s+of\b\s*", re.IGNORECASE), " ** "),
    (re.compile(r"\s*\braised\s+to\b\s*", re.IGNORECASE), " ** "),
    (re.compile(r"\s*\bsquared\b", re.IGNORECASE), " ** 2"),
    (re.compile(r"\s*\bcubed\b", re.IGNORECASE), " ** 3"),
    (re.compile(r"\s*\b(?:times|multiplied\s+by)\b\s*", re.IGNORECASE), " * "),
    (re.compile(r"\s*\bdivided\s+by\b\s*", re.IGNORECASE), " / "),
]


def calculator(expression: str) -> str:
    """Evaluate a math expression exactly where possible and return the result as text.

    Syntax (Python-like):
    - Numbers: integers and decimals (1_000, 0.1, 2.5e-3). Decimals are exact: 0.1 + 0.2 is 0.3.
    - Operators: + - * / // (floor division) % (modulo, sign of the divisor) ** (power),
      unary + and -, parentheses. `^` also means power (2^10 = 1024, -2^2 = -4, 2^3^2 = 512).
    - Percent: a `%` after a number or a closing parenthesis, with nothing or an operator after it,
      is a percentage: "17%" is 0.17, "17% of 2340", "17% * 2340" and "2340 * 17%" are all 397.8.
      Adding or subtracting a percentage changes the number before it by that share, as on a
      pocket calculator: "2340 + 10%" is 2574 (2340 plus 10% of 2340), "2340 - 10%" is 2106.
      Between two numbers `%` stays the remainder: "7 % 3" is 1; write "7 % (-3)" for a remainder
      by a negative number.
    - A result of this tool can be pasted back in: "0.3333333333333333 (exact: 1/3) * 3" is 1.
    - Constants: pi, e, tau.
    - Functions: sqrt, cbrt, exp, log(x) (natural), log(x, base), ln, log10, log2,
      sin, cos, tan, asin, acos, atan, atan2(y, x), sinh, cosh, tanh (angles in radians),
      degrees, radians, abs, round(x) and round(x, ndigits) (halves round away from zero),
      floor, ceil, factorial, gcd(a, b, ...), lcm(a, b, ...), min(...), max(...),
      hypot(x, y, ...), pow(x, y).
    - Not supported: variables, assignments, comparisons, strings, lists, complex numbers.

    Results: an exact integer ("1267650600228229401496703205376"), an exact decimal ("2.5"),
    a fraction without a short decimal form as 16 significant digits plus the exact value
    ("0.3333333333333333 (exact: 1/3)"), or a floating-point approximation ("1.4142135623730951",
    "1.0", "1e-20") for trigonometric, exponential and logarithmic results and anything computed
    from pi, e or tau. sqrt, cbrt, logs and fractional powers stay exact when the result is
    rational: sqrt(16) = "4", log(1000, 10) = "3", 8**(1/3) = "2".

    Refused with an explanation: invalid or disallowed syntax, division by zero, arguments outside
    a function's domain (sqrt(-1), log(0), asin(2)), and results or intermediate results over
    10,000 digits (2**10000000, factorial(100000)) or beyond the floating-point range (~1.8e308).

    Args:
        expression: one arithmetic expression, at most 1000 characters, e.g. "2**100",
            "(3 + 4.5) * 2 / 7", "sqrt(2) * sin(pi / 4)", "log(1000, 10)", "17% of 2340".

    Returns:
        The value as text, as described above.

    Raises:
        ToolInputError: the expression was refused; the message says why.
    """
    if not isinstance(expression, str):
        raise ToolInputError(f"The expression must be a string, got {type(expression).__name__}.")
    limits = calculator_limits()
    if len(expression) > limits.max_chars:
        raise ToolInputError(f"Expression is too long ({len(expression)} characters; the limit is {limits.max_chars}).")
    source = " ".join(expression.split())  # one line, so AST column offsets index the whole text
    for old, new in _TEXT_REPLACEMENTS.items():
        source = source.replace(old, new)
    for words, operator in _WORD_OPERATORS:
        source = words.sub(operator, source).strip()
    if not source:
        raise ToolInputError("Expression is empty.")
    source = _OWN_EXACT.sub(r"(\1)", _OWN_ROUNDED.sub("", source))  # earlier results pasted in
    source = _mark_percentages(source)
    tree = _parse(source)
    _check_tree(tree)
    return _render(_Evaluator(source, limits).eval(tree.body))


# A result of this tool pasted into a new expression (e.g. a plan step using an earlier step's
# result) reads as its exact value: "0.3333333333333333 (exact: 1/3)" as (1/3).
_OWN_EXACT = re.compile(r"(?<![\d.])[\d.]+(?:e[+-]?\d+)? \(exact: -?(\d+/\d+)\)")  # the sign stays outside
_OWN_ROUNDED = re.compile(r" \(rounded to \d+ significant digits\)")

_PERCENT_FOLLOWERS = {"+", "-", "*", "/", "//", "**", ")", ","}
_PERCENT_ENDS = {tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER}


def _mark_percentages(source: str) -> str:
    """`source` with each percentage `x%` written as `_percent(x)` and the `of` after one as `*`.

    A `%` is a percentage when an operand (a number, a name or a closing parenthesis) comes before
    it and the expression ends, or an operator, `)`, `,` or `of` comes after it; otherwise it stays
    the remainder operator. Text without a percentage is returned unchanged, so refusals quote it.
    """
    if re.search(rf"\b{_PERCENT}\b", source):
        raise ToolInputError(f"Not allowed: unknown name {_PERCENT!r}.")
    if "%" not in source:
        return source
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type != tokenize.INDENT]
    except (tokenize.TokenError, SyntaxError):
        return source  # the parser reports the error
    out: list[str] = []
    open_at: list[int] = []  # indexes in `out` of the parentheses still open
    group_start = -1  # index in `out` where the last closed parenthesised group (or call) starts
    changed = False
    for i, token in enumerate(tokens):
        previous = tokens[i - 1] if i else None
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        if (
            token.string == "%"
            and previous is not None
            and (previous.type in (tokenize.NUMBER, tokenize.NAME) or previous.string == ")")
            and previous.string != "of"
            and following is not None
            and (following.type in _PERCENT_ENDS or following.string in _PERCENT_FOLLOWERS or following.string == "of")
        ):
            start = group_start if previous.string == ")" else len(out) - 1
            out.insert(start, f"{_PERCENT}(")
            out.append(")")
            changed = True
            continue
        if token.string == "of" and previous is not None and previous.string == "%" and out and out[-1] == ")":
            out.append("*")
            continue
        if token.string == "(":
            open_at.append(len(out))
        elif token.string == ")" and open_at:
            group_start = open_at.pop()
            if group_start and re.fullmatch(r"[A-Za-z_]\w*", out[group_start - 1]):
                group_start -= 1  # a call: the percentage is of its value
        if token.type not in _PERCENT_ENDS:
            out.append(token.string)
    if not changed:
        return source
    return " ".join(out).replace("( ", "(").replace(" )", ")")


def _parse(source: str) -> ast.Expression:
    try:
        with warnings.catch_warnings():
            # e.g. "1if": report as a parse error instead of printing a SyntaxWarning
            warnings.simplefilter("error", SyntaxWarning)
            return ast.parse(source, mode="eval")
    except SyntaxError as exc:
        where = f" at column {exc.offset}" if exc.offset else ""
        raise ToolInputError(f"Could not parse the expression: {exc.msg}{where}.") from None
    except (RecursionError, MemoryError):
        raise ToolInputError("Expression is nested too deeply to parse.") from None


# ---------------------------------------------------------------- structure checks (before any math)

_NOT_ALLOWED: dict[type[ast.AST], str] = {
    ast.Attribute: "attribute access (x.name) is not allowed",
    ast.Subscript: "indexing and slicing (x[...]) are not allowed",
    ast.Lambda: "lambda functions are not allowed",
    ast.ListComp: "comprehensions are not allowed",
    ast.SetComp: "comprehensions are not allowed",
    ast.DictComp: "comprehensions are not allowed",
    ast.GeneratorExp: "comprehensions and generator expressions are not allowed",
    ast.JoinedStr: "strings are not allowed, only numbers",
    ast.List: "lists are not supported; write one arithmetic expression",
    ast.Tuple: "tuples are not supported; write one arithmetic expression",
    ast.Set: "sets are not supported; write one arithmetic expression",
    ast.Dict: "dicts are not supported; write one arithmetic expression",
    ast.Compare: "comparisons are not supported",
    ast.BoolOp: "boolean operators (and/or) are not supported",
    ast.IfExp: "conditional expressions are not supported",
    ast.NamedExpr: "assignments are not allowed",
    ast.Starred: "* unpacking is not allowed",
    ast.Await: "await is not allowed",
    ast.Yield: "yield is not allowed",
    ast.YieldFrom: "yield is not allowed",
}


def _check_tree(tree: ast.Expression) -> None:
    """Refuse anything outside the whitelist, too deep or too large, before evaluating anything."""
    stack: list[tuple[ast.AST, int]] = [(tree.body, 1)]
    count = 0
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise ToolInputError(
                f"Expression is too complex (more than {MAX_NODES} numbers, names, operations and calls)."
            )
        if depth > MAX_DEPTH:
            raise ToolInputError(f"Expression is nested too deeply (more than {MAX_DEPTH} levels).")
        stack.extend((child, depth + 1) for child in _allowed_children(node))


def _allowed_children(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.BinOp):
        if type(node.op) in _BINARY_OPS or isinstance(node.op, ast.Pow):
            return [node.left, node.right]
        if isinstance(node.op, _BITWISE_OPS):
            raise ToolInputError("Not allowed: bitwise and shift operators (& | << >>) are not supported.")
        raise ToolInputError(f"Not allowed: the operator {type(node.op).__name__} is not supported.")
    if isinstance(node, ast.UnaryOp):
        if isinstance(node.op, (ast.UAdd, ast.USub)):
            return [node.operand]
        if isinstance(node.op, ast.Not):
            raise ToolInputError("Not allowed: boolean operators (not) are not supported.")
        raise ToolInputError("Not allowed: bitwise operators (~) are not supported.")
    if isinstance(node, ast.Constant):
        _check_constant(node.value)
        return []
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return []
        if node.id in _FUNCTIONS:
            raise ToolInputError(f"Not allowed: {node.id} is a function; call it, e.g. {node.id}(x).")
        raise ToolInputError(
            f"Not allowed: unknown name {node.id!r}. Variables are not supported; the only names are "
            f"the constants {', '.join(_CONSTANTS)} and the functions {', '.join(_FUNCTIONS)}."
        )
    if isinstance(node, ast.Call):
        return _check_call(node)
    reason = _NOT_ALLOWED.get(type(node), f"{type(node).__name__} expressions are not supported")
    raise ToolInputError(f"Not allowed: {reason}.")


def _check_constant(value: object) -> None:
    if isinstance(value, bool):
        raise ToolInputError("Not allowed: True and False are not numbers here.")
    if isinstance(value, complex):
        raise ToolInputError("Not allowed: complex numbers are not supported.")
    if isinstance(value, (str, bytes)):
        raise ToolInputError("Not allowed: strings are not allowed, only numbers.")
    if not isinstance(value, (int, float)):
        raise ToolInputError(f"Not allowed: {value!r} is not a number.")


def _check_call(node: ast.Call) -> list[ast.expr]:
    if not isinstance(node.func, ast.Name):
        if isinstance(node.func, ast.Attribute):
            raise ToolInputError("Not allowed: attribute access (x.name) is not allowed.")
        raise ToolInputError("Not allowed: only the listed functions can be called, by name.")
    name = node.func.id
    if name == _PERCENT and len(node.args) == 1 and not node.keywords:
        return list(node.args)
    if name not in _FUNCTIONS:
        raise ToolInputError(
            f"Not allowed: {name!r} is not an available function. Available functions: {', '.join(_FUNCTIONS)}."
        )
    if node.keywords:
        raise ToolInputError(f"Not allowed: {name}() takes no keyword arguments.")
    if any(isinstance(arg, ast.Starred) for arg in node.args):
        raise ToolInputError("Not allowed: * unpacking is not allowed.")
    low, high, _ = _FUNCTIONS[name]
    given = len(node.args)
    if given < low or (high is not None and given > high):
        if high is None:
            expected = f"at least {low}"
        elif low == high:
            expected = f"exactly {low}"
        else:
            expected = f"{low} or {high}"
        raise ToolInputError(f"{name}() takes {expected} argument(s), {given} given.")
    return list(node.args)
