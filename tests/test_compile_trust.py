"""tg.compile never replays a wrong program: tensors read from outside are inputs,
Python decisions on values are guards, floats are values, compiled steps compose with
graphs and with each other."""

from __future__ import annotations

import math
import types
import warnings

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.compile import MAX_PROGRAMS, RECAPTURE_WARNING

from .helpers import run_in_threads

X = np.ones((2, 3))


def test_closure_parameters_are_read_on_every_call():
    W = tg.tensor(np.ones((3, 1)), requires_grad=True)  # PyTorch-style parameter

    def loss(x):
        return tnp.sum((x @ W) ** 2)

    step = tg.compile(loss, check=True)
    assert step(X).item() == 18.0  # W requires grad: the loss is a node of W's graph
    with tg.no_grad():
        W -= 1.0  # in place
    assert float(step(X)) == loss(X).item() == 0.0
    with tg.no_grad():
        W += 2.0
    value, gx = step.value_and_grad(X)  # x @ W = 6 on each row
    assert value == pytest.approx(loss(X).item()) == 72.0
    np.testing.assert_allclose(gx, 2 * 6.0 * 2.0 * np.ones((2, 3)))
    # value_and_grad accumulates the closure parameter's gradient, as backward() would
    np.testing.assert_allclose(W.grad, np.full((3, 1), 2 * 2 * 6.0))
    step(X).backward()
    np.testing.assert_allclose(W.grad, np.full((3, 1), 48.0))
    assert step.stats["captures"] == 1


PARAMS = {"W": tg.tensor(np.ones(3))}
SCALE = tg.tensor(2.0)


def global_loss(x):
    return tnp.sum(x * PARAMS["W"]) * SCALE


def test_replaced_closure_tensors_are_found_again():
    global SCALE
    step = tg.compile(global_loss)
    x = np.array([1.0, 2.0, 3.0])
    assert step(x) == 12.0
    PARAMS["W"] = tg.tensor([1.0, 0.0, 0.0])  # a new object where fn finds it
    SCALE = tg.tensor(5.0)
    try:
        assert step(x) == 5.0 == global_loss(x).item()
        _, g = step.value_and_grad(x)
        np.testing.assert_allclose(g, [5.0, 0.0, 0.0])
        assert step.stats["captures"] == 1
        PARAMS["W"] = tg.tensor(np.ones(4))  # a new shape: the program cannot hold
        with pytest.raises(ValueError, match="broadcast"):
            step(x)
        assert step.stats["guard_failures"] >= 1
    finally:
        PARAMS["W"] = tg.tensor(np.ones(3))
        SCALE = tg.tensor(2.0)


class Model:
    def __init__(self):
        self.w = tg.tensor([1.0, 2.0], requires_grad=True)
        self.layers = [tg.tensor([0.5, 0.5])]

    def loss(self, x):
        return tnp.sum(tnp.tanh(x * self.w) * self.layers[0])


def test_attributes_of_self_and_arguments():
    m = Model()
    step = tg.compile(m.loss)
    x = np.array([0.3, -0.2])
    v1, _ = step.value_and_grad(x)
    assert v1 == pytest.approx(np.sum(np.tanh(x * [1.0, 2.0]) * 0.5))
    m.w = tg.tensor([3.0, 1.0], requires_grad=True)  # replaced on self
    m.layers[0] = tg.tensor([1.0, -1.0])  # replaced in a list attribute
    v2, g2 = step.value_and_grad(x)
    assert v2 == pytest.approx(tnp.sum(tnp.tanh(x * m.w.detach()) * m.layers[0]).item())
    np.testing.assert_allclose(g2, (1 - np.tanh(x * [3.0, 1.0]) ** 2) * [3.0, 1.0] * [1.0, -1.0])
    assert m.w.grad is not None and step.stats["captures"] == 1

    def by_argument(model, x):
        return tnp.sum(x * model.w)

    s2 = tg.compile(by_argument, argnums=1)
    np.testing.assert_allclose(s2.value_and_grad(m, x)[1], [3.0, 1.0])


