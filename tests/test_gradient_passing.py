"""Leaves' gradient arrays and gradients passed through without a copy: a leaf's own
``.grad`` array is never written after a backward, passed buffers (add, subtract's x)
sum every use, keep a retained or hooked output's gradient, are not passed across dtypes
or broadcasts, and replay like the eager run."""

from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.tape import current_tape

# --- leaves' own gradient arrays (Tape.use_own_grads) -------------------------------------


@pytest.fixture(params=[1, 10**9], ids=["own arrays", "copied out"])
def own_grad_min(request, monkeypatch):
    from tapegrad import tape as tape_module

    monkeypatch.setattr(tape_module, "OWN_GRAD_MIN", request.param)
    return request.param


def test_leaf_gradient_arrays_are_never_written_after_a_backward(own_grad_min):
    """Kernels write a leaf's gradient into the array that becomes its ``.grad``. Once
    handed out, no kernel may touch it again: not a second backward of a retained
    graph, not another step reusing the tape. Only accumulation into ``.grad`` writes
    into the array ``.grad`` holds (PyTorch's rule)."""
    from tapegrad.layout import S_XGRAD

    a = np.linspace(0.1, 1.0, 50)
    x = tg.tensor(a, requires_grad=True)
    y = tnp.sum(tnp.sin(x) * x)
    y.backward(retain_graph=True)
    first = x.grad
    kept = first.copy()
    x.grad = None
    y.backward()  # the same graph again: a new array, the first one untouched
    np.testing.assert_array_equal(first, kept)
    np.testing.assert_allclose(x.grad, kept)
    assert x.grad is not first
    second = x.grad
    for _ in range(3):  # later steps on the same tape
        z = tnp.sum(tnp.exp(x) * 2.0)
        z.backward()
    np.testing.assert_array_equal(first, kept)
    assert x.grad is second  # accumulated in place, as PyTorch's
    np.testing.assert_allclose(second, kept + 3 * 2.0 * np.exp(a))
    assert not current_tape().arrays["slot"][S_XGRAD].any()  # no slot names an own array


def test_leaf_gradient_arrays_with_python_nodes_hooks_and_fan_out(own_grad_min):
    """A custom function's Python backward adds into a leaf's own array (grad_view), a
    hook on an intermediate sees its gradient, a leaf used three times gets one sum."""

    class Square(tg.Function):
        @staticmethod
        def forward(ctx, v):
            ctx.save_for_backward(v)
            return v * v

        @staticmethod
        def backward(ctx, g):
            (v,) = ctx.saved_tensors
            return 2 * v * g

    a = np.array([0.5, -1.5, 2.0])
    x = tg.tensor(a, requires_grad=True)
    seen = []
    mid = x * 3.0
    mid.register_hook(lambda g: seen.append(np.array(g)))
    loss = tnp.sum(Square.apply(x)) + tnp.sum(mid * x) + tnp.sum(x)
    loss.backward()
    np.testing.assert_allclose(x.grad, 2 * a + 6 * a + 1.0)
    np.testing.assert_allclose(seen[0], a)
    gx = tg.grad(lambda v: tnp.sum(Square.apply(v) * v))(a)
    np.testing.assert_allclose(gx, 3 * a**2)


# --- gradients passed through without a copy (OPF_PASS: add, subtract's x) --------------


def _central(f, a, eps=1e-6):
    g = np.zeros_like(a)
    for i in range(a.size):
        d = np.zeros_like(a)
        d.flat[i] = eps
        g.flat[i] = (f(a + d) - f(a - d)) / (2 * eps)
    return g


