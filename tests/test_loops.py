"""Loop shapes and formula branches the op table's small generated cases do not reach:
broadcast-reducing backward passes whose inner axis is short (the plan's last two axes
are swapped and the broadcast axis is summed in a register), and ``x ** 2``."""

from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads

# (x shape, y shape): inner axis of 3 or 2 behind a long broadcast axis (swapped), and
# shapes just outside the rule (inner axis too long, broadcast axis too short)
SHAPES = [
    ((24, 1, 3), (1, 24, 3)),  # pairwise differences of 24 points in 3-d
    ((5, 20, 2), (5, 1, 2)),
    ((1, 40, 3), (7, 40, 3)),
    ((30, 1, 9), (1, 30, 9)),  # inner 9: no swap
    ((6, 1, 3), (1, 6, 3)),  # broadcast axis < 4x inner: no swap
]


@pytest.mark.parametrize(("xs", "ys"), SHAPES)
@pytest.mark.parametrize("op", ["subtract", "multiply", "divide"])
def test_broadcast_backward_short_inner_axis(xs, ys, op):
    rng = np.random.default_rng(1)
    a, b = rng.uniform(0.5, 2.0, xs), rng.uniform(0.5, 2.0, ys)
    w = rng.standard_normal(np.broadcast_shapes(xs, ys))
    f = getattr(tnp, op)
    check_grads(lambda x, y: tnp.sum(f(x, y) * w), [a, b])
    # against the hand-derived sums over the broadcast axes
    x, y = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
    tnp.sum(f(x, y) * w).backward()
    dx = {"subtract": w, "multiply": w * b, "divide": w / b}[op]
    dy = {"subtract": -w, "multiply": w * a, "divide": -w * a / b**2}[op]
    ax = tuple(d for d in range(w.ndim) if xs[d] == 1 and w.shape[d] != 1)
    ay = tuple(d for d in range(w.ndim) if ys[d] == 1 and w.shape[d] != 1)
    np.testing.assert_allclose(x.grad, dx.sum(axis=ax, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(y.grad, dy.sum(axis=ay, keepdims=True), rtol=1e-12)


def test_broadcast_backward_short_inner_axis_float32():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((64, 1, 3)).astype(np.float32)
    b = rng.standard_normal((1, 64, 3)).astype(np.float32)
    x, y = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
    tnp.sum((x - y) ** 2).backward()
    assert x.grad.dtype == np.float32 and y.grad.dtype == np.float32
    d = a.astype(np.float64) - b
    np.testing.assert_allclose(x.grad, 2 * d.sum(axis=1, keepdims=True), rtol=1e-4)
    np.testing.assert_allclose(y.grad, -2 * d.sum(axis=0, keepdims=True), rtol=1e-4)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_square_by_power(dtype):
    """``x ** 2`` takes the product branch of the formulas: the same values as NumPy's
    power and ``2 x`` as gradient; other exponents in the same array keep ``pow``."""
    a = np.array([-3.0, -0.5, 0.0, 0.7, 2.5, np.inf, np.nan], dtype)
    x = tg.tensor(a, requires_grad=True)
    y = x**2
    assert y.dtype == dtype
    np.testing.assert_array_equal(y.numpy(), a**2)
    xf = tg.tensor(a[:5], requires_grad=True)
    tnp.sum(xf**2).backward()
    np.testing.assert_array_equal(xf.grad, 2 * a[:5])
    e = np.array([2.0, 3.0, 2.0, 0.5, 2.0, 1.0, 2.0], dtype)
    b = np.abs(a[:5]) + 0.5
    xb = tg.tensor(b, requires_grad=True)
    check = tnp.power(xb, e[:5])
    np.testing.assert_allclose(check.numpy(), b ** e[:5], rtol=1e-6)
    tnp.sum(check).backward()
    np.testing.assert_allclose(xb.grad, e[:5] * b ** (e[:5] - 1), rtol=1e-6)
    if dtype == np.float64:
        check_grads(lambda t: tnp.sum(t**2 * t), [b])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_power_gradient_by_ratio_and_by_pow(dtype):
    """The power rule's x^(y-1) is out / x wherever x and out are ordinary numbers (no
    libm pow) and pow elsewhere: zeros, tiny and huge bases, results that overflow or
    underflow, inf, NaN, negative bases with integer and fractional exponents. Every
    gradient is within a few roundings of y x^(y-1) computed in float64 (or, where that
    is not finite, the same non-finite value), and second order still holds."""
    a = np.array(
        [
            0.0,
            -0.0,
            1e-40,
            1e-31,
            3e-8,
            0.7,
            1.0,
            2.5,
            -2.0,
            -0.3,
            1e29,
            1e31,
            1e200,
            np.inf,
            -np.inf,
            np.nan,
            1e-200,
        ]
    )
    if dtype == np.float32:
        a = a[np.abs(a) < 1e38].astype(np.float32)
    for c in (1.3, -6.0, 3.0, 0.5, -0.5, 2.0, 1.0, 7.5):
        x = tg.tensor(a, requires_grad=True)
        with np.errstate(all="ignore"):
            tnp.sum(x**c).backward()
            cd = float(dtype(c))  # the exponent as the kernel holds it (1.3 in float32)
            want = (cd * a.astype(np.float64) ** (cd - 1)).astype(dtype)
        got = x.grad
        assert got.dtype == dtype
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=str(c))
        finite = np.isfinite(want)
        np.testing.assert_array_equal(
            got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)]
        )
        tol = dict(rtol=4 * np.finfo(dtype).eps, atol=np.finfo(dtype).tiny)  # subnormals
        np.testing.assert_allclose(got[finite], want[finite], **tol)
    b = np.array([0.4, 1.7, 3.0])
    check_grads(lambda t: tnp.sum(t**1.3 + t**-2.5), [b], order=2, modes=("rev", "fwd"))


def test_power_gradient_float32_near_its_range():
    """out / x must not leave float32's range where the gradient itself is finite (-inf
    and 0 would stand where pow gives -1.86e38 and -1e-28)."""
    for x, c, up in ((1.93086e-26, -0.5, 1.0), (1e-20, -1.0, 1e-3), (1e29, -1.0, 1e30)):
        t = tg.tensor(np.array([x], np.float32), requires_grad=True)
        (t**c * np.float32(up)).sum().backward()
        want = c * np.float64(np.float32(x)) ** (c - 1) * up
        assert t.grad.dtype == np.float32
        np.testing.assert_allclose(t.grad[0], want, rtol=1e-6)
