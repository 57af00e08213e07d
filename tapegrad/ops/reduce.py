"""Reductions: sum and mean over axes (one kernel pair, a scale parameter)."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..kernels.reduce import sum_bwd, sum_fwd
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


def _reduce(op: Op, x: Any, axis: Any, keepdims: bool, mean: bool) -> Tensor:
    t = as_tensor(x)
    shape = t.shape
    axes = normalize_axes(axis, len(shape), op.name)
    dt = DTYPE_CODE[t.dtype]
    if dt not in FLOAT_CODES:  # integer/bool data: not differentiable, NumPy reduces
        f = np.mean if mean else np.sum
        return Tensor._external(np.asarray(f(t._value(), axis=axes, keepdims=keepdims)))
    if keepdims:
        out_shape = tuple(1 if d in axes else n for d, n in enumerate(shape))
    else:
        out_shape = tuple(n for d, n in enumerate(shape) if d not in axes)
    count = int(np.prod([shape[d] for d in axes], dtype=np.int64))
    # mean of nothing is NaN, as in NumPy (which also warns)
    scale = (1.0 / count if count else float("nan")) if mean else 1.0
    return general(op, dt, [t], [(dt, out_shape)], [len(axes), *axes], [scale])


def sum(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Sum over ``axis`` (None: all; int or tuple of ints), as ``numpy.sum``."""
    return _reduce(SUM, x, axis, keepdims, mean=False)


def mean(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Arithmetic mean over ``axis``, as ``numpy.mean``."""
    return _reduce(MEAN, x, axis, keepdims, mean=True)


def _cases(name: str) -> Any:
    def cases() -> list:
        f = {"sum": lambda m: m.sum, "mean": lambda m: m.mean}[name]
        return [
            ("all", lambda m, x: f(m)(x), [(3, 4)], {}),
            ("0-d", lambda m, x: f(m)(x), [()], {}),
            ("axis=0", lambda m, x: f(m)(x, axis=0), [(3, 4)], {}),
            ("axis=-1", lambda m, x: f(m)(x, axis=-1), [(2, 3, 4)], {}),
            ("axis=(0,2)", lambda m, x: f(m)(x, axis=(0, 2)), [(2, 3, 4)], {}),
            ("axis=1 keepdims", lambda m, x: f(m)(x, axis=1, keepdims=True), [(2, 3, 4)], {}),
            ("all keepdims", lambda m, x: f(m)(x, keepdims=True), [(2, 3)], {}),
            ("1-d", lambda m, x: f(m)(x), [(7,)], {}),
            ("after broadcast", lambda m, x, y: f(m)(x * y, axis=0), [(3, 1), (4,)], {}),
        ]

    return cases


SUM = Op(
    "sum",
    Kind.ARRAY,
    sum_fwd,
    sum_bwd,
    "sum over axes (None, int or tuple; keepdims)",
    front=sum,
    cases=_cases("sum"),
)
MEAN = Op(
    "mean",
    Kind.ARRAY,
    sum_fwd,
    sum_bwd,
    "mean over axes (None, int or tuple; keepdims)",
    front=mean,
    cases=_cases("mean"),
)
