"""``tapegrad.scipy.linalg``: scipy.linalg's names, recording on Tensors.

The rows of the op table published here (``expm``, ``solve_triangular``,
``cho_factor``, ``cho_solve``, ``lu_factor``, ``lu_solve``; see ``docs/ops.md``), and
NumPy's linear algebra under SciPy's names and defaults (``cholesky`` gives the upper
factor unless ``lower=True``; ``qr`` defaults to ``mode='full'``; ``eigh`` takes
``lower`` and ``eigvals_only``). Generalized problems (a second matrix ``b``) are not
supported.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..numpy_protocols import publish
from ..ops.linalg.scipy_front import cholesky_factor
from ..ops.shape.front import concatenate, diagonal, swapaxes
from ..recording import as_tensor
from ..surface import NAMESPACES

globals().update(NAMESPACES["scipy.linalg"])
_np = NAMESPACES["numpy.linalg"]
inv = _np["inv"]
det = _np["det"]
norm = _np["norm"]
svd = _np["svd"]
svdvals = _np["svdvals"]


_SYM = {"sym", "her", "symmetric", "hermitian"}
_POS = {"pos", "positive definite"}


def solve(
    a: Any,
    b: Any,
    lower: bool = False,
    overwrite_a: bool = False,
    overwrite_b: bool = False,
    check_finite: bool = True,
    assume_a: Any = None,
    transposed: bool = False,
) -> Any:
    """Solve ``a x = b`` (``a^T x = b`` when ``transposed``), with SciPy's structures:
    ``assume_a`` None / 'gen' (LU), 'sym' (the ``lower`` or upper triangle is read,
    the matrix it stands for solved), 'pos' (Cholesky of that triangle), 'lower
    triangular' / 'upper triangular' and 'diagonal'."""
    kind = "gen" if assume_a in (None, "gen", "general") else assume_a
    if transposed:
        a = swapaxes(a, -1, -2)
    if kind == "gen":
        return _np["solve"](a, b)
    if kind in ("lower triangular", "upper triangular"):
        return solve_triangular(a, b, lower=kind == "lower triangular")  # noqa: F821
    if kind == "diagonal":
        d = diagonal(a, 0, -2, -1)
        return b / (d if np.ndim(b) == d.ndim else d[..., None])
    if kind in _SYM | _POS:
        if kind in _POS:
            return cho_solve(cho_factor(a, lower=lower), b)  # noqa: F821
        ta = as_tensor(a)
        n, ones = ta.shape[-1], np.ones((ta.shape[-1],) * 2, ta.dtype)
        half = ta * (np.tril(ones) if lower else np.triu(ones))  # the triangle read
        return _np["solve"](half + swapaxes(half * (ones - np.eye(n, dtype=ta.dtype)), -1, -2), b)
    raise NotImplementedError(f"scipy.linalg.solve: assume_a={assume_a!r} is not supported")


def cholesky(
    a: Any, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True
) -> Any:
    """Cholesky factor: upper (``a = U^T U``) unless ``lower`` (``a = L L^T``)."""
    return cholesky_factor(a, lower, "cholesky")


def _unsupported(what: str, b: Any, **options: Any) -> None:
    """Refuse what these wrappers do not compute (rather than ignore it)."""
    if b is not None:
        raise NotImplementedError(
            f"scipy.linalg.{what}: generalized problems (b) are not supported"
        )
    for key, value in options.items():
        if value is not None:
            raise NotImplementedError(f"scipy.linalg.{what}: {key}= is not supported")


def eigh(
    a: Any,
    b: Any = None,
    *,
    lower: bool = True,
    eigvals_only: bool = False,
    overwrite_a: bool = False,
    overwrite_b: bool = False,
    type: int = 1,
    check_finite: bool = True,
    subset_by_index: Any = None,
    subset_by_value: Any = None,
    driver: Any = None,
) -> Any:
    """Eigenvalues (and eigenvectors) of a symmetric matrix; ``lower`` picks the
    triangle read. Subsets and generalized problems are not supported."""
    _unsupported("eigh", b, subset_by_index=subset_by_index, subset_by_value=subset_by_value)
    uplo = "L" if lower else "U"
    if eigvals_only:
        return _np["eigvalsh"](a, UPLO=uplo)
    return tuple(_np["eigh"](a, UPLO=uplo))


def eigvalsh(a: Any, b: Any = None, *, lower: bool = True, **options: Any) -> Any:
    """Eigenvalues of a symmetric matrix (``lower`` picks the triangle read); the
    options of :func:`eigh`."""
    return eigh(a, b, lower=lower, eigvals_only=True, **options)


def qr(
    a: Any,
    overwrite_a: bool = False,
    lwork: Any = None,
    mode: str = "full",
    pivoting: bool = False,
    check_finite: bool = True,
) -> Any:
    """QR decomposition with SciPy's modes: ``'full'`` (Q square, R (m, n)),
    ``'economic'`` (reduced), ``'r'`` (``(R,)``, R (m, n) as in 'full'); pivoting is
    not supported. A tall matrix's full Q is not differentiable (its extra columns are
    not unique); its full R is the reduced one over zero rows."""
    if pivoting:
        raise NotImplementedError("scipy.linalg.qr: pivoting=True is not supported")
    if mode not in ("full", "economic", "r"):
        raise ValueError("scipy.linalg.qr: mode argument must be one of ['full', 'r', 'economic']")
    if mode == "economic":
        return tuple(_np["qr"](a, mode="reduced"))
    r = _np["qr"](a, mode="r")
    m, n = as_tensor(a).shape[-2:]
    if m > n:  # the full R: zero rows below the reduced one
        r = concatenate([r, np.zeros((*r.shape[:-2], m - n, n), r.dtype)], axis=-2)
    if mode == "r":
        return (r,)
    return _np["qr"](a, mode="complete")[0], r


__all__ = sorted(
    [
        *NAMESPACES["scipy.linalg"],
        "inv",
        "det",
        "norm",
        "svd",
        "svdvals",
        "solve",
        "cholesky",
        "eigh",
        "eigvalsh",
        "qr",
    ]
)
publish("scipy.linalg", globals())
