"""Tests of the calculator tool: exact results, function coverage, and refusal of hostile input."""

import math
import multiprocessing
import os
import resource
import sys

import pytest

from tools.calculator import MAX_DEPTH, calculator, calculator_limits
from tools.errors import ToolInputError

NORMAL = [
    # integers stay exact
    ("1+1", "2"),
    ("2**100", "1267650600228229401496703205376"),
    ("2^10", "1024"),
    ("1_000_000 * 3", "3000000"),
    ("123456789 * 987654321", "121932631112635269"),
    ("7 // 2", "3"),
    ("-7 // 2", "-4"),
    ("7 % 3", "1"),
    ("-7 % 3", "2"),
    ("0**0", "1"),
    ("(-1)**1001", "-1"),
    # precedence and unary minus
    ("2 + 3 * 4", "14"),
    ("(2 + 3) * 4", "20"),
    ("-2**2", "-4"),
    ("(-2)**2", "4"),
    ("-2^2", "-4"),
    ("2**3**2", "512"),
    ("2^3^2", "512"),
    ("2^3 + 1", "9"),
    ("2**-1", "0.5"),
    ("--3", "3"),
    ("+5 - -5", "10"),
    ("10 - 2 - 3", "5"),
    ("100 / 10 / 5", "2"),
    # exact division and decimals
    ("10/4", "2.5"),
    ("0.1 + 0.2", "0.3"),
    ("0.1 * 3", "0.3"),
    ("1/3", "0.3333333333333333 (exact: 1/3)"),
    ("2/3", "0.6666666666666667 (exact: 2/3)"),
    ("-1/3", "-0.3333333333333333 (exact: -1/3)"),
    ("1/3 + 1/6", "0.5"),
    ("3 * (1/3)", "1"),
    ("(2/3)**2", "0.4444444444444444 (exact: 4/9)"),
    ("10**20 / 3", "3.333333333333333e+19 (exact: 100000000000000000000/3)"),
    ("2**-10", "0.0009765625"),
    ("7.5 % 2", "1.5"),
    ("1e-5", "0.00001"),
    ("1e-25", "1e-25"),
    ("2.5e3", "2500"),
    ("1e400 / 1e399", "10"),
    ("123456789.123456789", "123456789.123456789"),
    # roots, powers and logs that are exact when the result is rational
    ("sqrt(16)", "4"),
    ("sqrt(1/4)", "0.5"),
    ("sqrt(2)", "1.4142135623730951"),
    ("sqrt(0)", "0"),
    ("cbrt(27)", "3"),
    ("cbrt(-27)", "-3"),
    ("8**(1/3)", "2"),
    ("(-8)**(1/3)", "-2"),
    ("4**0.5", "2"),
    ("27**(2/3)", "9"),
    ("2**0.5", "1.4142135623730951"),
    ("pow(2, 10)", "1024"),
    ("log(1000, 10)", "3"),
    ("log10(1000)", "3"),
    ("log10(0.001)", "-3"),
    ("log2(1/8)", "-3"),
    ("log(81, 3)", "4"),
    ("log(e)", "1.0"),
    ("ln(10)", "2.302585092994046"),
    ("log(10)", "2.302585092994046"),
    ("log2(10)", "3.321928094887362"),
    ("log(10**5000)", str(5000 * math.log(10))),
    ("exp(1)", "2.718281828459045"),
    ("exp(0)", "1.0"),
    # trigonometry and friends, in radians
    ("sin(pi/2)", "1.0"),
    ("cos(0)", "1.0"),
    ("tan(pi/4)", repr(math.tan(math.pi / 4))),
    ("asin(1)", repr(math.pi / 2)),
    ("acos(-1)", repr(math.pi)),
    ("atan(1) * 4", repr(math.atan(1) * 4)),
    ("atan2(1, 1)", "0.7853981633974483"),
    ("sinh(1)", repr(math.sinh(1))),
    ("cosh(0)", "1.0"),
    ("tanh(0.5)", repr(math.tanh(0.5))),
    ("degrees(pi)", "180.0"),
    ("radians(180)", "3.141592653589793"),
    ("pi", "3.141592653589793"),
    ("e", "2.718281828459045"),
    ("tau", "6.283185307179586"),
    ("2*pi", "6.283185307179586"),
    # integer functions and rounding
    ("factorial(20)", "2432902008176640000"),
    ("factorial(0)", "1"),
    ("gcd(12, 18)", "6"),
    ("gcd(12, 18, 8)", "2"),
    ("lcm(4, 6, 10)", "60"),
    ("abs(-3.5)", "3.5"),
    ("abs(-7)", "7"),
    ("min(3, 1.5, 2)", "1.5"),
    ("max(1, 2, 2.5)", "2.5"),
    ("hypot(3, 4)", "5"),
    ("hypot(1, 1)", "1.4142135623730951"),
    ("round(2.5)", "3"),
    ("round(-2.5)", "-3"),
    ("round(2.675, 2)", "2.68"),
    ("round(1234, -2)", "1200"),
    ("round(pi, 3)", "3.142"),
    ("floor(-2.5)", "-3"),
    ("ceil(2.1)", "3"),
    ("floor(pi)", "3"),
    # mixing exact and floating-point values
    ("1/3 + pi", repr(1 / 3 + math.pi)),
    ("2*pi/0.0001", repr(2 * math.pi / 0.0001)),
    # bases close to 1 raised to huge powers keep their precision
    ("(1 + 1/10**20)**(10**20)", "2.718281828459045"),
    # unicode operators and whitespace
    ("3 × 4 ÷ 2 − 1", "5"),
    ("2 * π", "6.283185307179586"),
    ("  2 +\n 3  ", "5"),
]


