"""Tensor: a thin handle on a value in a tape (tape + slot id), or on its own array.

A tensor made by :func:`tensor` owns a private NumPy array (a *leaf*). When it is used
in an op it is *bound* into the current thread's tape: a slot pointing at its array,
no copy. Results of ops live in the tape's arena. When the tape is rewound, results
the user still holds are copied out into private arrays, so a handle never changes
value behind the user's back.

Operators and the NumPy-named methods (``sum``, ``reshape``...) are installed from the
op table by :mod:`tapegrad.numpy`.

**Leaving the graph.** A tensor that requires grad gives its values to Python only when
asked explicitly: ``.numpy()``, ``.detach()``, and ``.item()`` / ``float()`` / ``int()``
in eager code. ``__array__`` (NumPy and SciPy functions tapegrad does not implement)
raises instead, except that a 0-d tensor goes into NumPy's object arrays as itself, so
``np.array([t0, t1])`` keeps the graph (tapegrad ops accept such arrays);
``float()`` raises when NumPy's or SciPy's own code calls it, when an array stores it
(``a[i] = t`` into a NumPy array), or inside a transform or a capture. See
:mod:`tapegrad.boundary`.
"""

from __future__ import annotations

import dis
import functools
import itertools
import math
import os
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from . import devices
from .boundary import array_error, library_caller, scalar_error, suggestion
from .layout import (
    DEFERRED,
    DTYPE_NAMES,
    E_BROADCAST,
    E_FRONT_END,
    E_LINALG,
    E_NOFLOAT,
    E_SPACE,
    F64,
    H_NLINK,
    NP_DTYPES,
    R_ALIAS,
    R_BODY,
    R_NFP,
    R_NIN,
    R_NIP,
    R_NOUT,
    S_DTYPE,
    S_SIZE,
    SLOT_CONST,
    SLOT_FREED,
    SLOT_LEAF,
    SLOT_RG,
)
from .record import ABSENT, SCALAR, alias_slot, record_elementwise, record_general, record_tensors
from .shapes import broadcast_error, check_float
from .tape import (
    CAPTURE,
    EAGER,
    THREAD_MIN,
    TRANSFORM,
    Tape,
    current_tape,
    normalize_array,
    tape_stack,
    worker_count,
)
from .tiers import Unbound, call, current, entry_point, on_switch

FLAG_RG = 1  # external tensor requires grad
FLAG_FREED = 2  # external copy of a non-leaf whose graph was freed by a backward
# an argument a transform is differentiating with respect to (set while it runs): used
# from a tape that is not the transform's (another thread, a hook with grad on) it
# would silently be a constant there, so that raises
FLAG_DIFF = 4
# an input of a function being captured by tg.compile (set while it is captured): read
# from another thread, the read could not become a guard, so that raises
FLAG_CAPTURED = 8
# a captured input that was a Python float: hashes by value while captured, as the float
FLAG_FLOATARG = 16

FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved "
    "tensors after they have already been freed). Saved intermediate values of the "
    "graph are freed when you call .backward(). Specify retain_graph=True if you need "
    "to backward through the graph a second time."
)
NO_GRAD_MESSAGE = "element 0 of tensors does not require grad and does not have a grad_fn"
CAPTURED_ELSEWHERE = (
    "a value of a function being captured by tg.compile (shape {shape}, {dtype}) is read "
    "from another thread: a capture follows the calling thread only, so the read could "
    "not become a guard. Compute it on the capturing thread"
)
DIFF_ELSEWHERE = (
    "a tensor a transform is differentiating with respect to (shape {shape}, {dtype}) is "
    "used outside that transform's recording (from another thread, or in a hook with "
    "grad enabled): its gradient could not be followed there. Use it in the function "
    "being differentiated, on the transform's thread, or pass .detach()"
)
CROSS_DEVICE_MESSAGE = (
    "to: gradients do not flow between devices; this tensor is the result of ops that "
    "require grad, so moving it would cut the graph. Move the leaves instead, or "
    ".detach() it first"
)

# The tensor types of the device targets loaded so far (tapegrad.devices keeps it up to
# date); empty keeps the CPU paths free of any device check until one is loaded.
DEVICE_TYPES: tuple[type, ...] = ()


def _device_types(types: tuple[type, ...]) -> None:
    global DEVICE_TYPES
    DEVICE_TYPES = types


devices.listen(_device_types)

# External tensors are numbered as they are made: a transform or capture entered at
# serial n treats a tensor numbered below n as foreign (see tapegrad.tape).
_SERIAL = itertools.count(1)


def serial() -> int:
    """A number above every tensor made so far (a tape's ``born0``)."""
    return next(_SERIAL)


# Captures in progress in any thread: while there are some, reading a tensor's values
# asks the innermost capture of this thread (it may turn the read into a guard).
_CAPTURING = 0
_capturing_lock = threading.Lock()


def capture_started(delta: int) -> None:
    """Count a capture starting (+1) or ending (-1) (``tapegrad.compile``)."""
    global _CAPTURING
    with _capturing_lock:
        _CAPTURING += delta


def active_capture() -> Any:
    """The state of the innermost capture in this thread's tape stack, or None."""
    for tape in reversed(tape_stack()):
        if tape.capture is not None:
            return tape.capture
    return None


# Converts a list or an object array holding tensors into one tensor, keeping the
# graph (tapegrad.numpy installs ``array``: stacking is a front end above this module).
_objects_to_tensor: Callable[[Any], Tensor] | None = None


def set_object_converter(fn: Callable[[Any], Tensor]) -> None:
    global _objects_to_tensor
    _objects_to_tensor = fn


# Called after an in-place op on a view or on a tensor with views (tapegrad.views keeps
# NumPy's view semantics; it is installed above this module).
_write_hook: Callable[[Tensor], None] | None = None


def set_write_hook(fn: Callable[[Tensor], None]) -> None:
    global _write_hook
    _write_hook = fn


