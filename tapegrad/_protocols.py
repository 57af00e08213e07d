"""NumPy's dispatch protocols: ``np.sin(t)``, ``np.sum(t, axis=0)``,
``np.concatenate([t, a])`` and ``a @ t`` on Tensors run tapegrad's ops.

A NumPy function or ufunc tapegrad does not implement is computed by NumPy on the values
when no tensor argument requires grad (the result is a plain NumPy array); when one does,
it raises ``TypeError`` naming the function, so a gradient is never silently lost.

The other direction, the drop-in contract: a published namespace function
(``tapegrad.numpy.prod``, ``tapegrad.special.gammaln``) called without a tensor among its
arguments is NumPy's or SciPy's own function, its result unchanged (:func:`publish`).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from . import tensors
from .frontends.shape import ufunc_at
from .tensors import Tensor, is_grad_enabled

_REDUCE = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min"}


# The published namespaces' globals, by name ("numpy", "numpy.linalg", "special"): each
# registers itself when it is imported (tapegrad/__init__ imports them all), so the
# protocols, below them, need not import them.
PUBLISHED: dict[str, dict[str, Any]] = {}
# a device router (``_namespace._on_either_device``) -> the CPU function it calls: a
# table, not an attribute of the router, which ``functools.wraps`` would copy onto any
# wrapper of it (``views._wrap``'s: calling the CPU function under it skipped the
# wrapper, and ``tnp.diagonal`` made no view while no CUDA tensor type existed)
CPU_FUNCTION: dict[Callable, Callable] = {}

# The namespaces that are drop-ins (issue 20, item 4), and the library each stands in for
DROPIN = {
    "numpy": "numpy",
    "numpy.linalg": "numpy.linalg",
    "special": "scipy.special",
    "scipy.linalg": "scipy.linalg",
    "scipy.integrate": "scipy.integrate",
}


def publish(name: str, namespace: dict[str, Any]) -> None:
    """Let NumPy's protocols find the functions of published namespace ``name``; in a
    drop-in namespace, make each public function (``__all__``) the library's function of
    its name on arguments that hold no tensor (see :func:`dropin`)."""
    library = DROPIN.get(name)
    for key in namespace["__all__"] if library else ():
        f = namespace[key]
        if callable(f) and getattr(f, "__module__", "").startswith("tapegrad"):
            namespace[key] = dropin(f, library, key)
    PUBLISHED[name] = namespace


def dropin(f: Callable, library: str, name: str) -> Callable:
    """``f`` where an argument holds a tensor (see :func:`holds_tensor`), else
    ``library``'s function ``name`` on the same arguments, its result unchanged.

    The recording function stays reachable as ``.on_tensors``: NumPy's protocols call
    it, since they run only when NumPy has found a tensor."""
    plain: list[Callable] = []
    # the CPU function under a device router (``_namespace._on_either_device``): called
    # directly while no CUDA tensor type exists (one Python frame less a call)
    cpu = CPU_FUNCTION.get(f, f)

    @functools.wraps(f)
    def function(*args: Any, **kwargs: Any) -> Any:
        for a in args:  # the common case first: a tensor argument
            if type(a) is Tensor:
                if tensors.DEVICE_TENSOR is None:
                    return cpu(*args, **kwargs)
                return f(*args, **kwargs)
        if holds_tensor(args) or (kwargs and holds_tensor(kwargs)):
            return f(*args, **kwargs)
        if not plain:  # SciPy is imported on first use (~0.1 s)
            # a name of tapegrad's alone (getitem) has no library function: itself
            plain.append(getattr(importlib.import_module(library), name, f))
        return plain[0](*args, **kwargs)

    function.on_tensors = f
    return function


# leaves that hold nothing: skipped without a call (numbers are the bulk of data lists)
_PLAIN = frozenset((float, int, bool, complex, str, type(None), np.float64, np.int64))


def _leaves_match(obj: Any, test: Callable[[Any], bool]) -> bool:
    """Whether ``test`` holds for ``obj`` or for a leaf inside it: list and tuple items,
    dict values, elements of object arrays (where NumPy puts 0-d tensors)."""
    if isinstance(obj, np.ndarray):
        return obj.dtype == object and _leaves_match(obj.ravel().tolist(), test)
    if isinstance(obj, list | tuple):
        for o in obj:
            if type(o) not in _PLAIN and _leaves_match(o, test):
                return True
        return False
    if isinstance(obj, dict):
        return _leaves_match(list(obj.values()), test)
    return test(obj)


def _is_tensor(obj: Any) -> bool:
    device = tensors.DEVICE_TENSOR
    return isinstance(obj, Tensor) or (device is not None and isinstance(obj, device))


def holds_tensor(obj: Any) -> bool:
    """Whether ``obj`` is a tensor (CPU or CUDA) or holds one (see ``_leaves_match``)."""
    return _leaves_match(obj, _is_tensor)


def _requires_grad(obj: Any) -> bool:
    return _leaves_match(obj, lambda o: isinstance(o, Tensor) and o.requires_grad)


def _namespaces() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    return PUBLISHED["numpy"], PUBLISHED["numpy.linalg"], PUBLISHED["special"]


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
            return getattr(f, "on_tensors", f)  # NumPy found a tensor: record
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


def _into_out(
    ufunc: np.ufunc, where: str, method: str, inputs: tuple, kwargs: dict, out: tuple
) -> Any:
    """A ufunc writing into ``out=`` NumPy arrays (``a += t`` with ``a`` an array is
    ``np.add(a, t, out=(a,))``): the arrays keep only numbers. Done with the values when
    no tensor among the inputs would lose a gradient; refused otherwise."""
    if any(isinstance(o, Tensor) for o in out):
        raise TypeError(
            f"{where}: out= cannot be a tensor; assign the result instead (t = {where}(...)), "
            "or use an in-place operator on the tensor (t += ...), which is recorded"
        )
    grad_on = is_grad_enabled()
    lost = [t for t in inputs if isinstance(t, Tensor) and t.requires_grad and grad_on]
    if lost:
        t = lost[0]
        raise TypeError(
            f"{where} into a NumPy array (out=, or an augmented assignment such as a += t "
            f"with a an array): the array would keep only the numbers of a tensor that "
            f"requires grad (shape {t.shape}, {t.dtype}), dropping its gradient. Write "
            "a = a + t (a new tensor), or make the array a tensor (tg.tensor(a))"
        )
    values = [t._value() if isinstance(t, Tensor) else t for t in inputs]
    return getattr(ufunc, method)(*values, out=out, **kwargs)


# ufunc -> the recording function a plain call ``ufunc(*inputs)`` runs (filled as found:
# resolving it builds names and looks through modules, a few microseconds a call)
UFUNC_CALLS: dict[np.ufunc, Callable] = {}


def array_ufunc(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    """``Tensor.__array_ufunc__`` past its fast case (a plain call found in
    ``UFUNC_CALLS``): look the ufunc up, and remember a plain call's function there."""
    home = _home(ufunc)
    where = f"{home or 'ufunc'}.{ufunc.__name__}"
    out = kwargs.pop("out", None)
    if out is not None and any(o is not None for o in out):
        return _into_out(ufunc, where, method, inputs, kwargs, out)
    tnp, _, special = _namespaces()
    if method == "__call__" and not kwargs and home in ("numpy", "scipy.special"):
        f = _lookup(ufunc.__name__, tnp if home == "numpy" else special)
        if f is not None:
            UFUNC_CALLS[ufunc] = f
            return f(*inputs)
    if method == "at" and home == "numpy" and isinstance(inputs[0], Tensor):
        return ufunc_at(ufunc.__name__, *inputs)  # np.add.at(t, indices, b)
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
