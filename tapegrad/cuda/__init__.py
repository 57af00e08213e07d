"""The CUDA target: tensors on the GPU, ``numba.cuda.jit`` kernels, a host-driven scheduler.

``tg.tensor(x, device="cuda")`` (or ``t.to("cuda")``) makes a :class:`CudaTensor`. Ops
on it launch CUDA kernels and record a graph; ``backward()`` runs the same steps as the
compiled CPU scheduler -- prune to the nodes between requires-grad leaves and the root,
dispatch in reverse recording order, validate each gradient buffer against its tensor's
shape and dtype, accumulate in place -- launching the kernels from the host.
``.grad`` of a CUDA leaf is a CUDA tensor (``.grad.numpy()`` copies it to the host).

Kernels come from the op table, one row, two targets (``Op.cuda``):

* elementwise rows (``"formulas"``): the row's scalar formulas (``sin_fwd``,
  ``mul_bwd_y``...) recompiled as CUDA device functions and lifted by broadcasting
  kernels (:mod:`tapegrad.cuda.kernels`): one thread per output element, the backward
  accumulating into broadcast operands with atomics;
* array rows of the core set (sum, mean, matmul, reshape, transpose, indexing, astype)
  name their function in this module; indexing's backward is a scatter-add with
  atomics, so repeated indices add up.

``tapegrad.numpy`` functions and NumPy's own (``np.sin(t)``, ``np.sum(t)``) route CUDA
tensors here; an op without a CUDA kernel, or CPU and CUDA operands mixed, raise a
``TypeError`` naming both devices.

``import tapegrad`` never imports numba's CUDA target: this module loads it on first
use of a CUDA tensor. Without a GPU, ``NUMBA_ENABLE_CUDASIM=1`` runs the kernels in
numba's simulator (slow: keep arrays to a few hundred elements); with neither, making a
CUDA tensor raises.

Memory: values are carved out of per-dtype device arenas (chunks of at least
``CHUNK`` elements, bump-allocated; a chunk is released when no tensor views it), and
a backward pass allocates one zeroed gradient arena per dtype for all the buffers it
needs. The graph is a list of Python node records: on a GPU the per-node cost is the
kernel launch (a few microseconds), not Python.
"""

from __future__ import annotations

import builtins
import itertools
import math
import operator
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import tensors as _cpu
from ..layout import result_dtype
from ..ops import BY_NAME, ROWS
from ..record import aligned, place
from ..shapes import (
    broadcast,
    broadcast_strides,
    check_float,
    gradient_buffer_error,
    matmul_layout,
    normalize_axes,
    normalize_shape,
    reduced_shape,
)
from ..shapes import seed as shared_seed
from ..tape import normalize_array
from ..tensors import FREED_MESSAGE, NO_GRAD_MESSAGE, is_grad_enabled

__all__ = [
    "CudaTensor",
    "astype",
    "available",
    "backward",
    "elementwise",
    "getitem",
    "matmul",
    "mean",
    "reshape",
    "sum",
    "to_device",
    "transpose",
]

THREADS = 128  # threads per block
CHUNK = 1 << 20  # smallest value-arena chunk, in elements
ALIGN = 32  # arena offsets are multiples of this many elements (256 bytes in float64)
MAX_GRID_Z = 65535  # CUDA's limit on a grid's z dimension (matmul batches per launch)

_lock = threading.RLock()
_cuda: Any = None
_kernels: dict[tuple, Any] = {}
_small: dict[tuple, Any] = {}  # small device arrays by content: metadata, scalars
_configs: dict[tuple, Any] = {}  # configured launches of small grids (see _configure)
SMALL_GRID = 128  # numba-cuda warns on launches of fewer blocks than this
_seq = itertools.count()


def _module() -> Any:
    """numba.cuda, imported on first use, or a clear error."""
    global _cuda
    if _cuda is None:
        try:
            from numba import cuda
        except ImportError as e:  # pragma: no cover - numba always ships a cuda stub
            raise RuntimeError(
                "tapegrad: device='cuda' needs numba-cuda (pip install 'tapegrad[cuda]')"
            ) from e
        if not cuda.is_available():
            raise RuntimeError(
                "tapegrad: device='cuda' needs a CUDA GPU and its driver, and none was "
                "found (pip install 'tapegrad[cuda]' provides numba-cuda). To run CUDA "
                "code without a GPU, set NUMBA_ENABLE_CUDASIM=1 before numba is imported."
            )
        _cuda = cuda
    return _cuda


def available() -> bool:
    """Tell whether CUDA tensors can be made here (a GPU, or numba's simulator).

    Loads numba's CUDA target on first use.

    Returns
    -------
    bool
        True when numba-cuda finds a GPU and its driver, or runs its simulator
        (``NUMBA_ENABLE_CUDASIM=1``).

    Examples
    --------
    >>> import tapegrad.cuda as tgc
    >>> isinstance(tgc.available(), bool)  # True on a machine with a GPU
    True
    """
    try:
        _module()
    except RuntimeError:
        return False
    return True


def _configure(kernel: Any, grid: Any, block: Any) -> Any:
    """``kernel[grid, block]``, without numba-cuda's low-occupancy warning.

    numba-cuda warns (``NumbaPerformanceWarning``, "Grid size N will likely result in
    GPU under-utilization") on every launch of fewer than 128 blocks. A small tensor is
    the user's choice, not a mistake in how tapegrad launches, so the warning is
    silenced for tapegrad's own launches and nowhere else. Small-grid configurations
    are made once, under the lock and with the warning filtered, then reused; large
    grids never warn and are configured per launch. (A configuration holds the default
    stream, the only one tapegrad launches on.)
    """
    if math.prod(grid if isinstance(grid, tuple) else (grid,)) >= SMALL_GRID:
        return kernel[grid, block]
    key = (kernel, grid, block)
    c = _configs.get(key)
    if c is None:
        with _lock, warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Grid size .* under-utilization")
            c = kernel[grid, block]
        if c is not kernel:  # numba's simulator configures the kernel itself: no cache
            _configs[key] = c
    return c


