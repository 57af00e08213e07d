"""The CUDA target's ops: elementwise rows (the table's formulas as device functions),
casts, reductions, matmul, reshapes and indexing, each recording its backward."""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from ..layout import NP_DTYPES
from ..ops import BY_NAME, ROWS
from ..shapes import (
    broadcast,
    broadcast_strides,
    matmul_layout,
    normalize_axes,
    normalize_shape,
    reduced_shape,
)
from .runtime import (
    THREADS,
    built_kernels,
    configure_launch,
    device_empty,
    device_fill,
    flat_view,
    launch,
    move_kernels,
    small_array,
)
from .tensor import CudaTensor, as_cuda, float_dtype, install_methods, result_tensor, to_device

MAX_GRID_Z = 65535  # CUDA's limit on a grid's z dimension (matmul batches per launch)

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
        tx = as_cuda(x, np.dtype(np.float64), op.name)
        dtype = float_dtype(op.name, tx)
        fwd, bwd = built_kernels(("ew", op.name), lambda k: k.elementwise_kernels(op))
        out = device_empty(tx.shape, dtype)
        launch(fwd, tx.size, flat_view(tx.data), flat_view(out))

        def backward(g: Any, grads: list) -> None:
            launch(
                bwd, tx.size, flat_view(g), flat_view(tx.data), flat_view(out), flat_view(grads[0])
            )

        return result_tensor(out, op.name, (tx,), backward)
    ref = x if isinstance(x, CudaTensor) else y
    tx, ty = as_cuda(x, ref.dtype, op.name), as_cuda(y, ref.dtype, op.name)
    dtype = float_dtype(op.name, tx, ty)
    tx, ty = astype(tx, dtype), astype(ty, dtype)
    shape = broadcast(op.name, tx.shape, ty.shape)
    nd = builtins.max(len(shape), 1)
    dims = shape or (1,)
    sx = broadcast_strides(tx.shape, shape) or [0]
    sy = broadcast_strides(ty.shape, shape) or [0]
    meta = small_array((nd, 0, 0, 0, *dims, *sx, *sy))  # matmul's layout (kernels)
    n = int(np.prod(shape, dtype=np.int64))
    fwd, bwd = built_kernels(("ew", op.name), lambda k: k.elementwise_kernels(op))
    out = device_empty(shape, dtype)
    launch(fwd, n, flat_view(tx.data), flat_view(ty.data), flat_view(out), meta)
    # bits 2/3: the operand is broadcast, so several threads add into one element
    spread = (4 if tx.size != n else 0) | (8 if ty.size != n else 0)

    def backward(g: Any, grads: list) -> None:
        mask = spread | int(grads[0] is not None) | (int(grads[1] is not None) << 1)
        gx = flat_view(grads[0] if grads[0] is not None else tx.data)  # unused unless bit 0
        gy = flat_view(grads[1] if grads[1] is not None else ty.data)
        launch(
            bwd,
            n,
            flat_view(g),
            flat_view(tx.data),
            flat_view(ty.data),
            flat_view(out),
            gx,
            gy,
            mask,
            meta,
        )

    return result_tensor(out, op.name, (tx, ty), backward)


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
    if dtype not in NP_DTYPES:  # what to_device refuses: there are no kernels for it
        raise TypeError(
            f"astype: unsupported dtype {dtype} (CUDA tensors hold float64, float32, int64 "
            f"or bool); the tensor has shape {x.shape} and dtype {x.dtype}"
        )
    if x.dtype == dtype:
        return x
    k = move_kernels()
    out = device_empty(x.shape, dtype)
    launch(k["copy_cast"], x.size, flat_view(x.data), flat_view(out))

    def backward(g: Any, grads: list) -> None:
        launch(k["add"], x.size, flat_view(g), flat_view(grads[0]))

    if dtype.kind != "f":  # integers and bools are not differentiable
        return CudaTensor(out)
    return result_tensor(out, "astype", (x,), backward)