class Tensor:
    """An array that records the ops applied to it, for reverse-mode differentiation.

    Create with :func:`tapegrad.tensor`. Supports NumPy-style arithmetic, comparisons,
    indexing, ``@``, and the methods below; ``backward()`` fills ``.grad`` of the leaves
    that require grad. NumPy's own functions and ufuncs (``np.sin(t)``, ``np.sum(t)``)
    record on tensors too. Dtypes are float64, float32, int64 and bool; only float
    tensors can require grad.

    See Also
    --------
    tensor : Make a leaf tensor.
    as_tensor : A tensor from any array-like, without copying a tensor.
    no_grad : Ops that record nothing.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg
    >>> x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> y = (x * x).sum()
    >>> y
    tensor(14., requires_grad=True)
    >>> y.shape, y.dtype, y.is_leaf
    ((), dtype('float64'), False)
    >>> y.backward()
    >>> x.grad
    array([2., 4., 6.])
    >>> np.sin(x).detach()
    tensor([0.84147098, 0.90929743, 0.14112001])
    """

    __slots__ = (
        "__weakref__",
        "_born",
        "_data",
        "_epoch",
        "_flags",
        "_grad",
        "_shape",
        "_shared",  # detach(): the handles sharing a leaf's values (DETACHED_COPY: none)
        "_slot",
        "_tape",
        "_view",  # tapegrad.views: (base, kind, arg) of a view, unset otherwise
        "_views",  # tapegrad.views: weak references to this tensor's views, or unset
    )

    def __hash__(self) -> int:
        # a Python float argument of a compiled function is a 0-d tensor while it is
        # captured: dict and set lookups must still see the number (a guarded read)
        if self._flags & FLAG_FLOATARG:
            return hash(self._scalar("hash()"))
        return id(self) >> 4

    _tape: Tape | None
    _slot: int
    _epoch: int
    _data: np.ndarray | None
    _flags: int
    _shape: tuple[int, ...] | None
    _grad: np.ndarray | None

    # --- construction ---------------------------------------------------------------
    @classmethod
    def _external(cls, data: np.ndarray, flags: int = 0) -> Tensor:
        t = object.__new__(cls)
        t._tape = None
        t._slot = -1
        t._epoch = -1
        t._data = data
        t._flags = flags
        t._shape = data.shape
        t._grad = None
        t._born = next(_SERIAL)
        return t

    def _detach_from_tape(self, values: np.ndarray, requires_grad: bool) -> None:
        """Called by the tape when it rewinds: keep the values in a private array."""
        self._data = values
        self._shape = values.shape
        self._flags = (FLAG_RG | FLAG_FREED) if requires_grad else 0
        self._tape = None
        self._slot = -1
        self._epoch = -1

    def _adopt(self, other: Tensor) -> None:
        """Become ``other`` (same value, same place in the graph): in-place assignment."""
        # listed in this tape's handles already (made or adopted there this epoch)? A
        # second entry would look like a reference from user code to the rewind
        listed = self._data is None and self._tape is other._tape and self._epoch == other._epoch
        self._tape, self._slot, self._epoch = other._tape, other._slot, other._epoch
        self._data, self._flags, self._shape = other._data, other._flags, other._shape
        if self._data is None and not listed:
            self._tape.handles.append(self)

    # --- values and metadata ---------------------------------------------------------
    def _value(self) -> np.ndarray:
        """The values (the private array itself for an external tensor: do not modify).

        While ``tg.compile`` captures, this is a Python read of a value: the capture
        makes it a guard (and a tensor from outside the function an input)."""
        if _CAPTURING:
            cap = active_capture()
            if cap is not None:
                return cap.read(self)
            if (self._flags & FLAG_CAPTURED and self._data is not None) or (
                self._data is None and self._tape.capture is not None
            ):
                raise RuntimeError(CAPTURED_ELSEWHERE.format(shape=self.shape, dtype=self.dtype))
        if self._data is not None:
            return self._data
        return self._read()

    def _read(self) -> np.ndarray:
        """A copy of the values from the tape. Under the tape's lock: the owning thread
        copies held handles out and rewinds under it, so a reader in another thread gets
        this step's values or the copied-out ones, never reused memory."""
        tape = self._tape
        if tape is None:  # copied out by a rewind since the caller looked
            return self._data
        with tape.lock:
            if self._data is not None or self._tape is not tape:
                return self._data if self._data is not None else self._read()
            return tape.read(self._slot)

    def _peek(self) -> np.ndarray:
        """The values, for display only (no guard: printing decides nothing)."""
        return self._data if self._data is not None else self._read()

    def numpy(self) -> np.ndarray:
        """Return a copy of the values as a NumPy array (detached from the graph).

        While ``tg.compile`` captures, reading a value is a guard: the program
        replays only while the value is the same.

        Returns
        -------
        numpy.ndarray
            A new array of the tensor's shape and dtype.

        See Also
        --------
        Tensor.item : One value as a Python number.
        Tensor.detach : The values as a tensor outside the graph.

        Examples
        --------
        >>> import tapegrad as tg
        >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
        >>> (x * 2).numpy()
        array([2., 4.])
        """
        v = self._value()
        return v.copy() if v is self._data else v

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if self.requires_grad and current_tape().grad_enabled:
            if dtype is None and not self.shape:
                # NumPy builds an object array around it (np.array([t0, t1]),
                # np.full(3, t)): the tensor itself travels, its graph intact, and any
                # conversion to numbers later goes through __float__, which refuses
                box = np.empty((), object)
                box[()] = self
                return box
            name = library_caller(1)
            raise array_error(self.shape, self.dtype, name, suggestion(name))
        out = self.numpy()
        return out if dtype is None else out.astype(dtype, copy=False)

    def _scalar(self, what: str) -> Any:
        """The one value as a Python scalar, for ``float()`` / ``int()`` / ``.item()``.

        Eager code may ask for it (an explicit request, as in PyTorch); NumPy's or
        SciPy's own code may not (an implicit conversion that drops the gradient), nor
        may code being differentiated by a transform or captured by ``tg.compile``."""
        if self._flags & FLAG_DIFF and self._data is not None and current_tape().kind == EAGER:
            # a transform's argument reached from another thread (its tape would be the
            # transform's there): the number would silently be a constant
            if current_tape().grad_enabled:
                raise RuntimeError(DIFF_ELSEWHERE.format(shape=self.shape, dtype=self.dtype))
        if self.requires_grad:
            tape = current_tape()
            if tape.grad_enabled:
                name = library_caller(2)
                explicit = what == "item()" or tape.kind != EAGER  # (decided below)
                site = None if name is not None or explicit else _implicit_site(2)
                if name is not None or tape.kind != EAGER or site is not None:
                    if tape.kind == CAPTURE:
                        scope = "a function being captured by tg.compile"
                    elif tape.kind != EAGER:
                        scope = "a function being differentiated (tg.grad, vjp, jacobian...)"
                    else:
                        scope = site
                    raise scalar_error(what, self.shape, self.dtype, name, suggestion(name), scope)
        v = self._value()
        if v.size != 1:
            raise ValueError(f"{what}: tensor of shape {v.shape} has {v.size} elements, not 1")
        return v.reshape(()).item()

    def item(self) -> float | int | bool:
        """Return the value of a one-element tensor as a Python number.

        Eager code may ask for it, as in PyTorch. Inside a function being
        differentiated by a transform or captured by ``tg.compile``, and from NumPy's
        or SciPy's own code, it raises for a tensor that requires grad: the number
        would silently drop the gradient.

        Returns
        -------
        float, int or bool
            The value, as ``numpy.ndarray.item`` gives it.

        Raises
        ------
        ValueError
            The tensor has more than one element.
        TypeError
            The tensor requires grad and the call is inside a function being
            differentiated (``tg.grad``, ``tg.vjp``...) or captured by ``tg.compile``.

        See Also
        --------
        Tensor.numpy : All the values, as an array.

        Examples
        --------
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
        >>> tnp.sum(x).item()
        3.0
        >>> tg.tensor([3]).item()
        3
        """
        return self._scalar("item()")

    @property
    def shape(self) -> tuple[int, ...]:
        """The length of each axis, a tuple of ints (``()`` for a 0-d tensor)."""
        if self._shape is None:
            shape = self._tape.slot_shape(self._slot)
            if self._data is not None:  # copied out meanwhile (another thread rewound)
                return self._data.shape
            self._shape = shape
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype of the values: float64, float32, an integer type or bool."""
        if self._data is not None:
            return self._data.dtype
        dtype = self._tape.slot_dtype(self._slot)
        # read, then check that the slot was still this tensor's: a rewind in the owning
        # thread copies the handle out before the slot is reused
        return dtype if self._data is None else self._data.dtype

    @property
    def grad(self) -> Any:
        """The gradient a backward accumulated (an array of this tensor's shape and
        dtype), or None; after ``backward(create_graph=True)`` a tensor in the graph,
        which can be differentiated again."""
        return self._grad

    @grad.setter
    def grad(self, value: Any) -> None:
        if value is not None:
            if isinstance(value, Tensor):
                value = value.numpy()
            if not isinstance(value, np.ndarray):
                raise TypeError(
                    f"assigned .grad must be a NumPy array or None, not {type(value).__name__}"
                )
            if value.shape != self.shape or value.dtype != self.dtype:
                raise RuntimeError(
                    f"assigned .grad has shape {value.shape} and dtype {value.dtype}, but "
                    f"the tensor has shape {self.shape} and dtype {self.dtype}"
                )
        self._grad = value

    # --- copying and pickling: values and requires_grad, without the graph --------------
    def __reduce_ex__(self, protocol: Any) -> tuple:
        # as torch.save: the values and the flag; the loaded tensor is a leaf
        return (rebuild, (self.numpy(), self.requires_grad))

    def __copy__(self) -> Tensor:
        # a second handle on the same values and node (listed with the tape's handles,
        # so a rewind copies it out like the first)
        out = object.__new__(type(self))
        out._data, out._tape, out._epoch = None, None, -1
        out._adopt(self)
        out._grad = self._grad
        if hasattr(self, "_born"):  # results have none (see bind)
            out._born = self._born
        return out

    def __deepcopy__(self, memo: dict) -> Tensor:
        if self.requires_grad and not self.is_leaf:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the "
                "deepcopy protocol at the moment (this tensor requires grad and was "
                "computed by recorded ops); deepcopy its .detach() instead"
            )
        out = rebuild(self.numpy(), self.requires_grad)
        if self._grad is not None:
            out._grad = self._grad.copy()
        memo[id(self)] = out
        return out

    @property
    def ndim(self) -> int:
        """The number of axes, ``len(t.shape)``."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """The number of elements, the product of the shape (1 for a 0-d tensor)."""
        if self._data is not None:
            return self._data.size
        n = self._tape.slot_field(S_SIZE, self._slot)
        # read, then check that the slot was still this tensor's (as dtype does)
        return n if self._data is None else self._data.size

    def __len__(self) -> int:
        shape = self.shape
        if not shape:
            raise TypeError("len() of a 0-d tensor")
        return shape[0]

    def __iter__(self) -> Any:
        # as NumPy's: a 0-d tensor is not a sequence (numpy.zeros(t) then reads it as an
        # integer, where iterating by __getitem__ would find no items: shape ())
        shape = self.shape
        if not shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(shape[0]))

    @property
    def requires_grad(self) -> bool:
        """Whether backward passes compute a gradient for this tensor: set on a leaf
        (``tg.tensor(..., requires_grad=True)``, :meth:`Tensor.requires_grad_`); true for a
        result of ops on such a tensor while grad mode is on."""
        if self._data is not None:
            return bool(self._flags & FLAG_RG)
        return self._tape.slot_rg(self._slot)

    @property
    def is_leaf(self) -> bool:
        """True for tensors made by the user (or not requiring grad), as in PyTorch."""
        if self._data is not None:
            return not self._flags & FLAG_FREED
        return not self._tape.slot_rg(self._slot)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set ``requires_grad`` in place on a leaf.

        Parameters
        ----------
        requires_grad : bool, optional
            Whether backward passes compute this tensor's gradient (default True).

        Returns
        -------
        Tensor
            ``self``.

        Raises
        ------
        RuntimeError
            The tensor is not a leaf (it is the result of ops that require grad); use
            ``.detach()`` to get a leaf that shares its values.
        TypeError
            ``requires_grad=True`` on a tensor that is not of a float dtype.

        Examples
        --------
        >>> import tapegrad as tg
        >>> w = tg.tensor([1.0, 2.0]).requires_grad_()
        >>> w
        tensor([1., 2.], requires_grad=True)
        """
        if not self.is_leaf:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. "
                "Use .detach() to get a leaf that shares the values."
            )
        if requires_grad:
            check_float(self.dtype, "requires_grad_")
        if self._data is None:  # a constant result of an op: becomes a user leaf
            self._detach_from_tape(self._tape.read(self._slot), False)
        self._flags = FLAG_RG if requires_grad else 0
        self._epoch = -1  # rebind with the new flag on next use
        return self

    def detach(self) -> Tensor:
        """Return a new tensor with the same values that does not require grad.

        The detach of a leaf shares its values, as PyTorch's does: an in-place update
        of either (``wd -= lr * g``, ``w -= ...`` under ``no_grad``) is seen by both,
        and bumps the version of both, so a graph that saved the old values refuses to
        run backward. A computed tensor's values live on the tape: its detach is a
        copy, and an in-place write into that copy raises (it would not reach the
        source). While ``tg.compile`` captures, it is recorded (its value follows the
        inputs on replay).

        Returns
        -------
        Tensor
            A leaf that does not require grad.

        See Also
        --------
        Tensor.numpy : The values as a NumPy array.

        Examples
        --------
        >>> import tapegrad as tg
        >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
        >>> d = x.detach()
        >>> d.requires_grad
        False
        >>> with tg.no_grad():
        ...     d *= 10.0  # shared with the leaf x
        >>> x
        tensor([10., 20.], requires_grad=True)
        """
        if not _CAPTURING or active_capture() is None:
            if self._data is None or not self.is_leaf:
                out = Tensor._external(self.numpy())
                out._shared = DETACHED_COPY
                return out
            out = Tensor._external(self._data)
            shared = getattr(self, "_shared", None)
            if not shared:
                shared = self._shared = [weakref.ref(self)]
            shared.append(weakref.ref(out))
            out._shared = shared
            return out
        tape = current_tape()
        while True:
            ep = tape.epoch
            s = bind_operand(tape, ep, self)[0]
            if tape.epoch != ep:
                continue
            r = call(alias_slot, tape.header, s, 0)
            if r >= 0:
                return result_handle(tape, r, ep)
            tape.fix(r)

    @property
    def device(self) -> str:
        """``'cpu'`` (CUDA tensors, :class:`tapegrad.cuda.CudaTensor`, say ``'cuda'``)."""
        return "cpu"

    def to(self, device: str) -> Any:
        """Return this tensor on ``device``: itself for ``'cpu'``, a copy on the GPU for ``'cuda'``.

        The copy is a new leaf that requires grad if this one does: gradients do not
        flow between devices, so moving a non-leaf tensor that requires grad raises
        (``.detach()`` it first) rather than silently cutting the graph.

        Parameters
        ----------
        device : {'cpu', 'cuda'}
            Where the values should live.

        Returns
        -------
        Tensor or tapegrad.cuda.CudaTensor
            ``self`` for ``'cpu'``; a :class:`tapegrad.cuda.CudaTensor` for ``'cuda'``.

        Raises
        ------
        ValueError
            An unknown ``device``.
        RuntimeError
            ``'cuda'`` for a non-leaf tensor that requires grad, or on a machine
            without a GPU (or numba's CUDA simulator).

        Examples
        --------
        >>> import tapegrad as tg
        >>> x = tg.tensor([1.0, 2.0])
        >>> x.to("cpu") is x
        True
        >>> # a CUDA GPU (or numba's simulator) is needed from here on
        >>> x.to("cuda")  # doctest: +SKIP
        tensor([1., 2.], device='cuda')
        """
        if device == "cpu":
            return self
        target = devices.get(device, "to")
        if self.requires_grad and not self.is_leaf:
            raise RuntimeError(CROSS_DEVICE_MESSAGE)
        return target.to_device(self.numpy(), requires_grad=self.requires_grad)

    @property
    def _version(self) -> int:
        """How many in-place operations changed this tensor (as PyTorch's ``_version``)."""
        return _VERSIONS.get(self, 0)

    def _begin_inplace(self, what: str) -> None:
        """Checks and bookkeeping before an in-place op (``+=``, ``x[key] = v``).

        A leaf that requires grad may only be updated under ``no_grad`` (PyTorch's rule:
        a parameter update). The slot holding the current value gets a new version, so
        nodes that saved it refuse to run backward (the tape's values are never written
        in place, but a gradient of a value the user has since replaced is a bug magnet).
        """
        view = getattr(self, "_view", None)
        if view is not None and view.readonly and view.root() is not None:
            raise ValueError(
                f"{what}: assignment destination is read-only (this tensor is a view that "
                "NumPy makes read-only: diagonal, broadcast_to); copy it first"
            )
        if self.requires_grad and self.is_leaf and is_grad_enabled():
            raise RuntimeError(
                f"a leaf tensor that requires grad is being used in an in-place operation "
                f"({what}); do it under tg.no_grad() (e.g. a parameter update) or on a copy"
            )
        if getattr(self, "_shared", None) is DETACHED_COPY:
            raise RuntimeError(
                f"{what} on the detach() of a computed tensor (shape {self.shape}, "
                f"{self.dtype}): its values live on the tape, so detach() gave a copy, and "
                "writing into it would not change the tensor it came from (PyTorch's "
                "would). Compute the new value out of place, or write into a copy made "
                "on purpose: t.detach().copy()"
            )
        if _CAPTURING:
            cap = active_capture()
            if cap is not None:
                cap.check_inplace(self)
        if self._tape is not None and (self._data is None or self._epoch == self._tape.epoch):
            self._tape.bump_version(self._slot)
        _VERSIONS[self] = _VERSIONS.get(self, 0) + 1

    def _undo_inplace(self) -> None:
        """Take back :meth:`_begin_inplace`'s version bump: the in-place op was refused
        (its operand's shape or dtype) and replaced nothing."""
        if self._tape is not None and (self._data is None or self._epoch == self._tape.epoch):
            self._tape.bump_version(self._slot, -1)
        _VERSIONS[self] = _VERSIONS.get(self, 1) - 1

    def _inplace(self, result: Tensor, what: str) -> Tensor:
        """``self`` takes ``result``'s value in place (after :meth:`_begin_inplace`)."""
        shared = getattr(self, "_shared", None)
        if shared:
            _write_shared(self, shared, result)
            return self
        if self.requires_grad and self.is_leaf:
            # a parameter update under no_grad: the leaf keeps its identity and grad
            self._data = normalize_array(result._value(), copy=True).astype(self.dtype)
            self._epoch = -1  # rebind on next use
        else:
            self._adopt(result)
        if _write_hook is not None and (
            getattr(self, "_view", None) is not None or getattr(self, "_views", None)
        ):
            _write_hook(self)
        return self

    # --- printing --------------------------------------------------------------------
    def __repr__(self) -> str:
        v = self._peek()
        body = np.array2string(v, separator=", ", prefix="tensor(")
        extra = ""
        if v.dtype != np.float64 and v.dtype != np.int64 and v.dtype != np.bool_:
            extra += f", dtype={v.dtype}"
        if self.requires_grad:
            extra += ", requires_grad=True"
        return f"tensor({body}{extra})"

    def __bool__(self) -> bool:
        return bool(self._value())

    def __float__(self) -> float:
        return float(self._scalar("float()"))

    def __format__(self, spec: str) -> str:
        # f"{t:.3f}": NumPy's formatting of the values (display, as repr: no guard)
        return format(self._peek(), spec) if spec else str(self)

    # math.floor / ceil / trunc: integers, whose derivative is 0 wherever it exists, so
    # taking the number drops no gradient (a capture still guards the value read)
    def _integral(self, what: str, round_: Callable[[float], int]) -> int:
        v = self._value()
        if v.size != 1:
            raise ValueError(f"{what}: tensor of shape {v.shape} has {v.size} elements, not 1")
        return round_(v.reshape(()).item())

    def __floor__(self) -> int:
        return self._integral("math.floor", math.floor)

    def __ceil__(self) -> int:
        return self._integral("math.ceil", math.ceil)

    def __trunc__(self) -> int:
        return self._integral("math.trunc", math.trunc)

    def __int__(self) -> int:
        return int(self._scalar("int()"))

    def __index__(self) -> int:
        # NumPy's rule: only integer 0-d arrays are indices (not bools, not shape (1,))
        if self.dtype.kind not in "iu" or self.shape:
            raise TypeError(
                "only integer scalar tensors can be an index, not "
                f"{self.dtype} of shape {self.shape}"
            )
        return int(self._scalar("an index"))


