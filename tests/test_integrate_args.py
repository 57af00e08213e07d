"""What a right-hand side gets after ``t``: objects whose attributes it reads (guarded
and found again on every solve, as closures are), pytrees of tensors (HIPS autograd's
``ode_net``: every leaf gets its gradient), and a ``t_span`` holding a tensor. Each
test tries to make a solve return a stale or wrong number quietly; gradients are
checked against central differences in float64."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest
import scipy.integrate

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.integrate import odeint, solve_ivp

from .helpers import central, run_in_threads

TIGHT = dict(rtol=1e-11, atol=1e-11)
T = [0.0, 0.5, 1.0]


class P:
    def __init__(self, **attrs):
        self.__dict__.update(attrs)


def decay(y, t, p):
    return -p.k * p.A * y


# --- B: attributes of argument objects ----------------------------------------------------
def test_attributes_of_a_parameter_object_are_read_on_every_solve():
    p = P(k=0.5, A=np.array([1.0, 2.0]))
    for change in (
        lambda: None,
        lambda: setattr(p, "k", 2.0),  # the issue's: exp(-0.5) stayed
        lambda: p.A.__setitem__(0, 3.0),  # refilled in place
        lambda: setattr(p, "A", np.array([0.25, 0.5])),  # reassigned
    ):
        change()
        ys = odeint(decay, np.ones(2), T, p, **TIGHT)
        np.testing.assert_allclose(ys[-1], np.exp(-p.k * p.A), rtol=1e-9)
        r = solve_ivp(lambda t, y, p: decay(y, t, p), (0.0, 1.0), np.ones(2), args=(p,), **TIGHT)
        np.testing.assert_allclose(r.y[:, -1], np.exp(-p.k * p.A), rtol=1e-9)


def test_a_tensor_replaced_on_a_parameter_object_gets_its_gradient():
    p = P(k=tg.tensor(0.5, requires_grad=True), A=np.array([1.0, 2.0]))
    first = p.k
    w = np.array([[1.0, -2.0], [0.5, 3.0], [2.0, 1.0]])

    def plain(k):
        return float(np.sum(odeint(decay, np.ones(2), T, P(k=k, A=p.A), **TIGHT) * w))

    for i, k in enumerate((0.5, 2.0, 1.25)):
        if i:  # an optimizer's new tensor where the function finds it
            g_first = first.grad.copy()
            p.k = tg.tensor(k, requires_grad=True)
        for adjoint in (False, True):
            p.k.grad = None
            ys = odeint(decay, np.ones(2), T, p, adjoint=adjoint, **TIGHT)
            tnp.sum(ys * w).backward()
            np.testing.assert_allclose(ys.numpy()[-1], np.exp(-k * p.A), rtol=1e-9)
            assert p.k.grad == pytest.approx(central(plain, k), rel=1e-6)
    np.testing.assert_array_equal(first.grad, g_first)  # the old tensor is left alone


@pytest.mark.parametrize("container", [list, tuple])
def test_nested_objects_objects_in_lists_and_methods_of_arguments(container):
    inner = P(k=1.0)
    holder = P(inner=P(deeper=inner), table={"c": 0.5})

    class Model:
        def __init__(self):
            self.rate = 1.0

        def rhs(self, y):
            return -self.rate * y

    model = Model()

    def f(y, t, holder, objs, model):
        c = holder.inner.deeper.k * holder.table["c"]
        return model.rhs(y) * c * objs[0].k

    def expect():
        return np.exp(-model.rate * holder.inner.deeper.k * holder.table["c"] * objs[0].k)

    objs = container([P(k=2.0)])
    for change in (
        lambda: None,
        lambda: setattr(inner, "k", 3.0),  # three attributes deep
        lambda: holder.table.__setitem__("c", 0.25),  # a dict item
        lambda: setattr(objs[0], "k", 0.5),  # an object inside a list or tuple
        lambda: setattr(model, "rate", 4.0),  # read by a method of an argument
        lambda: setattr(holder.inner, "deeper", P(k=0.125)),
    ):
        change()
        ys = odeint(f, np.ones(1), T, holder, objs, model, **TIGHT)
        np.testing.assert_allclose(ys[-1], expect(), rtol=1e-9)


def test_a_parameter_object_changed_between_solve_and_backward_raises():
    p = P(k=0.5, A=np.ones(2))
    y0 = tg.tensor(np.ones(2), requires_grad=True)
    ys = odeint(decay, y0, T, p)
    p.k = 2.0
    with pytest.raises(RuntimeError, match="between the solve and its backward"):
        tnp.sum(ys).backward()


def test_parameter_objects_from_several_threads():
    wrong = []

    def work(i):
        p = P(k=0.5 + i, A=np.array([1.0, 0.5]))
        for j in range(6):
            p.k = 0.25 * (i + 1) + 0.1 * j
            if j % 2:
                p.A = p.A[::-1].copy()
            ys = odeint(decay, np.ones(2), [0.0, 1.0], p, **TIGHT)
            if not np.allclose(ys[-1], np.exp(-p.k * p.A), rtol=1e-8):
                wrong.append((i, j))

    run_in_threads(work)
    assert not wrong


# --- pytrees of parameters ------------------------------------------------------------------
def ode_net(y, t, params):
    """HIPS autograd's ``ode_net`` example: a small network as the right-hand side."""
    for W, b in params[:-1]:
        y = tnp.tanh(W @ y + b)
    W, b = params[-1]
    return W @ y + b


def _net(seed=0):
    rng = np.random.default_rng(seed)
    shapes = [(3, 2), (2, 3)]
    return [(rng.standard_normal(s) * 0.5, rng.standard_normal(s[0]) * 0.2) for s in shapes]