# --- array ops ----------------------------------------------------------------------------


def _reduce(x: CudaTensor, axis: Any, keepdims: bool, name: str) -> CudaTensor:
    if not isinstance(x, CudaTensor):
        x = as_cuda(x, np.dtype(np.float64), name)
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
    meta = small_array((builtins.max(x.ndim, 1), *(x.shape or (1,)), *so))
    fwd, bwd = built_kernels(("reduce",), lambda k: k.reduce_kernels())
    out = device_empty(out_shape, dtype)
    device_fill(out, 0.0)
    if s == 1 and x.size > THREADS:  # everything into one element: block tree sums
        total = built_kernels(("sum_all", dtype.str), lambda k: k.sum_all_kernel(dtype, THREADS))
        blocks = builtins.min((x.size + THREADS - 1) // THREADS, 1024)
        if x.size:
            configure_launch(total, blocks, THREADS)(flat_view(x.data), flat_view(out), scale)
    else:
        launch(fwd, x.size, flat_view(x.data), flat_view(out), scale, meta)

    def backward(g: Any, grads: list) -> None:
        launch(bwd, x.size, flat_view(g), flat_view(grads[0]), scale, meta)

    return result_tensor(out, name, (x,), backward)


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
    tx, ty = as_cuda(x, ref.dtype, "matmul"), as_cuda(y, ref.dtype, "matmul")
    out_shape, params = matmul_layout(tx.shape, ty.shape)
    _, m, k, n = params[:4]
    bo = params[4 : 4 + params[0]]
    dtype = float_dtype("matmul", tx, ty)
    tx, ty = astype(tx, dtype), astype(ty, dtype)
    p = small_array(params)
    gemm = built_kernels(("matmul", dtype.str), lambda kk: kk.matmul_kernel(dtype))
    nbatch = int(np.prod(bo, dtype=np.int64))
    out = device_empty(out_shape, dtype)
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

    return result_tensor(out, "matmul", (tx, ty), backward)


def _gemm(kernel: Any, nbatch: int, a: Any, b: Any, c: Any, p: Any, q: tuple) -> None:
    """Launch the tiled product (``cuda.kernels.matmul_kernel``) over ``c``'s tiles."""
    tile = built_kernels(("tile",), lambda k: k.TILE)  # the kernels module's tile size
    rows, cols = q[0], q[1]
    if not (rows and cols):
        return
    qd = small_array(q)
    for t0 in range(0, nbatch, MAX_GRID_Z):
        grid = (
            (cols + tile - 1) // tile,
            (rows + tile - 1) // tile,
            builtins.min(MAX_GRID_Z, nbatch - t0),
        )
        configure_launch(kernel, grid, (tile, tile))(
            flat_view(a), flat_view(b), flat_view(c), p, qd, t0
        )


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
    k = move_kernels()

    def backward(g: Any, grads: list) -> None:
        launch(k["add"], x.size, flat_view(g), flat_view(grads[0]))

    return result_tensor(x.data.reshape(new), "reshape", (x,), backward)


def _gather(x: CudaTensor, positions: np.ndarray, name: str) -> CudaTensor:
    """``x.ravel()[positions]``; the backward scatter-adds with atomics, so repeated
    positions add up (the CPU's ``gather_positions``)."""
    k = move_kernels()
    flat = np.ascontiguousarray(positions.reshape(-1), np.int64)
    idx = to_device(flat if flat.size else np.zeros(1, np.int64)).data
    out = device_empty(positions.shape, x.dtype)
    launch(k["gather"], flat.size, flat_view(x.data), idx, flat_view(out))

    def backward(g: Any, grads: list) -> None:
        launch(k["scatter_add"], flat.size, flat_view(g), idx, flat_view(grads[0]))

    return result_tensor(out, name, (x,), backward)


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


class _Methods:
    """CudaTensor's NumPy protocols and op methods, installed on the class below."""

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


_install_operators()
install_methods(_Methods)
