"""``tapegrad.special``: an alias of :mod:`tapegrad.scipy.special` (new code imports from
there): scipy.special's names, recording on Tensors (see ``docs/ops.md``): ``expit
logit erf erfc gammaln xlogy logsumexp softmax log_softmax``...
Given no tensor, each is SciPy's own (``gammaln(1.7)`` is a ``numpy.float64``)."""

from __future__ import annotations

from .numpy_protocols import publish
from .surface import NAMESPACES

globals().update(NAMESPACES["special"])
__all__ = sorted(NAMESPACES["special"])
publish("special", globals())
