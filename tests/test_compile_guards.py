"""tg.compile never replays a stale number read through an argument object or a
container: attributes and items of objects passed as arguments are guarded (or found
again, for tensors) as those of ``self`` and closures are, and the length (a dict's
keys) of every container fn reaches is a guard, so a layer appended after capture is
seen. Each test tries to make a replay return the first call's numbers quietly."""

from __future__ import annotations

import copy
import itertools
import os
import pickle
import random
import secrets
import sys
import threading
import types
import warnings

import numpy as np
import pytest
from numpy.random import default_rng  # a name bound at import: the same function

import tapegrad as tg
import tapegrad.numpy as tnp

from .helpers import central, run_in_threads


class Box:
    """A plain object passed as an argument (or held in a closure)."""

    def __init__(self, **attrs):
        self.__dict__.update(attrs)


W0 = np.array([0.5, -1.0])


# --- B: what fn reads through an argument object -----------------------------------------
def test_argument_attributes_reassigned_refilled_or_changed_are_seen():
    b = Box(X=np.array([1.0, 2.0]), s=2.0, counter=0)

    def f(w, b):
        return tnp.sum(tnp.sin(w * b.X)) * b.s

    step = tg.compile(f)

    def changes():
        yield "first call"
        b.X = np.array([3.0, -1.0])  # reassigned
        yield "reassigned"
        b.X[:] = [0.25, 4.0]  # refilled in place
        yield "refilled"
        b.s = 3.0  # a float attribute
        yield "float"
        b.s = -0.0  # equal to 0.0, but not the same number
        yield "negative zero"
        b.s = 1.5
        b.X[1] = 7.0
        yield "both"

    for what in changes():
        value, grad = step.value_and_grad(W0, b)
        assert value == pytest.approx(np.sum(np.sin(W0 * b.X)) * b.s, abs=1e-15), what
        np.testing.assert_allclose(grad, np.cos(W0 * b.X) * b.X * b.s, err_msg=what)
        assert step(W0, b) == pytest.approx(value, abs=1e-15), what
    captures = step.stats["captures"]
    for _ in range(5):  # an attribute no code names: no guard, no capture
        b.counter += 1
        step(W0, b)
    assert step.stats["captures"] == captures


def test_tensor_replaced_on_an_argument_is_read_and_gets_its_gradient():
    b = Box(W=tg.tensor(np.array([0.3, -0.7]), requires_grad=True))

    def f(w, b):
        return tnp.sum(tnp.tanh(w * b.W) ** 2)

    def plain(w, W):
        return np.sum(np.tanh(w * W) ** 2)

    step = tg.compile(f)
    first = b.W
    step.value_and_grad(W0, b)
    for values in ([1.2, 0.4], [-2.0, 0.1]):
        b.W = tg.tensor(np.array(values), requires_grad=True)  # an optimizer's new tensor
        value, gw = step.value_and_grad(W0, b)
        W = np.array(values)
        assert value == pytest.approx(plain(W0, W))
        np.testing.assert_allclose(gw, central(lambda w, W=W: plain(w, W), W0), rtol=1e-7)
        np.testing.assert_allclose(b.W.grad, central(lambda v: plain(W0, v), W), rtol=1e-7)
    g_first = first.grad.copy()
    b.W = tg.tensor(np.array([1.0, 1.0]), requires_grad=True)
    step(W0, b).backward()  # as a node of the graph, too
    np.testing.assert_allclose(b.W.grad, central(lambda v: plain(W0, v), np.ones(2)), rtol=1e-7)
    np.testing.assert_array_equal(first.grad, g_first)  # the old tensor is left alone
    assert step.stats["captures"] == 1


def test_nested_objects_dicts_and_objects_inside_list_and_dict_arguments():
    inner = Box(X=np.array([1.0, 2.0]), k=0.5)
    b = Box(inner=Box(deeper=inner), cfg={"A": np.array([2.0, 3.0]), "c": 1.0})

    def f(w, b, objs, named):
        d = b.inner.deeper
        total = tnp.sum(w * d.X) * d.k + tnp.sum(w * b.cfg["A"]) * b.cfg["c"]
        for o in objs:
            total = total + tnp.sum(w**2) * o.k
        return total + tnp.sum(w) * named["o"].k

    def expect(w, b, objs, named):
        d = b.inner.deeper
        total = np.sum(w * d.X) * d.k + np.sum(w * b.cfg["A"]) * b.cfg["c"]
        total += sum(np.sum(w**2) * o.k for o in objs)
        return total + np.sum(w) * named["o"].k

    objs = [Box(k=1.0), Box(k=2.0)]
    named = {"o": Box(k=3.0)}
    step = tg.compile(f)
    for change in (
        lambda: None,
        lambda: setattr(inner, "k", 4.0),  # three attributes deep
        lambda: inner.X.__setitem__(0, -3.0),  # in place, three deep
        lambda: setattr(b.inner, "deeper", Box(X=np.array([5.0, 6.0]), k=0.25)),
        lambda: b.cfg.__setitem__("c", 10.0),  # a dict item
        lambda: b.cfg["A"].fill(-1.0),
        lambda: setattr(objs[1], "k", -5.0),  # an object inside a list argument
        lambda: setattr(named["o"], "k", 0.125),  # inside a dict argument
    ):
        change()
        value, grad = step.value_and_grad(W0, b, objs, named)
        assert value == pytest.approx(expect(W0, b, objs, named))
        fd = central(lambda w: expect(w, b, objs, named), W0)
        np.testing.assert_allclose(grad, fd, rtol=1e-7)