def _launch(kernel: Any, n: int, *args: Any) -> None:
    if n > 0:
        _configure(kernel, (n + THREADS - 1) // THREADS, THREADS)(*args)


def _kernel(key: tuple, build: Callable[[Any], Any]) -> Any:
    """The kernels ``build(tapegrad.cuda.kernels)`` returns, built once per key."""
    k = _kernels.get(key)
    if k is None:
        with _lock:
            k = _kernels.get(key)
            if k is None:
                _module()
                from . import kernels

                k = _kernels[key] = build(kernels)
    return k


def _moves() -> dict[str, Any]:
    return _kernel(("moves",), lambda k: k.move_kernels())


def _small_array(values: tuple, dtype: Any = np.int64) -> Any:
    """A small constant device array (shape metadata, scalar operands), uploaded once
    and reused: a host-to-device copy per op would cost more than the op."""
    key = (np.dtype(dtype).str, values)
    d = _small.get(key)
    if d is None:
        if len(_small) > 4096:
            _small.clear()
        d = _small[key] = _module().to_device(np.array(values, dtype))
    return d


# --- device arenas ------------------------------------------------------------------------


class _Arena:
    """Bump allocation of device arrays out of large chunks, one chunk list per dtype.

    A tensor's data is a view of a chunk; the chunk's memory goes back to numba's
    allocator when the arena has moved on and the last view of it is gone.
    """

    def __init__(self) -> None:
        self.chunks: dict[str, tuple[Any, int]] = {}  # dtype -> (chunk, next free offset)

    def take(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        n = int(np.prod(shape, dtype=np.int64))
        need = max(-(-n // ALIGN) * ALIGN, ALIGN)
        with _lock:
            chunk, off = self.chunks.get(dtype.str, (None, 0))
            if chunk is None or off + need > chunk.shape[0]:
                chunk, off = _module().device_array(builtins.max(CHUNK, need), dtype), 0
            self.chunks[dtype.str] = (chunk, off + need)
        return chunk[off : off + n].reshape(shape)


_values_arena = _Arena()


def _empty(shape: tuple[int, ...], dtype: np.dtype) -> Any:
    return _values_arena.take(tuple(shape), np.dtype(dtype))


def _fill(data: Any, value: float) -> None:
    _launch(_moves()["fill"], _size(data), _flat(data), value)


def _size(a: Any) -> int:
    return int(np.prod(a.shape, dtype=np.int64))


def _flat(a: Any) -> Any:
    """A 1-d view (0-d arrays become one element): the kernels index flat."""
    return a.reshape(_size(a)) if a.shape else a.reshape(1)


# --- tensors ---------------------------------------------------------------------------


class _Node:
    """What backward needs of one op: its backward launcher, inputs and output."""

    __slots__ = ("backward", "freed", "inputs", "name", "out", "seq")

    def __init__(self, name: str, inputs: tuple, out: CudaTensor, backward: Any) -> None:
        self.name = name
        self.inputs = inputs
        # the output's id, not the output: a reference would make a cycle that holds
        # device memory until the garbage collector runs. The id stays valid: the node
        # is only reachable through its output tensor.
        self.out = id(out)
        self.backward = backward  # backward(g, [input grad buffer or None, ...])
        self.freed = False
        self.seq = next(_seq)


_NO_COMPARISON = (
    "{op} of CUDA tensors is not available (comparisons have no CUDA target): compare "
    "on the CPU, t.to('cpu') {op} ..."
)


class CudaTensor:
    """A tensor whose values live on the GPU.

    Made by ``tg.tensor(x, device="cuda")``, ``t.to("cuda")`` or :func:`to_device`.
    The same attributes and methods as :class:`tapegrad.Tensor` for the core ops:
    arithmetic operators with broadcasting, ``@``, indexing, ``sum mean reshape
    transpose T astype``, ``backward``, ``grad`` (a CUDA tensor), ``numpy()`` (a host
    copy), ``to(device)``. Ops on it launch CUDA kernels and record a graph;
    ``backward()`` runs the CPU scheduler's steps, launching each node's kernels from
    the host. It exposes ``__cuda_array_interface__``, so CuPy, PyTorch and numba
    kernels can read it without a copy.

    Parameters
    ----------
    data : numba.cuda.cudadrv.devicearray.DeviceNDArray
        The values: a C-contiguous numba device array (held, not copied).
    requires_grad : bool, optional
        Whether backward passes compute its gradient.
    node : optional
        The recorded op that made it (internal; None for a leaf).

    Raises
    ------
    TypeError
        From ``==``, ``!=`` and the other comparisons (they have no CUDA target),
        from an implicit conversion to a NumPy array (use ``.numpy()``), and from
        NumPy functions, ufuncs and table ops without a CUDA kernel, or operands on
        both devices.
    ValueError
        From ``item()``: more than one element.
    NotImplementedError
        From ``backward(create_graph=True)``: higher order is CPU only.

    See Also
    --------
    tapegrad.tensor : ``device="cuda"`` makes one.

    Examples
    --------
    >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
    >>> import tapegrad as tg
    >>> x = tg.tensor([1.0, 2.0, 3.0], device="cuda", requires_grad=True)  # doctest: +SKIP
    >>> y = (x * x).sum()  # doctest: +SKIP
    >>> y  # doctest: +SKIP
    tensor(14., device='cuda', requires_grad=True)
    >>> y.backward()  # doctest: +SKIP
    >>> x.grad, x.grad.numpy()  # doctest: +SKIP
    (tensor([2., 4., 6.], device='cuda'), array([2., 4., 6.]))
    """

    device = "cuda"

    def __init__(self, data: Any, requires_grad: bool = False, node: _Node | None = None):
        self.data = data  # a numba device array, C-contiguous
        self._rg = requires_grad
        self._node = node
        self.grad: CudaTensor | None = None

    # --- metadata and copies -------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """The length of each axis, a tuple of ints (``()`` for a 0-d tensor)."""
        return tuple(self.data.shape)

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype of the values (float64, float32, int64 or bool)."""
        return np.dtype(self.data.dtype)

    @property
    def ndim(self) -> int:
        """The number of axes, ``len(t.shape)``."""
        return len(self.data.shape)

    @property
    def size(self) -> int:
        """The number of elements, the product of the shape (1 for a 0-d tensor)."""
        return _size(self.data)

    @property
    def requires_grad(self) -> bool:
        """Whether backward passes compute a gradient for this tensor: set on a leaf;
        true for a result of ops on such a tensor while grad mode is on."""
        return self._rg

    @property
    def is_leaf(self) -> bool:
        """True for a tensor no recorded op made: one made by the user, or a result
        that does not require grad (as in PyTorch)."""
        return self._node is None

    @property
    def __cuda_array_interface__(self) -> dict:
        return self.data.__cuda_array_interface__

    def requires_grad_(self, requires_grad: bool = True) -> CudaTensor:
        """Set ``requires_grad`` in place on a leaf.

        Parameters
        ----------
        requires_grad : bool, optional
            Whether backward passes compute this tensor's gradient (default True).

        Returns
        -------
        CudaTensor
            ``self``.

        Raises
        ------
        RuntimeError
            The tensor is not a leaf (a recorded op made it); ``.detach()`` gives a
            leaf sharing its values.
        TypeError
            ``requires_grad=True`` on a tensor that is not of a float dtype.

        See Also
        --------
        CudaTensor.detach : The values, outside the graph.

        Examples
        --------
        >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
        >>> import tapegrad as tg
        >>> w = tg.tensor([1.0, 2.0], device="cuda").requires_grad_()  # doctest: +SKIP
        >>> w  # doctest: +SKIP
        tensor([1., 2.], device='cuda', requires_grad=True)
        """
        if not self.is_leaf:
            raise RuntimeError("requires_grad_: only leaf tensors can change requires_grad")
        if requires_grad:
            check_float(self.dtype, "requires_grad_")
        self._rg = requires_grad
        return self

    def numpy(self) -> np.ndarray:
        """Copy the values to the host, as a NumPy array (detached from the graph).

        Returns
        -------
        numpy.ndarray
            A new array of the tensor's shape and dtype.

        See Also
        --------
        CudaTensor.to : ``'cpu'`` gives a CPU tensor instead.

        Examples
        --------
        >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
        >>> import tapegrad as tg
        >>> x = tg.tensor([1.0, 2.0], device="cuda", requires_grad=True)  # doctest: +SKIP
        >>> (x * 2.0).numpy()  # doctest: +SKIP
        array([2., 4.])
        """
        return self.data.copy_to_host()

    def item(self) -> float:
        """Return the value of a one-element tensor as a Python number (copied to the host).

        Returns
        -------
        float, int or bool
            The value, as ``numpy.ndarray.item`` gives it.

        Raises
        ------
        ValueError
            The tensor has more than one element (or none).

        See Also
        --------
        CudaTensor.numpy : All the values, as an array.

        Examples
        --------
        >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
        >>> import tapegrad as tg
        >>> x = tg.tensor([1.0, 2.0], device="cuda")  # doctest: +SKIP
        >>> x.sum().item()  # doctest: +SKIP
        3.0
        """
        if self.size != 1:
            raise ValueError(f"item(): tensor of shape {self.shape} has {self.size} elements")
        return self.numpy().reshape(()).item()

    def to(self, device: str) -> Any:
        """Return this tensor on ``device``: itself for ``'cuda'``, a host copy for ``'cpu'``.

        The copy is a new leaf that requires grad if this one does: gradients do not
        flow between devices, so moving a non-leaf tensor that requires grad raises
        (``.detach()`` it first) rather than silently cutting the graph.

        Parameters
        ----------
        device : {'cpu', 'cuda'}
            Where the values should live.

        Returns
        -------
        CudaTensor or tapegrad.Tensor
            ``self`` for ``'cuda'``; a :class:`tapegrad.Tensor` for ``'cpu'``.

        Raises
        ------
        ValueError
            An unknown ``device``.
        RuntimeError
            ``'cpu'`` for a non-leaf tensor that requires grad.

        See Also
        --------
        tapegrad.Tensor.to : The way back.

        Examples
        --------
        >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
        >>> import tapegrad as tg
        >>> x = tg.tensor([1.0, 2.0], device="cuda", requires_grad=True)  # doctest: +SKIP
        >>> x.to("cpu")  # doctest: +SKIP
        tensor([1., 2.], requires_grad=True)
        >>> (x * 2.0).detach().to("cpu")  # doctest: +SKIP
        tensor([2., 4.])
        """
        if device == "cuda":
            return self
        if device != "cpu":
            raise ValueError(f"to: unknown device {device!r} (use 'cpu' or 'cuda')")
        if self._rg and not self.is_leaf:
            raise RuntimeError(_cpu.CROSS_DEVICE_MESSAGE)
        return _cpu.tensor(self.numpy(), requires_grad=self._rg)

    def detach(self) -> CudaTensor:
        """Return a leaf with the same values (shared, not copied) that does not require grad.

        Returns
        -------
        CudaTensor
            A new tensor viewing this one's device memory, outside the graph.

        See Also
        --------
        CudaTensor.numpy : A host copy of the values.

        Examples
        --------
        >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
        >>> import tapegrad as tg
        >>> x = tg.tensor([1.0, 2.0], device="cuda", requires_grad=True)  # doctest: +SKIP
        >>> d = (x * 2.0).detach()  # doctest: +SKIP
        >>> d, d.requires_grad, d.is_leaf  # doctest: +SKIP
        (tensor([2., 4.], device='cuda'), False, True)
        """
        return CudaTensor(self.data)

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TypeError(
            "a CUDA tensor does not convert to a NumPy array implicitly (that would copy "
            "it to the host behind your back): use .numpy() or .to('cpu')"
        )

    def __repr__(self) -> str:
        body = np.array2string(self.numpy(), separator=", ", prefix="tensor(")
        grad = ", requires_grad=True" if self._rg else ""
        return f"tensor({body}, device='cuda'{grad})"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __bool__(self) -> bool:
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    # Comparisons have no CUDA target (their rows are CPU only). Python's default ==
    # and != compare identity and would answer False / True for every element without
    # a word (``x == 0``); they raise, as <, <=, >, >= do. Hashing stays by identity.
    def __eq__(self, other: object) -> Any:
        raise TypeError(_NO_COMPARISON.format(op="=="))

    def __ne__(self, other: object) -> Any:
        raise TypeError(_NO_COMPARISON.format(op="!="))

    __hash__ = object.__hash__

    # --- NumPy's protocols: np.sin(t), np.sum(t, axis=0), np.matmul(a, t) ------------------
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        op = BY_NAME.get(ufunc.__name__)
        if method == "__call__" and not kwargs and op is not None and op.cuda == "formulas":
            return elementwise(op, *inputs)
        if method == "__call__" and ufunc.__name__ == "matmul" and not kwargs:
            return matmul(*inputs)
        raise TypeError(f"numpy.{ufunc.__name__} ({method}) is not supported on CUDA tensors")

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        f = _FUNCTIONS.get(func.__name__) if func.__module__ == "numpy" else None
        if f is None:
            raise TypeError(f"numpy.{func.__name__} is not supported on CUDA tensors")
        return f(*args, **kwargs)

    # --- autograd ---------------------------------------------------------------------------
    def backward(
        self, gradient: Any = None, retain_graph: bool = False, create_graph: bool = False
    ) -> None:
        """Accumulate the gradient of this tensor into the leaves' ``.grad``.

        Runs :func:`backward` from this tensor: the graph's backward kernels are
        launched from the host, and each leaf that requires grad gets (or adds to) a
        CUDA tensor ``.grad``.

        Parameters
        ----------
        gradient : array_like or CudaTensor, optional
            The cotangent, of this tensor's shape; required unless it has one element,
            where it defaults to 1.
        retain_graph : bool, optional
            Keep the graph for another backward pass (by default it is freed).
        create_graph : bool, optional
            Must be False: higher-order derivatives are CPU only.

        Raises
        ------
        RuntimeError
            This tensor does not require grad; ``gradient`` is missing for a tensor of
            more than one element or has the wrong shape; or the graph was freed by an
            earlier backward pass.
        TypeError
            ``gradient`` is not of a real dtype.
        NotImplementedError
            ``create_graph=True``.

        See Also
        --------
        tapegrad.cuda.backward : The function it calls.

        Examples
        --------
        >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
        >>> import tapegrad as tg
        >>> x = tg.tensor([1.0, 2.0, 3.0], device="cuda", requires_grad=True)  # doctest: +SKIP
        >>> (x * x).sum().backward()  # doctest: +SKIP
        >>> x.grad  # doctest: +SKIP
        tensor([2., 4., 6.], device='cuda')
        """
        if create_graph:
            raise NotImplementedError(
                "backward(create_graph=True) on the CUDA target: higher-order derivatives "
                "are CPU only (the CUDA graph has no recorded derivatives)"
            )
        backward(self, gradient, retain_graph)

    # --- ops --------------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> CudaTensor:
        return getitem(self, key)

    def __matmul__(self, other: Any) -> CudaTensor:
        return matmul(self, other)

    def __rmatmul__(self, other: Any) -> CudaTensor:
        return matmul(other, self)

    def sum(self, axis: Any = None, keepdims: bool = False) -> CudaTensor:
        """Sum of the elements over the given axes, on the GPU.

        ``t.sum(...)`` is :func:`tapegrad.cuda.sum` with the tensor first.

        Parameters
        ----------
        axis : None, int or tuple of int, optional
            The axes to reduce (all by default); negative values count from the end.
        keepdims : bool, optional
            Keep the reduced axes, of length 1.

        Returns
        -------
        CudaTensor
            The sums (in float64 for an integer or bool tensor).

        Raises
        ------
        numpy.exceptions.AxisError
            An axis is out of bounds.
        TypeError
            ``axis`` is a list, a bool, or not an integer.
        ValueError
            An axis is given twice.

        See Also
        --------
        tapegrad.cuda.sum : The function this method calls.

        Examples
        --------
        >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
        >>> import tapegrad as tg
        >>> x = tg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device="cuda")  # doctest: +SKIP
        >>> x.sum()  # doctest: +SKIP
        tensor(21., device='cuda')
        >>> x.sum(axis=0)  # doctest: +SKIP
        tensor([5., 7., 9.], device='cuda')
        """
        return sum(self, axis, keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> CudaTensor:
        """Average of the elements over the given axes, on the GPU.

        ``t.mean(...)`` is :func:`tapegrad.cuda.mean` with the tensor first.

        Parameters
        ----------
        axis : None, int or tuple of int, optional
            The axes to reduce (all by default); negative values count from the end.
        keepdims : bool, optional
            Keep the reduced axes, of length 1.

        Returns
        -------
        CudaTensor
            The means (in float64 for an integer or bool tensor; NaN over no elements).

        Raises
        ------
        numpy.exceptions.AxisError
            An axis is out of bounds.
        TypeError
            ``axis`` is a list, a bool, or not an integer.
        ValueError
            An axis is given twice.

        See Also
        --------
        tapegrad.cuda.mean : The function this method calls.

        Examples
        --------
        >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
        >>> import tapegrad as tg
        >>> x = tg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device="cuda")  # doctest: +SKIP
        >>> x.mean(axis=1, keepdims=True)  # doctest: +SKIP
        tensor([[2.],
                [5.]], device='cuda')
        """
        return mean(self, axis, keepdims)

    def reshape(self, *shape: Any) -> CudaTensor:
        """The tensor with a new shape (C order; no copy is made).

        ``t.reshape(3, 2)`` and ``t.reshape((3, 2))`` are
        ``tapegrad.cuda.reshape(t, (3, 2))``.

        Parameters
        ----------
        *shape : int or tuple of int
            The new shape, as a tuple or as separate ints; one dimension may be -1
            (inferred).

        Returns
        -------
        CudaTensor
            A tensor sharing this one's device memory.

        Raises
        ------
        ValueError
            The new shape has another number of elements, or more than one -1.
        TypeError
            The shape is not made of integers.

        See Also
        --------
        tapegrad.cuda.reshape : The function this method calls.

        Examples
        --------
        >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
        >>> import tapegrad as tg
        >>> x = tg.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], device="cuda")  # doctest: +SKIP
        >>> x.reshape(3, 2)  # doctest: +SKIP
        tensor([[1., 2.],
                [3., 4.],
                [5., 6.]], device='cuda')
        >>> x.reshape(-1, 3).shape  # doctest: +SKIP
        (2, 3)
        """
        return reshape(self, shape[0] if len(shape) == 1 else shape)

    def transpose(self, *axes: Any) -> CudaTensor:
        """The tensor with its axes permuted (reversed by default).

        ``t.transpose(1, 0)`` and ``t.transpose((1, 0))`` are
        ``tapegrad.cuda.transpose(t, (1, 0))``; ``t.T`` is ``t.transpose()``.

        Parameters
        ----------
        *axes : int or tuple of int
            The permutation, as a tuple or as separate ints; none: reverse the axes.

        Returns
        -------
        CudaTensor
            A new tensor (a gather: its backward scatters the gradient back).

        Raises
        ------
        TypeError
            An axis is not an integer (``t.transpose(1.0, 0.0)``), as in NumPy.
        ValueError
            ``axes`` is not a permutation of the tensor's axes.

        See Also
        --------
        tapegrad.cuda.transpose : The function this method calls.

        Examples
        --------
        >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
        >>> import tapegrad as tg
        >>> x = tg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device="cuda")  # doctest: +SKIP
        >>> x.transpose(1, 0)  # doctest: +SKIP
        tensor([[1., 4.],
                [2., 5.],
                [3., 6.]], device='cuda')
        >>> x.reshape(1, 2, 3).transpose((2, 0, 1)).shape  # doctest: +SKIP
        (3, 1, 2)
        """
        if len(axes) == 1 and not isinstance(axes[0], int | np.integer):
            return transpose(self, axes[0])  # a tuple, an array, None, or a refused float
        return transpose(self, axes or None)

    @property
    def T(self) -> CudaTensor:
        """The tensor with its axes reversed, ``t.transpose()``."""
        return transpose(self)

    def astype(self, dtype: Any) -> CudaTensor:
        """The tensor converted to ``dtype``, on the GPU.

        ``t.astype(dtype)`` is :func:`tapegrad.cuda.astype` with the tensor first. A
        cast between float dtypes passes gradients through; a cast to an integer or
        bool dtype gives a tensor that does not require grad.

        Parameters
        ----------
        dtype : data-type
            The new dtype: float64, float32, int64 or bool (the dtypes of
            :func:`tapegrad.cuda.to_device`).

        Returns
        -------
        CudaTensor
            ``self`` when it already has ``dtype``, else a new tensor.

        Raises
        ------
        TypeError
            ``dtype`` is not a dtype NumPy understands, or another dtype than those
            four (complex, str, float16, int32, ...): nothing is converted.

        See Also
        --------
        tapegrad.cuda.astype : The function this method calls.

        Examples
        --------
        >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
        >>> import numpy as np, tapegrad as tg
        >>> x = tg.tensor([1.5, 2.5], device="cuda", requires_grad=True)  # doctest: +SKIP
        >>> x.astype(np.float32).dtype, x.astype(np.float32).requires_grad  # doctest: +SKIP
        (dtype('float32'), True)
        >>> x.astype(np.int64)  # doctest: +SKIP
        tensor([1, 2], device='cuda')
        """
        return astype(self, dtype)


def _operator(name: str, reflected: bool = False) -> Callable:
    op = BY_NAME[name]
    if op.is_unary:
        return lambda self: elementwise(op, self)
    if reflected:
        return lambda self, other: elementwise(op, other, self)
    return lambda self, other: elementwise(op, self, other)


def _install_operators() -> None:
    """Arithmetic operators from the table rows' ``dunder`` names (as for CPU tensors)."""
    for op in ROWS:
        if op.cuda == "formulas" and op.dunder:
            setattr(CudaTensor, op.dunder[0], _operator(op.name))
            if len(op.dunder) > 1 and op.dunder[1]:
                setattr(CudaTensor, op.dunder[1], _operator(op.name, reflected=True))


