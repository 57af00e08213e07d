"""tapegrad.scipy.optimize: SciPy's solvers as black boxes, differentiated implicitly.

Each derivative is checked against central differences of the solution map (SciPy run
again at shifted arguments, converged tightly) in float64, at second order against
differences of the first, and where there is one against the closed form. Solutions
that are not (a bound is active, a solver stopped short) raise.
"""

from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.scipy import optimize

from .helpers import central_jacobian


def system(x, a):
    return tnp.stack([x[0] ** 2 + x[1] - a[0], x[0] - x[1] ** 3 - a[1]])


def solve_system(a):
    return optimize.root(system, np.array([1.0, 0.5]), args=(a,), tol=1e-14).x


A = np.array([2.0, 0.3])


def test_root_first_and_second_order():
    jac = tg.jacobian(solve_system)(A)
    np.testing.assert_allclose(jac, central_jacobian(solve_system, A), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(tg.jacfwd(solve_system)(A), jac, atol=1e-10)

    def energy(a):
        return tnp.sum(solve_system(a) ** 2)

    hess = tg.hessian(energy)(A)
    np.testing.assert_allclose(hess, central_jacobian(tg.grad(energy), A), rtol=1e-5, atol=1e-7)


def rosen(x, c):
    return (c[0] - x[0]) ** 2 + c[1] * (x[1] - x[0] ** 2) ** 2


def argmin(c, **kw):
    return optimize.minimize(rosen, np.array([0.5, 0.5]), args=(c,), tol=1e-14, **kw).x


C = np.array([1.2, 10.0])


@pytest.mark.parametrize("method", ["BFGS", "L-BFGS-B", "trust-constr"])
def test_minimize_argmin_and_minimum(method):
    jac = tg.jacobian(lambda c: argmin(c, method=method))(C)
    # the minimiser is (c0, c0^2): its Jacobian is [[1, 0], [2 c0, 0]]
    np.testing.assert_allclose(jac, [[1.0, 0.0], [2 * C[0], 0.0]], atol=1e-6)

    def minimum(c):
        return optimize.minimize(rosen, np.array([0.5, 0.5]), args=(c,), tol=1e-14).fun

    # the envelope theorem: d min / dc = d rosen / dc at the minimiser
    np.testing.assert_allclose(
        tg.grad(minimum)(C + 0.3), central_jacobian(minimum, C + 0.3), atol=1e-6
    )


def test_minimize_second_order():
    def f(c):
        return tnp.sum(argmin(c) ** 3)

    np.testing.assert_allclose(
        tg.hessian(f)(C), central_jacobian(tg.grad(f), C), rtol=1e-5, atol=1e-6
    )


def test_least_squares_nonlinear_fit():
    t = np.linspace(0.0, 2.0, 12)

    def fit(y):
        return optimize.least_squares(
            lambda p, y: p[0] * tnp.exp(-p[1] * t) - y,
            np.array([1.0, 1.0]),
            args=(y,),
            xtol=1e-15,
            ftol=1e-15,
            gtol=1e-15,
            method="lm",
        ).x

    y = 2.0 * np.exp(-0.7 * t) + 0.05 * np.sin(5 * t)
    # (steps of 1e-4: the solver's own stopping noise stays far below them)
    np.testing.assert_allclose(
        tg.jacobian(fit)(y), central_jacobian(fit, y, 1e-4), rtol=1e-5, atol=1e-7
    )


def test_brentq_and_root_scalar():
    def cbrt(c):
        return optimize.brentq(lambda x, c: x**3 - c, 0.0, 10.0, args=(c,))

    assert float(cbrt(27.0)) == pytest.approx(3.0, rel=1e-12)
    assert float(tg.grad(cbrt)(8.0)) == pytest.approx(1 / 12, rel=1e-10)
    assert float(tg.grad(tg.grad(cbrt))(8.0)) == pytest.approx(-2 / 9 * 8 ** (-5 / 3), rel=1e-8)
    res = optimize.root_scalar(lambda x, c: tnp.cos(x) - c * x, args=(0.5,), x0=1.0)
    x = float(res.root)
    assert np.cos(x) == pytest.approx(0.5 * x, abs=1e-12)
    g = tg.grad(
        lambda c: optimize.root_scalar(lambda x, c: tnp.cos(x) - c * x, args=(c,), x0=1.0).root
    )
    # d x / dc = -x / (sin x + c)
    assert float(g(0.5)) == pytest.approx(-x / (np.sin(x) + 0.5), rel=1e-8)


def test_under_compile():
    step = tg.compile(lambda a: tnp.sum(solve_system(a) ** 2))
    for a in (A, A + 0.1, A - 0.05):
        value, grad = step.value_and_grad(a)
        assert value == pytest.approx(float(np.sum(np.asarray(solve_system(a)) ** 2)), rel=1e-12)
        np.testing.assert_allclose(grad, tg.grad(lambda b: tnp.sum(solve_system(b) ** 2))(a))
    assert step.stats["captures"] == 1


def test_what_would_be_wrong_raises():
    # an active bound: the minimum is not stationary
    with pytest.raises(RuntimeError, match="minimize: the minimum lies on an active bound"):
        tg.grad(lambda c: tnp.sum(argmin(c, method="L-BFGS-B", bounds=[(0, 1), (0, 1)])))(C)
    # a solver stopped short
    with pytest.raises(RuntimeError, match=r"root: the solver did not converge: max \|F\(x\)\|"):
        optimize.root(system, np.array([1.0, 0.5]), args=(A,), options={"maxfev": 2})
    with pytest.raises(TypeError, match="least_squares: bounds are not supported"):
        optimize.least_squares(lambda p: p, np.ones(2), bounds=(0, 1))
    with pytest.raises(TypeError, match=r"root: parameter leaf 0 \(str, not a number\)"):
        optimize.root(system, np.ones(2), args=("a",))

    # a zero derivative at the root: x^2 = c at c = 0
    def cbrt(c):
        return optimize.brentq(lambda x, c: x**3 - c, -1.0, 1.0, args=(c,))

    with pytest.raises(RuntimeError, match="dF/dx is singular"):
        tg.grad(cbrt)(0.0)
    with pytest.raises(RuntimeError, match="dF/dx is singular"):  # recorded, second order
        tg.grad(tg.grad(cbrt))(0.0)


def test_points_that_only_look_like_solutions_raise():
    """Each of these gave a plausible derivative of the wrong point."""
    # a flat objective: the gradient is tiny everywhere, L-BFGS-B stops at once
    flat = lambda x, c: 1e-6 * tnp.sum((x - c) ** 2)  # noqa: E731
    with pytest.raises(RuntimeError, match="minimize: the returned point is not a solution"):
        tg.grad(lambda c: optimize.minimize(flat, np.array([0.5]), args=(c,)).x[0])(3.0)
    # a maximum is stationary too
    hill = lambda x, c: tnp.sum(x**4 / 4 - x**2 / 2 + c * x)  # noqa: E731
    with pytest.raises(RuntimeError, match="stationary but not a minimum"):
        optimize.minimize(hill, np.zeros(1), args=(0.0,), method="BFGS")

    # a continuum of minimisers: forward mode must not pick one quietly
    def argmin(c):
        return optimize.minimize(
            lambda x, c: (0.3 * x[0] + 0.7 * x[1] - c) ** 2,
            np.array([0.1, -0.2]),
            args=(c,),
            method="BFGS",
            tol=1e-14,
        ).x

    with pytest.raises(RuntimeError, match="minimize: dF/dx is singular"):
        tg.jvp(argmin, (1.3,), (1.0,))
    with pytest.raises(RuntimeError, match="minimize: dF/dx is singular"):
        tg.jacobian(argmin)(1.3)
    # a robust loss is not the linear normal equations the derivative uses
    with pytest.raises(TypeError, match="only loss='linear'"):
        optimize.least_squares(lambda p: p - 1.0, np.zeros(2), loss="cauchy")


def test_a_parameter_read_through_a_closure_raises():
    b = np.array([0.5, -0.3])

    def through_closure(b):
        x = tg.fixed_point(lambda x: tnp.tanh(0.2 * x + b), np.zeros(2), tol=1e-13)
        return tnp.sum(x**2) + tnp.sum(b)

    with pytest.raises(RuntimeError, match="primitive fixed_point reads a tensor that requires"):
        tg.grad(through_closure)(b)
    with pytest.raises(RuntimeError, match="primitive root_scalar reads a tensor that requires"):
        tg.grad(lambda c: optimize.brentq(lambda x: x**3 - c, 0.0, 10.0) + c)(8.0)


def test_scipys_calling_conventions():
    import warnings

    # args as one value, as SciPy allows
    assert float(optimize.brentq(lambda x, c: x**2 - c, 0.0, 4.0, args=4.0)) == pytest.approx(2.0)
    # a 0-d guess gives a 0-d answer
    assert np.shape(optimize.root(lambda x, a: x**2 - a, np.array(1.0), args=(4.0,)).x) == ()
    # methods that take no derivative are not given one (SciPy would warn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        optimize.minimize(
            rosen,
            np.array([0.5, 0.5]),
            args=(C,),
            method="Nelder-Mead",
            options={"xatol": 1e-12, "fatol": 1e-14, "maxiter": 4000},
        )
        optimize.root(system, np.array([1.0, 0.5]), args=(A,), method="krylov", tol=1e-13)
    # a bracket or a start computed from tensors: the root does not depend on them
    c = tg.tensor(8.0, requires_grad=True)
    root = optimize.brentq(lambda x, c: x**3 - c, c * 0.0, c, args=(c,))
    root.backward()
    assert float(c.grad) == pytest.approx(1 / 12, rel=1e-10)
    r = optimize.root_scalar(lambda x, c: x**2 - c, args=(4.0,), x0=tg.tensor(1.0))
    assert float(r.root) == pytest.approx(2.0)
    with pytest.raises(TypeError, match="minimize: jac must be a function or None"):
        optimize.minimize(rosen, np.zeros(2), args=(C,), jac=True)