WEIGHTS = np.array([[0.3, -1.0], [2.0, 0.5], [-0.7, 1.5]])


@pytest.mark.parametrize("adjoint", [False, True])
def test_args_as_a_list_of_layers_get_a_gradient_for_every_leaf(adjoint):
    net = _net()
    params = [tuple(tg.tensor(a.copy(), requires_grad=True) for a in layer) for layer in net]
    y0 = np.array([1.0, -0.5])
    ys = odeint(ode_net, y0, T, args=(params,), adjoint=adjoint, **TIGHT)
    tnp.sum(ys * WEIGHTS).backward()

    def plain(layers):
        return float(np.sum(odeint(ode_net, y0, T, args=(layers,), **TIGHT) * WEIGHTS))

    for i, layer in enumerate(params):
        for j, leaf in enumerate(layer):

            def f(v, i=i, j=j):
                layers = [list(lay) for lay in net]
                layers[i][j] = v
                return plain([tuple(lay) for lay in layers])

            np.testing.assert_allclose(leaf.grad, central(f, net[i][j]), rtol=1e-6, atol=1e-9)


Layer = namedtuple("Layer", ["W", "b"])


def test_dicts_named_tuples_and_mixed_leaves():
    """A dict of arrays, a named tuple, a float and an int leaf in one structure: the
    function sees the structure it was given; floats and tensors are differentiated,
    the int is a constant."""
    rng = np.random.default_rng(3)
    W, b = rng.standard_normal((2, 2)) * 0.5, np.array([0.1, -0.2])

    def f(t, y, p):
        assert (type(p), type(p["layer"]), type(p["pair"])) == (dict, Layer, tuple)
        layer = p["layer"]
        scale, power = p["pair"]
        return tnp.tanh(layer.W @ y + layer.b) * scale - y**power * 0.1

    def loss(W, b, scale):
        p = {"layer": Layer(W, b), "pair": (scale, 3)}
        r = solve_ivp(f, (0.0, 1.0), np.array([0.5, 1.0]), args=(p,), t_eval=T, **TIGHT)
        return tnp.sum(r.y * WEIGHTS.T) if isinstance(r.y, tg.Tensor) else np.sum(r.y * WEIGHTS.T)

    Wt, bt = tg.tensor(W, requires_grad=True), tg.tensor(b, requires_grad=True)
    st = tg.tensor(1.5, requires_grad=True)
    loss(Wt, bt, st).backward()
    np.testing.assert_allclose(Wt.grad, central(lambda v: float(loss(v, b, 1.5)), W), rtol=1e-6)
    np.testing.assert_allclose(bt.grad, central(lambda v: float(loss(W, v, 1.5)), b), rtol=1e-6)
    assert st.grad == pytest.approx(central(lambda s: float(loss(W, b, s)), 1.5), rel=1e-6)

    def f_np(t, y, W, b, scale):
        return np.tanh(W @ y + b) * scale - y**3 * 0.1

    for scale in (0.5, 2.0):  # a float leaf is a value: each solve reads the new one
        ref = scipy.integrate.solve_ivp(
            f_np, (0.0, 1.0), [0.5, 1.0], t_eval=T, args=(W, b, scale), rtol=1e-12, atol=1e-12
        )
        assert loss(W, b, scale) == pytest.approx(np.sum(ref.y * WEIGHTS.T), rel=1e-8)


def test_regular_lists_stay_one_array():
    """A list that is one regular array (``[k1, k2]``) is still passed as one array, as
    NumPy and SciPy read it: ``p * y`` broadcasts."""
    k = [tg.tensor(0.5, requires_grad=True), tg.tensor(1.5, requires_grad=True)]
    ys = odeint(lambda y, t, p: -p * y, np.ones(2), [0.0, 1.0], k, **TIGHT)
    tnp.sum(ys[-1]).backward()
    assert k[0].grad == pytest.approx(-np.exp(-0.5), rel=1e-8)
    assert k[1].grad == pytest.approx(-np.exp(-1.5), rel=1e-8)


# --- t_span holding a tensor ------------------------------------------------------------------
@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("t_eval", [None, "inside"])
def test_solve_ivp_to_a_tensor_end_time(requires_grad, t_eval):
    k, w = 0.7, np.array([1.0, -2.0])

    def f(t, y):
        return -k * y * (1.0 + 0.5 * tnp.sin(t))

    def f_np(t, y):
        return -k * y * (1.0 + 0.5 * np.sin(t))

    def loss(end):
        te = None if t_eval is None else [0.5, end]
        r = solve_ivp(f, (0.0, end), np.array([1.0, 2.0]), t_eval=te, **TIGHT)
        return r, tnp.sum(r.y[:, -1] * w) if isinstance(r.y, tg.Tensor) else np.sum(r.y[:, -1] * w)

    end = tg.tensor(1.3, requires_grad=requires_grad)
    r, value = loss(end)
    assert r.t[-1] == pytest.approx(1.3)
    y_end = r.y.numpy()[:, -1] if isinstance(r.y, tg.Tensor) else r.y[:, -1]
    want = np.array([1.0, 2.0]) * np.exp(-k * (1.3 + 0.5 * (1 - np.cos(1.3))))
    np.testing.assert_allclose(y_end, want, rtol=1e-9)
    if not requires_grad:
        return
    value.backward()
    fd = central(lambda e: float(loss(float(e))[1]), 1.3)
    np.testing.assert_allclose(end.grad, fd, rtol=1e-6)
    # the derivative in T of the end state is f(T, y(T)): the upstream pairs with it
    np.testing.assert_allclose(end.grad, np.sum(w * f_np(1.3, want)), rtol=1e-8)
