"""Reductions: sum, mean, prod, max, min over axes; cumulative sums and products;
var, std and average written in terms of them; argmax/argmin (not differentiable)."""

from __future__ import annotations

import functools
import math
import operator
from typing import Any

import numpy as np

from ..kernels.reduce import (
    cumprod_bwd,
    cumprod_fwd,
    cumsum_bwd,
    cumsum_fwd,
    extreme_bwd,
    max_fwd,
    min_fwd,
    prod_bwd,
    prod_fwd,
    sum_bwd,
    sum_fwd,
)
from ..layout import DTYPE_CODE, FLOAT_CODES
from ..tensor import Tensor, as_tensor, general
from .table import Kind, Op


def normalize_axes(axis: Any, ndim: int, op: str) -> tuple[int, ...]:
    """``axis`` (None, int or tuple) as sorted non-negative ints, NumPy's errors."""
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, tuple | list) else (axis,)
    out = []
    for a in axes:
        a = operator.index(a)
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(
                f"{op}: axis {a} is out of bounds for array of dimension {ndim}"
            )
        a = a + ndim if a < 0 else a
        if a in out:
            raise ValueError(f"{op}: duplicate value in 'axis'")
        out.append(a)
    return tuple(sorted(out))


def _no_out(op: str, out: Any) -> None:
    if out is not None:
        raise TypeError(f"{op}: out= is not supported (tensors are immutable)")


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if d in axes else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in axes)


@functools.lru_cache(maxsize=4096)
def _reduction(shape: tuple, axis: Any, keepdims: bool, name: str) -> tuple:
    """``(axes, result shape, number of elements reduced per result)``."""
    axes = normalize_axes(axis, len(shape), name)
    return axes, reduced_shape(shape, axes, keepdims), math.prod([shape[d] for d in axes])


def _reduce(op: Op, x: Any, axis: Any, keepdims: bool, kind: str, out: Any = None) -> Tensor:
    """sum / mean / prod / max / min: one node, extra internal outputs where the backward
    needs them (prod: non-zero product and zero count; max/min: count of ties)."""
    _no_out(op.name, out)
    t = as_tensor(x)
    # an int or None axis (the common case) has its shapes kept; a tuple is computed
    # each time (a cached (1,) would otherwise answer for (1.0,), which NumPy rejects)
    plan = _reduction if axis is None or type(axis) is int else _reduction.__wrapped__
    axes, out_shape, count = plan(t.shape, axis, bool(keepdims), op.name)
    dt = DTYPE_CODE[t.dtype]
    if dt not in FLOAT_CODES:  # integer/bool data: not differentiable, NumPy reduces
        f = {"sum": np.sum, "mean": np.mean, "prod": np.prod, "max": np.max, "min": np.min}
        return Tensor._external(np.asarray(f[kind](t._value(), axis=axes, keepdims=keepdims)))
    params = [len(axes), *axes]
    if kind in ("max", "min"):
        if count == 0:
            raise ValueError(
                f"{op.name}: zero-size array to reduction operation {op.name} which has no identity"
            )
        return general(op, dt, [t], [(dt, out_shape)] * 2, params)
    if kind == "prod":
        return general(op, dt, [t], [(dt, out_shape)] * 3, params)
    # mean of nothing is NaN, as in NumPy (which also warns)
    scale = (1.0 / count if count else float("nan")) if kind == "mean" else 1.0
    return general(op, dt, [t], [(dt, out_shape)], params, [scale])


def sum(
    a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False
) -> Tensor:
    """Sum over ``axis`` (None: all; int or tuple of ints), as ``numpy.sum``."""
    r = _reduce(SUM, a, axis, keepdims, "sum", out)
    return r if dtype is None else r.astype(dtype)


def mean(
    a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False
) -> Tensor:
    """Arithmetic mean over ``axis``, as ``numpy.mean``."""
    r = _reduce(MEAN, a, axis, keepdims, "mean", out)
    return r if dtype is None else r.astype(dtype)


