"""Differences, integrals and interpolation on tensors: ``diff``, ``gradient``,
``trapezoid``, ``cumulative_trapezoid`` and ``interp``, written in other ops."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...recording import as_tensor
from ...tensors import Tensor
from ..reduce.front import cumsum
from ..reduce.front import sum as rsum
from ..shape.front import axis_index, concatenate, getitem, reshape, where
from .rows import CUMULATIVE_TRAPEZOID, DIFF, GRADIENT, INTERP, TRAPEZOID


def diff(a: Any, n: int = 1, axis: int = -1) -> Tensor:
    """``n``-th discrete difference along ``axis``."""
    t = as_tensor(a)
    if n == 0:  # NumPy returns a before it looks at the axis
        return t
    if n < 0:
        raise ValueError(f"diff: order must be non-negative but got {n}")
    ax = axis_index(axis, t.ndim, "diff")
    if t.dtype.kind == "b":  # NumPy's difference of bools is not_equal (no gradient)
        return Tensor._external(np.diff(t._value(), n, axis=ax))
    for _ in range(n):
        head = [slice(None)] * t.ndim
        tail = [slice(None)] * t.ndim
        head[ax], tail[ax] = slice(1, None), slice(None, -1)
        t = getitem(t, tuple(head)) - getitem(t, tuple(tail))
    return t


def trapezoid(y: Any, x: Any = None, dx: float = 1.0, axis: int = -1) -> Tensor:
    """The integral of ``y`` along ``axis`` by the trapezoidal rule, on sample points
    ``x`` (differentiable too) or a spacing ``dx``."""
    t = as_tensor(y)
    ax = axis_index(axis, t.ndim, "trapezoid", bools=False)
    xs = None if x is None else as_tensor(x)
    if xs is None and not isinstance(dx, Tensor | int | float | np.integer | np.floating):
        # (an array dx, as NumPy allows, must broadcast with y's pairs)
        try:
            np.asarray(dx, dtype=float)
        except (ValueError, TypeError):
            raise TypeError(f"trapezoid: dx must be a number or an array, got {dx!r}") from None
        pairs = tuple(max(n - 1, 0) if d == ax else n for d, n in enumerate(t.shape))
        try:
            np.broadcast_shapes(np.shape(dx), pairs)
        except ValueError:
            raise ValueError(
                f"trapezoid: dx of shape {np.shape(dx)} does not broadcast with the {pairs} "
                "pairs of points of y"
            ) from None
    if xs is not None:  # x's spacings must broadcast with y's pairs (checked before recording)
        if xs.ndim == 1:
            steps = tuple(max(xs.shape[0] - 1, 0) if d == ax else 1 for d in range(t.ndim))
        else:
            steps = list(xs.shape)
            steps[axis_index(axis, xs.ndim, "trapezoid", bools=False)] -= 1
        pairs = tuple(max(n - 1, 0) if d == ax else n for d, n in enumerate(t.shape))
        try:
            np.broadcast_shapes(steps, pairs)
        except ValueError:
            raise ValueError(
                f"trapezoid: x of shape {xs.shape} does not fit y of shape {t.shape} along "
                f"axis {axis}"
            ) from None
    head = [slice(None)] * t.ndim
    tail = [slice(None)] * t.ndim
    head[ax], tail[ax] = slice(1, None), slice(None, -1)
    mid = (getitem(t, tuple(head)) + getitem(t, tuple(tail))) * 0.5
    if xs is None:
        return rsum(mid * dx, axis=ax)
    spacing = diff(xs, axis=-1 if xs.ndim == 1 else axis)
    if xs.ndim == 1:
        spacing = reshape(spacing, (-1,) + (1,) * (t.ndim - 1 - ax))
    return rsum(mid * spacing, axis=ax)


def interp(
    x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None, period: Any = None
) -> Tensor:
    """``numpy.interp``: piecewise-linear through ``(xp, fp)``, ``fp[0]`` (``left``)
    below ``xp[0]`` and ``fp[-1]`` (``right``) above ``xp[-1]``. The segment of each
    point is found from the values (a constant choice); within it the result is
    differentiable in ``x``, ``xp`` and ``fp``."""
    if period is not None:
        raise TypeError("interp: period= is not supported")
    tx, txp, tfp = as_tensor(x), as_tensor(xp), as_tensor(fp)
    if txp.ndim != 1 or tfp.shape != txp.shape or txp.shape[0] < 1:
        raise ValueError(
            f"interp: xp and fp must be 1-D of one length >= 1, got {txp.shape}, {tfp.shape}"
        )
    for what, v in (("left", left), ("right", right)):  # NumPy takes one number each
        if v is not None and np.ndim(v) != 0:
            raise TypeError(f"interp: {what} must be a number, got shape {np.shape(v)}")
    # in float64, as NumPy (bool, integer and float32 data too)
    tx, txp, tfp = (t if t.dtype == np.float64 else t.astype(np.float64) for t in (tx, txp, tfp))
    grid = txp._value()
    where_x = tx._value()
    below = tfp[0] if left is None else left
    above = tfp[-1] if right is None else right
    if grid.size == 1:  # one point: fp[0] there (and at NaN), as NumPy's
        return where(where_x > grid[-1], above, where(where_x < grid[0], below, tfp[0]))
    seg = np.clip(np.searchsorted(grid, where_x, side="right") - 1, 0, grid.size - 2)
    x0, x1 = getitem(txp, seg), getitem(txp, seg + 1)
    y0, y1 = getitem(tfp, seg), getitem(tfp, seg + 1)
    inside = y0 + (tx - x0) * (y1 - y0) / (x1 - x0)
    return where(where_x > grid[-1], above, where(where_x < grid[0], below, inside))


def gradient(f: Any, *varargs: Any, axis: Any = None, edge_order: int = 1) -> Any:
    """``numpy.gradient`` with scalar spacings and ``edge_order=1``: central differences
    inside, one-sided at the edges; a tuple for several axes, as NumPy 2."""
    if edge_order != 1:
        raise TypeError("gradient: only edge_order=1 is supported")
    t = as_tensor(f)
    axes = (
        tuple(range(t.ndim))
        if axis is None
        else (axis if isinstance(axis, tuple | list) else (axis,))
    )
    axes = tuple(axis_index(a, t.ndim, "gradient") for a in axes)  # in the order given
    if len(set(axes)) != len(axes):
        raise ValueError(f"gradient: repeated axis in {axis}")
    if not varargs:
        varargs = (1.0,)
    spacing = varargs * len(axes) if len(varargs) == 1 else varargs  # one for all, or each
    if len(spacing) != len(axes) or any(np.ndim(h) for h in spacing):
        raise TypeError("gradient: only one scalar spacing per axis is supported")
    for h in spacing:  # (every check before the first axis is recorded)
        if not isinstance(h, Tensor) and np.asarray(h).dtype.kind not in "iuf":
            raise TypeError(f"gradient: a spacing must be a number, got {h!r}")
    for ax in axes:
        if t.shape[ax] < 2:
            raise ValueError(f"gradient: axis {ax} needs at least 2 points, has {t.shape[ax]}")
    out = []
    for ax, h in zip(axes, spacing):

        def part(s: slice, ax: int = ax) -> Tensor:
            index = [slice(None)] * t.ndim
            index[ax] = s
            return getitem(t, tuple(index))

        first = (part(slice(1, 2)) - part(slice(0, 1))) / h
        last = (part(slice(-1, None)) - part(slice(-2, -1))) / h
        middle = (part(slice(2, None)) - part(slice(None, -2))) / (2.0 * h)
        out.append(concatenate([first, middle, last], axis=ax))
    return out[0] if len(out) == 1 else tuple(out)


def cumulative_trapezoid(
    y: Any, x: Any = None, dx: float = 1.0, axis: int = -1, initial: Any = None
) -> Tensor:
    """Running integral by the trapezoidal rule (``scipy.integrate``); ``x`` 1-D along
    ``axis`` or of y's shape; ``initial`` None or 0 (prepended)."""
    t = as_tensor(y)
    ax = axis_index(axis, t.ndim, "cumulative_trapezoid", bools=False)
    n = t.shape[ax]
    if n == 0:  # SciPy's error (an empty result would hide it)
        raise ValueError("cumulative_trapezoid: at least one point is required along the axis")
    if initial is not None and not (isinstance(initial, int | float | np.number) and initial == 0):
        raise ValueError("cumulative_trapezoid: `initial` must be `None` or `0`.")

    def part(v: Tensor, s: slice) -> Tensor:
        index = [slice(None)] * v.ndim
        index[ax if v.ndim == t.ndim else 0] = s
        return getitem(v, tuple(index))

    if x is None:
        d = dx
    else:
        xs = as_tensor(x)
        if xs.ndim == 1:
            if xs.shape[0] != n:
                raise ValueError(
                    f"cumulative_trapezoid: x of length {xs.shape[0]} along an axis of {n}"
                )
            d = part(xs, slice(1, None)) - part(xs, slice(None, -1))
            d = d.reshape([n - 1 if i == ax else 1 for i in range(t.ndim)])
        else:
            # SciPy's rule: y's dimensions, y's length along the axis, the others broadcast
            # (checked before anything is recorded)
            try:
                np.broadcast_shapes(xs.shape, t.shape)
                fits = xs.ndim == t.ndim and xs.shape[ax] == n
            except ValueError:
                fits = False
            if not fits:
                raise ValueError(
                    f"cumulative_trapezoid: x must be 1-D of length {n}, or broadcast with y's "
                    f"shape {t.shape} and have its length along the axis; got shape {xs.shape}"
                )
            d = part(xs, slice(1, None)) - part(xs, slice(None, -1))
    res = cumsum(d * (part(t, slice(1, None)) + part(t, slice(None, -1))) * 0.5, axis=ax)
    if initial is None:
        return res
    zero_shape = [1 if i == ax else s for i, s in enumerate(res.shape)]
    return concatenate([np.zeros(zero_shape, res.dtype), res], axis=ax)


DIFF.front = diff
TRAPEZOID.front = trapezoid
INTERP.front = interp
GRADIENT.front = gradient
CUMULATIVE_TRAPEZOID.front = cumulative_trapezoid
