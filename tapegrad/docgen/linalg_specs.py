"""What is written per function of ``tapegrad.numpy.linalg`` and ``tapegrad.scipy.linalg``
(the functions they share are written once, their examples calling each namespace)."""

from __future__ import annotations

import dataclasses

from .kinds import Doc

T = "Tensor or array_like"
_A = {"a": (T, "A square matrix, or a stack of them (leading axes).")}
_SQUARE = (
    "numpy.linalg.LinAlgError",
    "If the last two dimensions of ``a`` are not square (or ``a`` is 1-D).",
)
_SINGULAR = (
    "numpy.linalg.LinAlgError",
    "If a matrix is singular (or not finite), or its last two dimensions are not square.",
)
_2D = (
    "numpy.linalg.LinAlgError",
    "If ``a`` has fewer than two dimensions, or the factorization does not converge (a "
    "non-finite input).",
)
_SPD = "a = tg.tensor([[2.0, 1.0], [1.0, 3.0]], requires_grad=True)"

# functions numpy.linalg and scipy.linalg share: ``{m}`` is the module in the example
_SHARED: dict[str, Doc] = {
    "inv": Doc(
        params=_A,
        raises=[_SINGULAR],
        example=f"""
            {_SPD}
            y = {{m}}.inv(a)
            y
            tnp.sum(y).backward()
            a.grad
            """,
    ),
    "det": Doc(
        params=_A,
        raises=[_SQUARE],
        notes="A singular matrix has determinant 0 (no error); its gradient, the "
        "adjugate's transpose, is computed through the inverse and is then not finite.",
        example=f"""
            {_SPD}
            d = {{m}}.det(a)
            d
            d.backward()
            a.grad
            """,
    ),
    "norm": Doc(
        params={
            "x": (T, "A vector or matrix (or a stack, with ``axis``)."),
            "ord": (
                "None, int, float, inf, -inf or 'fro'",
                "Order of the norm: for vectors None/2, 1, inf, -inf, 0 or any p; for "
                "matrices None/'fro', 1, -1, inf, -inf (2 and 'nuc' are not supported).",
            ),
            "axis": (
                "None or int or pair of ints",
                "The vector axis, or the two matrix axes; None: the whole input as a "
                "vector (with ``ord`` None), or a 2-D input as a matrix.",
            ),
        },
        raises=[
            ("ValueError", "If ``ord`` is not a norm of that kind (vector or matrix)."),
            ("numpy.exceptions.AxisError", "If ``axis`` is out of range."),
        ],
        example="""
            x = tg.tensor([3.0, 4.0], requires_grad=True)
            n = {m}.norm(x)
            n
            n.backward()
            x.grad
            {m}.norm(tg.tensor([[1.0, -2.0], [3.0, 4.0]]), ord=1)
            """,
    ),
    "svd": Doc(
        params={"a": (T, "A matrix, or a stack of them (leading axes).")},
        returns="U : Tensor\nLeft singular vectors, as columns (with ``compute_uv``).\n\n"
        "S : Tensor\nSingular values, descending (alone without ``compute_uv``).\n\n"
        "Vh : Tensor\nRight singular vectors, as rows (with ``compute_uv``).",
        raises=[_2D],
        example="""
            a = tg.tensor([[3.0, 0.0], [4.0, 5.0]], requires_grad=True)
            u, s, vh = {m}.svd(a, full_matrices=False)
            s
            tnp.sum(s).backward()
            a.grad
            """,
    ),
    "svdvals": Doc(
        params={"x": (T, "A matrix, or a stack of them (leading axes).")},
        raises=[_2D],
        example="""
            a = tg.tensor([[3.0, 0.0], [4.0, 5.0]], requires_grad=True)
            s = {m}.svdvals(a)
            s
            s[0].backward()
            a.grad
            """,
    ),
}


def _shared(prefix: str, module: str, library_note: str = "") -> dict[str, Doc]:
    out = {}
    for name, doc in _SHARED.items():
        out[f"{prefix}.{name}"] = dataclasses.replace(
            doc,
            notes="\n\n".join(n for n in (doc.notes, library_note) if n),
            example=doc.example.replace("{m}", module),
        )
    return out