@pytest.mark.parametrize(("expression", "expected"), NORMAL)
def test_normal_expressions(expression, expected):
    assert calculator(expression) == expected


PERCENT = [
    # the forms people write; a percentage is a hundredth
    ("17% of 2340", "397.8"),
    ("17 % of 2340", "397.8"),
    ("17% * 2340", "397.8"),
    ("2340 * 17%", "397.8"),
    ("17%", "0.17"),
    ("2340 / 50%", "4680"),
    ("(100 + 50)%", "1.5"),
    ("sqrt(16)%", "0.04"),
    ("-5%", "-0.05"),
    # adding or subtracting a percentage scales the number before it
    ("2340 + 10%", "2574"),
    ("2340 - 10%", "2106"),
    ("(2340 * 17%) + 10%", "437.58"),
    ("50% - 10", "-9.5"),
    ("max(1, 2%) + 10%", "1.1"),
    # a result of the calculator pasted back in reads as its exact value
    ("0.3333333333333333 (exact: 1/3) * 3", "1"),
    ("-0.6666666666666667 (exact: -2/3) + 1", "0.3333333333333333 (exact: 1/3)"),
    ("5-0.6666666666666667 (exact: -2/3)", "4.333333333333333 (exact: 13/3)"),
    ("1.233840596906173e+176 (rounded to 16 significant digits) / 1e176", "1.233840596906173"),
    # between two operands % stays the remainder
    ("7 % 3", "1"),
    ("7%3", "1"),
    ("7 % (-3)", "-2"),
    ("7.5 % 2", "1.5"),
]


@pytest.mark.parametrize(("expression", "expected"), PERCENT)
def test_percent_forms(expression, expected):
    assert calculator(expression) == expected


def test_percentages_keep_the_size_limits():
    with pytest.raises(ToolInputError, match="too large"):
        calculator("2**10000000%")
    with pytest.raises(ToolInputError, match="too large"):
        calculator("9**9**9 * 17%")
    with pytest.raises(ToolInputError, match="nested too deeply"):
        calculator("+".join(["1%"] * (MAX_DEPTH + 1)))
    with pytest.raises(ToolInputError, match="parse"):
        calculator("17% of")


