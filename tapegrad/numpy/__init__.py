"""``tapegrad.numpy``: NumPy's names, recording on Tensors.

``import tapegrad.numpy as np`` and existing NumPy code runs unchanged, data preparation
included. Every function here is NumPy's own where no argument is (or holds, in a list,
tuple, dict or object array) a tensor: ``np.prod(x.shape[1:])`` is a Python-usable
``numpy.int64``, ``np.array([1, 2])`` an ndarray, as in HIPS autograd. Given tensors, the
differentiable functions record (they come from the op table, see ``docs/ops.md``);
array creation functions (``zeros``, ``arange``...) and non-differentiable ones
(``argmax``, ``isnan``, ``logical_and``...) give constant tensors. Any other NumPy
attribute is NumPy's own (``np.pi``, ``np.float32``, ``np.newaxis``); a NumPy function
applied to a tensor that requires grad and that tapegrad cannot differentiate raises
``TypeError`` rather than dropping the gradient.
"""

from __future__ import annotations

import builtins  # this module's globals shadow any, all, sum, max... with NumPy's names
from typing import Any

import numpy as _np

from .. import batching, recording
from ..grad_mode import is_grad_enabled
from ..numpy_protocols import holds_tensor, publish
from ..ops.reduce.front import argmax, argmin  # noqa: F401  (published through the table too)
from ..ops.shape.front import reshape as reshape_copy
from ..ops.shape.front import ufunc_at
from ..recording import as_tensor, set_object_converter, tensor
from ..surface import NAMESPACES
from ..tensors import Tensor
from . import linalg

globals().update(NAMESPACES["numpy"])


def _each_example(fn: Any) -> Any:
    """``fn``, which has no batching rule, once per example inside tg.vmap."""

    def function(*args: Any, **kwargs: Any) -> Any:
        level, n = batching.level_of((args, kwargs)) if recording.DEVICE_TYPES else (0, 0)
        if level:
            return batching.loop(fn.__name__, fn, args, kwargs, level, n)
        return fn(*args, **kwargs)

    function.__name__ = function.__qualname__ = fn.__name__
    function.__doc__ = fn.__doc__
    function.__wrapped__ = fn
    return function


floor_divide = _each_example(NAMESPACES["numpy"]["floor_divide"])
divmod = _each_example(NAMESPACES["numpy"]["divmod"])
__all__ = [*sorted(NAMESPACES["numpy"]), "linalg"]


# --- constants: creation functions and non-differentiable functions ------------------------


def _differentiable_in(name: str, args: Any, kwargs: dict) -> None:
    """Refuse a tensor that requires grad where only its values could be used: the
    result would silently not depend on it."""
    for a in [*args, *kwargs.values()]:
        parts = a if isinstance(a, list | tuple) else (a,)
        if (
            builtins.any(isinstance(p, Tensor) and p.requires_grad for p in parts)
            and is_grad_enabled()
        ):
            raise TypeError(
                f"tapegrad.numpy.{name}: an argument is a tensor that requires grad, but "
                f"{name} uses only its values (its result would not depend on it "
                "differentiably); pass .detach() if that is what you want"
            )


def _shape_only(v: Any) -> Any:
    """A zero-stride stand-in for a tensor whose shape and dtype are all that is used
    (``zeros_like``): its values are not read (no guard while capturing)."""
    if isinstance(v, Tensor):
        return _np.lib.stride_tricks.as_strided(_np.zeros(1, v.dtype), v.shape, [0] * v.ndim)
    return v


def _constant(fn: Any, shape_only: bool = False) -> Any:
    """``fn`` on the values of its tensor arguments: a constant tensor. Its results are
    not differentiable (integers, booleans, new arrays): a tensor that requires grad
    passed where its value matters is refused unless the result is integer or bool."""
    name = fn.__name__

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        level, n = batching.level_of((args, kwargs)) if recording.DEVICE_TYPES else (0, 0)
        if level and name not in ("shape", "ndim", "size"):  # inside tg.vmap: each example
            return batching.loop(f"numpy.{name}", wrapper, args, kwargs, level, n, True)
        if shape_only:
            args = [_shape_only(a) for a in args]
        elif name in _CREATION:
            _differentiable_in(name, args, kwargs)
        args = [a._value() if isinstance(a, Tensor) else a for a in args]
        kwargs = {k: v._value() if isinstance(v, Tensor) else v for k, v in kwargs.items()}
        out = fn(*args, **kwargs)
        if name in ("shape", "ndim", "size"):  # Python ints, as NumPy gives them
            return out
        if isinstance(out, tuple | list):
            return type(out)(Tensor._external(_np.asarray(o)) for o in out)
        return as_tensor(out)

    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__doc__ = f"numpy.{name} on the values: a constant tensor (not differentiable)."
    wrapper.__wrapped__ = fn  # (its signature is NumPy's)
    return wrapper