# a[i] = t, a[i:j] = t: the instructions that make an array convert what it stores
_STORE_OPS = frozenset(dis.opmap[n] for n in ("STORE_SUBSCR", "STORE_SLICE") if n in dis.opmap)
STORE_SCOPE = (
    "an assignment into a NumPy array (a[i] = t), which keeps only the number; make the "
    "array a tensor (tg.tensor(a), tnp.zeros_like(t)) or build it with tnp.stack"
)
# the calls that ask for a tensor's number explicitly (as t.item() does)
_EXPLICIT = (float, int)
_CALLS = frozenset(dis.opmap[n] for n in ("CALL", "CALL_FUNCTION", "CALL_METHOD") if n in dis.opmap)
_LOADS = frozenset(
    "LOAD_NAME LOAD_GLOBAL LOAD_FAST LOAD_DEREF LOAD_CLOSURE LOAD_ATTR LOAD_METHOD".split()
)


@functools.lru_cache(maxsize=512)
def _instructions(code: Any) -> tuple[dict[int, int], list]:
    ins = list(dis.get_instructions(code))
    return {x.offset: i for i, x in enumerate(ins)}, ins


def _callee(frame: Any) -> tuple[str, Any] | None:
    """The name and, where it can be looked up, the object a frame is calling at its
    current instruction; None when the frame is not at a call or the code has no
    source positions (Python 3.10).

    The call's source span starts where the callable's expression starts: walking back
    from the call, the first instruction that starts there and ends before the call
    does computed the callable (``float`` in ``float(t)``, ``math.exp`` in
    ``math.exp(x[0])``, ``.fill`` in ``np.zeros(2).fill(t)``)."""
    at, ins = _instructions(frame.f_code)
    i = at.get(frame.f_lasti)
    if i is not None and ins[i].opname == "PRECALL" and i + 1 < len(ins):
        i += 1  # (3.11 runs a builtin class's call from PRECALL once the code is quickened)
    if i is None or ins[i].opcode not in _CALLS:
        return None
    pos = getattr(ins[i], "positions", None)
    if pos is None or pos.lineno is None:
        return UNKNOWN_CALLEE
    begin, finish = (pos.lineno, pos.col_offset), (pos.end_lineno, pos.end_col_offset)
    for k in range(i - 1, -1, -1):
        x = ins[k]
        p = x.positions
        if p.lineno is None or (p.lineno, p.col_offset) != begin:
            continue
        if (p.end_lineno, p.end_col_offset) == finish:
            continue  # the call's own set-up (PRECALL, KW_NAMES)
        if x.opname not in _LOADS or not isinstance(x.argval, str):
            return "a call", None  # a computed callable: (f or g)(t), fs[0](t)
        name = x.argval.removeprefix("NULL + ").removesuffix(" + NULL")
        if x.opname in ("LOAD_ATTR", "LOAD_METHOD"):
            before = ins[k - 1] if k else None
            bp = before.positions if before is not None else None
            if before.opname in _LOADS and bp and (bp.lineno, bp.col_offset) == begin:
                return f"{str(before.argval).removeprefix('NULL + ')}.{name}", None
            return name, None
        found = _MISSING
        if x.opname != "LOAD_GLOBAL":
            found = frame.f_locals.get(name, _MISSING)
        if found is _MISSING and x.opname in ("LOAD_NAME", "LOAD_GLOBAL"):
            found = frame.f_globals.get(name, frame.f_builtins.get(name, _MISSING))
        return name, None if found is _MISSING else found
    return None


