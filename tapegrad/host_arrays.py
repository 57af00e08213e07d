"""Arrays as the tape takes them: a user's array normalised to one of the tape's dtypes
(C-contiguous; NumPy subclasses whose meaning would be lost refused), an array's data
address, and aligned buffers for the tape's arenas."""

from __future__ import annotations

import ctypes
import sys
from typing import Any

import numpy as np

from .layout import ALIGN


def aligned_buffer(nbytes: int) -> tuple[np.ndarray, int]:
    """A uint8 buffer and the address of its first ALIGN-aligned byte."""
    buf = np.empty(nbytes + ALIGN, np.uint8)
    addr = buf.ctypes.data
    return buf, addr + (-addr) % ALIGN


def data_address(arr: np.ndarray) -> int:
    """Address of a contiguous array's first byte: ``arr.ctypes.data`` builds a ctypes
    helper object (~1.4 us); a char over the buffer costs ~0.35 us but needs a
    writable, non-empty one."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(arr))
    except (TypeError, ValueError):
        return arr.ctypes.data


def normalize_array(a: Any, copy: bool = True) -> np.ndarray:
    """C-contiguous array of one of the tape's dtypes (float64/32, int64, bool)."""
    if isinstance(a, np.ndarray) and type(a) is not np.ndarray:
        _refuse_subclass(a)
    arr = np.asarray(a)
    kind = arr.dtype.kind
    if kind == "f":
        if arr.dtype.itemsize not in (4, 8):
            # float16 is refused rather than widened: its gradients would come back as
            # float32, a dtype the user never asked for
            raise TypeError(
                f"tapegrad computes in float64 and float32, not {arr.dtype}: convert "
                "with .astype(np.float32)"
            )
        dt = np.float32 if arr.dtype.itemsize == 4 else np.float64
    elif kind in "iu":
        if arr.dtype == np.uint64 and arr.size and arr.max() > np.iinfo(np.int64).max:
            raise OverflowError(
                f"tapegrad holds integers as int64: the uint64 value {arr.max()} does not "
                "fit (convert to float64 first)"
            )
        dt = np.int64
    elif kind == "b":
        dt = np.bool_
    else:
        raise TypeError(
            f"tapegrad cannot hold arrays of dtype {arr.dtype} "
            "(supported: float64, float32, integers, bool)"
        )
    if copy or arr.dtype != dt or not arr.flags.c_contiguous:
        arr = np.array(arr, dtype=dt, order="C", copy=True)
    return arr


def _refuse_subclass(a: np.ndarray) -> None:
    """Array subclasses whose values mean something a plain array of them would not:
    read as one, ``np.matrix(a) * t`` would be elementwise (NumPy: a matrix product)
    and a masked array would lose its mask. Both raise; others (memmap...) are arrays."""
    if isinstance(a, np.matrix):
        raise TypeError(
            f"tapegrad does not take np.matrix operands (shape {a.shape}): its * and ** are "
            "matrix operations, which tapegrad would read as elementwise. Convert with "
            "np.asarray(m) and write the product with @"
        )
    ma = sys.modules.get("numpy.ma")
    if ma is not None and isinstance(a, ma.MaskedArray):
        raise TypeError(
            f"tapegrad does not take masked arrays (shape {a.shape}, {a.dtype}): the mask "
            "would be dropped. Pass m.filled(value) or m.data, or select with a boolean "
            "index or tnp.where"
        )
