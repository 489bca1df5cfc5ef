"""The calculator's arithmetic (tools/calculator.py parses and checks an expression first): the
evaluator over exact `Fraction`s and `float`s, the functions it offers (`_FUNCTIONS`), the size
limits of one evaluation, and how a value is written back as text."""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Context, Decimal
from fractions import Fraction

from settings import settings
from tools.errors import ToolInputError

Number = Fraction | float

MAX_ROOT_INDEX = 100  # exact roots (x**(p/q), q <= this) are tried before falling back to floats
EXACT_DECIMAL_DIGITS = 30  # terminating decimals with at most this many significant digits print exactly
EXACT_DECIMAL_PLACES = 330  # ... and at most this many decimal places
APPROX_DIGITS = 16  # significant digits shown for non-terminating fractions

_LOG2_10 = math.log2(10)

_PERCENT = "_percent"  # internal function a percentage is rewritten to; not a name users can write


@dataclass(frozen=True)
class CalculatorLimits:
    """Size limits of one evaluation."""

    max_chars: int = 1000
    max_digits: int = 10_000

    @property
    def max_bits(self) -> float:
        return self.max_digits * _LOG2_10


def calculator_limits() -> CalculatorLimits:
    """Limits from CALCULATOR_MAX_CHARS and CALCULATOR_MAX_DIGITS, read at call time."""
    config = settings()
    return CalculatorLimits(max_chars=config.CALCULATOR_MAX_CHARS, max_digits=config.CALCULATOR_MAX_DIGITS)


_BINARY_OPS: dict[type[ast.operator], Callable[[Fraction, Fraction], Fraction]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: Fraction(a // b),
    ast.Mod: lambda a, b: a % b,
}
_FLOAT_OPS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}
_BITWISE_OPS = (ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift, ast.Invert)
_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau}


# ---------------------------------------------------------------- evaluation


_TOO_LARGE_FLOAT = "the result is too large for floating point (above about 1.8e308)"
_TOO_SMALL_FLOAT = "the result is too small for floating point (below about 1e-308)"
_TOO_LARGE_INEXACT = f"{_TOO_LARGE_FLOAT} and too long to write exactly"
_TOO_SMALL_INEXACT = f"{_TOO_SMALL_FLOAT} and too long to write exactly"
_NOT_REAL = "a negative number to a fractional power is not real (complex numbers are not supported)"


class _Refused(Exception):
    """An operation that cannot be done; turned into a ToolInputError naming the sub-expression."""


