"""The handle, for the layers above ``tensors`` (engine, transforms, compile): named
reads and writes instead of Tensor's fields: the tensor of a slot, a tensor's tape and
slot, its gradient's accumulation (under a lock per tensor), whether its graph was
freed."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .tape import (
    Tape,
    normalize_array,
)
from .tensors import FLAG_DIFF, FLAG_FREED, Tensor, new_object

# --- the handle, for the layers above (engine, transforms): named reads instead of
# Tensor's fields. tape.py, views.py and program.py manage handles themselves and read
# the fields (tests/test_layering.py holds every other module to these functions).


def slot_handle(tape: Tape, slot: int) -> Tensor:
    """Another handle on result ``slot`` of ``tape`` (listed with its handles). Unlike
    :func:`result_handle` it does not call the result hook: nothing was recorded, and
    anomaly mode keeps the source line of the op that made the slot."""
    t = new_object(Tensor)
    t._tape, t._slot, t._epoch = tape, slot, tape.epoch
    t._data, t._flags, t._shape, t._grad = None, 0, None, None
    tape.handles.append(t)
    return t


def constant(values: np.ndarray) -> tuple[Tensor, np.ndarray]:
    """A constant tensor and the array its slot will read (bound by reference), which
    the caller may refill in place to replay a recording with new values."""
    arr = normalize_array(values, copy=True)
    return Tensor._external(arr), arr


def home_of(t: Tensor) -> tuple[Tape, int] | None:
    """The tape and slot of a tape result; None for a tensor holding its own values (a
    leaf, a constant, or a result copied out by a rewind)."""
    return None if t._data is not None else (t._tape, t._slot)


# Accumulation into ``.grad`` is atomic per tensor, as in PyTorch: threads that backward
# into one shared leaf each add their gradient (a read-add-write without a lock loses
# updates). Striped locks: a lock per tensor without a field per tensor.
_GRAD_LOCKS = [threading.Lock() for _ in range(64)]
# CPython's table of running Python threads (a dict; O(1) to size). With one thread no
# other can interleave, and the lock (half a microsecond per backward) is skipped.
_THREADS: dict = getattr(threading, "_active", {0: 0, 1: 1})


def thread_alive(ident: int) -> bool:
    """Whether the Python thread of this identifier is still running."""
    return ident in _THREADS


def added(old: Any, g: Any) -> Any:
    """``old + g``, accumulated into ``old`` itself when both are arrays (PyTorch's
    rule: a ``.grad`` the user holds, zeroes in place or steps with sees every later
    backward), ``g`` itself when ``old`` is None. A tensor on either side (a
    ``create_graph`` gradient) gives a new recorded sum, as in PyTorch."""
    if old is None:
        return g
    if isinstance(g, Tensor):
        return old + g
    if isinstance(old, Tensor):
        # a plain backward into a create_graph .grad adds values (PyTorch accumulates
        # with grad mode off): recording here would bind the old graph into a new one
        old = old._value()
        return np.add(old, g, out=np.empty_like(old))
    if not old.flags.writeable:  # an array the user assigned read-only: a new one
        return np.add(old, g, out=np.empty_like(old))
    return np.add(old, g, out=old)


def add_grad(t: Tensor, g: np.ndarray) -> None:
    """Add ``g`` (of ``t``'s shape and dtype) into ``t.grad`` (see :func:`added`)."""
    if len(_THREADS) < 2:
        t._grad = added(t._grad, g)
        return
    lock = _GRAD_LOCKS[(id(t) >> 4) & 63]
    lock.acquire()  # (acquire/release cost half of a ``with`` block)
    try:
        t._grad = added(t._grad, g)
    finally:
        lock.release()


def graph_freed(t: Tensor) -> bool:
    """A copied-out result that required grad: its graph is gone."""
    return t._data is not None and bool(t._flags & FLAG_FREED)


def mark_differentiated(t: Tensor, on: bool) -> None:
    """Flag a transform's argument while its function runs (other tapes refuse it)."""
    t._flags = t._flags | FLAG_DIFF if on else t._flags & ~FLAG_DIFF