def test_compiled_step_inside_an_eager_graph():
    inner = tg.compile(lambda w: tnp.sum(w**2))
    w = tg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = inner(w) + tnp.sum(w)
    assert isinstance(y, tg.Tensor) and y.requires_grad
    y.backward()
    np.testing.assert_allclose(w.grad, [3.0, 5.0])
    # twice in one graph, at different points: each node replays its own values
    w.grad = None
    (inner(w) * inner(2.0 * w)).backward()
    np.testing.assert_allclose(w.grad, 2 * w.numpy() * 20.0 + 5.0 * 8.0 * w.numpy())
    # inside a transform
    np.testing.assert_allclose(tg.grad(lambda v: inner(v) * 3.0)(np.array([1.0, -1.0])), [6, -6])
    with pytest.raises(NotImplementedError, match="given a tensor that requires grad"):
        inner.value_and_grad(w)


def test_compiled_step_inside_another_is_inlined():
    inner = tg.compile(lambda w: tnp.sum(w**2))
    outer = tg.compile(lambda w: inner(w) + tnp.sum(w))
    for w in (np.array([1.0, 2.0]), np.array([-1.0, 0.5])):
        value, g = outer.value_and_grad(w)
        assert value == pytest.approx(np.sum(w**2 + w))
        np.testing.assert_allclose(g, 2 * w + 1)
    assert outer.stats["captures"] == 1 and inner.stats["captures"] == 0


def test_python_float_arguments_are_values():
    step = tg.compile(lambda x, temp: tnp.sum(tnp.exp(x / temp)))
    x = np.array([0.1, 0.2])
    for i in range(1000):
        temp = 1 + 0.001 * i
        value, g = step.value_and_grad(x, temp)
    assert value == pytest.approx(np.sum(np.exp(x / temp)))
    np.testing.assert_allclose(g, np.exp(x / temp) / temp)
    assert step.stats["captures"] == 1
    value, _ = step.value_and_grad(x, float("nan"))
    assert np.isnan(value)
    value, _ = step.value_and_grad(x, float("nan"))
    assert step.stats["captures"] == 1


def branchy(x):
    if x.sum() > 0:  # a Python decision on a recorded value: a guard
        return tnp.sum(tnp.sin(x))
    return tnp.sum(tnp.cos(x))


def test_guards_capture_each_branch_once():
    step = tg.compile(branchy)
    for k in range(10):
        x = np.array([0.3, 0.4]) * (1 if k % 2 else -1) * (1 + k)
        value, g = step.value_and_grad(x)
        ev, eg = tg.value_and_grad(branchy)(x)
        assert value == pytest.approx(ev)
        np.testing.assert_allclose(g, eg)
    stats = step.stats
    assert stats["programs"] == 2 and stats["captures"] == 2 and stats["replays"] == 10
    assert stats["guard_failures"] >= 1  # a branch change tries the other program first


def test_python_reads_in_capture_are_guards_or_errors():
    def by_int(x, n):
        k = int(n.sum())  # an integer computed from a non-differentiated argument
        return tnp.sum(x[:k] ** 2)

    step = tg.compile(by_int)
    x = np.arange(1.0, 5.0)
    for n in ([1, 1], [1, 2], [1, 1]):
        value, g = step.value_and_grad(x, np.array(n))
        k = sum(n)
        assert value == pytest.approx(np.sum(x[:k] ** 2))
    assert step.stats["captures"] == 2
    reads = tg.compile(lambda x, idx: tnp.sum(x * np.asarray(idx.numpy() > 1)))
    assert reads(x, np.array([1.0, 2.0, 0.0, 3.0])) == pytest.approx(2.0 + 4.0)
    assert reads(x, np.array([3.0, 0.0, 0.0, 0.0])) == pytest.approx(1.0)
    for conv in (float, lambda t: t.item()):
        with pytest.raises(TypeError, match="inside a function being captured"):
            tg.compile(lambda x, conv=conv: x[1] * conv(x[0])).value_and_grad(x)
    # a detached value follows the inputs on replay (no guard, no recapture)
    det = tg.compile(lambda x: tnp.sum(x * x.detach()))
    for s in (1.0, 2.0, 3.0):
        value, g = det.value_and_grad(x * s)
        assert value == pytest.approx(np.sum((x * s) ** 2))
        np.testing.assert_allclose(g, x * s)
    assert det.stats["captures"] == 1