def prod(
    a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False
) -> Tensor:
    """Product over ``axis``; the gradient is exact with zeros in the input."""
    r = _reduce(PROD, a, axis, keepdims, "prod", out)
    return r if dtype is None else r.astype(dtype)


def max(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Tensor:
    """Maximum over ``axis``; tied maxima share the gradient equally."""
    return _reduce(MAX, a, axis, keepdims, "max", out)


def min(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Tensor:
    """Minimum over ``axis``; tied minima share the gradient equally."""
    return _reduce(MIN, a, axis, keepdims, "min", out)


def _cumulative(op: Op, a: Any, axis: Any, kind: str) -> Tensor:
    t = as_tensor(a)
    if axis is None:
        t = t.reshape(-1)
        axis = 0
    (ax,) = normalize_axes(axis, t.ndim, op.name)
    dt = DTYPE_CODE[t.dtype]
    if dt not in FLOAT_CODES:
        f = np.cumsum if kind == "cumsum" else np.cumprod
        return Tensor._external(f(t._value(), axis=ax))
    return general(op, dt, [t], [(dt, t.shape)], [ax])


def cumsum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Tensor:
    """Cumulative sum along ``axis`` (flattened when None)."""
    _no_out("cumsum", out)
    r = _cumulative(CUMSUM, a, axis, "cumsum")
    return r if dtype is None else r.astype(dtype)


def cumprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Tensor:
    """Cumulative product along ``axis``; exact gradient with zeros, no division."""
    _no_out("cumprod", out)
    r = _cumulative(CUMPROD, a, axis, "cumprod")
    return r if dtype is None else r.astype(dtype)


def safe_sqrt(s: Any) -> Tensor:
    """sqrt(s) whose gradient at s == 0 is 0 (a subgradient) instead of inf * 0 = nan:
    ``sqrt(s + [s == 0]) * [s != 0]``, the masks being constants of the graph."""
    from .. import numpy as tnp

    return tnp.sqrt(s + (s == 0)) * (s != 0)


def var(
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    ddof: int = 0,
    keepdims: bool = False,
) -> Tensor:
    """Variance: mean squared deviation from the mean, divided by ``n - ddof``."""
    _no_out("var", out)
    t = as_tensor(a) if dtype is None else as_tensor(a).astype(dtype)
    axes = normalize_axes(axis, t.ndim, "var")
    n = math.prod([t.shape[d] for d in axes])
    d = t - mean(t, axis=axes, keepdims=True)
    return sum(d * d, axis=axes, keepdims=keepdims) * (1.0 / (n - ddof) if n > ddof else np.nan)


def std(
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    ddof: int = 0,
    keepdims: bool = False,
) -> Tensor:
    """Standard deviation: sqrt(var); its gradient where the variance is 0 is 0."""
    _no_out("std", out)
    return safe_sqrt(var(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims))


def average(
    a: Any, axis: Any = None, weights: Any = None, returned: bool = False, keepdims: bool = False
) -> Any:
    """Weighted average along ``axis`` (``weights`` 1-D along one axis, or a's shape)."""
    t = as_tensor(a)
    if weights is None:
        avg = mean(t, axis=axis, keepdims=keepdims)
        if returned:
            n = t.size / avg.size if avg.size else 0.0
            return avg, Tensor._external(np.full(avg.shape, n, t.dtype))
        return avg
    w = as_tensor(weights)
    if w.shape != t.shape:
        if axis is None or w.ndim != 1 or isinstance(axis, tuple | list):
            raise TypeError(
                "average: 1-D weights need a single axis; otherwise weights "
                f"must have a's shape (got {w.shape} and {t.shape})"
            )
        (ax,) = normalize_axes(axis, t.ndim, "average")
        if w.shape[0] != t.shape[ax]:
            raise ValueError(
                f"average: length of weights {w.shape[0]} differs from axis {ax} of shape {t.shape}"
            )
        w = w.reshape(tuple(w.shape[0] if d == ax else 1 for d in range(t.ndim)))
    total = sum(w * (t * 0 + 1), axis=axis, keepdims=keepdims)
    avg = sum(t * w, axis=axis, keepdims=keepdims) / total
    return (avg, total) if returned else avg


def _arg(kind: str, a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Tensor:
    _no_out(kind, out)
    v = a._value() if isinstance(a, Tensor) else np.asarray(a)
    f = np.argmax if kind == "argmax" else np.argmin
    return Tensor._external(np.asarray(f(v, axis=axis, keepdims=keepdims), np.int64))


def argmax(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Tensor:
    """Index of the maximum (an integer constant: not differentiable)."""
    return _arg("argmax", a, axis, out, keepdims)


def argmin(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Tensor:
    """Index of the minimum (an integer constant: not differentiable)."""
    return _arg("argmin", a, axis, out, keepdims)


def _like(a: np.ndarray, x: Any) -> np.ndarray:
    return a.astype(x.dtype)


def _axis_cases(name: str, extra: dict | None = None) -> Any:
    """Axis variants of a numpy-named reduction ``name``."""
    kw = extra or {}

    def cases() -> list:
        def f(m):
            return getattr(m, name)

        return [
            ("all", lambda m, x: f(m)(x, **kw), [(3, 4)], {}),
            ("0-d", lambda m, x: f(m)(x, **kw), [()], {}),
            ("axis=0", lambda m, x: f(m)(x, axis=0, **kw), [(3, 4)], {}),
            ("axis=-1", lambda m, x: f(m)(x, axis=-1, **kw), [(2, 3, 4)], {}),
            ("axis=(0,2)", lambda m, x: f(m)(x, axis=(0, 2), **kw), [(2, 3, 4)], {}),
            ("axis=1 keepdims", lambda m, x: f(m)(x, axis=1, keepdims=True, **kw), [(2, 3, 4)], {}),
            ("all keepdims", lambda m, x: f(m)(x, keepdims=True, **kw), [(2, 3)], {}),
            ("1-d", lambda m, x: f(m)(x, **kw), [(7,)], {}),
            ("after broadcast", lambda m, x, y: f(m)(x * y, axis=0, **kw), [(3, 1), (4,)], {}),
        ]

    return cases


def _extreme_cases(name: str) -> Any:
    base = _axis_cases(name)

    def cases() -> list:
        ties = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.5]])
        return [
            *base(),
            (
                "ties share the gradient",
                lambda m, x: (
                    getattr(m, name)(
                        x * 0.0 + _like(ties, x) * (1 if name == "max" else -1), axis=1
                    )
                    + getattr(m, name)(x)
                ),
                [(2, 3)],
                {},
            ),
        ]

    return cases


def _prod_cases() -> list:
    zeros = np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0], [1.5, 2.0, 0.5]])
    return [
        *_axis_cases("prod")(),
        ("with zeros", lambda m, x: m.prod((x + 1) * _like(zeros, x), axis=1), [(3, 3)], {}),
    ]