GAIN = 2.0


class Model:
    """Read through a method the function calls: ``self.W`` is named by no code on the
    way to the model, only by its method."""

    def __init__(self):
        self.W = tg.tensor(np.array([[1.0, 0.5], [-0.5, 2.0]]), requires_grad=True)
        self.bias = np.array([0.1, -0.2])
        self.scale = 1.0

    def forward(self, x):
        return self._hidden(x) * self.scale

    def _hidden(self, x):
        return tnp.tanh(self.W @ x + self.bias) * GAIN


def test_attributes_read_inside_methods_of_arguments_and_closures():
    global GAIN
    model = Model()
    by_argument = tg.compile(lambda x, m: tnp.sum(m.forward(x) ** 2))
    by_closure = tg.compile(lambda x: tnp.sum(model.forward(x) ** 2))

    def expect(x):
        W = model.W.numpy()
        return np.sum((np.tanh(W @ x + model.bias) * GAIN * model.scale) ** 2)

    try:
        for change in (
            lambda: None,
            lambda: setattr(model, "scale", 3.0),  # read by forward
            lambda: model.bias.fill(1.0),  # read by the method forward calls
            lambda: setattr(model, "W", tg.tensor(np.eye(2) * 0.3, requires_grad=True)),
            lambda: globals().__setitem__("GAIN", -1.0),  # a global of the method
        ):
            change()
            for step, args in ((by_argument, (W0, model)), (by_closure, (W0,))):
                model.W.grad = None
                value, grad = step.value_and_grad(*args)
                assert value == pytest.approx(expect(W0))
                np.testing.assert_allclose(grad, central(expect, W0), rtol=1e-6)
                W = model.W.numpy()

                def in_w(v, W=W):
                    saved = model.W
                    model.W = tg.tensor(v.reshape(2, 2))
                    try:
                        return expect(W0)
                    finally:
                        model.W = saved

                np.testing.assert_allclose(model.W.grad, central(in_w, W), rtol=1e-6)
    finally:
        GAIN = 2.0


@pytest.mark.filterwarnings("ignore:tapegrad.compile.*has captured")
def test_argument_objects_from_several_threads():
    """Each thread passes its own object and changes it between calls: every replay
    must use the object's current values, never another thread's or an earlier one."""
    step = tg.compile(lambda w, b: tnp.sum(w * b.X) * b.s)
    wrong = []

    def work(k):
        rng = np.random.default_rng(k)
        b = Box(X=rng.standard_normal(2), s=float(k))
        for i in range(30):
            if i % 3 == 0:
                b.X[:] = rng.standard_normal(2)
            elif i % 3 == 1:
                b.s = float(rng.standard_normal())
            else:
                b.X = rng.standard_normal(2)
            value, grad = step.value_and_grad(W0, b)
            if not (np.isclose(value, np.sum(W0 * b.X) * b.s) and np.allclose(grad, b.X * b.s)):
                wrong.append((k, i))

    run_in_threads(work)
    assert not wrong


# --- C: the length and keys of containers fn iterates over --------------------------------
def test_appended_to_a_closure_list_of_tensors():
    Xs = [tg.tensor(np.array([[1.0, 2.0], [0.0, 1.0]]))]

    def loss(w):
        return sum(tnp.sum((X @ w) ** 2) for X in Xs)

    def expect(w):
        return sum(np.sum((X.numpy() @ w) ** 2) for X in Xs)

    step = tg.compile(loss)
    for X in (None, np.array([[2.0, 0.0], [1.0, 1.0]]), np.array([[0.5, 0.5], [3.0, -1.0]])):
        if X is not None:
            Xs.append(tg.tensor(X))
        value, grad = step.value_and_grad(W0)
        assert value == pytest.approx(expect(W0))
        np.testing.assert_allclose(grad, central(expect, W0), rtol=1e-7)
    Xs.pop()
    assert step(W0) == pytest.approx(expect(W0))  # shorter again: the older program
    arrays = [np.ones(2)]  # NumPy arrays in a list: each compared by bytes, and the length
    step2 = tg.compile(lambda w: sum(tnp.sum(w * a) for a in arrays))
    assert step2(W0) == pytest.approx(-0.5)
    arrays.append(np.full(2, 2.0))
    assert step2(W0) == pytest.approx(-1.5)