# creation functions (their values come from their arguments); linspace, logspace,
# full, full_like and meshgrid are differentiable below
_CREATION = ["zeros", "ones", "empty", "arange", "eye", "identity", "tri"]
_LIKE = ["zeros_like", "ones_like", "empty_like", "shape", "ndim", "size"]
# functions whose results are integers or booleans: no gradient to lose
_NONDIFF = [
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
]
for _name in _CREATION + _NONDIFF:
    globals()[_name] = _constant(getattr(_np, _name))
    __all__.append(_name)
for _name in _LIKE:
    globals()[_name] = _constant(getattr(_np, _name), shape_only=True)
    __all__.append(_name)
del _name


# NaN / inf tests of float tensors are comparisons, recorded (so a captured program
# recomputes them): NaN is the value unequal to itself, x - x is 0 exactly when x is finite
def _float_test(name: str, test: Any) -> Any:
    constant = _constant(getattr(_np, name))

    def f(x: Any, /, **kwargs: Any) -> Tensor:
        if isinstance(x, Tensor) and x.dtype.kind == "f" and not kwargs:
            return test(x)
        return constant(x, **kwargs)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"numpy.{name}: a boolean tensor (recorded for float tensors, not differentiable)."
    return f


isnan = _float_test("isnan", lambda x: x != x)
isinf = _float_test("isinf", lambda x: NAMESPACES["numpy"]["absolute"](x) == _np.inf)
isfinite = _float_test("isfinite", lambda x: (x - x) == 0)
__all__ += ["isfinite", "isinf", "isnan"]


def array(object: Any, dtype: Any = None, copy: bool | None = True) -> Tensor:
    """A tensor from ``object`` holding tensors (published: NumPy's ``array`` for any
    other). Tensors (also inside nested lists, and inside the object arrays NumPy makes
    of them, ``np.array([t0, t1])``) keep their place in the graph, as in HIPS autograd:
    they are stacked. A tensor is copied (a recorded op: an in-place write to the copy
    leaves the original alone, as NumPy's) unless ``copy`` is False or None."""
    if isinstance(object, Tensor):
        t = reshape_copy(object, object.shape) if copy else object
    elif isinstance(object, _np.ndarray) and object.dtype == _np.object_:
        if not holds_tensor(object):
            return tensor(object.tolist(), dtype=dtype)
        ns = NAMESPACES["numpy"]
        t = ns["reshape"](ns["stack"]([as_tensor(o) for o in object.ravel()]), object.shape)
    elif isinstance(object, list | tuple) and holds_tensor(object):
        t = NAMESPACES["numpy"]["stack"]([as_tensor(o) for o in object])
    else:
        return tensor(object, dtype=dtype)
    return t if dtype is None else t.astype(dtype)


def asarray(a: Any, dtype: Any = None) -> Tensor:
    """Like :func:`array` (tensors pass through unchanged)."""
    return array(a, dtype=dtype, copy=None)


def copy(a: Any, order: str = "K", subok: bool = False) -> Tensor:
    """A copy of ``a``: of a tensor, a recorded op (its gradient flows back to ``a``),
    which in-place writes change alone (``t.copy()`` is the same)."""
    return array(a, copy=True)


set_object_converter(array)


# --- creation functions that are differentiable in their values ------------------------------


def _float_dtype(*values: Any) -> Any:
    dts = [v.dtype for v in values if isinstance(v, Tensor)]
    return _np.result_type(*dts, 1.0) if dts else _np.float64


def linspace(
    start: Any,
    stop: Any,
    num: int = 50,
    endpoint: bool = True,
    retstep: bool = False,
    dtype: Any = None,
    axis: int = 0,
) -> Any:
    """``num`` evenly spaced values from ``start`` to ``stop``, differentiable in
    ``start`` and ``stop`` (``start + (stop - start) * t`` with NumPy's fractions
    ``t``)."""
    if not (isinstance(start, Tensor) or isinstance(stop, Tensor)):
        out = _np.linspace(start, stop, num, endpoint, retstep, dtype, axis)
        if retstep:
            return tensor(out[0]), out[1]
        return tensor(out)
    ns = NAMESPACES["numpy"]
    a, b = as_tensor(start), as_tensor(stop)
    ft = _float_dtype(a, b)
    a, b = a.astype(ft), b.astype(ft)
    div = (num - 1) if endpoint else num
    frac = _np.linspace(0.0, 1.0, num, endpoint).astype(ft)
    if num == 1 and endpoint:
        frac = _np.zeros(1, ft)
    nd = len(_np.broadcast_shapes(a.shape, b.shape))
    frac = frac.reshape((num,) + (1,) * nd)
    out = a + (b - a) * frac
    if axis != 0:
        out = ns["moveaxis"](out, 0, axis)
    if dtype is not None:
        out = out.astype(dtype)
    if retstep:
        step = (b - a) / div if div > 0 else (b - a) * _np.nan
        return out, step
    return out


