"""SciPy's methods through tapegrad.integrate (Radau, BDF and LSODA for stiff systems,
RK23 and DOP853): values against SciPy's own solves, the adjoint gradients against
closed forms and central differences in every input (y0, parameters, times, closures),
the sparse adjoint Jacobian for many parameters, and the refusals and limits."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.integrate

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.integrate import IntegrationError, odeint, solve_ivp

from .helpers import central

ROBERTSON_K = np.array([0.04, 3e7, 1e4])
TS = np.array([0.0, 0.5, 4.0, 40.0])


def robertson(t, y, k):
    """A classic stiff chemical system (rates across eleven orders of magnitude)."""
    a = k[0] * y[0]
    b = k[2] * y[1] * y[2]
    c = k[1] * y[1] ** 2
    return tnp.stack([-a + b, a - b - c, c])


def robertson_numpy(t, y, k):
    a, b, c = k[0] * y[0], k[2] * y[1] * y[2], k[1] * y[1] ** 2
    return np.array([-a + b, a - b - c, c])


STIFF = ["Radau", "BDF", "LSODA"]


@pytest.mark.parametrize("method", [*STIFF, "RK23", "DOP853"])
def test_values_match_scipy(method):
    """The same steps as SciPy's solver given the exact Jacobian."""
    kw = dict(method=method, t_eval=TS, args=(ROBERTSON_K,), rtol=1e-8, atol=1e-12)
    if method in ("RK23", "DOP853"):  # explicit: a short, mildly stiff stretch
        kw["t_eval"] = TS[:2] * 0.01
    span = (0.0, kw["t_eval"][-1])
    ours = solve_ivp(robertson, span, np.array([1.0, 0.0, 0.0]), **kw)
    ref = scipy.integrate.solve_ivp(robertson_numpy, span, [1.0, 0.0, 0.0], **kw)
    np.testing.assert_allclose(ours.y, ref.y, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("method", STIFF)
def test_stiff_gradients(method):
    """Robertson's rates (in log space), against central differences of the solution."""

    def loss(logk):
        y = odeint(robertson, np.array([1.0, 0.0, 0.0]), TS, tnp.exp(logk), tfirst=True,
                   method=method, rtol=1e-10, atol=1e-14)  # fmt: skip
        return tnp.sum(y[:, 0] * np.arange(4.0)) + 1e4 * y[-1, 1] + y[-1, 2]

    x = np.log(ROBERTSON_K)
    # LSODA's own solution switches methods with the parameters: a looser check
    rtol = 1e-3 if method == "LSODA" else 1e-5
    np.testing.assert_allclose(
        tg.grad(loss)(x), central(lambda v: float(loss(v)), x, 1e-5), rtol=rtol, atol=1e-8
    )


@pytest.mark.parametrize("method", ["Radau", "BDF"])
def test_linear_stiff_system_in_closed_form(method):
    """y' = -diag(lam) (y - c(t)): every derivative in closed form, y0, rates, the times
    and a closure tensor included."""
    lam = np.array([1.0, 1e3, 1e5])
    shift = tg.tensor(0.3, requires_grad=True)

    def f(t, y, lam):
        return -lam * (y - shift)

    y0 = tg.tensor(np.array([1.0, 2.0, -1.0]), requires_grad=True)
    rates = tg.tensor(lam, requires_grad=True)
    t = tg.tensor(np.array([0.0, 1e-4, 0.01, 1.0]), requires_grad=True)
    y = odeint(f, y0, t, rates, tfirst=True, method=method, rtol=1e-9, atol=1e-11)
    w = np.linspace(0.5, 2.0, 12).reshape(4, 3)
    tnp.sum(y * w).backward()
    tv = t.numpy()[:, None]
    decay = np.exp(-lam * tv)  # (4, 3)
    np.testing.assert_allclose(y.numpy(), 0.3 + (y0.numpy() - 0.3) * decay, rtol=1e-7)
    np.testing.assert_allclose(y0.grad, np.sum(w * decay, 0), rtol=1e-6)
    np.testing.assert_allclose(shift.grad, np.sum(w * (1 - decay)), rtol=1e-6)
    d_lam = np.sum(w * -(tv - tv[0]) * (y0.numpy() - 0.3) * decay, 0)
    np.testing.assert_allclose(rates.grad, d_lam, rtol=1e-5, atol=1e-10)
    f_at = -lam * (y.numpy() - 0.3)  # dy_i/dt_i = f; dy_i/dt_0 = -f (autonomous)
    expect_t = np.sum(w * f_at, 1)
    expect_t[0] = -np.sum(w[1:] * f_at[1:])
    np.testing.assert_allclose(t.grad, expect_t, rtol=1e-5, atol=1e-6)


def test_many_parameters_use_the_sparse_adjoint():
    """A small network right-hand side with 303 parameters (the adjoint's Jacobian is
    sparse past 200 unknowns): Radau's gradient against RK45's discrete one."""
    rng = np.random.default_rng(0)
    W1 = tg.tensor(0.5 * rng.standard_normal((50, 3)), requires_grad=True)
    W2 = tg.tensor(0.5 * rng.standard_normal((3, 50)), requires_grad=True)
    b = tg.tensor(0.1 * rng.standard_normal(3), requires_grad=True)

    def f(y, t):
        return W2 @ tnp.tanh(W1 @ y) + b - 20.0 * y

    grads = []
    for method in ("Radau", "RK45"):
        y = odeint(f, np.array([1.0, -0.5, 0.2]), np.linspace(0.0, 1.0, 5), method=method,
                   rtol=1e-10, atol=1e-12)  # fmt: skip
        tnp.sum(y**2).backward()
        grads.append([W1.grad.copy(), W2.grad.copy(), b.grad.copy()])
        for p in (W1, W2, b):
            p.grad = None
    for a, r in zip(*grads):
        np.testing.assert_allclose(a, r, rtol=1e-5, atol=1e-9)


def test_float32_stays_float32():
    k = tg.tensor(np.array([0.5, 2.0], np.float32), requires_grad=True)
    y = odeint(lambda y, t, k: -k * y, np.ones(2, np.float32), [0.0, 1.0], k, method="BDF")
    assert y.dtype == np.float32
    y[-1].sum().backward()
    assert k.grad.dtype == np.float32
    np.testing.assert_allclose(k.grad, -np.exp(-k.numpy()), rtol=1e-3)


def test_a_branching_right_hand_side():
    """A Python branch on a value (guards) drives each evaluation correctly."""

    def f(t, y, k):
        return -k * y if t < 0.5 else -2.0 * k * y

    k = tg.tensor(3.0, requires_grad=True)
    sol = solve_ivp(f, (0.0, 1.0), np.array([1.0]), method="Radau", args=(k,),
                    t_eval=[1.0], rtol=1e-10, atol=1e-12)  # fmt: skip
    sol.y[0, 0].backward()
    np.testing.assert_allclose(sol.y.numpy()[0, 0], np.exp(-4.5), rtol=1e-6)
    np.testing.assert_allclose(k.grad, -1.5 * np.exp(-4.5), rtol=1e-5)


def test_refusals_and_limits():
    f = lambda y, t: -1e4 * y  # noqa: E731
    with pytest.raises(ValueError, match="'Radau' is differentiated through the continuous"):
        odeint(f, np.ones(1), [0.0, 1.0], method="Radau", adjoint=False)
    with pytest.raises(IntegrationError, match="more than max_steps=3 steps"):
        odeint(f, np.ones(1), [0.0, 1.0], method="BDF", max_num_steps=3)
    with pytest.raises(IntegrationError, match="more than max_steps=3 steps"):
        odeint(f, np.ones(1), [0.0, 1.0], max_num_steps=3)
    with pytest.raises(ValueError, match="two names of one limit"):
        odeint(f, np.ones(1), [0.0, 1.0], max_steps=5, max_num_steps=3)
    with pytest.raises(ValueError, match="max_steps must be a positive integer"):
        solve_ivp(lambda t, y: -y, (0.0, 1.0), np.ones(1), max_num_steps=0)
    with pytest.raises(IntegrationError, match="returned nan or inf at t = "):
        odeint(lambda y, t: y / (t - t), np.ones(1), [0.0, 1.0], method="Radau")
    k = tg.tensor(1.0, requires_grad=True)
    with pytest.raises(NotImplementedError, match=r"second derivatives.*odeint"):
        tg.hessian(lambda k: odeint(lambda y, t, k: -k * y, np.ones(1), [0.0, 1.0], k,
                                    method="Radau")[-1, 0])(1.0)  # fmt: skip
    assert k.grad is None


def test_stiff_events():
    """Events work with the stiff methods: a Van der Pol oscillator (mu = 1000) crossing
    zero, and the derivative of that time in mu against central differences."""

    def vdp(t, y, mu):
        return tnp.stack([y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]])

    def zero(t, y, mu):
        return y[0]

    zero.terminal = True

    def first_zero(mu):
        sol = solve_ivp(vdp, (0.0, 3000.0), np.array([2.0, 0.0]), method="Radau",
                        events=zero, args=(mu,), rtol=1e-9, atol=1e-11)  # fmt: skip
        return sol.t_events[0][0]

    mu = 1000.0
    assert 800.0 < float(first_zero(mu)) < 820.0  # ~ (3 - 2 ln 2) mu
    np.testing.assert_allclose(
        tg.grad(first_zero)(mu), central(lambda m: float(first_zero(m)), mu, 1e-2), rtol=1e-5
    )