class Net:
    def __init__(self, sizes, seed=0):
        rng = np.random.default_rng(seed)
        self.layers = [
            (
                tg.tensor(rng.standard_normal((m, n)) * 0.5, requires_grad=True),
                tg.tensor(rng.standard_normal(m) * 0.1, requires_grad=True),
            )
            for n, m in itertools.pairwise(sizes)
        ]
        self.sizes = tuple(sizes)

    def loss(self, x):
        for W, b in self.layers:
            x = tnp.tanh(W @ x + b)
        return tnp.sum(x**2)


def _net_loss(layers, x):
    for W, b in layers:
        x = np.tanh(W @ x + b)
    return np.sum(x**2)


def test_a_layer_appended_to_a_list_of_parameters():
    for where in ("self", "argument"):
        net = Net([2, 3, 2])
        step = tg.compile(net.loss) if where == "self" else tg.compile(lambda x, n: n.loss(x))
        args = () if where == "self" else (net,)
        step.value_and_grad(W0, *args)
        new = Net([2, 2], seed=1).layers[0]
        net.layers.append(new)  # a layer appended after capture
        for W, b in net.layers:
            W.grad = b.grad = None
        value, grad = step.value_and_grad(W0, *args)
        layers = [(W.numpy(), b.numpy()) for W, b in net.layers]
        assert value == pytest.approx(_net_loss(layers, W0)), where
        fd = central(lambda x, layers=layers: _net_loss(layers, x), W0)
        np.testing.assert_allclose(grad, fd, rtol=1e-6)
        W_new = new[0].numpy()

        def in_new(v, W_new=W_new, layers=layers):
            return _net_loss([*layers[:-1], (v.reshape(W_new.shape), layers[-1][1])], W0)

        assert new[0].grad is not None, where  # the new layer's parameters get gradients
        np.testing.assert_allclose(new[0].grad, central(in_new, W_new), rtol=1e-6)
        net.layers[1:] = []  # and removed again
        value, _ = step.value_and_grad(W0, *args)
        assert value == pytest.approx(_net_loss(layers[:1], W0)), where


PARAMS = {"a": tg.tensor(np.array([1.0, 2.0]))}


def test_a_new_key_in_a_dict_of_tensors():
    def loss(w):
        weights = np.arange(len(PARAMS))[:, None]
        return tnp.sum(tnp.stack([w * v for v in PARAMS.values()]) * weights)

    def expect(w):
        vals = [w * v.numpy() for v in PARAMS.values()]
        return np.sum(np.stack(vals) * np.arange(len(PARAMS))[:, None])

    step = tg.compile(loss)
    try:
        for change in (
            lambda: None,
            lambda: PARAMS.__setitem__("b", tg.tensor(np.array([3.0, -1.0]))),  # a new key
            lambda: PARAMS.__setitem__("c", tg.tensor(np.array([0.5, 0.5]))),
            # the same keys in another order: the stack (and the loss) changes
            lambda: PARAMS.update({k: PARAMS.pop(k) for k in ("b", "a")}),
            lambda: PARAMS.pop("c"),  # a key removed
        ):
            change()
            value, grad = step.value_and_grad(W0)
            assert value == pytest.approx(expect(W0))
            np.testing.assert_allclose(grad, central(expect, W0), rtol=1e-7)
    finally:
        PARAMS.clear()
        PARAMS["a"] = tg.tensor(np.array([1.0, 2.0]))


def test_len_of_containers_reached_every_way():
    objs = [object()]
    empty: list = []
    holder = Box(items=[Box(), Box()], shape=(1, 2))
    step = tg.compile(lambda w, h: tnp.sum(w) * (len(objs) + 10 * len(empty) + 100 * len(h.items)))
    closure_tuple = (np.ones(2),)

    def by_tuple(w):
        return sum(tnp.sum(w * a) for a in closure_tuple)

    tstep = tg.compile(by_tuple)
    s = np.sum(W0)
    assert step(W0, holder) == pytest.approx(s * 201)
    objs.append(object())  # len(list) of a closure list of objects
    assert step(W0, holder) == pytest.approx(s * 202)
    empty.append(1)  # a list empty when captured
    assert step(W0, holder) == pytest.approx(s * 212)
    holder.items.append(Box())  # a list on an argument object
    assert step(W0, holder) == pytest.approx(s * 312)
    assert tstep(W0) == pytest.approx(s)
    closure_tuple = (np.ones(2), np.full(2, 3.0))  # rebound to a longer tuple
    assert tstep(W0) == pytest.approx(4 * s)


