"""``tapegrad.scipy.sparse``: sparse matrices whose values are differentiable.

``csr_matrix((data, (row, col)), shape=...)`` (and ``csc_matrix``, ``coo_matrix``, the
same constructor under SciPy's other names) holds a sparsity pattern, fixed, and the
values ``data``, which may be a tensor that requires grad. ``A @ x``, ``A.T @ x`` and
``A.dot(x)`` are differentiable in both; :mod:`tapegrad.scipy.sparse.linalg` solves
with them. Derivatives in ``data`` live on the pattern: the gradient of the value at
``(row[k], col[k])`` is ``g[row[k]] * x[col[k]]`` for a product, entry by entry
(duplicates each get theirs, as SciPy sums them).

Each product is a :mod:`tapegrad.extend` primitive computed by SciPy: its rules are the
transposed product and gathers, written in tapegrad ops, so products and solves
differentiate to any order, in both modes.

>>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
>>> from tapegrad.scipy.sparse import csr_matrix
>>> row, col = np.array([0, 1, 1]), np.array([0, 0, 1])
>>> def f(data):
...     A = csr_matrix((data, (row, col)), shape=(2, 2))
...     return tnp.sum(A @ np.array([1.0, 2.0]))
>>> tg.grad(f)(np.array([1.0, 2.0, 3.0]))  # d/d data_k of sum(A x) = x[col_k]
array([1., 1., 2.])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as _sp

from ...extend import Primitive, defjvp, defvjp
from ...tensors import Tensor

__all__ = ["SparseMatrix", "coo_matrix", "csc_matrix", "csr_matrix", "issparse"]


class Pattern:
    """Where a sparse matrix's values sit: ``row``, ``col`` (int64 arrays of one length)
    and ``shape``; ``matrix(values)`` is SciPy's CSR matrix with those values."""

    def __init__(self, row: np.ndarray, col: np.ndarray, shape: tuple[int, int]) -> None:
        self.row, self.col, self.shape = row, col, shape
        self._t: Pattern | None = None

    @property
    def T(self) -> Pattern:
        if self._t is None:
            self._t = Pattern(self.col, self.row, (self.shape[1], self.shape[0]))
            self._t._t = self
        return self._t

    def matrix(self, values: np.ndarray) -> _sp.csr_matrix:
        return _sp.csr_matrix((values, (self.row, self.col)), shape=self.shape)


def _product(data: np.ndarray, x: np.ndarray, pattern: Pattern) -> np.ndarray:
    return np.asarray(pattern.matrix(data) @ x)


PRODUCT = Primitive(_product)
PRODUCT.__name__ = "sparse product"


def _gather_outer(g: Any, x: Any, pattern: Pattern) -> Any:
    """The gradient in the values of ``A x`` for the cotangent ``g``: ``g[row] x[col]``
    (summed over the columns of a 2-D ``x``)."""
    gx = g[pattern.row] * x[pattern.col]
    return gx if gx.ndim == 1 else gx.sum(axis=1)


defvjp(
    PRODUCT,
    lambda ans, data, x, pattern: lambda g: _gather_outer(g, x, pattern),
    lambda ans, data, x, pattern: lambda g: PRODUCT(data, g, pattern.T),
    None,
)
defjvp(
    PRODUCT,
    lambda t, ans, data, x, pattern: PRODUCT(t, x, pattern),
    lambda t, ans, data, x, pattern: PRODUCT(data, t, pattern),
    None,
)


def check_operand(name: str, A: SparseMatrix, x: Any, axis_len: int) -> None:
    """Refuse what SciPy would quietly accept or cast: another float dtype than the
    values', a length that does not match."""
    xd = x.dtype if isinstance(x, Tensor) else np.asarray(x).dtype
    if xd != A.dtype:
        raise TypeError(
            f"{name}: the matrix's values are {A.dtype} and the vector is {xd}; cast one "
            "of them (a silent cast would change the precision of the gradient)"
        )
    n = np.shape(x)[0] if np.ndim(x) else None
    if n != axis_len or np.ndim(x) > 2:
        raise ValueError(
            f"{name}: a matrix of shape {A.shape} cannot multiply an operand of shape "
            f"{tuple(np.shape(x))}"
        )


