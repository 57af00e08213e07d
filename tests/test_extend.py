"""tapegrad.extend: primitives with declared rules, differentiated to any order.

Every derivative is checked against central differences in float64 (second order
against differences of the first, third against differences of the second), and the
ways a primitive could lose a gradient quietly are each made to raise.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.extend import Primitive, defjvp, defvjp, primitive

from .custom_ops import logsumexp

RNG = np.random.default_rng(7)


def central(f, x, eps=1e-5):
    """Central differences of ``f`` (array -> array) at ``x``: shape f(x).shape + x.shape."""
    x = np.asarray(x, float)
    f0 = np.asarray(f(x))
    out = np.zeros(f0.shape + x.shape)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        out[(..., *i)] = (np.asarray(f(x + d)) - np.asarray(f(x - d))) / (2 * eps)
    return out


# --- the primitives under test --------------------------------------------------------------


def lse_plain(x):
    return np.log(np.sum(np.exp(x)))


@primitive
def polar(r, theta):  # two outputs
    return r * np.cos(theta), r * np.sin(theta)


defvjp(
    polar,
    lambda ans, r, theta: lambda g: g[0] * tnp.cos(theta) + g[1] * tnp.sin(theta),
    lambda ans, r, theta: lambda g: -g[0] * ans[1] + g[1] * ans[0],
)
defjvp(
    polar,
    lambda t, ans, r, theta: (t * tnp.cos(theta), t * tnp.sin(theta)),
    lambda t, ans, r, theta: (-t * ans[1], t * ans[0]),
)


@primitive
def scaled_cube(x, k):  # k: a constant argument (a None rule)
    return k * x**3


defvjp(scaled_cube, lambda ans, x, k: lambda g: 3 * k * x**2 * g, None)
defjvp(scaled_cube, lambda t, ans, x, k: 3 * k * x**2 * t, None)


# --- values and first order -----------------------------------------------------------------


def test_plain_values_call_the_function_itself():
    x = np.array([0.1, 0.2])
    assert logsumexp(x) == pytest.approx(lse_plain(x))
    assert isinstance(logsumexp, Primitive)
    assert logsumexp.__name__ == "logsumexp"


def test_first_order_backward_and_grad():
    x = RNG.standard_normal(5)
    t = tg.tensor(x, requires_grad=True)
    logsumexp(t).backward()
    np.testing.assert_allclose(t.grad, central(lse_plain, x), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(tg.grad(logsumexp)(x), central(lse_plain, x), rtol=1e-7)


def test_inside_a_larger_graph_with_broadcasting():
    x, w = RNG.standard_normal((3, 4)), RNG.standard_normal(4)

    def f(w):
        return tnp.sum(tnp.stack([logsumexp(x[i] * w) for i in range(3)]) ** 2)

    def plain(w):
        return np.sum(np.array([lse_plain(x[i] * w) for i in range(3)]) ** 2)

    np.testing.assert_allclose(tg.grad(f)(w), central(plain, w), rtol=1e-6)


# --- higher order ---------------------------------------------------------------------------


def test_hessian_reverse_over_reverse_and_forward_over_reverse():
    x = RNG.standard_normal(4)
    p = np.exp(x - lse_plain(x))
    exact = np.diag(p) - np.outer(p, p)
    np.testing.assert_allclose(tg.hessian(logsumexp)(x), exact, rtol=1e-10, atol=1e-12)
    fd = central(lambda v: tg.grad(logsumexp)(v), x)
    np.testing.assert_allclose(tg.hessian(logsumexp)(x), fd, rtol=1e-6, atol=1e-8)
    v = RNG.standard_normal(4)
    np.testing.assert_allclose(tg.hvp(logsumexp, (x,), (v,))[0], exact @ v, rtol=1e-10)
    # forward over reverse: the VJP rule recorded, then pushed through by the JVP rule
    np.testing.assert_allclose(tg.jvp(tg.grad(logsumexp), (x,), (v,))[1], exact @ v, rtol=1e-10)


def test_third_order():
    x = RNG.standard_normal(3)

    def third(v):  # d/dx of the hessian's trace
        return tg.grad(lambda y: tnp.trace(tg.hessian(logsumexp)(y)))(v)

    def trace_hessian(v):
        p = np.exp(v - lse_plain(v))
        return np.trace(np.diag(p) - np.outer(p, p))

    np.testing.assert_allclose(third(x), central(trace_hessian, x), rtol=1e-6, atol=1e-9)


def test_create_graph_backward_twice():
    x = RNG.standard_normal(3)
    t = tg.tensor(x, requires_grad=True)
    y = logsumexp(t)
    y.backward(create_graph=True)
    gx = t.grad
    assert isinstance(gx, tg.Tensor) and gx.requires_grad
    t.grad = None
    tnp.sum(gx**2).backward()
    fd = central(lambda v: np.sum(tg.grad(logsumexp)(v) ** 2), x)
    np.testing.assert_allclose(t.grad, fd, rtol=1e-6, atol=1e-9)


def test_forward_mode_and_jacfwd():
    x, v = RNG.standard_normal(4), RNG.standard_normal(4)
    out, tan = tg.jvp(logsumexp, (x,), (v,))
    assert out == pytest.approx(lse_plain(x))
    assert tan == pytest.approx(central(lse_plain, x) @ v, rel=1e-7)
    np.testing.assert_allclose(tg.jacfwd(logsumexp)(x), central(lse_plain, x), rtol=1e-7)
    # forward over forward: the jvp rule is recorded and differentiated again
    np.testing.assert_allclose(
        tg.jacfwd(tg.jacfwd(logsumexp))(x), tg.hessian(logsumexp)(x), rtol=1e-10, atol=1e-12
    )


def test_two_outputs_every_mode():
    r, th = 1.7, 0.6

    def f(v):
        x, y = polar(v[0], v[1])
        return x * y**2 + tnp.sin(x)

    def plain(v):
        x, y = v[0] * np.cos(v[1]), v[0] * np.sin(v[1])
        return x * y**2 + np.sin(x)

    v0 = np.array([r, th])
    np.testing.assert_allclose(tg.grad(f)(v0), central(plain, v0), rtol=1e-7)
    np.testing.assert_allclose(
        tg.hessian(f)(v0), central(lambda v: central(plain, v, 1e-4), v0, 1e-4), rtol=1e-4
    )
    np.testing.assert_allclose(
        tg.hessian(f)(v0), central(lambda v: tg.grad(f)(v), v0), rtol=1e-6, atol=1e-8
    )
    np.testing.assert_allclose(tg.jacfwd(f)(v0), central(plain, v0), rtol=1e-7)


def test_one_output_of_two_used():
    def f(v):
        return polar(v[0], v[1])[1] ** 2  # the first output gets no cotangent

    v0 = np.array([0.8, 1.1])
    plain = lambda v: (v[0] * np.sin(v[1])) ** 2  # noqa: E731
    np.testing.assert_allclose(tg.grad(f)(v0), central(plain, v0), rtol=1e-7)
    np.testing.assert_allclose(
        tg.hessian(f)(v0), central(lambda v: tg.grad(f)(v), v0), rtol=1e-6, atol=1e-8
    )


def test_constant_argument():
    x = RNG.standard_normal(3)
    k = tg.tensor(2.5, requires_grad=True)
    xt = tg.tensor(x, requires_grad=True)
    tnp.sum(scaled_cube(xt, k)).backward()
    np.testing.assert_allclose(xt.grad, 7.5 * x**2)
    assert k.grad is None or not np.any(k.grad)  # declared zero
    np.testing.assert_allclose(
        tg.hessian(lambda v: tnp.sum(scaled_cube(v, 2.5)))(x), np.diag(15 * x), atol=1e-12
    )


def test_float32_stays_float32():
    x = RNG.standard_normal(4).astype(np.float32)
    t = tg.tensor(x, requires_grad=True)
    logsumexp(t).backward()
    assert t.grad.dtype == np.float32
    h = tg.hessian(logsumexp)(x)
    assert h.dtype == np.float32
    p = np.exp(x.astype(float) - lse_plain(x.astype(float)))
    np.testing.assert_allclose(h, np.diag(p) - np.outer(p, p), atol=1e-5)


def test_rules_written_with_numpy_functions_are_recorded():
    @primitive
    def softplus(x):
        return np.log1p(np.exp(x))

    # np.exp on a tensor dispatches to tapegrad (NumPy's protocols): recorded too
    defvjp(softplus, lambda ans, x: lambda g: g / (1 + np.exp(-x)))
    x = RNG.standard_normal(3)
    s = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(tg.hessian(lambda v: tnp.sum(softplus(v)))(x), np.diag(s * (1 - s)))


# --- the HIPS examples ---------------------------------------------------------------------


@primitive
def fixed_point(f, a, x0, tol=1e-13):
    """x = f(a, x) by iteration, on plain values."""
    x, prev = f(a, x0), x0
    while np.max(np.abs(x - prev)) > tol:
        x, prev = f(a, x), x
    return np.asarray(tg.tensor(x).numpy() if isinstance(x, tg.Tensor) else x)


def _fixed_point_vjp(ans, f, a, x0, tol=1e-13):
    # at x* = f(a, x*): dx*/da^T g = (df/da)^T w with w = g + (df/dx)^T w, itself a
    # fixed point, found by iterating the VJP of f in x
    def w_of(g):
        _, vjp_x = tg.vjp(lambda x: f(a, x), ans)
        w = fixed_point(lambda g_, w_: g_ + vjp_x(w_)[0], g, np.zeros_like(np.asarray(g)))
        _, vjp_a = tg.vjp(lambda a_: f(a_, ans), a)
        return vjp_a(w)[0]

    return w_of


defvjp(fixed_point, None, _fixed_point_vjp, None, argnums=(0, 1, 2))


def test_fixed_point_with_a_custom_vjp():
    """HIPS autograd's fixed_point example: Newton's iteration for sqrt(a), whose
    gradient 1 / (2 sqrt a) comes from the implicit rule, not the iterations."""

    def newton(a, x):
        return 0.5 * (x + a / x)

    a = np.array([2.0, 9.0, 0.5])
    root = fixed_point(newton, a, np.ones(3))
    np.testing.assert_allclose(root, np.sqrt(a), rtol=1e-12)
    g = tg.grad(lambda a: tnp.sum(fixed_point(newton, a, np.ones(3))))(a)
    np.testing.assert_allclose(g, 0.5 / np.sqrt(a), rtol=1e-10)


# --- what must not pass quietly ---------------------------------------------------------------


def test_missing_rule_raises_naming_the_primitive():
    @primitive
    def twice(x, y):
        return 2 * x + y

    defvjp(twice, lambda ans, x, y: lambda g: 2 * g)  # none for y
    x, y = tg.tensor(1.0, requires_grad=True), tg.tensor(2.0, requires_grad=True)
    with pytest.raises(NotImplementedError, match=r"primitive twice: no rule for argument 1"):
        twice(x, y).backward()
    with pytest.raises(NotImplementedError, match=r"forward mode through primitive twice"):
        tg.jvp(lambda x: twice(x, 2.0), (1.0,), (1.0,))


def test_tensor_in_a_container_or_keyword_raises():
    @primitive
    def total(xs, scale=1.0):
        return scale * np.sum(np.asarray(xs))

    w = tg.tensor(1.0, requires_grad=True)
    with pytest.raises(TypeError, match=r"primitive total: argument 0 holds a tensor"):
        total([w, w])
    with pytest.raises(TypeError, match=r"keyword argument 'scale'"):
        total(np.ones(2), scale=w)


def test_tensor_read_from_a_closure_raises():
    w = tg.tensor(2.0, requires_grad=True)

    @primitive
    def leaky(x):
        return x * w  # w's gradient would be lost

    with pytest.raises(RuntimeError, match=r"primitive leaky reads a tensor that requires grad"):
        leaky(tg.tensor(np.ones(2), requires_grad=True))


def test_wrong_gradient_shape_raises_at_second_order():
    @primitive
    def bad(x):
        return np.sum(x**2)

    defvjp(bad, lambda ans, x: lambda g: tnp.ones(5) * g)
    with pytest.raises(RuntimeError, match=r"bad|shape"):
        tg.hessian(bad)(np.ones(3))


def test_compile_captures_a_primitive():
    """Its forward runs again on every replay (tests/test_compile_custom.py has more)."""
    step = tg.compile(lambda x: logsumexp(x))
    for x in (np.ones(3), np.array([0.5, -1.0, 2.0])):
        t = tg.tensor(x, requires_grad=True)
        step(t).backward()
        np.testing.assert_allclose(t.grad, np.exp(x - lse_plain(x)), rtol=1e-12)
    assert step.stats["captures"] == 1


def test_definition_errors():
    with pytest.raises(TypeError, match="expected a primitive"):
        defvjp(lse_plain, lambda ans, x: lambda g: g)
    with pytest.raises(ValueError, match="distinct non-negative argument position per rule"):
        defvjp(logsumexp, lambda ans, x: lambda g: g, argnums=(0, 1))
    with pytest.raises(TypeError, match="callable or None"):
        defjvp(logsumexp, 3.0)
    with pytest.raises(TypeError, match="expected a function"):
        primitive(3)


def test_threads_each_get_their_own_gradient():
    xs = [RNG.standard_normal(4) for _ in range(6)]
    out: dict[int, np.ndarray] = {}

    def work(i):
        out[i] = tg.hessian(logsumexp)(xs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, x in enumerate(xs):
        p = np.exp(x - lse_plain(x))
        np.testing.assert_allclose(out[i], np.diag(p) - np.outer(p, p), rtol=1e-10, atol=1e-12)


def test_inside_a_checkpoint_at_second_order():
    x = RNG.standard_normal(3)

    def f(v):
        return tg.checkpoint(lambda u: logsumexp(u) ** 2, v)

    fd = central(lambda v: tg.grad(f)(v), x)
    np.testing.assert_allclose(tg.hessian(f)(x), fd, rtol=1e-6, atol=1e-8)


# --- what a hostile reading found: state shared with the forward ---------------------------


@primitive
def lse_in_place(x):
    m = np.max(x)
    x -= m  # NumPy's idiom: the forward works in place on its input
    return m + np.log(np.sum(np.exp(x)))


defvjp(lse_in_place, lambda ans, x: lambda g: g * tnp.exp(x - ans))
defjvp(lse_in_place, lambda t, ans, x: tnp.sum(t * tnp.exp(x - ans)))


def test_a_forward_that_writes_its_input_leaves_the_rules_the_values_called_with():
    x = RNG.standard_normal(3)
    p = np.exp(x - lse_plain(x))
    np.testing.assert_allclose(tg.grad(lse_in_place)(x.copy()), p, rtol=1e-12)
    assert tg.jvp(lse_in_place, (x.copy(),), (np.ones(3),))[1] == pytest.approx(1.0)
    t = tg.tensor(x, requires_grad=True)
    lse_in_place(t).backward()
    np.testing.assert_allclose(t.grad, p, rtol=1e-12)
    np.testing.assert_allclose(
        tg.hessian(lse_in_place)(x.copy()), np.diag(p) - np.outer(p, p), atol=1e-12
    )


_BUFFER = np.zeros(3)


@primitive
def exp_into_buffer(x):
    return np.exp(x, out=_BUFFER)  # a reused output buffer


defvjp(exp_into_buffer, lambda ans, x: lambda g: g * ans)
defjvp(exp_into_buffer, lambda t, ans, x: t * ans)


def test_a_forward_that_reuses_an_output_buffer_leaves_each_call_its_own_answer():
    x = np.array([0.1, 0.5, -0.3])
    t = tg.tensor(x, requires_grad=True)
    y = exp_into_buffer(t)
    exp_into_buffer(tg.tensor(np.full(3, -5.0)))  # overwrites the buffer
    tnp.sum(y).backward()
    np.testing.assert_allclose(t.grad, np.exp(x), rtol=1e-12)


def test_a_constant_array_argument_is_kept_as_it_was_at_the_call():
    @primitive
    def mul(x, w):
        return x * w

    defvjp(mul, lambda ans, x, w: lambda g: g * w, None)
    w = np.array([10.0, 20.0, 30.0])
    x = tg.tensor(np.ones(3), requires_grad=True)
    y = mul(x, w)
    w[:] = 0.0  # changed after the call, before the backward (as x * w would allow)
    tnp.sum(y).backward()
    np.testing.assert_allclose(x.grad, [10.0, 20.0, 30.0])


def test_returning_an_outside_tensor_that_requires_grad_raises():
    w = tg.tensor(np.ones(2), requires_grad=True)

    @primitive
    def passes_w(x):
        return x * 2.0, w

    with pytest.raises(RuntimeError, match=r"primitive passes_w returns a tensor that requires"):
        passes_w(tg.tensor(np.ones(2), requires_grad=True))


def test_argnums_must_name_distinct_positions():
    @primitive
    def f(x, y):
        return x * y

    with pytest.raises(ValueError, match="distinct non-negative"):
        defvjp(
            f, lambda ans, x, y: lambda g: g * y, lambda ans, x, y: lambda g: g * x, argnums=(0, 0)
        )
    with pytest.raises(ValueError, match="distinct non-negative"):
        defvjp(f, lambda ans, x, y: lambda g: g * y, argnums=(True,))
    defvjp(f, lambda ans, x, y: lambda g: g * x, argnums=1)  # one int, NumPy ints too
    defvjp(f, lambda ans, x, y: lambda g: g * y, argnums=(np.int64(0),))
    gx, gy = tg.grad(f, argnums=(0, 1))(3.0, 4.0)
    assert (gx, gy) == (4.0, 3.0)


@pytest.mark.parametrize(
    "rule, match",
    [
        (lambda t, ans, x: tnp.sum(3 * t), r"tangent of output 0 has shape \(\), expected \(3,\)"),
        (lambda t, ans, x: (3 * t,), r"returned a tuple for the tangent of output 0"),
        (lambda t, ans, x: None, r"returned None for the tangent of output 0"),
    ],
)
def test_a_tangent_of_another_shape_raises(rule, match):
    @primitive
    def triple(x):
        return 3 * x

    defjvp(triple, rule)
    with pytest.raises(RuntimeError, match=match):
        tg.jacfwd(triple)(np.ones(3))


@pytest.mark.parametrize(
    "maker, match",
    [
        (
            lambda ans, x: lambda g: tnp.ones(5) * tnp.sum(g),
            r"primitive bad: the gradient of argument 0 has shape \(5,\)",
        ),
        (lambda ans, x: lambda g: None, r"primitive bad: a rule returned None"),
        (lambda ans, x: lambda g: (3 * g,), r"primitive bad: a rule returned a tuple"),
    ],
)
def test_a_gradient_of_another_shape_raises_naming_the_primitive_at_every_order(maker, match):
    @primitive
    def bad(x):
        return 3 * x

    defvjp(bad, maker)
    t = tg.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(RuntimeError, match=match):
        tnp.sum(bad(t)).backward()
    with pytest.raises(RuntimeError, match=match):
        tg.hessian(lambda v: tnp.sum(bad(v) ** 2))(np.ones(3))


def test_anomaly_mode_names_the_primitive():
    @primitive
    def log_of(x):
        return np.log(x)

    defvjp(log_of, lambda ans, x: lambda g: g / x)
    t = tg.tensor(np.array([0.0, 1.0]), requires_grad=True)
    with tg.detect_anomaly(), pytest.raises(RuntimeError, match=r"primitive log_of"):
        tnp.sum(log_of(t) * 0.0 + log_of(t)).backward()


def test_a_call_without_tensors_still_refuses_a_closure_that_requires_grad():
    """No node is recorded when no argument is a tensor; a tensor that requires grad
    read from outside would lose its gradient all the same."""

    @primitive
    def shifted(x):
        return x + W

    defvjp(shifted, lambda ans, x: lambda g: g)
    W = tg.tensor(np.ones(2), requires_grad=True)
    with pytest.raises(RuntimeError, match=r"primitive shifted reads a tensor that requires"):
        shifted(np.zeros(2))
    with pytest.raises(RuntimeError, match=r"primitive shifted reads a tensor that requires"):
        tg.grad(lambda w: tnp.sum(shifted(np.zeros(2))) + tnp.sum(w))(np.ones(2))
    W = np.ones(2)  # a plain value from outside is a constant, as ever
    np.testing.assert_array_equal(shifted(np.zeros(2)), np.ones(2))
