"""The front ends: the Python functions that record each op table row, one module per
family of :mod:`tapegrad.ops` (which only declares the rows). Importing this package
attaches every array and composite row's function to its row (``Op.front``);
elementwise rows get generated functions (:mod:`tapegrad._namespace`).
"""

from __future__ import annotations

from . import (
    calculus,
    convolution,
    elementwise,
    elementwise_composites,
    linalg,
    nan_reductions,
    products,
    rearrange,
    reduce,
    scipy_linalg,
    shape,
    special,
    statistics,
)

__all__ = [
    "calculus",
    "convolution",
    "elementwise",
    "elementwise_composites",
    "linalg",
    "nan_reductions",
    "products",
    "rearrange",
    "reduce",
    "scipy_linalg",
    "shape",
    "special",
    "statistics",
]
