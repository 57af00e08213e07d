"""The CUDA tensor type and the graph record of one op (:class:`Node`).

Its ops and backward pass are methods installed by :mod:`tapegrad.cuda.ops` and
:mod:`tapegrad.cuda.backward`, as the CPU tensor's are by the namespace builder."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..grad_mode import is_grad_enabled
from ..layout import NP_DTYPES, result_dtype
from ..recording import tensor as cpu_tensor
from ..shapes import (
    check_float,
)
from ..tape import normalize_array
from ..tensors import CROSS_DEVICE_MESSAGE, Tensor
from .runtime import SEQUENCE, device_empty, flat_view, size_of, small_array

# --- tensors ---------------------------------------------------------------------------


class Node:
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
        self.seq = next(SEQUENCE)


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

    def __init__(self, data: Any, requires_grad: bool = False, node: Node | None = None):
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
        return size_of(self.data)

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
            raise RuntimeError(CROSS_DEVICE_MESSAGE)
        return cpu_tensor(self.numpy(), requires_grad=self._rg)

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
    elif isinstance(data, Tensor):
        data = data.numpy()
    if dtype is not None:
        dt = np.dtype(dtype)
        if dt not in NP_DTYPES:
            raise TypeError(f"tensor: unsupported dtype {dt}")
        arr = np.array(data, dtype=dt)
    else:
        arr = normalize_array(data, copy=True)
    if requires_grad:
        check_float(arr.dtype, "tensor")
    out = device_empty(arr.shape, arr.dtype)
    if arr.size:
        flat_view(out).copy_to_device(np.ascontiguousarray(arr).reshape(-1))
    return CudaTensor(out, requires_grad)


def as_cuda(v: Any, like: np.dtype, op: str) -> CudaTensor:
    """An operand as a CUDA tensor: CUDA tensors as they are, NumPy arrays and Python
    numbers uploaded as constants (numbers once per value, weakly typed as on the
    CPU), CPU tensors refused."""
    if isinstance(v, CudaTensor):
        return v
    if isinstance(v, Tensor):
        raise TypeError(
            f"{op}: operands are on different devices: cuda and cpu (move one with "
            ".to('cuda') or .to('cpu'))"
        )
    if type(v) in (float, int, bool):
        dt = like if like.kind == "f" else np.result_type(v)
        return CudaTensor(small_array((v,), dt).reshape(()))
    return to_device(v)


def result_tensor(data: Any, name: str, inputs: tuple, backward: Any) -> CudaTensor:
    rg = is_grad_enabled() and any(t._rg for t in inputs)
    out = CudaTensor(data, rg)
    if rg:
        out._node = Node(name, inputs, out, backward)
    return out


def float_dtype(op: str, *ts: CudaTensor) -> np.dtype:
    dtype = result_dtype(*[t.dtype for t in ts])  # the CPU recorder's promotion
    if dtype is None:
        raise TypeError(
            f"{op}: CUDA tensors compute in float32/float64; got "
            f"{', '.join(str(t.dtype) for t in ts)} (convert with .astype)"
        )
    return dtype


def install_methods(methods: type) -> None:
    """Copy the functions and properties of class ``methods`` onto :class:`CudaTensor`
    (the ops and backward modules complete the class this way: they sit above it)."""
    for name, value in vars(methods).items():
        if callable(value) or isinstance(value, property):
            setattr(CudaTensor, name, value)
