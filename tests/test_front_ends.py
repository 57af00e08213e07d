"""The compiled front ends (``record.record_reduce``, ``record_matmul``, ``record_along``
through ``recording.front_end``) record what the Python front ends record.

Each case runs twice: with the compiled front ends, and with them switched off (the
Python front end then writes the request itself). Values, gradients and second-order
gradients must agree bit for bit (the same node, the same kernels), dtypes must be kept,
errors must be NumPy's; a counter checks that the compiled path really ran where it
should and declined where it should not. Central differences check the gradients.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.special as tsp
from tapegrad import recording
from tapegrad.layout import ALL_AXES
from tapegrad.ops.linalg import front as f_linalg
from tapegrad.ops.reduce import front as f_reduce
from tapegrad.ops.special import front as f_special
from tapegrad.tape import current_tape
from tests.helpers import numeric_grad, run_in_threads

FRONTENDS = (f_linalg, f_reduce, f_special)


@pytest.fixture
def taken(monkeypatch):
    """Counts of compiled front-end calls that recorded (``taken[0]``) and declined."""
    counts = [0, 0]
    real = recording.front_end

    def counting(*args):
        r = real(*args)
        counts[0 if r is not None else 1] += 1
        return r

    for m in FRONTENDS:
        monkeypatch.setattr(m, "front_end", counting)
    return counts


def python_only(fn, *args):
    """``fn(*args)`` with the compiled front ends switched off."""
    saved = [m.front_end for m in FRONTENDS]
    try:
        for m in FRONTENDS:
            m.front_end = lambda *a: None
        return fn(*args)
    finally:
        for m, f in zip(FRONTENDS, saved):
            m.front_end = f


def same(a, b):
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


RNG = np.random.default_rng(7)
SHAPES = [(), (5,), (3, 4), (2, 3, 4), (0, 3)]


def _axes(ndim):
    return [None, *range(-ndim, ndim)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("kind", ["sum", "mean"])
def test_reductions_match_the_python_front_end(taken, shape, kind, dtype):
    x = RNG.standard_normal(shape).astype(dtype)
    red = getattr(tnp, kind)
    for axis in _axes(len(shape)):
        for keepdims in (False, True):
            if kind == "mean" and x.size == 0:
                continue  # the mean of nothing: below

            def f(v, axis=axis, keepdims=keepdims):
                return tnp.sum(tnp.sin(red(v * 1.5, axis=axis, keepdims=keepdims)) ** 2)

            before = taken[0]
            got = tg.value_and_grad(f)(x)
            assert taken[0] > before, "the compiled front end did not record"
            want = python_only(tg.value_and_grad(f), x)
            same(got[1], want[1])
            assert got[0] == want[0]
            assert got[1].dtype == dtype
            ref = getattr(np, kind)(x.astype(np.float64) * 1.5, axis=axis, keepdims=keepdims)
            np.testing.assert_allclose(
                got[0], np.sum(np.sin(ref) ** 2), rtol=1e-5 if dtype == np.float32 else 1e-12
            )
            if dtype == np.float64 and x.size:
                np.testing.assert_allclose(got[1], numeric_grad(f, x), rtol=1e-6, atol=1e-8)


def test_reductions_off_the_common_case_take_the_python_path(taken):
    x = tg.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    with pytest.raises(np.exceptions.AxisError):
        tnp.sum(x, axis=2)
    with pytest.raises(np.exceptions.AxisError):
        tnp.mean(x, axis=-3)
    declined = taken[1]
    assert declined == 2
    # a mean of nothing is NaN (as NumPy, without its warning) through the Python path
    e = tg.tensor(np.zeros((0, 3)), requires_grad=True)
    with np.errstate(invalid="ignore"):
        assert np.isnan(tnp.mean(e).item())
    assert taken[1] == declined + 1
    # integers are NumPy's, not recorded
    i = tg.tensor(np.arange(6).reshape(2, 3))
    r = tnp.sum(i, axis=1)
    assert r.dtype == np.int64 and not r.requires_grad
    np.testing.assert_array_equal(r.numpy(), [3, 12])
    # axes the compiled path does not take: tuples and NumPy integers
    for axis in ((0, 1), np.int64(1)):
        f = tg.grad(lambda v, axis=axis: tnp.sum(tnp.mean(v, axis=axis) ** 2))
        g = f(x.numpy())
        want = python_only(f, x.numpy())
        same(g, want)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_matmul_matches_the_python_front_end(taken, dtype):
    a = RNG.standard_normal((3, 4)).astype(dtype)
    b = RNG.standard_normal((4, 5)).astype(dtype)
    c = RNG.standard_normal((5, 2)).astype(dtype)

    def f(x, y):
        # a constant on the left (NumPy's protocol), products of results, a leaf on both
        return tnp.sum(tnp.tanh((c.T @ (x @ y).T) @ (x @ y)) * 0.5)

    tnp.sum(tg.tensor(a) @ tg.tensor(b))  # this thread's tape has set BLAS up
    before = taken[0]
    got = tg.value_and_grad(f, argnums=(0, 1))(a, b)
    assert taken[0] >= before + 3
    want = python_only(tg.value_and_grad(f, argnums=(0, 1)), a, b)
    assert got[0] == want[0]
    same(got[1], want[1])
    assert got[1][0].dtype == dtype
    if dtype == np.float64:
        np.testing.assert_allclose(got[1][0], numeric_grad(lambda x: f(x, b), a), rtol=1e-6)
        np.testing.assert_allclose(got[1][1], numeric_grad(lambda y: f(a, y), b), rtol=1e-6)


def test_matmul_off_the_common_case_takes_the_python_path(taken):
    t32 = tg.tensor(RNG.standard_normal((4, 5)).astype(np.float32), requires_grad=True)
    a64 = RNG.standard_normal((3, 4))
    tnp.sum(tg.tensor(a64) @ tg.tensor(a64.T))  # BLAS set up
    # float64 constant @ float32 tensor: NumPy promotes; the constant's import is undone
    r = a64 @ t32
    assert r.dtype == np.float64
    np.testing.assert_allclose(r.numpy(), a64 @ t32.numpy().astype(np.float64), rtol=1e-12)
    # not aligned: NumPy's error, from the Python front end
    with pytest.raises(ValueError, match="not aligned"):
        tg.tensor(a64) @ tg.tensor(a64)
    # 1-D and batched operands
    v = tg.tensor(RNG.standard_normal(4), requires_grad=True)
    np.testing.assert_allclose((tg.tensor(a64) @ v).numpy(), a64 @ v.numpy())
    batch = RNG.standard_normal((2, 3, 4))
    np.testing.assert_allclose((tg.tensor(batch) @ t32).numpy(), batch @ t32.numpy())
    # integers: NumPy's product, not recorded
    m = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal((tg.tensor(m) @ tg.tensor(m).T).numpy(), m @ m.T)
    assert taken[1] >= 4


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_log_softmax_matches_the_python_front_end(taken, dtype):
    x = RNG.standard_normal((4, 6)).astype(dtype)
    w = RNG.standard_normal((4, 6)).astype(dtype)
    for axis in (0, 1, -1, -2):

        def f(v, axis=axis):
            return tnp.sum(tsp.log_softmax(v * 2.0, axis=axis) * w)

        before = taken[0]
        got = tg.value_and_grad(f)(x)
        assert taken[0] > before
        want = python_only(tg.value_and_grad(f), x)
        assert got[0] == want[0]
        same(got[1], want[1])
        if dtype == np.float64:
            np.testing.assert_allclose(got[1], numeric_grad(f, x), rtol=1e-6, atol=1e-9)
    t = tg.tensor(x, requires_grad=True)
    with pytest.raises(np.exceptions.AxisError):
        tsp.log_softmax(t, axis=2)
    ints = tsp.log_softmax(tg.tensor(np.arange(6).reshape(2, 3)), axis=1)
    assert ints.dtype == np.float64


def test_second_order_through_the_compiled_front_ends(taken):
    a = RNG.standard_normal((3, 4))
    b = RNG.standard_normal((4, 3))

    def f(x):
        return tnp.mean(tsp.log_softmax(x @ b, axis=1) ** 2) + tnp.sum(tnp.sum(x, axis=0) ** 3)

    def g(x):
        return tnp.sum(tg.grad(f)(x) ** 2)

    got = tg.grad(g)(a)
    assert taken[0] > 0
    want = python_only(tg.grad(g), a)
    same(got, want)
    np.testing.assert_allclose(got, numeric_grad(g, a), rtol=1e-5, atol=1e-7)
    # a Hessian-vector product agrees with central differences of the gradient
    v = RNG.standard_normal(a.shape)
    eps = 1e-6
    fd = (tg.grad(f)(a + eps * v) - tg.grad(f)(a - eps * v)) / (2 * eps)
    np.testing.assert_allclose(tg.hvp(f, a, v), fd, rtol=1e-5, atol=1e-7)


def test_compiled_front_ends_in_a_capture_replay_new_values():
    b = RNG.standard_normal((4, 5))

    def loss(x, y):
        return tnp.mean(tnp.sum(tsp.log_softmax(x @ y, axis=1) * b[:3, :], axis=1))

    step = tg.compile(loss, argnums=(0, 1))
    for _ in range(3):
        x = RNG.standard_normal((3, 4))
        y = RNG.standard_normal((4, 5))
        got = step.value_and_grad(x, y)
        want = tg.value_and_grad(loss, argnums=(0, 1))(x, y)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-13)
        for g, w in zip(got[1], want[1]):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15)


def test_compiled_front_ends_across_tape_growth_and_threads():
    """Many recorded reductions and products (the tape grows and is rewound under
    them), in four threads at once, each thread's results equal to one thread's."""
    x0 = RNG.standard_normal((6, 6))

    def f(x):
        total = 0.0
        for k in range(300):
            total = total + tnp.mean(tnp.sum(x @ x * (1.0 + k * 1e-3), axis=k % 2) ** 2)
        return total

    want = tg.value_and_grad(f)(x0)
    results = {}

    def work(k):
        results[k] = tg.value_and_grad(f)(x0 + 0.0)

    run_in_threads(work, 4)
    for v, g in results.values():
        assert v == want[0]
        np.testing.assert_array_equal(g, want[1])


def test_a_closed_over_tensor_is_still_refused(taken):
    """A tensor from outside a transform that requires grad, reduced or multiplied
    inside it: the compiled front end leaves it to the binding (foreign), which raises."""
    outer = tg.tensor(RNG.standard_normal((3, 3)), requires_grad=True)
    with pytest.raises(RuntimeError, match="not one of the transform's arguments"):
        tg.grad(lambda x: tnp.sum(outer @ x) + tnp.mean(outer))(np.eye(3))
    with pytest.raises(RuntimeError, match="not one of the transform's arguments"):
        tg.grad(lambda x: tnp.sum(x * tnp.sum(outer, axis=0)))(np.eye(3))


def test_a_held_operand_changed_in_place_still_raises():
    """An in-place write to a tensor a recorded product saved (version counters)."""
    x = tg.tensor(RNG.standard_normal((3, 3)), requires_grad=True)
    y = x * 1.0
    z = tnp.sum(y @ y)
    with tg.no_grad():
        y += 1.0
    with pytest.raises(RuntimeError, match=r"modified|in place|in-place"):
        z.backward()


def test_no_thread_sees_another_threads_request():
    """The request buffer is per tape: threads recording products at once."""
    errors = []
    mats = [RNG.standard_normal((5, 5)) for _ in range(4)]

    def work(k):
        try:
            for _ in range(200):
                g = tg.grad(lambda m: tnp.sum(tnp.mean(m @ m, axis=0)))(mats[k])
                want = (np.ones((5, 5)) / 5 @ mats[k].T) + (mats[k].T @ (np.ones((5, 5)) / 5))
                np.testing.assert_allclose(g, want, rtol=1e-12)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_axes_the_compiled_front_end_must_not_take(taken):
    """An int axis far outside any dimension count (the compiled front end marks "all
    axes" with an int, ``layout.ALL_AXES``, which a user's axis must not alias; one past
    int64 would not fit its entry point) raises NumPy's AxisError, warm or cold."""
    x = tg.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    y = x * 1.0
    tnp.sum(y, axis=1), tnp.mean(y), tsp.log_softmax(y, axis=0)  # the paths are warm
    for axis in (ALL_AXES, ALL_AXES - 1, -(1 << 62) + 1, 1 << 62, 1 << 63, -(1 << 63) - 1):
        for f in (tnp.sum, tnp.mean):
            with pytest.raises(np.exceptions.AxisError, match="out of bounds"):
                f(y, axis=axis)
        with pytest.raises(np.exceptions.AxisError, match="out of bounds"):
            tsp.log_softmax(y, axis=axis)


def test_a_constant_is_imported_once(taken):
    """``array @ tensor`` where the compiled front end declines after importing the
    array (the tensor is a leaf not bound yet): the tape keeps one copy, not two."""
    a = RNG.standard_normal((50, 50))
    tnp.sum(tg.tensor(a) @ tg.tensor(a))  # BLAS set up on this thread's tape
    w = tg.tensor(RNG.standard_normal((50, 2)), requires_grad=True)
    tape = current_tape()
    kept = len(tape.keep)
    r = a @ w
    assert [k.shape for k in tape.keep[kept:]].count((50, 50)) == 1
    tnp.sum(r).backward()
    np.testing.assert_allclose(w.grad, a.sum(0)[:, None] * np.ones((1, 2)), rtol=1e-12)
