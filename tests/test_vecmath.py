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
from tapegrad.ops import ROWS
from tapegrad.ops.elementwise.kernels import BLOCK, PARALLEL_MIN, SMALL
from tapegrad.ops.reduce.kernels import EXP_CHUNK
from tapegrad.ops.table import Kind, Op

VECTOR_ROWS = [op for op in ROWS if op.vector is not None and op.kind is Kind.UNARY]

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


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("op", VECTOR_ROWS, ids=lambda op: op.name)
def test_vector_forward_keeps_the_sign_of_zero(op, dtype):
    """-0.0 and +0.0 in a block the vector formulas compute give NumPy's (SciPy's)
    results bit for bit, sign included (expm1(-0.0) was +0.0 from 8 elements on, so
    1 / expm1(x) was +inf where NumPy gives -inf)."""
    f, ref = _functions(op)
    x0 = np.random.default_rng(7).uniform(-1, 1, 3 * BLOCK + 5).astype(dtype)
    x0[:4] = [-0.0, 0.0, -0.0, 0.0]
    got = f(tg.tensor(x0)).numpy()
    want = ref(x0.astype(np.float64)).astype(dtype)
    np.testing.assert_array_equal(got[:4], want[:4])
    np.testing.assert_array_equal(np.signbit(got[:4]), np.signbit(want[:4]))


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
    def fx(g, x, y, out):
        return g * x

    def fy(g, x, y, out):
        return g * y * out

    with pytest.raises(ValueError, match="unary row"):  # a binary row without a gate
        Op("bad_vector", Kind.BINARY, lambda x, y: x, (fx, fy), "x", vector=(None, (fx, fy)))
    with pytest.raises(ValueError, match="unary row"):  # no range
        Op("bad_vector", Kind.UNARY, lambda x: x, fx, "x", vector=(None, None))
    # the gate reads x and y: a backward formula that does not read y would leave y
    # unsaved (and its version unchecked) for that gradient
    with pytest.raises(ValueError, match="reads"):
        Op(
            "bad_vector",
            Kind.BINARY,
            lambda x, y: x,
            (fx, fy),
            "x",
            vector=(None, (fx, fy)),
            vector_range=1.0,
            vector_gate=lambda x, y: x - y,
        )


# --- binary rows (logaddexp, logaddexp2): the same checks, with a gate on (x, y) ---------

BINARY_ROWS = [op for op in ROWS if op.vector is not None and op.kind is Kind.BINARY]
BINARY_ULPS = {"logaddexp": 2, "logaddexp2": 2}
# the gradients of sum(f(x, y)) from NumPy: the softmax weights of x and of y, from
# x and y (PyTorch's form; e^(x - out) is only as exact as ulp(out))
BINARY_DERIVATIVE = {
    "logaddexp": lambda x, y: (1 / (1 + np.exp(y - x)), 1 / (1 + np.exp(x - y))),
    "logaddexp2": lambda x, y: (1 / (1 + np.exp2(y - x)), 1 / (1 + np.exp2(x - y))),
}


def _pairs(op, n, rng):
    """(x, y) pairs across the gate's range: same shape, a scalar y (softplus is
    logaddexp(x, 0)), a scalar x, and near-ties where x - y is tiny."""
    lim = op.vector_range
    x = rng.uniform(-lim / 2, lim / 2, n)
    return [
        (x, x + rng.uniform(-lim / 2, lim / 2, n)),
        (rng.uniform(-30, 30, n), rng.uniform(-30, 30, n)),
        (rng.uniform(-40, 40, n), 0.0),
        (1.5, rng.uniform(-40, 40, n)),
        (x, x + rng.standard_normal(n) * 1e-9),
    ]


def _scale(*values):
    """max(|v|) over the finite values (an infinite operand of a finite result, as in
    logaddexp(-inf, 3), does not set its scale)."""
    finite = [np.where(np.isfinite(v), np.abs(v), 0.0) for v in values]
    return np.maximum.reduce(np.broadcast_arrays(*finite))


