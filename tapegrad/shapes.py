"""Shape, dtype and seed rules, pure Python: the ones the CPU and CUDA targets share.

Every rule here follows NumPy (the same results and errors as ``numpy.sum``,
``numpy.reshape``, ``numpy.matmul``...) and raises naming the op, so both targets
reject the same inputs with the same message. Nothing here imports the package.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np


def normalize_axes(
    axis: Any, ndim: int, op: str, bools: bool = False, lists: bool = False
) -> tuple[int, ...]:
    """``axis`` (None, int or tuple) as sorted non-negative ints, NumPy's errors. A bool
    (an int to ``operator.index``) is refused, as NumPy's reductions refuse it, rather
    than taken as axis 0 or 1; ``bools`` takes it as an int, as NumPy's Python-level
    functions do (``linalg.norm``). A list is refused as NumPy's reductions refuse it;
    ``lists`` takes it as a tuple, as ``numpy.quantile`` and ``numpy.average`` do."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, list) and not lists:
        raise TypeError(
            f"{op}: the axis must be an integer, a tuple of integers or None, not a list"
        )
    axes = axis if isinstance(axis, tuple | list) else (axis,)
    out = []
    for a in axes:
        if not bools and isinstance(a, bool | np.bool_):
            raise TypeError(f"{op}: an integer is required for the axis, got {a!r}")
        a = operator.index(a)
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(
                f"{op}: axis {a} is out of bounds for array of dimension {ndim}"
            )
        a = a + ndim if a < 0 else a
        if a in out:
            raise ValueError(f"{op}: duplicate value in 'axis'")
        out.append(a)
    return tuple(sorted(out))


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> tuple:
    """The shape of a reduction of ``shape`` over ``axes``."""
    if keepdims:
        return tuple(1 if d in axes else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in axes)


