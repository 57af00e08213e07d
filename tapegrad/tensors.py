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

import itertools
import math
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from . import devices
from .boundary import array_error, library_caller, scalar_error, suggestion
from .call_sites import implicit_site
from .grad_mode import is_grad_enabled
from .layout import (
    S_SIZE,
    SLOT_CONST,
    SLOT_FREED,
    SLOT_LEAF,
    SLOT_RG,
)
from .record import SCALAR, alias_slot
from .references import WeakIdMap
from .shapes import check_float
from .tape import (
    CAPTURE,
    EAGER,
    TRANSFORM,
    Tape,
    current_tape,
    normalize_array,
    tape_stack,
)
from .tiers import call

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
                site = None if name is not None or explicit else implicit_site(2)
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


new_object = object.__new__


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
    t = new_object(Tensor)
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


def rebuild(values: np.ndarray, requires_grad: bool) -> Tensor:
    """A leaf holding ``values`` (what unpickling a tensor calls): what
    ``tensor(values, requires_grad=requires_grad)`` makes of an array."""
    arr = normalize_array(values, copy=True)
    if requires_grad:
        check_float(arr.dtype, "tensor")
    return Tensor._external(arr, FLAG_RG if requires_grad else 0)


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


SCALARS = (float, int, bool)
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


def shape_of(v: Any) -> tuple[int, ...]:
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
