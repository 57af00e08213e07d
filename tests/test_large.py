"""Large arrays: NumPy ufunc forwards (threaded), parallel backward loops, arena growth."""

from __future__ import annotations

import threading

import numba
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.tape import NUMPY_MIN, THREAD_MIN

from .helpers import in_new_thread

N = max(2 * THREAD_MIN, 600_000)  # above every size threshold


def test_large_elementwise_forward_and_backward():
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.5, 2.0, N), rng.uniform(0.5, 2.0, N)
    x = tg.tensor(a, requires_grad=True)  # the first op grows the 1 MB arena by far
    y = tg.tensor(b, requires_grad=True)
    out = tnp.exp(tnp.sin(x) * y) + tnp.tanh(y) / x - 2.0 * (x > y) + tnp.log(x) ** 2
    ref = np.exp(np.sin(a) * b) + np.tanh(b) / a - 2.0 * (a > b) + np.log(a) ** 2
    # terms of order 1 summing to ~1e-4 in places: an ulp of exp (vector formulas) shows
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-13, atol=1e-13)
    out.sum().backward()
    e = np.exp(np.sin(a) * b)
    np.testing.assert_allclose(
        x.grad, e * np.cos(a) * b - np.tanh(b) / a**2 + 2 * np.log(a) / a, rtol=1e-12, atol=1e-12
    )
    np.testing.assert_allclose(
        y.grad, e * np.sin(a) + (1 - np.tanh(b) ** 2) / a, rtol=1e-12, atol=1e-12
    )


def test_large_broadcast_and_float32():
    a = np.linspace(-0.5, 1, N).astype(np.float32)
    x = tg.tensor(a, requires_grad=True)
    row = tg.tensor(np.float32(3.0), requires_grad=True)
    out = tnp.sin(x) * row + tnp.abs(x)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.numpy(), np.sin(a) * 3 + np.abs(a), rtol=1e-6)
    out.sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad, 3 * np.cos(a) + np.sign(a), rtol=1e-5, atol=1e-6)
    # the scalar's gradient sums 600,000 terms: accumulated in float64, then rounded
    assert abs(row.grad - np.sin(a.astype(np.float64)).sum()) < 1e-6 * N


def test_thresholds_are_consistent():
    assert NUMPY_MIN <= THREAD_MIN <= N