def _scaled_err(got, want, x0, y0):
    """Errors in ulp of max(|out|, |x|, |y|): where e^x + e^y is near 1 the result
    cancels (max + log1p(...) ~ 0) and NumPy's and the vector formula's last-bit
    errors of the max dominate, whichever is used."""
    return np.abs(np.asarray(got) - want) / np.spacing(_scale(want, x0, y0))


def _weights_ok(got, d):
    """Within 4 ulp of NumPy's weights (the same float64 difference, one exp, one
    division: both are accurate to a few ulp for every finite pair)."""
    return bool(np.all(np.abs(np.asarray(got) - d) <= 4 * np.spacing(np.abs(d))))


def _binary_check(op, x0, y0):
    f = getattr(tnp, op.name)
    ref = getattr(np, op.name)
    x = tg.tensor(np.asarray(x0), requires_grad=True)
    y = tg.tensor(np.asarray(y0), requires_grad=True)
    out = f(x, y)
    tnp.sum(out).backward()
    want = ref(x0, y0)
    assert _scaled_err(out.numpy(), want, x0, y0).max() <= BINARY_ULPS[op.name], op.name
    with np.errstate(over="ignore"):
        dx, dy = BINARY_DERIVATIVE[op.name](np.asarray(x0), np.asarray(y0))
    dx = np.broadcast_to(dx, np.shape(want))
    dy = np.broadcast_to(dy, np.shape(want))
    for got, d, v in ((x.grad, dx, x0), (y.grad, dy, y0)):
        if np.ndim(v) == 0:  # a scalar operand: the sum of its contributions
            np.testing.assert_allclose(got, d.sum(), rtol=1e-13)
        else:
            assert _weights_ok(got, d), op.name


@pytest.mark.parametrize(
    "n",
    [1, SMALL - 1, SMALL, 16, 3 * BLOCK + 5, PARALLEL_MIN + 7],
    ids=["one", "libm", "vector", "small", "blocks", "par"],
)
@pytest.mark.parametrize("op", BINARY_ROWS, ids=lambda op: op.name)
def test_binary_vector_forward_and_gradients_float64(op, n):
    for x0, y0 in _pairs(op, n, np.random.default_rng(n)):
        _binary_check(op, x0, y0)


@pytest.mark.parametrize("op", BINARY_ROWS, ids=lambda op: op.name)
def test_binary_vector_float32_rounds_once(op):
    f = getattr(tnp, op.name)
    rng = np.random.default_rng(7)
    x0 = rng.uniform(-20, 20, 2 * BLOCK).astype(np.float32)
    y0 = rng.uniform(-20, 20, 2 * BLOCK).astype(np.float32)
    x, y = tg.tensor(x0, requires_grad=True), tg.tensor(y0, requires_grad=True)
    out = f(x, y)
    tnp.sum(out).backward()
    assert out.dtype == np.float32 and x.grad.dtype == np.float32 and y.grad.dtype == np.float32
    want = getattr(np, op.name)(x0.astype(np.float64), y0.astype(np.float64))
    # float64 formulas rounded once to float32: within a float32 ulp of the scale
    scale = np.maximum(np.abs(want), np.maximum(np.abs(x0), np.abs(y0))).astype(np.float32)
    assert np.all(np.abs(out.numpy() - want) <= np.spacing(scale))
    # the weights from x and y in float64, rounded once
    dx, dy = BINARY_DERIVATIVE[op.name](x0.astype(np.float64), y0.astype(np.float64))
    for got, d in ((x.grad, dx), (y.grad, dy)):
        assert np.all(np.abs(got - d) <= np.spacing(np.abs(d).astype(np.float32)))


