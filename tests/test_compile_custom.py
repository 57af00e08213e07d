"""tg.compile captures custom functions: a ``tg.Function`` or a ``tapegrad.extend``
primitive is one node of the program whose Python forward (and Python backward) runs
again on every replay's values.

Each case is replayed on several new values and compared with the eager result and with
central differences in float64; the capture count shows the replays did replay (a
value read inside a custom forward is not a guard). The ways a replay could reuse the
captured values quietly are each tried: control flow inside the forward, a constant
argument, an output used twice, an index output, a transform and a Hessian-vector
product inside the compiled function, a compiled step inside a graph, threads, an ODE
right-hand side.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.extend import defvjp, primitive

from .custom_ops import Cube, ScaledProduct, SplitSum, logsumexp
from .helpers import central

RNG = np.random.default_rng(11)


@primitive
def fold(x):
    """x when its sum is positive, else -x: a branch on values inside the forward."""
    return x.copy() if np.sum(x) > 0 else -x


defvjp(fold, lambda ans, x: lambda g: tnp.where(tnp.sum(x) > 0, g, -g))


@primitive
def scaled(x, k, *, shift=0.0):
    return k * x + shift


defvjp(scaled, lambda ans, x, k, shift=0.0: lambda g: g * k, None)


CASES = {
    "python backward": lambda x: tnp.sum(tnp.sin(Cube.apply(x)) * x),
    "compiled backward": lambda x: tnp.sum(ScaledProduct.apply(x, tnp.cos(x)) ** 2),
    "two outputs and an argument": lambda x: SplitSum.apply(x * x, 3.0)[0] + tnp.sum(x),
    "primitive": lambda x: logsumexp(x * 2.0) ** 2,
    "branch inside the forward": lambda x: tnp.sum(fold(x) * tnp.exp(x)),
    "constant and keyword arguments": lambda x: tnp.sum(scaled(x, 2.5, shift=1.0) ** 2),
    "output used twice, two primitives": lambda x: logsumexp(fold(x)) * logsumexp(x),
}


def _values(n):
    # both signs of the sum, so that fold takes both branches across the calls
    return [RNG.standard_normal(4) + (1.0 if i % 2 else -1.0) for i in range(n)]


@pytest.mark.parametrize("name", list(CASES))
def test_replays_equal_eager_and_central_differences(name):
    f = CASES[name]
    step = tg.compile(f)
    xs = _values(5)
    for x in xs:
        value, grad = step.value_and_grad(x)
        want_value, want_grad = tg.value_and_grad(f)(x)
        assert value == pytest.approx(float(want_value), rel=1e-12)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-11, atol=1e-13)
        fd = central(lambda v: float(tg.value_and_grad(f)(v)[0]), x)
        np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7)
    # one capture: the values the custom forward read were not guards
    assert step.stats["captures"] == 1
    assert step.stats["replays"] == len(xs)
    # a value-only call replays the forward alone
    assert step(xs[0]) == pytest.approx(float(f(tg.tensor(xs[0]))), rel=1e-12)


def test_float32_stays_float32():
    step = tg.compile(lambda x: tnp.sum(Cube.apply(x) * 2.0))
    for x in _values(3):
        x32 = x.astype(np.float32)
        _, grad = step.value_and_grad(x32)
        assert grad.dtype == np.float32
        np.testing.assert_allclose(grad, 6.0 * x32**2, rtol=1e-5)


def test_compiled_step_inside_a_graph_runs_the_custom_backward():
    """``step(x)`` on a tensor that requires grad is one node; its backward replays the
    program, custom nodes included."""
    f = CASES["output used twice, two primitives"]
    step = tg.compile(f)
    for x in _values(3):
        t = tg.tensor(x, requires_grad=True)
        (step(t) * 3.0).backward()
        np.testing.assert_allclose(t.grad, 3.0 * tg.grad(f)(x), rtol=1e-11)


def test_transform_and_hvp_inside_the_compiled_function():
    """A gradient taken inside the compiled function and a Hessian-vector product go
    through the primitive's rules, recorded into the program: every replay sees its
    own values."""

    def inner(x):
        return tnp.sum(tg.grad(logsumexp)(x) * tnp.arange(4.0))

    step = tg.compile(inner)
    for x in _values(3):
        value, grad = step.value_and_grad(x)
        np.testing.assert_allclose(value, float(inner(tg.tensor(x))), rtol=1e-12)
        np.testing.assert_allclose(
            grad, central(lambda v: float(inner(tg.tensor(v))), x), atol=1e-7
        )

    lse = tg.compile(lambda x: logsumexp(x))
    for x in _values(3):
        v = RNG.standard_normal(4)
        np.testing.assert_allclose(lse.hvp(x, v), tg.hessian(logsumexp)(x) @ v, rtol=1e-10)
    # the rules' results are recorded, not read: one program each, replayed
    assert step.stats["captures"] == 1
    assert lse._hvp.stats["captures"] == 1


def test_an_index_output_read_in_python_is_a_guard():
    """SplitSum's second output is an argmax: reading it in Python decides the program,
    so a new argmax captures again instead of replaying the old branch."""

    def f(x):
        total, idx = SplitSum.apply(x, 1.0)
        return total * x[int(idx)]

    step = tg.compile(f)
    for x in ([3.0, 1.0, 2.0], [1.0, 3.0, 2.0], [3.0, 2.0, 1.0]):
        x = np.array(x)
        _, grad = step.value_and_grad(x)
        np.testing.assert_allclose(grad, tg.grad(f)(x), rtol=1e-12)
    assert step.stats["captures"] == 2


def test_a_forward_whose_output_shape_follows_values_raises_on_replay():
    @primitive
    def first(x):
        return x[: int(np.sum(x > 0))].copy()

    defvjp(first, lambda ans, x: lambda g: tnp.concatenate([g, tnp.zeros(x.shape[0] - g.shape[0])]))
    step = tg.compile(lambda x: tnp.sum(first(x) ** 2))
    step.value_and_grad(np.array([1.0, 2.0, -1.0]))
    with pytest.raises(RuntimeError, match=r"primitive first returned output 0 of shape \(1,\)"):
        step.value_and_grad(np.array([1.0, -2.0, -1.0]))


def test_threads_share_a_step_with_a_primitive():
    f = CASES["primitive"]
    step = tg.compile(f)
    xs = _values(8)
    found = [None] * len(xs)

    def work(i):
        for _ in range(5):
            found[i] = step.value_and_grad(xs[i])[1]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for x, g in zip(xs, found):
        np.testing.assert_allclose(g, tg.grad(f)(x), rtol=1e-12)


def test_check_mode_and_anomaly_mode_with_custom_functions():
    f = CASES["python backward"]
    checked = tg.compile(f, check=True)
    for x in _values(3):
        np.testing.assert_allclose(checked.value_and_grad(x)[1], tg.grad(f)(x), rtol=1e-12)
    step = tg.compile(f)
    step.value_and_grad(np.ones(4))
    with tg.detect_anomaly():
        np.testing.assert_allclose(
            step.value_and_grad(np.full(4, 2.0))[1], tg.grad(f)(np.full(4, 2.0)), rtol=1e-12
        )


def test_an_ode_right_hand_side_with_a_primitive():
    """tapegrad.integrate captures the right-hand side: a primitive in it runs in
    Python on every evaluation (Python drives that solve), with the same gradient as
    central differences of the solution."""
    from tapegrad.scipy.integrate import odeint

    def rhs(y, t, k):
        return -k * scaled(y, 1.0, shift=0.0) + tnp.sin(t)

    t = np.linspace(0.0, 1.0, 5)

    def loss(k):
        return tnp.sum(odeint(rhs, np.array([1.0, 0.5]), t, k) ** 2)

    k = np.array(0.7)
    grad = tg.grad(loss)(k)
    fd = (float(loss(k + 1e-6)) - float(loss(k - 1e-6))) / 2e-6
    assert float(grad) == pytest.approx(fd, rel=1e-5)


def test_functions_whose_forward_cannot_run_again_are_refused():
    step = tg.compile(lambda x: tnp.sum(tg.checkpoint(tnp.sin, x)))
    with pytest.raises(TypeError, match=r"compile: _Checkpoint cannot be captured"):
        step.value_and_grad(np.ones(3))
    # an argument of the step passed as a keyword: a replay would pass the captured one
    step = tg.compile(lambda x, s: tnp.sum(scaled(x, 2.0, shift=s)))
    with pytest.raises(TypeError, match=r"compile: primitive scaled cannot be captured: it "):
        step.value_and_grad(np.ones(3), np.ones(3))


class _Counting(tg.Function):
    """Counts its forward runs (a running statistic, say)."""

    runs = 0

    @staticmethod
    def forward(ctx, x):
        _Counting.runs += 1
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        return 2.0 * g


def test_a_forward_runs_once_per_call():
    """The call that captures replays on the capture's values: the forward is not run a
    second time there, so state it keeps counts calls as eager code would."""
    step = tg.compile(lambda x: tnp.sum(_Counting.apply(x) ** 2))
    _Counting.runs = 0
    for x in _values(4):
        step.value_and_grad(x)
    assert _Counting.runs == 4


class _MarkedWhenNegative(tg.Function):
    """No gradient when the input sums below zero, decided by values in the forward."""

    @staticmethod
    def forward(ctx, x):
        y = x * 2.0
        if np.sum(x) < 0:
            ctx.mark_non_differentiable(y)
        return y

    @staticmethod
    def backward(ctx, g):
        return 2.0 * g


def test_outputs_marked_non_differentiable_by_values_capture_again():
    def f(x):
        return tnp.sum(_MarkedWhenNegative.apply(x) * x)

    step = tg.compile(f)
    for x in ([-1.0, -2.0], [1.0, 2.0], [3.0, 1.0], [-3.0, 1.0]):
        x = np.array(x)
        np.testing.assert_allclose(step.value_and_grad(x)[1], tg.grad(f)(x), rtol=1e-12)
    assert step.stats["captures"] == 2


class _Rescale(tg.Function):
    """Passes a value back through a mutable argument: a side channel."""

    @staticmethod
    def forward(ctx, x, out):
        out[...] = np.max(x)
        return x / np.max(x)

    @staticmethod
    def backward(ctx, g):
        return g, None


class _Widening(tg.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0 if np.sum(x) > 0 else (x * 2.0).astype(np.float32)

    @staticmethod
    def backward(ctx, g):
        return 2.0 * g


def test_replays_that_would_be_wrong_raise():
    # a value passed back through an argument changed in place would stay as captured
    def side_channel(x):
        buf = np.zeros(())
        y = _Rescale.apply(x, buf)
        return tnp.sum(y) * buf

    with pytest.raises(TypeError, match="changed an argument that is not a tensor in place"):
        tg.compile(side_channel).value_and_grad(np.ones(2))

    class Normalize(tg.Function):
        @staticmethod
        def forward(ctx, x, info):
            info["norm"] = float(np.linalg.norm(x))
            return x / info["norm"]

        @staticmethod
        def backward(ctx, g):
            return g, None

    def side_dict(x):
        info = {}
        y = Normalize.apply(x, info)
        return tnp.sum(y) * info["norm"]

    with pytest.raises(TypeError, match="Normalize cannot be captured: its forward changed"):
        tg.compile(side_dict).value_and_grad(np.ones(2))

    # another dtype on a replay
    step = tg.compile(lambda x: tnp.sum(_Widening.apply(x)))
    step.value_and_grad(np.ones(2))
    with pytest.raises(
        RuntimeError, match=r"_Widening returned output 0 of shape \(2,\) and dtype float32"
    ):
        step.value_and_grad(-np.ones(2))

    # the step called again from inside a custom function it is replaying
    holder = {}

    class Reentrant(tg.Function):
        @staticmethod
        def forward(ctx, x, t):
            c = float(holder["step"](x * 0.5, -1.0)) if float(t) > 0 else 1.0
            return c * x

        @staticmethod
        def backward(ctx, g):
            return g, None

    holder["step"] = tg.compile(lambda x, t: tnp.sum(Reentrant.apply(x, t) * x) + t)
    with pytest.raises(RuntimeError, match="called the compiled step whose program is replaying"):
        for _ in range(3):
            holder["step"].value_and_grad(np.array([1.0, 2.0]), 1.0)
