"""Front end of the 1-D convolution row (declared in :mod:`tapegrad.ops.linalg`):
``convolve`` and the modes ``full``, ``same`` and ``valid`` it shares with
``correlate``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...layout import DTYPE_CODE
from ...recording import as_tensor, general
from ...tensors import Tensor
from ..shape.front import astype
from .rows import CONVOLVE

# --- 1-D convolution -------------------------------------------------------------------------


def convolution(a: Any, v: Any, lo: int, length: int) -> Tensor:
    """``out[k] = sum_i a[k + lo - i] v[i]`` for ``k < length`` (the terms inside ``a``):
    the full convolution of 1-D float tensors from offset ``lo`` (one node)."""
    ta, tv = as_tensor(a), as_tensor(v)
    dtype = np.result_type(ta.dtype, tv.dtype)
    dt = DTYPE_CODE[dtype]
    ta, tv = astype(ta, dtype), astype(tv, dtype)
    ip = [ta.shape[0], tv.shape[0], lo, length]
    return general(CONVOLVE, dt, [ta, tv], [(dt, (length,))], ip)


def conv_mode(mode: Any, name: str) -> str:
    """``mode`` of ``numpy.convolve`` / ``correlate``: 'full', 'same', 'valid', or
    NumPy's integers for them (2, 1, 0); NumPy's errors otherwise, naming ``name``."""
    if isinstance(mode, str):
        if mode not in ("full", "same", "valid"):
            raise ValueError(
                f"{name}: mode must be one of 'valid', 'same', or 'full' (got {mode!r})"
            )
        return mode
    if isinstance(mode, int | np.integer) and not isinstance(mode, bool) and 0 <= mode <= 2:
        return ("valid", "same", "full")[mode]
    raise ValueError(f"{name}: integer mode must be 0, 1, or 2 (got {mode!r})")


def convolve(a: Any, v: Any, mode: Any = "full") -> Tensor:
    """``numpy.convolve`` of 1-D sequences (a 0-d one is one number, as NumPy's);
    differentiable in both. The longer sequence plays ``a`` (convolution commutes;
    NumPy's 'same' keeps the longer length)."""
    mode = conv_mode(mode, "convolve")
    ta, tv = as_tensor(a), as_tensor(v)
    if ta.ndim > 1 or tv.ndim > 1 or not ta.size or not tv.size:
        raise ValueError(
            f"convolve: needs non-empty 1-D sequences, got {ta.shape} {ta.dtype} and "
            f"{tv.shape} {tv.dtype}"
        )
    ta, tv = (t.reshape(1) if t.ndim == 0 else t for t in (ta, tv))
    if tv.shape[0] > ta.shape[0]:
        ta, tv = tv, ta
    n, m = ta.shape[0], tv.shape[0]
    windows = {"full": (0, n + m - 1), "same": ((m - 1) // 2, n), "valid": (m - 1, n - m + 1)}
    if np.result_type(ta.dtype, tv.dtype).kind != "f":  # integers: NumPy computes
        return Tensor._external(np.convolve(ta._value(), tv._value(), mode))
    return convolution(ta, tv, *windows[mode])


# each row's public function
CONVOLVE.front = convolve