@pytest.mark.parametrize("scalar", [None, "x", "y"])
@pytest.mark.parametrize("op", BINARY_ROWS, ids=lambda op: op.name)
def test_binary_blocks_outside_the_gate_use_libm(op, scalar):
    """A block with a pair outside the gate (x - y huge, inf, NaN) is computed by the
    libm formulas: NumPy's special cases hold (logaddexp(inf, inf) = inf, a NaN
    propagates, -inf is an empty sum); the other blocks keep the vector formulas."""
    f = getattr(tnp, op.name)
    ref = getattr(np, op.name)
    rng = np.random.default_rng(8)
    n = 3 * BLOCK
    x0, y0 = rng.uniform(-3, 3, n), rng.uniform(-3, 3, n)
    k = BLOCK + 10
    xs = [800.0, -900.0, np.nan, np.inf, np.inf, -np.inf, -np.inf, 1e308, 2.0]
    ys = [-800.0, 900.0, 1.0, np.inf, 1.0, -np.inf, 3.0, -1e308, 2.0]
    x0[k : k + len(xs)], y0[k : k + len(ys)] = xs, ys
    if scalar == "x":
        x0 = np.inf
    elif scalar == "y":
        y0 = -1200.0
    x = tg.tensor(np.asarray(x0), requires_grad=True)
    y = tg.tensor(np.asarray(y0), requires_grad=True)
    with np.errstate(all="ignore"):
        out = f(x, y)
        want = ref(x0, y0)
        tnp.sum(out).backward()
        dx, dy = BINARY_DERIVATIVE[op.name](np.asarray(x0), np.asarray(y0))
    got = out.numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])
    fin = np.isfinite(want)
    xs, ys = np.broadcast_to(x0, want.shape), np.broadcast_to(y0, want.shape)
    err = _scaled_err(got[fin], want[fin], xs[fin], ys[fin])
    assert np.all(err <= BINARY_ULPS[op.name])
    for g, d, v in ((x.grad, dx, x0), (y.grad, dy, y0)):
        d = np.broadcast_to(d, want.shape)
        if np.ndim(v) == 0:
            np.testing.assert_allclose(g, d.sum(), rtol=1e-13, equal_nan=True)
        else:
            np.testing.assert_array_equal(np.isnan(g), np.isnan(d))
            ok = np.isfinite(d)
            assert _weights_ok(g[ok], d[ok])


@pytest.mark.parametrize("op", BINARY_ROWS, ids=lambda op: op.name)
def test_binary_vector_replay_equals_eager(op):
    f = getattr(tnp, op.name)
    step = tg.compile(lambda x, y: f(x, y).sum(), argnums=(0, 1))
    rng = np.random.default_rng(9)
    x0, y0 = rng.uniform(-2, 2, 3000), rng.uniform(-2, 2, 3000)
    for _ in range(3):
        x, y = tg.tensor(x0, requires_grad=True), tg.tensor(y0, requires_grad=True)
        loss = f(x, y).sum()
        loss.backward()
        value, grads = step.value_and_grad(x0, y0)
        np.testing.assert_allclose(value, loss.item(), rtol=1e-14)
        np.testing.assert_array_equal(grads[0], x.grad)
        np.testing.assert_array_equal(grads[1], y.grad)
        x0 = x0 * 40.0  # beyond the gate in later rounds


@pytest.mark.parametrize("plain", [False, True], ids=["tensor", "array"])
def test_binary_gate_reads_only_what_is_saved(plain):
    """The gate reads x and y, so both backward formulas read them too: y changed in
    place after the forward raises for a tensor (its version is checked) and does not
    matter for a NumPy array (the tape keeps its own copy). A gate on the new (x, y)
    would have sent e^800 to vm.exp, outside its range."""
    n = 2 * BLOCK
    x = tg.tensor(np.zeros(n), requires_grad=True)
    y = np.full(n, 800.0) if plain else tg.tensor(np.full(n, 800.0))
    out = tnp.logaddexp(x, y)
    y -= 799.0
    if not plain:
        with pytest.raises(RuntimeError, match="modified by an in-place operation"):
            tnp.sum(out).backward()
        return
    tnp.sum(out).backward()
    np.testing.assert_array_equal(x.grad, np.zeros(n))  # 1 / (1 + e^800)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [SMALL - 1, 2 * BLOCK], ids=["libm", "vector"])
