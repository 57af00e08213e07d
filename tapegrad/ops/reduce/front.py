"""Front ends of the ``reduce`` op family: the Python functions that record its rows
(declared in :mod:`tapegrad.ops.reduce`)."""

from __future__ import annotations

import builtins
import functools
import math
import operator
from typing import Any

import numpy as np

from ...layout import ALL_AXES, DTYPE_CODE, FLOAT_CODES, MAXDIM
from ...record import record_reduce
from ...recording import as_tensor, elementwise, front_end, general
from ...shapes import normalize_axes, reduced_shape
from ...tensors import Tensor, active_capture
from ..elementwise.core import MAXIMUM, MINIMUM, SAFE_SQRT
from ..shape.front import axis_index, transpose
from ..shape.front import where as _where
from ..table import Op
from .rows import ARGMAX, ARGMIN, AVERAGE, CUMPROD, CUMSUM, MAX, MEAN, MIN, PROD, STD, SUM, VAR


def no_out(op: str, out: Any) -> None:
    """Refuse NumPy's ``out=`` (never ignore it), naming ``op``."""
    if out is not None:
        raise TypeError(f"{op}: out= is not supported (tensors are immutable)")


def in_dtype(a: Any, dtype: Any, op: str) -> Tensor:
    """``a`` as a tensor in ``dtype`` (None: its own), cast before reducing as NumPy
    accumulates in ``dtype``: a sum of floats with ``dtype=int`` adds the truncated
    elements, a float32 sum with ``dtype=float64`` adds in float64 (a cast of the result
    gave other numbers, silently)."""
    t = as_tensor(a)
    dt = dtype_of(dtype, op)
    return t if dt is None or t.dtype == dt else t.astype(dt)


def check_ddof(ddof: Any, op: str) -> None:
    """NumPy's ddof is a number (NumPy's own error for another comes from deep inside)."""
    if not isinstance(ddof, int | float | np.integer | np.floating):
        raise TypeError(f"{op}: ddof must be a number, got {ddof!r}")


def dtype_of(dtype: Any, op: str, floats: bool = False) -> np.dtype | None:
    """``dtype`` as a NumPy dtype (None stays None), with an error naming ``op``; with
    ``floats``, an integer dtype is refused (NumPy's variance and NaN-means of an
    integer dtype are integer arithmetic throughout: another number than a cast)."""
    if dtype is None:
        return None
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{op}: data type {dtype!r} not understood") from None
    if floats and dt.kind != "f":
        raise TypeError(f"{op}: dtype must be a float dtype, got {dt}")
    return dt


@functools.lru_cache(maxsize=4096)
def _reduction(shape: tuple, axis: Any, keepdims: bool, name: str) -> tuple:
    """``(axes, result shape, number of elements reduced per result, the node's int
    parameters)``."""
    axes = normalize_axes(axis, len(shape), name)
    count = math.prod([shape[d] for d in axes])
    return axes, reduced_shape(shape, axes, keepdims), count, (len(axes), *axes)


def _reduce(
    op: Op, x: Any, axis: Any, keepdims: bool, kind: str, out: Any = None, name: str = ""
) -> Tensor:
    """sum / mean / prod / max / min: one node, extra internal outputs where the backward
    needs them (prod: non-zero product and zero count; max/min: count of ties). Errors
    name ``name`` (the public function: ``amax``), else the row."""
    name = name or op.name
    if out is not None:
        no_out(name, out)
    # (an int axis in the tensor dimensions' range only: the compiled front end marks all
    # axes with an int, ALL_AXES, that no user axis may alias; Python raises for others)
    if (
        type(x) is Tensor
        and (axis is None or (type(axis) is int and -MAXDIM <= axis < MAXDIM))
        and kind in ("sum", "mean")
    ):
        r = front_end(
            record_reduce,
            op,
            (x,),
            (ALL_AXES if axis is None else axis, bool(keepdims), kind == "mean"),
        )
        if r is not None:
            return r
    t = x if type(x) is Tensor else as_tensor(x)
    # an int or None axis (the common case) has its shapes kept; a tuple is computed
    # each time (a cached (1,) would otherwise answer for (1.0,), which NumPy rejects)
    plan = _reduction if axis is None or type(axis) is int else _reduction.__wrapped__
    axes, out_shape, count, params = plan(t.shape, axis, bool(keepdims), name)
    dt = DTYPE_CODE[t.dtype]
    if dt not in FLOAT_CODES:  # integer/bool data: not differentiable, NumPy reduces
        f = {"sum": np.sum, "mean": np.mean, "prod": np.prod, "max": np.max, "min": np.min}
        return Tensor._external(np.asarray(f[kind](t._value(), axis=axes, keepdims=keepdims)))
    if kind in ("max", "min"):
        if count == 0:
            raise ValueError(
                f"{name}: zero-size array to reduction operation {op.name} which has no identity"
            )
        return general(op, dt, [t], [(dt, out_shape)] * 2, params)
    if kind == "prod":
        return general(op, dt, [t], [(dt, out_shape)] * 3, params)
    if kind == "mean" and count == 0:
        # mean of nothing is NaN, as in NumPy (which also warns) and torch; the sum of
        # nothing is 0 (the kernels loop over no input), times NaN
        return general(SUM, dt, [t], [(dt, out_shape)], params, [1.0]) * float("nan")
    scale = 1.0 / count if kind == "mean" else 1.0
    return general(op, dt, [t], [(dt, out_shape)], params, [scale])


