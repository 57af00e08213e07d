"""Higher order and forward mode, generated from the op table: for every case of every
differentiable row,

* the recorded backward (``create_graph``) gives the compiled backward's gradient;
* second order: the gradient of ``<VJP(x), w>`` against central differences of the
  compiled VJP (HIPS autograd's ``check_grads(order=2)``);
* forward mode: the JVP against central differences of ``f``;
* both modes agree: ``<u, J v>`` by JVP equals ``<J^T u, v>`` by VJP.
"""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads

from .custom_ops import Cube
from .helpers import numeric_grad
from .optable_cases import cases

# rows differentiable to first order only in some arguments (their cases differentiate
# all): betainc in a and b (the compiled kernel's differentiated continued fraction);
# its second order in x and the refusal in a, b: tests/test_special_functions.py
FIRST_ORDER_ONLY = {"betainc"}
DIFFERENTIABLE = [
    c
    for c in cases()
    if c.op.differentiable
    and c.op.name not in FIRST_ORDER_ONLY
    and not c.label.endswith("first order")  # gammainc in a: the same, case by case
]


def _rng(case, k: int) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(f"{case.id} {k}".encode()))


def _f(case):
    return lambda *xs: case.f(tnp, *xs)


def _values(case, args) -> np.ndarray:
    return np.asarray(case.f(np, *args), dtype=np.float64)


def _close(a: float, b: float, scale: float, rtol: float = 1e-6) -> bool:
    return abs(a - b) <= rtol * max(abs(a), abs(b)) + 1e-7 * max(1.0, scale)


@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=lambda c: c.id)
def test_recorded_backward_matches_compiled(case):
    args = case.args()
    rng = _rng(case, 0)
    out = case.f(np, *args)
    u = rng.standard_normal(np.shape(out))
    _, pull = tg.vjp(_f(case), *args)
    compiled = pull(u)
    leaves = [tg.tensor(a, requires_grad=True) for a in args]
    case.f(tnp, *leaves).backward(gradient=u, create_graph=True)
    for leaf, want in zip(leaves, compiled, strict=True):
        got = leaf.grad
        assert isinstance(got, tg.Tensor) or got is None
        got = np.zeros_like(want) if got is None else got.numpy()
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=lambda c: c.id)
def test_second_order_against_central_differences(case):
    args = case.args()
    n = len(args)
    rng = _rng(case, 1)
    u = rng.standard_normal(np.shape(case.f(np, *args)))
    ws = [rng.standard_normal(a.shape) for a in args]
    ds = [rng.standard_normal(a.shape) for a in args]
    nums = tuple(range(n))

    def pulled(*xs):
        """<J(x)^T u, w>: a scalar whose gradient is second order in f."""
        gs = tg.grad(lambda *ys: tnp.sum(case.f(tnp, *ys) * u), nums)(*xs)
        total = 0.0
        for g, w in zip(gs, ws):
            total = total + tnp.sum(g * w)
        return total

    with warnings.catch_warnings():
        # a row linear in an argument has a gradient independent of it: zero, warned
        warnings.simplefilter("ignore", UserWarning)
        second = tg.grad(pulled, nums)(*args)
    analytic = sum(float(np.vdot(g, d)) for g, d in zip(second, ds))
    eps = 1e-5

    def at(step: float) -> float:
        moved = [a + step * d for a, d in zip(args, ds)]
        gs = tg.grad(lambda *ys: tnp.sum(case.f(tnp, *ys) * u), nums)(*moved)
        return sum(float(np.vdot(g, w)) for g, w in zip(gs, ws))

    numeric = (at(eps) - at(-eps)) / (2 * eps)
    scale = max(abs(at(0.0)), 1.0)
    assert _close(analytic, numeric, scale, rtol=1e-5), (analytic, numeric)


@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=lambda c: c.id)
def test_forward_mode_against_central_differences(case):
    args = case.args()
    rng = _rng(case, 2)
    ds = [rng.standard_normal(a.shape) for a in args]
    out, tangent = tg.jvp(_f(case), args, ds)
    np.testing.assert_allclose(out, _values(case, args), rtol=1e-12, atol=1e-12)
    if case.check:  # a case with its own step (rounding inside): the projected check
        check_grads(_f(case), args, modes=("fwd",), **case.check)
        return
    eps = 1e-6
    hi = _values(case, [a + eps * d for a, d in zip(args, ds)])
    lo = _values(case, [a - eps * d for a, d in zip(args, ds)])
    numeric = (hi - lo) / (2 * eps)
    scale = max(1.0, float(np.max(np.abs(_values(case, args)), initial=0.0)))
    assert tangent.shape == numeric.shape
    np.testing.assert_allclose(tangent, numeric, rtol=1e-5, atol=1e-7 * scale)


@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=lambda c: c.id)
def test_forward_and_reverse_agree(case):
    args = case.args()
    rng = _rng(case, 3)
    vs = [rng.standard_normal(a.shape) for a in args]
    out, jv = tg.jvp(_f(case), args, vs)
    u = rng.standard_normal(np.shape(out))
    _, pull = tg.vjp(_f(case), *args)
    jtu = pull(u)
    left = float(np.vdot(u, jv))
    right = sum(float(np.vdot(g, v)) for g, v in zip(jtu, vs))
    assert _close(left, right, max(abs(left), 1.0), rtol=1e-9), (left, right)


