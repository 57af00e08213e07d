"""Linear algebra rows: matmul (1-D, 2-D, batched with broadcasting; NumPy rules)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..kernels.linalg import matmul_bwd, matmul_fwd
from ..layout import DTYPE_CODE, NP_DTYPES
from ..record import promote
from ..tape import current_tape
from ..tensor import Tensor, as_tensor, general
from .shape import astype
from .table import Kind, Op


def _batch_strides(batch: tuple[int, ...], out: tuple[int, ...]) -> list[int]:
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


def matmul(x: Any, y: Any) -> Tensor:
    """Matrix product with ``numpy.matmul`` semantics.

    1-D operands are promoted to a row (x) or column (y) and the added axis removed
    from the result; leading axes are batch axes and broadcast against each other.
    """
    tx, ty = as_tensor(x), as_tensor(y)
    xs, ys = tx.shape, ty.shape
    if not xs or not ys:
        raise ValueError(
            f"matmul: operands must have at least one dimension (shapes {xs} and {ys})"
        )
    dx, dy = DTYPE_CODE[tx.dtype], DTYPE_CODE[ty.dtype]
    dt = promote(dx, dy)
    if dt < 0:  # no float operand: not differentiable, NumPy computes
        return Tensor._external(np.matmul(tx._value(), ty._value()))
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
        bo = np.broadcast_shapes(bx, by)
    except ValueError:
        raise ValueError(
            f"matmul: batch dimensions of shapes {xs} and {ys} do not broadcast"
        ) from None
    out_shape = bo + ((m,) if len(xs) >= 2 else ()) + ((n,) if len(ys) >= 2 else ())
    if dx != dt:
        tx = astype(tx, NP_DTYPES[dt])
    if dy != dt:
        ty = astype(ty, NP_DTYPES[dt])
    tape = current_tape()
    if not tape.blas:
        tape.init_blas()
    ip = [len(bo), m, k, n, *bo, *_batch_strides(bx, bo), *_batch_strides(by, bo)]
    return general(MATMUL, dt, [tx, ty], [(dt, out_shape)], ip)


def _cases() -> list:
    mm = lambda m, x, y: m.matmul(x, y)  # noqa: E731
    return [
        ("(3,)@(3,)", mm, [(3,), (3,)], {}),
        ("(2,3)@(3,)", mm, [(2, 3), (3,)], {}),
        ("(3,)@(3,4)", mm, [(3,), (3, 4)], {}),
        ("(2,3)@(3,4)", mm, [(2, 3), (3, 4)], {}),
        ("(2,2,3)@(3,4) batched", mm, [(2, 2, 3), (3, 4)], {}),
        ("(2,1,3,4)@(5,4,2) broadcast batch", mm, [(2, 1, 3, 4), (5, 4, 2)], {}),
        ("(3,)@(2,3,4)", mm, [(3,), (2, 3, 4)], {}),
        ("(20,30)@(30,25) BLAS", mm, [(20, 30), (30, 25)], {}),
        ("(2,20,30)@(30,) BLAS batched", mm, [(2, 20, 30), (30,)], {}),
    ]


MATMUL = Op(
    "matmul",
    Kind.ARRAY,
    matmul_fwd,
    matmul_bwd,
    "matrix product (1-D, 2-D, batched with broadcasting; NumPy rules)",
    front=matmul,
    dunder=("__matmul__", "__rmatmul__"),
    cases=_cases,
)
