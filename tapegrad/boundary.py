"""The graph's boundary: how a tensor that requires grad may leave the graph, and the
errors that say so when it would leave any other way.

A tensor that requires grad leaves the graph only through an op tapegrad records or an
explicit request for its values (``.detach()``, ``.numpy()``, and ``.item()`` /
``float()`` in eager code). NumPy and SciPy functions tapegrad does not implement reach a
tensor through ``__array__`` (``np.asarray``, C extensions) or ``__float__`` (NumPy's own
Python code finishing a result); those implicit conversions raise, naming the library
function the user called, found by walking the Python frames out of NumPy and SciPy.

This module imports nothing from tapegrad: the tensor handle calls it.
"""

from __future__ import annotations

import sys
from types import FrameType

# Packages whose code converts arrays on the user's behalf: a conversion called from
# inside them is implicit, never the user's explicit request.
LIBRARIES = ("numpy", "scipy")

# "numpy.mean" -> "tapegrad.numpy.mean": filled by the namespace builder, for messages
EQUIVALENTS: dict[str, str] = {}


def _package(frame: FrameType) -> str:
    return (frame.f_globals.get("__name__") or "").partition(".")[0]


def _public_name(frame: FrameType) -> str:
    """``numpy.mean`` for ``numpy._core.fromnumeric.mean``: the shortest public module
    that exports the function, else the module path without its private parts. A
    decorator's wrapper (SciPy wraps functions to loop over stacks of matrices) is
    named by the function it wraps."""
    module = frame.f_globals.get("__name__") or "?"
    name = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
    code = frame.f_code
    if "<locals>" in name:
        for v in frame.f_locals.values():
            inner = getattr(v, "__code__", None)
            qual = getattr(v, "__qualname__", "<locals>")
            if inner is not None and "<locals>" not in qual and _package_of(v) in LIBRARIES:
                module, name, code = v.__module__, qual, inner
                break
    parts = [p for p in module.split(".") if not p.startswith("_")]
    for i in range(1, len(parts) + 1):
        home = sys.modules.get(".".join(parts[:i]))
        f = getattr(home, name, None) if "." not in name else None
        f = getattr(f, "_implementation", f)  # NumPy's __array_function__ dispatchers
        f = getattr(f, "__wrapped__", f)  # functools.wraps
        if getattr(f, "__code__", None) is code:
            return ".".join([*parts[:i], name])
    return ".".join([*parts, name])


def _package_of(fn: object) -> str:
    return (getattr(fn, "__module__", None) or "").partition(".")[0]


def library_caller(depth: int = 1) -> str | None:
    """The public name of the NumPy/SciPy function the user called, when the frame
    ``depth`` levels above the caller of this function is inside NumPy or SciPy (the
    outermost such frame before user code); None when user code made the call."""
    try:
        frame = sys._getframe(depth + 1)
    except ValueError:
        return None
    # skip tapegrad's own frames (a protocol handler between NumPy and the tensor)
    while frame is not None and _package(frame) == "tapegrad":
        frame = frame.f_back
    if frame is None or _package(frame) not in LIBRARIES:
        return None
    outer = frame
    while frame is not None and _package(frame) in LIBRARIES:
        outer = frame
        frame = frame.f_back
    return _public_name(outer)


def suggestion(name: str | None) -> str | None:
    """tapegrad's function for the library function ``name``, if it has one."""
    return EQUIVALENTS.get(name) if name else None


def user_line(depth: int = 1) -> str:
    """``file:line`` of the innermost frame outside tapegrad, NumPy and SciPy."""
    try:
        frame = sys._getframe(depth + 1)
    except ValueError:
        return "<unknown>"
    while frame is not None and _package(frame) in ("tapegrad", *LIBRARIES):
        frame = frame.f_back
    if frame is None:
        return "<unknown>"
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _instead(name: str | None, suggest: str | None) -> str:
    if suggest:
        return f"use {suggest}, which records the op"
    if name and name.startswith("numpy"):
        return (
            "use the tapegrad.numpy function (import tapegrad.numpy as tnp), which records the op"
        )
    return "write it with tapegrad.numpy / tapegrad.special ops"


def array_error(shape: tuple, dtype: object, name: str | None, suggest: str | None) -> TypeError:
    """``__array__`` on a tensor that requires grad (its values would go to NumPy)."""
    where = f"{name} converts" if name else "np.asarray / np.array converts"
    return TypeError(
        f"{where} a tensor that requires grad (shape {shape}, {dtype}) to a NumPy array, "
        f"which would drop its gradient. To differentiate it, {_instead(name, suggest)}; "
        "a list of tensors goes through tnp.stack / tnp.array. If no gradient is wanted, "
        "pass t.detach() or t.numpy()."
    )


def scalar_error(
    what: str, shape: tuple, dtype: object, name: str | None, suggest: str | None, scope: str
) -> TypeError:
    """``float()`` / ``int()`` / ``.item()`` where it would drop a gradient: inside NumPy
    or SciPy code (``name``), or on a tensor being differentiated in a transform."""
    if name:
        head = f"{name} converts a tensor that requires grad (shape {shape}, {dtype}) with {what}"
        fix = f"To differentiate it, {_instead(name, suggest)}"
    else:
        head = f"{what} of a tensor that requires grad (shape {shape}, {dtype}) inside {scope}"
        fix = "Keep it a tensor (tapegrad ops record it)"
    return TypeError(
        f"{head}: the Python number it makes has no gradient, so the result would be "
        f"silently wrong. {fix}; if no gradient through it is wanted, use .detach() "
        "(or compute it under tg.no_grad())."
    )
