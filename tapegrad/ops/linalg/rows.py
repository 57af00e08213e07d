"""Linear algebra: matmul (batched, NumPy rules) and what is built on it (dot, inner,
tensordot, einsum...), and numpy.linalg (inv, det, slogdet, solve, cholesky, norm)."""

from __future__ import annotations

import types
from typing import Any

import numpy as np

from ..table import ROWS, Kind, Op
from .kernels import (
    cholesky_bwd,
    cholesky_fwd,
    convolve_bwd,
    convolve_fwd,
    det_bwd,
    det_fwd,
    eig_bwd,
    eig_fwd,
    eigh_bwd,
    eigh_fwd,
    inv_bwd,
    inv_fwd,
    lu_factor_bwd,
    lu_factor_fwd,
    matmul_bwd,
    matmul_fwd,
    pinv_bwd,
    pinv_fwd,
    qr_bwd,
    qr_fwd,
    slogdet_bwd,
    slogdet_fwd,
    solve_bwd,
    solve_fwd,
    solve_triangular_bwd,
    solve_triangular_fwd,
    svd_bwd,
    svd_fwd,
)


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
    assigns=True,
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
    method=True,
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
    method=True,
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
    failure="matrix is not positive definite",
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
        ("matrix ord 2", lambda m, x: _la(m).norm(x, 2), [(3, 4)]),
        ("matrix ord -2", lambda m, x: _la(m).norm(x, -2), [(4, 3)]),
        ("nuclear", lambda m, x: _la(m).norm(x, "nuc"), [(3, 3)]),
        (
            "nuclear, stack, keepdims",
            lambda m, x: _la(m).norm(x, "nuc", axis=(0, 2), keepdims=True),
            [(3, 2, 4)],
        ),
    ),
)


CONVOLVE = Op(
    "convolve",
    Kind.ARRAY,
    convolve_fwd,
    convolve_bwd,
    "discrete linear convolution of 1-D sequences (full, same, valid)",
    array_saves=("x", "y"),
    cases=_cases(
        ("full", lambda m, a, v: m.convolve(a, v), [(5,), (3,)]),
        ("same, short first", lambda m, a, v: m.convolve(a, v, mode="same"), [(3,), (6,)]),
        ("valid", lambda m, a, v: m.convolve(a, v, mode="valid"), [(6,), (3,)]),
        ("same, even lengths", lambda m, a, v: m.convolve(a, v, mode="same"), [(6,), (4,)]),
    ),
)


# --- decompositions -------------------------------------------------------------------------
# Test inputs keep the decompositions away from their non-differentiable points:
# well-separated eigenvalues, outputs that do not depend on the sign of an eigen- or
# singular vector (squares, products of pairs).


def _sym(m: Any, x: Any) -> Any:
    """A symmetric matrix with separated eigenvalues from any square x (tests)."""
    n = x.shape[-1]
    return x + m.swapaxes(x, -1, -2) + np.diag(3.0 * np.arange(n)).astype(x.dtype)


def _real_spectrum(m: Any, x: Any) -> Any:
    """A non-symmetric matrix with real, separated eigenvalues (tests): a small
    perturbation of an upper triangle with diagonal 0, 3, 6..."""
    n = x.shape[-1]
    return m.triu(x) + 0.2 * m.tril(x, -1) + np.diag(3.0 * np.arange(n)).astype(x.dtype)


EIGH = Op(
    "eigh",
    Kind.ARRAY,
    eigh_fwd,
    eigh_bwd,
    "eigenvalues (ascending) and eigenvectors of symmetric matrices; the gradient is "
    "symmetrised and diverges at repeated eigenvalues (unless only values are used)",
    namespace="numpy.linalg",
    failure="eigenvalues did not converge (or the input is not finite)",
    cases=_cases(
        ("eigenvalues", lambda m, x: _la(m).eigh(_sym(m, x))[0], [(3, 3)]),
        ("eigenvectors squared", lambda m, x: _la(m).eigh(_sym(m, x))[1] ** 2, [(3, 3)]),
        (
            "stack, upper triangle",
            lambda m, x: _la(m).eigh(_sym(m, x), UPLO="U").eigenvectors ** 2,
            [(2, 3, 3)],
        ),
    ),
)