_install_operators()
_cpu.DEVICE_TENSOR = CudaTensor  # from now on the CPU front ends route CUDA tensors here


def to_device(data: Any, requires_grad: bool = False, dtype: Any = None) -> CudaTensor:
    """Make a CUDA leaf tensor holding a copy of ``data``.

    What ``tg.tensor(..., device='cuda')`` calls; the dtype rules are those of
    :func:`tapegrad.tensor`.

    Parameters
    ----------
    data : array_like, Tensor or CudaTensor
        The values (a tensor's values are copied; no graph is kept).
    requires_grad : bool, optional
        Whether backward passes compute its gradient (float only).
    dtype : data-type, optional
        Convert to this dtype: float64, float32, int64 or bool.

    Returns
    -------
    CudaTensor
        A new leaf on the GPU.

    Raises
    ------
    TypeError
        An unsupported ``dtype``, or ``requires_grad=True`` for a non-float dtype.
    RuntimeError
        No GPU (and no simulator) is available.

    Examples
    --------
    >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
    >>> import numpy as np, tapegrad.cuda as tgc
    >>> a = tgc.to_device(np.arange(6.0).reshape(2, 3), requires_grad=True)  # doctest: +SKIP
    >>> a  # doctest: +SKIP
    tensor([[0., 1., 2.],
            [3., 4., 5.]], device='cuda', requires_grad=True)
    """
    if isinstance(data, CudaTensor):
        data = data.numpy()
    elif isinstance(data, _cpu.Tensor):
        data = data.numpy()
    if dtype is not None:
        dt = np.dtype(dtype)
        if dt not in _cpu.NP_DTYPES:
            raise TypeError(f"tensor: unsupported dtype {dt}")
        arr = np.array(data, dtype=dt)
    else:
        arr = normalize_array(data, copy=True)
    if requires_grad:
        check_float(arr.dtype, "tensor")
    out = _empty(arr.shape, arr.dtype)
    if arr.size:
        _flat(out).copy_to_device(np.ascontiguousarray(arr).reshape(-1))
    return CudaTensor(out, requires_grad)


