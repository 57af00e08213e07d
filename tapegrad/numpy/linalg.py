"""``tapegrad.numpy.linalg``: numpy.linalg's names, recording on Tensors (see
``docs/ops.md``): ``inv det slogdet solve cholesky norm``, plus ``matmul``. Given no
tensor, each is numpy.linalg's own."""

from __future__ import annotations

from ..numpy_protocols import publish
from ..surface import NAMESPACES

globals().update(NAMESPACES["numpy.linalg"])
matmul = NAMESPACES["numpy"]["matmul"]
__all__ = [*sorted(NAMESPACES["numpy.linalg"]), "matmul"]
publish("numpy.linalg", globals())
