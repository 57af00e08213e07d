"""tapegrad.integrate: ODE solutions against SciPy, both gradients against central
differences and each other, the compiled inner loop, constant adjoint memory, and the
ways a wrong number could slip out (closures, branches, threads, float32, bad input)."""

from __future__ import annotations

import threading
import tracemalloc

import numpy as np
import pytest
import scipy.integrate
import scipy.stats

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.integrate import IntegrationError, odeint, solve_ivp

from .helpers import central

THETA = np.array([1.0, 0.1, 1.5, 0.075])  # Lotka-Volterra
Y0 = np.array([10.0, 5.0])
TIGHT = dict(rtol=1e-11, atol=1e-11)


def lotka_volterra(y, t, a, b, c, d):
    return tnp.stack([a * y[0] - b * y[0] * y[1], d * y[0] * y[1] - c * y[1]])


def lv_numpy(t, y, a, b, c, d):
    return [a * y[0] - b * y[0] * y[1], d * y[0] * y[1] - c * y[1]]


def forced(t, y, k, m):
    """Non-autonomous, with a vector and a matrix parameter."""
    return -k * y + tnp.sin(t) * (m @ y) + 0.1 * t


K = np.array([0.7, 1.1, 0.2])
M = np.array([[0.0, 0.3, -0.2], [0.1, 0.0, 0.4], [-0.3, 0.2, 0.0]])
F_Y0 = np.array([1.0, 2.0, 0.5])
F_T = np.array([0.3, 0.93, 1.71, 2.05])  # steps of 0.04 do not divide these intervals
WEIGHTS = np.linspace(-1.0, 2.0, 12).reshape(4, 3)


# --- values --------------------------------------------------------------------------
def test_rk45_takes_scipys_steps():
    """Without t_eval, solve_ivp returns SciPy's own step points (same control)."""
    ours = solve_ivp(lv_numpy, (0.0, 15.0), Y0, args=tuple(THETA))
    ref = scipy.integrate.solve_ivp(lv_numpy, (0.0, 15.0), Y0, args=tuple(THETA))
    assert ours.success and ours.status == 0
    np.testing.assert_allclose(ours.t, ref.t, rtol=1e-12)
    np.testing.assert_allclose(ours.y, ref.y, rtol=1e-9)
    assert ours.nfev == ref.nfev


@pytest.mark.parametrize("rtol", [1e-4, 1e-7, 1e-10])
def test_values_match_scipy_at_matching_tolerances(rtol):
    t = np.linspace(0.0, 15.0, 31)
    ys = odeint(lotka_volterra, Y0, t, *THETA, rtol=rtol, atol=rtol * 1e-2)
    ref = scipy.integrate.solve_ivp(
        lv_numpy, (0.0, 15.0), Y0, t_eval=t, args=tuple(THETA), rtol=1e-13, atol=1e-13,
        method="DOP853",
    )  # fmt: skip
    err = np.max(np.abs(ys - ref.y.T) / (np.abs(ref.y.T) + 1e-2))
    assert err < 200 * rtol


def test_rk4_is_classic_rk4():
    """One RK4 step of y' = y from y = 1 is the degree-4 Taylor polynomial of e^h."""
    h = 0.3
    ys = odeint(lambda y, t: y, np.array([1.0]), [0.0, h], method="RK4")
    assert ys[1, 0] == pytest.approx(1 + h + h**2 / 2 + h**3 / 6 + h**4 / 24, rel=1e-15)
    fine = odeint(lambda y, t: y, np.array([1.0]), [0.0, 1.0], method="RK4", step=1e-3)
    assert fine[1, 0] == pytest.approx(np.e, rel=1e-12)


def test_backward_in_time_and_shapes():
    t = np.array([2.0, 1.0, 0.0])  # decreasing
    ys = odeint(lambda y, t: -y, np.ones((2, 3)), t, **TIGHT)
    assert ys.shape == (3, 2, 3)
    np.testing.assert_allclose(ys[2], np.full((2, 3), np.e**2), rtol=1e-9)
    single = odeint(lambda y, t: -y, np.ones(2), [0.5])
    np.testing.assert_array_equal(single, np.ones((1, 2)))