def _as_cuda(v: Any, like: np.dtype, op: str) -> CudaTensor:
    """An operand as a CUDA tensor: CUDA tensors as they are, NumPy arrays and Python
    numbers uploaded as constants (numbers once per value, weakly typed as on the
    CPU), CPU tensors refused."""
    if isinstance(v, CudaTensor):
        return v
    if isinstance(v, _cpu.Tensor):
        raise TypeError(
            f"{op}: operands are on different devices: cuda and cpu (move one with "
            ".to('cuda') or .to('cpu'))"
        )
    if type(v) in (float, int, bool):
        dt = like if like.kind == "f" else np.result_type(v)
        return CudaTensor(_small_array((v,), dt).reshape(()))
    return to_device(v)


def _result(data: Any, name: str, inputs: tuple, backward: Any) -> CudaTensor:
    rg = is_grad_enabled() and any(t._rg for t in inputs)
    out = CudaTensor(data, rg)
    if rg:
        out._node = _Node(name, inputs, out, backward)
    return out


def _float_dtype(op: str, *ts: CudaTensor) -> np.dtype:
    dtype = result_dtype(*[t.dtype for t in ts])  # the CPU recorder's promotion
    if dtype is None:
        raise TypeError(
            f"{op}: CUDA tensors compute in float32/float64; got "
            f"{', '.join(str(t.dtype) for t in ts)} (convert with .astype)"
        )
    return dtype