_MISSING = object()
UNKNOWN_CALLEE = ("?", None)
# "%f" % t: the instruction (BINARY_OP's argument 6 is %, NB_REMAINDER, from Python 3.11)
_REMAINDER = frozenset(dis.opmap[n] for n in ("BINARY_MODULO",) if n in dis.opmap)
_BINARY_OP = dis.opmap.get("BINARY_OP", -1)


def _implicit_site(depth: int) -> str | None:
    """Where a conversion of a tensor to a Python number comes from, when it is not the
    user's explicit request: the frame ``depth`` levels above the caller storing it into
    an array (``a[i] = t``) or calling anything but ``float`` / ``int`` on it from C
    (``math.exp(t)``, ``np.float64(t)``, ``a.fill(t)``, ``complex(t)``), which gets the
    number through ``__float__`` as ``float(t)`` would. None for ``float(t)``,
    ``int(t)``; a description of the call otherwise."""
    try:
        frame = sys._getframe(depth + 1)
    except ValueError:
        return None
    op = frame.f_code.co_code[frame.f_lasti]
    if op in _STORE_OPS:
        return STORE_SCOPE
    if op in _REMAINDER or (op == _BINARY_OP and frame.f_code.co_code[frame.f_lasti + 1] == 6):
        return None  # "%.3f" % t: formatting for display, as f"{t:.3f}" (no number left)
    callee = _callee(frame)
    if callee is UNKNOWN_CALLEE or (callee is not None and any(callee[1] is f for f in _EXPLICIT)):
        return None  # (Python 3.10 has no source positions: conversions are allowed there)
    what = f"{callee[0]}()" if callee is not None else "a conversion made from C code"
    return (
        f"{what}, which takes the number from C code and keeps no gradient; write it "
        "with tapegrad.numpy ops (tnp.exp, tnp.log, tnp.sum...), or ask for the number "
        "explicitly with float(t) or t.item()"
    )


# detach() of a computed tensor: a copy, which refuses in-place writes (Tensor._shared)
DETACHED_COPY: tuple = ()