def test_recapturing_warns_once_and_the_cache_is_bounded():
    step = tg.compile(lambda x: tnp.sum(x**2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, MAX_PROGRAMS + 10):
            step.value_and_grad(np.ones(n))
    mine = [w for w in caught if "keeps capturing" in str(w.message)]
    assert len(mine) == 1 and "argument 0 changed" in str(mine[0].message)
    assert step.stats["captures"] == MAX_PROGRAMS + 9 > RECAPTURE_WARNING
    assert step.stats["programs"] == MAX_PROGRAMS


def test_numpy_randomness_while_capturing_warns():
    def noisy(x):
        return tnp.sum(x * np.random.standard_normal(2))  # noqa: NPY002

    with pytest.warns(RuntimeWarning, match="NumPy random generator"):
        tg.compile(noisy).value_and_grad(np.ones(2))


def test_tensors_from_outside_that_cannot_be_inputs():
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    h = w * 2.0  # computed by recorded ops outside the function
    with pytest.raises(TypeError, match="computed outside it by recorded ops"):
        tg.compile(lambda x: tnp.sum(x * h)).value_and_grad(np.ones(2))
    c = tg.tensor([1.0, 2.0]) * 2.0  # no grad: an input, its value read on every call
    step = tg.compile(lambda x: tnp.sum(x * c))
    assert step(np.ones(2)) == 6.0


G = tg.tensor(np.array([1.0, 2.0, 3.0]))


def test_transforms_inside_a_capture_see_new_values():
    global G

    def f(x, y, temp):
        inner = tg.grad(lambda z: tnp.sum(z * y * y) * temp)(np.ones(3))  # closes over y
        jac = tg.jacobian(lambda z: z * G)(np.ones(3))  # and over a global tensor
        return tnp.sum(x * inner) + tnp.sum(jac @ x)

    step = tg.compile(f)
    x = np.array([1.0, 2.0, 3.0])
    for y, temp, g in (
        (np.ones(3), 1.0, [1.0, 2.0, 3.0]),
        (np.array([2.0, 5.0, -1.0]), 1.0, [1.0, 2.0, 3.0]),
        (np.array([2.0, 5.0, -1.0]), 5.0, [1.0, 2.0, 3.0]),
        (np.array([2.0, 5.0, -1.0]), 5.0, [3.0, 0.0, 1.0]),
    ):
        G = tg.tensor(g)
        value, grad = step.value_and_grad(x, y, temp)
        ev, eg = tg.value_and_grad(f)(x, y, temp)
        assert value == pytest.approx(ev)
        np.testing.assert_allclose(grad, eg)
    G = tg.tensor(np.array([1.0, 2.0, 3.0]))

    inner = tg.compile(lambda z: tnp.sum(z * G) ** 2)
    outer = tg.compile(lambda x: tnp.sum(x) * inner.value_and_grad(np.ones(3))[0])
    assert outer(x) == pytest.approx(6.0 * 36.0)
    G = tg.tensor(np.array([2.0, 2.0, 2.0]))
    try:
        assert outer(x) == pytest.approx(6.0 * 36.0)  # same sum: the guard holds
        G = tg.tensor(np.array([3.0, 2.0, 2.0]))
        assert outer(x) == pytest.approx(6.0 * 49.0)
    finally:
        G = tg.tensor(np.array([1.0, 2.0, 3.0]))


RUNNING = {"total": tg.tensor(np.zeros(3))}


def test_side_effects_on_outside_state_raise():
    total = tg.tensor(np.zeros(3))

    def accumulate(x):
        with tg.no_grad():
            total.__iadd__(x)  # total += x, on a tensor from outside
        return tnp.sum(x * total)

    with pytest.raises(RuntimeError, match="modifies a tensor from outside it in place"):
        tg.compile(accumulate)(np.ones(3))

    def store(x):
        y = x * 2.0
        RUNNING["total"] = y  # a value of the program escapes into outside state
        return tnp.sum(y)

    with pytest.raises(RuntimeError, match="stored a tensor it computed"):
        tg.compile(store)(np.ones(3))
    RUNNING["total"] = tg.tensor(np.zeros(3))


class Tied:
    pass


def test_tied_tensors_untied_later():
    net = Tied()
    w = tg.tensor(np.ones(3), requires_grad=True)
    net.enc = net.dec = w
    step = tg.compile(lambda x: tnp.sum(x * net.enc) * tnp.sum(x * net.dec))
    x = np.array([1.0, 2.0, 3.0])
    assert step.value_and_grad(x)[0] == 36.0
    net.dec = tg.tensor(np.full(3, 2.0), requires_grad=True)  # untie
    value, _ = step.value_and_grad(x)
    assert value == 72.0 and net.dec.grad is not None
    np.testing.assert_allclose(net.dec.grad, 6.0 * x)


def test_a_compiled_step_from_several_threads():
    step = tg.compile(lambda x: tnp.sum(tnp.sin(x) * x))
    wrong = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(50):
            x = rng.standard_normal(5)
            _, g = step.value_and_grad(x)
            if not np.allclose(g, np.cos(x) * x + np.sin(x)):
                wrong.append(seed)

    run_in_threads(work)
    assert not wrong


def test_hooks_on_arguments_cannot_be_captured():
    def f(z):
        z.register_hook(lambda g: g * 100)
        return tnp.sum(z**2)

    with pytest.raises(TypeError, match="hooks cannot be captured"):
        tg.compile(f).value_and_grad(np.ones(2))


def test_closure_parameters_under_no_grad():
    W = tg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    step = tg.compile(lambda x: tnp.sum(x * W))
    assert isinstance(step(np.ones(2)), tg.Tensor)
    with tg.no_grad():  # a validation loop: values, no graph
        for _ in range(3):
            assert step(np.ones(2)) == 3.0
    assert step.stats["captures"] == 1 and W.grad is None


def test_list_and_dict_arguments_stay_containers():
    def f(xs, cfg):
        assert isinstance(xs, list) and isinstance(cfg, dict)
        return tnp.sum(xs[0] * xs[1]) * cfg["scale"] + len(xs)

    step = tg.compile(f, argnums=(0, 1))
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    value, (gxs, gcfg) = step.value_and_grad([a, b], {"scale": 2.0})
    ev, (exs, ecfg) = tg.value_and_grad(f, argnums=(0, 1))([a, b], {"scale": 2.0})
    assert value == pytest.approx(ev) == 24.0
    assert isinstance(gxs, list) and isinstance(gcfg, dict)
    np.testing.assert_allclose(gxs[0], exs[0])
    np.testing.assert_allclose(gxs[1], exs[1])
    assert gcfg["scale"] == pytest.approx(ecfg["scale"]) == 11.0
    step.value_and_grad([a, b], {"scale": 3.0})  # a new float value: no new capture
    assert step.stats["captures"] == 1


def test_generators_used_while_capturing_warn():
    rng = np.random.default_rng(0)
    with pytest.warns(RuntimeWarning, match="NumPy random generator"):
        tg.compile(lambda x: tnp.sum(x * rng.standard_normal(2))).value_and_grad(np.ones(2))


def test_capture_inputs_read_from_another_thread_raise():
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as ex:

        def f(x, c):
            parts = list(ex.map(lambda i: c[i] * 2.0, range(2)))  # ops in another thread
            return tnp.sum(x) * parts[0]

        with pytest.raises(RuntimeError, match="read from another thread"):
            tg.compile(f)(np.ones(2), np.array([1.0, 2.0]))


def test_float_arguments_hash_by_value_while_captured():
    table = {1.0: 10.0, 2.0: 20.0}
    step = tg.compile(lambda x, t: tnp.sum(x) * table.get(t, 0.0) * (5.0 if t in {1.0} else 1.0))
    x = np.ones(3)
    assert step(x, 1.0) == 150.0
    assert step(x, 2.0) == 60.0
    assert step(x, 1.0) == 150.0 and step.stats["captures"] == 2  # guards pick the program


def test_pytree_containers_keep_their_types():
    from collections import OrderedDict, namedtuple

    P = namedtuple("P", ["a", "b"])
    Q = namedtuple("P", ["b", "a"])  # same name, other fields

    def f(p, d):
        assert isinstance(d, OrderedDict)
        return tnp.sum(p.a * 1.0 + p.b * 10.0) * d["s"]

    step = tg.compile(f)
    d = OrderedDict(s=2.0)
    _, g = step.value_and_grad(P(np.ones(2), np.zeros(2)), d)
    assert isinstance(g, P) and g.a.tolist() == [2.0, 2.0] and g.b.tolist() == [20.0, 20.0]
    assert step(Q(np.ones(2), np.zeros(2)), d) == 40.0  # Q.a is the zeros here
    assert isinstance(tg.grad(lambda d: d["s"] * 2.0)(OrderedDict(s=1.0)), OrderedDict)


def test_in_place_ops_on_arguments_inside_a_capture():
    def f(x, y):
        y *= 2.0  # y is not differentiated: a value of the program
        y[0] = 0.0
        return tnp.sum(x * y)

    step = tg.compile(f)
    for scale in (1.0, 3.0):
        x, y = np.array([1.0, 2.0]), np.array([4.0, 5.0]) * scale
        value, g = step.value_and_grad(x, y)
        assert value == pytest.approx(2.0 * 5.0 * 2.0 * scale)
        np.testing.assert_allclose(g, [0.0, 10.0 * scale])


K_GLOBAL = 1.0


def test_plain_values_read_from_outside_are_guards():
    """Numbers, NumPy arrays and attributes fn reads from outside are constants of the
    recording: a change captures again, never replays the old value."""
    global K_GLOBAL
    A = np.array([1.0, 2.0])

    class Model:
        def __init__(self):
            self.scale = 2.0

        def loss(self, x):
            return tnp.sum(self.scale * K_GLOBAL * A * x)

    m = Model()
    step = tg.compile(m.loss)
    x = np.ones(2)
    try:
        assert step(x) == 6.0
        K_GLOBAL = 3.0  # a global number
        assert step(x) == 18.0
        A[:] = 0.5  # an array changed in place
        assert step(x) == 6.0
        m.scale = 1.0  # an attribute of self
        value, grad = step.value_and_grad(x)
        assert value == 3.0
        np.testing.assert_allclose(grad, [1.5, 1.5])
        assert step.stats["captures"] == 4
        assert step(x) == 3.0 and step.stats["captures"] == 4  # unchanged: replayed
    finally:
        K_GLOBAL = 1.0


def test_tapegrad_objects_reachable_from_fn_are_not_guarded():
    """A compiled step called inside another function: its tapes change on every call,
    which must not count as the outer function's values changing."""
    inner = tg.compile(lambda x: tnp.sum(x * x))

    def outer(x):
        return inner(x) * 2.0

    step = tg.compile(outer)
    for v in (1.0, 2.0, 3.0):
        assert step(np.full(2, v)) == 4 * v * v
    assert step.stats["captures"] == 1


CFG = types.ModuleType("cfg")  # a configuration module: cfg.K
CFG.K = 1.0
SIGN = 0.0
ITEMS = [1.0, 2.0]


def double(x):
    return x * 2.0


HELPER = double
COUNTER = 0


def test_more_plain_values_are_guards():
    """A module's attribute, a helper function rebound, -0.0 for 0.0, a list of numbers
    gaining an item."""
    global SIGN, HELPER

    def f(x):
        total = HELPER(tnp.sum(x)) * CFG.K * math.copysign(1.0, SIGN)
        for w in ITEMS:
            total = total * w
        return total

    step = tg.compile(f)
    x = np.ones(2)
    try:
        assert step(x) == 8.0
        CFG.K = 3.0
        assert step(x) == 24.0
        SIGN = -0.0
        assert step(x) == -24.0
        HELPER = lambda v: v * 10.0  # noqa: E731
        assert step(x) == -120.0
        ITEMS.append(0.5)
        assert step(x) == -60.0
    finally:
        CFG.K, SIGN, HELPER = 1.0, 0.0, double
        del ITEMS[2:]


def test_state_the_function_changes_itself_is_warned_about():
    """A counter fn increments is its own side effect: not a guard (it would capture on
    every call), and a replay does not repeat it: warned about, by name."""
    global COUNTER

    def f(x):
        global COUNTER
        COUNTER += 1
        return tnp.sum(x)

    step = tg.compile(f)
    try:
        with pytest.warns(RuntimeWarning, match="changed COUNTER"):
            step(np.ones(2))
        for _ in range(3):
            assert step(np.ones(2)) == 2.0
        assert step.stats["captures"] == 1
    finally:
        COUNTER = 0


def test_many_plain_values_stay_cheap():
    """A container of numbers is one guard (one comparison in C), not one per item."""
    table = {i: float(i) for i in range(1000)}

    def f(x):
        return tnp.sum(x) * table[7]

    step = tg.compile(f)
    step(np.ones(2))
    assert len(step.programs[next(iter(step.programs))][0].plain) < 5
    table[7] = 2.0
    assert step(np.ones(2)) == 4.0


def test_attributes_the_code_does_not_name_are_not_guards():
    """A training loop bumping self.step_count beside the self.w the loss reads: one
    capture, not one per call."""

    class Trainer:
        def __init__(self):
            self.w = 2.0
            self.step_count = 0

        def loss(self, x):
            return tnp.sum(x) * self.w

    t = Trainer()
    step = tg.compile(t.loss)
    for _ in range(10):
        assert step(np.ones(2)) == 4.0
        t.step_count += 1
    assert step.stats["captures"] == 1
    t.w = 3.0
    assert step(np.ones(2)) == 6.0
