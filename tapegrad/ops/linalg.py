"""Linear algebra: matmul (batched, NumPy rules) and what is built on it (dot, inner,
tensordot, einsum...), and numpy.linalg (inv, det, slogdet, solve, cholesky, norm)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..kernels.linalg import (
    cholesky_bwd,
    cholesky_fwd,
    det_bwd,
    det_fwd,
    inv_bwd,
    inv_fwd,
    matmul_bwd,
    matmul_fwd,
    slogdet_bwd,
    slogdet_fwd,
    solve_bwd,
    solve_fwd,
)
from .table import Kind, Op


def _matmul_cases() -> list:
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
    cuda="matmul",
    array_saves=("x", "y"),
    dunder=("__matmul__", "__rmatmul__"),
    cases=_matmul_cases,
)


def _eye(n: int, like: Any) -> np.ndarray:
    return np.eye(n, dtype=like.dtype)


def _la(m: Any) -> Any:
    return m.linalg


def _spd(m: Any, x: Any) -> Any:
    """A symmetric positive definite matrix from any square x (tests)."""
    n = x.shape[-1]
    return m.matmul(x, m.swapaxes(x, -1, -2)) + n * _eye(n, x)


def _cases(*entries: Any) -> Any:
    return lambda: [(*e, {}) for e in entries]


DOT = Op(
    "dot",
    Kind.COMPOSITE,
    None,
    None,
    "numpy.dot (via matmul and tensordot)",
    cases=_cases(
        ("vectors", lambda m, x, y: m.dot(x, y), [(3,), (3,)]),
        ("matrices", lambda m, x, y: m.dot(x, y), [(2, 3), (3, 4)]),
        ("scalar", lambda m, x, y: m.dot(x, y), [(), (3,)]),
        ("3-d with 3-d", lambda m, x, y: m.dot(x, y), [(2, 2, 3), (2, 3, 2)]),
    ),
)


VDOT = Op(
    "vdot",
    Kind.COMPOSITE,
    None,
    None,
    "dot product of flattened inputs",
    cases=_cases(("matrices", lambda m, x, y: m.vdot(x, y), [(2, 3), (3, 2)])),
)


INNER = Op(
    "inner",
    Kind.COMPOSITE,
    None,
    None,
    "sum of products over the last axes",
    cases=_cases(
        ("vectors", lambda m, x, y: m.inner(x, y), [(3,), (3,)]),
        ("2-d", lambda m, x, y: m.inner(x, y), [(2, 3), (4, 3)]),
    ),
)


OUTER = Op(
    "outer",
    Kind.COMPOSITE,
    None,
    None,
    "outer product",
    cases=_cases(("vectors", lambda m, x, y: m.outer(x, y), [(3,), (2,)])),
)


TENSORDOT = Op(
    "tensordot",
    Kind.COMPOSITE,
    None,
    None,
    "sum of products over given axes",
    cases=_cases(
        ("axes=1", lambda m, x, y: m.tensordot(x, y, axes=1), [(2, 3), (3, 4)]),
        ("axes=2", lambda m, x, y: m.tensordot(x, y), [(2, 3, 4), (3, 4, 2)]),
        (
            "axes lists",
            lambda m, x, y: m.tensordot(x, y, axes=([0, 2], [1, 0])),
            [(2, 3, 4), (4, 2, 5)],
        ),
    ),
)


EINSUM = Op(
    "einsum",
    Kind.COMPOSITE,
    None,
    None,
    "Einstein summation (explicit/implicit output, ellipsis, diagonals)",
    cases=_cases(
        ("matmul", lambda m, x, y: m.einsum("ij,jk->ik", x, y), [(2, 3), (3, 4)]),
        ("batched", lambda m, x, y: m.einsum("bij,bjk->bik", x, y), [(2, 2, 3), (2, 3, 2)]),
        ("implicit output", lambda m, x, y: m.einsum("ij,kj", x, y), [(2, 3), (4, 3)]),
        ("trace", lambda m, x: m.einsum("ii", x), [(3, 3)]),
        ("diagonal", lambda m, x: m.einsum("ii->i", x), [(3, 3)]),
        ("three operands", lambda m, x, y, z: m.einsum("i,ij,j->", x, y, z), [(2,), (2, 3), (3,)]),
        ("ellipsis", lambda m, x, y: m.einsum("...ij,...jk->...ik", x, y), [(2, 2, 3), (3, 2)]),
        ("outer", lambda m, x, y: m.einsum("i,j->ij", x, y), [(2,), (3,)]),
        ("sum out", lambda m, x: m.einsum("ijk->j", x), [(2, 3, 4)]),
    ),
)


TRACE = Op(
    "trace",
    Kind.COMPOSITE,
    None,
    None,
    "sum along a diagonal",
    cases=_cases(
        ("matrix", lambda m, x: m.trace(x), [(3, 3)]),
        ("offset", lambda m, x: m.trace(x, 1), [(3, 4)]),
    ),
)


INV = Op(
    "inv",
    Kind.ARRAY,
    inv_fwd,
    inv_bwd,
    "matrix inverse (stacks too)",
    namespace="numpy.linalg",
    cases=_cases(
        ("3x3", lambda m, x: _la(m).inv(_spd(m, x)), [(3, 3)]),
        ("stack", lambda m, x: _la(m).inv(_spd(m, x)), [(2, 2, 2)]),
    ),
)


DET = Op(
    "det",
    Kind.ARRAY,
    det_fwd,
    det_bwd,
    "determinant (stacks too)",
    namespace="numpy.linalg",
    cases=_cases(
        ("3x3", lambda m, x: _la(m).det(x + 2 * _eye(3, x)), [(3, 3)]),
        ("stack", lambda m, x: _la(m).det(x + 2 * _eye(2, x)), [(3, 2, 2)]),
    ),
)


SLOGDET = Op(
    "slogdet",
    Kind.ARRAY,
    slogdet_fwd,
    slogdet_bwd,
    "sign and log|determinant| (differentiable in the latter)",
    namespace="numpy.linalg",
    cases=_cases(
        ("3x3", lambda m, x: _la(m).slogdet(x + 2 * _eye(3, x))[1], [(3, 3)]),
        ("stack", lambda m, x: _la(m).slogdet(_spd(m, x))[1], [(2, 3, 3)]),
    ),
)


SOLVE = Op(
    "solve",
    Kind.ARRAY,
    solve_fwd,
    solve_bwd,
    "solve a x = b (vector or matrix b; batch axes broadcast)",
    namespace="numpy.linalg",
    cases=_cases(
        (
            "vector",
            lambda m, a, b: _la(m).solve(a + 3 * _eye(3, a), b),
            [(3, 3), (3,)],
        ),
        (
            "matrix",
            lambda m, a, b: _la(m).solve(a + 3 * _eye(3, a), b),
            [(3, 3), (3, 2)],
        ),
        (
            "batched, broadcast",
            lambda m, a, b: _la(m).solve(a + 3 * _eye(2, a), b),
            [(2, 2, 2), (2, 1)],
        ),
    ),
)


CHOLESKY = Op(
    "cholesky",
    Kind.ARRAY,
    cholesky_fwd,
    cholesky_bwd,
    "lower Cholesky factor (symmetrised gradient)",
    namespace="numpy.linalg",
    cases=_cases(
        ("3x3", lambda m, x: _la(m).cholesky(_spd(m, x)), [(3, 3)]),
        ("stack", lambda m, x: _la(m).cholesky(_spd(m, x)), [(2, 2, 2)]),
    ),
)


NORM = Op(
    "norm",
    Kind.COMPOSITE,
    None,
    None,
    "vector (ord 2, 1, inf, p) and matrix (fro, 1, inf) norms; subgradient 0 at 0",
    namespace="numpy.linalg",
    cases=_cases(
        ("vector 2", lambda m, x: _la(m).norm(x), [(4,)]),
        ("matrix fro", lambda m, x: _la(m).norm(x), [(3, 4)]),
        ("ord 1", lambda m, x: _la(m).norm(x, 1), [(4,)]),
        ("ord inf", lambda m, x: _la(m).norm(x, np.inf), [(4,)]),
        ("ord 3", lambda m, x: _la(m).norm(x, 3), [(4,)]),
        ("axis 1", lambda m, x: _la(m).norm(x, axis=1), [(3, 4)]),
        ("matrix ord 1", lambda m, x: _la(m).norm(x, 1), [(3, 4)]),
        ("matrix ord inf keepdims", lambda m, x: _la(m).norm(x, np.inf, keepdims=True), [(3, 4)]),
    ),
)