EIGVALSH = Op(
    "eigvalsh",
    Kind.COMPOSITE,
    None,
    None,
    "eigenvalues of symmetric matrices (eigh's first output; finite for repeated ones)",
    namespace="numpy.linalg",
    cases=_cases(
        ("4x4", lambda m, x: _la(m).eigvalsh(_sym(m, x)), [(4, 4)]),
        ("stack", lambda m, x: _la(m).eigvalsh(_sym(m, x), "U"), [(2, 3, 3)]),
    ),
)


SVD = Op(
    "svd",
    Kind.ARRAY,
    svd_fwd,
    svd_bwd,
    "singular value decomposition (full_matrices=False for non-square inputs that "
    "require grad); the gradient diverges at repeated singular values unless only "
    "the values are used",
    namespace="numpy.linalg",
    failure="SVD did not converge (or the input is not finite)",
    cases=_cases(
        ("values, tall", lambda m, x: _la(m).svd(x, full_matrices=False)[1], [(4, 3)]),
        ("U squared, tall", lambda m, x: _la(m).svd(x, full_matrices=False)[0] ** 2, [(4, 3)]),
        ("Vh squared, wide", lambda m, x: _la(m).svd(x, full_matrices=False)[2] ** 2, [(2, 4)]),
        ("U Vh, square", lambda m, x: m.matmul(*_la(m).svd(x)[::2]), [(3, 3)]),
        (
            "stack, first column of U squared",
            lambda m, x: _la(m).svd(x, full_matrices=False).U[..., :1] ** 2,
            [(2, 4, 3)],
        ),
    ),
)


SVDVALS = Op(
    "svdvals",
    Kind.COMPOSITE,
    None,
    None,
    "singular values (svd's values alone; finite for repeated ones)",
    namespace="numpy.linalg",
    cases=_cases(
        ("tall", lambda m, x: _la(m).svdvals(x), [(4, 3)]),
        ("stack, wide", lambda m, x: _la(m).svdvals(x), [(2, 2, 3)]),
    ),
)


QR = Op(
    "qr",
    Kind.ARRAY,
    qr_fwd,
    qr_bwd,
    "reduced QR decomposition (tall, square and wide matrices)",
    namespace="numpy.linalg",
    failure="QR failed (the input is not finite)",
    cases=_cases(
        ("Q, tall", lambda m, x: _la(m).qr(x)[0], [(4, 3)]),
        ("R, tall", lambda m, x: _la(m).qr(x)[1], [(4, 3)]),
        ("Q, square", lambda m, x: _la(m).qr(x).Q, [(3, 3)]),
        ("R, wide", lambda m, x: _la(m).qr(x).R, [(2, 4)]),
        ("Q, wide", lambda m, x: _la(m).qr(x).Q, [(2, 4)]),
        ("mode r, stack", lambda m, x: _la(m).qr(x, mode="r"), [(2, 3, 2)]),
    ),
)


EIG = Op(
    "eig",
    Kind.ARRAY,
    eig_fwd,
    eig_bwd,
    "eigenvalues and unit eigenvectors of real matrices with real eigenvalues "
    "(complex ones raise); the gradient diverges at repeated eigenvalues",
    namespace="numpy.linalg",
    failure=(
        "complex eigenvalues (tapegrad's eig supports real matrices whose eigenvalues "
        "are real), or the input is not finite"
    ),
    cases=_cases(
        ("eigenvalues", lambda m, x: _la(m).eig(_real_spectrum(m, x))[0], [(3, 3)]),
        ("eigenvectors squared", lambda m, x: _la(m).eig(_real_spectrum(m, x))[1] ** 2, [(3, 3)]),
        ("stack", lambda m, x: _la(m).eig(_real_spectrum(m, x)).eigenvectors ** 2, [(2, 3, 3)]),
    ),
)