def _vdp(t, y, mu):
    return tnp.stack([y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]])


def _vdp_numpy(t, y, mu):
    return np.array([y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]])


@pytest.mark.parametrize("method", STIFF)
def test_stiff_adjoint_accuracy(method):
    """A relaxation oscillation (Van der Pol, mu = 1000, over 1000): d y(T) / d y0 at
    tolerances 1e-6 against central differences of SciPy's LSODA at 1e-10. The adjoint
    reads y(t) from a tighter Radau solve: the forward's own interpolants, at the same
    tolerances, were 10-30 % off here."""

    def final(a, method="LSODA", tol=1e-10):
        sol = scipy.integrate.solve_ivp(_vdp_numpy, (0.0, 1000.0), [a, 0.0], method=method,
                                        args=(1000.0,), rtol=tol, atol=tol)  # fmt: skip
        return sol.y[0, -1]

    want = (final(2.0 + 1e-5) - final(2.0 - 1e-5)) / 2e-5
    got = tg.grad(
        lambda a: solve_ivp(_vdp, (0.0, 1000.0), tnp.stack([a, 0.0]), method=method,
                            t_eval=[0.0, 1000.0], args=(1000.0,), rtol=1e-6, atol=1e-6).y[0, -1]
    )(2.0)  # fmt: skip
    np.testing.assert_allclose(got, want, rtol=2e-3)


