"""Publish the op table: one public function per row, in its namespace.

``tapegrad.numpy``, ``tapegrad.numpy.linalg`` and ``tapegrad.special`` take their
differentiable functions from here; elementwise rows get generated functions, array
and composite rows their front ends. Rows with operator names (``dunder``) become Tensor
operators.
"""

from __future__ import annotations

from collections.abc import Callable

from .ops import ROWS, Kind, Op
from .tensor import Tensor, elementwise_function

NAMESPACES: dict[str, dict[str, Callable]] = {"numpy": {}, "numpy.linalg": {}, "special": {}}


def _operators(op: Op, f: Callable) -> None:
    names = op.dunder
    if not names:
        return
    setattr(Tensor, names[0], f)  # self is the first operand
    if len(names) > 1 and names[1]:
        setattr(Tensor, names[1], lambda self, other: f(other, self))


for _op in ROWS:
    if _op.kind in (Kind.UNARY, Kind.BINARY, Kind.COMPARE):
        _f = elementwise_function(_op)
        _f.__name__ = _f.__qualname__ = _op.name
        _f.__module__ = "tapegrad." + _op.namespace
        _f.__doc__ = (
            f"{_op.doc}. Elementwise{', with broadcasting' if _op.arity == 2 else ''}"
            f"; generated from the op table row ``{_op.name}``."
        )
    else:
        _f = _op.front
    for _name in (_op.name, *_op.aliases):
        NAMESPACES[_op.namespace][_name] = _f
    _operators(_op, _f)
del _op, _f, _name