def logspace(
    start: Any,
    stop: Any,
    num: int = 50,
    endpoint: bool = True,
    base: Any = 10.0,
    dtype: Any = None,
    axis: int = 0,
) -> Tensor:
    """``base ** linspace(start, stop)``, differentiable in ``start``, ``stop``, ``base``."""
    if not builtins.any(isinstance(v, Tensor) for v in (start, stop, base)):
        return tensor(_np.logspace(start, stop, num, endpoint, base, dtype, axis))
    y = linspace(start, stop, num, endpoint, axis=axis)
    out = NAMESPACES["numpy"]["power"](base, y)
    return out if dtype is None else out.astype(dtype)


def full(shape: Any, fill_value: Any, dtype: Any = None) -> Tensor:
    """A tensor of ``shape`` filled with ``fill_value`` (differentiable in it: the
    gradient is the sum over the filled positions)."""
    if not isinstance(fill_value, Tensor):
        return tensor(_np.full(shape, fill_value, dtype))
    shape = (shape,) if isinstance(shape, int | _np.integer) else tuple(shape)
    out = NAMESPACES["numpy"]["broadcast_to"](fill_value, shape)
    return out if dtype is None else out.astype(dtype)


def full_like(a: Any, fill_value: Any, dtype: Any = None, shape: Any = None) -> Tensor:
    """``full`` with the shape (and dtype, unless given) of ``a``."""
    ref = _shape_only(a) if isinstance(a, Tensor) else _np.asarray(a)
    shape = ref.shape if shape is None else shape
    if not isinstance(fill_value, Tensor):
        return tensor(_np.full(shape, fill_value, dtype if dtype is not None else ref.dtype))
    return full(shape, fill_value, dtype if dtype is not None else ref.dtype)


def meshgrid(*xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> list:
    """Coordinate matrices from coordinate vectors (differentiable in them)."""
    if indexing not in ("xy", "ij"):
        raise ValueError("meshgrid: valid values for `indexing` are 'xy' and 'ij'.")
    if not builtins.any(isinstance(x, Tensor) for x in xi):
        return [tensor(g) for g in _np.meshgrid(*xi, copy=copy, sparse=sparse, indexing=indexing)]
    ns = NAMESPACES["numpy"]
    ts = [ns["reshape"](as_tensor(x), -1) for x in xi]
    nd = len(ts)
    sizes = [t.shape[0] for t in ts]
    if indexing == "xy" and nd > 1:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, t in enumerate(ts):
        shape = [1] * nd
        axis = i
        if indexing == "xy" and nd > 1 and i < 2:
            axis = 1 - i
        shape[axis] = t.shape[0]
        g = ns["reshape"](t, tuple(shape))
        out.append(g if sparse else ns["broadcast_to"](g, tuple(sizes)))
    return out


__all__ += ["array", "asarray", "full", "full_like", "linspace", "logspace", "meshgrid"]


def __getattr__(name: str) -> Any:
    # Everything else is NumPy's (constants, dtypes, and functions that dispatch back
    # to tapegrad through __array_function__ when given tensors).
    try:
        return getattr(_np, name)
    except AttributeError:
        raise AttributeError(f"module 'tapegrad.numpy' has no attribute {name!r}") from None


publish("numpy", globals())


def _at(name: str) -> Any:
    def at(a: Any, indices: Any, b: Any = None) -> None:
        """``numpy.{name}.at``: unbuffered in place (repeated indices accumulate); on a
        tensor ``a`` a recorded op (gradients reach a's old values and ``b``)."""
        if isinstance(a, Tensor):
            return ufunc_at(name, a, indices, b)
        return getattr(_np, name).at(a, indices, b)

    at.__doc__ = at.__doc__.format(name=name)
    return at


add.at = _at("add")  # noqa: F821 (published from the op table above)
subtract.at = _at("subtract")  # noqa: F821