class SparseMatrix:
    """A sparse matrix with a fixed pattern and differentiable values (see the module).

    Parameters
    ----------
    arg : tuple
        ``(data, (row, col))``, SciPy's COO form: ``data`` an array or a tensor,
        ``row`` and ``col`` integer arrays of its length.
    shape : tuple of int
        The matrix's shape.
    format : str, optional
        ``"csr"``, ``"csc"`` or ``"coo"``: the name SciPy would give it (the values
        and their order are the same).

    Attributes
    ----------
    data : ndarray or Tensor
        The values, in the order given.
    row, col : ndarray
        Their positions.
    shape : tuple of int
        The shape.

    Raises
    ------
    TypeError
        ``arg`` is not ``(data, (row, col))``, ``row`` or ``col`` is not an integer
        array, or the values are not float32 or float64.
    ValueError
        ``data``, ``row`` and ``col`` are not 1-D of one length, or an index lies
        outside ``shape``.

    Examples
    --------
    >>> import numpy as np
    >>> from tapegrad.scipy.sparse import SparseMatrix
    >>> A = SparseMatrix((np.array([1.0, 2.0]), (np.array([0, 1]), np.array([1, 0]))), (2, 2))
    >>> A.nnz, A.T.toarray()
    (2, array([[0., 2.],
           [1., 0.]]))
    """

    def __init__(self, arg: Any, shape: tuple[int, int], format: str = "csr") -> None:
        coo = isinstance(arg, tuple) and len(arg) == 2
        if not (coo and isinstance(arg[1], tuple | list) and len(arg[1]) == 2):
            raise TypeError(
                f"{format}_matrix: give (data, (row, col)) and shape=; the values are what "
                f"is differentiated (got a {type(arg).__name__})"
            )
        data, (row, col) = arg
        row, col = np.asarray(row), np.asarray(col)
        if row.dtype.kind not in "iu" or col.dtype.kind not in "iu":
            raise TypeError(f"{format}_matrix: row and col must be integer arrays")
        nnz = np.shape(data)
        if row.shape != nnz or col.shape != nnz or len(nnz) != 1:
            raise ValueError(
                f"{format}_matrix: data, row and col must be 1-D of one length, got "
                f"{nnz}, {row.shape}, {col.shape}"
            )
        if len(shape) != 2 or any(int(d) != d or d < 0 for d in shape):
            raise ValueError(f"{format}_matrix: shape must be two non-negative ints, got {shape}")
        shape = (int(shape[0]), int(shape[1]))
        if nnz[0] and (
            row.min() < 0 or col.min() < 0 or row.max() >= shape[0] or col.max() >= shape[1]
        ):
            raise ValueError(f"{format}_matrix: an index lies outside the shape {shape}")
        if not isinstance(data, Tensor):
            data = np.asarray(data)
        if data.dtype not in (np.float32, np.float64):
            raise TypeError(
                f"{format}_matrix: the values must be float32 or float64, got {data.dtype}"
            )
        self.data = data
        self.row, self.col, self.shape, self.format = row, col, shape, format
        self.pattern = Pattern(row.astype(np.int64), col.astype(np.int64), shape)

    @property
    def dtype(self) -> np.dtype:
        """The values' dtype.

        Examples
        --------
        >>> import numpy as np
        >>> from tapegrad.scipy.sparse import csr_matrix
        >>> csr_matrix((np.ones(1, np.float32), (np.array([0]), np.array([0]))), (1, 1)).dtype
        dtype('float32')
        """
        return self.data.dtype

    @property
    def nnz(self) -> int:
        """How many values are stored (duplicates counted).

        Examples
        --------
        >>> import numpy as np
        >>> from tapegrad.scipy.sparse import csr_matrix
        >>> csr_matrix((np.ones(2), (np.array([0, 0]), np.array([0, 0]))), (1, 1)).nnz
        2
        """
        return int(self.row.size)

    @property
    def T(self) -> SparseMatrix:
        """The transpose (the same values, the pattern transposed).

        Examples
        --------
        >>> import numpy as np
        >>> from tapegrad.scipy.sparse import csr_matrix
        >>> csr_matrix((np.array([5.0]), (np.array([0]), np.array([1]))), (1, 2)).T.shape
        (2, 1)
        """
        return SparseMatrix((self.data, (self.col, self.row)), self.shape[::-1], self.format)

    def dot(self, x: Any) -> Any:
        """``A @ x`` for a vector or a matrix ``x``, differentiable in both.

        Parameters
        ----------
        x : array_like or Tensor
            1-D or 2-D, with ``A.shape[1]`` rows, of the values' dtype.

        Returns
        -------
        ndarray or Tensor
            The product: a tensor of the graph when ``x`` or the values require grad.

        Raises
        ------
        TypeError
            ``x`` is of another dtype than the values.
        ValueError
            ``x``'s shape does not fit.

        Examples
        --------
        >>> import numpy as np
        >>> from tapegrad.scipy.sparse import csr_matrix
        >>> A = csr_matrix((np.array([3.0]), (np.array([0]), np.array([1]))), (2, 2))
        >>> A.dot(np.array([1.0, 2.0]))
        array([6., 0.])
        """
        check_operand("sparse matrix product", self, x, self.shape[1])
        return PRODUCT(self.data, x, self.pattern)

    def __matmul__(self, x: Any) -> Any:
        return self.dot(x)

    def toarray(self) -> Any:
        """The dense matrix, differentiable in the values.

        Returns
        -------
        ndarray or Tensor
            ``A`` as a dense array (duplicates summed).

        Examples
        --------
        >>> import numpy as np
        >>> from tapegrad.scipy.sparse import csr_matrix
        >>> csr_matrix((np.array([3.0]), (np.array([0]), np.array([1]))), (1, 2)).toarray()
        array([[0., 3.]])
        """
        return self.dot(np.eye(self.shape[1], dtype=self.dtype))

    def scipy(self) -> _sp.csr_matrix:
        """SciPy's matrix with the current values (no gradient).

        Returns
        -------
        scipy.sparse.csr_matrix
            A copy of the values, in SciPy's CSR form.

        Examples
        --------
        >>> import numpy as np
        >>> from tapegrad.scipy.sparse import csr_matrix
        >>> csr_matrix((np.array([3.0]), (np.array([0]), np.array([1]))), (1, 2)).scipy().nnz
        1
        """
        values = self.data._peek() if isinstance(self.data, Tensor) else self.data
        return self.pattern.matrix(np.array(values))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        # NumPy would make a 0-d object array of it, and tnp.sum(A) return A itself
        raise TypeError(
            "a tapegrad sparse matrix is not an array: call A.toarray() for the dense "
            "matrix (differentiable), or A.scipy() for SciPy's"
        )

    def __repr__(self) -> str:
        return f"<tapegrad sparse {self.format} matrix {self.shape}, {self.nnz} stored values>"


