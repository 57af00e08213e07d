"""Custom functions: Python and compiled backwards, validation of what backward and jvp
return."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads

from .custom_ops import (
    BroadcastGrad,
    Cube,
    Float32Grad,
    ScaledProduct,
    SplitSum,
    WrongCount,
    WrongShape,
)


def test_python_backward_inside_a_graph():
    check_grads(lambda x: tnp.sum(tnp.sin(Cube.apply(x * 2)) * x), [np.array([0.3, -0.4, 0.9])])
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    tnp.sum(Cube.apply(x)).backward()
    stats = tg.backward_stats()
    assert stats["python_callbacks"] == 1
    np.testing.assert_allclose(x.grad, [3.0, 12.0])


def test_compiled_backward_stays_in_compiled_code():
    x = tg.tensor(np.array([0.5, 1.5, -1.0]), requires_grad=True)
    y = tg.tensor(np.array([2.0, -1.0, 0.25]), requires_grad=True)
    z = x
    for _ in range(20):  # a graph of many compiled custom nodes mixed with built-ins
        z = tnp.tanh(ScaledProduct.apply(z, y) * 0.3) + x
    tnp.sum(z).backward()
    stats = tg.backward_stats()
    assert stats["python_callbacks"] == 0
    assert stats["nodes"] == 20 * 4 + 1
    check_grads(
        lambda a, b: tnp.sum(tnp.tanh(ScaledProduct.apply(a, b)) * a),
        [np.array([0.5, 1.5, -1.0]), np.array([2.0, -1.0, 0.25])],
    )


def test_compiled_backward_in_float32_and_with_a_constant_input():
    x = tg.tensor(np.array([1.0, 2.0], np.float32), requires_grad=True)
    c = np.array([3.0, 4.0], np.float32)
    tnp.sum(ScaledProduct.apply(x, tg.tensor(c))).backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad, 2 * c)


def test_ctx_features_and_non_differentiable_outputs():
    x = tg.tensor([1.0, 5.0, 3.0], requires_grad=True)
    total, idx = SplitSum.apply(x, 3.0)
    assert total.requires_grad and not idx.requires_grad and idx.item() == 1
    total.backward()
    np.testing.assert_array_equal(x.grad, [3.0, 3.0, 3.0])

    seen = {}

    class Probe(tg.Function):
        @staticmethod
        def forward(ctx, a, b, c):
            seen["needs"] = ctx.needs_input_grad
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g, None, None

    Probe.apply(x, tg.tensor([1.0, 1.0, 1.0]), 2.0)
    assert seen["needs"] == (True, False, False)


def test_broadcast_gradient_is_summed_to_the_input_shape():
    b = tg.tensor([1.0, 2.0], requires_grad=True)
    m = tg.tensor(np.ones((3, 2)), requires_grad=True)
    tnp.sum(BroadcastGrad.apply(b, m) * 2).backward()
    np.testing.assert_array_equal(b.grad, [6.0, 6.0])
    np.testing.assert_array_equal(m.grad, np.full((3, 2), 2.0))


def test_backward_dtype_is_cast_to_the_input():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    tnp.sum(Float32Grad.apply(x)).backward()
    assert x.grad.dtype == np.float64


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (WrongCount, r"WrongCount\.backward returned 3 gradients, expected 1"),
        (
            WrongShape,
            r"WrongShape\.backward returned an invalid gradient at index 0: got shape "
            r"\(7,\) but expected shape compatible with \(2,\)",
        ),
    ],
)
def test_invalid_backward_results_name_the_function(fn, message):
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    (x * 1).sum().backward()
    before = x.grad.copy()
    with pytest.raises(RuntimeError, match=message):
        tnp.sum(fn.apply(x)).backward()
    np.testing.assert_array_equal(x.grad, before)


def test_python_custom_function_graph_is_freed():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = tnp.sum(Cube.apply(x))
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad, 2 * np.array([3.0, 12.0]))
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()


class _Doubling(tg.Function):
    """2 x, with a tangent rule each subclass replaces."""

    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        return g * 2.0


def _jvp_returning(name, rule):
    return type(name, (_Doubling,), {"jvp": staticmethod(rule)})


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (lambda ctx, t: t * (2.0 + 1j), r"complex values \(dtype complex128\)"),
        (lambda ctx, t: (t * 2.0).astype(np.complex64), r"complex values \(dtype complex64\)"),
        (lambda ctx, t: np.array(["a", "b", "c"]), r"values of dtype <U1, not real numbers"),
        (
            lambda ctx, t: np.array([1.0, None, 2.0], dtype=object),
            r"values of dtype object, not real numbers",
        ),
    ],
    ids=["complex128", "complex64", "str", "object"],
)
def test_custom_jvp_returning_non_tangents_is_a_type_error(rule, message):
    """As a backward returning complex gradients: the imaginary part used to be dropped
    with only a ComplexWarning (and None in an object array became nan)."""
    fn = _jvp_returning("Twice", rule)
    x = np.array([1.0, 2.0, 3.0])
    want = r"function Twice\.jvp \(tangent 0\) returned " + message
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(TypeError, match=want):
            tg.jvp(fn.apply, (x,), (np.ones(3),))
        with pytest.raises(TypeError, match=want):
            tg.jacfwd(lambda v: tnp.sin(fn.apply(v)))(x)
    ok = _jvp_returning("Twice", lambda ctx, t: np.asarray(t * 2, dtype=np.int64))
    np.testing.assert_array_equal(tg.jvp(ok.apply, (x,), (np.ones(3),))[1], [2.0, 2.0, 2.0])


class _WithIndex(tg.Function):
    """2 x and argsort(x); the jvp returns a tangent for both outputs."""

    @staticmethod
    def forward(ctx, x):
        return x * 2.0, np.argsort(x)

    @staticmethod
    def backward(ctx, g, g_index):
        return g * 2.0

    @staticmethod
    def jvp(ctx, t):
        return t * 2.0, t * 1.5


class _WithMarked(_WithIndex):
    """2 x and floor(x), marked non-differentiable."""

    @staticmethod
    def forward(ctx, x):
        m = np.floor(x)
        ctx.mark_non_differentiable(m)
        return x * 2.0, m


@pytest.mark.parametrize("fn", [_WithIndex, _WithMarked], ids=["int64", "marked"])
def test_outputs_without_gradients_get_no_tangent(fn):
    """An integer output, or one marked non-differentiable, gets no gradient in reverse
    mode; in forward mode it gets no tangent, whatever jvp returns (the int64 output's
    tangent 1.5 was truncated to 1 and carried on, the marked one's was used)."""
    x = np.array([2.5, 0.5, 1.5])
    f = lambda v: v * fn.apply(v)[1]  # noqa: E731
    second = fn.apply(x)[1].numpy()
    _, t = tg.jvp(f, (x,), (np.ones(3),))
    np.testing.assert_array_equal(t, second)
    np.testing.assert_array_equal(tg.jacfwd(f)(x), np.diag(second))
    np.testing.assert_array_equal(tg.grad(lambda v: tnp.sum(f(v)))(x), second)
    _, t = tg.jvp(lambda v: fn.apply(v)[1], (x,), (np.ones(3),))
    np.testing.assert_array_equal(t, np.zeros(3))
    _, t = tg.jvp(lambda v: fn.apply(v)[0], (x,), (np.ones(3),))
    np.testing.assert_array_equal(t, np.full(3, 2.0))


CUSTOM = {
    "cube": lambda a, b: Cube.apply(a),
    "scaled": lambda a, b: ScaledProduct.apply(a, b),
    "sin": lambda a, b: tnp.sin(a),
    "mul": lambda a, b: a * b,
    "tanh_add": lambda a, b: tnp.tanh(a + b),
    "split": lambda a, b: SplitSum.apply(a, 0.5)[0] + b,
}


@given(
    program=st.lists(
        st.tuples(st.sampled_from(sorted(CUSTOM)), st.integers(0, 50), st.integers(0, 50)),
        min_size=1,
        max_size=8,
    ),
    seed=st.integers(0, 1000),
)
def test_random_graphs_mixing_custom_and_builtin_ops(program, seed):
    rng = np.random.default_rng(seed)

    def run(x, y):
        values = [x, y]
        for name, i, j in program:
            a, b = values[i % len(values)], values[j % len(values)]
            values.append(tnp.tanh(CUSTOM[name](a, b)))  # keep values bounded
        return sum(tnp.sum(v) for v in values[2:])

    check_grads(run, [rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 3)])