def normalize_shape(size: int, shape: tuple, old: tuple) -> tuple[int, ...]:
    """``reshape``'s target shape with its -1 resolved, NumPy's errors."""
    shape = tuple(operator.index(d) for d in shape)
    if shape.count(-1) > 1:
        raise ValueError("reshape: can only specify one unknown dimension")
    known = math.prod([d for d in shape if d != -1])
    if -1 in shape:
        if known == 0 or size % known:
            raise ValueError(f"reshape: cannot reshape array of size {size} into shape {shape}")
        shape = tuple(size // known if d == -1 else d for d in shape)
    if any(d < 0 for d in shape) or math.prod(shape) != size:
        raise ValueError(
            f"reshape: cannot reshape array of size {size} (shape {old}) into shape {shape}"
        )
    return shape


def broadcast_error(op: str, *shapes: tuple[int, ...]) -> ValueError:
    """NumPy's error for operands of ``op`` whose shapes do not broadcast."""
    listed = " and ".join(str(s) for s in shapes)
    return ValueError(f"{op}: operands could not be broadcast together with shapes {listed}")


def broadcast(op: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy's broadcast shape of ``shapes``; the error names ``op``."""
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        raise broadcast_error(op, *shapes) from None


def broadcast_strides(shape: tuple[int, ...], out: tuple[int, ...]) -> list[int]:
    """Element strides of a C-contiguous array of ``shape`` in a loop over ``out``
    (0 on broadcast axes)."""
    st = [0] * len(out)
    s = 1
    for d in range(len(out) - 1, -1, -1):
        j = d - (len(out) - len(shape))
        if j >= 0 and shape[j] != 1:
            st[d] = s
            s *= shape[j]
    return st


def batch_strides(batch: tuple[int, ...], out: tuple[int, ...]) -> list[int]:
    """Strides in whole matrices of an operand's batch dims inside the output's (0 where
    the operand is broadcast)."""
    nb = len(out)
    padded = (1,) * (nb - len(batch)) + batch
    strides = [0] * nb
    s = 1
    for d in range(nb - 1, -1, -1):
        strides[d] = 0 if padded[d] == 1 else s
        s *= padded[d]
    return strides


def matmul_layout(xs: tuple[int, ...], ys: tuple[int, ...]) -> tuple[tuple, tuple]:
    """``(result shape, params)`` of ``matmul`` on operands of shapes ``xs``, ``ys``,
    NumPy's errors. 1-D operands are promoted to a row (x) or column (y) and the added
    axis removed from the result. ``params`` is the layout both targets' kernels read:
    ``(nbatch dims, m, k, n, *batch shape, *x's batch strides, *y's batch strides)``."""
    if not xs or not ys:
        raise ValueError(
            f"matmul: operands must have at least one dimension (shapes {xs} and {ys})"
        )
    x2 = xs if len(xs) >= 2 else (1, *xs)
    y2 = ys if len(ys) >= 2 else (*ys, 1)
    m, k = x2[-2:]
    k2, n = y2[-2:]
    if k != k2:
        raise ValueError(
            f"matmul: shapes {xs} and {ys} are not aligned: "
            f"{k} (dim {len(xs) - 1}) != {k2} (dim {max(len(ys) - 2, 0)})"
        )
    bx, by = x2[:-2], y2[:-2]
    try:
        bo = bx if bx == by else np.broadcast_shapes(bx, by)
    except ValueError:
        raise ValueError(
            f"matmul: batch dimensions of shapes {xs} and {ys} do not broadcast"
        ) from None
    out_shape = bo + ((m,) if len(xs) >= 2 else ()) + ((n,) if len(ys) >= 2 else ())
    params = (len(bo), m, k, n, *bo, *batch_strides(bx, bo), *batch_strides(by, bo))
    return out_shape, params


def check_float(dtype: Any, what: str) -> None:
    """Only floating point tensors can require gradients (both targets)."""
    if np.dtype(dtype).kind != "f":
        raise TypeError(
            f"{what}: only floating point tensors can require gradients (got {np.dtype(dtype)})"
        )


def gradient_buffer_error(op: str, where: str, expected: str, got: str) -> RuntimeError:
    """The scheduler's metadata check failed (both targets): the gradient buffer a
    node's backward kernel would accumulate into is not what its input needs."""
    return RuntimeError(
        f"backward: gradient buffer for an input of '{op}' ({where}) does not match its "
        f"kernel: expected {expected}, got {got}"
    )


def user_gradient(value: Any, what: str) -> np.ndarray:
    """A gradient that user code returned (a hook, a custom function's backward) as an
    array of real numbers; a string, an object or complex values are a ``TypeError``
    naming ``what`` (NumPy would make a 0-d array of them, or drop the imaginary part)."""
    arr = np.asarray(value)
    kind = arr.dtype.kind
    if kind == "c":
        raise TypeError(
            f"{what} returned complex values (dtype {arr.dtype}); the gradient of a real "
            "tensor is real"
        )
    if kind not in "fiub":
        raise TypeError(
            f"{what} returned {type(value).__name__}, not an array of numbers (got dtype "
            f"{arr.dtype})"
        )
    return arr


def seed(shape: tuple[int, ...], dtype: Any, gradient: Any) -> np.ndarray | None:
    """The cotangent ``backward(gradient)`` starts from, as a C-contiguous array of the
    root's shape and dtype; None (ones) when ``gradient`` is None, which only a root of
    one element allows, as in PyTorch."""
    if gradient is None:
        if math.prod(shape) != 1:
            raise RuntimeError(
                f"grad can be implicitly created only for scalar outputs; "
                f"backward() of a tensor of shape {shape} needs gradient="
            )
        return None
    g = np.asarray(gradient)
    if g.shape != shape:
        raise RuntimeError(
            f"backward: gradient has shape {g.shape} but the tensor has shape {shape}"
        )
    if g.dtype.kind not in "fiub":
        raise TypeError(f"backward: gradient of dtype {g.dtype} is not real")
    return np.array(g, dtype=dtype, order="C", copy=True)