def _arith(a, b, m):
    return ((a + b) * b - a / (b + 3.0)) - m.multiply(a, 0.5)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_large_arithmetic_kernels_and_threaded_numpy(monkeypatch, threads):
    """Plain arithmetic rows run in their kernels (broadcast operands; same-shape ones
    with one worker; with two, the kernels' parallel loops, or NumPy's ufunc in halves
    on threads after a NumPy forward, see the next test): NumPy's values and the
    hand-derived gradients either way."""
    monkeypatch.setenv("TAPEGRAD_THREADS", threads)
    rng = np.random.default_rng(3)
    cases = [((N // 1000, 1000), (1000,)), ((N,), (N,)), ((N // 3, 1, 3), (1, 1, 3))]
    results = []

    def run():  # a new thread: a new tape, which reads TAPEGRAD_THREADS
        for xs, ys in cases:
            a, b = rng.uniform(0.5, 2.0, xs), rng.uniform(0.5, 2.0, ys)
            x, y = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
            out = _arith(x, y, tnp)
            out.sum().backward()
            results.append((a, b, out.numpy(), x.grad, y.grad))

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert len(results) == len(cases)
    for a, b, out, gx, gy in results:
        np.testing.assert_allclose(out, _arith(a, b, np), rtol=1e-14)
        dx = b - 1 / (b + 3.0) - 0.5  # x has the result's shape in every case
        dy = a + 2 * b + a / (b + 3.0) ** 2
        np.testing.assert_allclose(gx, np.broadcast_to(dx, a.shape), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(gy, _unbroadcast(dy, b.shape), rtol=1e-9, atol=1e-9)


def test_large_forwards_stay_on_one_thread_pool(monkeypatch):
    """With two workers, the rows as fast on either pool (arithmetic, exp, tanh) follow
    the pool of the last large forward (``layout.H_NUMPY_POOL``): after ``log`` or
    ``log1p`` (NumPy's ufunc, halves on Python threads) they run as NumPy halves, after
    ``sin`` (a kernel on numba's threads) as parallel kernels; a broadcast operand
    (a serial kernel) leaves the pool as it was, and a backward leaves numba's. Every
    value is NumPy's on either path, and the gradients are the hand-derived ones."""
    from tapegrad.layout import H_NUMPY_POOL
    from tapegrad.tape import current_tape

    monkeypatch.setenv("TAPEGRAD_THREADS", "2")
    rng = np.random.default_rng(5)
    a, b = rng.uniform(0.5, 2.0, N), rng.uniform(0.5, 2.0, N)
    row = rng.uniform(0.5, 2.0, (1, 8))
    got = {}

    def run():  # a new thread: a new tape, which reads TAPEGRAD_THREADS
        x, w = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
        h = current_tape().h
        states = []

        def step(v):
            states.append(h[H_NUMPY_POOL])
            return v

        lg = step(tnp.log(x))  # NumPy
        q = step(lg / w)  # follows: NumPy's true_divide
        e = step(tnp.exp(q))  # follows: NumPy
        s = step(tnp.sin(e))  # a kernel
        p = step(s * w + 0.5)  # follow: kernels
        t = step(tnp.tanh(p))  # follows: the kernel's vector formula
        r = step(tnp.log1p(t * t))  # NumPy (t * t: a kernel)
        m = step(r - x)  # follows: NumPy
        bc = step(m.reshape(-1, 8) * row)  # broadcast: a serial kernel, no change
        bc.sum().backward()
        got.update(states=states, after=h[H_NUMPY_POOL], x=x, w=w, values=(lg, q, e, s, p, t, r, m))

    th = threading.Thread(target=run)
    th.start()
    th.join()
    assert got["states"] == [1, 1, 1, 0, 0, 0, 1, 1, 1]
    assert got["after"] == 0
    lg = np.log(a)
    q = lg / b
    e = np.exp(q)
    s = np.sin(e)
    p = s * b + 0.5
    t = np.tanh(p)
    r = np.log1p(t * t)
    for v, ref in zip(got["values"], (lg, q, e, s, p, t, r, r - a)):
        np.testing.assert_allclose(v.numpy(), ref, rtol=1e-13, atol=1e-15)
    g = np.broadcast_to(row, (N // 8, 8)).reshape(-1)  # d out / d m
    gt = g * 2 * t / (1 + t * t)
    gp = gt * (1 - t * t)
    gs = gp * b
    ge = gs * np.cos(e)
    gq = ge * e
    np.testing.assert_allclose(got["x"].grad, -g + gq / (a * b), rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(got["w"].grad, gp * s - gq * q / b, rtol=1e-11, atol=1e-12)


def _unbroadcast(v, shape):
    """Sum ``v`` over the axes broadcasting added or stretched to reach its shape."""
    v = v.sum(axis=tuple(range(v.ndim - len(shape))))
    return v.sum(axis=tuple(d for d, n in enumerate(shape) if n == 1), keepdims=True)


# --- every elementwise row on large arrays: blocked, vector and parallel backward loops ----
# The gradient tests of test_ops.py use a few elements (plain loops). Here each row runs
# on N elements, once as the first writer of its inputs' gradient buffers (fresh: NaN
# under the suite's poisoning, see conftest.py) and once adding to what another node
# wrote; elementwise, the gradient at an element must match the same row on a small
# slice through the plain loops.

from tapegrad.ops import ROWS, Kind  # noqa: E402

ELEMENTWISE_ROWS = [  # (polygamma's own cases give its integer order)
    op
    for op in ROWS
    if op.kind in (Kind.UNARY, Kind.BINARY) and op.differentiable and op.bwd and op.cases is None
]


def _inputs(op, n):
    from .optable_cases import Case, function

    case = Case(op, "large", None, [(n,)] * (1 if op.kind is Kind.UNARY else 2))
    return case.args(), function(tnp, op)


def _sample(n, seed=0):
    """Elements to check one by one: the first and last (a streamed result's unaligned
    head and partial last block, ``layout.STREAM_MIN``), block edges and random ones."""
    rng = np.random.default_rng(seed)
    edges = [k * 128 + d for k in (1, 2, 64, 65) for d in (-1, 0)]
    return np.unique(np.r_[0:70, edges, rng.integers(0, n, 60), n - 200 : n])


def _cores(monkeypatch, cores, fn, *args):
    """``fn(*args)`` as is (``cores`` "all"), or in a new thread whose numba loops run
    on one core and whose tape has one worker ("one": numba's thread count is per
    thread, ``_jit.serial_loops``), where large results are streamed past the caches
    (``layout.STREAM_MIN``); its exception re-raised here."""
    if cores == "all":
        fn(*args)
        return
    from tapegrad._jit import serial_loops

    monkeypatch.setenv("TAPEGRAD_THREADS", "1")

    def on_one_core():
        numba.get_num_threads()  # launch numba's threads: serial_loops acts only then
        serial_loops()
        assert numba.get_num_threads() == 1
        fn(*args)

    in_new_thread(on_one_core)


CORES = pytest.mark.parametrize("cores", ["all", "one"])


@pytest.mark.parametrize("op", ELEMENTWISE_ROWS, ids=lambda op: op.name)
@pytest.mark.parametrize("second", [False, True], ids=["fresh", "adding"])
@CORES
def test_large_elementwise_gradient_matches_small(monkeypatch, op, second, cores):
    """Forward values and gradients on N elements (on one core streamed past the caches,
    on all in parallel loops, by blocks) against the same row on a small sample through
    the plain loops."""
    _cores(monkeypatch, cores, _large_row_matches_small, op, second)


def _large_row_matches_small(op, second):
    args, f = _inputs(op, N)
    g = np.random.default_rng(5).standard_normal(N)
    leaves = [tg.tensor(a, requires_grad=True) for a in args]
    out = f(*leaves)
    loss = tnp.sum(out * g)
    if second:
        loss = loss + sum(tnp.sum(leaf * 0.5) for leaf in leaves)
    loss.backward()
    k = _sample(N)
    small = [tg.tensor(a[k], requires_grad=True) for a in args]
    out_small = f(*small)
    tnp.sum(out_small * g[k]).backward()
    np.testing.assert_allclose(out.numpy()[k], out_small.numpy(), rtol=1e-14, atol=1e-300)
    for leaf, s in zip(leaves, small, strict=True):
        assert not np.isnan(leaf.grad).any()  # inside the row's domain: no NaN anywhere
        want = s.grad + (0.5 if second else 0.0)
        np.testing.assert_allclose(leaf.grad[k], want, rtol=1e-13, atol=1e-13)


def _shared(op):
    d = op.domain if isinstance(op.domain[0], tuple) else (op.domain, op.domain)
    return max(d[0][0], d[1][0]), min(d[0][1], d[1][1])


@pytest.mark.parametrize(
    "op",
    [op for op in ELEMENTWISE_ROWS if op.kind is Kind.BINARY and _shared(op)[0] < _shared(op)[1]],
    ids=lambda op: op.name,
)
@CORES
def test_large_binary_with_one_tensor_as_both_operands(monkeypatch, op, cores):
    _cores(monkeypatch, cores, _shared_matches_small, op)


def _shared_matches_small(op):
    _, f = _inputs(op, N)
    a = np.random.default_rng(6).uniform(*_shared(op), N)
    x = tg.tensor(a, requires_grad=True)
    tnp.sum(f(x, x)).backward()
    k = _sample(N, 1)
    s = tg.tensor(a[k], requires_grad=True)
    tnp.sum(f(s, s)).backward()
    np.testing.assert_allclose(x.grad[k], s.grad, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize(
    "op", [op for op in ELEMENTWISE_ROWS if op.kind is Kind.BINARY], ids=lambda op: op.name
)
@pytest.mark.parametrize("side", [0, 1], ids=["x_scalar", "y_scalar"])
@pytest.mark.parametrize("scalar", ["tensor", "python"])
@pytest.mark.parametrize("second", [False, True], ids=["fresh", "adding"])
@CORES
def test_large_binary_with_a_scalar_operand(monkeypatch, op, side, scalar, second, cores):
    """``c op x`` and ``x op c`` on N elements (the scalar-operand backward loops, on
    all cores from PARALLEL_MIN, streamed on one): the full-size operand's gradient
    element by element, and the sum a 0-d tensor ``c`` receives, against the same row
    with ``c`` spread to a full-size operand."""
    _cores(monkeypatch, cores, _scalar_operand_matches_spread, op, side, scalar, second)


def _scalar_operand_matches_spread(op, side, scalar, second):
    args, f = _inputs(op, N)
    c = float(args[side][0])  # a value inside the row's domain
    g = np.random.default_rng(7).standard_normal(N)
    other = 1 - side
    big = tg.tensor(args[other], requires_grad=True)
    small = tg.tensor(c, requires_grad=True) if scalar == "tensor" else c
    operands = [big, small] if other == 0 else [small, big]
    loss = tnp.sum(f(*operands) * g)
    if second:  # then the row's backward adds to what another node wrote first
        loss = loss + tnp.sum(big * 0.5) + (small * 0.5 if scalar == "tensor" else 0.0)
    loss.backward()
    spread = [tg.tensor(a, requires_grad=True) for a in args]
    spread[side] = tg.tensor(np.full(N, c), requires_grad=True)
    tnp.sum(f(*spread) * g).backward()
    extra = 0.5 if second else 0.0
    np.testing.assert_allclose(big.grad, spread[other].grad + extra, rtol=1e-13, atol=1e-13)
    if scalar == "tensor":
        want = spread[side].grad.sum() + extra
        assert abs(small.grad - want) <= 1e-12 * (np.abs(spread[side].grad).sum() + 1.0)


def test_scalar_parallel_is_for_binary_rows():
    from tapegrad.ops import BY_NAME, Op

    with pytest.raises(ValueError, match="scalar_parallel is for binary rows"):
        Op("bad_scalar_parallel", Kind.UNARY, lambda x: x, lambda g, x, out: g, "x",
           scalar_parallel=True)  # fmt: skip
    assert "bad_scalar_parallel" not in BY_NAME
    flagged = {op.name for op in ROWS if op.scalar_parallel}
    assert flagged == {"add", "subtract", "multiply", "true_divide", "power", "maximum", "minimum"}


# --- a short last axis: pairwise differences and sums over xyz ----------------------------
# The forward of a broadcast binary row exchanges the last two axes of its loop when the
# innermost is short and the plane small (ops.elementwise.binary_kernels.swap_for_rows); a sum over
# a short last axis runs on all cores from PARALLEL_MIN elements (ops.reduce.kernels).

BROADCAST_ROWS = [
    op
    for op in ROWS
    if op.kind in (Kind.BINARY, Kind.COMPARE) and op.namespace != "internal" and op.cases is None
]
# (exchanged, exchanged, operands swapped, 4-d, plane above PLANE_MAX: not exchanged,
# inner axis too long: not exchanged)
SHORT_AXIS_SHAPES = [
    [(20, 1, 3), (1, 20, 3)],
    [(2, 40, 1, 2), (1, 1, 40, 2)],
    [(1, 20, 3), (20, 1, 3)],
    [(3, 1, 5, 1, 2), (1, 4, 5, 9, 2)],
    [(3, 1, 3), (1, 6000, 3)],
    [(9, 1, 12), (1, 9, 12)],
]


@pytest.mark.parametrize("op", BROADCAST_ROWS, ids=lambda op: op.name)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_broadcast_over_a_short_last_axis_matches_numpy(op, dtype):
    from .optable_cases import Case, function

    f = function(tnp, op)
    for shapes in SHORT_AXIS_SHAPES:
        args = Case(op, "short axis", None, shapes).args(dtype)
        got = f(*[tg.tensor(a) for a in args]).numpy()
        want = function(np, op)(*args)  # NumPy's (SciPy's) shape and dtype
        assert got.shape == want.shape and got.dtype == want.dtype
        # values: the same row on operands spread to the full shape (no broadcasting;
        # vector formulas there, libm's here: within a few ulp of values of order 1)
        spread = f(*[tg.tensor(a.copy()) for a in np.broadcast_arrays(*args)]).numpy()
        rtol = 1e-6 if dtype == np.float32 else 1e-14
        np.testing.assert_allclose(got, spread, rtol=rtol, atol=rtol, equal_nan=True)


@pytest.mark.parametrize("name", ["subtract", "multiply", "true_divide", "power", "arctan2"])
def test_broadcast_over_a_short_last_axis_gradients(name):
    """The same loops under central differences (float64), both operands."""
    from tapegrad.ops import BY_NAME

    from .optable_cases import Case, function

    op = BY_NAME[name]
    f = function(tnp, op)
    for shapes in SHORT_AXIS_SHAPES[:4]:
        a, b = Case(op, "short axis", None, shapes).args()
        w = np.random.default_rng(1).standard_normal(np.broadcast_shapes(*shapes))
        ga, gb = tg.grad(lambda x, y, w=w: tnp.sum(f(x, y) * w), argnums=(0, 1))(a, b)
        for arg, g in ((0, ga), (1, gb)):
            for idx in [(0,) * a.ndim, tuple(s - 1 for s in shapes[arg])]:
                e = np.zeros(shapes[arg])
                e[idx] = 1e-6
                plus = [a, b]
                minus = [a, b]
                plus[arg], minus[arg] = plus[arg] + e, minus[arg] - e
                fd = np.sum(function(np, op)(*plus) * w) - np.sum(function(np, op)(*minus) * w)
                assert g[idx] == pytest.approx(fd / 2e-6, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("kind", ["sum", "mean"])
@pytest.mark.parametrize("second", [False, True], ids=["fresh", "adding"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sum_over_a_short_last_axis_on_all_cores(kind, second, dtype):
    """Rows of 3 (and 7) summed on all cores, forward and backward (a fresh gradient
    buffer stored into, or one another node wrote first, added to)."""
    from tapegrad.ops.elementwise.kernels import PARALLEL_MIN

    for inner in (3, 7):
        rows = PARALLEL_MIN // inner + 5
        a = np.random.default_rng(2).standard_normal((rows, inner)).astype(dtype)
        wv = np.random.default_rng(3).standard_normal(rows).astype(dtype)
        x = tg.tensor(a, requires_grad=True)
        y = x * 2.0
        r = getattr(tnp, kind)(y, axis=-1)
        want = getattr(np, kind)(a.astype(np.float64) * 2.0, axis=-1)
        np.testing.assert_allclose(r.numpy(), want, rtol=1e-5 if dtype == np.float32 else 1e-13)
        loss = tnp.sum(r * wv) + (tnp.sum(y * 0.5) if second else 0.0)
        loss.backward()
        scale = 1.0 if kind == "sum" else 1.0 / inner
        expect = 2.0 * (np.repeat(wv[:, None].astype(np.float64), inner, 1) * scale)
        expect += 1.0 if second else 0.0
        assert x.grad.dtype == dtype
        np.testing.assert_allclose(x.grad, expect, rtol=1e-5 if dtype == np.float32 else 1e-13)


# --- results streamed past the caches (layout.STREAM_MIN) -----------------------------------
# From 4 MiB, elementwise kernels write results and fresh gradient buffers in blocks of
# SB elements through an L1 buffer with non-temporal stores; the element tests above
# cover float64 (N elements: 4.8 MB). Here float32 (which needs twice the elements),
# outputs that do not start on a cache line, and which rows leave NumPy's ufunc for it.

from tapegrad.layout import STREAM_MIN  # noqa: E402

STREAM_ROWS = ["multiply", "sin", "exp", "tanh", "sqrt", "maximum", "logaddexp", "arctan2"]


@pytest.mark.parametrize("name", STREAM_ROWS)
@pytest.mark.parametrize("scalar", [False, True], ids=["arrays", "scalar"])
def test_streamed_float32_matches_small(monkeypatch, name, scalar):
    _cores(monkeypatch, "one", _float32_matches_small, name, scalar)


def _float32_matches_small(name, scalar):
    from tapegrad.ops import BY_NAME

    op = BY_NAME[name]
    n = STREAM_MIN // 4 + 1001  # float32: just over the threshold, a partial last block
    args, f = _inputs(op, n)
    args = [a.astype(np.float32) for a in args]
    if scalar and op.kind is Kind.BINARY:
        args[1] = args[1][:1].reshape(())  # a 0-d operand: spread over each block
    g = np.random.default_rng(8).standard_normal(n).astype(np.float32)
    leaves = [tg.tensor(a, requires_grad=True) for a in args]
    out = f(*leaves)
    assert out.dtype == np.float32
    tnp.sum(out * g).backward()
    k = _sample(n, 2)
    small = [tg.tensor(a if a.ndim == 0 else a[k], requires_grad=True) for a in args]
    out_small = f(*small)
    tnp.sum(out_small * g[k]).backward()
    np.testing.assert_allclose(out.numpy()[k], out_small.numpy(), rtol=2e-6, atol=1e-30)
    big, few = leaves[0].grad, small[0].grad
    assert big.dtype == np.float32 and not np.isnan(big).any()
    np.testing.assert_allclose(big[k], few, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cheap_rows_stream_in_the_kernel(monkeypatch, dtype):
    """With one worker, cheap ufunc rows (``dispatch.KERNEL_STREAMS``: sqrt, floor,
    maximum, comparisons) run in their kernels once the result is streamed (NumPy's
    loop is faster below it), with NumPy's exact values; rows that call libm (log) stay
    NumPy's."""
    import tapegrad.recording as recording

    calls = []
    numpy_forward = recording._numpy_forward

    def spy(tape, op, out):
        calls.append(op.name)
        return numpy_forward(tape, op, out)

    monkeypatch.setattr(recording, "_numpy_forward", spy)
    _cores(monkeypatch, "one", _cheap_rows, dtype, calls)


CHEAP = {  # (m: tapegrad.numpy or numpy)
    "sqrt": lambda m, u, v: m.sqrt(m.abs(u)),
    "floor": lambda m, u, v: m.floor(u),
    "reciprocal": lambda m, u, v: m.reciprocal(u),
    "maximum": lambda m, u, v: m.maximum(u, v),
    "less": lambda m, u, v: u < v,
}


def _cheap_rows(dtype, calls):
    itemsize = np.dtype(dtype).itemsize
    rng = np.random.default_rng(9)
    for n, streamed in ((STREAM_MIN // itemsize + 77, True), (STREAM_MIN // itemsize // 2, False)):
        a = rng.uniform(-3.0, 3.0, n).astype(dtype)
        b = rng.uniform(-3.0, 3.0, n).astype(dtype)
        x, y = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
        calls.clear()
        for name, f in CHEAP.items():
            v, want = f(tnp, x, y), f(np, a, b)
            assert v.dtype == want.dtype
            np.testing.assert_array_equal(v.numpy(), want, err_msg=name)
        if streamed:  # (the bool result of less has a byte an element: not streamed)
            assert calls == ["less"]
        else:
            assert {"sqrt", "floor", "reciprocal", "maximum", "less"} <= set(calls)
        calls.clear()
        tnp.log(tg.tensor(np.abs(a) + 1, requires_grad=True))
        assert calls == ["log"]
    n = STREAM_MIN + 77  # a bool result streams from this many elements
    a, b = rng.uniform(-3.0, 3.0, n).astype(dtype), rng.uniform(-3.0, 3.0, n).astype(dtype)
    calls.clear()
    less = tg.tensor(a, requires_grad=True) < tg.tensor(b, requires_grad=True)
    assert calls == []
    np.testing.assert_array_equal(less.numpy(), a < b)
    # a broadcast operand: the kernels stream same-shape and scalar operands only, so
    # the row stays NumPy's broadcast loop (not the kernels' strided one)
    rows = STREAM_MIN // itemsize // 8 + 7
    a = rng.uniform(-3.0, 3.0, (rows, 8)).astype(dtype)
    b = rng.uniform(-3.0, 3.0, 8).astype(dtype)
    calls.clear()
    v = tnp.maximum(tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True))
    assert calls == ["maximum"]
    np.testing.assert_array_equal(v.numpy(), np.maximum(a, b))


def test_streamed_kernels_on_unaligned_outputs():
    """The streamed loops peel the elements before the first 64-byte boundary and stream
    whole lines after it: outputs at every offset within a line, NumPy's values."""
    from tapegrad._jit import StaticRef, jit
    from tapegrad.ops.elementwise.binary_kernels import binary_fwd_streamed
    from tapegrad.ops.elementwise.kernels import unary_fwd_streamed

    mul, sin = StaticRef("multiply"), StaticRef("sin")

    @jit
    def run(x, y, out_mul, out_sin):
        binary_fwd_streamed(mul, x, y, out_mul)
        unary_fwd_streamed(sin, x, out_sin)

    rng = np.random.default_rng(10)
    n = 5000  # any size: the streamed loops themselves, called directly
    a, b = rng.standard_normal(n), rng.standard_normal(n)
    for shift in range(9):
        buf = np.full(2 * n + 32, -7.0)
        out_mul, out_sin = buf[shift : shift + n], buf[n + 16 + shift : 2 * n + 16 + shift]
        run(a, b, out_mul, out_sin)
        np.testing.assert_array_equal(out_mul, a * b)
        np.testing.assert_allclose(out_sin, np.sin(a), rtol=1e-15, atol=1e-16)
        assert (buf[:shift] == -7.0).all() and (buf[n + shift : n + 16 + shift] == -7.0).all()
        run(a, b[:1], out_mul, out_sin)  # a scalar operand
        np.testing.assert_array_equal(out_mul, a * b[0])


def test_streamed_results_in_no_grad_and_compiled_replay(monkeypatch):
    """On one core, results of STREAM_MIN bytes are streamed in every mode that runs the
    forward kernels: under no_grad, and in a tg.compile program's capture and replays
    (new values each call); values and gradients against their closed forms."""
    _cores(monkeypatch, "one", _streamed_modes)


def _streamed_loss(x, w):
    return tnp.sum(tnp.sin(x) * w + tnp.sqrt(x * x + 1.0) * x)


def _streamed_modes():
    n = STREAM_MIN // 8 + 77
    rng = np.random.default_rng(11)
    k = _sample(n)
    with tg.no_grad():
        a, b = rng.uniform(-2.0, 2.0, n), rng.uniform(0.5, 1.5, n)
        v = tnp.sin(tg.tensor(a)) * b + tnp.sqrt(tg.tensor(a) * a + 1.0)
        np.testing.assert_allclose(v.numpy()[k], np.sin(a[k]) * b[k] + np.sqrt(a[k] ** 2 + 1))
    step = tg.compile(_streamed_loss, argnums=(0, 1))
    for seed in range(3):  # the capture, then two replays of the program
        a = np.random.default_rng(seed).uniform(-2.0, 2.0, n)
        b = np.random.default_rng(seed + 7).uniform(0.5, 1.5, n)
        value, (gx, gw) = step.value_and_grad(a, b)
        r = np.sqrt(a[k] * a[k] + 1.0)
        np.testing.assert_allclose(gx[k], np.cos(a[k]) * b[k] + a[k] * a[k] / r + r, rtol=1e-13)
        np.testing.assert_allclose(gw[k], np.sin(a[k]), rtol=1e-13)
        want = np.sum(np.sin(a) * b + np.sqrt(a * a + 1.0) * a)
        np.testing.assert_allclose(value, want, rtol=1e-11)
    assert step.stats["captures"] == 1 and step.stats["replays"] == 3