class _Evaluator:
    def __init__(self, source: str, limits: CalculatorLimits):
        self._source = source.encode("utf-8")  # AST column offsets are UTF-8 byte offsets
        self.limits = limits

    def eval(self, node: ast.expr) -> Number:
        """The value of a node that passed _check_tree; refusals name the sub-expression that failed."""
        if isinstance(node, ast.Constant):
            return self._at(node, self._literal, node)
        if isinstance(node, ast.Name):
            return _CONSTANTS[node.id]
        if isinstance(node, ast.UnaryOp):
            value = self.eval(node.operand)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, (ast.Add, ast.Sub)) and _is_percentage(node.right):
                # "a + p%" is a plus p% of a: scale a by 1 +/- p/100
                left, share = self.eval(node.left), self.eval(node.right)
                factor = self._at(node, self.binary, type(node.op), Fraction(1), share)
                return self._at(node, self.binary, ast.Mult, left, factor)
            left, right = self.eval(node.left), self.eval(node.right)
            return self._at(node, self.binary, type(node.op), left, right)
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        args = [self.eval(arg) for arg in node.args]
        if node.func.id == _PERCENT:
            return self._at(node, self.binary, ast.Div, args[0], Fraction(100))
        return self._at(node, _FUNCTIONS[node.func.id][2], self, *args)

    def _at(self, node: ast.expr, operation: Callable[..., Number], *args) -> Number:
        try:
            return operation(*args)
        except _Refused as exc:
            raise ToolInputError(f"Cannot evaluate {self._text(node)}: {exc}.") from None

    def _text(self, node: ast.expr) -> str:
        text = self._source[node.col_offset : node.end_col_offset].decode("utf-8", "replace")
        return repr(text if len(text) <= 80 else text[:77] + "...")

    def _literal(self, node: ast.Constant) -> Number:
        if isinstance(node.value, int):
            return self.fit(Fraction(node.value))
        text = self._source[node.col_offset : node.end_col_offset].decode().replace("_", "").lower()
        exponent = re.search(r"e([+-]?\d+)$", text)
        if exponent and abs(int(exponent.group(1))) > self.limits.max_digits:
            raise _Refused(f"the number is out of range (more than {self.limits.max_digits:,} digits)")
        try:
            return self.fit(Fraction(text))
        except ValueError:  # more digits than int() converts
            raise _Refused("the number has too many digits") from None

    # -- size control

    def bits(self, value: Fraction) -> int:
        return max(value.numerator.bit_length(), value.denominator.bit_length())

    def fit(self, value: Fraction) -> Number:
        """`value` if it is within the digit limit, else a float approximation of a fraction, else refused."""
        if self.bits(value) <= self.limits.max_bits:
            return value
        if value.denominator == 1:
            raise self.too_large(value.numerator.bit_length())
        try:
            approx = float(value)
        except OverflowError:
            raise _Refused(_TOO_LARGE_INEXACT) from None
        if approx == 0.0:
            raise _Refused(_TOO_SMALL_INEXACT)
        return approx

    def too_large(self, bits: float) -> _Refused:
        if not math.isfinite(bits):
            return _Refused(f"the result is too large: far more than {self.limits.max_digits:,} digits")
        digits = int(bits / _LOG2_10) + 1
        return _Refused(f"the result is too large: about {digits:,} digits (the limit is {self.limits.max_digits:,})")

    def to_float(self, value: Number) -> float:
        try:
            return float(value)
        except OverflowError:
            raise _Refused("a number is too large for floating-point math (above about 1.8e308)") from None

    def float_result(self, value: float) -> float:
        if not math.isfinite(value):
            raise _Refused(_TOO_LARGE_FLOAT)
        return value

    # -- operators

    def binary(self, op: type[ast.operator], left: Number, right: Number) -> Number:
        if op is ast.Pow:
            return self.power(left, right)
        if op in (ast.Div, ast.FloorDiv, ast.Mod) and right == 0:
            raise _Refused("division by zero")
        if isinstance(left, float) or isinstance(right, float):
            try:
                return self.float_result(_FLOAT_OPS[op](self.to_float(left), self.to_float(right)))
            except ZeroDivisionError:
                raise _Refused("division by zero (the divisor is below the floating-point range)") from None
        return self.fit(_BINARY_OPS[op](left, right))

    def power(self, base: Number, exponent: Number) -> Number:
        if base == 0 and exponent < 0:
            raise _Refused("division by zero (zero to a negative power)")
        if isinstance(base, float) or isinstance(exponent, float):
            return self.float_power(self.to_float(base), self.to_float(exponent))
        if exponent.denominator == 1:
            return self.integer_power(base, exponent.numerator)
        return self.rational_power(base, exponent)

    def integer_power(self, base: Fraction, exponent: int) -> Number:
        if base == 0:
            return Fraction(1 if exponent == 0 else 0)
        if abs(base) == 1:
            return Fraction(-1 if base < 0 and exponent % 2 else 1)
        count = float(abs(exponent)) if abs(exponent).bit_length() < 1000 else math.inf
        size = count * max(math.log2(abs(base.numerator)), math.log2(base.denominator))
        if size <= self.limits.max_bits:
            return self.fit(base**exponent)
        log_base = _log2_abs(base)
        if log_base == 0.0:
            raise _Refused("the base is too close to 1 for floating point and the exact result is too long")
        magnitude = (count if exponent > 0 else -count) * log_base
        if magnitude > self.limits.max_bits:
            raise self.too_large(magnitude)
        if magnitude > 1024:
            raise _Refused(_TOO_LARGE_INEXACT)
        if magnitude < -1074:
            raise _Refused(_TOO_SMALL_INEXACT)
        # The exact fraction is too long to write but its magnitude fits a float. Going through
        # log2 (log1p near 1) keeps bases close to 1 accurate, where float(base) ** n would lose
        # them: (1 + 1/10**20) ** 10**20 is e, not 1.
        value = self.float_result(math.exp(magnitude * math.log(2)))
        return -value if base < 0 and exponent % 2 else value

    def rational_power(self, base: Fraction, exponent: Fraction) -> Number:
        if base == 0:
            return Fraction(0)  # a negative exponent was refused in power()
        root_index = exponent.denominator
        if base < 0 and root_index % 2 == 0:
            raise _Refused(_NOT_REAL)
        sign = -1 if base < 0 else 1
        if root_index <= MAX_ROOT_INDEX:
            root = _exact_root(abs(base), root_index)
            if root is not None:
                return self.integer_power(sign * root, exponent.numerator)
        magnitude = self.positive_float_power(abs(base), exponent)
        odd_numerator = exponent.numerator % 2
        return -magnitude if sign < 0 and odd_numerator else magnitude

    def positive_float_power(self, base: Fraction, exponent: Fraction) -> float:
        """base ** exponent as a float for an exact base > 0, also for bases beyond the float range."""
        try:
            approx = float(base)
        except OverflowError:
            approx = math.inf
        if 0 < approx < math.inf:
            if exponent == Fraction(1, 2):
                return math.sqrt(approx)
            if exponent == Fraction(1, 3):
                return math.cbrt(approx)
            return self.float_power(approx, self.to_float(exponent))
        magnitude = _log2_abs(base) * self.to_float(exponent)
        if magnitude > 1024:
            raise _Refused(_TOO_LARGE_FLOAT)
        if magnitude < -1074:
            raise _Refused(_TOO_SMALL_FLOAT)
        # base = mantissa * 2**shift with mantissa in (1/2, 2); the power of two is applied exactly
        shift = base.numerator.bit_length() - base.denominator.bit_length()
        mantissa = (base.numerator << max(0, -shift)) / (base.denominator << max(0, shift))
        whole, fraction = divmod(shift * exponent, 1)
        value = math.ldexp(math.pow(mantissa, float(exponent)) * 2.0 ** float(fraction), whole)
        if value == 0.0:
            raise _Refused(_TOO_SMALL_FLOAT)
        return self.float_result(value)

    def float_power(self, base: float, exponent: float) -> float:
        if base == 0 and exponent < 0:
            raise _Refused("division by zero (zero to a negative power)")
        try:
            return self.float_result(math.pow(base, exponent))
        except OverflowError:
            raise _Refused(_TOO_LARGE_FLOAT) from None
        except ValueError:
            raise _Refused(_NOT_REAL) from None

    def whole(self, name: str, value: Number) -> int:
        if isinstance(value, float):
            if not value.is_integer():
                raise _Refused(f"{name}() needs whole numbers, got {_short(value)}")
            return int(value)
        if value.denominator != 1:
            raise _Refused(f"{name}() needs whole numbers, got {_short(value)}")
        return value.numerator

    def float_function(self, name: str, function: Callable[..., float], *args: Number) -> float:
        floats = [self.to_float(arg) for arg in args]
        try:
            return self.float_result(function(*floats))
        except OverflowError:
            raise _Refused(f"{name}(): {_TOO_LARGE_FLOAT}") from None
        except ValueError:
            shown = ", ".join(_short(arg) for arg in args)
            raise _Refused(f"math domain error: {name}({shown}) is undefined for real numbers") from None


