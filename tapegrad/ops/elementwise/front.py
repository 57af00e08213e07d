"""Front ends of the ``elementwise`` op family: the Python functions that record its rows
(declared in :mod:`tapegrad.ops.elementwise`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...host_arrays import normalize_array
from ...recording import as_tensor, elementwise
from ...shapes import broadcast_error
from ...tensors import Tensor, values_of
from ..shape.front import astype, where
from .core import ABS
from .ufuncs import FLOAT_POWER, REMAINDER, RINT, ROUND


def float_power(x1: Any, x2: Any, out: Any = None) -> Any:
    """x1 ** x2 computed in float64 (as numpy.float_power)."""
    if out is not None:
        raise TypeError("float_power: out= is not supported (tensors are immutable)")
    a = astype(as_tensor(x1), np.float64)
    b = x2 if isinstance(x2, float | int) else astype(as_tensor(x2), np.float64)
    return a**b


def round(a: Any, decimals: int = 0, out: Any = None) -> Any:
    """Round half to even to ``decimals`` digits (gradient 0), as numpy.round."""
    if out is not None:
        raise TypeError("round: out= is not supported (tensors are immutable)")
    if decimals == 0:
        return elementwise(RINT, a)
    scale = 10.0**decimals
    return elementwise(RINT, a * scale) / scale


_WEAK = (float, int, bool)


def floor_divide(x1: Any, x2: Any, out: Any = None) -> Any:
    """The largest integer not above ``x1 / x2``, with NumPy's values (the quotient of
    Python's ``divmod``: ``1.0 // 0.1`` is 9.0, where ``floor(1.0 / 0.1)`` is 10.0).

    Piecewise constant: the gradient is exactly 0 (as JAX's and PyTorch's, and as
    tapegrad's ``floor``), also where ``x2`` is 0. Integers and bools are computed by NumPy
    on the values (not differentiable; a capture guards the read)."""
    if out is not None:
        raise TypeError("floor_divide: out= is not supported (tensors are immutable)")
    if not isinstance(x1, (Tensor, *_WEAK)):
        x1 = as_tensor(x1)
    if not isinstance(x2, (Tensor, *_WEAK)):
        x2 = as_tensor(x2)
    dtype = np.result_type(*(v.dtype if isinstance(v, Tensor) else v for v in (x1, x2)))
    shapes = [np.shape(v) if isinstance(v, _WEAK) else v.shape for v in (x1, x2)]
    try:  # before the casts below record anything: an error leaves the tape as it was
        np.broadcast_shapes(*shapes)
    except ValueError:
        raise broadcast_error("floor_divide", *shapes) from None
    if dtype.kind != "f":
        res = np.floor_divide(values_of(x1), values_of(x2))
        return Tensor._external(normalize_array(res, copy=False))
    # computed on detached operands (a capture records detach as an alias, so the
    # program recomputes it): the chain rule through x / 0 would make 0 * inf = NaN
    x, y = (v if isinstance(v, _WEAK) else astype(v, dtype).detach() for v in (x1, x2))
    if not isinstance(x, Tensor):
        x = as_tensor(np.asarray(x, dtype))
    r = elementwise(REMAINDER, x, y)  # exact: NumPy's fmod-based remainder
    d = x / y
    q = (x - r) / y  # within rounding of an integer: rint below makes it one
    q = where(elementwise(RINT, q) == 0, d * 0.0, q)  # a zero takes the sign of x1 / x2
    q = where(elementwise(ABS, r) == np.inf, -1.0, q)  # finite x1, infinite x2 of the other sign
    q = where(y == 0, d, q)  # x1 / 0: inf or NaN
    q = elementwise(RINT, q)
    for v in (x1, x2):  # in the graph, with gradient 0 exactly (where's unchosen side)
        if isinstance(v, Tensor) and v.requires_grad:
            q = where(True, q, v)
    return q


def divmod(x1: Any, x2: Any) -> tuple[Any, Any]:
    """``(floor_divide(x1, x2), remainder(x1, x2))``, as numpy.divmod: the quotient has
    gradient 0, the remainder its row's (1 in ``x1``, ``-floor(x1 / x2)`` in ``x2``)."""
    return floor_divide(x1, x2), elementwise(REMAINDER, x1, x2)


# each row's public function
FLOAT_POWER.front = float_power
ROUND.front = round
