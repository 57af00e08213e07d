"""``tapegrad.numpy``: NumPy's names, recording on Tensors.

``import tapegrad.numpy as np`` and existing NumPy code records its operations: every
differentiable function here comes from the op table (see ``docs/ops.md``); array
creation functions (``zeros``, ``arange``...) and non-differentiable ones (``argmax``,
``isnan``, ``logical_and``...) return constant tensors. Any other NumPy attribute is
NumPy's own (``np.pi``, ``np.float32``, ``np.newaxis``); a NumPy function applied to a
tensor that requires grad and that tapegrad cannot differentiate raises ``TypeError``
rather than dropping the gradient.
"""

from __future__ import annotations

from typing import Any

import numpy as _np

from .._namespace import NAMESPACES
from ..ops.reduce import argmax, argmin  # noqa: F401  (published through the table too)
from ..tensor import Tensor, as_tensor, tensor
from . import linalg

globals().update(NAMESPACES["numpy"])
__all__ = [*sorted(NAMESPACES["numpy"]), "linalg"]


# --- constants: creation functions and non-differentiable functions ------------------------


def _constant(fn: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Tensor:
        args = [a._value() if isinstance(a, Tensor) else a for a in args]
        kwargs = {k: v._value() if isinstance(v, Tensor) else v for k, v in kwargs.items()}
        out = fn(*args, **kwargs)
        if isinstance(out, tuple):
            return tuple(Tensor._external(_np.asarray(o)) for o in out)
        return as_tensor(out)

    wrapper.__name__ = wrapper.__qualname__ = fn.__name__
    wrapper.__doc__ = f"numpy.{fn.__name__} on the values: a constant tensor (not differentiable)."
    return wrapper


_CONSTANTS = [
    "zeros",
    "ones",
    "empty",
    "full",
    "zeros_like",
    "ones_like",
    "empty_like",
    "full_like",
    "arange",
    "linspace",
    "logspace",
    "eye",
    "identity",
    "tri",
    "meshgrid",
    "isnan",
    "isinf",
    "isfinite",
    "logical_and",
    "logical_or",
    "logical_xor",
    "logical_not",
    "argsort",
    "nonzero",
    "count_nonzero",
    "all",
    "any",
    "searchsorted",
    "digitize",
    "shape",
    "ndim",
    "size",
]
for _name in _CONSTANTS:
    globals()[_name] = _constant(getattr(_np, _name))
    __all__.append(_name)
del _name


def _contains_tensor(obj: Any) -> bool:
    if isinstance(obj, Tensor):
        return True
    if isinstance(obj, list | tuple):
        return any(_contains_tensor(o) for o in obj)
    return False


def array(object: Any, dtype: Any = None, copy: bool = True) -> Tensor:
    """A tensor from ``object``. Tensors (also inside nested lists, which are stacked)
    keep their place in the graph, as in HIPS autograd."""
    if isinstance(object, Tensor):
        t = object
    elif isinstance(object, list | tuple) and _contains_tensor(object):
        t = NAMESPACES["numpy"]["stack"]([array(o) for o in object])
    else:
        return tensor(object, dtype=dtype)
    return t if dtype is None else t.astype(dtype)


def asarray(a: Any, dtype: Any = None) -> Tensor:
    """Like :func:`array` (tensors pass through unchanged)."""
    return array(a, dtype=dtype)


__all__ += ["array", "asarray"]


def __getattr__(name: str) -> Any:
    # Everything else is NumPy's (constants, dtypes, and functions that dispatch back
    # to tapegrad through __array_function__ when given tensors).
    try:
        return getattr(_np, name)
    except AttributeError:
        raise AttributeError(f"module 'tapegrad.numpy' has no attribute {name!r}") from None


def _install_methods() -> None:
    ns = NAMESPACES["numpy"]

    def method(fn: Any) -> Any:
        return lambda self, *args, **kwargs: fn(self, *args, **kwargs)

    for name in (
        "sum",
        "mean",
        "prod",
        "max",
        "min",
        "var",
        "std",
        "cumsum",
        "cumprod",
        "argmax",
        "argmin",
        "ravel",
        "squeeze",
        "swapaxes",
        "dot",
        "clip",
        "round",
        "astype",
        "repeat",
        "take",
        "diagonal",
        "trace",
    ):
        setattr(Tensor, name, method(ns[name] if name in ns else globals()[name]))
    Tensor.reshape = lambda self, *shape: ns["reshape"](self, *shape)
    Tensor.transpose = lambda self, *axes: ns["transpose"](
        self, axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else (axes or None)
    )
    Tensor.T = property(lambda self: ns["transpose"](self))
    Tensor.flatten = lambda self: ns["reshape"](self, -1)
    Tensor.__pos__ = lambda self: self

    def inplace(name: str, symbol: str) -> Any:
        fn = ns[name]

        def method(self: Tensor, other: Any) -> Tensor:
            self._begin_inplace(symbol)
            result = fn(self, other)
            if result.shape != self.shape:
                raise ValueError(
                    f"{symbol}: non-broadcastable output operand with shape "
                    f"{self.shape} doesn't match the broadcast shape "
                    f"{result.shape}"
                )
            if not _np.can_cast(result.dtype, self.dtype, "same_kind"):
                raise TypeError(
                    f"{symbol}: cannot cast the result ({result.dtype}) to the "
                    f"tensor's dtype {self.dtype}"
                )
            if result.dtype != self.dtype:
                result = result.astype(self.dtype)
            return self._inplace(result, symbol)

        return method

    for dunder, name, symbol in (
        ("__iadd__", "add", "+="),
        ("__isub__", "subtract", "-="),
        ("__imul__", "multiply", "*="),
        ("__itruediv__", "true_divide", "/="),
        ("__ipow__", "power", "**="),
        ("__imatmul__", "matmul", "@="),
    ):
        setattr(Tensor, dunder, inplace(name, symbol))


_install_methods()
