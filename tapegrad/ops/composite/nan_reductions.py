"""The NaN-ignoring reductions (``nansum nanprod nanmax nanmin nanmean nanvar nanstd``),
their cumulative forms (``nancumsum nancumprod``) and ``nan_to_num``, written in other
ops."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from ...recording import as_tensor
from ...shapes import normalize_axes
from ...tensors import Tensor
from ..reduce.front import check_ddof, cumprod, cumsum, dtype_of, in_dtype, no_out, std, var
from ..reduce.front import max as rmax
from ..reduce.front import min as rmin
from ..reduce.front import prod as rprod
from ..reduce.front import sum as rsum
from ..shape.front import axis_index, where
from .rows import (
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
)


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


NAN_TO_NUM.front = nan_to_num
NANSUM.front = nansum
NANMEAN.front = nanmean
NANMAX.front = nanmax
NANMIN.front = nanmin
NANPROD.front = nanprod
NANCUMSUM.front = nancumsum
NANCUMPROD.front = nancumprod
NANVAR.front = nanvar
NANSTD.front = nanstd
