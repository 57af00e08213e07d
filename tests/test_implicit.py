"""Implicit differentiation through solvers: ``tg.fixed_point`` and ``tg.custom_root``.

Each derivative is checked against unrolled differentiation of the converged iteration
(``unroll=True``: every step recorded) and against central differences of the solution
map in float64; second order against differences of the first. The ways a solver could
hand back a wrong derivative quietly (stopped short, NaN, a singular Jacobian, a wrong
shape) each raise.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import implicit

from .helpers import central_jacobian

RNG = np.random.default_rng(3)
N = 5
A = 0.4 * RNG.standard_normal((N, N)) / np.sqrt(N)  # a contraction: |A| < 1
B = RNG.standard_normal(N)
W = RNG.standard_normal(N)
X0 = np.zeros(N)


def layer(x, a, b):
    """A deep-equilibrium layer: x = tanh(a x + b)."""
    return tnp.tanh(a @ x + b)


def loss(a, b, unroll=False):
    x = tg.fixed_point(layer, X0, a, b, tol=1e-13, unroll=unroll)
    return tnp.sum(x**2 * W)


def test_the_fixed_point_is_one():
    x = tg.fixed_point(layer, X0, A, B, tol=1e-13)
    np.testing.assert_allclose(x, np.tanh(A @ x + B), atol=1e-12)


def test_gradients_match_the_unrolled_iteration_and_differences():
    ga, gb = tg.grad(loss, argnums=(0, 1))(A, B)
    ua, ub = tg.grad(lambda a, b: loss(a, b, unroll=True), argnums=(0, 1))(A, B)
    np.testing.assert_allclose(ga, ua, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(gb, ub, rtol=1e-9, atol=1e-11)
    fd = central_jacobian(lambda b: float(loss(A, b)), B)
    np.testing.assert_allclose(gb, fd, rtol=1e-6, atol=1e-8)


def test_second_order_and_forward_mode():
    """The rules are recorded when differentiated again: the Hessian in b matches
    differences of the gradient, and forward mode matches reverse mode."""
    hess = tg.hessian(lambda b: loss(A, b))(B)
    fd = central_jacobian(lambda b: tg.grad(lambda c: loss(A, c))(b), B)
    np.testing.assert_allclose(hess, fd, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(hess, hess.T, atol=1e-10)

    def solution(b):
        return tg.fixed_point(layer, X0, A, b, tol=1e-13)

    np.testing.assert_allclose(tg.jacfwd(solution)(B), tg.jacobian(solution)(B), atol=1e-10)
    np.testing.assert_allclose(tg.jacfwd(tg.grad(lambda b: loss(A, b)))(B), hess, atol=1e-8)


def test_matrix_free_solve_above_the_dense_size(monkeypatch):
    def no_dense(*args):
        raise AssertionError("the dense solve ran")

    monkeypatch.setattr(implicit, "_dense_solve", no_dense)
    n = implicit.DENSE_MAX + 44
    rng = np.random.default_rng(5)
    a = 0.5 * rng.standard_normal((n, n)) / np.sqrt(n)
    b = rng.standard_normal(n)
    w = rng.standard_normal(n)

    def big(b, unroll=False):
        x = tg.fixed_point(layer, np.zeros(n), a, b, tol=1e-13, unroll=unroll)
        return tnp.sum(x**2 * w)

    np.testing.assert_allclose(
        tg.grad(big)(b), tg.grad(lambda c: big(c, unroll=True))(b), rtol=1e-6, atol=1e-9
    )


def test_parameters_as_a_pytree_and_the_guess_gets_no_gradient():
    def f(p, x0):
        x = tg.fixed_point(lambda x, q: layer(x, q["a"], q["b"]), x0, p, tol=1e-13)
        return tnp.sum(x**2 * W)

    gp, gx0 = tg.grad(f, argnums=(0, 1))({"a": A, "b": B}, X0)
    np.testing.assert_allclose(gp["b"], tg.grad(lambda b: loss(A, b))(B), rtol=1e-12)
    np.testing.assert_allclose(gp["a"], tg.grad(lambda a: loss(a, B))(A), rtol=1e-12)
    np.testing.assert_array_equal(gx0, np.zeros(N))


def test_float32_stays_float32():
    a32, b32 = A.astype(np.float32), B.astype(np.float32)
    x = tg.fixed_point(layer, X0.astype(np.float32), a32, b32, tol=1e-6)
    assert x.dtype == np.float32
    g = tg.grad(lambda b: tnp.sum(tg.fixed_point(layer, X0.astype(np.float32), a32, b, tol=1e-6)))(
        b32
    )
    assert g.dtype == np.float32
    want = tg.grad(lambda b: tnp.sum(tg.fixed_point(layer, X0, A, b, tol=1e-13)))(B)
    np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5)


def _root_solve(g, x0):
    return scipy.optimize.root(g, x0, tol=1e-14).x


def test_custom_root_against_differences_and_to_second_order():
    """Kepler's equation: the eccentric anomaly E with E - e sin E = M."""
    m = np.array([0.3, 1.1, 2.5])

    def anomaly(e):
        return tg.custom_root(
            lambda x, e: x - e * tnp.sin(x) - m, m.copy(), _root_solve, None, e, tol=1e-12
        )

    e = 0.4
    np.testing.assert_allclose(
        tg.jacobian(anomaly)(e), central_jacobian(anomaly, e), rtol=1e-6, atol=1e-9
    )
    # dE/de = sin E / (1 - e cos E), by hand
    E = np.asarray(anomaly(e))
    np.testing.assert_allclose(tg.jacobian(anomaly)(e), np.sin(E) / (1 - e * np.cos(E)), rtol=1e-10)
    second = tg.jacfwd(tg.jacobian(anomaly))(e)
    np.testing.assert_allclose(
        second, central_jacobian(tg.jacobian(anomaly), e), rtol=1e-5, atol=1e-8
    )


