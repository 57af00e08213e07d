"""NumPy's views, for tensors that are values.

A tensor's value never changes in place in the tape; an in-place op records a new value
and the handle takes it over (``Tensor._inplace``). NumPy code also writes *through
views*: ``row = A[i]; row[0] = 0`` changes ``A``, and ``A[i, 0] = 5`` changes ``row``.
Tapegrad keeps that meaning by asking NumPy itself which results are views:

* Every tensor that has views has a *shadow*: a NumPy array of the tensor's shape
  whose strides are C-ordered and whose storage is one element (it is never read). A
  view-making function applied to a tensor is applied to its shadow too; when NumPy
  returns a view of the shadow (``np.shares_memory``-style: an array, not a scalar,
  with no copy possible), the result is a view of the tensor's *root*, and its shadow
  gives, through its offset and strides, the root element behind each of its elements.
  So NumPy's own rules decide: ``x[0]`` of a 1-D array is a scalar (a copy), ``x[0]``
  of a 2-D one a view; ``reshape`` is a view exactly when the strides allow
  (``reshape(copy=False)`` on the shadow), ``flatten`` never, and so on.
* View-making entry points (the public ones: Tensor methods, ``tapegrad.numpy``,
  NumPy's protocols): basic ``__getitem__``, ``reshape``, ``ravel``, ``transpose`` /
  ``.T`` / ``swapaxes`` / ``moveaxis``, ``squeeze``, ``expand_dims``, ``flip``,
  ``split`` / ``array_split``; ``diagonal`` and ``broadcast_to`` make read-only views
  (writing to them raises, as in NumPy). Internal uses (composite rows) make none.
* After an in-place op on a view, its new values are written into the root's elements
  behind it (a recorded ``root[positions] = view``); after any in-place op on a root,
  its live views are gathered again from it (recorded). Gradients follow.
* A root keeps weak references to its views. A view's reference to its root is weak
  while the root is a result in the tape (the tape's rewind counts references to see
  which handles user code holds) and strong once the root is a user tensor or copied
  out. At a rewind, a root that only its views still reach is copied out, and held
  views are gathered again from their roots in the fresh tape, so views of parameters
  (``w_t = W.T``) stay views of them across training steps.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .ops.shape import basic_key, gather_positions, getitem, setitem
from .tape import set_rewind_hooks
from .tensor import Tensor, enable_grad, set_write_hook

_PRUNE = 16  # a root's list of views is pruned of dead ones past this length
_STORE = np.zeros(1, np.int64)  # the shadows' storage: never read
_STORE_ADDR = _STORE.ctypes.data


class _View:
    """What a view tensor knows: its root (weakly while the root is a tape result),
    its shadow, and whether NumPy would let it be written."""

    __slots__ = ("readonly", "ref", "shadow", "strong")

    def __init__(self, root: Tensor, shadow: np.ndarray, readonly: bool) -> None:
        self.ref = weakref.ref(root)
        self.strong = root if root._data is not None else None
        self.shadow = shadow
        self.readonly = readonly

    def root(self) -> Tensor | None:
        return self.strong if self.strong is not None else self.ref()


def _shadow(t: Tensor) -> np.ndarray:
    """``t``'s shadow: its own if it is a view, else a C-ordered one of its shape."""
    info = getattr(t, "_view", None)
    if info is not None and info.root() is not None:
        return info.shadow
    return _c_shadow(t.shape)


@functools.lru_cache(maxsize=1024)
def _c_shadow(shape: tuple[int, ...]) -> np.ndarray:
    strides = [8] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * max(shape[d + 1], 1)
    return np.lib.stride_tricks.as_strided(_STORE, shape, strides, writeable=False)


def _root(t: Tensor) -> Tensor:
    info = getattr(t, "_view", None)
    root = info.root() if info is not None else None
    return root if root is not None else t