def _write_shared(t: Tensor, shared: list, result: Tensor) -> None:
    """An in-place op on ``t``, a leaf whose values its ``detach()`` handles share (or
    one of those): every live handle of the group takes the new values (a new array:
    tapes that bound the old one keep reading what they recorded) and rebinds on next
    use, and every one but ``t`` (bumped by ``_begin_inplace``) gets a new version."""
    new = np.array(result._value(), dtype=t.dtype, order="C", copy=True)
    live = [m for m in (r() for r in shared) if m is not None and m._data is not None]
    shared[:] = [weakref.ref(m) for m in live]
    for m in live:
        if m is not t:
            if m._tape is not None and m._epoch == m._tape.epoch:
                m._tape.bump_version(m._slot)
            _VERSIONS[m] = _VERSIONS.get(m, 0) + 1
        m._data, m._shape, m._epoch = new, new.shape, -1
    if _write_hook is not None:
        for m in live:
            if getattr(m, "_view", None) is not None or getattr(m, "_views", None):
                _write_hook(m)


_new = object.__new__


class WeakIdMap:
    """A dict keyed by objects' identity that forgets an object when it dies (a
    WeakKeyDictionary would compare tensors with ``==``, which is elementwise).
    ``entries`` is the underlying dict: empty means no object has a value (a test the
    engine's hot path makes before any lookup)."""

    def __init__(self) -> None:
        self.entries: dict[int, tuple[weakref.ref, Any]] = {}

    def _forget(self, key: int) -> Callable[[weakref.ref], None]:
        return lambda _ref: self.entries.pop(key, None)

    def get(self, obj: Any, default: Any = None) -> Any:
        entry = self.entries.get(id(obj))
        return entry[1] if entry is not None and entry[0]() is obj else default

    def __setitem__(self, obj: Any, value: Any) -> None:
        self.entries[id(obj)] = (weakref.ref(obj, self._forget(id(obj))), value)

    def __contains__(self, obj: Any) -> bool:
        return self.get(obj, _ABSENT_VALUE) is not _ABSENT_VALUE

    def setdefault(self, obj: Any, default: Any) -> Any:
        if obj not in self:
            self[obj] = default
        return self.get(obj)


_ABSENT_VALUE = object()
_VERSIONS = WeakIdMap()


# called with (tape, slot) for every op result while anomaly mode is on (it records the
# user's source line); None otherwise, so the hot path pays one global read
_RESULT_HOOK: Callable[[Tape, int], None] | None = None


def set_result_hook(fn: Callable[[Tape, int], None] | None) -> None:
    """Install (or remove, ``None``) the function :func:`result_handle` calls."""
    global _RESULT_HOOK
    _RESULT_HOOK = fn


def result_handle(tape: Tape, slot: int, epoch: int) -> Tensor:
    """The handle of a result the recorder wrote into ``slot`` of ``tape``."""
    t = _new(Tensor)
    t._tape = tape
    t._slot = slot
    t._epoch = epoch
    t._data = None
    t._flags = 0
    t._shape = None
    t._grad = None
    tape.handles.append(t)
    if _RESULT_HOOK is not None:
        _RESULT_HOOK(tape, slot)
    return t


# --- the handle, for the layers above (engine, transforms): named reads instead of
# Tensor's fields. tape.py, views.py and program.py manage handles themselves and read
# the fields (tests/test_layering.py holds every other module to these functions).


def slot_handle(tape: Tape, slot: int) -> Tensor:
    """Another handle on result ``slot`` of ``tape`` (listed with its handles). Unlike
    :func:`result_handle` it does not call the result hook: nothing was recorded, and
    anomaly mode keeps the source line of the op that made the slot."""
    t = _new(Tensor)
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


def rebuild(values: np.ndarray, requires_grad: bool) -> Tensor:
    """A leaf holding ``values`` (what unpickling a tensor calls)."""
    return tensor(values, requires_grad=requires_grad)


def tensor(
    data: Any, requires_grad: bool = False, dtype: Any = None, device: str = "cpu"
) -> Tensor:
    """Make a leaf tensor holding a copy of ``data``.

    Parameters
    ----------
    data : array_like or Tensor
        Array-like (NumPy array, nested lists, Python number, another Tensor).
        float64 and float32 are kept; Python floats become float64, Python ints and
        integer arrays int64, bools bool.
    requires_grad : bool, optional
        Record ops on this tensor so ``backward`` computes its gradient (float only).
    dtype : data-type, optional
        Convert to this dtype: float64, float32, int64 or bool.
    device : {'cpu', 'cuda'}, optional
        ``'cpu'`` (default) or ``'cuda'``: a :class:`tapegrad.cuda.CudaTensor` whose
        values live on the GPU (loads the CUDA target on first use).

    Returns
    -------
    Tensor
        A new leaf (a :class:`tapegrad.cuda.CudaTensor` for ``device='cuda'``).

    Raises
    ------
    TypeError
        ``requires_grad=True`` for a non-float dtype; a ``dtype`` other than float64,
        float32, int64 or bool; ``data`` of a dtype tapegrad cannot hold (strings,
        complex numbers); or ``data`` is a tensor (or an object array of tensors) that
        requires grad, whose gradient the copy would drop (use ``tnp.array(t)`` or
        ``t.copy()`` to keep the graph, ``t.detach()`` for a new leaf).
    ValueError
        An unknown ``device``, or ragged nested lists.
    RuntimeError
        ``device='cuda'`` on a machine without a GPU (or numba's CUDA simulator).

    See Also
    --------
    as_tensor : No copy of a tensor; keeps the graph of a list of tensors.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg
    >>> tg.tensor([1.0, 2.0], requires_grad=True)
    tensor([1., 2.], requires_grad=True)
    >>> tg.tensor([1, 2]), tg.tensor(2.5), tg.tensor([1.0, 2.0], dtype=np.float32)
    (tensor([1, 2]), tensor(2.5), tensor([1., 2.], dtype=float32))
    """
    if device != "cpu":
        return devices.get(device, "tensor").to_device(data, requires_grad, dtype)
    if isinstance(data, Tensor):
        if data.requires_grad and current_tape().grad_enabled:
            raise TypeError(
                f"tensor() of a tensor that requires grad (shape {data.shape}, "
                f"{data.dtype}) makes a new leaf from its values, which would drop its "
                "gradient. To keep the graph, use tnp.array(t) or t.copy() (a recorded "
                "copy); for a new leaf, pass t.detach() (tg.tensor(t.detach(), "
                "requires_grad=True))"
            )
        data = data._value()
    elif isinstance(data, np.ndarray) and data.dtype == object:
        if any(isinstance(v, Tensor) and v.requires_grad for v in data.flat):
            raise TypeError(
                "tensor: this object array holds tensors that require grad; tensor() "
                "copies values (which would drop their gradient): use tnp.array or "
                "tnp.stack to keep the graph, or .detach() them"
            )
    elif DEVICE_TYPES and isinstance(data, DEVICE_TYPES):
        data = data.numpy()
    if dtype is not None:
        dt = np.dtype(dtype)
        if dt not in NP_DTYPES:
            raise TypeError(f"tensor: unsupported dtype {dt} (supported: {', '.join(DTYPE_NAMES)})")
        arr = np.array(data, dtype=dt, order="C", copy=True)
    else:
        arr = normalize_array(data, copy=True)
    if requires_grad:
        check_float(arr.dtype, "tensor")
    return Tensor._external(arr, FLAG_RG if requires_grad else 0)