def test_custom_root_with_its_own_tangent_solve():
    """A user's tangent solve, written in tapegrad ops: a scalar root's is y / lin(1)."""

    def cbrt(a):
        return tg.custom_root(
            lambda x, a: x**3 - a,
            1.0,
            lambda g, x0: scipy.optimize.brentq(g, 0.0, 10.0, xtol=1e-15),
            lambda lin, y: y / lin(1.0),
            a,
        )

    assert float(tg.grad(cbrt)(8.0)) == pytest.approx(1 / 12, rel=1e-12)
    assert float(tg.grad(tg.grad(cbrt))(8.0)) == pytest.approx(-2 / 9 * 8 ** (-5 / 3), rel=1e-10)


def test_under_compile_each_replay_solves_again():
    step = tg.compile(lambda b: loss(A, b))
    for _ in range(4):
        b = RNG.standard_normal(N)
        value, grad = step.value_and_grad(b)
        assert value == pytest.approx(float(loss(A, b)), rel=1e-12)
        np.testing.assert_allclose(grad, tg.grad(lambda c: loss(A, c))(b), rtol=1e-10)
    assert step.stats["captures"] == 1


def test_what_would_be_wrong_raises():
    # stopped short
    with pytest.raises(RuntimeError, match=r"fixed_point: no convergence in 3 iterations"):
        tg.fixed_point(layer, X0, A, B, max_iter=3)
    # NaN
    with pytest.raises(RuntimeError, match="fixed_point: the iteration produced non-finite"):
        tg.fixed_point(lambda x, b: tnp.log(x - 10.0) + b, X0, B)
    # a solver that returns something else than a root
    with pytest.raises(RuntimeError, match=r"custom_root: the solver did not converge: max \|F"):
        tg.custom_root(lambda x, a: x**2 - a, 1.0, lambda g, x0: x0, None, 2.0)
    # a singular Jacobian at the root: x = a is a double root of (x - a)^2
    with pytest.raises(RuntimeError, match="custom_root: dF/dx is singular"):
        tg.grad(
            lambda a: tg.custom_root(
                lambda x, a: (x - a) ** 2, 1.0, lambda g, x0: np.float64(1.5), None, a
            )
        )(1.5)
    # a residual of another shape than x
    with pytest.raises(ValueError, match=r"fixed_point: f returned shape \(2,\)"):
        tg.fixed_point(lambda x, b: b[:2] * 0.0, X0, B)
    # a parameter that is not an array
    with pytest.raises(TypeError, match=r"fixed_point: parameter leaf 1 \(str, not a number\)"):
        tg.fixed_point(layer, X0, A, "b")
    # an integer array is an index or a count, not something to differentiate
    with pytest.raises(TypeError, match=r"parameter leaf 1 \(ndarray, of dtype int64\)"):
        tg.fixed_point(lambda x, a, k: x * 0.5 + a[k], np.zeros(2), B, np.array([0, 1]))
    # the graph is left as it was: a later call works
    np.testing.assert_allclose(tg.grad(lambda b: loss(A, b))(B), tg.grad(lambda b: loss(A, b))(B))
