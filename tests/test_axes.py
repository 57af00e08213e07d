"""Axis arguments, against NumPy and SciPy as oracles: where they raise (an axis the
array does not have, a bool where an integer is required), tapegrad raises too and
records nothing; where they answer, tapegrad gives the same values. An axis is never
wrapped around (``axis % ndim``) into one the caller did not name: on a square matrix
that gives a plausible result for a wrong question."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.integrate
import scipy.special

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.scipy as tsc
import tapegrad.special as tsp
from tapegrad.layout import H_NLINK, H_NNODES, H_NSHAPE, H_NSLOTS
from tapegrad.tape import current_tape

A = np.random.default_rng(0).uniform(0.5, 2.0, (3, 3))  # square: a wrapped axis fits

# name -> (tapegrad function, oracle), each of (array, axis)
FUNCTIONS = {
    "sum": (lambda a, ax: tnp.sum(a, axis=ax), lambda a, ax: np.sum(a, axis=ax)),
    "sum method": (lambda a, ax: a.sum(axis=ax), lambda a, ax: a.sum(axis=ax)),
    "mean": (lambda a, ax: tnp.mean(a, axis=ax), lambda a, ax: np.mean(a, axis=ax)),
    "mean method": (lambda a, ax: a.mean(axis=ax), lambda a, ax: a.mean(axis=ax)),
    "prod": (lambda a, ax: tnp.prod(a, axis=ax), lambda a, ax: np.prod(a, axis=ax)),
    "max": (lambda a, ax: tnp.max(a, axis=ax), lambda a, ax: np.max(a, axis=ax)),
    "min": (lambda a, ax: tnp.min(a, axis=ax), lambda a, ax: np.min(a, axis=ax)),
    "std": (lambda a, ax: tnp.std(a, axis=ax), lambda a, ax: np.std(a, axis=ax)),
    "var": (lambda a, ax: tnp.var(a, axis=ax), lambda a, ax: np.var(a, axis=ax)),
    "ptp": (lambda a, ax: tnp.ptp(a, axis=ax), lambda a, ax: np.ptp(a, axis=ax)),
    "nansum": (lambda a, ax: tnp.nansum(a, axis=ax), lambda a, ax: np.nansum(a, axis=ax)),
    "nanmean": (lambda a, ax: tnp.nanmean(a, axis=ax), lambda a, ax: np.nanmean(a, axis=ax)),
    "cumsum": (lambda a, ax: tnp.cumsum(a, axis=ax), lambda a, ax: np.cumsum(a, axis=ax)),
    "cumprod": (lambda a, ax: tnp.cumprod(a, axis=ax), lambda a, ax: np.cumprod(a, axis=ax)),
    "average": (lambda a, ax: tnp.average(a, axis=ax), lambda a, ax: np.average(a, axis=ax)),
    "average 1-D weights": (
        lambda a, ax: tnp.average(a, axis=ax, weights=np.arange(1.0, 4.0)),
        lambda a, ax: np.average(a, axis=ax, weights=np.arange(1.0, 4.0)),
    ),
    "median": (lambda a, ax: tnp.median(a, axis=ax), lambda a, ax: np.median(a, axis=ax)),
    "quantile keepdims": (
        lambda a, ax: tnp.quantile(a, 0.3, axis=ax, keepdims=True),
        lambda a, ax: np.quantile(a, 0.3, axis=ax, keepdims=True),
    ),
    "diff": (lambda a, ax: tnp.diff(a, axis=ax), lambda a, ax: np.diff(a, axis=ax)),
    "trapezoid": (
        lambda a, ax: tnp.trapezoid(a, axis=ax),
        lambda a, ax: np.trapezoid(a, axis=ax),
    ),
    "gradient": (
        lambda a, ax: tnp.stack(tnp.gradient(a, axis=ax)),
        lambda a, ax: np.stack(np.gradient(a, axis=ax)),
    ),
    "cumulative_trapezoid": (
        lambda a, ax: tsc.integrate.cumulative_trapezoid(a, axis=ax),
        lambda a, ax: scipy.integrate.cumulative_trapezoid(a, axis=ax),
    ),
    "swapaxes": (
        lambda a, ax: tnp.swapaxes(a, ax, 0),
        lambda a, ax: np.swapaxes(a, ax, 0),
    ),
    "tensordot": (
        lambda a, ax: tnp.tensordot(a, A, axes=([ax], [0])),
        lambda a, ax: np.tensordot(a, A, axes=([ax], [0])),
    ),
    "linalg.norm": (
        lambda a, ax: tnp.linalg.norm(a, axis=ax),
        lambda a, ax: np.linalg.norm(a, axis=ax),
    ),
    "log_softmax": (
        lambda a, ax: tsp.log_softmax(a, axis=ax),
        lambda a, ax: scipy.special.log_softmax(a, axis=ax),
    ),
    "logsumexp": (
        lambda a, ax: tsp.logsumexp(a, axis=ax),
        lambda a, ax: scipy.special.logsumexp(a, axis=ax),
    ),
}
# (lists: NumPy's reductions refuse them, quantile and average take them as tuples)
AXES = [0, 1, -1, -2, 2, -3, 7, True, False, np.True_, np.int64(-1), None, [0], [1, 0], (0, 1)]


def _counts():
    h = current_tape().h
    return (h[H_NNODES], h[H_NSLOTS], h[H_NLINK], h[H_NSHAPE])


@pytest.mark.parametrize("axis", AXES, ids=repr)
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_axis_as_numpy_takes_it(name, axis):
    ours, oracle = FUNCTIONS[name]
    try:
        want = oracle(A.copy(), axis)
    except (TypeError, ValueError, IndexError) as e:
        want = e
    x = tg.tensor(A.copy(), requires_grad=True)
    if isinstance(want, Exception):
        before = _counts()
        # the oracle's class or NumPy's AxisError (a ValueError and an IndexError)
        with pytest.raises((type(want), np.exceptions.AxisError)) as got:
            ours(x, axis)
        if isinstance(want, np.exceptions.AxisError):
            assert isinstance(got.value, np.exceptions.AxisError), got.value
        assert _counts() == before  # nothing recorded
        return
    got = ours(x, axis)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    ("name", "axis"),
    [(n, a) for n in ["sum", "mean", "max", "cumsum", "log_softmax"] for a in (True, np.True_)]
    + [(n, (0, np.False_)) for n in ["sum", "mean", "max"]],
    ids=repr,
)
def test_bool_axis_error_names_the_op(name, axis):
    """``True`` is an int to Python: NumPy's reductions refuse it, and so does tapegrad,
    naming the op (it reduced axis 1 before, silently)."""
    fn = {"sum": tnp.sum, "mean": tnp.mean, "max": tnp.max, "cumsum": tnp.cumsum,
          "log_softmax": tsp.log_softmax}[name]  # fmt: skip
    x = tg.tensor(A.copy(), requires_grad=True)
    with pytest.raises(TypeError, match=f"{name}: an integer is required for the axis"):
        fn(x, axis=axis)


GRADIENT_CASES = {
    "diff": lambda a: tnp.diff(a, axis=-2),
    "median": lambda a: tnp.median(a, axis=-1),
    "trapezoid": lambda a: tnp.trapezoid(a, axis=-2),
    "gradient": lambda a: tnp.gradient(a, axis=(1, 0))[0],  # in the order given: axis 1
    "cumulative_trapezoid": lambda a: tsc.integrate.cumulative_trapezoid(a, axis=-2),
    "swapaxes": lambda a: tnp.swapaxes(a, -1, 0)[0],
    "tensordot": lambda a: tnp.tensordot(a, A, axes=([-1], [0])),
    "average": lambda a: tnp.average(a, axis=-1, weights=np.arange(1.0, 4.0)),
    "norm": lambda a: tnp.linalg.norm(a, axis=True),
}


@pytest.mark.parametrize("name", list(GRADIENT_CASES))
def test_gradients_along_a_named_axis(name):
    """The functions now checked through ``axis_index`` still differentiate along the
    axis named (negative, or reordered): central differences in float64."""
    fn = GRADIENT_CASES[name]
    w = np.random.default_rng(1).standard_normal(fn(tg.tensor(A)).shape)

    def f(a):
        return tnp.sum(fn(a) * w)

    g = tg.grad(f)(A)
    want = np.zeros_like(A)
    eps = 1e-6
    for i in np.ndindex(A.shape):
        d = np.zeros_like(A)
        d[i] = eps
        want[i] = (float(f(tg.tensor(A + d))) - float(f(tg.tensor(A - d)))) / (2 * eps)
    np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-8)


def test_diff_order():
    """``n=0`` gives the array back before the axis is looked at; a negative order
    raises, as in NumPy."""
    x = tg.tensor(A.copy())
    np.testing.assert_array_equal(tnp.diff(x, n=0, axis=5).numpy(), np.diff(A, n=0, axis=5))
    with pytest.raises(ValueError, match="diff: order must be non-negative"):
        tnp.diff(x, n=-1)


def test_median_of_ints_records_nothing_on_a_bad_axis():
    t = tg.tensor(np.arange(9).reshape(3, 3))
    before = _counts()
    with pytest.raises(ValueError):
        tnp.median(t, axis=(0, 0))
    assert _counts() == before


ONE_AXIS = ["diff", "trapezoid", "cumulative_trapezoid", "swapaxes", "tensordot", "gradient"]


@pytest.mark.parametrize(
    ("name", "axis"),
    [(n, a) for n in ONE_AXIS for a in ((1,), [0], None)]
    + [("cumsum", (1,)), ("cumprod", [0])],  # None flattens there
    ids=repr,
)
def test_one_axis_functions_want_an_integer(name, axis):
    """Functions of one axis take an integer, as NumPy's do (a tuple, a list or None
    raises TypeError there, and here)."""
    ours, oracle = FUNCTIONS[name]
    if name == "gradient":  # its axis may be a tuple: each member must be an integer
        ours, oracle = (
            (lambda a, ax: tnp.gradient(a, axis=(ax,))),
            (lambda a, ax: np.gradient(a, axis=(ax,))),
        )
    with pytest.raises(TypeError):
        oracle(A.copy(), axis)
    before = _counts()
    with pytest.raises(TypeError, match="an integer is required for the axis"):
        ours(tg.tensor(A.copy(), requires_grad=True), axis)
    assert _counts() == before


@pytest.mark.parametrize("axis", [(), (0, 1), (1, 0), (-1,)], ids=repr)
def test_log_softmax_over_several_axes_as_scipy(axis):
    """SciPy takes several axes (or none: every element alone, log 1 = 0); so does
    tapegrad, as ``x - logsumexp(x, axis, keepdims=True)``: values, and gradients
    against central differences. (A list is refused, as SciPy refuses it.)"""
    a = np.random.default_rng(4).standard_normal((2, 3))
    np.testing.assert_allclose(
        tsp.log_softmax(tg.tensor(a), axis=axis).numpy(),
        scipy.special.log_softmax(a, axis=axis),
        rtol=1e-12,
        atol=1e-12,
    )
    w = np.random.default_rng(5).standard_normal(a.shape)
    g = tg.grad(lambda t: tnp.sum(tsp.softmax(t, axis=axis) * w))(a)
    want = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        d = np.zeros_like(a)
        d[i] = 1e-6
        up, down = (np.sum(scipy.special.softmax(a + s * d, axis=axis) * w) for s in (1, -1))
        want[i] = (up - down) / 2e-6
    np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-9)


def test_gradient_of_several_axes_is_a_tuple_and_average_takes_a_one_tuple():
    """NumPy 2's types and acceptances: ``gradient`` over several axes returns a tuple;
    ``average`` with 1-D weights takes ``axis=(1,)`` as ``axis=1``."""
    x = tg.tensor(A.copy())
    got = tnp.gradient(x)
    assert isinstance(got, tuple) and isinstance(np.gradient(A), tuple)
    w = np.arange(1.0, 4.0)
    np.testing.assert_allclose(
        tnp.average(x, axis=(1,), weights=w).numpy(), np.average(A, axis=(1,), weights=w)
    )
