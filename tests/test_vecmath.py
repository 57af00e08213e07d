"""The vector formulas (tapegrad/kernels/vecmath.py) against NumPy, generated from the
op table: every row with ``vector`` formulas, forward and gradient, float64 and float32,
on inputs across its whole vector range, and blocks with inputs outside the range (inf,
NaN, huge) falling back to the libm formulas."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.special as tsp
from tapegrad.kernels.elementwise import BLOCK, PARALLEL_MIN, SMALL
from tapegrad.ops import ROWS

VECTOR_ROWS = [op for op in ROWS if op.vector is not None]

# The accuracy each row promises within its range, in ulp of the float64 result
# (kernels/vecmath.py measures and documents the building blocks).
ULPS = {"exp": 1, "expm1": 2, "tanh": 3, "sin": 1, "cos": 1, "expit": 3}
# rows whose forward stays libm's (vector backward only): checked against themselves
ULPS.update({"erf": 0, "erfc": 0, "ndtr": 0})

# d/dx of each row, from NumPy (the gradient of sum(f(x)))
DERIVATIVE = {
    "exp": np.exp,
    "expm1": np.exp,
    "tanh": lambda x: 1 - np.tanh(x) ** 2,
    "sin": np.cos,
    "cos": lambda x: -np.sin(x),
    "expit": lambda x: scipy.special.expit(x) * (1 - scipy.special.expit(x)),
    "erf": lambda x: 2 / np.sqrt(np.pi) * np.exp(-x * x),
    "erfc": lambda x: -2 / np.sqrt(np.pi) * np.exp(-x * x),
    "ndtr": lambda x: np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi),
}

# One input far outside each row's range and its NumPy value.
OUTSIDE = {
    "exp": 709.5,  # the result's exponent does not fit the fast 2^k
    "expm1": -740.0,
    "tanh": np.inf,
    "sin": 1e22,  # the three-part reduction is meaningless here; libm's is exact
    "cos": 1e22,
    "expit": 750.0,
    "erf": 26.5,  # exp(-x^2) is below e^-708: the libm formula underflows gradually
    "erfc": -27.0,
    "ndtr": -37.5,
}


def _functions(op):
    """The row's tapegrad function and the reference for its forward: NumPy's or
    SciPy's, or, for a row whose vector forward is its libm forward (erf: vector
    backward only), that forward element by element (SciPy's erfc and the C library's
    differ by hundreds of ulp in the far tail; that is not what these tests are about)."""
    f = getattr(tsp if op.namespace == "special" else tnp, op.name)
    if op.vector[0] is op.fwd:
        return f, np.vectorize(lambda v: op.fwd(float(v)), otypes=[np.float64])
    if op.namespace == "special":
        return f, getattr(scipy.special, op.name)
    return f, getattr(np, op.name)


def _ulps(got, want):
    want = np.asarray(want, dtype=np.float64)
    return np.abs(np.asarray(got, np.float64) - want) / np.spacing(np.abs(want))


def _grad_ok(got, want, ulps):
    """Within ``ulps`` + 2 roundings, absolute below 1: backward formulas such as
    1 - out**2 (tanh) lose relative accuracy however exact ``out`` is."""
    err = np.abs(np.asarray(got, np.float64) - want)
    return bool(np.all(err <= 2 * (ulps + 2) * np.spacing(np.maximum(np.abs(want), 1.0))))


def _inputs(op, n, rng):
    lim = min(op.vector_range, 1e300)
    sets = [rng.uniform(-lim, lim, n), rng.uniform(-4, 4, n), rng.standard_normal(n) * 1e-9]
    if op.name in ("sin", "cos"):  # near the multiples of pi/2, where reduction cancels
        sets.append(np.arange(1, n + 1) * np.pi / 2 * (lim / (n * np.pi)))
        sets.append(np.arange(1, n + 1) * np.pi / 2)
    return sets


# below SMALL elements the kernels take the libm formulas, from SMALL the vector ones
@pytest.mark.parametrize(
    "n",
    [1, SMALL - 1, SMALL, 16, 3 * BLOCK + 5, PARALLEL_MIN + 7],
    ids=["one", "libm", "vector", "small", "blocks", "par"],
)
@pytest.mark.parametrize("op", VECTOR_ROWS, ids=lambda op: op.name)
def test_vector_forward_and_gradient_float64(op, n):
    f, ref = _functions(op)
    for x0 in _inputs(op, n, np.random.default_rng(n)):
        x = tg.tensor(x0, requires_grad=True)
        y = f(x)
        y.sum().backward()
        assert _ulps(y.numpy(), ref(x0)).max() <= ULPS[op.name], op.name
        want = DERIVATIVE[op.name](x0)
        # the backward multiplies the vector value by g (and may use out): two roundings
        assert _grad_ok(x.grad, want, ULPS[op.name]), op.name


@pytest.mark.parametrize("n", [SMALL - 3, 2 * BLOCK], ids=["libm", "vector"])
@pytest.mark.parametrize("op", VECTOR_ROWS, ids=lambda op: op.name)
def test_vector_float32_rounds_once(op, n):
    f, ref = _functions(op)
    x0 = np.random.default_rng(3).uniform(-4, 4, n).astype(np.float32)
    x = tg.tensor(x0, requires_grad=True)
    y = f(x)
    y.sum().backward()
    assert y.dtype == np.float32 and x.grad.dtype == np.float32
    if op.vector[0] is op.fwd:  # a libm forward: the same as the plain loops give
        parts = [f(tg.tensor(x0[i : i + SMALL - 1])).numpy() for i in range(0, n, SMALL - 1)]
        np.testing.assert_array_equal(y.numpy(), np.concatenate(parts))
    else:
        want = ref(x0.astype(np.float64)).astype(np.float32)
        assert np.max(np.abs(y.numpy() - want) / np.spacing(np.abs(want))) <= 1.0
    dwant = DERIVATIVE[op.name](x0.astype(np.float64))
    err = np.abs(x.grad - dwant)
    assert np.all(err <= 4 * np.spacing(np.maximum(np.abs(dwant), 1.0).astype(np.float32)))


@pytest.mark.parametrize("op", VECTOR_ROWS, ids=lambda op: op.name)
def test_blocks_outside_the_range_use_libm(op):
    """A block with an input outside the vector range (or inf, NaN) is computed by the
    libm formulas: NumPy's special cases and huge-argument results hold; the other
    blocks keep the vector formulas."""
    f, ref = _functions(op)
    rng = np.random.default_rng(4)
    x0 = rng.uniform(-3, 3, 3 * BLOCK)
    specials = [OUTSIDE[op.name], np.nan, -np.inf, np.inf, 0.0, -0.0]
    x0[BLOCK + 10 : BLOCK + 10 + len(specials)] = specials
    x = tg.tensor(x0, requires_grad=True)
    with np.errstate(all="ignore"):
        y = f(x)
        want = ref(x0)
        y.backward(gradient=np.ones_like(x0))
        dwant = DERIVATIVE[op.name](x0)
    got = y.numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want) & (want != 0)
    assert _ulps(got[finite], want[finite]).max() <= ULPS[op.name]
    k = BLOCK + 10
    np.testing.assert_allclose(got[k], want[k], rtol=1e-15, atol=0)  # the outside value
    np.testing.assert_array_equal(np.signbit(got[k + 4 : k + 6]), np.signbit(want[k + 4 : k + 6]))
    np.testing.assert_array_equal(np.isnan(x.grad), np.isnan(dwant))
    ok = np.isfinite(dwant) & (dwant != 0)
    assert _grad_ok(x.grad[ok], dwant[ok], ULPS[op.name])


@pytest.mark.parametrize("op", VECTOR_ROWS, ids=lambda op: op.name)
def test_vector_replay_equals_eager(op):
    f, _ = _functions(op)
    step = tg.compile(lambda x: f(x).sum())
    x0 = np.random.default_rng(5).uniform(-2, 2, 40)
    for _ in range(3):
        x = tg.tensor(x0, requires_grad=True)
        loss = f(x).sum()
        loss.backward()
        value, grads = step.value_and_grad(x0)
        np.testing.assert_allclose(value, loss.item(), rtol=1e-14)
        np.testing.assert_array_equal(grads[0] if isinstance(grads, tuple) else grads, x.grad)
        x0 = x0 * 1.5


def test_vector_rows_are_declared_consistently():
    with pytest.raises(ValueError, match="unary row"):
        from tapegrad.ops.table import Kind, Op

        Op("bad_vector", Kind.BINARY, lambda x, y: x, (None, None), "x", vector=(None, None))
