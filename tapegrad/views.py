"""NumPy's views, for tensors that are values.

A tensor's value never changes in place in the tape; an in-place op records a new value
and the handle takes it over (``Tensor._inplace``). NumPy code also writes *through
views*: ``row = A[i]; row[0] = 0`` changes ``A``, and ``A[i, 0] = 5`` changes ``row``.
Tapegrad keeps that meaning by linking the handles NumPy would make views:

* ``x[basic key]`` (ints, slices, ``None``, ``...``), ``reshape``, ``ravel``,
  ``transpose`` / ``.T`` / ``swapaxes`` / ``moveaxis``, ``squeeze``, ``expand_dims``,
  called through the public API (Tensor methods, ``tapegrad.numpy``, NumPy's protocols),
  make a *view*: it remembers its base and how it derives from it (``_view``), and the
  base keeps weak references to its views (``_views``). The view's reference to its base
  is weak too: the tape's rewind counts references to decide which handles user code
  still holds, and a base that only its views reach is observable by no one (writing
  through such a view changes only the view).
* After an in-place op on a view, its new values are written back into the base (a
  recorded ``base[key] = view``); after any in-place op on a tensor, its live views are
  derived again from its new value (recorded), recursively. Gradients follow, since
  every step is a recorded op.
* Where NumPy would copy instead (``reshape`` or ``ravel`` of a non-contiguous view: a
  transpose, a strided slice; ``flatten``), the result is an independent value.

Internal uses of these ops (composite rows) make no views: only the public entry points
are wrapped (:func:`install`). A view costs a tuple and a weak reference when it is made;
the work happens only when something is written in place.
"""

from __future__ import annotations

import functools
import math
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .ops.shape import basic_key, getitem, reshape, transpose
from .tensor import Tensor, set_write_hook

_PRUNE = 16  # a base's list of views is pruned of dead ones past this length
ITEM, RESHAPE, TRANSPOSE = 0, 1, 2  # how a view derives from its base


def _link(base: Tensor, view: Tensor, kind: int, arg: Any) -> Tensor:
    """Make ``view`` a view of ``base`` (``kind``: an item with key ``arg``, a reshape to
    shape ``arg``, a transpose by permutation ``arg``)."""
    if view is base:
        return view
    view._view = (weakref.ref(base), kind, arg)
    refs = getattr(base, "_views", None)
    if refs is None:
        base._views = refs = []
    elif len(refs) >= _PRUNE:
        refs[:] = [r for r in refs if r() is not None]
    refs.append(weakref.ref(view))
    return view


def _derive(base: Tensor, kind: int, arg: Any) -> Tensor:
    if kind == ITEM:
        return getitem(base, arg)
    if kind == RESHAPE:
        return reshape(base, arg)
    return transpose(base, arg)


def _write_back(base: Tensor, kind: int, arg: Any, view: Tensor) -> None:
    if kind == ITEM:
        base[arg] = view
    elif kind == RESHAPE:
        base[...] = reshape(view, base.shape)
    else:
        base[...] = transpose(view, tuple(int(i) for i in np.argsort(arg)))


def _after_write(t: Tensor) -> None:
    """``t`` just took a new value in place: write it into its base if it is a view
    (which refreshes the base's views, ``t`` among them), else refresh its views."""
    info = getattr(t, "_view", None)
    base = info[0]() if info is not None else None
    if base is not None:
        _write_back(base, info[1], info[2], t)
    else:
        _refresh(t)


def _refresh(base: Tensor) -> None:
    for ref in list(getattr(base, "_views", None) or ()):
        view = ref()
        if view is not None:
            _, kind, arg = view._view
            view._adopt(_derive(base, kind, arg))
            _refresh(view)


