"""Backward passes and transforms started inside hooks, custom backwards, transforms and
captures: each runs on its own tape and leaves the outer one intact."""

from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp

from .helpers import run_in_threads


def inner_gradient():
    """A gradient computed from scratch: sum(z * z) at ones(2) -> [2, 2]."""
    return tg.grad(lambda z: tnp.sum(z * z))(np.ones(2))


class Twice(tg.Function):
    seen: list = []

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        with tg.enable_grad():
            Twice.seen.append(inner_gradient())
        _, vjp_fn = tg.vjp(lambda z: z * 3.0, np.ones(1))
        Twice.seen.append(vjp_fn(np.ones(1))[0])
        # an eager backward of its own, on a tensor made here
        w = tg.tensor([1.0, 2.0], requires_grad=True)
        with tg.enable_grad():
            tnp.sum(w**2).backward()
        Twice.seen.append(w.grad)
        return 2 * g


def test_transforms_and_backwards_inside_a_custom_backward():
    Twice.seen.clear()
    x = tg.tensor(np.ones(3), requires_grad=True)
    y = tnp.sum(Twice.apply(x) * tnp.sin(x))
    y.backward()
    np.testing.assert_allclose(x.grad, 2 * np.sin(1.0) + 2 * np.cos(1.0))
    np.testing.assert_array_equal(Twice.seen[0], [2.0, 2.0])
    np.testing.assert_array_equal(Twice.seen[1], [3.0])
    np.testing.assert_array_equal(Twice.seen[2], [2.0, 4.0])

    # grad mode inside a custom backward is off, as in PyTorch, but transforms turn it on
    class Probe(tg.Function):
        @staticmethod
        def forward(ctx, x):
            return x + 0.0

        @staticmethod
        def backward(ctx, g):
            assert not tg.is_grad_enabled()
            np.testing.assert_array_equal(inner_gradient(), [2.0, 2.0])
            return g

    tnp.sum(Probe.apply(x)).backward()


def test_transforms_inside_hooks():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    h = x * 3.0

    def hook(g):
        seen.append(inner_gradient())
        return g * tg.grad(lambda s: s * s)(2.0)  # scale by 4, computed by a transform

    h.register_hook(hook)
    x.register_post_accumulate_grad_hook(lambda t: seen.append(inner_gradient()))
    tnp.sum(h * h).backward()
    np.testing.assert_allclose(x.grad, 4 * 3 * 2 * 3 * np.array([1.0, 2.0]))
    assert len(seen) == 2
    for s in seen:
        np.testing.assert_array_equal(s, [2.0, 2.0])


def test_transform_inside_a_transform_on_constants():
    def outer(x):
        g = inner_gradient()  # depends on nothing of x: fine at any depth
        return tnp.sum(x * g)

    np.testing.assert_array_equal(tg.grad(outer)(np.ones(2)), [2.0, 2.0])
    np.testing.assert_array_equal(
        tg.grad(lambda y: tnp.sum(y * tg.grad(outer)(np.ones(2))))(np.ones(2)), [2.0, 2.0]
    )


def test_transform_and_backward_inside_a_capture():
    def loss(w, data):
        g = tg.grad(lambda v: tnp.sum(v**3))(data)  # on a non-differentiated argument
        return tnp.sum(w * g)

    step = tg.compile(loss)
    w = np.array([1.0, 2.0])
    for data in (np.array([1.0, 2.0]), np.array([1.0, 2.0]), np.array([2.0, 1.0])):
        value, g = step.value_and_grad(w, data)
        assert value == pytest.approx(np.sum(w * 3 * data**2))
        np.testing.assert_allclose(g, 3 * data**2)
    # the inner gradient read the data's values: a guard, so new data is a new program
    assert step.stats["captures"] == 2 and step.stats["replays"] == 3
    # on the differentiated argument: the inner gradient is recorded into the program
    second = tg.compile(lambda w: tnp.sum(tg.grad(lambda v: tnp.sum(v**3))(w)))
    for w in (np.array([1.0, 2.0]), np.array([-0.5, 3.0])):
        value, g = second.value_and_grad(w)
        assert value == pytest.approx(np.sum(3 * w**2))
        np.testing.assert_allclose(g, 6 * w)
    assert second.stats["captures"] == 1 and second.stats["replays"] == 2

    def backward_inside(w):
        y = tnp.sum(w**2)
        y.backward()
        return y

    with pytest.raises(RuntimeError, match=r"backward\(\) inside a function being captured"):
        tg.compile(backward_inside).value_and_grad(w)


def test_eager_tape_intact_after_nested_work():
    x = tg.tensor([0.5, -1.0], requires_grad=True)
    y = tnp.tanh(x) * 2.0
    inner_gradient()
    tg.compile(lambda v: tnp.sum(v**2)).value_and_grad(np.ones(2))
    z = tnp.sum(y * x)
    z.backward()
    want = 2 * np.tanh([0.5, -1.0]) + 2 * x.numpy() * (1 - np.tanh([0.5, -1.0]) ** 2)
    np.testing.assert_allclose(x.grad, want)


def test_outer_graph_tensor_used_inside_a_hook_with_grad_on_raises():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2.0
    z = y * 3.0

    def hook(g):
        with tg.enable_grad():
            return (y * 1.0).numpy() * 0 + g

    z.register_hook(hook)
    with pytest.raises(RuntimeError, match="belongs to another graph"):
        tnp.sum(z).backward()


def test_transforms_in_threads_are_independent():
    errors = []

    def work(k):
        try:
            for _ in range(20):
                a = np.full(3, float(k))
                np.testing.assert_allclose(tg.grad(lambda v: tnp.sum(v**2))(a), 2 * a)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    run_in_threads(work)
    assert not errors