# --- composition and nesting ---------------------------------------------------------------


def cube_sum(x):
    return tnp.sum(x**3)


@pytest.mark.parametrize(
    ("f", "third"),
    [
        (tnp.sin, lambda x: -np.cos(x)),
        (tnp.exp, np.exp),
        (lambda x: x**4, lambda x: 24 * x),
        (tnp.log, lambda x: 2 / x**3),
        (tnp.tanh, lambda x: -2 * (1 - np.tanh(x) ** 2) * (1 - 3 * np.tanh(x) ** 2)),
        (
            lambda x: tnp.arctan(x) * x,
            lambda x: -4 * x / (1 + x**2) ** 2 - 4 * x * (1 - x**2) / (1 + x**2) ** 3,
        ),
    ],
)
def test_third_order_of_scalar_functions(f, third):
    x = 0.7
    got = tg.grad(tg.grad(tg.grad(f)))(x)
    np.testing.assert_allclose(got, third(x), rtol=1e-10)


def test_grad_of_grad_and_of_a_loss_of_the_gradient():
    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(tg.grad(tg.grad(lambda s: s**3))(1.5), 9.0)
    # d/dx sum((3x^2)^2) = 36 x^3
    got = tg.grad(lambda v: tnp.sum(tg.grad(cube_sum)(v) ** 2))(x)
    np.testing.assert_allclose(got, 36 * x**3)


def test_inner_transforms_on_outer_variables():
    # d/dr [d/da (a b)](r, 2r) = d/dr 2r = 2
    assert tg.grad(lambda r: tg.grad(lambda a, b: a * b)(r, 2 * r))(3.0) == pytest.approx(2.0)
    # a closure over the outer variable: d/dr [r * r] = 2r
    got = tg.grad(lambda r: tnp.sum(tg.grad(lambda a: a * r)(2.0) * r))(3.0)
    assert got == pytest.approx(6.0)


def test_no_perturbation_confusion():
    # d/dx [x * d/dy (x + y)] = d/dx x = 1 (2 if the inner derivative also saw x move)
    assert tg.grad(lambda x: x * tg.grad(lambda y: x + y)(x))(3.0) == pytest.approx(1.0)
    assert tg.grad(lambda x: x * tg.grad(lambda y: x * y)(x))(3.0) == pytest.approx(6.0)


def test_transform_of_an_eager_tensor_returns_a_tensor_in_its_graph():
    x = tg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    g = tg.grad(cube_sum)(x)
    assert isinstance(g, tg.Tensor) and g.requires_grad
    np.testing.assert_allclose(g.numpy(), 3 * x.numpy() ** 2)
    tnp.sum(g).backward()
    np.testing.assert_allclose(x.grad, 6 * x.numpy())
    # under no_grad the values only
    with tg.no_grad():
        plain = tg.grad(cube_sum)(x)
    assert isinstance(plain, np.ndarray)


def test_create_graph_with_hooks_and_retain_graph():
    x = tg.tensor(np.array([0.5, 1.5]), requires_grad=True)
    xv = x.numpy()
    y = tnp.sin(x)
    seen = []
    handle = y.register_hook(lambda g: seen.append(g) or g * 2.0)
    loss = tnp.sum(y**2)
    loss.backward(create_graph=True)
    assert isinstance(seen[0], tg.Tensor) and seen[0].requires_grad
    g = x.grad  # the hook doubles d loss / dy = 2 sin: 4 sin cos = 2 sin(2x)
    np.testing.assert_allclose(g.numpy(), 2 * np.sin(2 * xv))
    # the graph is kept: a second create_graph backward accumulates into .grad
    loss.backward(create_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), 4 * np.sin(2 * xv))
    # g = 4 y cos(x) reaches y again: the hook doubles what flows into y, as in PyTorch
    x.grad = None
    tnp.sum(g).backward(retain_graph=True)
    np.testing.assert_allclose(x.grad, 8 * np.cos(xv) ** 2 - 4 * np.sin(xv) ** 2)
    handle.remove()
    x.grad = None
    tnp.sum(g).backward()
    np.testing.assert_allclose(x.grad, 4 * np.cos(2 * xv))
    assert len(seen) == 3


def test_create_graph_refuses_what_it_cannot_record():
    x = tg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    with pytest.raises(NotImplementedError, match="custom function 'Cube'"):
        tnp.sum(Cube.apply(x)).backward(create_graph=True)
    with pytest.raises(NotImplementedError, match="custom function 'Cube'"):
        tg.hessian(lambda v: tnp.sum(Cube.apply(v)))(np.ones(2))
    # a freed graph
    y = tnp.sum(tnp.exp(x))
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward(create_graph=True)


