"""Second order and forward mode through tapegrad's own one-node functions.

``tg.checkpoint`` and a compiled step called inside a graph re-run their function on the
graph's tape when differentiated again or in forward mode: their Hessians, HVPs and
forward-mode Jacobians are checked against central differences of first-order
gradients in float64, through nesting, closures, random draws and threads. A solve
(``odeint``, ``solve_ivp``) cannot: its error names the public function and what to do
instead, never an internal class or "a Function" the user did not write."""

from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.integrate import odeint, solve_ivp

from .helpers import central, run_in_threads

X = np.array([0.3, -0.7, 1.1])
V = np.array([0.5, 2.0, -1.0])
A = np.array([[1.0, 0.5, 0.0], [0.2, -1.0, 0.3], [0.0, 0.4, 2.0]])


def _block(x, a, power):
    """A block to checkpoint: a non-differentiated array and an int among its arguments."""
    return tnp.sin(a @ x) * x**power + tnp.exp(0.1 * x)


def _fd_hessian(f, x):
    """Central differences of f's first-order gradient (computed by tg.grad)."""
    return np.stack([central(lambda v, i=i: float(tg.grad(f)(v)[i]), x) for i in range(x.size)])


def _check_second_order(f, x=X, v=V, rtol=1e-6):
    want = _fd_hessian(f, x)
    np.testing.assert_allclose(tg.hessian(f)(x), want, rtol=rtol, atol=1e-8)
    np.testing.assert_allclose(tg.hvp(f, x, v), want @ v, rtol=rtol, atol=1e-8)
    np.testing.assert_allclose(tg.jacfwd(tg.grad(f))(x), want, rtol=rtol, atol=1e-8)
    # backward(create_graph=True), then the gradient of <grad, v>
    t = tg.tensor(x.copy(), requires_grad=True)
    f(t).backward(create_graph=True)
    g = t.grad
    t.grad = None
    tnp.sum(g * v).backward()
    np.testing.assert_allclose(t.grad, want @ v, rtol=rtol, atol=1e-8)


# --- tg.checkpoint ---------------------------------------------------------------------------
def test_second_order_through_a_checkpoint():
    def f(x):
        y = tg.checkpoint(_block, x, A, 2)
        return tnp.sum(y * tnp.cos(x)) + tnp.sum(y) ** 2

    _check_second_order(f)


def test_nested_checkpoints_and_forward_mode():
    def inner(x):
        return tnp.tanh(x) * x

    def outer(x, s):
        return tg.checkpoint(inner, x * s) ** 2

    def f(x):
        return tnp.sum(tg.checkpoint(outer, x, 1.5) * x)

    _check_second_order(f)

    def vec(x):
        return tg.checkpoint(outer, x, 1.5) + x

    jac = tg.jacobian(vec)(X)
    np.testing.assert_allclose(tg.jacfwd(vec)(X), jac, rtol=1e-12)
    _, tangent = tg.jvp(vec, (X,), (V,))
    np.testing.assert_allclose(tangent, jac @ V, rtol=1e-12)


def test_checkpoint_draws_the_same_random_numbers_when_rerun():
    def block(x):
        return x * tnp.sin(x) * np.random.standard_normal(x.shape)  # noqa: NPY002

    def f(x):
        np.random.seed(7)  # noqa: NPY002  (the same draws in every evaluation)
        return tnp.sum(tg.checkpoint(block, x) ** 2)

    _check_second_order(f)


# --- a compiled step in a graph ---------------------------------------------------------------
def test_second_order_through_a_compiled_step():
    W = tg.tensor(A * 0.5)  # a closure tensor (no grad): read by the re-run too
    step = tg.compile(lambda x, k, n: tnp.sum(tnp.sin(W @ x) * x**n) * k)

    def f(x):
        return step(x, 2.0, 3) * tnp.sum(tnp.cos(x)) + step(x * x, 0.5, 2)

    _check_second_order(f)
    assert step.stats["captures"] >= 1

    vec = tg.compile(lambda x: tnp.sum(tnp.tanh(x) * x))
    jac = tg.jacobian(lambda x: vec(x) * x)(X)
    np.testing.assert_allclose(tg.jacfwd(lambda x: vec(x) * x)(X), jac, rtol=1e-12)