def test_unchanged_containers_replay_without_capturing():
    net = Net([2, 4, 3, 1])
    step = tg.compile(net.loss)
    for _ in range(20):
        step.value_and_grad(W0)
        with tg.no_grad():
            for W, b in net.layers:  # an optimizer step: new values, same containers
                W -= 0.01 * W.grad
                b -= 0.01 * b.grad
                W.grad = b.grad = None
    assert step.stats["captures"] == 1


def test_named_tuples_and_dict_subclasses_of_numbers_are_guards():
    """A named tuple or a defaultdict of numbers read from outside is compared whole
    (capturing used to fail on rebuilding a named tuple from its items)."""
    from collections import defaultdict, namedtuple

    Cfg = namedtuple("Cfg", "a b")
    holder = Box(cfg=Cfg(1.0, 2.0))
    table = defaultdict(float, {"k": 3.0})
    step = tg.compile(lambda w: tnp.sum(w) * holder.cfg.a * table["k"])
    assert step(W0) == pytest.approx(-1.5)
    holder.cfg = Cfg(5.0, 2.0)
    assert step(W0) == pytest.approx(-7.5)
    table["k"] = 1.0
    assert step(W0) == pytest.approx(-2.5)


def test_hvp_reads_argument_objects_anew():
    b = Box(s=2.0, A=np.array([1.0, 3.0]))
    step = tg.compile(lambda x, b: tnp.sum(x**3 * b.A) * b.s)
    x, v = np.array([1.0, 2.0]), np.array([1.0, -0.5])
    for change in (lambda: None, lambda: setattr(b, "s", 5.0), lambda: b.A.fill(2.0)):
        change()
        np.testing.assert_allclose(step.hvp(x, b, v), 6 * x * b.A * b.s * v)


# --- items of one container checked together ----------------------------------------------
def _mixed_containers():
    """Containers of numbers that also hold something else (so not compared whole: each
    number is a guard of its own, checked together with its neighbours)."""
    tensor = tg.tensor(np.array([1.0, 2.0]))
    return {
        "list": [0.5, 1.5, -2.0, 3.0, tensor],
        "list-in-object": Box(c=[0.5, 1.5, -2.0, 3.0, None]),
        "dict": {0: 0.5, 1: 1.5, "two": -2.0, 3: 3.0, "t": tensor},
    }


@pytest.mark.filterwarnings("ignore:tapegrad.compile.*keeps capturing")
@pytest.mark.parametrize("kind", ["list", "list-in-object", "dict"])
def test_items_of_a_container_checked_together_catch_every_change(kind):
    """Every change to one of many guarded items recaptures; an equal number in a new
    object replays; the container's length is a guard too."""
    box = _mixed_containers()[kind]
    items = box.c if kind == "list-in-object" else box
    keys = [0, 1, "two" if kind == "dict" else 2, 3]

    def f(w):
        return sum(tnp.sum(tnp.sin(w * items[k])) * (j + 1) for j, k in enumerate(keys))

    def expect(w):
        return sum(np.sum(np.sin(w * items[k])) * (j + 1) for j, k in enumerate(keys))

    step = tg.compile(f)
    changes = [
        ("first call", None, None),
        ("same value, new object", 1, float(str(items[1]))),
        ("a middle item", 1, 4.0),
        ("the first item", 0, 0.25),
        ("the last number", 3, -0.5),
        ("0.0, then -0.0", 0, 0.0),
        ("-0.0", 0, -0.0),
        ("an int for a float", 3, 2),
    ]
    for what, k, v in changes:
        if k is not None:
            items[keys[k]] = v
        captures = step.stats["captures"]
        value, grad = step.value_and_grad(W0)
        assert value == pytest.approx(expect(W0), abs=1e-14), what
        np.testing.assert_allclose(grad, central(expect, W0), rtol=1e-7, err_msg=what)
        if what == "same value, new object":
            assert step.stats["captures"] == captures, what
        elif what != "first call":
            assert step.stats["captures"] == captures + 1, what
    if isinstance(items, list):
        captures = step.stats["captures"]
        items.insert(0, 9.0)  # every item moves: each a different number now
        assert step(W0) == pytest.approx(expect(W0), abs=1e-14)
        assert step.stats["captures"] == captures + 1
        del items[0]
        items.append(1.0)  # a longer list (its length is a guard)
        step(W0)
        assert step.stats["captures"] == captures + 2