def test_create_graph_sees_in_place_changes():
    x = tg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = tnp.exp(x)  # exp's derivative reads its output
    y += 1
    with pytest.raises(RuntimeError, match="modified by an in-place operation: 'exp'"):
        tnp.sum(y).backward(create_graph=True)
    with pytest.raises(RuntimeError, match="modified by an in-place operation: 'exp'"):
        tg.jvp(lambda v: _inplace_exp(v), (np.ones(2),), (np.ones(2),))


def _inplace_exp(v):
    y = tnp.exp(v)
    y += 1
    return y


def test_float32_stays_float32_at_second_order():
    x = np.array([0.3, 0.9], np.float32)
    f = lambda v: tnp.sum(tnp.tanh(v) * v**2)  # noqa: E731
    h = tg.hessian(f)(x)
    assert h.dtype == np.float32
    np.testing.assert_allclose(h, tg.hessian(f)(x.astype(np.float64)), rtol=1e-4, atol=1e-5)
    _, t = tg.jvp(f, (x,), (np.ones(2, np.float32),))
    assert t.dtype == np.float32


def test_higher_order_in_threads():
    from .helpers import run_in_threads

    results = {}

    def work(k):
        x = np.array([0.1 * (k + 1), 0.5])
        results[k] = (x, tg.hessian(lambda v: tnp.sum(tnp.sin(v) * v))(x))

    run_in_threads(work)
    for x, h in results.values():
        np.testing.assert_allclose(h, np.diag(2 * np.cos(x) - x * np.sin(x)), atol=1e-12)


# --- Hessians -------------------------------------------------------------------------------


def test_hessian_of_a_quadratic_form_is_exact():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 5))
    x = rng.standard_normal(5)
    h = tg.hessian(lambda v: v @ (a @ v) * 0.5)(x)
    np.testing.assert_allclose(h, 0.5 * (a + a.T), rtol=1e-14, atol=1e-14)
    v = rng.standard_normal(5)
    np.testing.assert_allclose(tg.hvp(lambda v: v @ (a @ v) * 0.5, x, v), 0.5 * (a + a.T) @ v)


def rosenbrock(x):
    return tnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def rosenbrock_hessian(x):
    n = x.size
    h = np.zeros((n, n))
    for i in range(n - 1):
        h[i, i] += 1200 * x[i] ** 2 - 400 * x[i + 1] + 2
        h[i + 1, i + 1] += 200
        h[i, i + 1] = h[i + 1, i] = -400 * x[i]
    return h


def test_hessian_of_rosenbrock_and_hvp():
    x = np.array([0.3, -0.7, 1.2, 0.9, 1.1])
    np.testing.assert_allclose(tg.hessian(rosenbrock)(x), rosenbrock_hessian(x), rtol=1e-12)
    v = np.arange(5.0)
    np.testing.assert_allclose(tg.hvp(rosenbrock, x, v), rosenbrock_hessian(x) @ v, rtol=1e-12)
    _, fwd = tg.jvp(tg.grad(rosenbrock), (x,), (v,))  # forward over reverse
    np.testing.assert_allclose(fwd, rosenbrock_hessian(x) @ v, rtol=1e-12)
    np.testing.assert_allclose(tg.jacfwd(tg.grad(rosenbrock))(x), rosenbrock_hessian(x))


def lennard_jones(flat):
    x = tnp.reshape(flat, (-1, 3))
    n = x.shape[0]
    d = x[:, None, :] - x[None, :, :]
    r2 = tnp.sum(d * d, axis=-1) + np.eye(n)
    inv6 = (1.0 / r2) ** 3
    return 2.0 * tnp.sum((inv6 * inv6 - inv6) * (1.0 - np.eye(n)))


def test_hessian_of_lennard_jones_against_differences_of_forces():
    rng = np.random.default_rng(3)
    grid = np.stack(np.meshgrid(*[np.arange(2.0)] * 3), -1).reshape(-1, 3) * 1.1
    flat = (grid + 0.05 * rng.standard_normal(grid.shape)).ravel()
    h = tg.hessian(lennard_jones)(flat)
    forces = tg.grad(lennard_jones)
    eps = 1e-6
    numeric = np.stack(
        [(forces(flat + eps * e) - forces(flat - eps * e)) / (2 * eps) for e in np.eye(flat.size)],
        axis=1,
    )
    scale = np.max(np.abs(h))
    np.testing.assert_allclose(h, numeric, atol=1e-6 * scale)
    np.testing.assert_allclose(h, h.T, atol=1e-12 * scale)


def test_hessian_and_hvp_of_pytree_arguments():
    def f(p):
        return tnp.sum(p["w"] ** 2 * p["b"]) + tnp.sum(tnp.sin(p["b"]))

    p = {"w": np.array([1.0, 2.0]), "b": np.array(0.5)}
    h = tg.hessian(f)(p)
    w, b = p["w"], p["b"]
    np.testing.assert_allclose(h["w"]["w"], np.diag(2 * b * np.ones(2)))
    np.testing.assert_allclose(h["w"]["b"], 2 * w)
    np.testing.assert_allclose(h["b"]["w"], 2 * w)
    np.testing.assert_allclose(h["b"]["b"], -np.sin(b))
    v = {"w": np.array([1.0, -1.0]), "b": np.array(2.0)}
    hv = tg.hvp(f, p, v)
    np.testing.assert_allclose(hv["w"], 2 * b * v["w"] + 2 * w * v["b"])
    np.testing.assert_allclose(hv["b"], 2 * w @ v["w"] - np.sin(b) * v["b"])
    # a tuple of arguments
    h2 = tg.hessian(lambda a, c: tnp.sum(a * c * c), argnums=(0, 1))(np.ones(2), np.ones(2))
    np.testing.assert_allclose(h2[0][1], 2 * np.eye(2))
    np.testing.assert_allclose(h2[1][1], 2 * np.eye(2))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch's own, on import
