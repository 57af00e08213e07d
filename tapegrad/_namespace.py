"""Publish the op table: one public function per row, in its namespace.

``tapegrad.numpy``, ``tapegrad.numpy.linalg`` and ``tapegrad.special`` take their
differentiable functions from here; elementwise rows get generated functions, array
and composite rows their front ends. Rows with operator names (``dunder``) become Tensor
operators.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

from .boundary import EQUIVALENTS
from .ops import ROWS, Kind, Op
from .tensor import Tensor, elementwise_function
from .views import install as install_views

# the module itself: the package attribute ``tapegrad.tensor`` is the function
_tensor = importlib.import_module("tapegrad.tensor")

NAMESPACES: dict[str, dict[str, Callable]] = {"numpy": {}, "numpy.linalg": {}, "special": {}}


def _operators(op: Op, f: Callable) -> None:
    names = op.dunder
    if not names:
        return
    setattr(Tensor, names[0], f)  # self is the first operand
    if len(names) > 1 and names[1]:
        setattr(Tensor, names[1], lambda self, other: f(other, self))


def _on_either_device(op: Op, f: Callable) -> Callable:
    """``f`` for CPU operands, ``tapegrad.cuda.<op.cuda>`` when one of the first two
    arguments is a CUDA tensor (elementwise rows route inside ``elementwise``)."""

    @functools.wraps(f)
    def routed(*args: Any, **kwargs: Any) -> Any:
        cuda_type = _tensor._CUDA
        if cuda_type is not None and any(isinstance(a, cuda_type) for a in args[:2]):
            from . import cuda

            return getattr(cuda, op.cuda)(*args, **kwargs)
        return f(*args, **kwargs)

    return routed


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
    _operators(_op, _f)
    if _op.cuda is not None and _op.kind not in (Kind.UNARY, Kind.BINARY):
        _f = _on_either_device(_op, _f)
    for _name in (_op.name, *_op.aliases):
        NAMESPACES[_op.namespace][_name] = _f
del _op, _f, _name

# NumPy's loops over object arrays call a method named like the ufunc on each element
# (np.exp(np.array([t0, t1])) calls t0.exp()): the unary rows are also methods, as in
# PyTorch; real tensors are their own conjugate
for _op in ROWS:
    if _op.kind is Kind.UNARY and _op.namespace == "numpy" and not hasattr(Tensor, _op.name):
        setattr(Tensor, _op.name, NAMESPACES["numpy"][_op.name])
Tensor.conjugate = Tensor.conj = lambda self: self
del _op

install_views(NAMESPACES["numpy"])  # NumPy's view semantics for the public entry points

# error messages name tapegrad's function for the NumPy / SciPy one a user called
_LIBRARY = {"numpy": "numpy", "numpy.linalg": "numpy.linalg", "special": "scipy.special"}
for _ns, _fns in NAMESPACES.items():
    for _name in _fns:
        EQUIVALENTS[f"{_LIBRARY[_ns]}.{_name}"] = f"tapegrad.{_ns}.{_name}"
del _ns, _fns, _name