LINALG: dict[str, Doc] = {
    **_shared("numpy.linalg", "tnp.linalg"),
    **_shared(
        "scipy.linalg",
        "linalg",
        "NumPy's function under SciPy's name: SciPy's extra keywords (``overwrite_a``, "
        "``check_finite``, ...) are not taken.",
    ),
    "numpy.linalg.matmul": Doc(
        params={"x": (T, "First operand."), "y": (T, "Second operand.")},
        raises=[
            (
                "ValueError",
                "If an operand is 0-d, or the inner dimensions (or batch shapes) do not match.",
            )
        ],
        example="""
            a = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
            y = tnp.linalg.matmul(a, a)
            y
            tnp.sum(y).backward()
            a.grad
            """,
    ),
    "numpy.linalg.cholesky": Doc(
        params=_A,
        raises=[
            ("numpy.linalg.LinAlgError", "If a matrix is not positive definite, or not square.")
        ],
        notes="A non-finite input gives NaN in the factor rather than an error.",
        example=f"""
            {_SPD}
            L = tnp.linalg.cholesky(a)
            L
            tnp.sum(L).backward()
            a.grad
            """,
    ),
    "numpy.linalg.slogdet": Doc(
        params=_A,
        returns="SlogdetResult\nThe named tuple ``(sign, logabsdet)``: the sign of the "
        "determinant (a constant) and the log of its absolute value (differentiable).",
        raises=[_SQUARE],
        example=f"""
            {_SPD}
            sign, logdet = tnp.linalg.slogdet(a)
            sign, logdet
            logdet.backward()
            a.grad
            """,
    ),
    "numpy.linalg.solve": Doc(
        params={
            "a": (T, "Square coefficient matrices (a stack broadcasts)."),
            "b": (T, "Right-hand side: a vector when 1-D, else a stack of matrices."),
        },
        raises=[
            _SINGULAR,
            ("ValueError", "If the shapes of ``a`` and ``b`` do not fit."),
        ],
        example=f"""
            {_SPD}
            b = tg.tensor([1.0, 2.0], requires_grad=True)
            x = tnp.linalg.solve(a, b)
            x
            tnp.sum(x).backward()
            a.grad
            b.grad
            """,
    ),
    "numpy.linalg.eigh": Doc(
        params={**_A, "UPLO": ("{'L', 'U'}", "The triangle of ``a`` that is read.")},
        returns="EighResult\nThe named tuple ``(eigenvalues, eigenvectors)``: ascending "
        "eigenvalues, and unit eigenvectors as columns.",
        raises=[
            (
                "numpy.linalg.LinAlgError",
                "If a matrix is not square, or the eigenvalues do "
                "not converge (a non-finite input).",
            ),
            ("ValueError", "If ``UPLO`` is not ``'L'`` or ``'U'``."),
        ],
        example=f"""
            {_SPD}
            w, v = tnp.linalg.eigh(a)
            w
            w[1].backward()
            a.grad
            """,
    ),
    "numpy.linalg.eigvalsh": Doc(
        summary="Eigenvalues of symmetric matrices.",
        params={**_A, "UPLO": ("{'L', 'U'}", "The triangle of ``a`` that is read.")},
        raises=[
            (
                "numpy.linalg.LinAlgError",
                "If a matrix is not square, or the eigenvalues do "
                "not converge (a non-finite input).",
            ),
            ("ValueError", "If ``UPLO`` is not ``'L'`` or ``'U'``."),
        ],
        example=f"""
            {_SPD}
            w = tnp.linalg.eigvalsh(a)
            w
            tnp.sum(w * w).backward()
            a.grad
            """,
    ),
    "numpy.linalg.eig": Doc(
        summary="Eigenvalues and eigenvectors of real matrices with real eigenvalues.",
        params=_A,
        returns="EigResult\nThe named tuple ``(eigenvalues, eigenvectors)``: eigenvalues "
        "(in LAPACK's order) and unit eigenvectors as columns.",
        raises=[
            ("numpy.linalg.LinAlgError", "If a matrix is not square, or has complex eigenvalues."),
        ],
        example="""
            a = tg.tensor([[2.0, 1.0], [0.5, 3.0]], requires_grad=True)
            w, v = tnp.linalg.eig(a)
            w
            w[0].backward()
            a.grad
            """,
    ),
    "numpy.linalg.eigvals": Doc(
        params=_A,
        raises=[
            ("numpy.linalg.LinAlgError", "If a matrix is not square, or has complex eigenvalues."),
        ],
        example="""
            a = tg.tensor([[2.0, 1.0], [0.5, 3.0]], requires_grad=True)
            w = tnp.linalg.eigvals(a)
            w
            w[1].backward()
            a.grad
            """,
    ),
    "numpy.linalg.pinv": Doc(
        summary="Moore-Penrose pseudo-inverse of matrices.",
        params={
            "a": (T, "A matrix, or a stack of them (leading axes)."),
            "rcond": (
                "None or float",
                "Singular values at most ``rcond * max(s)`` count as "
                "zero; None: 1e-15 (NumPy's default).",
            ),
            "rtol": (
                "None or float",
                "NumPy 2's other name of ``rcond``; None: ``max(m, n) * eps``.",
            ),
        },
        raises=[
            _2D,
            ("ValueError", "If both ``rcond`` and ``rtol`` are given."),
            ("TypeError", "If ``rcond`` is not a scalar."),
        ],
        example="""
            a = tg.tensor([[1.0, 2.0], [3.0, 5.0], [4.0, 1.0]], requires_grad=True)
            p = tnp.linalg.pinv(a)
            p
            tnp.sum(p).backward()
            a.grad
            """,
    ),
    "numpy.linalg.lstsq": Doc(
        params={
            "a": (T, "Coefficient matrix (m, n)."),
            "b": (T, "Right-hand side (m,) or (m, k)."),
            "rcond": (
                "None or float",
                "Relative cutoff for small singular values; None: ``eps * max(m, n)``.",
            ),
        },
        returns="x : Tensor\nThe minimum-norm least-squares solution.\n\n"
        "residuals : Tensor\nSquared residual norms (empty unless ``a`` has full column "
        "rank and m > n).\n\n"
        "rank : int\nThe rank of ``a``.\n\n"
        "s : Tensor\nThe singular values of ``a``.",
        raises=[("numpy.linalg.LinAlgError", "If the shapes of ``a`` and ``b`` do not fit.")],
        example="""
            a = tg.tensor([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]])
            b = tg.tensor([1.0, 2.0, 2.0], requires_grad=True)
            x, res, rank, s = tnp.linalg.lstsq(a, b)
            x
            res
            tnp.sum(x).backward()
            b.grad
            """,
    ),
    "numpy.linalg.matrix_power": Doc(
        params={**_A, "n": ("int", "The exponent: negative inverts first, 0 gives the identity.")},
        raises=[
            ("TypeError", "If ``n`` is not an integer."),
            ("numpy.linalg.LinAlgError", "If a matrix is not square, or singular for ``n < 0``."),
        ],
        example=f"""
            {_SPD}
            y = tnp.linalg.matrix_power(a, 3)
            y
            tnp.trace(y).backward()
            a.grad
            """,
    ),
    "numpy.linalg.multi_dot": Doc(
        params={
            "arrays": (
                "sequence of Tensor or array_like",
                "Two or more matrices; the first may be 1-D (a row) and the last 1-D (a column).",
            )
        },
        raises=[
            ("ValueError", "If fewer than two arrays are given, or their shapes do not chain."),
            ("TypeError", "If ``out`` is not None."),
        ],
        example="""
            a = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
            y = tnp.linalg.multi_dot([[1.0, 0.0], a, a, [0.0, 1.0]])
            y
            y.backward()
            a.grad
            """,
    ),
    "numpy.linalg.qr": Doc(
        params={
            "a": (T, "A matrix (m, n), or a stack of them."),
            "mode": ("{'reduced', 'complete', 'r'}", "Which factors, and their shapes (NumPy's)."),
        },
        returns="QRResult or Tensor\nThe named tuple ``(Q, R)``; R alone with ``mode='r'``.",
        raises=[_2D, ("ValueError", "If ``mode`` is unknown.")],
        example="""
            a = tg.tensor([[3.0, 1.0], [4.0, 2.0]], requires_grad=True)
            q, r = tnp.linalg.qr(a)
            r
            tnp.sum(r).backward()
            a.grad
            """,
    ),
    # --- scipy.linalg ------------------------------------------------------------------
    "scipy.linalg.cholesky": Doc(
        params={
            **_A,
            "lower": (
                "bool",
                "Return the lower factor (``a = L L^T``); False: "
                "the upper one (``a = U^T U``), SciPy's default.",
            ),
        },
        returns="Tensor\nThe Cholesky factor; it requires grad when ``a`` does.",
        raises=[
            ("numpy.linalg.LinAlgError", "If a matrix is not positive definite, or not square.")
        ],
        example=f"""
            {_SPD}
            U = linalg.cholesky(a)
            U
            tnp.sum(U).backward()
            a.grad
            """,
    ),
    "scipy.linalg.cho_factor": Doc(
        params={**_A, "lower": ("bool", "Factor as ``L L^T`` (True) or ``U^T U`` (False).")},
        returns="c : Tensor\nThe factor (the other triangle holds zeros).\n\n"
        "lower : bool\nWhich factor ``c`` is.",
        raises=[
            ("numpy.linalg.LinAlgError", "If a matrix is not positive definite, or not square.")
        ],
        example=f"""
            {_SPD}
            c, lower = linalg.cho_factor(a)
            c
            lower
            """,
    ),
    "scipy.linalg.cho_solve": Doc(
        params={
            "c_and_lower": ("tuple of (Tensor, bool)", "The result of :func:`cho_factor`."),
            "b": (T, "Right-hand side: a vector when 1-D, else a stack of matrices."),
        },
        raises=[("ValueError", "If the shapes of the factor and ``b`` do not fit.")],
        example=f"""
            {_SPD}
            b = tg.tensor([1.0, 2.0])
            x = linalg.cho_solve(linalg.cho_factor(a), b)
            x
            tnp.sum(x).backward()
            a.grad
            """,
    ),
    "scipy.linalg.lu_factor": Doc(
        params=_A,
        returns="lu : Tensor\nL (strict lower triangle, unit diagonal) and U, packed.\n\n"
        "piv : ndarray\n0-based row interchanges (int32; constants).",
        raises=[_SQUARE],
        notes="A singular matrix is factored without an error (a zero on U's diagonal), "
        "as SciPy's, which warns.",
        example="""
            a = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
            lu, piv = linalg.lu_factor(a)
            lu
            piv
            """,
    ),
    "scipy.linalg.lu_solve": Doc(
        params={
            "lu_and_piv": ("tuple of (Tensor, ndarray)", "The result of :func:`lu_factor`."),
            "b": (T, "Right-hand side: a vector when 1-D, else a stack of matrices."),
            "trans": (
                "{0, 1, 2}",
                "Solve ``a x = b`` (0), or ``a^T x = b`` (1, and 2: the same for real input).",
            ),
        },
        raises=[
            ("ValueError", "If the shapes do not fit, or ``trans`` is not 0, 1 or 2."),
            ("numpy.linalg.LinAlgError", "If the factored matrix is singular."),
        ],
        example="""
            a = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
            x = linalg.lu_solve(linalg.lu_factor(a), tg.tensor([1.0, 1.0]))
            x
            tnp.sum(x).backward()
            a.grad
            """,
    ),
    "scipy.linalg.solve_triangular": Doc(
        params={
            "a": (T, "Triangular matrices (only the triangle named by ``lower`` is read)."),
            "b": (T, "Right-hand side: a vector when 1-D, else a stack of matrices."),
            "trans": (
                "{0, 1, 2, 'N', 'T', 'C'}",
                "Solve ``a x = b`` (0, 'N') or "
                "``a^T x = b`` (1, 'T'; 2, 'C' the same for real input).",
            ),
            "lower": ("bool", "Whether ``a`` is lower triangular (else upper)."),
            "unit_diagonal": ("bool", "Take the diagonal of ``a`` as ones (it is not read)."),
        },
        raises=[
            ("ValueError", "If the shapes do not fit, or ``trans`` is unknown."),
            ("numpy.linalg.LinAlgError", "If ``a`` is singular or not square."),
        ],
        example="""
            a = tg.tensor([[2.0, 0.0], [1.0, 4.0]], requires_grad=True)
            x = linalg.solve_triangular(a, tg.tensor([2.0, 9.0]), lower=True)
            x
            tnp.sum(x).backward()
            a.grad
            """,
    ),
    "scipy.linalg.expm": Doc(
        summary="Matrix exponential.",
        params={"A": (T, "A square matrix, or a stack of them (leading axes).")},
        raises=[_SQUARE],
        example="""
            a = tg.tensor([[0.0, 1.0], [0.0, 0.0]], requires_grad=True)
            e = linalg.expm(a)
            e
            tnp.sum(e).backward()
            a.grad
            """,
    ),
    "scipy.linalg.solve": Doc(
        summary="Solve the linear system ``a x = b``, with SciPy's matrix structures.",
        returns="Tensor\nThe solution ``x``, of b's shape; it requires grad when ``a`` or "
        "``b`` does.",
        params={
            "a": (T, "Square coefficient matrices."),
            "b": (T, "Right-hand side: a vector when 1-D, else a stack of matrices."),
            "lower": (
                "bool",
                "With ``assume_a`` 'sym' or 'pos': read the lower triangle (else the upper).",
            ),
            "assume_a": (
                "None or str",
                "None or 'gen' (LU), 'sym', 'pos', "
                "'lower triangular', 'upper triangular' or 'diagonal'.",
            ),
            "transposed": ("bool", "Solve ``a^T x = b``."),
        },
        raises=[
            _SINGULAR,
            ("ValueError", "If the shapes of ``a`` and ``b`` do not fit."),
            (
                "NotImplementedError",
                "If ``assume_a`` is another structure (banded, tridiagonal, ...).",
            ),
        ],
        example=f"""
            {_SPD}
            x = linalg.solve(a, tg.tensor([1.0, 2.0]), assume_a="pos")
            x
            tnp.sum(x).backward()
            a.grad
            """,
    ),
    "scipy.linalg.eigh": Doc(
        summary="Eigenvalues and eigenvectors of symmetric matrices.",
        params={
            **_A,
            "b": ("None", "Generalized problems are not supported: must be None."),
            "lower": ("bool", "Read the lower triangle of ``a`` (else the upper)."),
            "eigvals_only": ("bool", "Return the eigenvalues alone."),
            "type": (
                "int",
                "Accepted for SciPy's signature; it applies to generalized problems only.",
            ),
            "subset_by_index": ("None", "Not supported: must be None."),
            "subset_by_value": ("None", "Not supported: must be None."),
            "driver": (
                "None or str",
                "Accepted for SciPy's signature; LAPACK's divide-and-conquer routine is used.",
            ),
        },
        returns="w : Tensor\nAscending eigenvalues.\n\n"
        "v : Tensor\nUnit eigenvectors as columns (not with ``eigvals_only``).",
        raises=[
            ("NotImplementedError", "If ``b`` or a subset is given."),
            (
                "numpy.linalg.LinAlgError",
                "If a matrix is not square, or the eigenvalues do "
                "not converge (a non-finite input).",
            ),
        ],
        example=f"""
            {_SPD}
            w, v = linalg.eigh(a)
            w
            w[0].backward()
            a.grad
            """,
    ),
    "scipy.linalg.eigvalsh": Doc(
        summary="Eigenvalues of symmetric matrices.",
        params={
            **_A,
            "b": ("None", "Generalized problems are not supported: must be None."),
            "lower": ("bool", "Read the lower triangle of ``a`` (else the upper)."),
            "**options": ("", "The other keywords of :func:`eigh`."),
        },
        returns="Tensor\nAscending eigenvalues; they require grad when ``a`` does.",
        raises=[
            ("NotImplementedError", "If ``b`` or a subset is given."),
            (
                "numpy.linalg.LinAlgError",
                "If a matrix is not square, or the eigenvalues do "
                "not converge (a non-finite input).",
            ),
        ],
        example=f"""
            {_SPD}
            linalg.eigvalsh(a)
            """,
    ),
    "scipy.linalg.qr": Doc(
        summary="QR decomposition, with SciPy's modes.",
        params={
            "a": (T, "A matrix (m, n), or a stack of them."),
            "lwork": ("None", "Accepted for SciPy's signature; not used."),
            "mode": (
                "{'full', 'economic', 'r'}",
                "Q square and R (m, n); the reduced factors; or ``(R,)`` alone.",
            ),
            "pivoting": ("bool", "Column pivoting: not supported (must be False)."),
        },
        returns="Q : Tensor\nOrthonormal columns (not with ``mode='r'``).\n\n"
        "R : Tensor\nUpper triangular.",
        raises=[
            _2D,
            ("ValueError", "If ``mode`` is unknown."),
            ("NotImplementedError", "If ``pivoting`` is True."),
        ],
        example="""
            a = tg.tensor([[3.0, 1.0], [4.0, 2.0]], requires_grad=True)
            q, r = linalg.qr(a)
            r
            tnp.sum(r).backward()
            a.grad
            """,
    ),
}
