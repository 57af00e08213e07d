"""Elementwise functions written in other ops: ``sinc``, ``deg2rad``, ``rad2deg``,
``fmod``, ``copysign``, ``positive`` and the complex-number functions of real input
(``real imag conj angle real_if_close``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...recording import as_tensor
from ...tensors import Tensor
from ..shape.front import where
from .rows import (
    ANGLE,
    CONJ,
    COPYSIGN,
    DEG2RAD,
    FMOD,
    IMAG,
    POSITIVE,
    RAD2DEG,
    REAL,
    REAL_IF_CLOSE,
    SINC,
)


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


SINC.front = sinc
DEG2RAD.front = deg2rad
RAD2DEG.front = rad2deg
REAL.front = real
IMAG.front = imag
CONJ.front = conj
ANGLE.front = angle
REAL_IF_CLOSE.front = real_if_close
POSITIVE.front = positive
FMOD.front = fmod
COPYSIGN.front = copysign
