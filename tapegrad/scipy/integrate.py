"""``tapegrad.scipy.integrate``: scipy.integrate's names, recording on Tensors
(``cumulative_trapezoid``; see ``docs/ops.md``)."""

from __future__ import annotations

from .._namespace import NAMESPACES
from .._protocols import publish

globals().update(NAMESPACES["scipy.integrate"])
__all__ = sorted(NAMESPACES["scipy.integrate"])
publish("scipy.integrate", globals())