_NO_VALUE = np._NoValue  # NumPy's "not given" for initial= and where=


def _masked(op: str, t: Tensor, where: Any, fill: Any) -> Tensor:
    """``t`` with the elements outside ``where`` (broadcast to t) replaced by ``fill``:
    NumPy's ``where=`` of a reduction (the excluded elements, NaN included, get no
    gradient). ``where`` is a boolean array or tensor (not differentiable)."""
    try:
        fits = np.broadcast_shapes(np.shape(where), t.shape) == t.shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{op}: where= of shape {np.shape(where)} does not broadcast to {t.shape}")
    return _where(where, t, np.asarray(fill, t.dtype) if t.dtype.kind == "f" else fill)


def _as_dtype(v: Any, t: Tensor) -> Any:
    """``initial`` as NumPy uses it: cast to the array's dtype (2.5 is 2 for integers,
    a float64 stays float32 for float32 data); a tensor keeps its graph."""
    if isinstance(v, Tensor):
        return v if v.dtype == t.dtype else v.astype(t.dtype)
    return np.asarray(v).astype(t.dtype)


def _count(where: Any, t: Tensor, axis: Any, keepdims: bool) -> Any:
    """How many elements ``where`` selects per result (a constant of the mask)."""
    w = where._value() if isinstance(where, Tensor) else np.asarray(where)
    return np.sum(np.broadcast_to(w, t.shape), axis=axis, keepdims=keepdims).astype(t.dtype)


def sum(
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: bool = False,
    initial: Any = _NO_VALUE,
    where: Any = _NO_VALUE,
) -> Tensor:
    """Sum over ``axis`` (None: all; int or tuple of ints), as ``numpy.sum``, with its
    ``initial`` (added) and ``where`` (elements left out)."""
    t = in_dtype(a, dtype, "sum")
    if where is not _NO_VALUE:
        t = _masked("sum", t, where, 0)
    r = _reduce(SUM, t, axis, keepdims, "sum", out)
    if initial is not _NO_VALUE:
        r = r + _as_dtype(initial, t)
    return r


def mean(
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: bool = False,
    *,
    where: Any = _NO_VALUE,
) -> Tensor:
    """Arithmetic mean over ``axis``, as ``numpy.mean`` (``where``: of the selected
    elements only). With ``dtype``, the elements are summed in it and the mean given in
    it, as NumPy's (an integer mean is truncated)."""
    t = in_dtype(a, dtype, "mean")
    if where is not _NO_VALUE:
        total = sum(t, axis=axis, out=out, keepdims=keepdims, where=where)
        r = total / _count(where, t, axis, keepdims)
    else:
        r = _reduce(MEAN, t, axis, keepdims, "mean", out)
    return r if dtype is None or r.dtype == t.dtype else r.astype(t.dtype)


def prod(
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: bool = False,
    initial: Any = _NO_VALUE,
    where: Any = _NO_VALUE,
) -> Tensor:
    """Product over ``axis``; the gradient is exact with zeros in the input. ``initial``
    multiplies, ``where`` leaves elements out, as NumPy."""
    t = in_dtype(a, dtype, "prod")
    if where is not _NO_VALUE:
        t = _masked("prod", t, where, 1)
    r = _reduce(PROD, t, axis, keepdims, "prod", out)
    if initial is not _NO_VALUE:
        r = r * _as_dtype(initial, t)
    return r


