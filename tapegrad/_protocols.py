"""NumPy's dispatch protocols: ``np.sin(t)``, ``np.sum(t, axis=0)``,
``np.concatenate([t, a])`` and ``a @ t`` on Tensors run tapegrad's ops.

A NumPy function or ufunc tapegrad does not implement is computed by NumPy on the values
when no tensor argument requires grad (the result is a plain NumPy array); when one does,
it raises ``TypeError`` naming the function, so a gradient is never silently lost.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from .tensors import Tensor, is_grad_enabled

_REDUCE = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min"}


# The published namespaces' globals, by name ("numpy", "numpy.linalg", "special"): each
# registers itself when it is imported (tapegrad/__init__ imports them all), so the
# protocols, below them, need not import them.
PUBLISHED: dict[str, dict[str, Any]] = {}


def publish(name: str, namespace: dict[str, Any]) -> None:
    """Let NumPy's protocols find the functions of published namespace ``name``."""
    PUBLISHED[name] = namespace


def _namespaces() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    return PUBLISHED["numpy"], PUBLISHED["numpy.linalg"], PUBLISHED["special"]


def _requires_grad(obj: Any) -> bool:
    if isinstance(obj, Tensor):
        return obj.requires_grad
    if isinstance(obj, list | tuple):
        return any(_requires_grad(o) for o in obj)
    if isinstance(obj, dict):
        return any(_requires_grad(o) for o in obj.values())
    return False


def _nested_values(obj: Any) -> Any:
    if isinstance(obj, Tensor):
        return obj.numpy()
    if isinstance(obj, list):
        return [_nested_values(o) for o in obj]
    if isinstance(obj, tuple):
        return tuple(_nested_values(o) for o in obj)
    return obj


def _fallback(name: str, call: Callable, args: tuple, kwargs: dict) -> Any:
    if (_requires_grad(args) or _requires_grad(kwargs)) and is_grad_enabled():
        raise TypeError(
            f"{name} is not supported by tapegrad on a tensor that requires grad: its "
            "gradient would be lost. Use a tapegrad.numpy function, or .detach() the input "
            "if no gradient is wanted."
        )
    return call(*_nested_values(args), **{k: _nested_values(v) for k, v in kwargs.items()})


def _lookup(name: str, *namespaces: dict[str, Any]) -> Callable | None:
    for ns in namespaces:
        f = ns.get(name)
        if callable(f) and getattr(f, "__module__", "").startswith("tapegrad"):
            return f
    return None


def _home(f: Any) -> str | None:
    """``numpy``, ``numpy.linalg`` or ``scipy.special`` when ``f`` is that module's own
    public function of its name (not, say, ``numpy.emath.sqrt``, whose name is ``sqrt``
    but which returns complex values where ``numpy.sqrt`` gives NaN)."""
    name = getattr(f, "__name__", None)
    if name is None:
        return None
    for module in ("numpy", "numpy.linalg", "scipy.special"):
        home = sys.modules.get(module)
        if home is not None and getattr(home, name, None) is f:
            return module
    return None


def array_ufunc(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    home = _home(ufunc)
    where = f"{home or 'ufunc'}.{ufunc.__name__}"
    out = kwargs.pop("out", None)
    if out is not None and any(o is not None for o in out):
        raise TypeError(f"{where}: out= is not supported with tensors (tensors are immutable)")
    tnp, _, special = _namespaces()
    if method == "__call__" and not kwargs and home in ("numpy", "scipy.special"):
        f = _lookup(ufunc.__name__, tnp if home == "numpy" else special)
        if f is not None:
            return f(*inputs)
    reduce = method == "reduce" and home == "numpy" and ufunc.__name__ in _REDUCE
    if reduce and set(kwargs) <= {"axis", "keepdims"}:
        return tnp[_REDUCE[ufunc.__name__]](
            inputs[0], axis=kwargs.get("axis", 0), keepdims=kwargs.get("keepdims", False)
        )
    name = where + ("" if method == "__call__" else f".{method}")
    return _fallback(name, getattr(ufunc, method), inputs, kwargs)


_KEYWORDS: dict[Callable, frozenset[str] | None] = {}


def _check_keywords(name: str, f: Callable, kwargs: dict) -> None:
    """A NumPy keyword tapegrad's function does not take (``np.sum(t, where=m)``) is a
    ``TypeError`` that names the function and the keyword."""
    if f not in _KEYWORDS:
        params = inspect.signature(f).parameters.values()
        var = any(p.kind is p.VAR_KEYWORD for p in params)
        _KEYWORDS[f] = None if var else frozenset(p.name for p in params)
    known = _KEYWORDS[f]
    for key in kwargs if known is not None else ():
        if key not in known:
            raise TypeError(f"{name}: the argument {key}= is not supported by tapegrad")


def array_function(func: Callable, args: tuple, kwargs: dict) -> Any:
    tnp, linalg, _ = _namespaces()
    home = _home(func)
    f = None
    if home == "numpy.linalg":
        f = _lookup(func.__name__, linalg)
    elif home == "numpy":
        f = _lookup(func.__name__, tnp)
    if f is not None:
        if kwargs:
            _check_keywords(f"{home}.{func.__name__}", f, kwargs)
        return f(*args, **kwargs)
    module = home or getattr(func, "__module__", "") or ""
    return _fallback(f"{module}.{func.__name__}", func, args, kwargs)