def test_solve_ivp_t_eval_inside_span():
    te = np.linspace(1.0, 3.0, 5)
    r = solve_ivp(lambda t, y: -0.5 * y, (0.0, 3.0), np.array([2.0]), t_eval=te, **TIGHT)
    np.testing.assert_array_equal(r.t, te)
    assert r.y.shape == (1, 5)
    np.testing.assert_allclose(r.y[0], 2 * np.exp(-0.5 * te), rtol=1e-9)


# --- gradients -----------------------------------------------------------------------
def _forced_loss(method, adjoint, **kw):
    def loss(y0, t, k, m):
        return tnp.sum(
            odeint(forced, y0, t, k, m, tfirst=True, method=method, adjoint=adjoint, **kw) * WEIGHTS
        )

    return loss


@pytest.mark.parametrize(
    "method, adjoint, kw, tol",
    [
        ("RK4", False, dict(step=0.04), 1e-7),  # exact for the discrete solution
        ("RK4", True, dict(step=0.01), 1e-5),  # the adjoint: RK4's truncation error
        ("RK45", False, TIGHT, 1e-6),
        ("RK45", True, TIGHT, 1e-6),
    ],
)
def test_gradients_against_central_differences(method, adjoint, kw, tol):
    loss = _forced_loss(method, adjoint, **kw)
    args = [F_Y0, F_T, K, M]
    tensors = [tg.tensor(a.copy(), requires_grad=True) for a in args]
    loss(*tensors).backward()
    plain = _forced_loss(method, False, **kw)
    for i, t in enumerate(tensors):

        def f(x, i=i):
            vals = list(args)
            vals[i] = x
            return float(plain(*vals))

        fd = central(f, args[i])
        np.testing.assert_allclose(t.grad, fd, atol=tol, rtol=tol, err_msg=f"argument {i}")


def test_direct_and_adjoint_agree():
    t = np.linspace(0.0, 10.0, 21)
    grads = []
    for adjoint in (False, True):
        p = tg.tensor(THETA.copy(), requires_grad=True)
        y0 = tg.tensor(Y0.copy(), requires_grad=True)
        ys = odeint(lotka_volterra, y0, t, p[0], p[1], p[2], p[3], adjoint=adjoint, **TIGHT)
        tnp.sum(tnp.log(ys)).backward()
        grads.append(np.concatenate([p.grad, y0.grad]))
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-7)


def test_time_gradients_are_f_at_the_ends():
    """dL/dt_i = <g_i, f(t_i, y_i)>, dL/dt_0 = -<a(t_0), f(t_0, y_0)> for y' = -y."""
    for adjoint in (False, True):
        t = tg.tensor(np.array([0.0, 1.0, 2.0]), requires_grad=True)
        ys = odeint(lambda y, t: -y, np.array([1.0]), t, adjoint=adjoint, **TIGHT)
        tnp.sum(ys).backward()
        e1, e2 = np.exp(-1.0), np.exp(-2.0)
        np.testing.assert_allclose(t.grad, [e1 + e2, -e1, -e2], rtol=1e-8)


def test_float32_stays_float32():
    y0 = tg.tensor(F_Y0.astype(np.float32), requires_grad=True)
    k = tg.tensor(K.astype(np.float32), requires_grad=True)
    for adjoint in (False, True):
        ys = odeint(lambda t, y, k: -k * y, y0, F_T, k, tfirst=True, adjoint=adjoint)
        assert ys.dtype == np.float32
        tnp.sum(ys).backward()
        assert y0.grad.dtype == np.float32 and k.grad.dtype == np.float32
        exact = np.sum(np.exp(-K[None] * (F_T[:, None] - F_T[0])), axis=0)
        np.testing.assert_allclose(y0.grad, exact, rtol=1e-5)
        y0.grad = k.grad = None