def _cumulative_cases(name: str) -> Any:
    def cases() -> list:
        def f(m):
            return getattr(m, name)

        zero = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
        out = [
            ("flattened", lambda m, x: f(m)(x), [(2, 3)], {}),
            ("axis=0", lambda m, x: f(m)(x, axis=0), [(3, 4)], {}),
            ("axis=1", lambda m, x: f(m)(x, axis=1), [(2, 3, 4)], {}),
            ("axis=-1", lambda m, x: f(m)(x, axis=-1), [(5,)], {}),
        ]
        if name == "cumprod":
            out.append(("with zeros", lambda m, x: f(m)(x * _like(zero, x)), [(6,)], {}))
        return out

    return cases


def _var_cases(name: str) -> Any:
    base = _axis_cases(name)

    def cases() -> list:
        f = lambda m: getattr(m, name)  # noqa: E731
        return [c for c in base() if c[0] not in ("0-d",)] + [
            ("ddof=1", lambda m, x: f(m)(x, axis=0, ddof=1), [(4, 3)], {}),
        ]

    return cases


def _average_cases() -> list:
    return [
        ("no weights", lambda m, x: m.average(x, axis=0), [(3, 4)], {}),
        ("1-d weights", lambda m, x, w: m.average(x, axis=1, weights=w + 2.5), [(3, 4), (4,)], {}),
        ("full weights", lambda m, x, w: m.average(x, weights=w + 2.5), [(3, 4), (3, 4)], {}),
    ]


