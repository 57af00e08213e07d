"""NumPy's index rearrangements and selections on tensors (flips, rotations, ``atleast_*``,
triangles, splits, ``sort``, ``partition``, ``take_along_axis``, ``select``, ``choose``,
``compress``, ``extract``, stacks): NumPy's own function applied to an array of
positions, the tensor gathered at them."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...recording import as_tensor
from ...tensors import Tensor
from ..shape.front import (
    axis_index,
    broadcast_to,
    concatenate,
    gather_positions,
    reshape,
    stack,
    where,
)
from .rows import (
    APPEND,
    ATLEAST_1D,
    ATLEAST_2D,
    ATLEAST_3D,
    CHOOSE,
    COLUMN_STACK,
    COMPRESS,
    DSPLIT,
    DSTACK,
    EXTRACT,
    FLIPLR,
    FLIPUD,
    HSPLIT,
    PARTITION,
    ROLLAXIS,
    ROT90,
    SELECT,
    SORT,
    TAKE_ALONG_AXIS,
    TRIL,
    TRIU,
    VSPLIT,
)


def flipud(m: Any) -> Tensor:
    """``numpy.flipud``: the order of the rows reversed (axis 0), as a gather of
    positions (gradient: scatter-add)."""
    return gather_positions(m, np.flipud, what="flipud")


def fliplr(m: Any) -> Tensor:
    """``numpy.fliplr``: the order of the columns reversed (axis 1), as a gather of
    positions (gradient: scatter-add)."""
    return gather_positions(m, np.fliplr, what="fliplr")


def rot90(m: Any, k: int = 1, axes: Any = (0, 1)) -> Tensor:
    """``numpy.rot90``: rotated by 90 degrees ``k`` times, from the first axis of
    ``axes`` toward the second, as a gather of positions (gradient: scatter-add)."""
    return gather_positions(m, lambda p: np.rot90(p, k, axes), what="rot90")


def rollaxis(a: Any, axis: int, start: int = 0) -> Tensor:
    """``numpy.rollaxis``: ``axis`` moved to before position ``start``, as a gather of
    positions (gradient: scatter-add)."""
    return gather_positions(a, lambda p: np.rollaxis(p, axis, start), what="rollaxis")


_AT_LEAST = {
    "atleast_1d": "one dimension",
    "atleast_2d": "two dimensions",
    "atleast_3d": "three dimensions",
}


def _at_least(what: str, numpy_fn: Any) -> Any:
    """``numpy.atleast_<n>d`` of each argument (a gather of positions; gradient:
    scatter-add): one tensor for one argument, a tuple for several, as NumPy's."""

    def fn(*arys: Any) -> Any:
        out = tuple(gather_positions(a, numpy_fn, what=what) for a in arys)
        return out[0] if len(out) == 1 else out

    fn.__name__ = fn.__qualname__ = what
    fn.__doc__ = (
        f"``numpy.{what}``: each input with at least {_AT_LEAST[what]} (new axes of "
        "length 1), as a gather of positions (gradient: scatter-add)."
    )
    return fn


atleast_1d = _at_least("atleast_1d", np.atleast_1d)
atleast_2d = _at_least("atleast_2d", np.atleast_2d)
atleast_3d = _at_least("atleast_3d", np.atleast_3d)


def _triangle(keep: Any, what: str) -> Any:
    def fn(m: Any, k: int = 0) -> Tensor:
        # NumPy's own function on the positions shifted by one: those outside the
        # triangle (0) read the fill value 0 (position -1); a 1-D input is the last row
        # of the matrix NumPy broadcasts it to, as in NumPy
        return gather_positions(m, lambda p: keep(p + 1, k) - 1, fill=0.0, what=what)

    fn.__name__ = fn.__qualname__ = what
    fn.__doc__ = f"``numpy.{what}``: the triangle kept, zeros elsewhere (a 1-D input: its rows)."
    return fn


tril = _triangle(np.tril, "tril")
triu = _triangle(np.triu, "triu")


def append(arr: Any, values: Any, axis: Any = None) -> Tensor:
    """``values`` appended to ``arr`` (both flattened when ``axis`` is None)."""
    a, v = as_tensor(arr), as_tensor(values)
    if axis is None:
        return concatenate([reshape(a, -1), reshape(v, -1)])
    return concatenate([a, v], axis=axis)


def _splitter(what: str, numpy_fn: Any) -> Any:
    def fn(ary: Any, indices_or_sections: Any) -> list[Tensor]:
        t = as_tensor(ary)
        positions = np.arange(t.size, dtype=np.int64).reshape(t.shape)
        try:
            pieces = numpy_fn(positions, indices_or_sections)
        except ValueError as e:
            raise ValueError(f"{what}: {e} (tensor of shape {t.shape})") from None
        return [gather_positions(t, lambda p, q=q: q, what=what) for q in pieces]

    fn.__name__ = fn.__qualname__ = what
    fn.__doc__ = f"``numpy.{what}``: pieces gathered from the tensor."
    return fn


vsplit = _splitter("vsplit", np.vsplit)
hsplit = _splitter("hsplit", np.hsplit)
dsplit = _splitter("dsplit", np.dsplit)