def as_tensor(x: Any) -> Tensor:
    """Convert ``x`` to a tensor: ``x`` itself if it is one, else a constant tensor.

    A constant tensor holds a copy of ``x``'s values and does not require grad; a
    list or an object array holding tensors is stacked (recorded: the graph is kept).

    Parameters
    ----------
    x : array_like or Tensor
        A tensor, a NumPy array, a Python number, or (nested) lists of numbers or
        tensors.

    Returns
    -------
    Tensor
        ``x`` itself when it is a tensor, else a new tensor.

    Raises
    ------
    TypeError
        ``x`` is of a dtype tapegrad cannot hold (strings, complex numbers), or is a
        CUDA tensor (:class:`tapegrad.cuda.CudaTensor`).
    ValueError
        Ragged nested lists, or parts of a list of tensors whose shapes do not match.

    See Also
    --------
    tensor : Always a new leaf, optionally requiring grad.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg
    >>> tg.as_tensor(np.array([1.0, 2.0]))
    tensor([1., 2.])
    >>> x = tg.tensor(3.0, requires_grad=True)
    >>> tg.as_tensor(x) is x
    True
    >>> tg.as_tensor([x, 2 * x])
    tensor([3., 6.], requires_grad=True)
    """
    if isinstance(x, Tensor):
        return x
    if type(x) is np.ndarray and x.dtype in FLOAT_DTYPES:  # the common case: a copy
        return Tensor._external(x.copy())
    if DEVICE_TYPES and isinstance(x, DEVICE_TYPES):
        raise TypeError(DEVICE_MESSAGE)
    if (isinstance(x, list | tuple) or (isinstance(x, np.ndarray) and x.dtype == object)) and (
        _objects_to_tensor is not None
    ):
        return _objects_to_tensor(x)
    return Tensor._external(normalize_array(x, copy=True))


DEVICE_MESSAGE = (
    "expected all tensors on one device, got a CUDA tensor among CPU operands (or in an op "
    "without a CUDA kernel: see the op reference); move it with .to('cpu') or the others "
    "with .to('cuda')"
)


# --- binding into a tape ----------------------------------------------------------------


def bind(tape: Tape, t: Tensor) -> int:
    """The slot of ``t`` in ``tape`` (binding it if needed).

    A tensor from outside a transform's or a capture's tape is *foreign* there (see
    ``tapegrad.tape``): it gets a slot of its own, and the tensor keeps its binding."""
    if t._data is None:
        if t._tape is tape:
            return t._slot
        return _bind_other(tape, t)
    f = t._flags
    if tape.kind != EAGER and not f & FLAG_FREED and getattr(t, "_born", 0) < tape.born0:
        return _bind_foreign(tape, t)
    if f & FLAG_DIFF and tape.kind == EAGER and tape.grad_enabled:
        raise RuntimeError(DIFF_ELSEWHERE.format(shape=t.shape, dtype=t.dtype))
    if f & FLAG_CAPTURED:  # its capture binds it first; any other tape is another thread's
        raise RuntimeError(CAPTURED_ELSEWHERE.format(shape=t.shape, dtype=t.dtype))
    if f & FLAG_FREED:
        flags = SLOT_RG | SLOT_FREED
    elif f & FLAG_RG:
        flags = SLOT_RG | SLOT_LEAF
    else:
        flags = SLOT_CONST
    return _bind_here(tape, t, flags)


def bind_leaf(tape: Tape, t: Tensor) -> int:
    """Bind a leaf its caller has just made (``Tensor._external`` with ``FLAG_RG``):
    the slot :func:`bind` gives it, without its checks, which concern tensors from
    elsewhere (a transform's argument leaves, bound on every call)."""
    return _bind_here(tape, t, SLOT_RG | SLOT_LEAF)


def _bind_here(tape: Tape, t: Tensor, flags: int) -> int:
    s = tape.import_array(t._data, flags)
    t._tape = tape
    t._slot = s
    t._epoch = tape.epoch
    if flags & SLOT_LEAF:
        tape.leaves.append((s, t))
    return s


def _bind_other(tape: Tape, t: Tensor) -> int:
    """Bind a result that lives in another tape: an enclosing level's (foreign), another
    thread's, or a finished transform's."""
    home = t._tape
    rg = home.slot_rg(t._slot) and tape.grad_enabled
    if tape.kind == TRANSFORM and rg:
        return _bind_foreign(tape, t)
    if tape.kind == CAPTURE:
        if rg:
            raise TypeError(
                f"tapegrad.compile: the function reads a tensor (shape {t.shape}, {t.dtype}) "
                "that requires grad and was computed outside it by recorded ops; its "
                "gradient cannot flow through the compiled step. Pass it as an argument, "
                "or .detach() it"
            )
        return _bind_foreign(tape, t)
    if rg and home.handed_over and tape.kind == EAGER and home.thread == tape.thread:
        return _bind_chained(tape, t)
    if rg:
        if home.thread != tape.thread:
            raise RuntimeError(
                "a tensor that requires grad was created in another thread; "
                "graphs cannot span threads (use .detach())"
            )
        raise RuntimeError(
            f"a tensor that requires grad (shape {t.shape}, {t.dtype}) belongs to another "
            "graph: one being differentiated around this code (a hook or a custom "
            "function's backward), or a finished transform's. Graphs cannot span these; "
            "use .detach()"
        )
    return tape.import_array(normalize_array(t._value(), copy=False), SLOT_CONST)


def _bind_chained(tape: Tape, t: Tensor) -> int:
    """A slot for a result of a handed-over tape (``Tape.hand_over``: a graph held
    across a rewind) used by an op of this eager tape, once per epoch.

    The slot requires grad and is listed in ``tape.foreign``; a backward here that
    reaches it continues into the result's own tape, seeded with the slot's gradient
    (``engine._backward_chained``), as PyTorch's graph would run on through the held
    node."""
    entry = tape.foreign.get(id(t))
    if entry is not None and entry[1] is t:
        return entry[0]
    home, home_slot = t._tape, t._slot
    s = tape.import_array(normalize_array(t._value(), copy=False), SLOT_RG)
    # the result's place now: an in-place op may rebind the handle later
    tape.foreign[id(t)] = (s, t, home, home_slot)
    return s


def _bind_foreign(tape: Tape, t: Tensor) -> int:
    """A slot for a tensor from outside this transform or capture (once per epoch); the
    tensor keeps its own binding.

    A transform gives one that requires grad a slot that requires grad but is no leaf:
    if a backward reaches it, the engine raises (the gradient would depend on it, and a
    transform's NumPy result cannot carry that); others are constants. Their values are
    read with ``_value()``, so a capture around the transform sees the read. A capture
    asks its state for an input slot."""
    entry = tape.foreign.get(id(t))
    if entry is not None and entry[1] is t:
        return entry[0]
    if tape.kind == CAPTURE:
        s = tape.capture.foreign_input(tape, t)
    else:
        rg = tape.foreign_rg and t.requires_grad
        s = tape.import_array(normalize_array(t._value(), copy=True), SLOT_RG if rg else SLOT_CONST)
    tape.foreign[id(t)] = (s, t)
    return s


_SCALARS = (float, int, bool)
# Native float arrays, the common operand and argument: copied and imported directly
# (normalize_array would convert the others: byte order, integers, layouts).
FLOAT_DTYPES = (np.dtype(np.float64), np.dtype(np.float32))


def bind_operand(tape: Tape, epoch: int, v: Any) -> tuple[int, float]:
    if isinstance(v, Tensor):
        if v._tape is tape and v._epoch == epoch:
            return v._slot, 0.0
        return bind(tape, v), 0.0
    if type(v) in (float, int, bool):
        return SCALAR, float(v)
    return tape.import_array(normalize_array(v, copy=True), SLOT_CONST), 0.0


def _shape_of(v: Any) -> tuple[int, ...]:
    return v.shape if isinstance(v, Tensor) else np.shape(v)


def values_of(v: Any) -> Any:
    return v._value() if isinstance(v, Tensor) else v


def scalar_value(t: Tensor, own: Tape) -> float:
    """``float`` of one-element ``t``'s value: read in place when it is a float result
    in ``own``, a tape of the calling thread's (a transform's loss: no other thread
    rewinds it), else through ``_value``, which locks another thread's tape and which
    a capture guards."""
    if t._tape is own and t._data is None and not _CAPTURING:
        v = own.read_scalar(t._slot)
        if v is not None:
            return v
    return float(t._value().reshape(()))