def _arg_cases(name: str) -> Any:
    def cases() -> list:
        return [
            ("all", lambda m, x: getattr(m, name)(x), [(3, 4)], {}),
            ("axis=1", lambda m, x: getattr(m, name)(x, axis=1), [(3, 4)], {}),
        ]

    return cases


SUM = Op(
    "sum",
    Kind.ARRAY,
    sum_fwd,
    sum_bwd,
    "sum over axes (None, int or tuple; keepdims)",
    front=sum,
    cuda="sum",
    array_saves=(),
    cases=_axis_cases("sum"),
)
MEAN = Op(
    "mean",
    Kind.ARRAY,
    sum_fwd,
    sum_bwd,
    "mean over axes (None, int or tuple; keepdims)",
    front=mean,
    cuda="mean",
    array_saves=(),
    cases=_axis_cases("mean"),
)
PROD = Op(
    "prod",
    Kind.ARRAY,
    prod_fwd,
    prod_bwd,
    "product over axes; exact gradient with zeros",
    front=prod,
    cases=_prod_cases,
)
MAX = Op(
    "max",
    Kind.ARRAY,
    max_fwd,
    extreme_bwd,
    "maximum over axes; ties share the gradient",
    front=max,
    cases=_extreme_cases("max"),
    aliases=("amax",),
)
MIN = Op(
    "min",
    Kind.ARRAY,
    min_fwd,
    extreme_bwd,
    "minimum over axes; ties share the gradient",
    front=min,
    cases=_extreme_cases("min"),
    aliases=("amin",),
)
CUMSUM = Op(
    "cumsum",
    Kind.ARRAY,
    cumsum_fwd,
    cumsum_bwd,
    "cumulative sum along an axis",
    front=cumsum,
    array_saves=(),
    cases=_cumulative_cases("cumsum"),
)
CUMPROD = Op(
    "cumprod",
    Kind.ARRAY,
    cumprod_fwd,
    cumprod_bwd,
    "cumulative product along an axis; exact gradient with zeros",
    front=cumprod,
    cases=_cumulative_cases("cumprod"),
)
VAR = Op(
    "var",
    Kind.COMPOSITE,
    None,
    None,
    "variance over axes (ddof)",
    front=var,
    cases=_var_cases("var"),
)
STD = Op(
    "std",
    Kind.COMPOSITE,
    None,
    None,
    "standard deviation (ddof); gradient 0 where it is 0",
    front=std,
    cases=_var_cases("std"),
)
AVERAGE = Op(
    "average",
    Kind.COMPOSITE,
    None,
    None,
    "weighted average along an axis",
    front=average,
    cases=_average_cases,
)
ARGMAX = Op(
    "argmax",
    Kind.COMPOSITE,
    None,
    None,
    "index of the maximum (integer constant)",
    front=argmax,
    differentiable=False,
    cases=_arg_cases("argmax"),
)
ARGMIN = Op(
    "argmin",
    Kind.COMPOSITE,
    None,
    None,
    "index of the minimum (integer constant)",
    front=argmin,
    differentiable=False,
    cases=_arg_cases("argmin"),
)