def test_create_graph_through_a_step_reaches_parameters_it_reads():
    """The mixed derivative d/dW <grad_x loss, v> for a parameter the step reads from its
    closure: against central differences in W."""
    W0 = A.copy()
    W = tg.tensor(W0.copy(), requires_grad=True)
    step = tg.compile(lambda x: tnp.sum(tnp.tanh(W @ x) ** 2))

    def grad_x_dot_v(Wv):
        x = tg.tensor(X.copy(), requires_grad=True)
        loss = tnp.sum(tnp.tanh(tg.tensor(Wv) @ x) ** 2)
        loss.backward()
        return float(np.sum(x.grad * V))

    x = tg.tensor(X.copy(), requires_grad=True)
    step(x).backward(create_graph=True)
    g = x.grad
    W.grad = None
    tnp.sum(g * V).backward()
    np.testing.assert_allclose(W.grad, central(grad_x_dot_v, W0), rtol=1e-6)


def test_a_step_whose_closure_changed_before_its_second_derivative_raises():
    k = np.array([1.0])
    step = tg.compile(lambda x: tnp.sum(x**3) * k[0])
    x = tg.tensor(X.copy(), requires_grad=True)
    loss = step(x)
    k[0] = 2.0  # the graph holds the value for k = 1
    with pytest.raises(RuntimeError, match=r"tg.compile\(<lambda>\).*between the call and"):
        loss.backward(create_graph=True)


def test_second_order_through_a_step_from_several_threads():
    step = tg.compile(lambda x: tnp.sum(tnp.sin(x) * x))
    wrong = []

    def work(i):
        rng = np.random.default_rng(i)
        for _ in range(5):
            x = rng.standard_normal(3)
            h = tg.hessian(lambda v: step(v))(x)
            if not np.allclose(h, np.diag(2 * np.cos(x) - x * np.sin(x)), rtol=1e-12):
                wrong.append(i)

    run_in_threads(work)
    assert not wrong


# --- solves: a clear error --------------------------------------------------------------------
def _through_odeint(k):
    return tnp.sum(odeint(lambda y, t, k: -k * y, np.ones(3), [0.0, 1.0], k))


def _through_solve_ivp(k):
    return tnp.sum(solve_ivp(lambda t, y, k: -k * y, (0.0, 1.0), np.ones(3), args=(k,)).y)


def _through_equal_ends(T):
    ys = solve_ivp(lambda t, y: -y * t, (T[0], T[0]), np.ones(3)).y  # SciPy's [y0, y0]
    return tnp.sum(tnp.sum(ys, axis=1) * T)


@pytest.mark.parametrize(
    "f, name",
    [
        (_through_odeint, "odeint"),
        (_through_solve_ivp, "solve_ivp"),
        (_through_equal_ends, "solve_ivp"),
    ],
)
def test_second_order_and_forward_mode_through_a_solve_name_the_solver(f, name):
    vec = (lambda k: f(k) * k) if name == "odeint" else None
    attempts = {
        "reverse": [
            lambda: tg.hessian(f)(X),
            lambda: tg.hvp(f, X, V),
            lambda: tg.jacfwd(tg.grad(f))(X),
        ],
        "forward": [lambda: tg.jacfwd(f)(X), lambda: tg.jvp(f, (X,), (V,))],
    }
    if vec is not None:
        attempts["forward"].append(lambda: tg.jacfwd(vec)(X))
    for mode, calls in attempts.items():
        for call in calls:
            with pytest.raises(NotImplementedError) as info:
                call()
            text = str(info.value)
            assert f"tapegrad.integrate.{name}" in text
            assert "_SolveNode" not in text and "_NoStepNode" not in text
            assert "Function" not in text and "custom function" not in text
            assert ("second derivatives" if mode == "reverse" else "forward mode") in text
    t = tg.tensor(X.copy(), requires_grad=True)
    with pytest.raises(NotImplementedError, match=f"tapegrad.integrate.{name}"):
        f(t).backward(create_graph=True)