def elementwise(op: Any, x: Any, y: Any = None, out: Any = None) -> Tensor:
    """Record elementwise ``op`` (a table row) on ``x`` (and ``y`` unless unary).

    This is the eager hot path: resolve operands to slots, one compiled call that
    records the node and runs its forward, one handle.
    """
    if out is not None:
        raise TypeError(f"{op.name}: out= is not supported (tensors are immutable)")
    if DEVICE_TYPES and (isinstance(x, DEVICE_TYPES) or isinstance(y, DEVICE_TYPES)):
        return devices.route((x, y)).elementwise(op, x, y)
    code = op.code
    unary = op.is_unary
    compare = op.is_compare
    # arrays and lists become constant tensors once, so a retry does not bind them again
    if type(x) is not Tensor and type(x) not in _SCALARS:
        x = as_tensor(x)
    if not unary and type(y) is not Tensor and type(y) not in _SCALARS:
        y = as_tensor(y)
    tape = current_tape()
    h = tape.header
    mark = None
    while True:
        ep = tape.epoch
        if type(x) is Tensor and x._tape is tape and x._epoch == ep:
            a, fa = x._slot, 0.0
        else:
            if mark is None or mark[0] != ep:
                mark = tape.mark()
            a, fa = bind_operand(tape, ep, x)
        if unary:
            b, fb = ABSENT, 0.0
        elif type(y) is Tensor and y._tape is tape and y._epoch == ep:
            b, fb = y._slot, 0.0
        else:
            if mark is None or mark[0] != ep:
                mark = tape.mark()
            b, fb = bind_operand(tape, ep, y)
        if tape.epoch != ep:  # binding rewound the tape: resolve again
            continue
        if a == SCALAR and b < 0:
            r = E_NOFLOAT
        else:
            r = current(record_elementwise)(h, code, a, b, fa, fb, compare)
        if r >= 0:
            if _record_tensors is record_tensors:
                _use_entry_points(h)
            if r >= DEFERRED:
                r = _numpy_forward(tape, op, r - DEFERRED)
            return result_handle(tape, r, ep)
        if r == E_NOFLOAT:  # integers and bools only: not differentiable, NumPy computes
            ufunc = _library_function(op)
            res = ufunc(values_of(x)) if unary else ufunc(values_of(x), values_of(y))
            return Tensor._external(normalize_array(res, copy=False))
        if r == E_BROADCAST:
            if mark is not None:  # leave the tape as it was: drop what was bound for this op
                tape.restore(mark, (x, y))
            raise broadcast_error(op.name, _shape_of(x), _shape_of(y))
        tape.fix(r)


# The eager fast paths call the recorder's compiled entry points, skipping numba's
# dispatcher (about 150 ns of the ~1 us an op costs; see ``_jit.entry_point``). They are
# the dispatchers themselves until the first op has compiled or loaded the recorder, or
# its interpreted twins while the kernel cache lacks it (``tapegrad.tiers``).
_record_tensors: Any = Unbound(record_tensors, lambda: _bind_recorders())
_record_scalar: Any = Unbound(record_elementwise, lambda: _bind_recorders())
_record_general: Any = Unbound(record_general, lambda: _bind_recorders())


def _bind_recorders() -> None:
    global _record_tensors, _record_scalar, _record_general
    _record_tensors = current(record_tensors)
    _record_scalar = current(record_elementwise)
    _record_general = current(record_general)
    _FRONT_ENDS.clear()


def _use_entry_points(h: np.ndarray) -> None:
    global _record_tensors, _record_scalar
    _record_scalar = entry_point(record_elementwise, h, 0, 0, 0, 0.0, 0.0, False)
    _record_tensors = entry_point(record_tensors, h, 0, 0, 0)


def _use_general_entry_point(h: np.ndarray) -> None:
    global _record_general
    _record_general = entry_point(record_general, h, 0, 0, False)


_POOL: Any = None


def _forget_pool() -> None:
    """A forked child has none of the pool's threads: it starts its own."""
    global _POOL
    _POOL = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _library_function(op: Any) -> Any:
    """The NumPy ufunc, or for a ``tapegrad.special`` row SciPy's, that computes row
    ``op`` on plain numbers (``tapegrad.special.gammaln(1.7)``)."""
    if op.namespace == "special":
        import scipy.special  # only here: SciPy's import costs ~0.1 s

        return getattr(scipy.special, op.name)
    return getattr(np, op.name)


def _numpy_forward(tape: Tape, op: Any, out: int) -> int:
    """Compute a large elementwise result with NumPy's ufunc, straight into its slot
    (the node is already recorded; its operands are in the link list before it). With
    same-shape operands and several cores, halves of it run in threads (ufunc loops
    release the GIL); which rows come here then is ``record._numpy_runs``'s choice
    (one thread pool at a time)."""
    global _POOL
    base = tape.h[H_NLINK] - 1  # out is the node's last link
    nin = 1 if op.is_unary else 2
    ins = [tape.view(s) for s in tape.links(base - nin, nin)]
    dst = tape.view(out)
    ufunc = getattr(np, op.name)
    workers = worker_count() if dst.size >= THREAD_MIN else 1
    with np.errstate(all="ignore"):  # IEEE results, no warnings: like the kernels
        if workers < 2 or any(a.size not in (1, dst.size) for a in ins):
            ufunc(*ins, out=dst)
            return out
        if _POOL is None:
            from concurrent.futures import ThreadPoolExecutor

            _POOL = ThreadPoolExecutor(workers, thread_name_prefix="tapegrad")
        flat_out = dst.reshape(-1)
        flat_in = [a.reshape(-1) for a in ins]
        cuts = np.linspace(0, dst.size, workers + 1).astype(int)

        def part(lo: int, hi: int) -> None:
            with np.errstate(all="ignore"):
                ufunc(*[a if a.size == 1 else a[lo:hi] for a in flat_in], out=flat_out[lo:hi])

        for f in [_POOL.submit(part, lo, hi) for lo, hi in itertools.pairwise(cuts)]:
            f.result()
    return out


def elementwise_function(op: Any) -> Callable[..., Tensor]:
    """The public function of an elementwise op: a fast path for tensor operands that
    live in the current tape, :func:`elementwise` for everything else."""
    opc = 2 * op.code + int(op.is_compare)

    if op.is_unary:

        def unary(x: Any, /, out: Any = None) -> Tensor:
            if type(x) is Tensor and out is None:
                tape = current_tape()
                ep = tape.epoch
                if x._tape is tape and x._epoch == ep:
                    r = _record_tensors(tape.header, opc, x._slot, ABSENT)
                    if r >= 0:
                        if r >= DEFERRED:
                            r = _numpy_forward(tape, op, r - DEFERRED)
                        return result_handle(tape, r, ep)
            return elementwise(op, x, out=out)

        return unary

    code = op.code
    compare = op.is_compare

    def binary(x: Any, y: Any, /, out: Any = None) -> Tensor:
        tx = type(x)
        ty = type(y)
        if out is None and (tx is Tensor or ty is Tensor):
            tape = current_tape()
            ep = tape.epoch
            r = -1
            if tx is Tensor and ty is Tensor:
                if x._tape is tape and x._epoch == ep and y._tape is tape and y._epoch == ep:
                    r = _record_tensors(tape.header, opc, x._slot, y._slot)
            # a Python float or int goes by value (weak, as NumPy treats it): `y * 1.01`,
            # `y ** 2`; so does a NumPy float64 scalar with a float64 tensor (strong under
            # NEP 50, but then it changes nothing): `y - observed[0, k]`
            elif ty is float or ty is int:
                if x._tape is tape and x._epoch == ep:
                    r = _record_scalar(tape.header, code, x._slot, SCALAR, 0.0, float(y), compare)
            elif tx is float or tx is int:
                if y._tape is tape and y._epoch == ep:
                    r = _record_scalar(tape.header, code, SCALAR, y._slot, float(x), 0.0, compare)
            elif ty is np.float64:
                if x._tape is tape and x._epoch == ep and tape.slot_field(S_DTYPE, x._slot) == F64:
                    r = _record_scalar(tape.header, code, x._slot, SCALAR, 0.0, float(y), compare)
            # a float NumPy array: a constant (`onehot * p`, `x - mu`), imported as
            # elementwise() would, without the Tensor it makes for a retry
            elif ty is np.ndarray:
                if x._tape is tape and x._epoch == ep and y.dtype in FLOAT_DTYPES:
                    r = _with_constant(tape, ep, opc, x._slot, y, False)
            elif tx is np.ndarray:
                if y._tape is tape and y._epoch == ep and x.dtype in FLOAT_DTYPES:
                    r = _with_constant(tape, ep, opc, y._slot, x, True)
            if r >= 0:  # anything else (binding, errors, growing the tape): the full path
                if r >= DEFERRED:
                    r = _numpy_forward(tape, op, r - DEFERRED)
                return result_handle(tape, r, ep)
        return elementwise(op, x, y, out=out)

    return binary


