"""Products beyond the matrix product: ``cross``, ``kron``, ``correlate``, and
polynomials (``polyval``, ``vander``), written in other ops."""

from __future__ import annotations

import operator
import warnings
from typing import Any

import numpy as np

from ...recording import as_tensor
from ...tensors import Tensor
from ..linalg.convolution import conv_mode, convolve
from ..shape.front import concatenate, reshape
from .rows import CORRELATE, CROSS, KRON, POLYVAL, VANDER


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


POLYVAL.front = polyval
CROSS.front = cross
KRON.front = kron
CORRELATE.front = correlate
VANDER.front = vander
