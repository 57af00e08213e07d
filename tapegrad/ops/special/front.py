"""Front ends of the ``special`` op family: the Python functions that record its rows
(declared in :mod:`tapegrad.ops.special`)."""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from ...layout import DTYPE_CODE, FLOAT_CODES, MAXDIM
from ...record import record_along
from ...recording import as_tensor, elementwise, front_end, general
from ...shapes import normalize_axes
from ...tensors import Tensor
from ..elementwise.core import EXP, LOG
from ..reduce.front import max as max_of
from ..reduce.front import sum as sum_of
from ..shape.front import astype, broadcast_to, squeeze, where
from .rows import BETAINC, GAMMALN, LOG_SOFTMAX, LOGSUMEXP, MULTIGAMMALN, SOFTMAX


def logsumexp(a: Any, axis: Any = None, b: Any = None, keepdims: bool = False) -> Tensor:
    """log(sum(b * exp(a), axis)) computed as m + log(sum(b * exp(a - m))) with m the max.

    The shift m is treated as a constant: the gradient (softmax weights) does not
    depend on it, and without it nothing overflows.
    """
    a = as_tensor(a)
    if axis is not None:  # NumPy's errors, naming this function, before anything is recorded
        axis = normalize_axes(axis, a.ndim, "logsumexp")
    if b is not None:
        b = as_tensor(b)
        try:
            np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise ValueError(
                f"logsumexp: b of shape {b.shape} does not broadcast with a of shape {a.shape}"
            ) from None
    if a.size == 0:  # log of an empty sum: -inf, as in SciPy (there is no max to shift by)
        m = 0.0
    else:
        m = max_of(a, axis=axis, keepdims=True).detach()
        m = where((m - m) == 0, m, 0.0)  # all -inf along the axis (m - m is nan): no shift
    e = elementwise(EXP, a - m)
    if b is not None:
        e = e * b
    out = elementwise(LOG, sum_of(e, axis=axis, keepdims=True)) + m
    if not keepdims:
        out = squeeze(out, axis=axis) if axis is not None else out.reshape(())
    return out


def softmax(x: Any, axis: Any = None) -> Tensor:
    """exp(x) / sum(exp(x), axis), as ``exp(log_softmax(x))`` (stable for any x)."""
    # an axis log_softmax would refuse: the error in softmax's name (for an array; a list,
    # perhaps of tensors, is left to log_softmax, which stacks it)
    if isinstance(x, Tensor | np.ndarray):
        if axis is not None and (type(axis) is not int or not -x.ndim <= axis < x.ndim):
            normalize_axes(axis, x.ndim, "softmax")
        if 0 in x.shape:
            _nothing_along(x.shape, axis, "softmax")
    return elementwise(EXP, log_softmax(x, axis=axis))


def _nothing_along(shape: tuple, axis: Any, name: str) -> None:
    """SciPy's error where an axis of the softmax family has no elements (its maximum
    of nothing: no shift to subtract)."""
    if 0 in [shape[d] for d in normalize_axes(axis, len(shape), name)]:
        raise ValueError(
            f"{name}: zero-size array to reduction operation maximum which has no identity "
            f"(shape {shape}, axis {axis})"
        )


def log_softmax(x: Any, axis: Any = None) -> Tensor:
    """x - logsumexp(x, axis): stable log-probabilities (all elements when axis is None),
    one node whose backward is ``g - softmax * sum(g)``."""
    if type(x) is Tensor and type(axis) is int and -MAXDIM <= axis < MAXDIM and 0 not in x.shape:
        r = front_end(record_along, LOG_SOFTMAX, (x,), (axis,))
        if r is not None:
            return r
    t = as_tensor(x)
    # SciPy's errors, before anything is recorded
    axes = None if axis is None else normalize_axes(axis, t.ndim, "log_softmax")
    if 0 in t.shape:
        _nothing_along(t.shape, axes, "log_softmax")
    dt = DTYPE_CODE[t.dtype]
    if dt not in FLOAT_CODES:
        t = t.astype(np.float64)
        dt = DTYPE_CODE[t.dtype]
    if axes is None:
        return general(LOG_SOFTMAX, dt, [t.reshape(-1)], [(dt, (t.size,))], [0]).reshape(t.shape)
    if len(axes) != 1:  # several axes (or none), as SciPy's: a composite of recorded ops
        return t - logsumexp(t, axis=axes, keepdims=True)
    (ax,) = axes
    return general(LOG_SOFTMAX, dt, [t], [(dt, t.shape)], [ax])


def betainc(a: Any, b: Any, x: Any) -> Tensor:
    """The regularized incomplete beta function ``I_x(a, b)`` (SciPy's ``betainc``),
    differentiable in ``a``, ``b`` and ``x``; broadcasts; NaN outside ``a, b > 0``,
    ``0 <= x <= 1``. One node (see :mod:`tapegrad.ops.special`)."""
    ts = [as_tensor(v) for v in (a, b, x)]
    # Python numbers are weak (NumPy 2): float32 data stays float32
    strong = [t.dtype for t, v in zip(ts, (a, b, x)) if not isinstance(v, int | float)]
    dtype = np.result_type(*strong) if strong else np.dtype(np.float64)
    if DTYPE_CODE.get(dtype) not in FLOAT_CODES:
        dtype = np.dtype(np.float64)
    shape = np.broadcast_shapes(*[t.shape for t in ts])
    ts = [t if t.shape == shape else broadcast_to(t, shape) for t in ts]
    ts = [t if t.dtype == dtype else astype(t, dtype) for t in ts]
    dt = DTYPE_CODE[dtype]
    return general(BETAINC, dt, ts, [(dt, shape)], [math.prod(shape)])


# each row's public function
def multigammaln(a: Any, d: int) -> Tensor:
    """log Gamma_d(a) = d (d - 1) / 4 log(pi) + sum_j gammaln(a - j / 2), j < d (SciPy's
    ``multigammaln``; ``d`` an integer; NaN where ``a <= (d - 1) / 2``, where SciPy
    raises). For ``d <= 0`` the sum has no term: SciPy's one number, whatever a's
    shape (NaN if an element of a is out of range)."""
    try:  # SciPy's errors: a whole float is refused as a TypeError, others a ValueError
        d = operator.index(d)
    except TypeError:
        try:
            whole = np.ndim(d) == 0 and bool(np.floor(d) == d)
        except TypeError:  # (a string: NumPy's floor refuses it)
            whole = True
        raise (TypeError if whole else ValueError)(
            f"multigammaln: d should be a positive integer (dimension), got {d!r}"
        ) from None
    t = as_tensor(a)
    if d < 1:  # no gammaln terms: a constant, connected to a through no element of it
        ok = sum_of(where(t > 0.5 * (d - 1), 0.0, np.nan)) + sum_of(t.reshape(-1)[:0])
        return ok + d * (d - 1) / 4.0 * math.log(math.pi)
    total = elementwise(GAMMALN, t)
    for j in range(1, d):
        total = total + elementwise(GAMMALN, t - 0.5 * j)
    # SciPy raises where a <= (d - 1) / 2; a NaN there keeps the check in the graph
    # (no value read, so a compiled program stays valid)
    return where(t > 0.5 * (d - 1), total + d * (d - 1) / 4.0 * math.log(math.pi), np.nan)


LOGSUMEXP.front = logsumexp
MULTIGAMMALN.front = multigammaln
BETAINC.front = betainc
SOFTMAX.front = softmax
LOG_SOFTMAX.front = log_softmax