@functools.lru_cache(maxsize=4096)
def _run_of_elements(shape: tuple, key: Any) -> bool:
    """Whether ``x[key]`` (``key`` from ``basic_key``) selects one run of consecutive
    elements of a C-ordered array of ``shape``."""
    is_tuple, parts = key
    k = tuple(slice(*p) if isinstance(p, tuple) else p for p in parts)
    flat = np.ravel(np.arange(math.prod(shape)).reshape(shape)[k if is_tuple else k[0]])
    return flat.size < 2 or bool(np.all(np.diff(flat) == 1))


def _contiguous(t: Tensor) -> bool:
    """Whether NumPy's array for ``t`` would be C-contiguous (following its bases)."""
    info = getattr(t, "_view", None)
    base = info[0]() if info is not None else None
    if base is None:
        return True
    _, kind, arg = info
    if kind == ITEM:
        own = _run_of_elements(base.shape, basic_key(arg))
    elif kind == TRANSPOSE:  # contiguous when the axes longer than 1 keep their order
        moved = [p for p in arg if base.shape[p] != 1]
        own = moved == sorted(moved)
    else:
        own = True
    return own and _contiguous(base)


# --- the view-making entry points ---------------------------------------------------------


def view_getitem(x: Any, key: Any) -> Tensor:
    """``x[key]``: a view for basic keys (as in NumPy), a copy for advanced ones."""
    out = getitem(x, key)
    if isinstance(x, Tensor) and basic_key(key) is not None:
        return _link(x, out, ITEM, key)
    return out


def _wrap_reshape(f: Callable) -> Callable:
    @functools.wraps(f)
    def wrapped(a: Any, *args: Any, **kwargs: Any) -> Any:
        out = f(a, *args, **kwargs)
        if isinstance(a, Tensor) and isinstance(out, Tensor) and _contiguous(a):
            return _link(a, out, RESHAPE, out.shape)
        return out  # NumPy copies a non-contiguous array: an independent value

    return wrapped


def _wrap_transpose(f: Callable, perm_of: Callable) -> Callable:
    @functools.wraps(f)
    def wrapped(a: Any, *args: Any, **kwargs: Any) -> Any:
        out = f(a, *args, **kwargs)
        if not (isinstance(a, Tensor) and isinstance(out, Tensor)):
            return out
        return _link(a, out, TRANSPOSE, perm_of(a, *args, **kwargs))

    return wrapped


def _perm_transpose(a: Tensor, axes: Any = None) -> tuple[int, ...]:
    if axes is None:
        return tuple(range(a.ndim - 1, -1, -1))
    return tuple(int(i) % max(a.ndim, 1) for i in axes)


def _perm_swapaxes(a: Tensor, axis1: int, axis2: int) -> tuple[int, ...]:
    perm = list(range(a.ndim))
    i, j = int(axis1) % max(a.ndim, 1), int(axis2) % max(a.ndim, 1)
    perm[i], perm[j] = perm[j], perm[i]
    return tuple(perm)


def _perm_moveaxis(a: Tensor, source: Any, destination: Any) -> tuple[int, ...]:
    """NumPy's order of axes after ``moveaxis`` (the others keep their order)."""
    nd = a.ndim
    src = [int(s) % nd for s in np.atleast_1d(source)]
    dst = [int(d) % nd for d in np.atleast_1d(destination)]
    order = [n for n in range(nd) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return tuple(order)


def install(namespace: dict[str, Callable]) -> None:
    """Make the public view-making functions of ``namespace`` (``tapegrad.numpy``'s)
    and ``Tensor.__getitem__`` link views, and hook in-place writes."""
    for name in ("reshape", "ravel", "squeeze", "expand_dims"):
        namespace[name] = _wrap_reshape(namespace[name])
    namespace["transpose"] = _wrap_transpose(namespace["transpose"], _perm_transpose)
    namespace["swapaxes"] = _wrap_transpose(namespace["swapaxes"], _perm_swapaxes)
    namespace["moveaxis"] = _wrap_transpose(namespace["moveaxis"], _perm_moveaxis)
    Tensor.__getitem__ = view_getitem
    set_write_hook(_after_write)
