"""Order statistics and moments across observations: ``quantile``, ``percentile``,
``median``, ``ptp``, ``cov`` and ``corrcoef``, written in other ops."""

from __future__ import annotations

import builtins
import math
import warnings
from typing import Any

import numpy as np

from ...grad_mode import is_grad_enabled
from ...recording import as_tensor
from ...shapes import normalize_axes
from ...tensors import Tensor
from ..reduce.front import max as rmax
from ..reduce.front import min as rmin
from ..reduce.front import no_out
from ..reduce.front import sum as rsum
from ..shape.front import clip, concatenate, diagonal, getitem, moveaxis, reshape, where
from .rearrange import atleast_2d, partition
from .rows import CORRCOEF, COV, MEDIAN, PERCENTILE, PTP, QUANTILE


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


MEDIAN.front = median
QUANTILE.front = quantile
PERCENTILE.front = percentile
PTP.front = ptp
COV.front = cov
CORRCOEF.front = corrcoef