@pytest.mark.parametrize("order", ["fan-out first", "fan-out last"])
def test_passed_gradients_with_fan_out_sum_every_use(own_grad_min, order):
    """``y + 1`` hands the output's gradient buffer to y; y's other uses then add into
    that buffer. Chains of passes (y + 1 - 3 + c), a pass into a leaf, and a node whose
    both inputs could take the buffer (only one may) against central differences."""

    def f(m, x):
        y = m.sin(x) * 2.0
        if order == "fan-out first":
            z = y * y
        a = y + 1.0
        b = a - 3.0
        c = b + y  # both operands the same size: one takes c's buffer, one is written
        if order == "fan-out last":
            z = y * y
        d = (x + 0.5) - x * 0.25  # passes straight into a leaf (arena or own array)
        return m.sum(c * c) + m.sum(z * b) + m.sum(d * d)

    a = np.linspace(-1.0, 1.2, 7)
    x = tg.tensor(a, requires_grad=True)
    f(tnp, x).backward()
    np.testing.assert_allclose(x.grad, _central(lambda v: f(np, v), a), rtol=1e-7, atol=1e-8)


def test_a_retained_or_hooked_output_keeps_its_gradient_when_passed(own_grad_min):
    """After ``o = y + 1`` passes its buffer to y, y's later contributions are added
    into it: ``o.grad`` (retain_grad, a hook run before the pass's kernel) must keep
    o's own gradient, and a hook that changes o's gradient changes what y receives."""
    a = np.array([0.3, -0.7, 1.1])
    w = np.array([2.0, 3.0, 5.0])
    v = np.array([7.0, 11.0, 13.0])
    x = tg.tensor(a, requires_grad=True)
    y = x * 1.0
    t = tnp.sum(y * v)  # recorded first, so its backward runs after the pass
    o = y + 1.0
    o.retain_grad()
    seen = []
    o.register_hook(lambda g: seen.append(np.array(g)))
    (tnp.sum(o * w) + t).backward()
    from tapegrad.layout import S_GRAD

    offsets = current_tape().arrays["slot"][S_GRAD]
    assert offsets[y._slot] == offsets[o._slot]  # y took o's buffer: no copy ran
    np.testing.assert_array_equal(o.grad, w)
    np.testing.assert_array_equal(seen[0], w)
    np.testing.assert_array_equal(x.grad, w + v)
    x2 = tg.tensor(a, requires_grad=True)
    y2 = x2 * 1.0
    t2 = tnp.sum(y2 * v)
    o2 = y2 - 1.0
    o2.register_hook(lambda g: g * 3.0)
    (tnp.sum(o2 * w) + t2).backward()
    np.testing.assert_array_equal(x2.grad, 3.0 * w + v)


def test_no_pass_across_dtypes_or_broadcasts():
    """A float32 operand of a float64 sum, or a broadcast bias, gets its own buffer
    (cast, reduced); the same-size operand beside it may take the output's."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((4, 5)), rng.standard_normal(5)
    x = tg.tensor(a, requires_grad=True)
    s32 = tg.tensor(a.astype(np.float32), requires_grad=True)
    bias = tg.tensor(b, requires_grad=True)
    o = x + bias
    p = s32 + x
    (tnp.sum(o * o) + tnp.sum(p * 2.0)).backward()
    np.testing.assert_allclose(x.grad, 2 * (a + b) + 2.0)
    np.testing.assert_allclose(bias.grad, (2 * (a + b)).sum(axis=0))
    assert s32.grad.dtype == np.float32
    np.testing.assert_allclose(s32.grad, np.full((4, 5), 2.0, np.float32))


def test_passed_gradients_replay_like_the_eager_run():
    """Replay plans keep the masks and buffer offsets the first run left: the same
    gradients, replay after replay, with the values changing."""

    def loss(x, w):
        y = tnp.tanh(x) * w
        a = y + 0.5
        b = a - x
        return tnp.sum(b * y) + tnp.sum(a)

    step = tg.compile(loss, argnums=(0, 1))
    rng = np.random.default_rng(4)
    for _ in range(4):
        a, w = rng.standard_normal(300), rng.standard_normal(300)
        x, wt = tg.tensor(a, requires_grad=True), tg.tensor(w, requires_grad=True)
        value = loss(x, wt)
        value.backward()
        got_value, (gx, gw) = step.value_and_grad(a, w)
        np.testing.assert_allclose(got_value, value.item(), rtol=1e-13)
        np.testing.assert_allclose(gx, x.grad, rtol=1e-13)
        np.testing.assert_allclose(gw, wt.grad, rtol=1e-13)