def test_logaddexp_weights_do_not_depend_on_the_size_of_x(dtype, n):
    """Far from 0, ulp(out) is large: weights from e^(x - out) lost every digit there
    (logaddexp(x, x) at 2e7 in float32 would have derivative 2); from
    x - y they stay exact, as PyTorch's. At x = +inf and y finite they are 1 and 0."""
    big = 3e7 if dtype == np.float32 else 1e16
    x0 = np.full(n, big, dtype)
    x = tg.tensor(x0, requires_grad=True)
    tnp.sum(tnp.logaddexp(x, x)).backward()
    np.testing.assert_array_equal(x.grad, np.ones(n, dtype))
    rng = np.random.default_rng(11)
    x0 = (big * rng.uniform(-1, 1, n)).astype(dtype)
    y0 = (x0.astype(np.float64) + rng.uniform(-2, 2, n)).astype(dtype)
    x, y = tg.tensor(x0, requires_grad=True), tg.tensor(y0, requires_grad=True)
    tnp.sum(tnp.logaddexp(x, y)).backward()
    dx, dy = BINARY_DERIVATIVE["logaddexp"](x0.astype(np.float64), y0.astype(np.float64))
    np.testing.assert_allclose(x.grad, dx, rtol=4 * np.finfo(dtype).eps)
    np.testing.assert_allclose(y.grad, dy, rtol=4 * np.finfo(dtype).eps)
    x = tg.tensor(np.array([np.inf, 1.0]), requires_grad=True)
    y = tg.tensor(np.array([2.0, -np.inf]), requires_grad=True)
    tnp.sum(tnp.logaddexp(x, y)).backward()
    np.testing.assert_array_equal(x.grad, [1.0, 1.0])
    np.testing.assert_array_equal(y.grad, [0.0, 0.0])


def _log_softmax_lines(length, rng):
    """Lines of logits for ``log_softmax``: ordinary ones (the vector formula of e^x),
    and in the middle one each whose shifted values leave its range (a spread over 708),
    hold -inf, are all -inf, hold NaN or +inf (libm). The kernel takes unit-stride lines
    by chunks of ``EXP_CHUNK`` elements: there are whole chunks of ordinary lines before
    and after the one with the odd lines."""
    odd = rng.standard_normal((6, length)) * 4
    if length > 1:
        odd[1, 0] = odd[1, -1] - 800.0  # e^(x - m) below the range: subnormal or 0
        odd[2, -1] = -np.inf
    odd[3] = -np.inf
    odd[4, 0] = np.nan
    odd[5, -1] = np.inf
    n = 2 * EXP_CHUNK // length + 3
    return np.concatenate([rng.standard_normal((n, length)), odd, rng.standard_normal((n, length))])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("length", [1, 3, 10, 17])
@pytest.mark.parametrize("axis", [-1, 0])
def test_log_softmax_lines_in_and_out_of_the_vector_range(dtype, length, axis):
    """``log_softmax`` takes the vector formula of e^x by chunks of unit-stride lines
    whose shifted values are all in its range, and libm's elsewhere (axis 0 here: strided
    lines): values and gradients against SciPy and the closed form ``w - softmax *
    sum(w)`` in float64, on lines of both kinds in one array."""
    rng = np.random.default_rng(length)
    z0 = _log_softmax_lines(length, rng)
    z0 = (z0 if axis == -1 else z0.T.copy()).astype(dtype)
    w = rng.uniform(0.5, 2.0, z0.shape)
    z = tg.tensor(z0, requires_grad=True)
    out = tsp.log_softmax(z, axis=axis)
    tnp.sum(out * w).backward()
    z64 = z0.astype(np.float64)
    with np.errstate(all="ignore"):
        ref = scipy.special.log_softmax(z64, axis=axis)
        # the softmax as exp(log_softmax), as PyTorch's backward takes it: with a +inf
        # logit the finite ones get weight 0 (SciPy's softmax is NaN on that whole line)
        gref = w - np.exp(ref) * np.sum(w, axis=axis, keepdims=True)
    assert out.dtype == dtype and z.grad.dtype == dtype
    tol = 8 * np.finfo(dtype).eps
    np.testing.assert_allclose(out.numpy(), ref.astype(dtype), rtol=tol, atol=tol)
    scale = np.abs(np.sum(w, axis=axis)).max()  # w - p * sum(w) cancels: error ~ eps sum(w)
    np.testing.assert_allclose(z.grad, gref.astype(dtype), rtol=tol, atol=tol * scale)
