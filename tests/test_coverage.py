"""Coverage beyond the table's generated cases: NumPy's ``where=`` / ``initial=`` of
reductions, ``np.add.at`` on tensors, einsum's interleaved form, and the hostile cases
each could get quietly wrong (NaN outside the mask, repeated indices, in-place on a
leaf, a tensor written into a NumPy array, replay under ``tg.compile``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads

RNG = np.random.default_rng(7)
X = RNG.uniform(-2, 2, (3, 4))
MASK = np.array([[True, False, True, True], [False, True, True, False], [True, True, True, True]])


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("sum", {}),
        ("sum", {"initial": 2.5}),
        ("mean", {}),
        ("prod", {"initial": 0.5}),
        ("max", {"initial": -10.0}),
        ("min", {"initial": 10.0}),
        ("var", {"ddof": 1}),
        ("std", {}),
    ],
)
def test_where_of_reductions_matches_numpy_and_differences(name, kwargs):
    x = np.where(MASK, X, np.nan)  # NaN where the mask leaves the element out
    got = getattr(tnp, name)(tg.tensor(x), axis=1, where=MASK, **kwargs).numpy()
    want = getattr(np, name)(x, axis=1, where=MASK, **kwargs)
    np.testing.assert_allclose(got, want, rtol=1e-12)

    def f(x):
        return tnp.sum(getattr(tnp, name)(tnp.where(MASK, x, np.nan), axis=1, where=MASK, **kwargs))

    check_grads(f, [X])
    leaf = tg.tensor(x, requires_grad=True)
    tnp.sum(getattr(tnp, name)(leaf, axis=1, where=MASK, **kwargs)).backward()
    assert np.all(np.isfinite(leaf.grad)) and np.all(leaf.grad[~MASK] == 0)


def test_where_from_a_tensor_condition_and_the_method_form():
    t = tg.tensor(X, requires_grad=True)
    s = t.sum(where=t > 0)
    np.testing.assert_allclose(s.numpy(), X[X > 0].sum())
    s.backward()
    np.testing.assert_array_equal(t.grad, (X > 0).astype(float))
    with pytest.raises(ValueError, match=r"max: .*specify 'initial'"):
        tnp.max(t, where=MASK)
    with pytest.raises(ValueError, match=r"sum: where= of shape \(2,\) does not broadcast"):
        tnp.sum(t, where=np.array([True, False]))


def test_compiled_where_follows_the_mask():
    step = tg.compile(lambda x: tnp.mean(x, where=x > 0))
    for x in (X, -X, X * 2.0):
        v, g = step.value_and_grad(x)
        np.testing.assert_allclose(v, np.mean(x, where=x > 0))
        np.testing.assert_allclose(g, (x > 0) / np.sum(x > 0))


def test_add_at_accumulates_repeated_indices_and_their_gradients():
    idx = np.array([0, 2, 2, 2, 3])

    def f(x, b):
        y = x * 1.0
        np.add.at(y, idx, b)
        tnp.subtract.at(y, [1], 0.5 * b[0])
        return tnp.sum(y**2 * np.arange(1.0, 5.0))

    x, b = RNG.standard_normal(4), RNG.standard_normal(5)
    want = x.copy()
    np.add.at(want, idx, b)
    want[1] -= 0.5 * b[0]
    np.testing.assert_allclose(
        f(tg.tensor(x), tg.tensor(b)).numpy(), np.sum(want**2 * np.arange(1.0, 5.0))
    )
    check_grads(f, [x, b])
    check_grads(f, [x, b], order=2)


def test_add_at_refuses_what_would_drop_a_gradient():
    b = tg.tensor(np.ones(2), requires_grad=True)
    with pytest.raises(TypeError, match=r"add\.at"):
        np.add.at(np.zeros(3), [0, 1], b)  # a NumPy array cannot hold b's gradient
    leaf = tg.tensor(np.zeros(3), requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        np.add.at(leaf, [0], 1.0)
    with pytest.raises(IndexError, match=r"add.at: .*\(tensor of shape \(3,\)\)"):
        np.add.at(leaf * 1.0, [5], 1.0)
    with pytest.raises(TypeError, match=r"only add\.at and subtract\.at"):
        np.multiply.at(leaf * 1.0, [0], 2.0)
    # plain arrays are NumPy's business, tensors of integers too
    a = np.zeros(3)
    tnp.add.at(a, [0, 0], 1.0)
    np.testing.assert_array_equal(a, [2.0, 0.0, 0.0])
    n = tg.tensor(np.zeros(3, np.int64))
    np.add.at(n, [1, 1], 3)
    np.testing.assert_array_equal(n.numpy(), [0, 6, 0])


def test_einsum_interleaved_form():
    a, b = RNG.standard_normal((2, 3)), RNG.standard_normal((3, 4))
    for args in (([0, 1], [1, 2], [0, 2]), ([0, 1], [1, 2]), ([0, 1], [1, 2], [2])):
        got = tnp.einsum(tg.tensor(a), args[0], tg.tensor(b), *args[1:]).numpy()
        np.testing.assert_allclose(got, np.einsum(a, args[0], b, *args[1:]))
    check_grads(
        lambda x, y: tnp.sum(tnp.einsum(x, [Ellipsis, 0], y, [0, 1], [Ellipsis, 1]) ** 2), [a, b]
    )
    with pytest.raises(TypeError, match=r"einsum: each subscript must be .*, got 'i'"):
        tnp.einsum(tg.tensor(a), ["i", "j"])  # (NumPy's TypeError)


def test_partition_follows_the_values_under_compile():
    step = tg.compile(lambda x: tnp.partition(x, 1)[1])  # the second smallest
    for x in (np.array([3.0, 1.0, 2.0]), np.array([1.0, 3.0, 2.0]), np.array([2.0, 3.0, 1.0])):
        v, g = step.value_and_grad(x)
        assert v == 2.0
        np.testing.assert_array_equal(g, x == 2.0)


def test_initial_is_cast_like_numpy():
    ints = tg.tensor(np.arange(4))
    assert tnp.sum(ints, initial=2.5).numpy() == np.sum(np.arange(4), initial=2.5) == 8
    assert tnp.prod(tg.tensor([1, 2, 3]), initial=2.5).numpy() == 12
    assert tnp.max(ints, initial=5.5).numpy() == 5
    assert tnp.sum(tg.tensor(np.ones(2, np.float32)), initial=np.float64(1.0)).dtype == np.float32
    assert tnp.max(tg.tensor(np.zeros(0)), initial=0.5).numpy() == 0.5
    with pytest.raises(ValueError, match="does not broadcast"):
        tnp.sum(tg.tensor(np.ones((2, 3))), axis=0, where=np.ones((4, 1, 3), bool))


def test_edge_values_match_numpy():
    pairs = [
        (tnp.fmod(tg.tensor(1e17), 3.0), np.fmod(1e17, 3.0)),
        (tnp.fmod(tg.tensor([5.0, -5.0]), np.inf), np.fmod([5.0, -5.0], np.inf)),
        (tnp.fmod(tg.tensor([7, -7]), 3), np.fmod([7, -7], 3)),
        (tnp.copysign(tg.tensor([1, 2]), tg.tensor([-1, 1])), np.copysign([1, 2], [-1, 1])),
        (tnp.copysign(tg.tensor([2.0]), tg.tensor([-0.0])), np.copysign([2.0], [-0.0])),
        (tnp.angle(tg.tensor([-0.0, np.nan, -1.0, 2.0])), np.angle([-0.0, np.nan, -1.0, 2.0])),
        (tnp.nanprod(tg.tensor(np.arange(1, 4))), np.nanprod(np.arange(1, 4))),
        (tnp.nancumsum(tg.tensor(np.arange(3))), np.nancumsum(np.arange(3))),
    ]
    for got, want in pairs:
        assert got.dtype == np.asarray(want).dtype
        np.testing.assert_array_equal(got.numpy(), want)
    x = RNG.standard_normal((2, 3))
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's "Degrees of freedom <= 0"
        np.testing.assert_array_equal(tnp.cov(tg.tensor(x), ddof=3).numpy(), np.cov(x, ddof=3))
        np.testing.assert_array_equal(tnp.var(tg.tensor(x), ddof=6).numpy(), np.var(x, ddof=6))


def test_writing_a_gradient_into_an_integer_tensor_is_refused():
    b = tg.tensor(np.ones(2), requires_grad=True)
    with pytest.raises(TypeError, match=r"add\.at: writes a tensor that requires grad"):
        np.add.at(tg.tensor(np.zeros(3, np.int64)), [0, 1], b)
    n = tg.tensor(np.zeros(3, np.int64))
    with pytest.raises(TypeError, match="setitem: writes a tensor that requires grad"):
        n[0] = b[0]


def test_quantiles_of_data_with_nan_are_nan_like_numpy():
    x = RNG.standard_normal((3, 6))
    x[1, 2] = np.nan
    for f in (
        lambda m, a: m.median(a, axis=1),
        lambda m, a: m.quantile(a, [0.1, 0.5], axis=1),
        lambda m, a: m.percentile(a, 30),
    ):
        np.testing.assert_allclose(f(tnp, tg.tensor(x)).numpy(), f(np, x), rtol=1e-12)
    leaf = tg.tensor(x, requires_grad=True)
    tnp.sum(tnp.median(leaf, axis=1)[::2]).backward()  # rows without NaN: finite gradients
    assert np.all(np.isfinite(leaf.grad))


def test_convolve_of_long_signals_matches_numpy_and_differences():
    a, v = RNG.standard_normal(1000), RNG.standard_normal(7)
    for mode in ("full", "same", "valid"):
        np.testing.assert_allclose(
            tnp.convolve(tg.tensor(a), tg.tensor(v), mode).numpy(), np.convolve(a, v, mode)
        )
        np.testing.assert_allclose(
            tnp.correlate(tg.tensor(v), tg.tensor(a), mode).numpy(), np.correlate(v, a, mode)
        )
    check_grads(lambda a, v: tnp.sum(tnp.convolve(a, v, "same") ** 2), [a[:40], v])
    check_grads(lambda a, v: tnp.sum(tnp.convolve(a, v, "valid") ** 2), [a[:40], v], order=2)
    ints = tnp.convolve(tg.tensor(np.arange(5)), tg.tensor(np.arange(3)))
    np.testing.assert_array_equal(ints.numpy(), np.convolve(np.arange(5), np.arange(3)))


def test_python_numbers_stay_weak_and_float32_stays_float32():
    x = np.array([3.5, -2.0, np.inf, 0.7], np.float32)
    for got, want in (
        (tnp.fmod(5.0, tg.tensor(x)), np.fmod(5.0, x)),
        (tnp.fmod(tg.tensor(x[[0, 1, 3]]), 0.7), np.fmod(x[[0, 1, 3]], 0.7)),
        (tnp.copysign(tg.tensor(x), -1.0), np.copysign(x, -1.0)),
    ):
        assert got.dtype == want.dtype == np.float32
        np.testing.assert_array_equal(got.numpy(), want)
    import scipy.linalg as sla

    import tapegrad.scipy.linalg as tsla

    a = (RNG.standard_normal((3, 3)) + 3 * np.eye(3)).astype(np.float32)
    b = RNG.standard_normal(3).astype(np.float32)
    got = tsla.solve(tg.tensor(a), b, assume_a="sym")
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.numpy(), sla.solve(a, b, assume_a="sym"), rtol=1e-5)


def test_second_hostile_pass():
    a = np.array([-7, -4, 0, 3, 5])  # integers: interpolated in float64, as NumPy
    for got, want in (
        (tnp.quantile(tg.tensor(a), [0.1, 0.5, 0.77]), np.quantile(a, [0.1, 0.5, 0.77])),
        (tnp.median(tg.tensor(np.array([3, 1, 2]))), np.median(np.array([3, 1, 2]))),
        (tnp.percentile(tg.tensor(a), 33, keepdims=True), np.percentile(a, 33, keepdims=True)),
    ):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    x = np.array([5.5, -5.5, -2.0], np.float32)  # exact, like C's fmod, in float32 too
    np.testing.assert_array_equal(tnp.fmod(0.7, tg.tensor(x)).numpy(), np.fmod(0.7, x))
    assert tnp.copysign(2.0, tg.tensor(np.ones(3, np.float32))).dtype == np.float32
    assert tnp.fmod(True, tg.tensor(np.ones(2, np.float32))).dtype == np.float32
    check_grads(
        lambda x: tnp.sum(tnp.fmod(x, 1.5) * tnp.copysign(x, -1.0)), [np.array([3.4, -2.2])]
    )
