"""``tapegrad.scipy.sparse.linalg``: solving with sparse matrices, differentiably.

``spsolve(A, b)`` solves ``A x = b`` with SciPy's sparse LU; ``cg`` and ``gmres`` with
SciPy's Krylov solvers. Each is differentiable in ``b`` and in the values of ``A`` (on
its pattern), implicitly: the cotangent ``g`` of ``x`` gives ``lam = A^-T g``, then
``b_bar = lam`` and, entry by entry, ``data_bar[k] = -lam[row[k]] x[col[k]]``. The
adjoint solve is the same primitive on the transposed pattern, so solves differentiate
to any order, in both modes (a tangent: ``x_dot = A^-1 (b_dot - A_dot x)``).

The iterative solvers' answers are checked: one that did not converge (SciPy's
``info``), or whose residual is above the tolerance asked for, raises, as does a
singular matrix in ``spsolve``.

>>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
>>> from tapegrad.scipy.sparse import csr_matrix
>>> from tapegrad.scipy.sparse.linalg import spsolve
>>> row, col = np.array([0, 1, 1]), np.array([0, 0, 1])
>>> def f(b):
...     A = csr_matrix((np.array([2.0, 1.0, 4.0]), (row, col)), shape=(2, 2))
...     return tnp.sum(spsolve(A, b))
>>> tg.grad(f)(np.array([1.0, 1.0]))  # A^-T ones
array([0.375, 0.25 ])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse.linalg as _spla

from ...extend import Primitive, defjvp, defvjp
from ...tensors import Tensor
from . import PRODUCT, Pattern, SparseMatrix, check_operand

__all__ = ["cg", "gmres", "spsolve"]


class _Method:
    """How a solve is computed on values: ``spsolve``, or a Krylov method with its
    tolerance (checked on the answer)."""

    def __init__(self, name: str, rtol: float = 0.0, atol: float = 0.0, maxiter: Any = None):
        self.name, self.rtol, self.atol, self.maxiter = name, rtol, atol, maxiter
        self._derived: _Method | None = None
        # spsolve's LU factors, kept for the adjoint: the backward solves with A^T, which
        # the same factors do (trans="T"), so a gradient costs one factorisation, not two
        self._lu: tuple[Pattern, np.ndarray, Any] | None = None

    @property
    def derived(self) -> _Method:
        """The method of the adjoint and tangent solves: the same, but relative only
        (their right-hand sides, cotangents and tangents, have any scale: an absolute
        tolerance would stop at once on a small one and return zero)."""
        if self.atol == 0.0:
            return self
        if self._derived is None:
            self._derived = _Method(self.name, self.rtol, 0.0, self.maxiter)
        return self._derived

    def _factors(self, data: np.ndarray, pattern: Pattern) -> tuple[Any, str]:
        """The LU factors of the matrix (``pattern``, ``data``), or of its transpose
        (then ``trans="T"``), factorised once for equal values."""
        kept = self._lu
        if kept is not None and np.array_equal(kept[1], data):
            if kept[0] is pattern:
                return kept[2], "N"
            if kept[0] is pattern.T:
                return kept[2], "T"
        try:
            lu = _spla.splu(pattern.matrix(data).tocsc())
        except RuntimeError:  # SuperLU: "Factor is exactly singular"
            raise RuntimeError("spsolve: the matrix is singular") from None
        self._lu = (pattern, np.array(data, copy=True), lu)
        return lu, "N"

    def run(self, data: np.ndarray, b: np.ndarray, pattern: Pattern) -> np.ndarray:
        if self.name == "spsolve":
            lu, trans = self._factors(data, pattern)
            x = np.asarray(lu.solve(np.asarray(b, dtype=lu.U.dtype), trans=trans), dtype=b.dtype)
            if not np.all(np.isfinite(x)):
                raise RuntimeError("spsolve: the matrix is singular (non-finite solution)")
            return x.reshape(b.shape)
        A = pattern.matrix(data).tocsc()
        solver = _spla.cg if self.name == "cg" else _spla.gmres
        # (a relative tolerance the dtype can reach: float32 stops near 1e-7)
        rtol = max(self.rtol, 50 * float(np.finfo(b.dtype).eps))
        x, info = solver(A, b, rtol=rtol, atol=self.atol, maxiter=self.maxiter)
        res = float(np.linalg.norm(A @ x - b))
        limit = max(rtol * float(np.linalg.norm(b)), self.atol)
        if info != 0 or not np.isfinite(res) or res > 10 * limit:
            raise RuntimeError(
                f"{self.name}: no convergence (info={info}, residual {res:.3g} against "
                f"{limit:.3g}); the gradient of a point that is not a solution would be "
                "wrong. Raise maxiter, or check that the matrix suits the method"
            )
        return np.asarray(x, dtype=b.dtype)


def _solve(data: np.ndarray, b: np.ndarray, pattern: Pattern, method: _Method) -> np.ndarray:
    return method.run(data, b, pattern)


SOLVE = Primitive(_solve)
SOLVE.__name__ = "sparse solve"


def _data_vjp(ans: Any, data: Any, b: Any, pattern: Pattern, method: _Method) -> Any:
    def pull(g: Any) -> Any:
        lam = SOLVE(data, g, pattern.T, method.derived)
        return -(lam[pattern.row] * ans[pattern.col])

    return pull


defvjp(
    SOLVE,
    _data_vjp,
    lambda ans, data, b, pattern, method: lambda g: SOLVE(data, g, pattern.T, method.derived),
    None,
    None,
)
defjvp(
    SOLVE,
    lambda t, ans, data, b, pattern, method: (
        -SOLVE(data, PRODUCT(t, ans, pattern), pattern, method)
    ),
    lambda t, ans, data, b, pattern, method: SOLVE(data, t, pattern, method.derived),
    None,
    None,
)


def _solve_with(name: str, A: SparseMatrix, b: Any, method: _Method) -> Any:
    if not isinstance(A, SparseMatrix):
        raise TypeError(f"{name}: A must be a tapegrad.scipy.sparse matrix, got {type(A).__name__}")
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"{name}: A must be square, got shape {A.shape}")
    if not isinstance(b, Tensor):
        b = np.asarray(b, dtype=A.dtype if np.asarray(b).dtype.kind in "iub" else None)
    check_operand(name, A, b, A.shape[0])
    for what, v in (("b", b), ("the matrix's values", A.data)):
        if not np.all(np.isfinite(v._peek() if isinstance(v, Tensor) else v)):
            raise ValueError(f"{name}: {what} hold NaN or infinity")
    if np.ndim(b) != 1:
        raise ValueError(f"{name}: b must be 1-D, got shape {tuple(np.shape(b))}")
    return SOLVE(A.data, b, A.pattern, method)


def spsolve(A: SparseMatrix, b: Any) -> Any:
    """Solve ``A x = b`` (SciPy's sparse LU), differentiable in ``b`` and ``A``'s values.

    Parameters
    ----------
    A : SparseMatrix
        Square, from :func:`tapegrad.scipy.sparse.csr_matrix` (or ``csc``, ``coo``).
    b : array_like or Tensor
        The right-hand side, 1-D, of ``A``'s dtype.

    Returns
    -------
    ndarray or Tensor
        ``x``: a tensor of the graph when ``b`` or ``A``'s values require grad.

    Raises
    ------
    RuntimeError
        ``A`` is singular.
    TypeError
        ``A`` is not a tapegrad sparse matrix, or ``b``'s dtype is not ``A``'s.
    ValueError
        Shapes that do not match.

    Examples
    --------
    >>> import numpy as np
    >>> from tapegrad.scipy.sparse import csr_matrix
    >>> from tapegrad.scipy.sparse.linalg import spsolve
    >>> A = csr_matrix((np.array([2.0, 4.0]), (np.array([0, 1]), np.array([0, 1]))), (2, 2))
    >>> spsolve(A, np.array([1.0, 1.0]))
    array([0.5 , 0.25])
    """
    return _solve_with("spsolve", A, b, _Method("spsolve"))


def cg(A: SparseMatrix, b: Any, rtol: float = 1e-10, atol: float = 0.0, maxiter: Any = None) -> Any:
    """Solve ``A x = b`` for a symmetric positive definite ``A`` by conjugate gradients
    (SciPy's ``cg``), differentiable in ``b`` and ``A``'s values (the adjoint is a
    solve with the same method).

    Unlike SciPy's, it returns ``x`` alone: an answer that did not converge raises.

    Parameters
    ----------
    A : SparseMatrix
        Symmetric positive definite.
    b : array_like or Tensor
        The right-hand side, 1-D.
    rtol, atol, maxiter
        As for :func:`scipy.sparse.linalg.cg` (a tighter default ``rtol``: the
        derivative is that of the exact solution).

    Returns
    -------
    ndarray or Tensor
        ``x``.

    Raises
    ------
    RuntimeError
        No convergence within ``maxiter`` (SciPy's ``info``), or a residual above the
        tolerance.

    Examples
    --------
    >>> import numpy as np
    >>> from tapegrad.scipy.sparse import csr_matrix
    >>> from tapegrad.scipy.sparse.linalg import cg
    >>> A = csr_matrix((np.array([2.0, 4.0]), (np.array([0, 1]), np.array([0, 1]))), (2, 2))
    >>> cg(A, np.array([1.0, 1.0]))
    array([0.5 , 0.25])
    """
    return _solve_with("cg", A, b, _Method("cg", rtol, atol, maxiter))


def gmres(
    A: SparseMatrix, b: Any, rtol: float = 1e-10, atol: float = 0.0, maxiter: Any = None
) -> Any:
    """Solve ``A x = b`` by GMRES (SciPy's ``gmres``), differentiable in ``b`` and
    ``A``'s values (the adjoint is a solve with the same method).

    Unlike SciPy's, it returns ``x`` alone: an answer that did not converge raises.

    Parameters
    ----------
    A : SparseMatrix
        Square and non-singular.
    b : array_like or Tensor
        The right-hand side, 1-D.
    rtol, atol, maxiter
        As for :func:`scipy.sparse.linalg.gmres`.

    Returns
    -------
    ndarray or Tensor
        ``x``.

    Raises
    ------
    RuntimeError
        No convergence within ``maxiter``, or a residual above the tolerance.

    Examples
    --------
    >>> import numpy as np
    >>> from tapegrad.scipy.sparse import csr_matrix
    >>> from tapegrad.scipy.sparse.linalg import gmres
    >>> rows, cols = np.array([0, 0, 1]), np.array([0, 1, 1])
    >>> A = csr_matrix((np.array([2.0, 1.0, 4.0]), (rows, cols)), (2, 2))
    >>> np.round(gmres(A, np.array([1.0, 1.0])), 6)
    array([0.375, 0.25 ])
    """
    return _solve_with("gmres", A, b, _Method("gmres", rtol, atol, maxiter))
