"""The public functions of the rows of :mod:`tapegrad.ops.extra`, written in other ops."""

from __future__ import annotations

import builtins
import math
import operator
import warnings
from typing import Any

import numpy as np

from ..ops.extra import (
    ANGLE,
    APPEND,
    ATLEAST_1D,
    ATLEAST_2D,
    ATLEAST_3D,
    CHOOSE,
    COLUMN_STACK,
    COMPRESS,
    CONJ,
    COPYSIGN,
    CORRCOEF,
    CORRELATE,
    COV,
    CROSS,
    CUMULATIVE_TRAPEZOID,
    DEG2RAD,
    DIFF,
    DSPLIT,
    DSTACK,
    EXTRACT,
    FLIPLR,
    FLIPUD,
    FMOD,
    GRADIENT,
    HSPLIT,
    IMAG,
    INTERP,
    KRON,
    MEDIAN,
    NAN_TO_NUM,
    NANCUMPROD,
    NANCUMSUM,
    NANMAX,
    NANMEAN,
    NANMIN,
    NANPROD,
    NANSTD,
    NANSUM,
    NANVAR,
    PARTITION,
    PERCENTILE,
    POLYVAL,
    POSITIVE,
    PTP,
    QUANTILE,
    RAD2DEG,
    REAL,
    REAL_IF_CLOSE,
    ROLLAXIS,
    ROT90,
    SELECT,
    SINC,
    SORT,
    TAKE_ALONG_AXIS,
    TRAPEZOID,
    TRIL,
    TRIU,
    VANDER,
    VSPLIT,
)
from ..shapes import normalize_axes
from ..tensors import Tensor, as_tensor, is_grad_enabled
from .convolution import conv_mode, convolve
from .reduce import check_ddof, cumprod, cumsum, dtype_of, in_dtype, no_out, std, var
from .reduce import max as rmax
from .reduce import min as rmin
from .reduce import prod as rprod
from .reduce import sum as rsum
from .shape import (
    axis_index,
    broadcast_to,
    clip,
    concatenate,
    diagonal,
    gather_positions,
    getitem,
    moveaxis,
    reshape,
    stack,
    where,
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


def _axes_last(t: Tensor, axes: tuple[int, ...] | None) -> tuple[Tensor, tuple[int, ...]]:
    """``t`` with ``axes`` (checked, non-negative; None: all) moved last and merged; the
    kept shape."""
    if axes is None:
        return reshape(t, -1), ()
    keep = [d for d in range(t.ndim) if d not in axes]
    moved = moveaxis(t, axes, range(t.ndim - len(axes), t.ndim)) if axes else t
    kept_shape = tuple(t.shape[d] for d in keep)
    return reshape(moved, (*kept_shape, math.prod(t.shape[d] for d in axes))), kept_shape


def _keepdims(r: Tensor, t: Tensor, axes: tuple[int, ...] | None, lead: int) -> Tensor:
    axes = range(t.ndim) if axes is None else axes
    shape = tuple(1 if d in axes else n for d, n in enumerate(t.shape))
    return reshape(r, r.shape[:lead] + shape)


def quantile(
    a: Any,
    q: Any,
    axis: Any = None,
    out: Any = None,
    overwrite_input: bool = False,
    method: str = "linear",
    keepdims: bool = False,
) -> Tensor:
    """``numpy.quantile`` with its default (``linear``) method: the order statistics at
    ``(n - 1) q`` (from a partition of the values), interpolated between the two
    neighbours. Differentiable in ``a``."""
    return _quantile(a, q, axis, out, method, keepdims, "quantile")


def _not_differentiated(v: Any, what: str, name: str) -> Any:
    """A tensor argument's values, for an argument ``name`` is not differentiated in
    (quantile's ``q``): one that requires grad is refused, not left silently."""
    if not isinstance(v, Tensor):
        return v
    if v.requires_grad and is_grad_enabled():
        raise TypeError(
            f"{name}: {what} requires grad, but {name} is not differentiated with respect "
            f"to {what}; pass {what}.detach()"
        )
    return v._value()


def _quantile(
    a: Any, q: Any, axis: Any, out: Any, method: str, keepdims: bool, name: str
) -> Tensor:
    """:func:`quantile`, its errors naming ``name`` (``percentile``'s q is divided by
    100 already, ``median``'s is 0.5). Everything is checked before the first op."""
    if out is not None or method != "linear":
        raise TypeError(f"{name}: only method='linear' and no out= are supported")
    t = as_tensor(a)
    # NumPy's AxisError for an axis t does not have (not a wrap-around); bools as ints,
    # lists as tuples (as NumPy's)
    axes = None if axis is None else normalize_axes(axis, t.ndim, name, bools=True, lists=True)
    if t.dtype.kind == "b" and name != "median":  # (NumPy's median of bools averages them)
        raise TypeError(f"{name}: boolean data has no quantiles (NumPy cannot subtract them)")
    q = _not_differentiated(q, "q", name)
    qs = np.asarray(q, dtype=float)
    if not np.all((qs >= 0) & (qs <= 1)):  # (NaN too)
        top = "100" if name == "percentile" else "1"
        raise ValueError(f"{name}: q must be in the range [0, {top}]")
    n = math.prod(t.shape) if axes is None else math.prod([t.shape[d] for d in axes])
    if n == 0:  # nothing to take order statistics of
        if name != "median":
            raise IndexError(f"{name}: no values along the axis to take a quantile of")
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's NaN, without its warning
            empty = np.median(np.zeros(t.shape, t.dtype), axis=axes, keepdims=keepdims)
        return Tensor._external(np.asarray(empty))
    if t.dtype.kind != "f":  # integer data: interpolated in float64, as NumPy
        t = t.astype(np.float64)
    flat, _ = _axes_last(t, axes)
    n = flat.shape[-1]
    pos = qs * (n - 1)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    # only these order statistics are needed: a partition (O(n)) puts them in place
    s = partition(flat, np.unique(np.concatenate([lo.reshape(-1), hi.reshape(-1)])), axis=-1)
    frac = (pos - lo).astype(t.dtype)
    below = getitem(s, (..., lo.reshape(-1)))
    above = getitem(s, (..., hi.reshape(-1)))
    r = below + (above - below) * frac.reshape(-1)  # (..., len(q))
    if t.dtype.kind == "f":  # a NaN anywhere along the axis makes it NaN, as in NumPy
        has_nan = rsum(where(flat != flat, 1.0, 0.0), axis=-1, keepdims=True) > 0
        r = where(has_nan, np.nan, r)
    r = moveaxis(r, -1, 0) if qs.ndim else r[..., 0]
    r = reshape(r, qs.shape + r.shape[1:]) if qs.ndim else r
    if keepdims:
        r = _keepdims(r, t, axes, qs.ndim)
    dtype = np.quantile(np.zeros(1, t.dtype), q).dtype  # NumPy's result dtype (q weak)
    return r if r.dtype == dtype else r.astype(dtype)


def percentile(
    a: Any,
    q: Any,
    axis: Any = None,
    out: Any = None,
    overwrite_input: bool = False,
    method: str = "linear",
    keepdims: bool = False,
) -> Tensor:
    """``numpy.percentile``: :func:`quantile` of ``q / 100``."""
    q = _not_differentiated(q, "q", "percentile")
    q = q / 100.0 if isinstance(q, int | float) else np.asarray(q, dtype=float) / 100.0
    return _quantile(a, q, axis, out, method, keepdims, "percentile")


def median(
    a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False, keepdims: bool = False
) -> Tensor:
    """``numpy.median``: the 0.5 quantile (NaN of nothing, as NumPy's)."""
    return _quantile(a, 0.5, axis, out, "linear", keepdims, "median")


def ptp(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Tensor:
    """Peak to peak: ``max - min`` along ``axis``."""
    no_out("ptp", out)
    t = as_tensor(a)
    # NumPy's errors, naming ptp, before the maximum is recorded
    if 0 in [t.shape[d] for d in normalize_axes(axis, t.ndim, "ptp")]:
        raise ValueError(f"ptp: zero-size array (shape {t.shape}) to a reduction with no identity")
    if t.dtype.kind == "b":
        raise TypeError("ptp: numpy boolean subtract, the `-` operator, is not supported")
    return rmax(t, axis=axis, keepdims=keepdims) - rmin(t, axis=axis, keepdims=keepdims)


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


def polyval(p: Any, x: Any) -> Tensor:
    """``p[0] x^(n-1) + ... + p[n-1]`` by Horner's rule (differentiable in ``p`` and ``x``)."""
    coefficients = as_tensor(p)
    x = as_tensor(x)  # (converted once, before anything is recorded)
    # NumPy's errors, before anything is recorded
    if coefficients.ndim == 0:
        raise TypeError("polyval: p must be a sequence of coefficients, got a 0-d array")
    try:
        np.broadcast_shapes(x.shape, coefficients.shape[1:])
    except ValueError:
        raise ValueError(
            f"polyval: x of shape {x.shape} does not broadcast with the coefficients' shape "
            f"{coefficients.shape[1:]} (p of shape {coefficients.shape})"
        ) from None
    if coefficients.shape[0] == 0:  # NumPy's zeros_like(x)
        return Tensor._external(np.zeros(x.shape, x.dtype))
    # NumPy's Horner from zeros_like(x): 0 * x first (NaN for an infinite x, as NumPy's)
    total = x * 0 + coefficients[0]
    for i in range(1, coefficients.shape[0]):
        total = total * x + coefficients[i]
    return total


def cross(
    a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: Any = None
) -> Tensor:
    """Cross product of 3-vectors along the last axis (broadcast over the others). As
    NumPy 2, which deprecates them and warns, 2-vectors count as 3-vectors in the x-y
    plane, and two of them give the z component alone."""
    if axis is not None or (axisa, axisb, axisc) != (-1, -1, -1):
        raise TypeError("cross: only vectors along the last axis (no axis arguments)")
    u, v = as_tensor(a), as_tensor(b)
    # NumPy's errors, before anything is recorded
    if u.ndim < 1 or v.ndim < 1:
        raise ValueError(f"cross: at least one array has zero dimension ({u.shape} and {v.shape})")
    if u.shape[-1] not in (2, 3) or v.shape[-1] not in (2, 3):
        raise ValueError(
            "cross: incompatible dimensions for cross product (dimension must be 2 or 3), got "
            f"{u.shape} and {v.shape}"
        )
    try:
        np.broadcast_shapes(u.shape[:-1], v.shape[:-1])
    except ValueError:
        raise ValueError(f"cross: shapes {u.shape} and {v.shape} do not broadcast") from None
    if 2 in (u.shape[-1], v.shape[-1]):
        warnings.warn(
            "cross: Arrays of 2-dimensional vectors are deprecated. Use arrays of "
            "3-dimensional vectors instead. (deprecated in NumPy 2.0)",
            DeprecationWarning,
            stacklevel=2,
        )
    ux, uy, vx, vy = u[..., 0], u[..., 1], v[..., 0], v[..., 1]
    z = ux * vy - uy * vx
    if u.shape[-1] == v.shape[-1] == 2:
        return z
    if u.shape[-1] == 2:  # u's z component is 0
        vz = v[..., 2]
        parts = [uy * vz, -(ux * vz), z]
    elif v.shape[-1] == 2:  # v's
        uz = u[..., 2]
        parts = [-(uz * vy), uz * vx, z]
    else:
        uz, vz = u[..., 2], v[..., 2]
        parts = [uy * vz - uz * vy, uz * vx - ux * vz, z]
    return concatenate([reshape(c, (*c.shape, 1)) for c in parts], axis=-1)


def kron(a: Any, b: Any) -> Tensor:
    """Kronecker product: every element of ``a`` times ``b``, blocks in ``a``'s layout."""
    u, v = as_tensor(a), as_tensor(b)
    nd = max(u.ndim, v.ndim)
    u = reshape(u, (1,) * (nd - u.ndim) + u.shape)
    v = reshape(v, (1,) * (nd - v.ndim) + v.shape)
    # interleave: u's axis i at 2i, v's at 2i + 1, then merge the pairs
    ue = reshape(u, tuple(d for n in u.shape for d in (n, 1)))
    ve = reshape(v, tuple(d for n in v.shape for d in (1, n)))
    return reshape(ue * ve, tuple(m * n for m, n in zip(u.shape, v.shape)))


def sinc(x: Any) -> Tensor:
    """``sin(pi x) / (pi x)``, 1 at 0 (the division is kept away from 0, so the gradient
    there is the limit, 0, not NaN)."""
    t = as_tensor(x)
    zero = t == 0
    safe = where(zero, 1.0, t) * np.pi
    return where(zero, 1.0, np.sin(safe) / safe)


def deg2rad(x: Any) -> Tensor:
    """Degrees to radians."""
    return as_tensor(x) * (np.pi / 180.0)


def rad2deg(x: Any) -> Tensor:
    """Radians to degrees."""
    return as_tensor(x) * (180.0 / np.pi)


def nan_to_num(
    x: Any, copy: bool = True, nan: float = 0.0, posinf: Any = None, neginf: Any = None
) -> Tensor:
    """NaN to ``nan``, +-inf to ``posinf`` / ``neginf`` (default: the largest finite
    numbers of the dtype); the gradient is 0 where a value was replaced."""
    t = as_tensor(x)
    info = np.finfo(t.dtype) if t.dtype.kind == "f" else None
    hi = info.max if posinf is None and info is not None else posinf
    lo = info.min if neginf is None and info is not None else neginf
    # masks from recorded comparisons, not from reading the values (so a capture needs
    # no guard on them)
    out = where(t != t, nan, t)
    if hi is not None:
        out = where(t == np.inf, hi, out)
    if lo is not None:
        out = where(t == -np.inf, lo, out)
    return out


def _nan_checked(
    a: Any, axis: Any, dtype: Any, out: Any, name: str, floats: bool = False
) -> Tensor:
    """The data of a NaN-family function, its arguments checked before anything is
    recorded (``dtype`` parsed, and with ``floats`` refused unless a float dtype); the
    data is not cast: NaN must be replaced first (a NaN cast to an integer is garbage)."""
    no_out(name, out)
    dtype_of(dtype, name, floats=floats)
    t = as_tensor(a)
    normalize_axes(axis, t.ndim, name)
    return t


def _numbers(t: Tensor, axis: Any, keepdims: bool) -> Tensor:
    """How many values along ``axis`` are not NaN, by recorded ops (not by reading the
    values: a tg.compile capture then needs no guard on where the NaN are)."""
    return rsum(where(t == t, np.ones((), t.dtype), 0.0), axis=axis, keepdims=keepdims)


def _nan_total(name: str, reduce: Any, fill: float) -> Any:
    """``nansum`` / ``nanprod``: NaN counted as ``fill``, replaced before a cast to
    ``dtype`` (a NaN cast to an integer is garbage)."""

    def fn(
        a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False
    ) -> Tensor:
        t = _nan_checked(a, axis, dtype, out, name)
        return reduce(in_dtype(_no_nan(t, fill), dtype, name), axis=axis, keepdims=keepdims)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``numpy.{name}``: NaN counted as {fill:g}."
    return fn


nansum = _nan_total("nansum", rsum, 0.0)
nanprod = _nan_total("nanprod", rprod, 1.0)


def _nan_extreme(name: str, reduce: Any, fill: float) -> Any:
    """``nanmax`` / ``nanmin``: NaN left out; a slice of NaN only gives NaN, as NumPy's
    (which warns); nothing to reduce raises, as NumPy's."""

    def fn(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Tensor:
        t = _nan_checked(a, axis, None, out, name)
        if 0 in [t.shape[d] for d in normalize_axes(axis, t.ndim, name)]:
            raise ValueError(
                f"{name}: zero-size array to reduction operation {name}, which has no identity"
            )
        if t.dtype.kind != "f":  # integers and bools hold no NaN
            return reduce(t, axis=axis, keepdims=keepdims)
        r = reduce(where(t != t, fill, t), axis=axis, keepdims=keepdims)  # NaN != NaN
        return where(_numbers(t, axis, keepdims) == 0, np.nan, r)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``numpy.{name}``: the reduction with NaN values left out."
    return fn


nanmax = _nan_extreme("nanmax", rmax, -np.inf)
nanmin = _nan_extreme("nanmin", rmin, np.inf)


def nanmean(
    a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False
) -> Tensor:
    """``numpy.nanmean``: the mean of the values that are not NaN (a float ``dtype``)."""
    t = in_dtype(_nan_checked(a, axis, dtype, out, "nanmean", floats=True), dtype, "nanmean")
    return nansum(t, axis=axis, keepdims=keepdims) / _numbers(t, axis, keepdims)


def correlate(a: Any, v: Any, mode: Any = "valid") -> Tensor:
    """``numpy.correlate`` of real 1-D sequences: ``convolve(a, v[::-1])``, or, when
    ``v`` is the longer, ``convolve(v, a[::-1])`` reversed (NumPy's own frame for
    ``same``)."""
    mode = conv_mode(mode, "correlate")  # (checked before anything is recorded)
    ta, tv = as_tensor(a), as_tensor(v)
    if ta.ndim != 1 or tv.ndim != 1 or not ta.size or not tv.size:
        raise ValueError(f"correlate: needs non-empty 1-D sequences, got {ta.shape} and {tv.shape}")
    if ta.shape[0] >= tv.shape[0]:
        return convolve(ta, tv[::-1], mode)
    return convolve(tv, ta[::-1], mode)[::-1]


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


# --- the rest of what HIPS autograd's numpy_vjps.py covers for real inputs, and more -------


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


def _copy(t: Tensor) -> Tensor:
    return t * 1 if t.dtype.kind in "fiu" else Tensor._external(t._value().copy())


def real(val: Any) -> Tensor:
    """The real part: a real input itself (NumPy returns a view)."""
    return as_tensor(val)


def imag(val: Any) -> Tensor:
    """The imaginary part of a real input: zeros (not connected to it: its gradient
    is zero)."""
    t = as_tensor(val)
    return Tensor._external(np.zeros(t.shape, t.dtype))


def conj(x: Any) -> Tensor:
    """Complex conjugate of a real input: a copy."""
    return _copy(as_tensor(x))


def angle(z: Any, deg: bool = False) -> Tensor:
    """The argument of a real input, ``arctan2(0, z)``: pi where z < 0 (-0.0 included),
    0 where z > 0, NaN at NaN; its gradient is 0."""
    t = as_tensor(z)
    zero = np.zeros(t.shape, np.result_type(t.dtype, np.float16))
    out = np.arctan2(zero, t)
    return out * (180.0 / np.pi) if deg else out


def real_if_close(a: Any, tol: float = 100) -> Tensor:
    """A real input itself."""
    return as_tensor(a)


def positive(x: Any) -> Tensor:
    """``+x``: a copy."""
    return _copy(as_tensor(x))


def fmod(x1: Any, x2: Any) -> Tensor:
    """C's remainder, with the sign of ``x1``: NumPy's ``remainder`` (exact, the sign of
    ``x2``) less ``x2`` where the signs differ (in float64 for float32 data, so that
    the difference is exact too); ``x1`` itself for an infinite ``x2``. Gradient 1 in
    x1 and -trunc(x1 / x2) in x2. A zero result is +0.0 (NumPy: the sign of x1)."""
    a, b = _weak(x1), _weak(x2)
    dtype = np.result_type(*_promotion_types(a, b))
    if dtype == np.float32:  # NumPy rounds a Python number to float32 first
        a, b = (float(np.float32(v)) if type(v) in _WEAK else v.astype(np.float64) for v in (a, b))
    r = a % b
    out = where(r == 0, r, where((a < 0) == (b < 0), r, r - b))
    if out.dtype.kind == "f":
        inner = (
            (np.nan if abs(a) == np.inf else a)
            if type(a) in _WEAK
            else where(abs(a) == np.inf, np.nan, a)
        )
        out = where(abs(b) == np.inf, inner, out)
    return out if out.dtype == dtype else out.astype(dtype)


_WEAK = (bool, int, float)  # Python numbers: weak in NumPy's promotion


def _weak(x: Any) -> Any:
    """A Python number stays one (float32 data stays float32 next to it); anything else
    becomes a tensor."""
    return x if type(x) in _WEAK else as_tensor(x)


def _promotion_types(*values: Any) -> list:
    """What ``np.result_type`` should see: Python numbers themselves, tensors' dtypes."""
    return [v if type(v) in _WEAK else v.dtype for v in values]


def copysign(x1: Any, x2: Any) -> Tensor:
    """``|x1|`` with the sign of ``x2`` (-0.0 counts as negative, as in C; the sign of
    a NaN ``x2`` is not read: it counts as positive). Floating point, as NumPy."""
    a, b = _weak(x1), _weak(x2)
    dtype = np.result_type(*_promotion_types(a, b), np.float16)
    if type(a) not in _WEAK and a.dtype != dtype:
        a = a.astype(dtype)
    if type(b) in _WEAK:  # one sign for all
        negative = b < 0 or (b == 0 and math.copysign(1.0, b) < 0)
    else:  # -0.0 == 0 but 1 / -0.0 < 0: the sign bit, from recorded comparisons
        negative = where(b == 0, 1.0 / where(b == 0, b, 1.0) < 0, b < 0)
    out = where(negative, -abs(a), abs(a))
    return out if out.dtype == dtype else out.astype(dtype)


def _no_nan(t: Tensor, fill: float) -> Tensor:
    """``t`` with NaN replaced by ``fill`` (integer and bool data hold none: as is)."""
    return where(t != t, fill, t) if t.dtype.kind == "f" else t


def _nan_cumulative(name: str, cumulative: Any, fill: float) -> Any:
    def fn(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Tensor:
        no_out(name, out)
        dtype_of(dtype, name)
        t = as_tensor(a)
        if axis is not None:  # its errors before anything is recorded (0-d: 1-D to NumPy)
            axis_index(axis, builtins.max(t.ndim, 1), name, bools=False)
        return cumulative(in_dtype(_no_nan(t, fill), dtype, name), axis=axis)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``numpy.{name}``: NaN counted as {fill:g} (replaced before a cast to dtype)."
    return fn


nancumsum = _nan_cumulative("nancumsum", cumsum, 0.0)
nancumprod = _nan_cumulative("nancumprod", cumprod, 1.0)


def _nan_moment(name: str, moment: Any) -> Any:
    def fn(
        a: Any,
        axis: Any = None,
        dtype: Any = None,
        out: Any = None,
        ddof: int = 0,
        keepdims: bool = False,
    ) -> Tensor:
        check_ddof(ddof, name)
        t = _nan_checked(a, axis, dtype, out, name, floats=True)
        if t.dtype.kind != "f":  # integers hold no NaN: NumPy's var (inf past the count)
            return moment(t, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)
        r = moment(t, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, where=t == t)
        # NumPy's NaN where ddof leaves no degree of freedom (not the inf of n - ddof <= 0)
        return where(_numbers(t, axis, keepdims) - ddof <= 0, np.nan, r)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``numpy.{name}``: of the values that are not NaN (``where=t == t``)."
    return fn


nanvar = _nan_moment("nanvar", var)
nanstd = _nan_moment("nanstd", std)


def cov(
    m: Any,
    y: Any = None,
    rowvar: bool = True,
    bias: bool = False,
    ddof: Any = None,
    fweights: Any = None,
    aweights: Any = None,
    *,
    dtype: Any = None,
) -> Tensor:
    """Covariance matrix, as ``numpy.cov`` without weights: variables in rows (columns
    with ``rowvar=False``), normalised by ``N - 1`` (``N`` with ``bias``, or
    ``N - ddof``)."""
    if fweights is not None or aweights is not None:
        raise TypeError("cov: fweights= and aweights= are not supported")
    # NumPy's checks, before anything is recorded
    try:
        whole = ddof is None or ddof == int(ddof)
    except (TypeError, ValueError):
        whole = False
    if not whole:
        raise ValueError(f"cov: ddof must be integer, got {ddof!r}")
    if dtype is not None and np.dtype(dtype).kind != "f":
        raise TypeError(f"cov: dtype must be a float dtype, got {np.dtype(dtype)}")
    mt = as_tensor(m)
    yt = None if y is None else as_tensor(y)
    for what, v in (("m", mt), ("y", yt)):
        if v is not None and v.ndim > 2:
            raise ValueError(f"cov: {what} has more than 2 dimensions (shape {v.shape})")
    rows = [(1,) * (2 - mt.ndim) + mt.shape]  # variables by observations, as NumPy's:
    if not rowvar and mt.ndim != 1:  # m transposed unless it is 1-D ...
        rows[0] = rows[0][::-1]
    if yt is not None:
        rows.append((1,) * (2 - yt.ndim) + yt.shape)
        if not rowvar and rows[1][0] != 1:  # ... y unless it has one row
            rows[1] = rows[1][::-1]
        if rows[1][1] != rows[0][1]:
            raise ValueError(
                f"cov: m and y must have the same number of observations, got {rows[0][1]} "
                f"and {rows[1][1]}"
            )
    out_dtype = np.result_type(mt.dtype, np.float64) if dtype is None else np.dtype(dtype)
    if rows[0][0] == 0:  # no variables: NumPy's empty matrix
        return Tensor._external(np.zeros((0, 0), out_dtype))
    x = atleast_2d(mt)
    if not rowvar and mt.ndim != 1:
        x = x.T
    if yt is not None:
        yy = atleast_2d(yt)
        if not rowvar and yy.shape[0] != 1:
            yy = yy.T
        x = concatenate([x, yy], axis=0)
    x = x.astype(out_dtype)
    if ddof is None:
        ddof = 0 if bias else 1
    n = x.shape[1]
    # no observations: NaN means and a NaN matrix, as NumPy's (which warns)
    d = x - rsum(x, axis=1, keepdims=True) * (1.0 / n if n else np.nan)
    c = d @ d.T / float(builtins.max(n - int(ddof), 0))  # NumPy's: inf (or NaN) past N
    return c.reshape([s for s in c.shape if s != 1]) if 1 in c.shape else c


def corrcoef(x: Any, y: Any = None, rowvar: bool = True, *, dtype: Any = None) -> Tensor:
    """Pearson correlation coefficients: ``cov`` over the outer product of the standard
    deviations, clipped to [-1, 1] as NumPy does."""
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return c / c
    s = np.sqrt(diagonal(c))
    r = c / s.reshape(-1, 1) / s.reshape(1, -1)
    return clip(r, -1.0, 1.0)


def vander(x: Any, N: Any = None, increasing: bool = False) -> Tensor:
    """Vandermonde matrix: column j is ``x ** (N - 1 - j)`` (``x ** j`` if increasing)."""
    t = as_tensor(x)
    if t.ndim != 1:
        raise ValueError("vander: x must be a one-dimensional array or sequence.")
    n = t.shape[0] if N is None else operator.index(N)
    if n < 0:
        raise ValueError(f"vander: negative dimensions are not allowed (N={n})")
    powers = np.arange(n) if increasing else np.arange(n - 1, -1, -1)
    dtype = np.promote_types(t.dtype, int)  # NumPy's: float32 becomes float64
    return t.astype(dtype).reshape(-1, 1) ** powers.astype(dtype)


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


for _row, _fn in (
    (FLIPUD, flipud), (FLIPLR, fliplr), (ROT90, rot90), (ROLLAXIS, rollaxis),
    (ATLEAST_1D, atleast_1d), (ATLEAST_2D, atleast_2d), (ATLEAST_3D, atleast_3d),
    (TRIL, tril), (TRIU, triu), (APPEND, append), (VSPLIT, vsplit), (HSPLIT, hsplit),
    (DSPLIT, dsplit), (SORT, sort), (MEDIAN, median), (QUANTILE, quantile),
    (PERCENTILE, percentile), (PTP, ptp), (DIFF, diff), (TRAPEZOID, trapezoid),
    (POLYVAL, polyval), (CROSS, cross), (KRON, kron), (SINC, sinc), (DEG2RAD, deg2rad),
    (RAD2DEG, rad2deg), (NAN_TO_NUM, nan_to_num), (NANSUM, nansum), (NANMEAN, nanmean),
    (NANMAX, nanmax), (NANMIN, nanmin), (CORRELATE, correlate),
    (INTERP, interp), (GRADIENT, gradient), (PARTITION, partition),
    (TAKE_ALONG_AXIS, take_along_axis), (SELECT, select), (CHOOSE, choose),
    (COMPRESS, compress), (EXTRACT, extract), (DSTACK, dstack), (COLUMN_STACK, column_stack),
    (REAL, real), (IMAG, imag), (CONJ, conj), (ANGLE, angle), (REAL_IF_CLOSE, real_if_close),
    (POSITIVE, positive), (FMOD, fmod), (COPYSIGN, copysign), (NANPROD, nanprod),
    (NANCUMSUM, nancumsum), (NANCUMPROD, nancumprod), (NANVAR, nanvar), (NANSTD, nanstd),
    (COV, cov), (CORRCOEF, corrcoef), (VANDER, vander),
    (CUMULATIVE_TRAPEZOID, cumulative_trapezoid),
):  # fmt: skip
    _row.front = _fn
del _row, _fn