def test_hessian_matches_torch():
    torch = pytest.importorskip("torch", exc_type=ImportError)
    rng = np.random.default_rng(5)
    w = rng.standard_normal((4, 6))
    x = rng.standard_normal(6)
    f = lambda v: tnp.sum(tnp.tanh(w @ v) ** 2) + tnp.sum(v**4)  # noqa: E731
    g = lambda v: torch.sum(torch.tanh(torch.tensor(w) @ v) ** 2) + torch.sum(v**4)  # noqa: E731
    want = torch.func.hessian(g)(torch.tensor(x)).numpy()
    np.testing.assert_allclose(tg.hessian(f)(x), want, rtol=1e-12, atol=1e-12)


# --- forward mode ----------------------------------------------------------------------------


def test_jvp_pytrees_and_jacfwd():
    def f(p, x):
        return {"y": tnp.tanh(p["a"] * x), "z": tnp.sum(p["b"] * x)}

    p = {"a": np.array([0.5, 1.0]), "b": np.array([2.0, -1.0])}
    x = np.array([0.3, 0.4])
    tp = {"a": np.array([1.0, 0.0]), "b": np.array([0.0, 1.0])}
    tx = np.array([0.5, 0.5])
    out, t = tg.jvp(f, (p, x), (tp, tx))
    np.testing.assert_allclose(out["y"], np.tanh(p["a"] * x))
    d = 1 - np.tanh(p["a"] * x) ** 2
    np.testing.assert_allclose(t["y"], d * (tp["a"] * x + p["a"] * tx))
    np.testing.assert_allclose(t["z"], tp["b"] @ x + p["b"] @ tx)
    m = np.arange(6.0).reshape(2, 3)
    fn = lambda v: tnp.sin(m @ v)  # noqa: E731
    np.testing.assert_allclose(tg.jacfwd(fn)(np.ones(3)), tg.jacrev(fn)(np.ones(3)))
    with pytest.raises(ValueError, match=r"jvp: tangent 0 of shape \(2,\) for a primal of shape"):
        tg.jvp(fn, (np.ones(3),), (np.ones(2),))