_CONSTRUCTOR_DOC = """A sparse matrix from ``(data, (row, col))``, differentiable in ``data``{aka}.

    Parameters
    ----------
    arg : tuple
        ``(data, (row, col))``: the values (an array or a tensor) and their positions.
    shape : tuple of int
        The matrix's shape.

    Returns
    -------
    SparseMatrix
        The matrix.

    Raises
    ------
    TypeError, ValueError
        As :class:`SparseMatrix` does: a malformed ``arg``, an index outside ``shape``,
        values that are not float32 or float64.

    Examples
    --------
    >>> import numpy as np
    >>> from tapegrad.scipy.sparse import {name}
    >>> A = {name}((np.array([2.0, 3.0]), (np.array([0, 1]), np.array([1, 0]))), (2, 2))
    >>> A @ np.array([1.0, 10.0])
    array([20.,  3.])
    """


def _constructor(fmt: str) -> Any:
    """SciPy's constructor ``<fmt>_matrix``: the same matrix under each name (the values
    and the pattern do not depend on SciPy's storage format)."""

    def make(arg: Any, shape: tuple[int, int]) -> SparseMatrix:
        return SparseMatrix(arg, shape, fmt)

    make.__name__ = make.__qualname__ = f"{fmt}_matrix"
    aka = "" if fmt == "csr" else " (:func:`csr_matrix` under SciPy's other name)"
    make.__doc__ = _CONSTRUCTOR_DOC.format(name=make.__name__, aka=aka)
    return make


csr_matrix = _constructor("csr")
csc_matrix = _constructor("csc")
coo_matrix = _constructor("coo")


def issparse(x: Any) -> bool:
    """Whether ``x`` is a tapegrad sparse matrix.

    Parameters
    ----------
    x : object
        Anything.

    Returns
    -------
    bool
        True for a :class:`SparseMatrix`.

    Raises
    ------
    Nothing
        Any object is an answer.

    Examples
    --------
    >>> import numpy as np
    >>> from tapegrad.scipy.sparse import issparse
    >>> issparse(np.eye(2))
    False
    """
    return isinstance(x, SparseMatrix)