def test_percent_rewrite_is_not_a_name_users_can_call():
    with pytest.raises(ToolInputError, match="unknown name"):
        calculator("_percent(5)")


def test_implicit_multiplication_is_a_parse_error():
    with pytest.raises(ToolInputError, match="parse"):
        calculator("2π")


def test_large_exact_results_are_complete():
    assert calculator("factorial(1000)") == str(math.factorial(1000))
    # beyond int's 4300-digit str() limit
    assert calculator("10**9999") == "1" + "0" * 9999
    assert calculator("3**6000 - 3**6000 + 1") == "1"


def test_huge_numbers_that_cancel_stay_exact():
    assert calculator("(10**5000 + 1) - 10**5000") == "1"
    assert calculator("2**33000 // 2**32990") == "1024"


def test_long_fraction_is_rounded_and_says_so():
    assert calculator("1.5**1000") == "1.233840596906173e+176 (rounded to 16 significant digits)"


def test_fraction_beyond_the_digit_limit_falls_back_to_floating_point():
    # the exact value 10001**100000 / 10**400000 has 400,001 digits
    assert float(calculator("1.0001**100000")) == pytest.approx(math.exp(100000 * math.log1p(0.0001)), rel=1e-12)


def test_roots_of_numbers_beyond_float_range():
    assert float(calculator("sqrt(10**401)")) == pytest.approx(10**200.5, rel=1e-15)
    assert float(calculator("cbrt(-10**400 - 1)")) == pytest.approx(-2.154434690031883721759e133, rel=1e-15)


def test_non_string_input_is_refused():
    with pytest.raises(ToolInputError, match="string"):
        calculator(42)  # type: ignore[arg-type]


def test_limits_come_from_environment_at_call_time(monkeypatch):
    assert calculator_limits().max_digits == 10_000
    monkeypatch.setenv("CALCULATOR_MAX_DIGITS", "50")
    assert calculator("2**100") == "1267650600228229401496703205376"
    with pytest.raises(ToolInputError, match="limit is 50"):
        calculator("2**200")
    monkeypatch.setenv("CALCULATOR_MAX_CHARS", "10")
    with pytest.raises(ToolInputError, match="limit is 10"):
        calculator("1+1+1+1+1+1")


def test_invalid_limit_configuration_is_reported(monkeypatch):
    monkeypatch.setenv("CALCULATOR_MAX_DIGITS", "lots")
    with pytest.raises(ValueError, match="CALCULATOR_MAX_DIGITS"):
        calculator("1+1")


def test_refusal_names_the_failing_subexpression():
    with pytest.raises(ToolInputError) as caught:
        calculator("1 + 9**9**9**9")
    assert "'9**9**9'" in str(caught.value)
    assert "digits" in str(caught.value)


def test_works_as_a_langchain_tool():
    from langchain_core.tools import tool

    for parse_docstring in (False, True):
        calculator_tool = tool(calculator, parse_docstring=parse_docstring)
        assert calculator_tool.name == "calculator"
        assert set(calculator_tool.args) == {"expression"}
        for word in ("sqrt", "factorial", "atan2", "^", "exact", "10,000 digits"):
            assert word in calculator_tool.description
        assert calculator_tool.invoke({"expression": "2^10"}) == "1024"


# Each hostile expression is evaluated in a forked child with a time guard and a memory cap, so a
# missing size check fails the test instead of hanging the suite or exhausting memory. This is a
# hang guard, not a speed assertion: refusals take well under a millisecond.
HANG_GUARD_SECONDS = 5.0
CHILD_EXTRA_MEMORY = 512 * 2**20

