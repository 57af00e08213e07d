"""Batching rules of the ``reduce`` family (``tg.vmap``; see :mod:`tapegrad.batching`):
a reduction along axes of one example is the same reduction along those axes shifted
past the batch axis. ``kit`` is :mod:`tapegrad.batching` (this module imports nothing
above the op families)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# (row, position of axis, what axis=None means: every axis, or the flattened example)
ALONG_AXIS = (
    ("sum", 1, "all"),
    ("mean", 1, "all"),
    ("prod", 1, "all"),
    ("max", 1, "all"),
    ("min", 1, "all"),
    ("var", 1, "all"),
    ("std", 1, "all"),
    ("nansum", 1, "all"),
    ("nanmean", 1, "all"),
    ("nanmax", 1, "all"),
    ("nanmin", 1, "all"),
    ("nanprod", 1, "all"),
    ("nanvar", 1, "all"),
    ("nanstd", 1, "all"),
    ("ptp", 1, "all"),
    ("logsumexp", 1, "all"),
    ("softmax", 1, "all"),
    ("log_softmax", 1, "all"),
    ("argmax", 1, "flatten"),
    ("argmin", 1, "flatten"),
    ("cumsum", 1, "flatten"),
    ("cumprod", 1, "flatten"),
    ("nancumsum", 1, "flatten"),
    ("nancumprod", 1, "flatten"),
    ("median", 1, "flatten"),
)


def rules(kit: Any) -> dict[str, Callable]:
    """The family's rules, by row name."""
    out = {name: kit.axis_rule(name, pos, none) for name, pos, none in ALONG_AXIS}
    along = kit.axis_rule("average", 1, "all")

    def average(level: int, n: int, a: Any, axis: Any = None, weights: Any = None, **kw: Any):
        # weights along one axis broadcast against the batch; others: a loop
        if weights is not None and (axis is None or kit.ndim(weights) != 1):
            return NotImplemented
        return along(level, n, a, axis, weights, **kw)

    out["average"] = average
    return out