def sort(a: Any, axis: Any = -1, kind: Any = None, order: Any = None) -> Tensor:
    """Sorted along ``axis`` (flattened when None). The order comes from the values (a
    constant permutation, ``numpy.argsort`` with ``kind``); the gradient goes back
    through it (tied values: whichever order argsort gives, a valid subgradient)."""
    if order is not None:
        raise TypeError("sort: order= (structured arrays) is not supported")
    t = as_tensor(a)
    if axis is not None:  # (NumPy's sort takes a bool axis as an int)
        axis = axis_index(axis, t.ndim, "sort")
    order_ = _arrangement(np.argsort, "sort", t._value(), axis=axis, kind=kind)
    if axis is None:
        return gather_positions(t, lambda p: p.reshape(-1)[order_], what="sort")
    return gather_positions(t, lambda p: np.take_along_axis(p, order_, axis=axis), what="sort")


def _arrangement(arg: Any, name: str, values: np.ndarray, *args: Any, **kwargs: Any) -> Any:
    """``arg(values, ...)`` (``argsort``, ``argpartition``), its errors naming ``name``."""
    try:
        return arg(values, *args, **kwargs)
    except (ValueError, TypeError) as e:
        raise type(e)(f"{name}: {e} (tensor of shape {values.shape})") from None


def _values(v: Any) -> Any:
    """An index or condition's values (a tensor's are read: a guard while capturing)."""
    return v._value() if isinstance(v, Tensor) else v


def partition(
    a: Any, kth: Any, axis: Any = -1, kind: str = "introselect", order: Any = None
) -> Tensor:
    """``numpy.partition``: the ``kth`` element(s) in sorted place, the others on the
    correct side (the arrangement from ``numpy.argpartition`` of the values; the
    gradient follows it)."""
    if order is not None:
        raise TypeError("partition: order= (structured arrays) is not supported")
    t = as_tensor(a)
    if axis is not None:  # (NumPy's partition takes a bool axis as an int)
        axis = axis_index(axis, t.ndim, "partition")
    idx = _arrangement(np.argpartition, "partition", t._value(), kth, axis=axis, kind=kind)
    if axis is None:
        return gather_positions(t, lambda p: p.reshape(-1)[idx], what="partition")
    return gather_positions(t, lambda p: np.take_along_axis(p, idx, axis=axis), what="partition")


def take_along_axis(arr: Any, indices: Any, axis: Any = -1) -> Tensor:
    """Gather along ``axis`` with an index array (``numpy.take_along_axis``)."""
    idx = np.asarray(_values(indices))
    return gather_positions(
        arr, lambda p: np.take_along_axis(p, idx, axis=axis), what="take_along_axis"
    )


def select(condlist: Any, choicelist: Any, default: Any = 0) -> Tensor:
    """Elementwise, the choice of the first true condition, else ``default``."""
    if len(condlist) != len(choicelist):
        raise ValueError("select: list of cases must be same length as list of conditions")
    if not condlist:
        raise ValueError("select with an empty condition list is not possible")
    out = default  # a Python number stays weak in NumPy's promotion (float32 choices)
    for cond, choice in reversed(list(zip(condlist, choicelist))):
        out = where(cond, choice, out)
    return out


def choose(a: Any, choices: Any, out: Any = None, mode: str = "raise") -> Tensor:
    """``numpy.choose``: each element from the choice its index in ``a`` names."""
    if out is not None:
        raise TypeError("choose: out= is not supported (tensors are immutable)")
    idx = np.asarray(_values(a))
    ts = [as_tensor(c) for c in choices]
    shape = np.broadcast_shapes(idx.shape, *[t.shape for t in ts])
    stacked = stack([broadcast_to(t, shape) for t in ts])
    return gather_positions(stacked, lambda p: np.choose(idx, p, mode=mode), what="choose")


def compress(condition: Any, a: Any, axis: Any = None, out: Any = None) -> Tensor:
    """The slices of ``a`` along ``axis`` (flattened when None) where ``condition``."""
    if out is not None:
        raise TypeError("compress: out= is not supported (tensors are immutable)")
    cond = np.asarray(_values(condition))
    return gather_positions(a, lambda p: np.compress(cond, p, axis=axis), what="compress")


def extract(condition: Any, arr: Any) -> Tensor:
    """The elements of ``arr`` where ``condition`` is true, flattened."""
    cond = np.asarray(_values(condition))
    return gather_positions(arr, lambda p: np.extract(cond, p), what="extract")


def dstack(tup: Any) -> Tensor:
    """Stack along the third axis (inputs made at least 3-D, NumPy's way)."""
    return concatenate([atleast_3d(t) for t in tup], axis=2)


def column_stack(tup: Any) -> Tensor:
    """1-D arrays as columns and 2-D arrays as they are, side by side."""
    cols = [as_tensor(t) for t in tup]
    return concatenate([t.reshape(-1, 1) if t.ndim < 2 else t for t in cols], axis=1)


FLIPUD.front = flipud
FLIPLR.front = fliplr
ROT90.front = rot90
ROLLAXIS.front = rollaxis
ATLEAST_1D.front = atleast_1d
ATLEAST_2D.front = atleast_2d
ATLEAST_3D.front = atleast_3d
TRIL.front = tril
TRIU.front = triu
APPEND.front = append
VSPLIT.front = vsplit
HSPLIT.front = hsplit
DSPLIT.front = dsplit
SORT.front = sort
PARTITION.front = partition
TAKE_ALONG_AXIS.front = take_along_axis
SELECT.front = select
CHOOSE.front = choose
COMPRESS.front = compress
EXTRACT.front = extract
DSTACK.front = dstack
COLUMN_STACK.front = column_stack