# --- what changes between calls: each recaptures, never a stale number -------------------
T2 = tg.tensor(np.array([1.0, 2.0]))


def _scenarios():
    """(name, state, fn(w, state), change(state)): the state fn reads from outside."""
    import math

    def set_items(**kv):
        def change(s):
            for k, v in kv.items():
                s[int(k[1:])] = v

        return change

    return [
        ("None item, then a number", [2.0, None, T2],
         lambda w, s: tnp.sum(w * s[0]) * (1.0 if s[1] is None else s[1]), set_items(i1=3.0)),
        ("numbers only: 0.0 -> -0.0 and 3.0 -> 3", [0.0, 3.0],
         lambda w, s: tnp.sum(w) * math.atan2(s[0], -1.0)
         + tnp.sum(w) * (s[1] / 2 if isinstance(s[1], float) else s[1] // 2),
         set_items(i0=-0.0, i1=3)),
        ("a tuple item's zero changes sign", [(0.0, 1.0), 2.0, T2],
         lambda w, s: tnp.sum(w) * math.atan2(s[0][0], -1.0) + s[1] * tnp.sum(w),
         set_items(i0=(-0.0, 1.0))),
        ("NumPy float32 and complex zeros change sign",
         [np.float32(0.0), complex(1.0, 0.0), 1.0, T2],
         lambda w, s: tnp.sum(w) * (math.copysign(1.0, float(s[0]))
                                    + 2 * math.copysign(1.0, s[1].imag)) + s[2] * tnp.sum(w),
         set_items(i0=np.float32(-0.0), i1=complex(1.0, -0.0))),
        ("an array where a number was", [1.0, 2.0],
         lambda w, s: tnp.sum(w * s[0]) * 2.0, set_items(i0=np.array([1.0, 3.0]))),
        ("a shorter list, an array inside a nested list", [[1.0, 2.0], 3.0, 4.0, T2],
         lambda w, s: tnp.sum(w * s[0][0]) + tnp.sum(w * s[1]) + tnp.sum(w * s[2]),
         lambda s: s.__setitem__(slice(None), [[np.array([1.0, 5.0]), 2.0], 3.0, T2])),
        ("tuples of numbers replaced, one by an array", [(1.0,), [1.0, 2.0], (3.0,), T2],
         lambda w, s: tnp.sum(w * s[0][0]) + tnp.sum(w * s[1][0]) + tnp.sum(w * s[2][0]),
         set_items(i1=[5.0, 2.0], i2=(np.array([1.0, 5.0]),))),
        ("a set of options and a fraction", [{"double"}, __import__("fractions").Fraction(1, 2)],
         lambda w, s: tnp.sum(w) * (2.0 if "double" in s[0] else 1.0) * float(s[1]),
         lambda s: (s[0].discard("double"), s.__setitem__(1, s[1] * 3))),
        ("dict values under tuple and float keys", [{(0, 1): 2.0, 0.5: 3.0, "t": T2}],
         lambda w, s: tnp.sum(w * s[0][(0, 1)]) + tnp.sum(w * s[0][0.5]),
         lambda s: s[0].update({(0, 1): 5.0, 0.5: -1.0})),
    ]  # fmt: skip


@pytest.mark.filterwarnings("ignore:tapegrad.compile")
@pytest.mark.parametrize("case", range(len(_scenarios())))
def test_changed_numbers_none_zeros_and_arrays_recapture(case):
    name, state, f, change = _scenarios()[case]
    step = tg.compile(lambda w: f(w, state))
    w = np.array([0.3, -0.7])
    step(w)
    change(state)
    value, grad = step.value_and_grad(w)
    expect, expect_grad = tg.value_and_grad(lambda w: f(w, state))(w)
    np.testing.assert_allclose(float(value), float(expect), rtol=1e-12, err_msg=name)
    np.testing.assert_allclose(grad, expect_grad, rtol=1e-12, err_msg=name)
    assert step.stats["captures"] == 2, name


def test_values_beyond_the_search_depth_are_warned_about():
    """What fn reads more than closures.DEPTH containers down is not a guard: capture
    says so (a replay would not see a change there), rather than replay it silently."""
    deep = [[[[[[1.0, 2.0, T2]]]]]]

    def f(w):
        return tnp.sum(w * deep[0][0][0][0][0][0])

    with pytest.warns(RuntimeWarning, match="beyond the 5 levels"):
        tg.compile(f)(np.array([0.3, -0.7]))
    long = [*np.linspace(0.5, 1.5, 1500).tolist(), T2]  # items past the 1,000 searched
    with pytest.warns(RuntimeWarning, match="1000 items of a container"):
        tg.compile(lambda w: tnp.sum(w * long[1200]))(np.array([0.3, -0.7]))
    shallow = [[1.0, 2.0, T2]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to say when the search reaches it all
        tg.compile(lambda w: tnp.sum(w * shallow[0][0]))(np.array([0.3, -0.7]))


def test_a_container_reached_by_two_routes_is_guarded_on_both():
    """The items of a list are guarded under the first route the search finds it by;
    fn reading them through another (``m.L`` beside the closure ``L``) sees a new list
    put there: that route must still lead to the same list."""
    items = [1.0, 2.0, T2]
    m = Box(L=items)

    def f(w):
        items  # (fn names the closure too: a default, a logging line)
        return tnp.sum(w * m.L[0]) + tnp.sum(w * m.L[1])

    step = tg.compile(f)
    w = np.array([0.3, -0.7])
    step(w)
    m.L = [5.0, 2.0, T2]
    value, grad = step.value_and_grad(w)
    assert value == pytest.approx(-2.8, rel=1e-12)
    np.testing.assert_allclose(grad, [7.0, 7.0], rtol=1e-12)
    assert step.stats["captures"] == 2


# --- draws from outside: iterators and Python's random ------------------------------------
# A value drawn while capturing (``next(it)``, ``random.random()``) is a constant of the
# program: replays give the first call's draw where eager code draws anew. Capture must
# say so, once, naming what was drawn from; never replay the frozen draw silently.
def _drawn(step, calls=3):
    """The step's values over ``calls`` calls and the compile warnings they raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        values = [float(step(np.ones(2))) for _ in range(calls)]
    return values, [str(w.message) for w in caught if "tapegrad.compile" in str(w.message)]


@pytest.fixture
def python_random():
    """The module-level ``random`` generator, seeded, and put back as it was."""
    state = random.getstate()
    random.seed(0)
    yield random
    random.setstate(state)


def test_python_random_module_drawn_while_capturing_warns(python_random):
    for draw in (lambda: python_random.random(), lambda: python_random.gauss(0.0, 1.0)):
        values, said = _drawn(tg.compile(lambda w, draw=draw: tnp.sum(w * draw())))
        assert values[0] == values[1] == values[2]  # (the capture's draw, replayed)
        assert len(said) == 1 and "Python's random module" in said[0], said
        assert "constants of the program" in said[0] and "argument" in said[0]


def test_a_random_instance_in_a_closure_warns(python_random):
    r = random.Random(0)  # its own state: the module's does not change

    def f(w):
        # (gauss keeps a second draw in r.gauss_next: the generator's state, watched
        # whole, not a value of fn's to guard or to warn about again)
        return tnp.sum(w * r.uniform(1.0, 2.0)) + tnp.sum(w * r.gauss(0.0, 1.0))

    values, said = _drawn(tg.compile(f))
    assert values[0] == values[1] == values[2]
    assert len(said) == 1 and "random.Random r" in said[0], said
    # drawn from by a helper it calls, through the helper's globals (a SystemRandom,
    # whose state cannot be read: reaching it is enough)
    _values, said = _drawn(tg.compile(lambda w: _system_draw(w) * 2.0))
    assert len(said) == 1 and "random.SystemRandom _SYSTEM" in said[0], said


_SYSTEM = random.SystemRandom()


def _system_draw(w):
    return tnp.sum(w * _SYSTEM.random())


_CFG = types.ModuleType("draw_cfg")  # a configuration module fn reads ``_CFG.x`` from


def test_generators_in_a_module_attribute_warn():
    _CFG.rng, _CFG.r = np.random.default_rng(0), random.Random(0)
    values, said = _drawn(tg.compile(lambda w: tnp.sum(w * _CFG.rng.normal())))
    assert values[0] == values[1] == values[2]
    assert len(said) == 1 and "NumPy random generator" in said[0], said
    _values, said = _drawn(tg.compile(lambda w: tnp.sum(w * _CFG.r.random())))
    assert len(said) == 1 and "random.Random _CFG.r" in said[0], said


def _iterator_cases():
    """(name, fn of w, what the warning names): each fn draws with next() from outside."""
    it = iter([1.0, 2.0, 3.0])
    count = itertools.count(1)
    in_list = [iter([1.0, 2.0, 3.0]), 0.5]
    in_dict = {"draws": iter([1.0, 2.0, 3.0]), "scale": 0.5}
    helper_it = iter([1.0, 2.0, 3.0])
    _CFG.batches = iter([1.0, 2.0, 3.0])

    def helper():
        return next(helper_it)

    return [
        ("next() on a closure iterator", lambda w: tnp.sum(w * next(it)), "it"),
        ("itertools.count", lambda w: tnp.sum(w * next(count)), "count"),
        ("inside a list", lambda w: tnp.sum(w * next(in_list[0]) * in_list[1]), "in_list[0]"),
        ("inside a dict", lambda w: tnp.sum(w * next(in_dict["draws"])), "in_dict['draws']"),
        ("a helper's closure", lambda w: tnp.sum(w * helper()), "helper_it"),
        ("a module's attribute", lambda w: tnp.sum(w * next(_CFG.batches)), "_CFG.batches"),
    ]


@pytest.mark.parametrize("case", range(len(_iterator_cases())))
def test_an_iterator_read_from_outside_warns(case):
    name, f, where = _iterator_cases()[case]
    values, said = _drawn(tg.compile(f))
    assert values[0] == values[1] == values[2], name  # (what the warning is about)
    assert len(said) == 1 and "iterator" in said[0] and where in said[0], (name, said)
    assert "constants of the program" in said[0], name


def test_a_generator_object_as_argument_warns():
    def draws():
        yield from (1.0, 2.0, 3.0)

    gen = draws()
    step = tg.compile(lambda w, g: tnp.sum(w * next(g)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        values = [float(step(np.ones(2), gen)) for _ in range(3)]
    said = [str(w.message) for w in caught if "tapegrad.compile" in str(w.message)]
    assert values == [2.0, 2.0, 2.0]  # (eager: 2, 4, 6)
    assert len(said) == 1 and "argument 1" in said[0] and "generator" in said[0], said


def test_no_draws_no_warning(python_random, tmp_path):
    """Closures, globals, containers, helpers, a random.Random never drawn from while
    capturing (nor the module's generator), iterators made inside fn, and files it only
    writes to (a log, the standard streams): nothing to say."""
    table = {"scale": 0.5, "shift": [1.0, 2.0]}
    r = random.Random(0)
    steps = range(3)

    def helper(w):
        return w * table["shift"][1]

    def f(w):
        if r is None:  # (reads the generator, draws nothing)
            return tnp.sum(w)
        print("capturing", file=log)
        print("capturing", file=sys.stderr)
        return tnp.sum(helper(w) * table["scale"]) + sum(float(k) for k in iter(steps))

    w = np.array([0.3, -0.7])
    with open(tmp_path / "log.txt", "w") as log, warnings.catch_warnings():
        warnings.simplefilter("error")
        step = tg.compile(f)
        for _ in range(3):
            value, _ = step.value_and_grad(w)
        assert value == pytest.approx(float(tg.value_and_grad(f)(w)[0]), rel=1e-12)
    assert step.stats["captures"] == 1


# --- generators fn makes itself -----------------------------------------------------------
# A generator made inside fn without a seed cannot be reached from outside, and it draws
# anew on every eager call: the capture's draws would be replayed silently. Capture sees
# it being made (it asks the operating system for entropy) on its own thread, and warns.
def _unseeded_cases():
    """(what the warning names, fn of w): each makes a generator without a seed."""
    return [
        ("default_rng()", lambda w: tnp.sum(w * np.random.default_rng().normal())),
        ("default_rng()", lambda w: tnp.sum(w * default_rng().normal())),  # from-import
        ("PCG64()", lambda w: tnp.sum(w * np.random.Generator(np.random.PCG64()).random())),
        ("SeedSequence()", lambda w: tnp.sum(w * default_rng(np.random.SeedSequence()).random())),
        ("MT19937()", lambda w: tnp.sum(w * np.random.Generator(np.random.MT19937()).random())),
        ("RandomState()", lambda w: tnp.sum(w * np.random.RandomState().rand())),
        ("Random()", lambda w: tnp.sum(w * random.Random().random())),
        ("SystemRandom", lambda w: tnp.sum(w * random.SystemRandom().random())),
        ("secrets", lambda w: tnp.sum(w * secrets.randbelow(1000))),
        ("default_rng()", _made_in_a_helper),
    ]


def _made_in_a_helper(w):
    return tnp.sum(w * _noise())


def _noise():
    rng = np.random.default_rng()
    return rng.normal()


@pytest.mark.parametrize("case", range(len(_unseeded_cases())))
def test_a_generator_made_inside_fn_without_a_seed_warns(case):
    what, f = _unseeded_cases()[case]
    values, said = _drawn(tg.compile(f))
    assert values[0] == values[1] == values[2]  # (the capture's draw, replayed)
    assert len(said) == 1 and "unseeded random generator" in said[0], (what, said)
    assert what in said[0] and __file__ in said[0], (what, said)  # where it was made
    assert "constants of the program" in said[0] and "seed it" in said[0]


def _seeded_cases():
    """Generators made inside fn from a seed: the same numbers on every call."""
    return [
        lambda w: tnp.sum(w * np.random.default_rng(0).normal()),
        lambda w: tnp.sum(w * default_rng(seed=1).normal()),
        lambda w: tnp.sum(w * np.random.Generator(np.random.PCG64(2)).random()),
        lambda w: tnp.sum(w * default_rng(np.random.SeedSequence(3)).random()),
        lambda w: tnp.sum(w * np.random.RandomState(4).rand()),  # (legacy seeding)
        lambda w: tnp.sum(w * np.random.Generator(np.random.PCG64(5).jumped()).random()),
        lambda w: tnp.sum(w * copy.deepcopy(np.random.default_rng(6)).random()),
        lambda w: tnp.sum(w * np.random.default_rng(7).spawn(1)[0].random()),
        lambda w: tnp.sum(w * random.Random(8).random()),
        lambda w: tnp.sum(w * copy.deepcopy(random.Random(9)).random()),
        lambda w: tnp.sum(w * pickle.loads(pickle.dumps(random.Random(10))).random()),
    ]


@pytest.mark.parametrize("case", range(len(_seeded_cases())))
def test_a_generator_made_inside_fn_from_a_seed_replays_without_warning(case):
    f = _seeded_cases()[case]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        step = tg.compile(f)
        values = [float(step(np.ones(2))) for _ in range(3)]
    assert values == [float(f(tg.tensor(np.ones(2))))] * 3


def _entropy_sources():
    """What capture wraps while fn runs (what generators made without a seed call)."""
    return (random._urandom, random.Random.__dict__["seed"], np.random.bit_generator.randbits)


_ENTROPY = _entropy_sources()  # as they are outside a capture


def test_what_is_not_seen_is_as_documented():
    """RandomState(seed) counts as seeded whatever seed holds, and os.urandom() is not a
    generator: both replay the capture's numbers without a word (docs/guide/compile.md)."""
    seed = None
    for f in (
        lambda w: tnp.sum(w * np.random.RandomState(seed).rand()),
        lambda w: tnp.sum(w * os.urandom(1)[0]),
    ):
        values, said = _drawn(tg.compile(f))
        assert values[0] == values[1] == values[2] and said == []


def test_what_capture_watches_is_put_back_even_when_fn_raises():
    made = np.random.default_rng

    def fails(w):
        np.random.default_rng()
        raise ValueError("inside fn")

    with pytest.raises(ValueError, match="inside fn"):
        tg.compile(fails)(np.ones(2))
    _drawn(tg.compile(_unseeded_cases()[0][1]), calls=1)
    assert np.random.default_rng is made  # public names are never replaced
    assert random._urandom is os.urandom
    assert all(a is b for a, b in zip(_entropy_sources(), _ENTROPY))


def test_generators_made_on_another_thread_while_capturing_are_not_the_capture_s():
    """Eager code on another thread makes unseeded generators while fn is captured (and a
    second capture runs there too): they are ordinary generators, and neither capture
    takes the other thread's for its own."""
    capturing, made_them = threading.Event(), threading.Event()
    made, said_there = [], []

    def other_thread():
        capturing.wait(60)
        for _ in range(3):
            made.append((np.random.default_rng(), random.Random()))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tg.compile(lambda w: tnp.sum(w * default_rng().normal()))(np.ones(2))
        said_there.extend(str(w.message) for w in caught)
        made_them.set()

    def f(w):  # captured while the other thread makes its generators
        capturing.set()
        assert made_them.wait(60)
        return tnp.sum(w * 2.0)

    there = threading.Thread(target=other_thread)
    there.start()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = float(tg.compile(f)(np.ones(2)))
        there.join()
    said = [str(w.message) for w in caught if "tapegrad.compile(f)" in str(w.message)]
    assert value == 4.0 and not any("unseeded" in s for s in said), said
    assert any("unseeded" in s for s in said_there), said_there  # (its own capture's)
    draws = [(g.random(), r.random()) for g, r in made]
    assert all(isinstance(g, np.random.Generator) for g, _ in made)
    assert len(set(draws)) == 3  # each made from fresh entropy
    assert all(a is b for a, b in zip(_entropy_sources(), _ENTROPY))
