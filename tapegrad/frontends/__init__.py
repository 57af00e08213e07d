"""The front ends: the Python functions that record each op table row, one module per
family of :mod:`tapegrad.ops` (which only declares the rows). Importing this package
attaches every array and composite row's function to its row (``Op.front``);
elementwise rows get generated functions (:mod:`tapegrad._namespace`).
"""

from __future__ import annotations

from . import convolution, elementwise, extra, linalg, reduce, scipy_linalg, shape, special

__all__ = [
    "convolution",
    "elementwise",
    "extra",
    "linalg",
    "reduce",
    "scipy_linalg",
    "shape",
    "special",
]
