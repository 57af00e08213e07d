"""``tapegrad.numpy``: NumPy-named functions that record on Tensors.

Generated from the op table: every elementwise row becomes a function of its NumPy
name (plus aliases), every array row exports its front end, and rows with operator
names (``dunder``) become Tensor operators. ``import tapegrad.numpy as tnp`` and write
``tnp.sum(tnp.tanh(x @ w) ** 2)``.
"""

from __future__ import annotations

from collections.abc import Callable

from .ops import ROWS, Kind, Op
from .tensor import Tensor, elementwise_function

__all__: list[str] = []


def _operators(op: Op, f: Callable) -> None:
    """Install ``op``'s Tensor operators: (forward, reflected)."""
    names = op.dunder
    if not names:
        return
    setattr(Tensor, names[0], f)  # self is the first operand
    if len(names) > 1 and names[1]:
        setattr(Tensor, names[1], lambda self, other: f(other, self))


for _op in ROWS:
    _f = _op.front if _op.kind is Kind.ARRAY else elementwise_function(_op)
    _f.__name__ = _f.__qualname__ = _op.name
    _f.__module__ = __name__
    if _op.kind is not Kind.ARRAY:
        _f.__doc__ = (
            f"{_op.doc}. Elementwise{', with broadcasting' if _op.arity == 2 else ''}"
            f"; generated from the op table row ``{_op.name}``."
        )
    for _name in (_op.name, *_op.aliases):
        globals()[_name] = _f
        __all__.append(_name)
    _operators(_op, _f)
del _op, _f, _name

# Tensor methods with NumPy's spelling.
Tensor.sum = lambda self, axis=None, keepdims=False: sum(self, axis, keepdims)
Tensor.mean = lambda self, axis=None, keepdims=False: mean(self, axis, keepdims)  # noqa: F821
Tensor.reshape = lambda self, *shape: reshape(self, *shape)  # noqa: F821
Tensor.transpose = lambda self, *axes: transpose(  # noqa: F821
    self, axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else (axes or None)
)
Tensor.T = property(lambda self: transpose(self))  # noqa: F821
Tensor.astype = lambda self, dtype: astype(self, dtype)  # noqa: F821
Tensor.__pos__ = lambda self: self