# --- a right-hand side reading tensors from outside ----------------------------------
def test_closure_tensors_get_gradients_and_new_values():
    k = tg.tensor(K.copy(), requires_grad=True)

    def f(t, y):
        return -k * y

    dt = F_T[:, None] - F_T[0]
    for adjoint in (False, True):
        ys = odeint(f, F_Y0, F_T, tfirst=True, adjoint=adjoint, **TIGHT)
        tnp.sum(ys).backward()
        np.testing.assert_allclose(ys.numpy(), F_Y0 * np.exp(-K * dt), rtol=1e-9)
        exact = np.sum(-F_Y0 * dt * np.exp(-K * dt), axis=0)
        np.testing.assert_allclose(k.grad, exact, rtol=1e-7)
        k.grad = None
    k = tg.tensor(2 * K, requires_grad=True)  # a new tensor under the same name
    ys = odeint(f, F_Y0, F_T, tfirst=True, **TIGHT)
    np.testing.assert_allclose(ys.numpy(), F_Y0 * np.exp(-2 * K * dt), rtol=1e-9)


def test_closure_modified_between_solve_and_backward_raises():
    k = tg.tensor(K.copy(), requires_grad=True)
    for adjoint in (False, True):
        ys = odeint(lambda t, y: -k * y, F_Y0, F_T, tfirst=True, adjoint=adjoint)
        with tg.no_grad():
            k[0] = 5.0
        with pytest.raises(RuntimeError, match="modified in place"):
            tnp.sum(ys).backward()
        with tg.no_grad():
            k[0] = K[0]


@pytest.mark.filterwarnings("ignore:.*changed calls")  # the test's own call counter
def test_python_branch_on_a_value():
    """A guard fails mid-solve: the solve reruns driven by Python, and gives what the
    same computation written without a branch (tnp.where) gives."""
    calls = []

    def branchy(y, t, c):
        calls.append(1)
        return -c * y if t < 0.5 else -2 * c * y

    def where(y, t, c):
        return -c * y * tnp.where(t < 0.5, 1.0, 2.0)

    for adjoint in (False, True):
        results = []
        for f in (branchy, where):
            y0 = tg.tensor(np.array([1.0]), requires_grad=True)
            c = tg.tensor(1.0, requires_grad=True)
            ys = odeint(f, y0, [0.0, 0.3, 1.0], c, adjoint=adjoint, method="RK4", step=0.01)
            ys[-1].sum().backward()
            results.append([ys.numpy().ravel(), y0.grad, c.grad])
        for got, want in zip(*results):
            np.testing.assert_allclose(got, want, rtol=1e-13)
        np.testing.assert_allclose(results[0][0][-1], np.exp(-1.5), rtol=5e-3)  # O(h) at the jump
    assert len(calls) == 2  # each branch captured once


@pytest.mark.filterwarnings("ignore:.*changed calls")
def test_compiled_loop_runs_no_python_per_step():
    calls = []

    def f(y, t, a, b, c, d):
        calls.append(1)
        return lotka_volterra(y, t, a, b, c, d)

    p = tg.tensor(THETA.copy(), requires_grad=True)
    for adjoint in (False, True):
        ys = odeint(f, Y0, np.linspace(0, 5, 11), p[0], p[1], p[2], p[3], adjoint=adjoint)
        tnp.sum(ys).backward()
    assert len(calls) == 1  # captured once, replayed for thousands of evaluations