# --- elementwise ----------------------------------------------------------------------------


def elementwise(op: Any, x: Any, y: Any = None) -> CudaTensor:
    """Record an elementwise op of the op table on CUDA operands.

    The row's scalar formulas, compiled as CUDA device functions, lifted by
    broadcasting kernels; what the operators and ``np.sin(t)`` call.

    Parameters
    ----------
    op : Op
        A row of the op table (``tapegrad.ops.BY_NAME["sin"]``) with a CUDA target.
    x : CudaTensor, ndarray or number
        The first operand.
    y : CudaTensor, ndarray or number, optional
        The second operand, for a binary op.

    Returns
    -------
    CudaTensor
        The result, broadcast as NumPy does.

    Raises
    ------
    TypeError
        The row has no CUDA target, an operand is a CPU tensor, or the operands are
        not of float dtypes.
    ValueError
        The operands' shapes do not broadcast.

    Examples
    --------
    >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
    >>> import tapegrad.cuda as tgc
    >>> from tapegrad.ops import BY_NAME
    >>> x = tgc.to_device([1.0, 2.0])  # doctest: +SKIP
    >>> tgc.elementwise(BY_NAME["multiply"], x, 3.0)  # doctest: +SKIP
    tensor([3., 6.], device='cuda')
    """
    if op.cuda != "formulas":
        raise TypeError(
            f"{op.name} is not available for CUDA tensors (its table row has no CUDA "
            "target); move the operands with .to('cpu')"
        )
    if op.is_unary:
        tx = _as_cuda(x, np.dtype(np.float64), op.name)
        dtype = _float_dtype(op.name, tx)
        fwd, bwd = _kernel(("ew", op.name), lambda k: k.elementwise_kernels(op))
        out = _empty(tx.shape, dtype)
        _launch(fwd, tx.size, _flat(tx.data), _flat(out))

        def backward(g: Any, grads: list) -> None:
            _launch(bwd, tx.size, _flat(g), _flat(tx.data), _flat(out), _flat(grads[0]))

        return _result(out, op.name, (tx,), backward)
    ref = x if isinstance(x, CudaTensor) else y
    tx, ty = _as_cuda(x, ref.dtype, op.name), _as_cuda(y, ref.dtype, op.name)
    dtype = _float_dtype(op.name, tx, ty)
    tx, ty = astype(tx, dtype), astype(ty, dtype)
    shape = broadcast(op.name, tx.shape, ty.shape)
    nd = builtins.max(len(shape), 1)
    dims = shape or (1,)
    sx = broadcast_strides(tx.shape, shape) or [0]
    sy = broadcast_strides(ty.shape, shape) or [0]
    meta = _small_array((nd, 0, 0, 0, *dims, *sx, *sy))  # matmul's layout (kernels)
    n = int(np.prod(shape, dtype=np.int64))
    fwd, bwd = _kernel(("ew", op.name), lambda k: k.elementwise_kernels(op))
    out = _empty(shape, dtype)
    _launch(fwd, n, _flat(tx.data), _flat(ty.data), _flat(out), meta)
    # bits 2/3: the operand is broadcast, so several threads add into one element
    spread = (4 if tx.size != n else 0) | (8 if ty.size != n else 0)

    def backward(g: Any, grads: list) -> None:
        mask = spread | int(grads[0] is not None) | (int(grads[1] is not None) << 1)
        gx = _flat(grads[0] if grads[0] is not None else tx.data)  # unused unless bit 0
        gy = _flat(grads[1] if grads[1] is not None else ty.data)
        _launch(bwd, n, _flat(g), _flat(tx.data), _flat(ty.data), _flat(out), gx, gy, mask, meta)

    return _result(out, op.name, (tx, ty), backward)