def _with_constant(tape: Tape, ep: int, opc: int, slot: int, arr: np.ndarray, first: bool) -> int:
    """Record binary op ``opc`` on tensor ``slot`` and a copy of float array ``arr`` (the
    first operand if ``first``); a status below 0 leaves the tape as it was, for
    :func:`elementwise` to take over (growing the tape, raising a shape error)."""
    mark = tape.mark()
    c = tape.import_array(arr.copy(), SLOT_CONST)
    if tape.epoch != ep:  # importing rewound the tape: start over
        return -1
    a, b = (c, slot) if first else (slot, c)
    r = _record_tensors(tape.header, opc, a, b)
    if r < 0:
        tape.restore(mark)
    return r


def general(
    op: Any,
    sig: int,
    inputs: list[Any],
    outs: list[tuple[int, tuple[int, ...]]],
    ip: list[int] = (),
    fp: list[float] = (),
    alias: bool = False,
    visible: int = 1,
) -> Any:
    """Record an array op: inputs (Tensors, arrays or numbers), outputs
    ``(dtype code, shape)``, int and float parameters. Returns the first output, or a
    tuple of the first ``visible`` outputs (further outputs are internal: saved for the
    backward only)."""
    inputs = [v if isinstance(v, Tensor) else as_tensor(v) for v in inputs]
    tape = current_tape()
    h = tape.header
    plain = False
    while True:
        ep = tape.epoch
        # the request (layout.R_BODY), written with plain stores: the compiled recorder
        # checks capacity and copies it into the tables
        rq = tape.rq
        k = R_BODY
        try:
            for v in inputs:
                rq[k] = (
                    v._slot if v._tape is tape and v._epoch == ep else bind_operand(tape, ep, v)[0]
                )
                k += 1
            if tape.epoch != ep:  # binding an operand rewound the tape: again
                continue
            for v in ip:
                rq[k] = v
                k += 1
            for dt, shape in outs:
                rq[k] = dt
                rq[k + 1] = len(shape)
                k += 2
                for d in shape:
                    rq[k] = d
                    k += 1
            rqf = tape.rqf
            for v in fp:
                rqf[k] = v
                k += 1
        except IndexError:  # more than the buffer holds (stack of many tensors, ...)
            tape.grow_request(2 * _request_len(inputs, outs, ip, fp))
            continue
        except TypeError:  # a store takes ints and floats only: convert once (np.bool_)
            if plain:
                raise
            plain = True
            ip = [int(v) for v in ip]
            fp = [float(v) for v in fp]
            outs = [(int(dt), tuple(int(d) for d in shape)) for dt, shape in outs]
            continue
        rq[R_NIN] = len(inputs)
        rq[R_NOUT] = len(outs)
        rq[R_NIP] = len(ip)
        rq[R_NFP] = len(fp)
        rq[R_ALIAS] = alias
        if _record_general is record_general:
            _use_general_entry_point(h)
        r = _record_general(h, op.code, sig, op.differentiable)
        if r >= 0:
            if visible == 1:
                return result_handle(tape, r, ep)
            return tuple(result_handle(tape, r + j, ep) for j in range(visible))
        if r == E_LINALG:
            shapes = ", ".join(str(t.shape) for t in inputs)
            raise np.linalg.LinAlgError(f"{op.name}: {op.failure} (input shapes {shapes})")
        tape.fix(r)
        if r == E_SPACE:  # the headroom fix() keeps may be less than this op asks for
            nshape = sum(len(s) for _, s in outs)
            tape.reserve_request(len(inputs) + len(outs), len(ip), len(fp), nshape)


# compiled front end (record.record_reduce...) -> its entry point, once a first call
# has compiled or loaded it
_FRONT_ENDS: dict[Any, Any] = {}
on_switch(_bind_recorders)


def front_end(fn: Any, op: Any, operands: tuple, params: tuple) -> Tensor | None:
    """Record ``op`` through compiled front end ``fn`` (``record.record_reduce``,
    ``record_matmul``, ``record_along``): ``fn(header, op code, differentiable, *operand
    slots, *params)`` reads the operands' shapes, writes the request and records. The
    operands are tensors in the current tape or float arrays (constants, copied as
    :func:`general` would). None, with the tape as it was, where ``fn`` declines or an
    operand is anything else: the Python front end then records the op (binding,
    growing the tape, NumPy's errors). ``params`` are Python ints and bools only (the
    entry point does not check types)."""
    tape = current_tape()
    ep = tape.epoch
    mark = None
    slots = []
    r = E_FRONT_END
    for v in operands:
        if type(v) is Tensor and v._tape is tape and v._epoch == ep:
            slots.append(v._slot)
        elif type(v) is np.ndarray and v.dtype in FLOAT_DTYPES:
            if mark is None:
                mark = tape.mark()
            slots.append(tape.import_array(v.copy(), SLOT_CONST))
            if tape.epoch != ep:  # importing rewound the tape: the full path
                return None
        else:
            break
    else:
        h = tape.header
        args = (h, op.code, op.differentiable, *slots, *params)
        rec = _FRONT_ENDS.get(fn) or current(fn, args)
        r = rec(*args)
    if r < 0:
        if mark is not None:  # a constant imported for this op: not kept twice
            tape.restore(mark)
        return None
    if rec is fn:
        _FRONT_ENDS[fn] = entry_point(fn, tape.header, op.code, op.differentiable, *slots, *params)
    return result_handle(tape, r, ep)


def _request_len(inputs: list, outs: list, ip: Any, fp: Any) -> int:
    """Cells the request of an array op takes in the request buffer."""
    return R_BODY + len(inputs) + len(ip) + sum(2 + len(s) for _, s in outs) + len(fp)


# --- grad mode ----------------------------------------------------------------------------


class no_grad:
    """Turn gradient recording off: a context manager and a decorator.

    Ops inside record no gradient information: their results do not require grad.
    This is where parameter updates go (``w -= lr * w.grad``). The setting is per
    thread; transforms (``tg.grad``...) record with grad mode on even inside it.

    See Also
    --------
    enable_grad : Turn recording back on inside ``no_grad``.
    is_grad_enabled : The current setting.

    Examples
    --------
    >>> import tapegrad as tg
    >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
    >>> with tg.no_grad():
    ...     y = x * 2
    >>> y.requires_grad
    False
    >>> @tg.no_grad()
    ... def double(t):
    ...     return t * 2
    >>> double(x)
    tensor([2., 4.])
    """

    _enabled = False

    def __init__(self) -> None:
        self._prev: list[bool] = []

    def __enter__(self) -> None:
        tape = current_tape()
        self._prev.append(tape.grad_enabled)
        tape.grad_enabled = self._enabled

    def __exit__(self, *exc: object) -> None:
        current_tape().grad_enabled = self._prev.pop()

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with type(self)():
                return fn(*args, **kwargs)

        return wrapper


class enable_grad(no_grad):
    """Turn gradient recording back on inside ``no_grad``: a context manager and a decorator.

    See Also
    --------
    no_grad : Turn recording off.

    Examples
    --------
    >>> import tapegrad as tg
    >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
    >>> with tg.no_grad():
    ...     with tg.enable_grad():
    ...         y = x * 2
    >>> y.requires_grad
    True
    """

    _enabled = True


def is_grad_enabled() -> bool:
    """Tell whether ops on this thread record gradient information.

    Returns
    -------
    bool
        False inside :class:`no_grad` (and outside a nested :class:`enable_grad`).

    Examples
    --------
    >>> import tapegrad as tg
    >>> tg.is_grad_enabled()
    True
    >>> with tg.no_grad():
    ...     tg.is_grad_enabled()
    False
    """
    return current_tape().grad_enabled
