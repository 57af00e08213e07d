"""The parts of a docstring that follow from a function's kind: an elementwise row, a
comparison, another row of the op table, or a function outside it; and the method form
of a ``tapegrad.numpy`` function (``Tensor.sum``)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from dataclasses import dataclass, field
from typing import Any

from ..ops import Kind, Op


@dataclass
class Doc:
    """What is written about one function; empty fields take the kind's defaults.

    ``raises`` replaces the kind's Raises entries, ``more_raises`` adds to them;
    ``notes`` comes before the kind's notes; ``library`` is the See Also line of the
    NumPy or SciPy function (``""``: none); ``example`` is code run for Examples."""

    summary: str = ""
    body: str | None = None
    params: dict[str, tuple[str, str]] = field(default_factory=dict)
    returns: str = ""
    raises: list[tuple[str, str]] | None = None
    more_raises: list[tuple[str, str]] = field(default_factory=list)
    see: tuple[str, ...] = ()
    library: str | None = None
    family: bool = True
    notes: str = ""
    example: str = ""


# --- elementwise rows ------------------------------------------------------------------------

# Summaries of the rows whose op table ``doc`` is a formula rather than a name
ELEMENTWISE_SUMMARY = {
    "add": "Add the inputs, elementwise: ``x + y``.",
    "subtract": "Subtract the inputs, elementwise: ``x - y``.",
    "multiply": "Multiply the inputs, elementwise: ``x * y``.",
    "true_divide": "Divide the inputs, elementwise: ``x / y``.",
    "power": "First input raised to the second, elementwise: ``x ** y``.",
    "maximum": "Elementwise maximum of the inputs.",
    "minimum": "Elementwise minimum of the inputs.",
    "negative": "Numerical negative, elementwise: ``-x``.",
    "exp": "Exponential, elementwise: ``e ** x``.",
    "absolute": "Absolute value, elementwise: ``|x|``.",
    "less": "Truth value of ``x < y``, elementwise.",
    "less_equal": "Truth value of ``x <= y``, elementwise.",
    "greater": "Truth value of ``x > y``, elementwise.",
    "greater_equal": "Truth value of ``x >= y``, elementwise.",
    "equal": "Truth value of ``x == y``, elementwise.",
    "not_equal": "Truth value of ``x != y``, elementwise.",
    "expm1": "``exp(x) - 1``, elementwise, accurate near 0.",
    "exp2": "Base-2 exponential, elementwise: ``2 ** x``.",
    "log1p": "``log(1 + x)``, elementwise, accurate near 0.",
    "square": "Square, elementwise: ``x * x``.",
    "reciprocal": "Reciprocal, elementwise: ``1 / x``.",
    "sign": "Sign of the elements: -1, 0 or 1.",
    "floor": "Round down to an integer value, elementwise.",
    "ceil": "Round up to an integer value, elementwise.",
    "trunc": "Round toward zero to an integer value, elementwise.",
    "rint": "Round to the nearest integer value (half to even), elementwise.",
    "arctan2": "Angle of the point ``(x2, x1)`` = ``(y, x)`` arguments, elementwise.",
    "hypot": "Hypotenuse ``sqrt(x**2 + y**2)``, elementwise.",
    "logaddexp": "``log(exp(x) + exp(y))``, elementwise, without overflow.",
    "logaddexp2": "``log2(2**x + 2**y)``, elementwise, without overflow.",
    "fmax": "Elementwise maximum of the inputs, ignoring NaN.",
    "fmin": "Elementwise minimum of the inputs, ignoring NaN.",
    "remainder": "Remainder of division with the sign of the divisor, elementwise.",
    "expit": "Logistic sigmoid ``1 / (1 + exp(-x))``, elementwise.",
    "logit": "Logit ``log(x / (1 - x))``, the inverse of the logistic sigmoid.",
    "gammaln": "Logarithm of the absolute value of the gamma function, elementwise.",
    "digamma": "Digamma function ``psi(x)``, the derivative of ``gammaln``.",
    "polygamma": "Polygamma function ``psi^(n)(x)``, the n-th derivative of digamma.",
    "xlogy": "``x * log(y)``, elementwise, 0 where ``x == 0``.",
    "xlog1py": "``x * log1p(y)``, elementwise, 0 where ``x == 0``.",
    "ndtr": "Standard normal cumulative distribution function, elementwise.",
    "log_ndtr": "Logarithm of the standard normal CDF, elementwise.",
    "ndtri": "Inverse of the standard normal CDF (its quantile function), elementwise.",
    "erfinv": "Inverse of the error function, elementwise.",
    "erfcinv": "Inverse of the complementary error function, elementwise.",
    "erfcx": "Scaled complementary error function ``exp(x**2) * erfc(x)``, elementwise.",
    "gamma": "Gamma function, elementwise.",
    "betaln": "Logarithm of the absolute value of the beta function, elementwise.",
    "beta": "Beta function ``B(a, b)``, elementwise.",
    "i0": "Modified Bessel function of the first kind of order 0, elementwise.",
    "i1": "Modified Bessel function of the first kind of order 1, elementwise.",
    "i0e": "Exponentially scaled modified Bessel function of order 0, elementwise.",
    "i1e": "Exponentially scaled modified Bessel function of order 1, elementwise.",
    "gammainc": "Regularized lower incomplete gamma function ``P(a, x)``, elementwise.",
    "gammaincc": "Regularized upper incomplete gamma function ``Q(a, x)``, elementwise.",
    "ive": "Exponentially scaled modified Bessel function ``exp(-|z|) I_v(z)``.",
}

# What x and y stand for in binary rows whose arguments have SciPy's own names
ELEMENTWISE_PARAMS: dict[str, dict[str, tuple[str, str]]] = {
    "arctan2": {
        "x": ("Tensor or array_like", "The y-coordinates (NumPy's ``x1``)."),
        "y": ("Tensor or array_like", "The x-coordinates (NumPy's ``x2``); broadcasts."),
    },
    "power": {
        "x": ("Tensor or array_like", "Bases."),
        "y": ("Tensor or array_like", "Exponents; they broadcast against the bases."),
    },
    "remainder": {
        "x": ("Tensor or array_like", "Dividends."),
        "y": ("Tensor or array_like", "Divisors; they broadcast against the dividends."),
    },
    "true_divide": {
        "x": ("Tensor or array_like", "Dividends."),
        "y": ("Tensor or array_like", "Divisors; they broadcast against the dividends."),
    },
    "polygamma": {
        "x": ("Tensor or array_like", "Order ``n``: integers >= 0 (no gradient in it)."),
        "y": ("Tensor or array_like", "Argument ``x``; broadcasts against ``n``."),
    },
    "gammainc": {
        "x": ("Tensor or array_like", "Shape ``a > 0`` (SciPy's first argument)."),
        "y": ("Tensor or array_like", "Argument ``x >= 0``; broadcasts against ``a``."),
    },
    "gammaincc": {
        "x": ("Tensor or array_like", "Shape ``a > 0`` (SciPy's first argument)."),
        "y": ("Tensor or array_like", "Argument ``x >= 0``; broadcasts against ``a``."),
    },
    "ive": {
        "x": ("Tensor or array_like", "Order ``v >= 0`` (real)."),
        "y": ("Tensor or array_like", "Argument ``z``; broadcasts against ``v``."),
    },
    "beta": {
        "x": ("Tensor or array_like", "First argument ``a``."),
        "y": ("Tensor or array_like", "Second argument ``b``; broadcasts against ``a``."),
    },
    "betaln": {
        "x": ("Tensor or array_like", "First argument ``a``."),
        "y": ("Tensor or array_like", "Second argument ``b``; broadcasts against ``a``."),
    },
    "xlogy": {
        "x": ("Tensor or array_like", "Multipliers."),
        "y": ("Tensor or array_like", "Arguments of the logarithm; broadcast against x."),
    },
    "xlog1py": {
        "x": ("Tensor or array_like", "Multipliers."),
        "y": ("Tensor or array_like", "Arguments of ``log1p``; broadcast against x."),
    },
}

# The inputs of binary rows that are not differentiable in both
DIFFERENTIABLE_IN = {"polygamma": "``y`` (the gradient in the order ``x`` is NaN)"}

_UNSUPPORTED = (
    "TypeError",
    "If ``out`` is not None, or an operand has a dtype tapegrad cannot hold (complex, "
    "string, object).",
)
_BROADCAST = ("ValueError", "If the operands' shapes do not broadcast together.")


def elementwise(key: str, name: str, op: Op, library: str, spec: Doc) -> Doc:
    """The docstring parts of an elementwise row (or one of its aliases)."""
    head, tail = head_tail(op.doc)
    summary = spec.summary or ELEMENTWISE_SUMMARY.get(op.name) or _sentence(f"{head}, elementwise")
    binary = op.arity == 2
    params = dict(ELEMENTWISE_PARAMS.get(op.name, {}))
    if binary:
        params.setdefault("x", ("Tensor or array_like", "First operand."))
        params.setdefault("y", ("Tensor or array_like", "Second operand; broadcasts against x."))
    params.update(spec.params)
    shape = "the operands' broadcast shape" if binary else "the shape of ``x``"
    if op.kind is Kind.COMPARE:
        returns = (
            f"Tensor\nA bool tensor of {shape}. Not differentiable: the result is a "
            "constant, which never requires grad."
        )
    else:
        returns = f"Tensor\nThe result, of {shape}; it requires grad when an operand does."
    raises = [_UNSUPPORTED] + ([_BROADCAST] if binary else [])
    notes = [spec.notes] if spec.notes else []
    if op.differentiable:
        inputs = DIFFERENTIABLE_IN.get(op.name, "``x`` and ``y``" if binary else "``x``")
        if isinstance(op.domain[0], tuple):
            (a, b), (c, d) = op.domain
            where = f"``x`` in [{a:g}, {b:g}] and ``y`` in [{c:g}, {d:g}]"
        else:
            where = "inputs in [{:g}, {:g}]".format(*op.domain)
        notes.append(
            f"Differentiable in {inputs}; the gradient tests compare the backward pass "
            f"with central differences on {where}."
        )
    notes.append(
        "Computed by compiled kernels in float64 or float32; integer and bool operands are "
        "promoted as in NumPy."
    )
    notes += _common_notes(key, name, op, library)
    body = spec.body if spec.body is not None else (_sentence(tail) if tail else "")
    return dataclasses.replace(
        spec,
        summary=summary,
        body=body,
        params=params,
        returns=spec.returns or returns,
        raises=(spec.raises if spec.raises is not None else raises) + spec.more_raises,
        notes="\n\n".join(notes),
    )


def head_tail(doc: str) -> tuple[str, str]:
    """An op table ``doc`` split at its first "; " outside parentheses."""
    depth = 0
    for i, c in enumerate(doc):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth == 0 and doc.startswith("; ", i):
            return doc[:i], doc[i + 2 :]
    return doc, ""


def _sentence(s: str) -> str:
    s = s.strip()
    if not s:
        return s
    s = s[0].upper() + s[1:]
    return s if s.endswith((".", "?", "!")) else s + "."


def _common_notes(key: str, name: str, op: Op | None, library: str) -> list[str]:
    """Aliases, the method form, the GPU target, and the drop-in contract."""
    notes = []
    if op is not None:
        names = [n for n in (op.name, *op.aliases) if n != name]
        if names:
            listed = " and ".join(f"``{n}``" for n in names)
            notes.append(
                f"{listed} {'are other names' if len(names) > 1 else 'is another name'} "
                "of this function."
            )
        if op.cuda == "formulas":
            notes.append("On CUDA tensors: the same formulas, as CUDA device functions.")
        elif op.cuda:
            notes.append(f"On a CUDA tensor it runs ``tapegrad.cuda.{op.cuda}``.")
    lib = importlib.import_module(library)
    if hasattr(lib, name):
        notes.append(f"With no tensor among its arguments, this is ``{library}.{name}``.")
    return notes


# --- other functions ----------------------------------------------------------------------

_OUT = (
    "TypeError",
    "If ``out`` is not None and an argument is a tensor (tensors are immutable).",
)
_AXIS = (
    "numpy.exceptions.AxisError",
    "If ``axis`` is out of range for the input (a subclass of ``ValueError``).",
)
_DTYPES = (
    "TypeError",
    "If an argument mixes tensors with values tapegrad cannot hold (complex numbers, "
    "strings, objects).",
)


def other(key: str, name: str, f: Any, op: Op | None, library: str, spec: Doc) -> Doc:
    """The docstring parts of a function that is not an elementwise row."""
    own = inspect.cleandoc(getattr(f, "on_tensors", f).__doc__ or "")
    summary, body = spec.summary, spec.body
    if not summary:
        first, rest = _split(own)
        if first:
            summary, body = first, (rest if body is None else body)
        elif op is not None:
            summary = _sentence(head_tail(op.doc)[0])
            body = own if body is None else body
        else:
            raise KeyError(f"{key}: no one-line summary (write one in docgen.specs)")
    elif body is None:
        body = own
    params = inspect.signature(f).parameters
    raises = spec.raises
    if raises is None:
        raises = []
        if "out" in params:
            raises.append(_OUT)
        if "axis" in params:
            raises.append(_AXIS)
    raises = raises + spec.more_raises
    if not raises:
        raises = [_DTYPES]
    returns = spec.returns
    if not returns:
        if op is not None and not op.differentiable:
            returns = "Tensor\nThe result: a constant tensor (not differentiable)."
        else:
            returns = "Tensor\nThe result; it requires grad when a tensor argument does."
        annotation = str(inspect.signature(f).return_annotation)
        if annotation == "None":
            returns = ""
        elif annotation != "Tensor":
            raise KeyError(f"{key}: returns {annotation}; describe it in docgen.specs")
    notes = [spec.notes] if spec.notes else []
    if op is not None:
        if not op.differentiable:
            notes.append("Not differentiable: the result is a constant.")
        elif op.kind is Kind.ARRAY:
            notes.append(
                f"Recorded as one node of the tape (the op table row ``{op.name}``, with a "
                "compiled backward kernel)."
            )
        else:
            notes.append(
                f"Written with other recorded ops (the op table row ``{op.name}``, a "
                "composite): its gradient is theirs."
            )
    notes += _common_notes(key, name, op, library)
    return dataclasses.replace(
        spec,
        summary=summary,
        body=body or "",
        returns=returns,
        raises=raises,
        notes="\n\n".join(notes),
    )


def _split(doc: str) -> tuple[str, str]:
    """(summary, rest) of a docstring whose first sentence fits one line; else
    ("", the docstring)."""
    first, _, rest = doc.partition("\n\n")
    flat = " ".join(first.split())
    m = re.match(r"(.+?\.)(\s|$)", flat)
    if m and len(m.group(1)) <= 80 and m.group(1).count("``") % 2 == 0:
        tail = flat[m.end() :].strip()
        return _sentence(m.group(1)), "\n\n".join(p for p in (tail, rest.strip()) if p)
    return "", doc


def defaults(key: str, name: str, f: Any, op: Op | None, library: str, spec: Doc) -> Doc:
    if op is not None and op.kind in (Kind.UNARY, Kind.BINARY, Kind.COMPARE):
        return elementwise(key, name, op, library, spec)
    return other(key, name, f, op, library, spec)


# --- Tensor methods ----------------------------------------------------------------------


def method_doc(name: str, f: Any, spec: Doc, function_doc: Doc) -> Doc:
    """``Tensor.<name>``: ``tapegrad.numpy.<name>`` with the tensor first."""
    summary = spec.summary or function_doc.summary
    body = spec.body
    if body is None:
        body = f"``t.{name}(...)`` is ``tapegrad.numpy.{name}(t, ...)``, with the tensor first."
    return dataclasses.replace(
        spec,
        summary=summary,
        body=body,
        params={**function_doc.params, **spec.params},
        returns=spec.returns or function_doc.returns,
        raises=(spec.raises if spec.raises is not None else function_doc.raises),
        see=spec.see or (f"tapegrad.numpy.{name} : The function this method calls.",),
    )