@pytest.mark.parametrize(
    ("tangent", "message"),
    [
        (np.ones(3) * (1 + 1j), r"complex values \(dtype complex128\)"),
        (np.array([1.0, None, 2.0], dtype=object), r"values of dtype object, not real numbers"),
        (np.array(["a", "b", "c"]), r"values of dtype <U1, not real numbers"),
    ],
    ids=["complex", "object", "str"],
)
def test_jvp_refuses_tangents_that_are_not_real_numbers(tangent, message):
    """A complex tangent lost its imaginary part with only a ComplexWarning, and None in
    an object array became nan; now a TypeError, before ``f`` runs."""
    calls = []

    def f(v):
        calls.append(1)
        return v * 2.0

    x = tg.tensor(np.ones(3), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for primal in (np.ones(3), x):  # plain and recorded mode
            with pytest.raises(TypeError, match=r"jvp: tangent 0 holds " + message):
                tg.jvp(f, (primal,), (tangent,))
    assert not calls and x.grad is None
    assert tg.jvp(f, (np.ones(3),), (np.array([1, 0, 2]),))[1].tolist() == [2.0, 0.0, 4.0]


class CubeJvp(Cube):
    """custom_ops.Cube with a tangent rule."""

    @staticmethod
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * t


def test_jvp_through_custom_functions():
    x = np.array([1.0, 2.0])
    _, t = tg.jvp(lambda v: CubeJvp.apply(v) * 2.0, (x,), (np.ones(2),))
    np.testing.assert_allclose(t, 6 * x**2)
    with pytest.raises(NotImplementedError, match="Cube: it defines no jvp"):
        tg.jvp(Cube.apply, (x,), (np.ones(2),))


def test_jvp_refuses_a_closure_that_requires_grad():
    w = tg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    with pytest.raises(RuntimeError, match="not one of the transform's arguments"):
        tg.jvp(lambda v: v * w, (np.ones(2),), (np.ones(2),))
    # as an argument it is in the graph
    _, t = tg.jvp(lambda v, c: v * c, (np.ones(2), w), (np.ones(2), np.zeros(2)))
    tnp.sum(t).backward()
    np.testing.assert_allclose(w.grad, [1.0, 1.0])


# --- checkpointing ---------------------------------------------------------------------------


def _step(y, k):
    return y + 0.01 * tnp.tanh(k * y) * tnp.cos(y)


def _trajectory(y0, k, steps, every):
    y = y0
    for i in range(0, steps, every):
        n = min(every, steps - i)

        def block(y, k, n=n):
            for _ in range(n):
                y = _step(y, k)
            return y

        y = tg.checkpoint(block, y, k) if every > 1 else block(y, k)
    return tnp.sum(y**2)


def test_checkpoint_gradients_equal_and_memory_falls():
    import threading
    import tracemalloc

    y0 = np.linspace(0.1, 1.0, 2000)
    grads, peaks = {}, {}

    def run(every):
        # a thread of its own: fresh tapes, so tracemalloc sees every allocation
        y = tg.tensor(y0, requires_grad=True)
        k = tg.tensor(np.array(1.3), requires_grad=True)
        tracemalloc.start()
        _trajectory(y, k, 400, every).backward()
        peaks[every] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        grads[every] = (y.grad, k.grad)

    for every in (1, 50):
        t = threading.Thread(target=run, args=(every,))
        t.start()
        t.join()
    for a, b in zip(grads[1], grads[50]):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    # 400 steps kept against 400 / 50 checkpoints plus one block of 50 recomputed
    assert peaks[50] * 4 < peaks[1], peaks


def test_checkpoint_refuses_a_closure_that_requires_grad():
    k = tg.tensor(np.array(1.3), requires_grad=True)
    y = tg.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(RuntimeError, match="Pass it as an argument of checkpoint"):
        tg.checkpoint(lambda v: _step(v, k), y)


# --- checking and capture --------------------------------------------------------------------


def test_check_grads_in_both_modes_to_third_order():
    from tapegrad.testing import GradientCheckError, check_grads

    args = [np.array([0.3, 0.5]), np.array([1.2, 0.7])]
    check_grads(lambda x, y: tnp.sin(x) * y**2, args, order=3, modes=("fwd", "rev"))

    class WrongTangent(CubeJvp):
        @staticmethod
        def jvp(ctx, t):
            (x,) = ctx.saved_tensors
            return 2 * x**2 * t  # should be 3 x^2 t

    check_grads(WrongTangent.apply, [np.array([0.5, 1.5])], modes=("rev",))
    with pytest.raises(GradientCheckError, match="forward mode disagrees"):
        check_grads(WrongTangent.apply, [np.array([0.5, 1.5])], modes=("fwd",))
    with pytest.raises(ValueError, match="modes must be"):
        check_grads(tnp.sin, [np.ones(2)], modes=("backward",))


def test_compiled_hvp_replays_and_refuses_value_decisions():
    step = tg.compile(rosenbrock)
    rng = np.random.default_rng(0)
    for _ in range(3):
        x, v = rng.standard_normal(6), rng.standard_normal(6)
        np.testing.assert_allclose(step.hvp(x, v), rosenbrock_hessian(x) @ v, rtol=1e-12)
    assert step._hvp.stats["captures"] == 1 and step._hvp.stats["replays"] == 3
    two = tg.compile(lambda a, b: tnp.sum(a**2 * b), argnums=(0, 1))
    ha, hb = two.hvp(np.ones(2), np.full(2, 3.0), (np.ones(2), np.zeros(2)))
    np.testing.assert_allclose(ha, [6.0, 6.0])
    np.testing.assert_allclose(hb, [2.0, 2.0])
    with pytest.raises(NotImplementedError, match="cannot capture the recorded derivative of max"):
        tg.compile(lambda x: tnp.max(x**2)).hvp(np.arange(3.0), np.ones(3))


# --- found by attacking the features ---------------------------------------------------------


def _times_two_in_place(x):
    x *= 2.0
    return tnp.sum(x**2)  # 4 sum(x^2): gradient 8x, Hessian 8 I


def _setitem_argument(x):
    x[0] = x[1] ** 2
    return tnp.sum(x**3)  # x1^6 + x1^3 + x2^3


def test_in_place_ops_on_a_differentiated_argument():
    x0 = np.array([0.3, 1.2, 2.0])
    e0 = np.array([1.0, 0.0, 0.0])
    assert tg.jvp(_times_two_in_place, (x0,), (e0,))[1] == pytest.approx(8 * x0[0])
    np.testing.assert_allclose(tg.hessian(_times_two_in_place)(x0), 8 * np.eye(3))
    np.testing.assert_allclose(tg.hvp(_times_two_in_place, x0, e0), 8 * e0)
    np.testing.assert_allclose(tg.jacfwd(lambda x: (x.__imul__(3.0), x)[1])(x0), 3 * np.eye(3))
    got = tg.grad(_times_two_in_place)(tg.tensor(x0, requires_grad=True))
    np.testing.assert_allclose(got.numpy(), 8 * x0)
    assert tg.grad(tg.grad(lambda a: (a.__imul__(3.0), a**2)[1]))(1.0) == pytest.approx(18.0)
    want = np.array([0.0, 6 * x0[1] ** 5 + 3 * x0[1] ** 2, 3 * x0[2] ** 2])
    np.testing.assert_allclose(
        tg.grad(_setitem_argument)(tg.tensor(x0, requires_grad=True)).numpy(), want
    )
    _, t = tg.jvp(_setitem_argument, (x0,), (np.array([0.0, 1.0, 0.0]),))
    assert t == pytest.approx(want[1])
    h = tg.hessian(_setitem_argument)(x0)
    np.testing.assert_allclose(h[1], [0.0, 30 * x0[1] ** 4 + 6 * x0[1], 0.0])


def test_compiled_hvp_leaves_closed_over_parameters_alone():
    x = np.array([1.0, 2.0, 3.0])
    v = np.array([1.0, -2.0, 0.5])
    w = tg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    step = tg.compile(lambda x: tnp.sum(w * x**3))
    np.testing.assert_allclose(step.hvp(x, v), 6 * w.numpy() * x * v)
    assert w.grad is None
    step.value_and_grad(x)
    np.testing.assert_allclose(w.grad, x**3)


def test_hvp_checks_the_shape_of_v():
    f = lambda x: tnp.sum(x**3)  # noqa: E731
    with pytest.raises(ValueError, match=r"v has a part of shape \(2, 1\)"):
        tg.hvp(f, np.ones(2), np.ones((2, 1)))
    with pytest.raises(ValueError, match=r"v has a part of shape \(3,\)"):
        tg.compile(f).hvp(np.ones(1), np.ones(3))


def test_retain_grad_under_create_graph():
    x = tg.tensor(np.array([0.3, 1.2]), requires_grad=True)
    y = x**2
    y.retain_grad()
    tnp.sum(tnp.sin(y)).backward(create_graph=True)
    assert isinstance(y.grad, tg.Tensor)
    np.testing.assert_allclose(y.grad.numpy(), np.cos(x.numpy() ** 2))
    x.grad = None
    tnp.sum(y.grad).backward()  # d/dx sum(cos(x^2)) = -2x sin(x^2)
    np.testing.assert_allclose(x.grad, -2 * x.numpy() * np.sin(x.numpy() ** 2))


def test_forward_mode_under_no_grad_takes_the_values():
    x = tg.tensor(np.array([0.3, 1.2]), requires_grad=True)
    with tg.no_grad():
        _, t = tg.jvp(lambda v: tnp.sum(tnp.sin(v)), (x,), (np.ones(2),))
        jac = tg.jacfwd(tnp.sin)(x)
    assert t == pytest.approx(np.sum(np.cos(x.numpy())))
    np.testing.assert_allclose(jac, np.diag(np.cos(x.numpy())))


def test_a_recorded_vjp_after_its_graph_was_freed():
    x = tg.tensor(np.array([0.3, 1.2]), requires_grad=True)
    _, pull = tg.vjp(lambda v: tnp.sin(v) * v, x)
    tnp.sum(pull(np.ones(2))[0]).backward()
    tnp.sum(x * 2.0)  # the next op rewinds the tape
    with pytest.raises((RuntimeError, NotImplementedError), match=r"freed|handed it over"):
        pull(np.ones(2))


def test_checkpoint_replays_numpy_random_draws_and_refuses_a_generator():
    x = tg.tensor(np.array([0.3, 1.2, 2.0]), requires_grad=True)
    np.random.seed(3)  # noqa: NPY002
    draw = np.random.rand(3)  # noqa: NPY002
    np.random.seed(3)  # noqa: NPY002
    tg.checkpoint(lambda y: tnp.sum(y * y * np.random.rand(3)), x).backward()  # noqa: NPY002
    np.testing.assert_allclose(x.grad, 2 * x.numpy() * draw)
    rng = np.random.default_rng(0)
    y = tg.checkpoint(lambda y: tnp.sum(y * rng.random(3)), x)
    with pytest.raises(RuntimeError, match="different result than its forward"):
        y.backward()


def test_pinn_step_keeps_every_leaf_gradient_and_the_next_step_works():
    def step(a0):
        a = tg.tensor(np.array(a0), requires_grad=True)
        b = tg.tensor(np.array(0.4), requires_grad=True)
        x = tg.tensor(np.array(0.7), requires_grad=True)
        u = tnp.tanh(x * a) + b * x
        u.backward(create_graph=True)  # x.grad = du/dx, a tensor; a.grad, b.grad too
        du = x.grad
        a.grad = b.grad = None
        (du**2 + u**2).backward()  # x.grad keeps du's values plus this gradient
        return a.grad, b.grad, x.grad

    def loss(a, b, x):
        du = tg.grad(lambda x: tnp.tanh(x * a) + b * x)(x)
        return du**2 + (tnp.tanh(x * a) + b * x) ** 2

    for a0 in (1.3, -0.4):  # the second step records after the first one's backward
        ga, gb, gx = step(a0)
        want = tg.grad(loss, (0, 1, 2))(a0, 0.4, 0.7)
        assert ga == pytest.approx(want[0]) and gb == pytest.approx(want[1])
        du = (1 - np.tanh(0.7 * a0) ** 2) * a0 + 0.4
        assert isinstance(gx, np.ndarray) and gx == pytest.approx(du + want[2])


def test_create_graph_after_a_retained_backward():
    x = tg.tensor(np.array([0.3, 1.2]), requires_grad=True)
    y = tnp.sum(tnp.sin(x) * x**3)
    y.backward(retain_graph=True)
    first = x.grad.copy()
    y.backward(create_graph=True)
    assert isinstance(x.grad, tg.Tensor)
    np.testing.assert_allclose(x.grad.numpy(), 2 * first)


def test_a_plain_vjp_refuses_a_cotangent_that_requires_grad():
    _, pull = tg.vjp(lambda v: tnp.sin(v) * v, np.array([0.3, 1.2]))
    c = tg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    with pytest.raises(RuntimeError, match="cotangent requires grad"):
        pull(c)
    with pytest.raises(RuntimeError, match="cotangent requires grad"):
        tg.jacfwd(lambda c: pull(c)[0])(np.ones(2))


def test_check_grads_is_not_fooled_by_a_large_constant():
    from tapegrad.testing import GradientCheckError, check_grads

    class WrongSin(tg.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return np.sin(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 1.5 * g * np.cos(x)

    x0 = np.array([0.3, 1.2, 2.0])
    with pytest.raises(GradientCheckError, match="disagrees"):  # the constant cancels
        check_grads(lambda x: tnp.concatenate([WrongSin.apply(x), tnp.zeros(1) + 1e9]), [x0])
    with pytest.raises(GradientCheckError, match="inconclusive"):  # it cannot be told
        check_grads(lambda x: tnp.sum(WrongSin.apply(x)) + 1e9, [x0])
    check_grads(lambda x: tnp.concatenate([tnp.sin(x), tnp.zeros(1) + 1e9]), [x0])


# --- a reduction right after a broadcasting op, at second order ------------------------------
# A reduction's cotangent reaches the op before it broadcastable, not broadcast; an input
# broadcast by that op must count each of its copies (derivatives.sum_to).

C3 = np.array([0.1, 0.5, -0.3])


def _hessian_by_differences(f, x, eps=1e-5):
    """Central differences of the (trusted) first-order gradient."""
    x = np.asarray(x, float)
    g = tg.grad(f)
    cols = []
    for i in np.ndindex(x.shape):
        e = np.zeros(x.shape)
        e[i] = eps
        cols.append((np.asarray(g(x + e)) - np.asarray(g(x - e))).ravel() / (2 * eps))
    return np.array(cols).T.reshape(x.shape + x.shape)


def test_create_graph_counts_the_copies_of_a_broadcast_operand():
    x = tg.tensor(2.0, requires_grad=True)
    tnp.sum(x + C3).backward(create_graph=True)
    assert float(x.grad.detach()) == 3.0
    x = tg.tensor(np.array([2.0]), requires_grad=True)  # size 1, broadcast the same way
    tnp.mean(C3 - x).backward(create_graph=True)
    np.testing.assert_allclose(x.grad.detach().numpy(), [-1.0])


@pytest.mark.parametrize(
    "f, true",
    [
        (lambda m: tnp.sum(m + C3) ** 2, 18.0),
        (lambda m: tnp.mean(m - C3) ** 2, 2.0),
        (lambda m: tnp.sum(tnp.broadcast_to(m, (2, 3))) ** 2, 72.0),
        (lambda m: tnp.sum(tnp.where(C3 > 0, m, C3)) ** 2, 8.0),
        (lambda m: tnp.sum(tnp.where(C3 > 0, C3, m * m)) ** 2, None),
        (lambda m: tnp.sum(tnp.mod(m + 5.0 * C3, 7.0)) ** 2, 18.0),
    ],
)
def test_hessian_of_a_reduction_of_a_broadcast_scalar(f, true):
    h = float(np.asarray(tg.hessian(f)(0.7)))
    expect = float(_hessian_by_differences(f, 0.7)) if true is None else true
    assert abs(h - expect) <= 1e-6 * abs(expect), (h, expect)


def _gaussian_nll(p, y):
    mu, s = p[0], p[1]
    return tnp.sum(tnp.log(s) + 0.5 * ((y - mu) / s) ** 2)


def test_hessian_of_likelihoods_with_broadcast_parameters():
    rng = np.random.default_rng(7)
    y = rng.normal(1.0, 1.5, 20)
    p = np.array([0.9, 1.4])
    h = tg.hessian(lambda p: _gaussian_nll(p, y))(p)
    np.testing.assert_allclose(h, _hessian_by_differences(lambda p: _gaussian_nll(p, y), p), 1e-6)
    np.testing.assert_allclose(h, h.T, rtol=1e-12)
    # Poisson with a log-rate broadcast over the counts, and rows summed before squaring
    k = rng.poisson(3.0, 12).astype(float)

    def pois(p):
        return tnp.sum(tnp.exp(p[0] + 0.0 * k) - k * p[0]) + tnp.sum(p[1] - k) ** 2

    np.testing.assert_allclose(tg.hessian(pois)(p), _hessian_by_differences(pois, p), 1e-6)
    M = rng.standard_normal((4, 3))

    def rows(p):
        return tnp.sum(tnp.sum(M * p[0] + p[1], axis=1) ** 2)

    h = tg.hessian(rows)(p)
    np.testing.assert_allclose(h, h.T, rtol=1e-12)
    np.testing.assert_allclose(h, _hessian_by_differences(rows, p), 1e-6)


def test_compiled_hvp_and_forward_over_reverse_count_broadcast_copies():
    def f(m):
        return tnp.sum(m + C3) ** 2

    step = tg.compile(f)
    np.testing.assert_allclose(step.hvp(np.array(0.7), np.array(1.0)), 18.0)
    np.testing.assert_allclose(tg.hvp(f, np.array(0.7), np.array(1.0)), 18.0)
    np.testing.assert_allclose(tg.jacfwd(tg.grad(f))(0.7), 18.0)


def test_maml_outer_gradient_through_an_inner_step():
    # one inner gradient step on a slope and a 0-d bias broadcast over the data, then
    # the outer loss: d/dw of L(w - lr * dL_inner/dw) differentiates dL_inner/dw again
    rng = np.random.default_rng(1)
    xa, ya, xb, yb = (rng.standard_normal(6) for _ in range(4))

    def inner(a, b, x, y):  # (a prior on b, summed right after b's broadcast)
        return tnp.mean((a * x + b - y) ** 2) + 0.1 * tnp.mean(b - y) ** 2

    def outer(w):
        a, b = w[0], w[1]
        ga, gb = tg.grad(inner, argnums=(0, 1))(a, b, xa, ya)
        return inner(a - 0.1 * ga, b - 0.1 * gb, xb, yb)

    w = np.array([0.3, -0.2])
    np.testing.assert_allclose(tg.grad(outer)(w), numeric_grad(outer, w), rtol=1e-6)


def test_newton_maximum_likelihood_through_grad_of_grad():
    # HIPS autograd's negative_binomial_maxlike: the score in r at the profile p(r) =
    # sum(x) / sum(r + x), whose sum right after a broadcast of r is differentiated
    # twice by Newton's method (fprime=grad(f), fprime2=grad(grad(f)))
    from tapegrad.special import gammaln

    data = np.array([3.0, 7.0, 1.0, 4.0, 9.0, 2.0, 5.0, 0.0, 12.0])

    def loglike(r, p):
        return tnp.sum(
            gammaln(r + data)
            - gammaln(r)
            - gammaln(data + 1.0)
            + data * tnp.log(p)
            + r * tnp.log(1.0 - p)
        )

    def score(r):
        return tg.grad(loglike)(r, np.sum(data) / tnp.sum(r + data))

    def differences(f, r, eps=1e-5):
        return (float(f(r + eps)) - float(f(r - eps))) / (2 * eps)

    for r in (1.5, 3.0):
        d1 = tg.grad(score)
        assert abs(float(d1(r)) - differences(score, r)) <= 1e-6 * abs(float(d1(r)))
        d2 = float(tg.grad(tg.grad(score))(r))
        assert abs(d2 - differences(d1, r)) <= 1e-5 * abs(d2)


# --- found by the differential test against JAX (tests/test_jax_differential.py) -----------


def test_mixed_second_derivatives_where_a_select_guards_zero():
    # pow's d/dx and xlogy's d/dy select 0 where the product would be 0 * inf; only
    # there: at y == 0 (pow) or x == 0 (xlogy) alone, their derivative in the other
    # variable survives, and the Hessians are symmetric
    from tapegrad.special import xlog1py, xlogy

    def pw(p):
        return (1 + p[0] * p[0]) ** p[1]

    def xl(p):
        return xlogy(p[1], 1 + p[0] * p[0]) + xlog1py(p[1], p[0] * p[0])

    p = np.array([0.5, 0.0])
    for f in (pw, xl):
        h = tg.hessian(f)(p)
        np.testing.assert_allclose(h, _hessian_by_differences(f, p), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(h, h.T, rtol=1e-12)
    assert float(tg.grad(lambda y: tg.grad(lambda x: 0.0**y + x**y)(0.5))(0.0)) == 2.0


def test_einsum_broadcasts_a_summed_axis_of_length_1_with_gradients():
    x, y = np.array([-1.0, 0.5]), np.array([0.5])
    f = lambda a, b: tnp.einsum("...i,...i->...", a, b) ** 2  # noqa: E731
    gx, gy = tg.grad(f, argnums=(0, 1))(x, y)
    v = np.einsum("i,i->", x, y)
    np.testing.assert_allclose(gx, 2 * v * np.broadcast_to(y, x.shape))
    np.testing.assert_allclose(gy, [2 * v * x.sum()])


def test_compiled_forward_mode_through_logsumexp():
    # logsumexp shifts by its max, detached: forward mode never asks max for a tangent
    from tapegrad.special import logsumexp

    t = np.array([0.3, -1.0, 2.0])

    def directional(x):
        return tg.jvp(lambda v: logsumexp(v) ** 2, (x,), (t,))[1]

    step = tg.compile(directional)
    x = np.array([1.0, 0.5, -0.2])
    value, grad = step.value_and_grad(x)
    np.testing.assert_allclose(value, directional(x), rtol=1e-12)
    np.testing.assert_allclose(grad, numeric_grad(directional, x), rtol=1e-6)