def test_threads_share_a_function():
    k = tg.tensor(K.copy(), requires_grad=True)

    def f(t, y, s):
        return -s * k * y

    results = {}

    def work(s):
        ss = tg.tensor(s, requires_grad=True)
        for _ in range(5):
            ys = odeint(f, F_Y0, F_T, ss, tfirst=True, method="RK4", step=0.01)
            tnp.sum(ys).backward()
            g, ss.grad = ss.grad, None
        results[s] = (ys[-1].numpy(), g)

    threads = [threading.Thread(target=work, args=(s,)) for s in (0.5, 1.0, 2.0)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert k.grad is not None  # the shared closure tensor collected every thread's part
    dt = F_T[-1] - F_T[0]
    for s, (last, g) in results.items():
        np.testing.assert_allclose(last, F_Y0 * np.exp(-s * K * dt), rtol=1e-8)
        fd = central(
            lambda q: float(np.sum(odeint(lambda t, y, c: -c * K * y, F_Y0, F_T, float(q),
                                          tfirst=True, method="RK4", step=0.01))),
            np.array(s),
        )  # fmt: skip
        assert g == pytest.approx(float(fd), rel=1e-6)


# --- memory ----------------------------------------------------------------------------
def _peak(adjoint, steps):
    p = tg.tensor(THETA.copy(), requires_grad=True)
    t = np.array([0.0, 10.0])
    ys = odeint(lotka_volterra, Y0, t, p[0], p[1], p[2], p[3], method="RK4", step=10 / steps,
                adjoint=adjoint)  # fmt: skip
    tnp.sum(ys).backward()  # compile and capture outside the measurement
    tracemalloc.start()
    ys = odeint(lotka_volterra, Y0, t, p[0], p[1], p[2], p[3], method="RK4", step=10 / steps,
                adjoint=adjoint)  # fmt: skip
    tnp.sum(ys).backward()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def test_adjoint_memory_is_flat_in_the_number_of_steps():
    small, large = _peak(True, 200), _peak(True, 20000)
    assert large < small + 64 * 1024  # 100x the steps, no growth to speak of
    # the discrete reverse pass keeps every step: it grows (sanity check of the probe)
    assert _peak(False, 20000) > _peak(False, 200) + 20000 * 4 * 2 * 8


# --- errors ----------------------------------------------------------------------------
def test_nan_right_hand_side():
    with pytest.raises(IntegrationError, match="nan or inf at t = 0"):
        odeint(lambda y, t: tnp.log(y - 2.0), np.array([1.0]), [0.0, 1.0])
    with pytest.raises(IntegrationError, match="nan or inf"):
        odeint(lambda y, t: -y, np.array([np.nan]), [0.0, 1.0])
    with pytest.raises(IntegrationError, match="nan or inf"):
        odeint(lambda y, t: tnp.sqrt(1.0 - t) * y, np.array([1.0]), [0.0, 2.0], method="RK4")


def test_step_size_underflow_and_too_many_steps():
    with pytest.raises(IntegrationError, match=r"underflow.*t = 1"):
        odeint(lambda y, t: y**2, np.array([1.0]), [0.0, 2.0])  # blows up at t = 1
    with pytest.raises(IntegrationError, match="max_steps=500"):
        odeint(lambda y, t: -1e7 * (y - tnp.cos(t)), np.array([1.0]), [0.0, 10.0],
               max_steps=500)  # fmt: skip


def test_bad_input():
    f = lambda y, t: -y  # noqa: E731
    with pytest.raises(ValueError, match=r"strictly increasing or decreasing; t\[2\]"):
        odeint(f, np.ones(1), [0.0, 2.0, 1.0])
    with pytest.raises(ValueError, match="1-D"):
        odeint(f, np.ones(1), np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"returned shape \(2,\).*shape \(1,\)"):
        odeint(lambda y, t: tnp.stack([y[0], y[0]]), np.ones(1), [0.0, 1.0])
    with pytest.raises(ValueError, match="unknown method 'Euler'"):
        odeint(f, np.ones(1), [0.0, 1.0], method="Euler")
    with pytest.raises(ValueError, match="continuous adjoint only"):
        odeint(f, np.ones(1), [0.0, 1.0], method="BDF", adjoint=False)
    with pytest.raises(ValueError, match="rtol must be a positive"):
        odeint(f, np.ones(1), [0.0, 1.0], rtol=-1.0)
    with pytest.raises(ValueError, match="step= is for"):
        odeint(f, np.ones(1), [0.0, 1.0], step=0.1)
    with pytest.raises(ValueError, match="t_eval must lie within"):
        solve_ivp(lambda t, y: -y, (0.0, 1.0), np.ones(1), t_eval=[0.5, 2.0])
    with pytest.raises(NotImplementedError, match="dense_output"):
        solve_ivp(lambda t, y: -y, (0.0, 1.0), np.ones(1), dense_output=True)


def test_higher_order_raises():
    def first(c):
        return tnp.sum(odeint(lambda y, t, c: -c * y, np.ones(1), [0.0, 1.0], c))

    with pytest.raises(NotImplementedError, match=r"through tapegrad\.integrate\.odeint"):
        tg.grad(tg.grad(first))(tg.tensor(1.0))


def test_no_grad_and_plain_inputs():
    ys = odeint(lambda y, t: -y, np.ones(2), [0.0, 1.0])
    assert type(ys) is np.ndarray
    k = tg.tensor(1.0, requires_grad=True)
    with tg.no_grad():
        ys = odeint(lambda y, t, k: -k * y, np.ones(2), [0.0, 1.0], k)
    assert isinstance(ys, tg.Tensor) and not ys.requires_grad


def test_scipy_namespace_exports_the_solvers():
    import tapegrad.scipy.integrate as tsi

    assert tsi.odeint is odeint and tsi.solve_ivp is solve_ivp
    k = tg.tensor(0.5, requires_grad=True)
    r = tsi.solve_ivp(lambda t, y: -k * y, (0.0, 2.0), np.ones(1), t_eval=[2.0], **TIGHT)
    r.y.sum().backward()
    assert k.grad == pytest.approx(-2 * np.exp(-1.0), rel=1e-9)


def test_readme_example():
    """docs/guide/scientific.md's ODE snippet, as written there."""
    from tapegrad.scipy import stats

    def lotka_volterra(z, t, theta):
        x, y = z[0], z[1]
        return tnp.stack([theta[0] * x - theta[1] * x * y, theta[3] * x * y - theta[2] * y])

    theta = tg.tensor(np.array([1.0, 0.1, 1.5, 0.075]), requires_grad=True)
    t = np.linspace(0.0, 10.0, 21)
    observed = np.random.default_rng(0).uniform(5.0, 30.0, (21, 2))
    z = odeint(lotka_volterra, np.array([10.0, 5.0]), t, theta)
    nll = -tnp.sum(stats.norm.logpdf(np.log(observed), tnp.log(z), 0.1))
    nll.backward()

    def plain(th):
        zz = odeint(lotka_volterra, np.array([10.0, 5.0]), t, th)
        return -np.sum(scipy.stats.norm.logpdf(np.log(observed), np.log(zz), 0.1))

    np.testing.assert_allclose(theta.grad, central(plain, THETA, 1e-7), rtol=1e-5)
    sol = solve_ivp(lambda t, y, k: -k * y, (0.0, 2.0), np.ones(3), args=(theta[0],),
                    t_eval=[1.0, 2.0], rtol=1e-8)  # fmt: skip
    assert isinstance(sol.y, tg.Tensor) and sol.y.shape == (3, 2)
    np.testing.assert_allclose(sol.y.numpy()[0], np.exp(-np.array([1.0, 2.0])), rtol=1e-5)


# --- what a right-hand side reads from outside ----------------------------------------
RATE = 1.0


def test_plain_values_from_outside_are_read_on_every_solve():
    global RATE
    A = np.array([1.0, 2.0])

    class Decay:
        def __init__(self):
            self.k = 1.0

        def rhs(self, y, t):
            return -self.k * RATE * A * y

    d = Decay()
    try:
        for k, rate, a in ((1.0, 1.0, 1.0), (3.0, 1.0, 1.0), (3.0, 0.5, 1.0), (3.0, 0.5, 0.1)):
            d.k, RATE = k, rate
            A[:] = [a, 2 * a]
            ys = odeint(d.rhs, np.ones(2), [0.0, 1.0], **TIGHT)
            np.testing.assert_allclose(ys[-1], np.exp(-k * rate * A), rtol=1e-8)
    finally:
        RATE = 1.0


def test_anything_read_from_outside_changed_before_backward_raises():
    A = tg.tensor(np.array([0.5, 0.7]))  # no grad: still read by the solve
    box = {"c": 1.0}
    y0 = tg.tensor(np.array([1.0, 1.0]), requires_grad=True)
    for change in ("tensor", "number"):
        ys = odeint(lambda y, t: -A * y * box["c"], y0, [0.0, 1.0])
        if change == "tensor":
            with tg.no_grad():
                A[0] = 2.0
        else:
            box["c"] = 2.0
        with pytest.raises(RuntimeError, match="between the solve and its backward"):
            tnp.sum(ys).backward()


def test_deep_attribute_parameter_replaced_like_an_optimizer_step():
    class Layer:
        def __init__(self, w):
            self.W = w

    class Net:
        def __init__(self, w):
            self.layers = [Layer(w)]

    class Model:
        def __init__(self, w):
            self.net = Net(w)

        def rhs(self, y, t):
            return -self.net.layers[0].W * y

    m = Model(tg.tensor(0.5, requires_grad=True))
    for w in (0.5, 1.0, 1.5):
        m.net.layers[0].W = tg.tensor(w, requires_grad=True)
        ys = odeint(m.rhs, np.ones(1), [0.0, 1.0], **TIGHT)
        ys[-1].sum().backward()
        np.testing.assert_allclose(ys[-1].numpy(), np.exp(-w), rtol=1e-9)
        assert m.net.layers[0].W.grad == pytest.approx(-np.exp(-w), rel=1e-8)


def test_containers_of_tensors_keep_their_gradients():
    x0 = tg.tensor(1.0, requires_grad=True)
    v0 = tg.tensor(2.0, requires_grad=True)
    k = tg.tensor(0.5, requires_grad=True)
    ys = odeint(lambda y, t, k: -k * y, [x0, v0], [0.0, 1.0], [k], **TIGHT)
    tnp.sum(ys[-1]).backward()
    assert x0.grad == pytest.approx(np.exp(-0.5), rel=1e-9)
    assert v0.grad == pytest.approx(np.exp(-0.5), rel=1e-9)
    assert k.grad == pytest.approx(-3.0 * np.exp(-0.5), rel=1e-8)


def test_solve_ivp_t_eval_starting_at_t_span_start():
    """t_eval[0] == t_span[0]: moving t_eval[0] moves that output along the solution,
    moving t_span[0] moves the start; each gets its own gradient."""
    k, w = 0.7, np.array([1.0, 2.0, -1.5])
    te = tg.tensor(np.array([0.0, 1.0, 2.0]), requires_grad=True)
    span = tg.tensor(np.array([0.0, 2.0]), requires_grad=True)
    for adjoint in (False, True):
        r = solve_ivp(lambda t, y: -k * y, span, np.ones(1), t_eval=te, adjoint=adjoint, **TIGHT)
        tnp.sum(r.y[0] * w).backward()
        y = np.exp(-k * te.numpy())
        np.testing.assert_allclose(te.grad, w * -k * y * [1, 1, 1], rtol=1e-8)
        np.testing.assert_allclose(span.grad, [np.sum(w * k * y), 0.0], rtol=1e-8, atol=1e-12)
        te.grad = span.grad = None


def test_right_hand_sides_that_return_the_wrong_thing():
    c = tg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    ys = odeint(lambda y, t: c, np.zeros(2), [0.0, 2.0])  # a tensor from outside
    tnp.sum(ys[-1]).backward()
    np.testing.assert_allclose(ys[-1].numpy(), [2.0, 4.0], rtol=1e-12)
    np.testing.assert_allclose(c.grad, [2.0, 2.0], rtol=1e-12)
    with pytest.raises(TypeError, match="returned None"):
        odeint(lambda y, t: None, np.ones(2), [0.0, 1.0])
    with pytest.raises(ValueError, match=r"tnp.stack"):
        odeint(lambda y, t: np.array([y[1], -y[0]]), np.ones(2), [0.0, 1.0])
    with pytest.raises(ValueError, match=r"returned shape \(\)"):
        odeint(lambda y, t: 1.0, np.ones(2), [0.0, 1.0])
    with pytest.raises(ValueError, match=r"returned shape \(2, 2\).*\(4,\)"):
        odeint(lambda y, t: np.ones((2, 2)), np.ones(4), [0.0, 1.0])
    with pytest.raises(TypeError, match="real"):
        odeint(lambda y, t: -y, np.ones(2, complex), [0.0, 1.0])
    # integer parameters are constants (indices, counts), not differentiated floats
    ys = odeint(lambda y, t, idx, n: -y[idx] * n, np.ones(2), [0.0, 1.0], np.array([1, 0]), 2)
    np.testing.assert_allclose(ys[-1], np.exp(-2.0), rtol=1e-6)


def _f_np(t, y, k):
    return np.array([-k * y[0] + np.sin(t), 0.5 * y[0] * y[1]])


def _f_tg(t, y, k):
    return tnp.stack([-k * y[0] + tnp.sin(t), 0.5 * y[0] * y[1]])


def test_solve_ivp_over_equal_ends_is_scipys():
    """t_span of equal ends: SciPy takes no step and answers y0 twice, calling fun once
    (and answers nothing with t_eval); so does tapegrad. The states' first derivatives
    are the solution's (f(t0, y0) in t1, -f in t0, the identity in y0): central
    differences of SciPy's solution over (t0, t0 +- eps). Not differentiable twice, as
    a solve."""
    want = scipy.integrate.solve_ivp(_f_np, (0.7, 0.7), Y0, args=(1.5,))
    got = solve_ivp(_f_tg, (0.7, 0.7), Y0, args=(1.5,))
    assert type(got.y) is np.ndarray and got.success and got.nfev == want.nfev == 1
    np.testing.assert_array_equal(got.t, want.t)
    np.testing.assert_array_equal(got.y, want.y)
    for t_eval in ([0.7], []):  # SciPy's answer: empty lists
        want = scipy.integrate.solve_ivp(_f_np, (0.7, 0.7), Y0, args=(1.5,), t_eval=t_eval)
        got = solve_ivp(_f_tg, (0.7, 0.7), Y0, args=(1.5,), t_eval=t_eval)
        assert np.size(want.t) == np.size(want.y) == 0
        assert got.t.shape == (0,) and got.y.shape == (2, 0)
    w = np.array([[0.3, -1.2], [2.0, 0.5]])

    def loss(span, y0):
        return tnp.sum(solve_ivp(_f_tg, span, y0, args=(1.5,)).y * w)

    def scipy_loss(span, y0):
        r = scipy.integrate.solve_ivp(_f_np, span, y0, args=(1.5,), rtol=1e-12, atol=1e-12)
        return np.sum(np.stack([r.y[:, 0], r.y[:, -1]], axis=1) * w)

    span = np.array([0.7, 0.7])
    g_span, g_y0 = tg.grad(loss, argnums=(0, 1))(span, Y0)
    np.testing.assert_allclose(g_span, central(lambda s: scipy_loss(s, Y0), span), rtol=1e-6)
    np.testing.assert_allclose(g_y0, central(lambda y: scipy_loss(span, y), Y0), rtol=1e-6)
    with pytest.raises(NotImplementedError, match=r"second derivatives.*integrate\.solve_ivp"):
        tg.grad(tg.grad(lambda t1: loss(tnp.stack([0.7, t1]), Y0)))(0.7)
    with pytest.raises(ValueError, match="t_eval must lie within"):
        solve_ivp(_f_tg, (0.7, 0.7), Y0, args=(1.5,), t_eval=[0.8])


def test_solve_ivp_with_an_empty_t_eval_solves_and_answers_nothing():
    """SciPy integrates (its steps counted in nfev) and gives no states; so does
    tapegrad, with the same count (it takes SciPy's steps)."""
    want = scipy.integrate.solve_ivp(_f_np, (0.0, 1.3), Y0 / 10, args=(1.5,), t_eval=[])
    y0 = tg.tensor(Y0 / 10, requires_grad=True)
    got = solve_ivp(_f_tg, (0.0, 1.3), y0, args=(1.5,), t_eval=[])
    assert got.nfev == want.nfev and got.t.shape == (0,) and got.y.shape == (2, 0)
    tnp.sum(got.y).backward()
    np.testing.assert_array_equal(y0.grad, 0.0)


def test_odeint_without_times_is_scipys_empty_answer():
    """No output times: SciPy's odeint gives no states (fun is not called); tapegrad's
    too, of any y0 shape, in the solvers' dtype; for a tensor y0 an empty tensor whose
    gradient is 0."""
    want = scipy.integrate.odeint(lambda y, t: -y, Y0, [])
    got = odeint(lambda y, t: 1 / 0, Y0, [])
    assert type(got) is np.ndarray and got.shape == want.shape == (0, 2)
    assert got.dtype == want.dtype
    y0 = tg.tensor(np.ones((3, 2), np.float32), requires_grad=True)
    ys = odeint(lambda y, t: -y, y0, np.zeros(0))
    assert ys.shape == (0, 3, 2) and ys.dtype == np.float32
    tnp.sum(ys).backward()
    np.testing.assert_array_equal(y0.grad, 0.0)
    assert odeint(lambda y, t, k: -k * y, Y0, [], tg.tensor(2.0)).shape == (0, 2)
    with pytest.raises(TypeError, match="odeint: the right-hand side must be callable"):
        odeint(None, Y0, [])
