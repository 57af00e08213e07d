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
import sys
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .grad_mode import enable_grad
from .ops.shape.front import basic_key, gather_positions, getitem, setitem
from .tape import set_rewind_hooks
from .tensors import Tensor, set_write_hook

_PRUNE = 16  # a root's list of views is pruned past twice its size after the last pruning
_STORE = np.zeros(1, np.int64)  # the shadows' storage: never read
_STORE_ADDR = _STORE.ctypes.data
# writes through views in flight (a view has its new value, its root not yet): a rewind
# then must not take views again from their roots, the write's refresh does it after
_writing = 0


class _View:
    """What a view tensor knows: its root (weakly while the root is a tape result),
    its shadow (computed when first needed: most views are never written), and whether
    NumPy would let it be written."""

    __slots__ = ("_shadow", "make", "readonly", "ref", "strong")

    def __init__(self, root: Tensor, shadow: Any, readonly: bool) -> None:
        self.strong = root if root._data is not None else None
        self.ref = weakref.ref(root) if self.strong is None else None
        self._shadow = shadow if isinstance(shadow, np.ndarray) else None
        self.make = None if self._shadow is not None else shadow
        self.readonly = readonly

    @property
    def shadow(self) -> np.ndarray:
        if self._shadow is None:
            self._shadow = self.make()
            self.make = None
        return self._shadow

    def root(self) -> Tensor | None:
        if self.strong is not None:
            return self.strong
        return self.ref() if self.ref is not None else None


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
    """Make ``out`` a view of ``source``'s root when NumPy made ``shadow`` a view
    (``shadow``: an array, or a function making it later)."""
    if not isinstance(out, Tensor) or out is source:
        return out  # the tensor itself
    if not (isinstance(shadow, np.ndarray) or callable(shadow)):
        return out  # a scalar: NumPy copies
    root = _root(source)
    src = getattr(source, "_view", None)
    out._view = _View(root, shadow, readonly or (src is not None and src.readonly))
    refs = getattr(root, "_views", None)
    if refs is None:
        root._views = refs = _Refs()
    elif len(refs) >= refs.limit:
        _observable(refs)
    refs.append(weakref.ref(out))
    return out


class _Refs(list):
    """A root's weak references to its views, pruned when it doubles."""

    limit = _PRUNE


def _observable(refs: _Refs) -> list[Tensor]:
    """The views user code can still reach; ``refs`` is pruned to them. A view that
    only the tape's list of handles references (``x[i]`` in a loop, never kept) can be
    seen by no one: it needs no refreshing. References are counted as the rewind does
    (a view listed in its tape's handles has one more), and any other reference counts
    as user code's, so an error can only keep a view, never drop one."""
    views = []
    for r in refs:
        v = r()
        # references: refs' dereference (v), getrefcount's argument, and the tape's
        # list of handles for a result in a tape
        if v is None:
            continue
        if sys.getrefcount(v) > (3 if v._data is None else 2):
            views.append(v)
        elif v._view.strong is not None:  # dropped: it must not keep its root "held"
            v._view.ref = weakref.ref(v._view.strong)
            v._view.strong = None
    refs[:] = [weakref.ref(v) for v in views]
    refs.limit = max(_PRUNE, 2 * len(refs))
    return views


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
    global _writing
    pos = positions(info.shadow).reshape(-1)
    _writing += 1
    try:
        setitem(root, np.unravel_index(pos, root.shape), t.reshape(-1))  # refreshes root
    finally:
        _writing -= 1


def _refresh(root: Tensor) -> None:
    refs = getattr(root, "_views", None)
    if not refs:
        return
    if root._data is None:  # a tape result again: all its views hold it weakly now
        for ref in refs:
            view = ref()
            if view is not None and view._view.strong is not None:
                view._view.ref = weakref.ref(root)
                view._view.strong = None
    # a view of a parameter stays differentiable after a no_grad update of it
    with enable_grad() if root.requires_grad else _nothing():
        for view in _observable(refs):
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
        if _writing:
            continue  # the view may be newer than its root: keep its copied-out values
        with enable_grad() if root.requires_grad else _nothing():
            v._adopt(_gather(root, info.shadow))


# --- the view-making entry points ---------------------------------------------------------


def _wrap(
    f: Callable, shadow_of: Callable, readonly: bool = False, may_copy: bool = False
) -> Callable:
    """``f`` whose tensor results are views where ``shadow_of`` (NumPy on the shadow,
    same arguments) gives views; ``may_copy``: NumPy may copy instead (reshape)."""

    @functools.wraps(f)
    def wrapped(a: Any, *args: Any, **kwargs: Any) -> Any:
        out = f(a, *args, **kwargs)
        if not isinstance(a, Tensor):
            return out
        source = _source(a)
        if isinstance(out, list | tuple):  # split: shadows made when needed

            def piece(i: int) -> Callable:
                return lambda: shadow_of(source(), *args, **kwargs)[i]

            return type(out)(_link(a, o, piece(i), readonly) for i, o in enumerate(out))
        if may_copy and getattr(a, "_view", None) is not None:
            try:  # reshape of a view: NumPy's strides decide, now
                shadow = shadow_of(source(), *args, **kwargs)
            except (ValueError, TypeError, IndexError, AttributeError):
                return out  # NumPy would copy: an independent value
            return _link(a, out, shadow, readonly)
        # always a view (reshape of a C-ordered tensor too): the shadow when needed
        return _link(a, out, lambda: shadow_of(source(), *args, **kwargs), readonly)

    return wrapped


def _source(a: Tensor) -> Callable[[], np.ndarray]:
    """How to get ``a``'s shadow later, without keeping ``a`` alive."""
    info = getattr(a, "_view", None)
    if info is not None and info.root() is not None:
        return lambda: info.shadow
    shape = a.shape
    return lambda: _c_shadow(shape)


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
    if not isinstance(x, Tensor):
        return out
    basic = basic_key(key)
    if basic is None:
        return out  # advanced indexing: a copy in NumPy
    parts = basic[1]
    if len(parts) == len(x.shape) and all(type(p) is int for p in parts):
        return out  # one element by integers: a scalar in NumPy, a copy
    source = _source(x)
    return _link(x, out, lambda: source()[key], False)


def install(namespace: dict[str, Callable]) -> None:
    """Make the public view-making functions of ``namespace`` (``tapegrad.numpy``'s)
    and ``Tensor.__getitem__`` link views, and hook in-place writes and rewinds."""
    for name, shadow in _SHADOWS.items():
        namespace[name] = _wrap(namespace[name], shadow, may_copy=name in ("reshape", "ravel"))
    for name, shadow in _READONLY.items():
        namespace[name] = _wrap(namespace[name], shadow, readonly=True)
    Tensor.__getitem__ = view_getitem
    set_write_hook(_after_write)
    set_rewind_hooks(_rewound, _before_rewind, _after_rewind, _root)
