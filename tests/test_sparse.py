"""tapegrad.scipy.sparse: products and solves with differentiable sparse values.

Every derivative is checked against the same computation on the dense matrix (whose
derivatives the op table's tests pin down), at first and second order and in forward
mode, and the first order against central differences; what SciPy would accept
quietly (another dtype, a wrong shape, an answer that did not converge) raises.
"""

from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.scipy.sparse import coo_matrix, csc_matrix, csr_matrix, issparse
from tapegrad.scipy.sparse.linalg import cg, gmres, spsolve

from .helpers import central_jacobian

RNG = np.random.default_rng(17)
N = 7
# the diagonal, then random entries (duplicates included: SciPy sums them)
ROW = np.r_[np.arange(N), RNG.integers(0, N, 12), 3]
COL = np.r_[np.arange(N), RNG.integers(0, N, 12), 3]
DATA = np.r_[np.full(N, 6.0), RNG.standard_normal(13)]
B = RNG.standard_normal(N)


def sparse(data, make=csr_matrix):
    return make((data, (ROW, COL)), shape=(N, N))


def dense(data):
    return sparse(data).toarray()


def test_the_dense_matrix_is_scipys():
    import scipy.sparse

    want = scipy.sparse.coo_matrix((DATA, (ROW, COL)), shape=(N, N)).toarray()
    np.testing.assert_array_equal(dense(DATA), want)
    assert issparse(sparse(DATA)) and not issparse(want)


@pytest.mark.parametrize("make", [csr_matrix, csc_matrix, coo_matrix])
def test_products_match_the_dense_matrix(make):
    X = RNG.standard_normal((N, 3))

    def f(data, x, X):
        A = sparse(data, make)
        return tnp.sum((A @ x) ** 3) + tnp.sum(tnp.sin(A.T @ X)) + tnp.sum(A.dot(x) * x)

    def g(data, x, X):
        A = dense(data)
        return tnp.sum((A @ x) ** 3) + tnp.sum(tnp.sin(A.T @ X)) + tnp.sum((A @ x) * x)

    args = (DATA, B, X)
    for a, b in zip(tg.grad(f, argnums=(0, 1, 2))(*args), tg.grad(g, argnums=(0, 1, 2))(*args)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        tg.grad(f)(*args), central_jacobian(lambda d: float(f(d, B, X)), DATA), rtol=1e-6
    )
    h1 = tg.hessian(lambda d: f(d, B, X))(DATA)
    h2 = tg.hessian(lambda d: g(d, B, X))(DATA)
    np.testing.assert_allclose(h1, h2, rtol=1e-10, atol=1e-10)


def solve_loss(data, b, solver=spsolve):
    return tnp.sum(solver(sparse(data), b) ** 3)


def dense_loss(data, b):
    return tnp.sum(tnp.linalg.solve(dense(data), b) ** 3)


def test_spsolve_first_and_second_order_and_forward_mode():
    for a, b in zip(
        tg.grad(solve_loss, argnums=(0, 1))(DATA, B), tg.grad(dense_loss, argnums=(0, 1))(DATA, B)
    ):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)
    fd = central_jacobian(lambda d: float(solve_loss(d, B)), DATA)
    np.testing.assert_allclose(tg.grad(solve_loss)(DATA, B), fd, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(
        tg.hessian(lambda d: solve_loss(d, B))(DATA),
        tg.hessian(lambda d: dense_loss(d, B))(DATA),
        rtol=1e-9,
        atol=1e-11,
    )

    def x_of(d):
        return spsolve(sparse(d), B)

    np.testing.assert_allclose(tg.jacfwd(x_of)(DATA), tg.jacobian(x_of)(DATA), atol=1e-12)


def test_krylov_solvers_differentiate_like_spsolve():
    M = dense(DATA)
    S = M @ M.T + np.eye(N)  # symmetric positive definite, for cg
    r, c = np.nonzero(S)

    def spd(data, b, solver):
        return tnp.sum(solver(csr_matrix((data, (r, c)), shape=(N, N)), b) ** 2)

    want = tg.grad(spd, argnums=(0, 1))(S[r, c], B, spsolve)
    for solver in (cg, gmres):
        got = tg.grad(spd, argnums=(0, 1))(S[r, c], B, solver)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)