def positions(shadow: np.ndarray) -> np.ndarray:
    """The root's flat position behind each element of a view with this shadow."""
    pos = np.full(shadow.shape, (shadow.ctypes.data - _STORE_ADDR) // 8, np.int64)
    for d, (n, step) in enumerate(zip(shadow.shape, shadow.strides)):
        shape = [1] * shadow.ndim
        shape[d] = n
        pos += (np.arange(n, dtype=np.int64) * (step // 8)).reshape(shape)
    return pos


def _link(source: Tensor, out: Any, shadow: Any, readonly: bool) -> Any:
    """Make ``out`` a view of ``source``'s root when NumPy made ``shadow`` a view."""
    if not isinstance(out, Tensor) or out is source or not isinstance(shadow, np.ndarray):
        return out  # a scalar (NumPy copies), or the tensor itself
    root = _root(source)
    src = getattr(source, "_view", None)
    out._view = _View(root, shadow, readonly or (src is not None and src.readonly))
    refs = getattr(root, "_views", None)
    if refs is None:
        root._views = refs = []
    elif len(refs) >= _PRUNE:
        refs[:] = [r for r in refs if r() is not None]
    refs.append(weakref.ref(out))
    return out


def _gather(root: Tensor, shadow: np.ndarray) -> Tensor:
    """The view with this shadow, gathered from ``root`` (recorded)."""
    pos = positions(shadow)
    return gather_positions(root, lambda p: p.reshape(-1)[pos])


def _after_write(t: Tensor) -> None:
    """``t`` just took a new value in place: write it into its root if it is a view,
    then gather the root's live views again."""
    info = getattr(t, "_view", None)
    root = info.root() if info is not None else None
    if root is None:
        _refresh(t)
        return
    pos = positions(info.shadow).reshape(-1)
    setitem(root, np.unravel_index(pos, root.shape), t.reshape(-1))  # refreshes root


def _refresh(root: Tensor) -> None:
    refs = getattr(root, "_views", None)
    if not refs:
        return
    in_tape = root._data is None  # a tape result again: its views hold it weakly
    # a view of a parameter stays differentiable after a no_grad update of it
    with enable_grad() if root.requires_grad else _nothing():
        for ref in list(refs):
            view = ref()
            if view is not None:
                if in_tape:
                    view._view.strong = None
                view._adopt(_gather(root, view._view.shadow))


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _rewound(held: list[Tensor]) -> list[Tensor]:
    """Rewind hook: of the handles user code still holds, the views whose roots are
    copied out with them (``before``) and gathered again afterwards (``after``)."""
    return [t for t in held if getattr(t, "_view", None) is not None]


def _before_rewind(views: list[Tensor], tape: Any) -> list[Tensor]:
    """Roots that only views reach must survive the rewind: they are copied out too."""
    extra = []
    for v in views:
        root = v._view.root()
        if root is not None and root._data is None and root._tape is tape:
            extra.append(root)
    return extra


def _after_rewind(views: list[Tensor]) -> None:
    for v in views:
        info = v._view
        root = info.root()
        if root is None:
            continue
        info.strong = root  # copied out: a user-side tensor now, held strongly
        with enable_grad() if root.requires_grad else _nothing():
            v._adopt(_gather(root, info.shadow))


# --- the view-making entry points ---------------------------------------------------------


def _wrap(f: Callable, shadow_of: Callable, readonly: bool = False) -> Callable:
    """``f`` whose tensor results are views where ``shadow_of`` (NumPy on the shadow,
    same arguments) gives views."""

    @functools.wraps(f)
    def wrapped(a: Any, *args: Any, **kwargs: Any) -> Any:
        out = f(a, *args, **kwargs)
        if not isinstance(a, Tensor):
            return out
        try:
            shadow = shadow_of(_shadow(a), *args, **kwargs)
        except (ValueError, TypeError, IndexError, AttributeError):
            return out  # NumPy would copy (reshape) or refuse: an independent value
        if isinstance(out, list | tuple):
            return type(out)(_link(a, o, s, readonly) for o, s in zip(out, shadow))
        return _link(a, out, shadow, readonly)

    return wrapped


def _reshape_shadow(s: np.ndarray, *shape: Any, **kwargs: Any) -> np.ndarray:
    if len(shape) == 1 and not isinstance(shape[0], int | np.integer):
        shape = tuple(shape[0])
    return np.reshape(s, shape, copy=False)  # raises when NumPy would copy


def _transpose_shadow(s: np.ndarray, *axes: Any) -> np.ndarray:
    if len(axes) == 1 and not isinstance(axes[0], int | np.integer):
        axes = axes[0]
    return np.transpose(s, axes or None)


_SHADOWS = {
    "reshape": _reshape_shadow,
    "ravel": lambda s, order="C": np.reshape(s, -1, copy=False),
    "transpose": _transpose_shadow,
    "swapaxes": np.swapaxes,
    "moveaxis": np.moveaxis,
    "squeeze": np.squeeze,
    "expand_dims": np.expand_dims,
    "flip": np.flip,
    "split": np.split,
    "array_split": np.array_split,
}
_READONLY = {"diagonal": np.diagonal, "broadcast_to": np.broadcast_to}


def view_getitem(x: Any, key: Any) -> Tensor:
    """``x[key]``: a view where NumPy's indexing gives one (basic keys), else a copy."""
    out = getitem(x, key)
    if type(key) is int and len(x.shape) == 1:  # u[k]: a scalar in NumPy, a copy
        return out
    if isinstance(x, Tensor) and basic_key(key) is not None:
        return _link(x, out, _shadow(x)[key], False)
    return out


def install(namespace: dict[str, Callable]) -> None:
    """Make the public view-making functions of ``namespace`` (``tapegrad.numpy``'s)
    and ``Tensor.__getitem__`` link views, and hook in-place writes and rewinds."""
    for name, shadow in _SHADOWS.items():
        namespace[name] = _wrap(namespace[name], shadow)
    for name, shadow in _READONLY.items():
        namespace[name] = _wrap(namespace[name], shadow, readonly=True)
    Tensor.__getitem__ = view_getitem
    set_write_hook(_after_write)
    set_rewind_hooks(_rewound, _before_rewind, _after_rewind, _root)
