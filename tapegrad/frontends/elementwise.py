"""Front ends of the ``elementwise`` op family: the Python functions that record its rows
(declared in :mod:`tapegrad.ops.elementwise`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ops.elementwise import (
    FLOAT_POWER,
    RINT,
    ROUND,
)
from ..tensors import as_tensor, elementwise
from .shape import astype


def float_power(x1: Any, x2: Any, out: Any = None) -> Any:
    """x1 ** x2 computed in float64 (as numpy.float_power)."""
    if out is not None:
        raise TypeError("float_power: out= is not supported (tensors are immutable)")
    a = astype(as_tensor(x1), np.float64)
    b = x2 if isinstance(x2, float | int) else astype(as_tensor(x2), np.float64)
    return a**b


def round(a: Any, decimals: int = 0, out: Any = None) -> Any:
    """Round half to even to ``decimals`` digits (gradient 0), as numpy.round."""
    if out is not None:
        raise TypeError("round: out= is not supported (tensors are immutable)")
    if decimals == 0:
        return elementwise(RINT, a)
    scale = 10.0**decimals
    return elementwise(RINT, a * scale) / scale


# each row's public function
FLOAT_POWER.front = float_power
ROUND.front = round