def test_rk45_through_a_stiff_stretch_refuses_its_reverse_pass():
    """RK45's steps held at its stability limit (Van der Pol, mu = 100): the reverse pass
    through them would amplify without bound (1e95 for a gradient of -1.03); it raises
    and names the stiff methods. The values are fine."""

    def final(a):
        return solve_ivp(_vdp, (0.0, 50.0), tnp.stack([a, 0.0]), args=(100.0,), rtol=1e-8,
                         atol=1e-8).y[0, -1]  # fmt: skip

    assert abs(float(final(2.0))) < 3.0
    with pytest.raises(IntegrationError, match=r"stiff from t = .*method='Radau'"):
        tg.grad(final)(2.0)


def test_an_infinite_jacobian_takes_a_difference_quotient():
    """f = -sqrt(y) at y = 0: Newton's iterations take a difference quotient where f_y is
    infinite (as SciPy's own Jacobian would), so the solve runs."""
    f = lambda t, y: -tnp.sqrt(tnp.abs(y) + 0.0)  # noqa: E731
    for method in ("Radau", "BDF"):
        sol = solve_ivp(f, (0.0, 1.0), np.array([0.0, 1.0]), method=method, rtol=1e-8)
        np.testing.assert_allclose(sol.y[:, -1], [0.0, 0.25], atol=1e-6)