def astype(x: CudaTensor, dtype: Any) -> CudaTensor:
    """Convert ``x`` to ``dtype`` on the GPU.

    A cast between float dtypes passes gradients through; a cast to integers or bools
    gives a tensor that does not require grad.

    Parameters
    ----------
    x : CudaTensor
        The tensor to convert.
    dtype : data-type
        The new dtype: float64, float32, int64 or bool, the dtypes :func:`to_device`
        accepts.

    Returns
    -------
    CudaTensor
        ``x`` itself when it already has ``dtype``, else a new tensor.

    Raises
    ------
    TypeError
        ``dtype`` is not a dtype NumPy understands, or another dtype than those four
        (complex, str, float16, int32, ...); the message names the op, ``x``'s shape
        and both dtypes, and nothing is converted or recorded.

    Examples
    --------
    >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
    >>> import numpy as np, tapegrad.cuda as tgc
    >>> x = tgc.to_device([1.5, 2.5])  # doctest: +SKIP
    >>> tgc.astype(x, np.float32).dtype  # doctest: +SKIP
    dtype('float32')
    """
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"astype: {dtype!r} is not a dtype") from None
    if dtype not in _cpu.NP_DTYPES:  # what to_device refuses: there are no kernels for it
        raise TypeError(
            f"astype: unsupported dtype {dtype} (CUDA tensors hold float64, float32, int64 "
            f"or bool); the tensor has shape {x.shape} and dtype {x.dtype}"
        )
    if x.dtype == dtype:
        return x
    k = _moves()
    out = _empty(x.shape, dtype)
    _launch(k["copy_cast"], x.size, _flat(x.data), _flat(out))

    def backward(g: Any, grads: list) -> None:
        _launch(k["add"], x.size, _flat(g), _flat(grads[0]))

    if dtype.kind != "f":  # integers and bools are not differentiable
        return CudaTensor(out)
    return _result(out, "astype", (x,), backward)


# --- array ops ----------------------------------------------------------------------------