def _is_percentage(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == _PERCENT


def _log2_abs(value: Fraction) -> float:
    """log2(|value|), accurate also for values close to 1."""
    value = abs(value)
    if Fraction(1, 2) <= value <= 2:
        return math.log1p(float(value - 1)) / math.log(2)
    return math.log2(value.numerator) - math.log2(value.denominator)


def _short(value: Number) -> str:
    """A number for an error message, without rendering thousands of digits."""
    if isinstance(value, Fraction) and max(value.numerator.bit_length(), value.denominator.bit_length()) > 100:
        return "a very long number"
    return _render(value)


def _exact_root(value: Fraction, index: int) -> Fraction | None:
    """The exact `index`-th root of a non-negative fraction, or None when it is irrational."""
    roots = []
    for part in (value.numerator, value.denominator):
        root = math.isqrt(part) if index == 2 else _integer_root(part, index)
        if root**index != part:
            return None
        roots.append(root)
    return Fraction(roots[0], roots[1])


def _integer_root(n: int, index: int) -> int:
    """floor(n ** (1/index)) for n >= 0 by Newton's method."""
    if n < 2:
        return n
    half = n.bit_length() // index // 2
    if n.bit_length() <= 1000 or half == 0:
        x = int(float(n) ** (1 / index)) + 1
    else:
        # the root of the leading digits gives the leading half of the root's digits
        x = (_integer_root(n >> (index * half), index) + 1) << half
    # One step from any positive start lands at or above the root; from there the steps decrease.
    x = ((index - 1) * x + n // x ** (index - 1)) // index
    while True:
        y = ((index - 1) * x + n // x ** (index - 1)) // index
        if y >= x:
            return x
        x = y


# ---------------------------------------------------------------- functions


def _sqrt(ev: _Evaluator, x: Number) -> Number:
    if x < 0:
        raise _Refused("sqrt() of a negative number is not real (complex numbers are not supported)")
    if isinstance(x, Fraction):
        return ev.rational_power(x, Fraction(1, 2))
    return ev.float_function("sqrt", math.sqrt, x)


def _cbrt(ev: _Evaluator, x: Number) -> Number:
    if isinstance(x, Fraction):
        return ev.rational_power(x, Fraction(1, 3))
    return ev.float_function("cbrt", math.cbrt, x)


def _log_of(function: Callable[[float], float], x: Number) -> float:
    """A logarithm of a positive number; exact fractions of any size via their numerator and denominator."""
    if isinstance(x, float):
        return function(x)
    return function(x.numerator) - function(x.denominator)


def _exact_log(x: Number, base: Number, ev: _Evaluator) -> Fraction | None:
    """The integer k with base**k == x, if x and base are exact and there is one."""
    if isinstance(x, float) or isinstance(base, float):
        return None
    ratio = _log_of(math.log, x) / _log_of(math.log, base)
    if not math.isfinite(ratio):
        return None
    k = round(ratio)
    if abs(k) * max(math.log2(base.numerator), math.log2(base.denominator)) > ev.limits.max_bits + 64:
        return None
    return Fraction(k) if base**k == x else None


def _log_with_base(ev: _Evaluator, x: Number, base: Number, name: str) -> Number:
    if x <= 0:
        raise _Refused(f"math domain error: {name}() is only defined for positive numbers")
    if base <= 0 or base == 1:
        raise _Refused(f"math domain error: the base of {name}() must be positive and not 1")
    if _log_of(math.log, base) == 0:
        raise _Refused(f"the base of {name}() is too close to 1 for floating point")
    exact = _exact_log(x, base, ev)
    if exact is not None:
        return exact
    if base == 2:
        return _log_of(math.log2, x)
    if base == 10:
        return _log_of(math.log10, x)
    return ev.float_result(_log_of(math.log, x) / _log_of(math.log, base))


def _log(ev: _Evaluator, x: Number, base: Number | None = None) -> Number:
    if base is None:
        if x <= 0:
            raise _Refused("math domain error: log() is only defined for positive numbers")
        return _log_of(math.log, x)
    return _log_with_base(ev, x, base, "log")


def _round(ev: _Evaluator, x: Number, ndigits: Number | None = None) -> Number:
    places = 0 if ndigits is None else ev.whole("round", ndigits)
    if abs(places) > ev.limits.max_digits:
        raise _Refused(f"round() can keep at most {ev.limits.max_digits:,} digits")
    scale = Fraction(10) ** places
    scaled = abs(Fraction(x)) * scale
    rounded = math.floor(scaled + Fraction(1, 2)) * (1 if x >= 0 else -1)
    result = Fraction(rounded) / scale
    if ndigits is not None and isinstance(x, float):
        return ev.float_result(float(result))
    return ev.fit(result)


def _factorial(ev: _Evaluator, x: Number) -> Number:
    n = ev.whole("factorial", x)
    if n < 0:
        raise _Refused("math domain error: factorial() is only defined for non-negative whole numbers")
    size = math.lgamma(n + 1) / math.log(2) if n.bit_length() <= 60 else math.inf
    if size > ev.limits.max_bits:
        raise ev.too_large(size)
    return Fraction(math.factorial(n))


def _gcd(ev: _Evaluator, *args: Number) -> Number:
    return Fraction(math.gcd(*(ev.whole("gcd", arg) for arg in args)))


def _lcm(ev: _Evaluator, *args: Number) -> Number:
    result = 1
    for arg in args:
        # each step multiplies two numbers within the limit, then the product is checked
        product = Fraction(math.lcm(result, ev.whole("lcm", arg)))
        ev.fit(product)  # a whole number: kept as it is, or refused as too large
        result = product.numerator
    return Fraction(result)


def _hypot(ev: _Evaluator, *args: Number) -> Number:
    fractions = [arg for arg in args if isinstance(arg, Fraction)]
    if len(fractions) == len(args):
        total = sum((arg * arg for arg in fractions), Fraction(0))
        if ev.bits(total) <= ev.limits.max_bits:
            root = _exact_root(total, 2)
            if root is not None:
                return root
    return ev.float_function("hypot", math.hypot, *args)


def _floor(ev: _Evaluator, x: Number) -> Number:
    return Fraction(math.floor(x))


def _ceil(ev: _Evaluator, x: Number) -> Number:
    return Fraction(math.ceil(x))


def _float_function(name: str, function: Callable[..., float]) -> Callable[..., Number]:
    return lambda ev, *args: ev.float_function(name, function, *args)


_FUNCTIONS: dict[str, tuple[int, int | None, Callable[..., Number]]] = {
    "sqrt": (1, 1, _sqrt),
    "cbrt": (1, 1, _cbrt),
    "exp": (1, 1, _float_function("exp", math.exp)),
    "log": (1, 2, _log),
    "ln": (1, 1, _log),
    "log10": (1, 1, lambda ev, x: _log_with_base(ev, x, Fraction(10), "log10")),
    "log2": (1, 1, lambda ev, x: _log_with_base(ev, x, Fraction(2), "log2")),
    "sin": (1, 1, _float_function("sin", math.sin)),
    "cos": (1, 1, _float_function("cos", math.cos)),
    "tan": (1, 1, _float_function("tan", math.tan)),
    "asin": (1, 1, _float_function("asin", math.asin)),
    "acos": (1, 1, _float_function("acos", math.acos)),
    "atan": (1, 1, _float_function("atan", math.atan)),
    "atan2": (2, 2, _float_function("atan2", math.atan2)),
    "sinh": (1, 1, _float_function("sinh", math.sinh)),
    "cosh": (1, 1, _float_function("cosh", math.cosh)),
    "tanh": (1, 1, _float_function("tanh", math.tanh)),
    "degrees": (1, 1, _float_function("degrees", math.degrees)),
    "radians": (1, 1, _float_function("radians", math.radians)),
    "abs": (1, 1, lambda ev, x: abs(x)),
    "round": (1, 2, _round),
    "floor": (1, 1, _floor),
    "ceil": (1, 1, _ceil),
    "factorial": (1, 1, _factorial),
    "gcd": (1, None, _gcd),
    "lcm": (1, None, _lcm),
    "min": (1, None, lambda ev, *args: min(args)),
    "max": (1, None, lambda ev, *args: max(args)),
    "hypot": (1, None, _hypot),
    "pow": (2, 2, lambda ev, x, y: ev.power(x, y)),
}


# ---------------------------------------------------------------- rendering


def _render(value: Number) -> str:
    if isinstance(value, float):
        return repr(value)
    if value.denominator == 1:
        return str(Decimal(value.numerator))  # Decimal avoids int's 4300-digit str() limit
    exact = _terminating_decimal(value)
    if exact is not None:
        return _format_decimal(exact, plain_below=EXACT_DECIMAL_DIGITS)
    approx = Context(prec=APPROX_DIGITS).divide(Decimal(value.numerator), Decimal(value.denominator))
    if value.numerator.bit_length() + value.denominator.bit_length() <= 300:  # about 90 digits
        return f"{_format_decimal(approx, plain_below=16)} (exact: {value.numerator}/{value.denominator})"
    return f"{_format_decimal(approx, plain_below=16)} (rounded to {APPROX_DIGITS} significant digits)"


def _terminating_decimal(value: Fraction) -> Decimal | None:
    """The exact decimal form of `value` if it is finite and short, else None."""
    denominator = value.denominator
    if denominator.bit_length() > EXACT_DECIMAL_PLACES * _LOG2_10 + 1:
        return None  # more places than allowed whatever its factors; also bounds the loop below
    if abs(value) >= 10**EXACT_DECIMAL_DIGITS:
        return None  # the integer part alone has too many digits
    twos = (denominator & -denominator).bit_length() - 1
    rest, fives = denominator >> twos, 0
    while rest % 5 == 0:
        rest, fives = rest // 5, fives + 1
    places = max(twos, fives)
    if rest != 1 or places > EXACT_DECIMAL_PLACES:
        return None
    digits = value.numerator * 10**places // value.denominator
    if len(str(abs(digits)).rstrip("0")) > EXACT_DECIMAL_DIGITS:
        return None
    return Decimal(digits).scaleb(-places)


def _format_decimal(value: Decimal, plain_below: int) -> str:
    """Plain notation for moderate magnitudes, else scientific like Python floats (1.5e-07, 2e+20)."""
    value = value.normalize(Context(prec=max(len(value.as_tuple().digits), 1)))
    exponent = value.adjusted()
    if -5 <= exponent < plain_below:
        return format(value, "f")
    sign, digits, _ = value.as_tuple()
    mantissa = str(digits[0]) + ("." + "".join(map(str, digits[1:])) if len(digits) > 1 else "")
    return f"{'-' if sign else ''}{mantissa}e{exponent:+03d}"