HOSTILE = [
    # results too large
    ("9**9**9**9", "too large"),
    ("10**10**10", "too large"),
    ("2**10000000", "3,010,300 digits"),
    ("-(10**10**10)", "too large"),
    ("factorial(100000)", "456,574 digits"),
    ("factorial(10**100)", "too large"),
    ("2**33000 * 2**33000", "too large"),
    ("(2**20000)**2", "too large"),
    ("10**9999 * 10", "limit is 10,000"),
    ("lcm(2**20000 - 1, 2**20000 + 1)", "too large"),
    ("1e100000", "out of range"),
    ("0.5**-100000", "too large"),
    ("2**-10000000", "too small"),
    ("exp(1000)", "floating point"),
    ("sinh(10**6)", "floating point"),
    ("1e400 * pi", "too large for floating-point"),
    ("pi**(10**400)", "too large for floating-point"),
    ("round(1, 10**9)", "at most 10,000 digits"),
    # length and nesting
    ("(" * 500 + "1" + ")" * 500, "too long"),
    ("+".join(["1"] * 10_000), "too long"),
    ("-" * 300 + "1", "nested too deeply"),
    ("+".join(["1"] * 300), "nested too deeply"),
    ("(" * 300 + "1" + ")" * 300, "too many nested parentheses"),
    # names, attributes and calls outside the whitelist
    ("__import__('os')", "not an available function"),
    ("__import__('os').system('true')", "attribute access"),
    ("().__class__", "attribute access"),
    ("(1).real", "attribute access"),
    ("math.sqrt(2)", "attribute access"),
    ("open('x')", "not an available function"),
    ("exec('1')", "not an available function"),
    ("print(1)", "not an available function"),
    ("x + 1", "unknown name 'x'"),
    ("__builtins__", "unknown name"),
    ("sqrt", "is a function"),
    ("sqrt(x=4)", "keyword"),
    ("sqrt(1, 2)", "exactly 1 argument"),
    ("max()", "at least 1 argument"),
    ("gcd(*[1, 2])", "unpacking"),
    # other syntax outside arithmetic
    ("lambda: 1", "lambda"),
    ("[x for x in (1, 2)]", "comprehensions"),
    ("sum(x for x in (1, 2))", "not an available function"),
    ("(1, 2)[0]", "indexing"),
    ("'abc'", "strings"),
    ("f'{1}'", "strings"),
    ("b'x'", "strings"),
    ("{1: 2}", "dicts"),
    ("[1, 2]", "lists"),
    ("1, 2", "tuples"),
    ("1 < 2", "comparisons"),
    ("1 and 2", "boolean"),
    ("not 1", "boolean"),
    ("1 if 1 else 2", "conditional"),
    ("(y := 2)", "assignments"),
    ("2 << 3", "shift"),
    ("6 & 3", "bitwise"),
    ("~1", "bitwise"),
    ("True + 1", "True and False"),
    ("None", "not a number"),
    ("1j * 2", "complex"),
    ("import os", "parse"),
    ("1; 2", "parse"),
    ("2 +", "parse"),
    ("", "empty"),
    ("   ", "empty"),
    # division by zero
    ("1/0", "division by zero"),
    ("1//0", "division by zero"),
    ("5 % 0", "division by zero"),
    ("0**-1", "division by zero"),
    ("1/(1-1)", "division by zero"),
    ("pi/0", "division by zero"),
    ("pi / 1e-5000", "division by zero"),
    # outside a function's domain
    ("sqrt(-1)", "not real"),
    ("sqrt(-pi)", "not real"),
    ("(-8)**0.5", "not real"),
    ("(-pi)**0.5", "not real"),
    ("log(0)", "only defined for positive numbers"),
    ("log(-5)", "only defined for positive numbers"),
    ("log10(-1)", "only defined for positive numbers"),
    ("log(8, 1)", "base"),
    ("asin(2)", "domain"),
    ("acos(-1.5)", "domain"),
    ("factorial(-1)", "non-negative whole numbers"),
    ("factorial(2.5)", "whole numbers"),
    ("gcd(1.5, 3)", "whole numbers"),
]


def _evaluate_in_child(expression: str, writer) -> None:
    with open("/proc/self/statm") as statm:
        current = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (current + CHILD_EXTRA_MEMORY, current + CHILD_EXTRA_MEMORY))
    try:
        outcome = ("ok", calculator(expression))
    except ToolInputError as exc:
        outcome = ("refused", str(exc))
    except BaseException as exc:
        outcome = ("crashed", f"{type(exc).__name__}: {exc}")
    writer.send(outcome)


