"""NumPy's dispatch protocols: ``np.sin(t)``, ``np.sum(t, axis=0)``,
``np.concatenate([t, a])`` and ``a @ t`` on Tensors run tapegrad's ops.

A NumPy function or ufunc tapegrad does not implement is computed by NumPy on the values
when no tensor argument requires grad (the result is a plain NumPy array); when one does,
it raises ``TypeError`` naming the function, so a gradient is never silently lost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .tensor import Tensor, is_grad_enabled

_REDUCE = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min"}


def _namespaces() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    from . import numpy as tnp
    from . import special
    from .numpy import linalg

    return vars(tnp), vars(linalg), vars(special)


def _requires_grad(obj: Any) -> bool:
    if isinstance(obj, Tensor):
        return obj.requires_grad
    if isinstance(obj, list | tuple):
        return any(_requires_grad(o) for o in obj)
    if isinstance(obj, dict):
        return any(_requires_grad(o) for o in obj.values())
    return False


def _values(obj: Any) -> Any:
    if isinstance(obj, Tensor):
        return obj.numpy()
    if isinstance(obj, list):
        return [_values(o) for o in obj]
    if isinstance(obj, tuple):
        return tuple(_values(o) for o in obj)
    return obj


def _fallback(name: str, call: Callable, args: tuple, kwargs: dict) -> Any:
    if (_requires_grad(args) or _requires_grad(kwargs)) and is_grad_enabled():
        raise TypeError(
            f"{name} is not supported by tapegrad on a tensor that requires grad: its "
            "gradient would be lost. Use a tapegrad.numpy function, or .detach() the input "
            "if no gradient is wanted."
        )
    return call(*_values(args), **{k: _values(v) for k, v in kwargs.items()})


def _lookup(name: str, *namespaces: dict[str, Any]) -> Callable | None:
    for ns in namespaces:
        f = ns.get(name)
        if callable(f) and getattr(f, "__module__", "").startswith("tapegrad"):
            return f
    return None


def array_ufunc(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    out = kwargs.pop("out", None)
    if out is not None and any(o is not None for o in out):
        raise TypeError(
            f"numpy.{ufunc.__name__}: out= is not supported with tensors (tensors are immutable)"
        )
    tnp, _, special = _namespaces()
    if method == "__call__" and not kwargs:
        f = _lookup(ufunc.__name__, tnp, special)
        if f is not None:
            return f(*inputs)
    if method == "reduce" and ufunc.__name__ in _REDUCE and set(kwargs) <= {"axis", "keepdims"}:
        return tnp[_REDUCE[ufunc.__name__]](
            inputs[0], axis=kwargs.get("axis", 0), keepdims=kwargs.get("keepdims", False)
        )
    name = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    return _fallback(name, getattr(ufunc, method), inputs, kwargs)


def array_function(func: Callable, args: tuple, kwargs: dict) -> Any:
    tnp, linalg, _ = _namespaces()
    module = getattr(func, "__module__", "") or ""
    f = None
    if module.startswith("numpy.linalg"):
        f = _lookup(func.__name__, linalg)
    elif module.startswith("numpy"):
        f = _lookup(func.__name__, tnp)
    if f is not None:
        return f(*args, **kwargs)
    return _fallback(f"{module}.{func.__name__}", func, args, kwargs)