def test_float32_stays_float32():
    d32, b32 = DATA.astype(np.float32), B.astype(np.float32)
    g = tg.grad(solve_loss)(d32, b32)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, tg.grad(solve_loss)(DATA, B), rtol=2e-3, atol=1e-4)


def test_backward_on_tensors_and_under_compile():
    data = tg.tensor(DATA, requires_grad=True)
    solve_loss(data, B).backward()
    np.testing.assert_allclose(data.grad, tg.grad(dense_loss)(DATA, B), rtol=1e-11)
    step = tg.compile(solve_loss)
    for k in range(3):
        d = DATA + 0.1 * k
        value, grad = step.value_and_grad(d, B)
        assert value == pytest.approx(float(dense_loss(d, B)), rel=1e-11)
        np.testing.assert_allclose(grad, tg.grad(dense_loss)(d, B), rtol=1e-10)
    assert step.stats["captures"] == 1


def test_bad_input_raises_naming_the_function():
    A = sparse(DATA)
    with pytest.raises(TypeError, match="spsolve: the matrix's values are float64 and the vector"):
        spsolve(A, B.astype(np.float32))
    with pytest.raises(ValueError, match=r"sparse matrix product: a matrix of shape \(7, 7\)"):
        A @ np.ones(3)
    with pytest.raises(ValueError, match="spsolve: A must be square"):
        spsolve(csr_matrix((np.ones(2), (np.array([0, 1]), np.array([0, 1]))), (2, 3)), B[:2])
    with pytest.raises(RuntimeError, match="spsolve: the matrix is singular"):
        spsolve(csr_matrix((np.ones(1), (np.array([0]), np.array([0]))), (2, 2)), np.ones(2))
    with pytest.raises(RuntimeError, match="cg: no convergence"):
        cg(sparse(DATA), B, maxiter=1)
    with pytest.raises(ValueError, match="an index lies outside the shape"):
        csr_matrix((np.ones(1), (np.array([5]), np.array([0]))), (2, 2))
    with pytest.raises(TypeError, match="the values must be float32 or float64"):
        csr_matrix((np.ones(1, int), (np.array([0]), np.array([0]))), (2, 2))
    with pytest.raises(TypeError, match=r"give \(data, \(row, col\)\) and shape="):
        csr_matrix(np.eye(2), (2, 2))
    with pytest.raises(TypeError, match=r"spsolve: A must be a tapegrad\.scipy\.sparse matrix"):
        spsolve(np.eye(N), B)
    # a gradient afterwards is unaffected
    np.testing.assert_allclose(tg.grad(solve_loss)(DATA, B), tg.grad(dense_loss)(DATA, B))


def test_small_cotangents_keep_their_gradient():
    """An absolute tolerance is the user's for the forward solve; the adjoint and tangent
    solves, whose right-hand sides have any scale, are relative only (else a small
    cotangent would stop GMRES at once, at zero)."""
    M = dense(DATA)
    S = M @ M.T + N * np.eye(N)
    r, c = np.nonzero(S)

    def small(data, b, solver):
        return 1e-8 * tnp.sum(solver(csr_matrix((data, (r, c)), shape=(N, N)), b, atol=1e-6) ** 2)

    def exact(data, b):
        return 1e-8 * tnp.sum(spsolve(csr_matrix((data, (r, c)), shape=(N, N)), b) ** 2)

    want = tg.grad(exact, argnums=(0, 1))(S[r, c], B)
    for solver in (cg, gmres):
        got = tg.grad(small, argnums=(0, 1))(S[r, c], B, solver)
        for a, w in zip(got, want):
            np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-20)


def test_values_and_right_hand_sides_that_are_not_numbers_raise():
    with pytest.raises(ValueError, match="spsolve: b hold NaN or infinity"):
        spsolve(sparse(DATA), np.full(N, np.nan))
    with pytest.raises(ValueError, match="spsolve: the matrix's values hold NaN"):
        spsolve(sparse(np.r_[np.inf, DATA[1:]]), B)
    with pytest.raises(ValueError, match="shape must be two non-negative ints"):
        csr_matrix((DATA, (ROW, COL)), shape=(7.5, 7))
    np.testing.assert_allclose(spsolve(sparse(DATA), list(B)), spsolve(sparse(DATA), B))
    with pytest.raises(TypeError, match="a tapegrad sparse matrix is not an array"):
        tnp.sum(sparse(DATA))
