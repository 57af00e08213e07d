"""Front ends of SciPy's linear algebra rows (declared in :mod:`tapegrad.ops.linalg`):
triangular solves, LU and Cholesky factorizations and their solves, the matrix
exponential."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...recording import as_tensor, elementwise, general
from ...tensors import Tensor
from ..elementwise.core import EXP
from ..reduce.front import max as _max
from ..reduce.front import sum as _sum
from ..shape.front import astype, broadcast_to, gather_positions
from .front import (
    cholesky,
    float_and_code,
    matmul,
    solve,
    square_float,
    square_stack,
    system_operands,
    system_shape,
    transposed_matrices,
)
from .rows import CHO_FACTOR, CHO_SOLVE, EXPM, LU_FACTOR, LU_SOLVE, SOLVE_TRIANGULAR

# --- scipy.linalg ---------------------------------------------------------------------------


def _trans_code(trans: Any, what: str, strings: bool = True) -> int:
    """0 (solve with a) or 1 (with its transpose) for SciPy's ``trans``: 0, 1, 2, and
    'N', 'T', 'C' where SciPy takes them (``solve_triangular``; not ``lu_solve``)."""
    codes = {0: 0, 1: 1, 2: 1, "N": 0, "T": 1, "C": 1}
    if (isinstance(trans, str) and not strings) or trans not in codes:
        raise ValueError(f"{what}: incorrect trans value {trans!r}")
    return codes[trans]


def solve_triangular(
    a: Any,
    b: Any,
    trans: Any = 0,
    lower: bool = False,
    unit_diagonal: bool = False,
    overwrite_b: bool = False,
    check_finite: bool = True,
) -> Tensor:
    """Solve ``op(a) x = b`` for a (stack of) triangular ``a`` (``scipy.linalg``): only
    the ``lower`` (or upper) triangle is read, its diagonal taken as ones with
    ``unit_diagonal``; ``trans`` 0/'N', 1/'T' or 2/'C' (the same for real input). ``b``
    is a vector when 1-D, else a stack of matrices; stacks broadcast."""
    code = _trans_code(trans, "solve_triangular")  # (before anything is recorded)
    ta, rhs, vector, out_batch, n, k, dt = system_operands(a, b, "solve_triangular")
    ip = [math.prod(out_batch), n, k, int(bool(lower)), code, int(bool(unit_diagonal))]
    x = general(SOLVE_TRIANGULAR, dt, [ta, rhs], [(dt, (*out_batch, n, k))], ip)
    return x.reshape(*out_batch, n) if vector else x


def lu_factor(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> tuple:
    """LU decomposition with partial pivoting of (a stack of) square matrices, as
    ``scipy.linalg.lu_factor``: ``(lu, piv)``, L's strict lower triangle (unit
    diagonal) and U packed in ``lu``, ``piv`` the 0-based row interchanges (an int32
    array: the pivots are piecewise constant). Differentiable in ``lu`` for
    non-singular matrices."""
    t, dt, batch, n = square_float(a, "lu_factor")
    outs = [(dt, t.shape), (dt, (*batch, n))]
    lu, piv = general(LU_FACTOR, dt, [t], outs, [math.prod(batch), n], visible=2)
    return lu, piv.numpy().astype(np.int32)  # a guard while capturing


def row_permutation(piv: np.ndarray) -> np.ndarray:
    """Rows of ``P A`` (``perm[..., i]`` is the row of A at row i) from LAPACK's
    sequence of interchanges."""
    piv = np.asarray(piv)
    n = piv.shape[-1]
    perm = np.broadcast_to(np.arange(n), piv.shape).copy()
    flat, fpiv = perm.reshape(-1, n), piv.reshape(-1, n)
    for row, swaps in zip(flat, fpiv):
        for i, p in enumerate(swaps):
            row[i], row[p] = row[p], row[i]
    return perm


def take_rows(t: Any, perm: np.ndarray) -> Tensor:
    """The rows of (a stack of) matrices ``t`` in the order ``perm`` (``(..., n)``, one
    order per matrix); stack axes broadcast."""
    t = as_tensor(t)
    shape = np.broadcast_shapes(perm.shape[:-1] + t.shape[-2:], t.shape)
    if t.shape != shape:
        t = broadcast_to(t, shape)
    idx = np.broadcast_to(perm[..., None], shape)
    return gather_positions(t, lambda p: np.take_along_axis(p, idx, axis=-2), what="lu_solve")


def lu_solve(
    lu_and_piv: tuple,
    b: Any,
    trans: int = 0,
    overwrite_b: bool = False,
    check_finite: bool = True,
) -> Tensor:
    """Solve ``a x = b`` (``trans`` 0) or ``a^T x = b`` (1, 2) from ``lu_factor(a)``:
    a row permutation and two triangular solves."""
    lu, piv = lu_and_piv
    tlu, tb = as_tensor(lu), as_tensor(b)
    t = _trans_code(trans, "lu_solve", strings=False)  # SciPy's checks, before recording
    system_shape(tlu, tb, "lu_solve")
    if np.shape(piv) != tlu.shape[:-1]:
        raise ValueError(f"lu_solve: pivots of shape {np.shape(piv)} for an LU of {tlu.shape}")
    lu = tlu
    perm = row_permutation(piv)
    rhs = tb.reshape(-1, 1) if tb.ndim == 1 else tb  # a vector for every matrix of a stack
    if t == 0:  # P A = L U:  x = U^-1 L^-1 P b
        y = solve_triangular(lu, take_rows(rhs, perm), lower=True, unit_diagonal=True)
        x = solve_triangular(lu, y, lower=False)
    else:  # A^T = U^T L^T P:  x = P^T L^-T U^-T b
        z = solve_triangular(lu, rhs, trans=1, lower=False)
        y = solve_triangular(lu, z, trans=1, lower=True, unit_diagonal=True)
        x = take_rows(y, np.argsort(perm, axis=-1))
    return x.reshape(x.shape[:-1]) if tb.ndim == 1 else x


def cho_factor(
    a: Any, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True
) -> tuple:
    """Cholesky factor for :func:`cho_solve`, as ``scipy.linalg.cho_factor``: ``(c,
    lower)``, ``c`` upper (``a = c^T c``, the upper triangle of ``a`` read) or lower
    (``a = c c^T``). SciPy leaves arbitrary values in the other triangle; here it
    holds zeros."""
    return cholesky_factor(a, lower, "cho_factor"), bool(lower)


def cholesky_factor(a: Any, lower: bool, what: str) -> Tensor:
    """The Cholesky factor SciPy's ``cholesky`` / ``cho_factor`` (``what``) gives:
    lower, or upper (the upper triangle of ``a`` read); a 0-d or one-element 1-D ``a``
    is a 1 x 1 matrix, as SciPy's (``atleast_2d``). Shapes are checked before anything
    is recorded."""
    t = as_tensor(a)
    if t.ndim < 2:
        shape = (1,) * (2 - t.ndim) + t.shape
        if shape != (1, 1):
            raise ValueError(
                f"{what}: input array is expected to be square but has the shape {shape} "
                f"(a {t.shape} {t.dtype} read as a row)"
            )
        t = t.reshape(1, 1)
    square_stack(t, what)
    return cholesky(t) if lower else transposed_matrices(cholesky(transposed_matrices(t)))


def cho_solve(
    c_and_lower: tuple, b: Any, overwrite_b: bool = False, check_finite: bool = True
) -> Tensor:
    """Solve ``a x = b`` from ``cho_factor(a)``: two triangular solves."""
    c, lower = c_and_lower
    try:  # SciPy's: lower is read as an int (0/1, None, a bool)
        lower = bool(int(lower or 0))
    except (TypeError, ValueError):
        raise ValueError(f"cho_solve: lower must be a bool, got {lower!r}") from None
    c, tb = as_tensor(c), as_tensor(b)
    system_shape(c, tb, "cho_solve")  # (before anything is recorded)
    rhs = tb.reshape(-1, 1) if tb.ndim == 1 else tb  # a vector for every matrix of a stack
    y = solve_triangular(c, rhs, trans=0 if lower else 1, lower=lower)
    x = solve_triangular(c, y, trans=1 if lower else 0, lower=lower)
    return x.reshape(x.shape[:-1]) if tb.ndim == 1 else x


# Pade 13 coefficients and the 1-norm bound that needs no scaling (Higham 2005, table 2.3)
_PADE13 = (
    64764752532480000.0,
    32382376266240000.0,
    7771770303897600.0,
    1187353796428800.0,
    129060195264000.0,
    10559470521600.0,
    670442572800.0,
    33522128640.0,
    1323241920.0,
    40840800.0,
    960960.0,
    16380.0,
    182.0,
    1.0,
)
_THETA13 = 5.371920351148152


def expm(A: Any) -> Tensor:
    """Matrix exponential of (a stack of) square matrices: the [13/13] Pade approximant
    with scaling and squaring (Higham 2005), written in recorded ops, so its gradient
    is the derivative of the same approximation: the Frechet derivative to working
    accuracy (Al-Mohy and Higham 2009 compute it the same way).

    The number of squarings ``s`` comes from the 1-norm (the largest of a stack): a
    value read, so a compiled program replays while ``s`` stays the same.
    """
    t = as_tensor(A)
    if t.ndim < 2:  # SciPy's: one element is the 1 x 1 matrix exp(a), in float64
        if t.size != 1:
            raise np.linalg.LinAlgError(
                f"expm: the input array must be at least two-dimensional (got shape {t.shape})"
            )
        return elementwise(EXP, astype(t, np.float64).reshape(1, 1))
    t, _ = float_and_code(t)
    n = square_stack(t, "expm")[1]
    if t.size == 0:
        return t * 1.0
    eye = np.eye(n, dtype=t.dtype)
    norm1 = _max(_sum(abs(t.detach()), axis=-2))
    # s = max(0, ceil(log2(|A|_1 / theta13))), recorded: while capturing, only s is
    # read (a guard), so the program replays for every A with the same s
    scale = float(np.maximum(np.ceil(np.log2(norm1 / _THETA13)), 0.0))
    if not math.isfinite(scale):  # NaN or inf in the input: a NaN result, not a failed solve
        return t * np.nan
    s = int(scale)
    if s:
        t = t * (0.5**s)
    b = _PADE13
    a2 = matmul(t, t)
    a4 = matmul(a2, a2)
    a6 = matmul(a4, a2)
    u = matmul(
        t,
        matmul(a6, b[13] * a6 + b[11] * a4 + b[9] * a2)
        + b[7] * a6
        + b[5] * a4
        + b[3] * a2
        + b[1] * eye,
    )
    v = (
        matmul(a6, b[12] * a6 + b[10] * a4 + b[8] * a2)
        + b[6] * a6
        + b[4] * a4
        + b[2] * a2
        + b[0] * eye
    )
    r = solve(v - u, u + v)
    for _ in range(s):
        r = matmul(r, r)
    return r


SOLVE_TRIANGULAR.front = solve_triangular
LU_FACTOR.front = lu_factor
LU_SOLVE.front = lu_solve
CHO_FACTOR.front = cho_factor
CHO_SOLVE.front = cho_solve
EXPM.front = expm