def evaluate_guarded(expression: str) -> tuple[str, str]:
    """Evaluate in a forked child; fail if it has not answered within HANG_GUARD_SECONDS."""
    context = multiprocessing.get_context("fork")
    reader, writer = context.Pipe(duplex=False)
    child = context.Process(target=_evaluate_in_child, args=(expression, writer), daemon=True)
    child.start()
    writer.close()
    try:
        if not reader.poll(HANG_GUARD_SECONDS):
            pytest.fail(f"{expression[:60]!r} still running after {HANG_GUARD_SECONDS} s: a size check is missing")
        return reader.recv()
    except EOFError:
        pytest.fail(f"{expression[:60]!r} killed the evaluating process (exit code {child.exitcode})")
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        reader.close()


def test_hostile_suite_is_large_enough():
    assert len(HOSTILE) >= 25


@pytest.mark.parametrize(("expression", "reason"), HOSTILE, ids=[case[0][:40] for case in HOSTILE])
def test_hostile_expression_is_refused_with_reason(expression, reason):
    status, message = evaluate_guarded(expression)
    assert status == "refused", f"{status}: {message}"
    assert reason.lower() in message.lower()


def test_hang_guard_fails_instead_of_hanging(monkeypatch):
    def endless(expression: str) -> str:
        while True:
            pass

    monkeypatch.setattr(sys.modules[__name__], "calculator", endless)
    monkeypatch.setattr(sys.modules[__name__], "HANG_GUARD_SECONDS", 0.5)
    with pytest.raises(pytest.fail.Exception, match="still running"):
        evaluate_guarded("1+1")


def test_memory_cap_stops_a_huge_allocation(monkeypatch):
    def hungry(expression: str) -> str:
        return str(len(bytearray(2 * CHILD_EXTRA_MEMORY)))

    monkeypatch.setattr(sys.modules[__name__], "calculator", hungry)
    status, message = evaluate_guarded("1+1")
    assert status == "crashed" and "MemoryError" in message


def test_depth_limit_is_exact():
    assert calculator("+".join(["1"] * MAX_DEPTH)) == str(MAX_DEPTH)
    with pytest.raises(ToolInputError, match="nested too deeply"):
        calculator("+".join(["1"] * (MAX_DEPTH + 1)))


def test_wider_limits_still_refuse_deep_nesting_and_huge_expressions(monkeypatch):
    monkeypatch.setenv("CALCULATOR_MAX_CHARS", "1000000")
    for expression, reason in [
        ("(" * 500 + "1" + ")" * 500, "too many nested parentheses"),
        ("+".join(["1"] * 10_000), "nested too deeply"),
        ("-" * 5000 + "1", "nested too deeply"),
        ("9" * 5000, "parse"),
        ("1.5" + "0" * 5000 + "1", "too many digits"),
    ]:
        status, message = evaluate_guarded(expression)
        assert status == "refused", f"{status}: {message}"
        assert reason in message


def test_error_is_a_tool_input_error_and_a_value_error():
    with pytest.raises(ValueError):
        calculator("1/0")


WORD_OPERATORS = [
    # operators in words, as people and small models write them in a plan step
    ("2 to the power of 10", "1024"),
    ("2 raised to the power of 10", "1024"),
    ("3 raised to 4", "81"),
    ("5 squared", "25"),
    ("(1 + 2) cubed", "27"),
    ("12 Times 3", "36"),
    ("7 multiplied by 6", "42"),
    ("10 divided by 4", "2.5"),
    ("17% of 2340 times 2", "795.6"),
]


@pytest.mark.parametrize(("expression", "expected"), WORD_OPERATORS)
def test_operators_written_in_words(expression, expected):
    assert calculator(expression) == expected


def test_a_word_operator_without_an_operand_is_refused_clearly():
    with pytest.raises(ToolInputError, match="parse"):
        calculator("2 to the power of")