EIGVALS = Op(
    "eigvals",
    Kind.COMPOSITE,
    None,
    None,
    "eigenvalues of real matrices with real eigenvalues (eig's first output)",
    namespace="numpy.linalg",
    cases=_cases(("3x3", lambda m, x: _la(m).eigvals(_real_spectrum(m, x)), [(3, 3)])),
)


PINV = Op(
    "pinv",
    Kind.ARRAY,
    pinv_fwd,
    pinv_bwd,
    "Moore-Penrose pseudo-inverse (rcond / rtol as NumPy; gradient at constant rank, "
    "finite for repeated singular values)",
    namespace="numpy.linalg",
    array_saves=("x", "out"),
    failure="SVD did not converge (or the input is not finite)",
    cases=_cases(
        ("tall", lambda m, x: _la(m).pinv(x), [(4, 3)]),
        ("wide", lambda m, x: _la(m).pinv(x), [(2, 3)]),
        ("square stack", lambda m, x: _la(m).pinv(x + 2 * _eye(2, x)), [(3, 2, 2)]),
        # rcond above float32's rounding: the zero singular values are dropped in both
        ("rank 1", lambda m, x: _la(m).pinv(m.matmul(x[:, :1], x[:1, :]), 1e-6), [(3, 3)]),
        ("repeated singular values", lambda m, x: _la(m).pinv(x - m.swapaxes(x, 0, 1)), [(2, 2)]),
    ),
)


LSTSQ = Op(
    "lstsq",
    Kind.COMPOSITE,
    None,
    None,
    "least-squares solution, residuals, rank and singular values (through pinv)",
    namespace="numpy.linalg",
    cases=_cases(
        ("vector b", lambda m, a, b: _la(m).lstsq(a, b)[0], [(5, 3), (5,)]),
        ("matrix b", lambda m, a, b: _la(m).lstsq(a, b, rcond=None)[0], [(5, 3), (5, 2)]),
        ("residuals", lambda m, a, b: _la(m).lstsq(a, b)[1], [(5, 3), (5, 2)]),
        ("underdetermined", lambda m, a, b: _la(m).lstsq(a, b)[0], [(2, 4), (2,)]),
    ),
)


MATRIX_POWER = Op(
    "matrix_power",
    Kind.COMPOSITE,
    None,
    None,
    "integer powers of square matrices (negative through inv)",
    namespace="numpy.linalg",
    cases=_cases(
        ("n=3", lambda m, x: _la(m).matrix_power(x, 3), [(3, 3)]),
        ("n=6, stack", lambda m, x: _la(m).matrix_power(x, 6), [(2, 2, 2)]),
        ("n=-2", lambda m, x: _la(m).matrix_power(x + 3 * _eye(3, x), -2), [(3, 3)]),
        ("n=1", lambda m, x: _la(m).matrix_power(x, 1), [(2, 2)]),
    ),
)


MULTI_DOT = Op(
    "multi_dot",
    Kind.COMPOSITE,
    None,
    None,
    "product of several matrices in the cheapest order (1-D first and last allowed)",
    namespace="numpy.linalg",
    cases=_cases(
        ("two", lambda m, x, y: _la(m).multi_dot([x, y]), [(2, 3), (3, 4)]),
        ("three", lambda m, x, y, z: _la(m).multi_dot([x, y, z]), [(5, 2), (2, 4), (4, 3)]),
        (
            "four, vectors at the ends",
            lambda m, w, x, y, z: _la(m).multi_dot([w, x, y, z]),
            [(3,), (3, 4), (4, 2), (2,)],
        ),
    ),
)


# --- scipy.linalg ---------------------------------------------------------------------------


def _sla(m: Any) -> Any:
    """scipy.linalg next to numpy; next to tapegrad.numpy, the front ends of the rows
    published as ``tapegrad.scipy.linalg``."""
    if m is np:
        import scipy.linalg

        return scipy.linalg
    return types.SimpleNamespace(
        **{op.name: op.front for op in ROWS if op.namespace == "scipy.linalg" and op.front}
    )