def _extreme(
    op: Op,
    a: Any,
    axis: Any,
    out: Any,
    keepdims: bool,
    initial: Any,
    where: Any,
    name: str = "",
) -> Tensor:
    """max / min, errors naming ``name`` (``amax``, ``ptp``), else the row."""
    name = name or op.name
    t = as_tensor(a)
    if initial is not _NO_VALUE:
        initial = _as_dtype(initial, t)
        if t.size == 0:  # only the initial value: NumPy returns it
            _, shape, _, _ = _reduction.__wrapped__(t.shape, axis, bool(keepdims), name)
            return Tensor._external(np.full(shape, initial))
    if where is not _NO_VALUE:
        if initial is _NO_VALUE:
            raise ValueError(
                f"{name}: reduction operation '{op.name}' does not have an identity, so to "
                "use a where mask one has to specify 'initial'"
            )
        t = _masked(name, t, where, initial)
    r = _reduce(op, t, axis, keepdims, op.name, out, name)
    if initial is not _NO_VALUE and where is _NO_VALUE:
        r = elementwise(MAXIMUM if op is MAX else MINIMUM, r, initial)
    return r


def _extremum(op: Op, name: str, doc: str) -> Any:
    """The public ``max`` / ``min`` of ``op``, as ``name`` (NumPy's ``amax`` / ``amin``
    too: errors name the function called)."""

    def fn(
        a: Any,
        axis: Any = None,
        out: Any = None,
        keepdims: bool = False,
        initial: Any = _NO_VALUE,
        where: Any = _NO_VALUE,
    ) -> Tensor:
        return _extreme(op, a, axis, out, keepdims, initial, where, name)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


max = _extremum(
    MAX,
    "max",
    """Maximum over ``axis``; tied maxima share the gradient equally. ``initial`` takes
    part in the maximum; ``where`` (with ``initial``) leaves elements out.""",
)
min = _extremum(
    MIN,
    "min",
    """Minimum over ``axis``; tied minima share the gradient equally. ``initial`` and
    ``where`` as in :func:`max`.""",
)
amax = _extremum(MAX, "amax", "``numpy.amax``: :func:`max`, its errors naming ``amax``.")
amin = _extremum(MIN, "amin", "``numpy.amin``: :func:`min`, its errors naming ``amin``.")


def _cumulative(op: Op, a: Any, axis: Any, kind: str) -> Tensor:
    t = as_tensor(a)
    if axis is None:
        t, ax = t.reshape(-1), 0
    else:  # an integer, as NumPy's; a 0-d array is 1-D to NumPy here (axis 0 or -1)
        ax = axis_index(axis, builtins.max(t.ndim, 1), op.name, bools=False)
        t = t.reshape(1) if t.ndim == 0 else t
    dt = DTYPE_CODE[t.dtype]
    if dt not in FLOAT_CODES:
        f = np.cumsum if kind == "cumsum" else np.cumprod
        return Tensor._external(f(t._value(), axis=ax))
    return general(op, dt, [t], [(dt, t.shape)], [ax])


def cumsum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Tensor:
    """Cumulative sum along ``axis`` (flattened when None)."""
    no_out("cumsum", out)
    return _cumulative(CUMSUM, in_dtype(a, dtype, "cumsum"), axis, "cumsum")


def cumprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Tensor:
    """Cumulative product along ``axis``; exact gradient with zeros, no division."""
    no_out("cumprod", out)
    return _cumulative(CUMPROD, in_dtype(a, dtype, "cumprod"), axis, "cumprod")


def safe_sqrt(s: Any) -> Tensor:
    """sqrt(s) whose gradient at s == 0 is 0 (a subgradient) instead of inf * 0 = nan:
    one node of the internal row ``safe_sqrt`` (its composite of five, ``sqrt(s + [s ==
    0]) * [s != 0]``, made five passes over the distances of a pairwise energy)."""
    return elementwise(SAFE_SQRT, s)


def var(
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    ddof: int = 0,
    keepdims: bool = False,
    *,
    where: Any = _NO_VALUE,
    mean: Any = _NO_VALUE,
) -> Tensor:
    """Variance: mean squared deviation from the mean, divided by ``n - ddof``
    (``where``: of the selected elements; ``mean``: a precomputed mean, keepdims-shaped)."""
    return _variance(a, axis, dtype, out, ddof, keepdims, where, mean, "var")