def _reduce(x: CudaTensor, axis: Any, keepdims: bool, name: str) -> CudaTensor:
    if not isinstance(x, CudaTensor):
        x = _as_cuda(x, np.dtype(np.float64), name)
    axes = normalize_axes(axis, x.ndim, name)
    dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
    x = astype(x, dtype)
    out_shape = reduced_shape(x.shape, axes, keepdims)
    count = int(np.prod([x.shape[d] for d in axes], dtype=np.int64))
    scale = (1.0 / count if count else math.nan) if name == "mean" else 1.0
    so = [0] * builtins.max(x.ndim, 1)  # output strides over x's axes, 0 if reduced
    s = 1
    for d in range(x.ndim - 1, -1, -1):
        if d not in axes:
            so[d] = s
            s *= x.shape[d]
    meta = _small_array((builtins.max(x.ndim, 1), *(x.shape or (1,)), *so))
    fwd, bwd = _kernel(("reduce",), lambda k: k.reduce_kernels())
    out = _empty(out_shape, dtype)
    _fill(out, 0.0)
    if s == 1 and x.size > THREADS:  # everything into one element: block tree sums
        total = _kernel(("sum_all", dtype.str), lambda k: k.sum_all_kernel(dtype, THREADS))
        blocks = builtins.min((x.size + THREADS - 1) // THREADS, 1024)
        if x.size:
            _configure(total, blocks, THREADS)(_flat(x.data), _flat(out), scale)
    else:
        _launch(fwd, x.size, _flat(x.data), _flat(out), scale, meta)

    def backward(g: Any, grads: list) -> None:
        _launch(bwd, x.size, _flat(g), _flat(grads[0]), scale, meta)

    return _result(out, name, (x,), backward)


def sum(x: Any, axis: Any = None, keepdims: bool = False) -> CudaTensor:
    """Sum over ``axis`` on the GPU, as ``numpy.sum``.

    Parameters
    ----------
    x : CudaTensor
        The tensor (integers and bools are summed in float64).
    axis : None, int or tuple of int, optional
        The axes to reduce (all by default).
    keepdims : bool, optional
        Keep the reduced axes, of length 1.

    Returns
    -------
    CudaTensor
        The sums.

    Raises
    ------
    numpy.exceptions.AxisError
        An axis is out of bounds.
    TypeError
        ``axis`` is a list, a bool, or not an integer.
    ValueError
        An axis is given twice.

    Examples
    --------
    >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
    >>> import numpy as np, tapegrad.cuda as tgc
    >>> a = tgc.to_device(np.arange(6.0).reshape(2, 3))  # doctest: +SKIP
    >>> tgc.sum(a, axis=0)  # doctest: +SKIP
    tensor([3., 5., 7.], device='cuda')
    """
    return _reduce(x, axis, keepdims, "sum")


def mean(x: Any, axis: Any = None, keepdims: bool = False) -> CudaTensor:
    """Average over ``axis`` on the GPU, as ``numpy.mean``.

    Parameters
    ----------
    x : CudaTensor
        The tensor (integers and bools are averaged in float64).
    axis : None, int or tuple of int, optional
        The axes to reduce (all by default).
    keepdims : bool, optional
        Keep the reduced axes, of length 1.

    Returns
    -------
    CudaTensor
        The means.

    Raises
    ------
    numpy.exceptions.AxisError
        An axis is out of bounds.
    TypeError
        ``axis`` is a list, a bool, or not an integer.
    ValueError
        An axis is given twice.

    Examples
    --------
    >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
    >>> import numpy as np, tapegrad.cuda as tgc
    >>> a = tgc.to_device(np.arange(6.0).reshape(2, 3))  # doctest: +SKIP
    >>> tgc.mean(a, axis=0)  # doctest: +SKIP
    tensor([1.5, 2.5, 3.5], device='cuda')
    """
    return _reduce(x, axis, keepdims, "mean")


def matmul(x: Any, y: Any) -> CudaTensor:
    """Multiply matrices on the GPU, with ``numpy.matmul``'s rules.

    1-D operands are vectors, 2-D matrices, and more dimensions batches of matrices,
    broadcast. A tiled kernel computes the product and both of its gradients.

    Parameters
    ----------
    x, y : CudaTensor, ndarray or number
        The operands (at least one a CUDA tensor).

    Returns
    -------
    CudaTensor
        ``x @ y``.

    Raises
    ------
    ValueError
        The shapes do not match for a product (or a 0-d operand).
    TypeError
        An operand is a CPU tensor, or the operands are not of float dtypes.

    Examples
    --------
    >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
    >>> import numpy as np, tapegrad.cuda as tgc
    >>> a = tgc.to_device(np.arange(6.0).reshape(2, 3))  # doctest: +SKIP
    >>> tgc.matmul(a, np.ones((3, 2)))  # doctest: +SKIP
    tensor([[ 3.,  3.],
            [12., 12.]], device='cuda')
    """
    ref = x if isinstance(x, CudaTensor) else y
    tx, ty = _as_cuda(x, ref.dtype, "matmul"), _as_cuda(y, ref.dtype, "matmul")
    out_shape, params = matmul_layout(tx.shape, ty.shape)
    _, m, k, n = params[:4]
    bo = params[4 : 4 + params[0]]
    dtype = _float_dtype("matmul", tx, ty)
    tx, ty = astype(tx, dtype), astype(ty, dtype)
    p = _small_array(params)
    gemm = _kernel(("matmul", dtype.str), lambda kk: kk.matmul_kernel(dtype))
    nbatch = int(np.prod(bo, dtype=np.int64))
    out = _empty(out_shape, dtype)
    mk, kn, mn = m * k, k * n, m * n
    # q = [rows, cols, inner, a: batch, size, strides; b: batch, size, strides; c: batch,
    # size; add] (batch 0: the output's own index, 1: x's broadcast one, 2: y's)
    _gemm(gemm, nbatch, tx.data, ty.data, out, p, (m, n, k, 1, mk, k, 1, 2, kn, n, 1, 0, mn, 0))

    def backward(g: Any, grads: list) -> None:
        if grads[0] is not None:  # gx += g y^T
            q = (m, k, n, 0, mn, n, 1, 2, kn, 1, n, 1, mk, 1)
            _gemm(gemm, nbatch, g, ty.data, grads[0], p, q)
        if grads[1] is not None:  # gy += x^T g
            q = (k, n, m, 1, mk, 1, k, 0, mn, n, 1, 2, kn, 1)
            _gemm(gemm, nbatch, tx.data, g, grads[1], p, q)

    return _result(out, "matmul", (tx, ty), backward)


def _gemm(kernel: Any, nbatch: int, a: Any, b: Any, c: Any, p: Any, q: tuple) -> None:
    """Launch the tiled product (``cuda.kernels.matmul_kernel``) over ``c``'s tiles."""
    from .kernels import TILE

    rows, cols = q[0], q[1]
    if not (rows and cols):
        return
    qd = _small_array(q)
    for t0 in range(0, nbatch, MAX_GRID_Z):
        grid = (
            (cols + TILE - 1) // TILE,
            (rows + TILE - 1) // TILE,
            builtins.min(MAX_GRID_Z, nbatch - t0),
        )
        _configure(kernel, grid, (TILE, TILE))(_flat(a), _flat(b), _flat(c), p, qd, t0)


def reshape(x: CudaTensor, shape: Any) -> CudaTensor:
    """Give ``x``'s values a new shape, as ``numpy.reshape``; no copy.

    Parameters
    ----------
    x : CudaTensor
        The tensor.
    shape : int or tuple of int
        The new shape; one dimension may be -1.

    Returns
    -------
    CudaTensor
        A tensor sharing ``x``'s memory.

    Raises
    ------
    ValueError
        The new shape has another size, or more than one -1.

    Examples
    --------
    >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
    >>> import numpy as np, tapegrad.cuda as tgc
    >>> a = tgc.to_device(np.arange(6.0))  # doctest: +SKIP
    >>> tgc.reshape(a, (3, -1))  # doctest: +SKIP
    tensor([[0., 1.],
            [2., 3.],
            [4., 5.]], device='cuda')
    """
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    new = normalize_shape(x.size, shape, x.shape)
    k = _moves()

    def backward(g: Any, grads: list) -> None:
        _launch(k["add"], x.size, _flat(g), _flat(grads[0]))

    return _result(x.data.reshape(new), "reshape", (x,), backward)


def _gather(x: CudaTensor, positions: np.ndarray, name: str) -> CudaTensor:
    """``x.ravel()[positions]``; the backward scatter-adds with atomics, so repeated
    positions add up (the CPU's ``gather_positions``)."""
    k = _moves()
    flat = np.ascontiguousarray(positions.reshape(-1), np.int64)
    idx = to_device(flat if flat.size else np.zeros(1, np.int64)).data
    out = _empty(positions.shape, x.dtype)
    _launch(k["gather"], flat.size, _flat(x.data), idx, _flat(out))

    def backward(g: Any, grads: list) -> None:
        _launch(k["scatter_add"], flat.size, _flat(g), idx, _flat(grads[0]))

    return _result(out, name, (x,), backward)


def transpose(x: CudaTensor, axes: Any = None) -> CudaTensor:
    """Permute the axes on the GPU (reverse them by default), as ``numpy.transpose``.

    Parameters
    ----------
    x : CudaTensor
        The tensor.
    axes : sequence of int, optional
        The permutation; negative axes count from the end.

    Returns
    -------
    CudaTensor
        A new tensor (a gather: its backward scatters the gradient back).

    Raises
    ------
    TypeError
        An axis is not an integer (floats are refused, not truncated), as in NumPy.
    ValueError
        ``axes`` is not a permutation of ``x``'s axes.

    Examples
    --------
    >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
    >>> import numpy as np, tapegrad.cuda as tgc
    >>> a = tgc.to_device(np.arange(6.0).reshape(2, 3))  # doctest: +SKIP
    >>> tgc.transpose(a)  # doctest: +SKIP
    tensor([[0., 3.],
            [1., 4.],
            [2., 5.]], device='cuda')
    """
    nd = x.ndim
    if axes is None:
        perm = tuple(range(nd - 1, -1, -1))
    else:
        try:  # as NumPy: integers only, a float axis is an error rather than truncated
            given = tuple(operator.index(a) for a in np.atleast_1d(axes).tolist())
        except TypeError:
            raise TypeError(
                f"transpose: axes {axes!r} must be integers (tensor of shape {x.shape})"
            ) from None
        perm = tuple(a + nd if a < 0 else a for a in given)
        if sorted(perm) != list(range(nd)):
            raise ValueError(f"transpose: axes {given} don't match array of shape {x.shape}")
    positions = np.transpose(np.arange(x.size).reshape(x.shape), perm)
    return _gather(x, np.array(positions, order="C"), "transpose")  # 0-d stays 0-d


def getitem(x: CudaTensor, key: Any) -> CudaTensor:
    """Index ``x[key]`` on the GPU, with NumPy's rules.

    Basic slices, ints, None, Ellipsis, integer and boolean arrays (NumPy arrays,
    lists, or CUDA tensors, copied to the host to plan the gather). The backward is a
    scatter-add with atomics, so repeated indices add up.

    Parameters
    ----------
    x : CudaTensor
        The tensor.
    key : int, slice, array_like, CudaTensor or tuple of them
        The index.

    Returns
    -------
    CudaTensor
        A new tensor holding the selected elements.

    Raises
    ------
    IndexError
        An index is out of bounds, or there are too many indices.
    TypeError, ValueError
        An index NumPy refuses (its error, naming ``x``'s shape).

    Examples
    --------
    >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
    >>> import numpy as np, tapegrad.cuda as tgc
    >>> a = tgc.to_device(np.arange(6.0).reshape(2, 3))  # doctest: +SKIP
    >>> tgc.getitem(a, (slice(None), [0, 2]))  # doctest: +SKIP
    tensor([[0., 2.],
            [3., 5.]], device='cuda')
    """
    if isinstance(key, tuple):
        key = tuple(k.numpy() if isinstance(k, CudaTensor) else k for k in key)
    elif isinstance(key, CudaTensor):
        key = key.numpy()
    elif isinstance(key, list):
        key = np.asarray(key)
    try:
        positions = np.arange(x.size).reshape(x.shape)[key]
    except (IndexError, ValueError, TypeError) as e:
        raise type(e)(f"getitem: {e} (tensor of shape {x.shape})") from None
    return _gather(x, np.asarray(positions), "getitem")


_FUNCTIONS: dict[str, Callable] = {
    "sum": sum,
    "mean": mean,
    "matmul": matmul,
    "reshape": reshape,
    "transpose": transpose,
}


# --- the backward pass ------------------------------------------------------------------------


def _pruned(root: CudaTensor) -> list[_Node]:
    """Nodes on a path from a requires-grad leaf to ``root``, in reverse recording order."""
    nodes: dict[int, _Node] = {}
    stack = [root]
    while stack:
        node = stack.pop()._node
        if node is None or id(node) in nodes:
            continue
        if node.freed:
            raise RuntimeError(FREED_MESSAGE)
        nodes[id(node)] = node
        stack.extend(t for t in node.inputs if t._rg)
    return sorted(nodes.values(), key=lambda nd: nd.seq, reverse=True)


def _grad_buffers(root: CudaTensor, nodes: list[_Node]) -> dict[int, Any]:
    """A zeroed gradient buffer for the root and every requires-grad input of ``nodes``,
    views of one arena per dtype (one allocation and one fill launch each)."""
    tensors: dict[int, CudaTensor] = {id(root): root}
    for node in nodes:
        for t in node.inputs:
            if t._rg:
                tensors.setdefault(id(t), t)
    by_dtype: dict[str, list[CudaTensor]] = {}
    for t in tensors.values():
        by_dtype.setdefault(t.dtype.str, []).append(t)
    cuda = _module()
    out: dict[int, Any] = {}
    for group in by_dtype.values():
        # laid out by the CPU scheduler's rule (record.place / aligned), in bytes
        item = group[0].dtype.itemsize
        offsets, top = [], 0
        for t in group:
            nbytes = t.size * item
            top = place(top, nbytes)
            offsets.append(top // item)
            top += aligned(nbytes)
        arena = cuda.device_array(builtins.max(top // item, 1), group[0].dtype)
        _fill(arena, 0.0)
        for t, off in zip(group, offsets, strict=True):
            out[id(t)] = arena[off : off + t.size].reshape(t.shape)
    return out


def backward(root: CudaTensor, gradient: Any = None, retain_graph: bool = False) -> None:
    """Run the backward pass from ``root``, accumulating into the leaves' ``.grad``.

    The CPU scheduler's steps: prune to the nodes between requires-grad leaves and the
    root, dispatch in reverse recording order, validate each gradient buffer against
    its tensor's shape and dtype, accumulate; each node's backward kernels are
    launched from the host. Gradients accumulate into leaves' ``.grad`` as on the CPU
    (a new buffer each time: a ``.grad`` the user holds is never modified).
    ``root.backward()`` calls it.

    Parameters
    ----------
    root : CudaTensor
        The tensor to differentiate.
    gradient : array_like or CudaTensor, optional
        The cotangent, of ``root``'s shape; required unless ``root`` has one element,
        where it defaults to 1.
    retain_graph : bool, optional
        Keep the graph for another backward pass (by default it is freed).

    Raises
    ------
    RuntimeError
        ``root`` does not require grad; ``gradient`` is missing for a root of more than
        one element or has the wrong shape; or the graph was freed by an earlier
        backward pass.
    TypeError
        ``gradient`` is not of a real dtype.

    Examples
    --------
    >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
    >>> import numpy as np, tapegrad.cuda as tgc
    >>> w = tgc.to_device([1.0, 2.0], requires_grad=True)  # doctest: +SKIP
    >>> tgc.backward(w * 3.0, gradient=np.array([1.0, 1.0]))  # doctest: +SKIP
    >>> w.grad  # doctest: +SKIP
    tensor([3., 3.], device='cuda')
    """
    if not root._rg:
        raise RuntimeError(NO_GRAD_MESSAGE)
    given = gradient.numpy() if isinstance(gradient, CudaTensor) else gradient
    seed = shared_seed(root.shape, root.dtype, given)
    if seed is None:
        seed = np.ones(root.shape, root.dtype)
    nodes = _pruned(root)
    grads = _grad_buffers(root, nodes)
    if seed.size:
        _flat(grads[id(root)]).copy_to_device(seed.reshape(-1))
    leaves: dict[int, CudaTensor] = {id(root): root} if root.is_leaf else {}
    for node in nodes:
        bufs = []
        for t in node.inputs:
            if not t._rg:
                bufs.append(None)
                continue
            buf = grads[id(t)]
            # the metadata check of the CPU scheduler: the buffer this node's kernel
            # accumulates into has its input's shape and dtype
            if tuple(buf.shape) != t.shape or np.dtype(buf.dtype) != t.dtype:
                raise gradient_buffer_error(
                    node.name,
                    f"input {len(bufs)}",
                    f"shape {t.shape} and dtype {t.dtype}",
                    f"shape {tuple(buf.shape)} and dtype {buf.dtype}",
                )
            bufs.append(buf)
            if t.is_leaf:
                leaves[id(t)] = t
        node.backward(grads[node.out], bufs)
        if not retain_graph:
            node.freed = True
    k = _moves()
    for key, leaf in leaves.items():
        g = grads[key]
        if leaf.grad is not None:  # accumulate as PyTorch does, into a fresh buffer
            _launch(k["add"], leaf.size, _flat(leaf.grad.data), _flat(g))
        leaf.grad = CudaTensor(g)
    _module().synchronize()