SOLVE_TRIANGULAR = Op(
    "solve_triangular",
    Kind.ARRAY,
    solve_triangular_fwd,
    solve_triangular_bwd,
    "solve a x = b for triangular a (trans, lower, unit_diagonal; stacks broadcast)",
    namespace="scipy.linalg",
    array_saves=("x", "out"),
    cases=_cases(
        (
            "lower, vector",
            lambda m, a, b: _sla(m).solve_triangular(a + 3 * _eye(3, a), b, lower=True),
            [(3, 3), (3,)],
        ),
        (
            "upper, matrix",
            lambda m, a, b: _sla(m).solve_triangular(a + 3 * _eye(3, a), b),
            [(3, 3), (3, 2)],
        ),
        (
            "transposed, unit diagonal",
            lambda m, a, b: _sla(m).solve_triangular(
                a, b, trans="T", lower=True, unit_diagonal=True
            ),
            [(3, 3), (3, 2)],
        ),
        (
            "stack, trans=1, upper",
            lambda m, a, b: _sla(m).solve_triangular(a + 3 * _eye(2, a), b, trans=1),
            [(2, 2, 2), (2, 2, 3)],
        ),
    ),
)


LU_FACTOR = Op(
    "lu_factor",
    Kind.ARRAY,
    lu_factor_fwd,
    lu_factor_bwd,
    "LU with partial pivoting, packed as LAPACK's getrf (pivots are constants)",
    namespace="scipy.linalg",
    array_saves=("out", "out1"),
    cases=_cases(
        ("3x3", lambda m, x: _sla(m).lu_factor(x)[0], [(3, 3)]),
        ("stack", lambda m, x: _sla(m).lu_factor(x)[0], [(2, 4, 4)]),
    ),
)


LU_SOLVE = Op(
    "lu_solve",
    Kind.COMPOSITE,
    None,
    None,
    "solve a x = b from lu_factor's result (trans as SciPy)",
    namespace="scipy.linalg",
    cases=_cases(
        (
            "vector",
            lambda m, a, b: _sla(m).lu_solve(_sla(m).lu_factor(a + 2 * _eye(3, a)), b),
            [(3, 3), (3,)],
        ),
        (
            "transposed, matrix",
            lambda m, a, b: _sla(m).lu_solve(_sla(m).lu_factor(a + 2 * _eye(3, a)), b, trans=1),
            [(3, 3), (3, 2)],
        ),
    ),
)


CHO_FACTOR = Op(
    "cho_factor",
    Kind.COMPOSITE,
    None,
    None,
    "Cholesky factor and its side, for cho_solve (the other triangle holds zeros)",
    namespace="scipy.linalg",
    cases=_cases(
        ("upper", lambda m, x: m.triu(_sla(m).cho_factor(_spd(m, x))[0]), [(3, 3)]),
        ("lower", lambda m, x: m.tril(_sla(m).cho_factor(_spd(m, x), lower=True)[0]), [(3, 3)]),
    ),
)


CHO_SOLVE = Op(
    "cho_solve",
    Kind.COMPOSITE,
    None,
    None,
    "solve a x = b from cho_factor's result (two triangular solves)",
    namespace="scipy.linalg",
    cases=_cases(
        (
            "upper",
            lambda m, a, b: _sla(m).cho_solve(_sla(m).cho_factor(_spd(m, a)), b),
            [(3, 3), (3,)],
        ),
        (
            "lower, matrix",
            lambda m, a, b: _sla(m).cho_solve(_sla(m).cho_factor(_spd(m, a), True), b),
            [(3, 3), (3, 2)],
        ),
    ),
)


EXPM = Op(
    "expm",
    Kind.COMPOSITE,
    None,
    None,
    "matrix exponential (Pade 13 with scaling and squaring, Higham 2005; its "
    "derivative is the Frechet derivative to working accuracy)",
    namespace="scipy.linalg",
    cases=_cases(
        ("3x3", lambda m, x: _sla(m).expm(x), [(3, 3)]),
        ("large norm, squarings", lambda m, x: _sla(m).expm(4.0 * x), [(3, 3)]),
        ("stack", lambda m, x: _sla(m).expm(x), [(2, 2, 2)]),
    ),
)