def _variance(
    a: Any,
    axis: Any,
    dtype: Any,
    out: Any,
    ddof: Any,
    keepdims: bool,
    where: Any,
    mean: Any,
    name: str,
) -> Tensor:
    """:func:`var`, its errors naming ``name`` (``std``, ``nanvar``...), checked before
    anything is recorded."""
    no_out(name, out)
    check_ddof(ddof, name)
    dtype_of(dtype, name, floats=True)
    t = as_tensor(a)
    axes = normalize_axes(axis, t.ndim, name)
    # as NumPy with dtype=: the mean summed in dtype, the deviations from it in the data's
    # own precision, their squares summed in dtype (float64 data with dtype=float32:
    # casting the data first cancels catastrophically, 1e8 + [0, .5, 1] gave 0)
    if where is _NO_VALUE:
        n = math.prod([t.shape[d] for d in axes])
        m = _mean(in_dtype(t, dtype, name), axis=axes, keepdims=True) if mean is _NO_VALUE else mean
        d = t - m
        # NumPy divides by max(n - ddof, 0): inf (or NaN) past n, with a warning
        total = sum(d * d, axis=axes, dtype=dtype, keepdims=keepdims)
        return total / float(builtins.max(n - ddof, 0))
    n = np.maximum(_count(where, t, axes, keepdims) - ddof, 0)
    t = _masked(name, t, where, 0)  # first: a NaN left out must not reach d * d
    if mean is _NO_VALUE:
        m = _mean(in_dtype(t, dtype, name), axis=axes, keepdims=True, where=where)
    else:
        m = mean
    d = t - m
    total = sum(d * d, axis=axes, dtype=dtype, keepdims=keepdims, where=where)
    return total / (n if dtype is None else n.astype(total.dtype))


def std(
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    ddof: int = 0,
    keepdims: bool = False,
    *,
    where: Any = _NO_VALUE,
    mean: Any = _NO_VALUE,
) -> Tensor:
    """Standard deviation: sqrt(var); its gradient where the variance is 0 is 0."""
    return safe_sqrt(_variance(a, axis, dtype, out, ddof, keepdims, where, mean, "std"))


def average(
    a: Any, axis: Any = None, weights: Any = None, returned: bool = False, keepdims: bool = False
) -> Any:
    """Weighted average along ``axis`` (``weights`` 1-D along one axis, or a's shape)."""
    t = as_tensor(a)
    order = None  # the axes in the order given: weights of another shape follow it
    if axis is not None:  # numpy.average takes axis=True as 1 (Python-level, like norm)
        given = axis if isinstance(axis, tuple | list) else (axis,)
        axis = normalize_axes(axis, t.ndim, "average", bools=True, lists=True)
        order = [operator.index(a) % t.ndim for a in given]  # (in range: checked)
    if weights is None:
        avg = mean(t, axis=axis, keepdims=keepdims)
        if returned:
            n = t.size / avg.size if avg.size else 0.0
            return avg, Tensor._external(np.full(avg.shape, n, t.dtype))
        return avg
    w = as_tensor(weights)
    # NumPy's rules, checked before anything is recorded: weights of another shape than
    # a's have a's shape along the axes, in the order given
    if w.shape != t.shape:
        if order is None:
            raise TypeError(
                "average: axis must be specified when shapes of a and weights differ "
                f"(got {w.shape} and {t.shape})"
            )
        along = tuple(t.shape[d] for d in order)
        if w.shape != along:
            raise ValueError(
                f"average: shape of weights {w.shape} must be consistent with shape of a "
                f"{t.shape} along axis {tuple(order)}: {along}"
            )
    # NumPy's error where the weights along the axis sum to zero (on their values): else
    # 0/0 would come back as NaN. Not for weights a tg.compile capture traces: reading
    # them would make every call capture again; there the average is NaN, as under
    # jax.jit
    if not (isinstance(weights, Tensor) and active_capture() is not None):
        wsum = np.sum(w._value(), axis=None if w.shape != t.shape else axis)
        if np.any(wsum == 0):
            raise ZeroDivisionError("average: weights sum to zero, can't be normalized")
    if w.shape != t.shape:  # to broadcast along a's axes
        w = transpose(w, tuple(np.argsort(order))) if len(order) > 1 else w
        w = w.reshape(tuple(n if d in axis else 1 for d, n in enumerate(t.shape)))
    total = sum(w * (t * 0 + 1), axis=axis, keepdims=keepdims)
    avg = sum(t * w, axis=axis, keepdims=keepdims) / total
    return (avg, total) if returned else avg


def _arg(kind: str, a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Tensor:
    no_out(kind, out)
    v = a._value() if isinstance(a, Tensor) else np.asarray(a)
    f = np.argmax if kind == "argmax" else np.argmin
    return Tensor._external(np.asarray(f(v, axis=axis, keepdims=keepdims), np.int64))


def argmax(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Tensor:
    """Index of the maximum (an integer constant: not differentiable)."""
    return _arg("argmax", a, axis, out, keepdims)


def argmin(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Tensor:
    """Index of the minimum (an integer constant: not differentiable)."""
    return _arg("argmin", a, axis, out, keepdims)


# each row's public function
SUM.front = sum
MEAN.front = mean
PROD.front = prod
MAX.front = max
MIN.front = min
CUMSUM.front = cumsum
CUMPROD.front = cumprod
VAR.front = var
STD.front = std
AVERAGE.front = average
ARGMAX.front = argmax
ARGMIN.front = argmin


_mean = mean  # var's own keyword argument is called mean
