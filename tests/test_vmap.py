"""tg.vmap: against jax.vmap on random programs over every op family (values, gradients
of vmapped functions, per-example gradients), in_axes and out_axes, nesting, the
fallback loop, the refusals, and the ways a wrong number could slip out (branches on
batched values, closures, unbatched arguments under a gradient)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.special as tsp
from tapegrad import batching
from tapegrad.batching import BatchingError
from tapegrad.ops import ROWS, Kind

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jax.scipy.special as jsp  # noqa: E402

from . import jax_programs as jp  # noqa: E402

RNG = np.random.default_rng(0)


def close(got, want, rtol=1e-9, atol=1e-12):
    got = [np.asarray(g) for g in jax.tree_util.tree_leaves(got)]
    want = [np.asarray(w) for w in jax.tree_util.tree_leaves(want)]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


# --- against jax.vmap, program by program -----------------------------------------------
def _batch(program: jp.Program, seed: int):
    """Two examples per batched input (the program's two checked points: both inside
    every op's domain), some inputs unbatched."""
    xs = [np.asarray(x, np.float64) for x in program.inputs]
    xs2 = jp.second_point(xs)
    rng = np.random.default_rng(seed)
    axes = [int(rng.integers(0, 2)) == 0 or i == 0 for i in range(len(xs))]
    in_axes = []
    args = []
    for x, y, batched in zip(xs, xs2, axes):
        if not batched:
            in_axes.append(None)
            args.append(x)
            continue
        ax = int(rng.integers(0, x.ndim + 1))
        in_axes.append(ax)
        args.append(np.stack([x, y], axis=ax))
    return tuple(in_axes), args


# one program in four runs in CI (each tries its op first, so the four phases cover every
# op between them); all run with ``-m slow``
SEEDS = [s if s % 4 == 0 else pytest.param(s, marks=pytest.mark.slow) for s in range(len(jp.OPS))]


@pytest.mark.parametrize("seed", SEEDS)
def test_against_jax(seed):
    """The body (array-valued) vmapped, its loss's per-example gradients, and the
    gradient of a vmapped loss, against JAX's."""
    program = jp.generate(seed)
    case = program.case()
    in_axes, args = _batch(program, seed)
    nums = tuple(range(len(args)))

    def ours(fn):
        return lambda *a: fn(tnp, tsp, *a)

    def theirs(fn):
        return lambda *a: fn(jnp, jsp, *a)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # rows that loop say so
        got = tg.vmap(ours(case.body), in_axes)(*args)
        want = jax.vmap(theirs(case.body), in_axes)(*args)
        close(got, want)
        got = tg.vmap(tg.grad(ours(case.f), nums), in_axes)(*args)
        want = jax.vmap(jax.grad(theirs(case.f), nums), in_axes)(*args)
        close(got, want, rtol=1e-8)

        def total(fn, vmap, grad):
            return grad(lambda *a: vmap(fn, in_axes)(*a).sum(), nums)

        got = total(ours(case.f), tg.vmap, tg.grad)(*args)
        want = total(theirs(case.f), jax.vmap, jax.grad)(*args)
        close(got, want, rtol=1e-8)


# --- the rules ---------------------------------------------------------------------------
ELEMENTWISE = (Kind.UNARY, Kind.BINARY, Kind.COMPARE)


def test_every_row_has_a_rule_or_is_listed():
    """Each row batches by its family's rule, elementwise broadcasting, its composition
    of rows, or is listed as a loop, with the reason."""
    for op in ROWS:
        if op.kind in ELEMENTWISE or op.name in batching.RULES:
            continue
        if op.kind is Kind.COMPOSITE:
            assert op.name not in batching.LOOPED or op.name in batching.FALLBACK, op.name
            continue
        assert op.name in batching.FALLBACK, f"{op.name}: no batching rule, not listed"
    for name, reason in batching.FALLBACK.items():
        assert name in {op.name for op in ROWS} and reason


@pytest.mark.parametrize(
    "fn, axes",
    [
        (lambda x: tnp.sum(x, axis=1), 0),
        (lambda x: tnp.max(x, axis=-1, keepdims=True), 0),
        (lambda x: tnp.mean(x), 1),
        (lambda x: tnp.cumsum(x), 0),
        (lambda x: tnp.argmax(x), 0),
        (lambda x: tnp.sort(x, axis=0), 2),
        (lambda x: tnp.reshape(x, (-1,)), 0),
        (lambda x: tnp.transpose(x), 0),
        (lambda x: tnp.swapaxes(x, 0, 1), 1),
        (lambda x: tnp.moveaxis(x, 0, -1), 0),
        (lambda x: tnp.expand_dims(x, (0, 2)), 0),
        (lambda x: tnp.squeeze(x[:1]), 0),
        (lambda x: tnp.broadcast_to(x[0], (4, 3)), 0),
        (lambda x: x[1], 0),
        (lambda x: x[..., ::-1], 2),
        (lambda x: x[None, :, 1:], 0),
        (lambda x: x[np.array([1, 0, 1])], 0),
        (lambda x: x[None][np.array([0, 0]), :, np.array([0, 2])], 0),
        (lambda x: x[x.shape[0] - 1, np.array([True, False, True])], 0),
        (lambda x: tnp.concatenate([x, 2 * x], axis=-1), 0),
        (lambda x: tnp.concatenate([x, np.ones((2, 3))], axis=0), 0),
        (lambda x: tnp.stack([x, x**2], axis=1), 0),
        (lambda x: tnp.where(x > 0, x, 0.0), 0),
        (lambda x: tnp.clip(x, -0.5, 0.5), 0),
        (lambda x: tnp.roll(x, 1), 0),
        (lambda x: tnp.roll(x, -1, axis=1), 0),
        (lambda x: tnp.flip(x), 0),
        (lambda x: tnp.diff(x), 0),
        (lambda x: tnp.tril(x[:, :2] @ x[:, :2].T), 0),
        (lambda x: tnp.trace(x[:, :2]), 0),
        (lambda x: tnp.diagonal(x), 0),
        (lambda x: tnp.pad(x, 1), 0),
        (lambda x: tnp.split(x, 3, axis=1)[1], 0),
        (lambda x: tnp.take(x, [0, 2]), 0),
        (lambda x: tnp.ravel(x), 1),
        (lambda x: x.T @ x, 0),
        (lambda x: x @ x[0], 0),
        (lambda x: x[0] @ x.T, 0),
        (lambda x: x[0] @ x[1], 0),
        (lambda x: tnp.matmul(x[None], np.ones((3, 2))), 0),
        (lambda x: tnp.einsum("ij,kj->ik", x, x), 0),
        (lambda x: tnp.einsum("ij->", x), 0),
        (lambda x: tnp.einsum("...j,j", x, x[0]), 0),
        (lambda x: tnp.dot(x, x[0]), 0),
        (lambda x: tnp.dot(x.T, x), 0),
        (lambda x: tnp.inner(x, x), 0),
        (lambda x: tnp.outer(x[0], x[1]), 0),
        (lambda x: tnp.vdot(x, x), 0),
        (lambda x: tnp.tensordot(x, x, axes=([1], [1])), 0),
        (lambda x: tnp.linalg.norm(x), 0),
        (lambda x: tnp.linalg.norm(x, axis=1), 0),
        (lambda x: tnp.linalg.norm(x[0]), 0),
        (lambda x: tnp.linalg.inv(x[:, :2] @ x[:, :2].T + 3 * np.eye(2)), 0),
        (lambda x: tnp.linalg.det(x[:, :2]), 0),
        (lambda x: tnp.linalg.solve(x[:, :2] + 3 * np.eye(2), x[:, 2]), 0),
        (lambda x: tnp.linalg.solve(np.eye(2) * 2 + 1, x[:, :2]), 0),
        (lambda x: tnp.linalg.eigh(x[:, :2] @ x[:, :2].T + np.eye(2))[0], 0),
        (lambda x: tsp.logsumexp(x, axis=0), 0),
        (lambda x: tnp.var(x, axis=1, ddof=1), 0),
        (lambda x: tnp.std(x), 0),
        (lambda x: tnp.average(x, axis=1, weights=np.array([1.0, 2.0, 3.0])), 0),
        (lambda x: tnp.median(x), 0),
        (lambda x: tnp.repeat(x, 2, axis=1), 0),
        (lambda x: tnp.tile(x, (2, 1)), 0),
        (lambda x: tnp.rot90(x), 0),
        (lambda x: tnp.diag(x[0], 1), 0),
        (lambda x: tnp.atleast_3d(x), 0),
    ],
)
def test_rules_against_a_loop(fn, axes):
    """Each rule's result equals the per-example results stacked."""
    x = RNG.standard_normal((2, 2, 3))
    x = np.moveaxis(x, 0, axes)
    examples = np.moveaxis(x, axes, 0)
    got = tg.vmap(fn, in_axes=axes)(x)
    want = np.stack([np.asarray(tg.as_tensor(fn(e)).numpy()) for e in examples])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


# --- in_axes, out_axes, nesting ----------------------------------------------------------
def test_in_axes_and_out_axes_pytrees():
    params = {"w": RNG.standard_normal(3), "b": 0.5}
    xs = [RNG.standard_normal((3, 4)), RNG.standard_normal((4,))]

    def f(p, data):
        x, y = data
        return {"out": x * p["w"] + p["b"] * y, "s": tnp.sum(x)}

    in_axes = ({"w": None, "b": None}, [1, 0])
    got = tg.vmap(f, in_axes=in_axes, out_axes={"out": 1, "s": 0})(params, xs)
    want = jax.vmap(
        lambda p, d: {"out": d[0] * p["w"] + p["b"] * d[1], "s": jnp.sum(d[0])},
        in_axes=in_axes,
        out_axes={"out": 1, "s": 0},
    )(params, xs)
    close(got, want)


def test_unbatched_output_and_axis_size():
    out = tg.vmap(lambda x, c: c * 2.0, in_axes=(0, None))(np.ones(3), np.arange(2.0))
    np.testing.assert_array_equal(out, [[0.0, 2.0]] * 3)
    same = tg.vmap(lambda c: c + 1.0, in_axes=None, axis_size=2)(np.arange(3.0))
    assert same.shape == (2, 3)
    kept = tg.vmap(lambda x, c: (x, c), in_axes=(0, None), out_axes=(0, None))(np.ones(2), 5.0)
    assert kept[1] == 5.0
    with pytest.raises(ValueError, match="depends on the batch"):
        tg.vmap(lambda x: x, out_axes=None)(np.ones(2))


def test_nesting():
    x = RNG.standard_normal((2, 3, 4))
    W = RNG.standard_normal((4, 5))
    f = lambda v: tnp.tanh(v @ W) * tnp.sum(v)  # noqa: E731
    got = tg.vmap(tg.vmap(f))(x)
    want = jax.vmap(jax.vmap(lambda v: jnp.tanh(v @ W) * jnp.sum(v)))(x)
    close(got, want)
    got = tg.vmap(tg.vmap(f, in_axes=1), in_axes=2, out_axes=1)(x.transpose(1, 0, 2).copy().T)
    want = jax.vmap(
        jax.vmap(lambda v: jnp.tanh(v @ W) * jnp.sum(v), in_axes=1), in_axes=2, out_axes=1
    )(x.transpose(1, 0, 2).copy().T)
    close(got, want)
    # an outer batched value meets an inner one
    y = RNG.standard_normal((2, 4))
    got = tg.vmap(lambda a, b: tg.vmap(lambda c: c * b + tnp.sum(b))(a))(x, y)
    want = jax.vmap(lambda a, b: jax.vmap(lambda c: c * b + jnp.sum(b))(a))(x, y)
    close(got, want)


def test_bad_axes():
    with pytest.raises(ValueError, match="different batch sizes"):
        tg.vmap(lambda a, b: a + b)(np.ones(2), np.ones(3))
    with pytest.raises(ValueError, match="in_axes 2 is out of range"):
        tg.vmap(lambda a: a, in_axes=2)(np.ones((2, 2)))
    with pytest.raises(ValueError, match="in_axes has 1 entries for 2 arguments"):
        tg.vmap(lambda a, b: a, in_axes=(0,))(np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match="for a scalar argument"):
        tg.vmap(lambda a: a)(1.0)
    with pytest.raises(ValueError, match="give axis_size"):
        tg.vmap(lambda a: a, in_axes=None)(np.ones(2))


# --- gradients ---------------------------------------------------------------------------
def test_per_example_gradients():
    """vmap(grad(loss), in_axes=(None, 0, 0)): one gradient per example, for a shared
    parameter, against a loop of tg.grad and against JAX."""
    W1, W2 = RNG.standard_normal((3, 8)), RNG.standard_normal(8)
    X, y = RNG.standard_normal((6, 3)), RNG.standard_normal(6)

    def loss(params, x, t):
        a, b = params
        return (tnp.tanh(x @ a) @ b - t) ** 2

    got = tg.vmap(tg.grad(loss), in_axes=(None, 0, 0))((W1, W2), X, y)
    loop = [tg.grad(loss)((W1, W2), X[i], y[i]) for i in range(6)]
    for k in range(2):
        np.testing.assert_allclose(got[k], np.stack([g[k] for g in loop]), rtol=1e-12)
    want = jax.vmap(
        jax.grad(lambda p, x, t: (jnp.tanh(x @ p[0]) @ p[1] - t) ** 2), in_axes=(None, 0, 0)
    )((W1, W2), X, y)
    close(got, want)


def test_gradient_through_a_closure_inside_vmap():
    """A gradient with respect to an unbatched value, of a loss that reads the batch
    from the closure: per example, not summed over the batch."""
    W = RNG.standard_normal(3)
    X = RNG.standard_normal((4, 3))
    got = tg.vmap(lambda x: tg.grad(lambda w: tnp.sum(tnp.tanh(x * w)))(W))(X)
    np.testing.assert_allclose(got, X * (1 - np.tanh(X * W) ** 2), rtol=1e-12)


def test_value_and_grad_with_aux_and_second_order():
    X = RNG.standard_normal((4, 3))

    def f(x):
        return tnp.sum(x**3), x * 2

    (v, aux), g = tg.vmap(tg.value_and_grad(f, has_aux=True))(X)
    np.testing.assert_allclose(v, (X**3).sum(1))
    np.testing.assert_allclose(aux, 2 * X)
    np.testing.assert_allclose(g, 3 * X**2)
    h = tg.vmap(tg.grad(tg.grad(lambda x: x**3)))(np.arange(4.0))
    np.testing.assert_allclose(h, 6 * np.arange(4.0))


def test_grad_of_vmap_with_tensors():
    w = tg.tensor(RNG.standard_normal(3), requires_grad=True)
    X = RNG.standard_normal((5, 3))
    out = tg.vmap(lambda x: tnp.sin(x @ w))(X)
    assert isinstance(out, tg.Tensor) and out.requires_grad
    tnp.sum(out).backward()
    np.testing.assert_allclose(w.grad, (np.cos(X @ w.numpy())[:, None] * X).sum(0))


def test_compile_of_vmap():
    X = RNG.standard_normal((5, 3))
    step = tg.compile(lambda w: tnp.sum(tg.vmap(lambda x: tnp.tanh(x @ w))(X) ** 2))
    w = RNG.standard_normal(3)
    for _ in range(2):
        value, g = step.value_and_grad(w)
        np.testing.assert_allclose(value, np.sum(np.tanh(X @ w) ** 2))
        np.testing.assert_allclose(g, (2 * np.tanh(X @ w) * (1 - np.tanh(X @ w) ** 2)) @ X)
        w = w + 0.1


# --- what is refused, and the loop -------------------------------------------------------
def test_branches_and_conversions_raise():
    with pytest.raises(BatchingError, match=r"bool\(\) of a batched value"):
        tg.vmap(lambda x: x if x > 0 else -x)(np.arange(3.0))
    with pytest.raises(BatchingError, match=r"float\(\)"):
        tg.vmap(lambda x: float(x))(np.arange(3.0))
    with pytest.raises(BatchingError, match=r"np.asarray\(\)"):
        tg.vmap(lambda x: np.asarray(x))(np.arange(3.0))
    with pytest.raises(BatchingError, match="in place"):

        def assign(x):
            x[0] = 1.0
            return x

        tg.vmap(assign)(np.ones((2, 3)))


def test_transforms_without_a_batched_form_raise():
    for transform in (
        lambda f: tg.jacobian(f),
        lambda f: tg.hessian(lambda x: tnp.sum(f(x))),
        lambda f: tg.jacfwd(f),
    ):
        with pytest.raises(NotImplementedError, match=r"inside tg\.vmap is not supported"):
            tg.vmap(transform(tnp.sin))(np.ones((2, 3)))


def test_a_row_without_a_rule_loops_and_warns_once():
    x = RNG.standard_normal((3, 4))
    batching._warned.discard("convolve")
    with pytest.warns(RuntimeWarning, match="convolve has no batching rule"):
        got = tg.vmap(lambda v: tnp.convolve(v, np.array([1.0, -1.0])))(x)
    np.testing.assert_allclose(got, np.stack([np.convolve(v, [1.0, -1.0]) for v in x]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tg.vmap(lambda v: tnp.convolve(v, np.array([1.0, -1.0])))(x)  # warned once only


def test_plain_in_plain_out():
    out = tg.vmap(lambda x: tnp.sin(x) * 2)(np.arange(3.0))
    assert type(out) is np.ndarray
    out = tg.vmap(lambda x: tnp.sin(x) * 2)(tg.tensor(np.arange(3.0)))
    assert isinstance(out, tg.Tensor)


# --- from a hostile review -----------------------------------------------------------
@pytest.mark.parametrize(
    "key",
    [
        (1, slice(None), np.array([0, 2, 3, 1])),  # an int apart from an array: NumPy's
        (np.array([0, 2, 1]), slice(None), 4),  # advanced indices, separated
        (0, slice(None), [4, 1, 2]),
        (np.array([1, 0, 2]), 2, np.array([0, 3, 4])),  # an int between two arrays
        (Ellipsis, np.array([1, 0]), 1),
    ],
)
def test_indexing_with_ints_among_index_arrays(key):
    x = RNG.standard_normal((4, 3, 5, 5))
    got = tg.vmap(lambda v: v[key])(x)
    want = np.stack([v[key] for v in x])
    np.testing.assert_array_equal(got, want)
    g = tg.grad(lambda x: tnp.sum(tg.vmap(lambda v: v[key] ** 2)(x)))(x)
    np.testing.assert_allclose(
        g, jax.grad(lambda x: jnp.sum(jax.vmap(lambda v: v[key] ** 2)(x)))(x), rtol=1e-12
    )


@pytest.mark.parametrize(
    "fn",
    [
        lambda v: tnp.cumsum(v, axis=-1),
        lambda v: tnp.sort(v),
        lambda v: tnp.flip(v, -1),
        lambda v: tnp.diff(v),
        lambda v: tsp.softmax(v, axis=-1),
        lambda v: tnp.roll(v, 1, axis=-1),
    ],
)
def test_an_axis_of_a_scalar_example_is_an_error(fn):
    """Each example is 0-d: axis -1 is not the batch's (it would mix the examples)."""
    with pytest.raises(np.exceptions.AxisError):
        tg.vmap(fn)(np.array([1.0, 2.0, 3.0]))


def test_aux_that_does_not_depend_on_the_batch():
    def f(w, x):
        return tnp.sum(w * x), {"c": np.arange(5.0), "x2": x * 2}

    (_, aux), g = tg.vmap(tg.value_and_grad(f, has_aux=True), in_axes=(None, 0))(
        np.ones(3), RNG.standard_normal((5, 3))
    )
    assert aux["c"].shape == (5, 5) and aux["x2"].shape == (5, 3) and g.shape == (5, 3)
    np.testing.assert_array_equal(aux["c"], np.tile(np.arange(5.0), (5, 1)))


def test_products_check_their_contracted_lengths():
    a = RNG.standard_normal((3, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for fn, other in (
            (tnp.dot, np.ones((1, 5))),
            (tnp.inner, np.ones((2, 1))),
            (tnp.vdot, np.ones(1)),
            (lambda x, y: tnp.tensordot(x, y, 1), np.ones((1, 4, 5))),
        ):
            with pytest.raises(ValueError):
                tg.vmap(fn, in_axes=(0, None))(a, other)


def test_numpy_functions_without_a_rule_run_per_example():
    x = RNG.standard_normal((4, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for fn in (
            lambda v: tnp.any(v > 0),
            lambda v: tnp.count_nonzero(v > 0),
            lambda v: v * tnp.shape(v)[0],
            lambda v: v * tnp.ndim(v),
            lambda v: tnp.nanmedian(v),
            lambda v: v // 0.3,
            lambda v: tnp.floor_divide(v, 0.3),
            lambda v: tnp.zeros_like(v) + 1.0,
        ):
            got = tg.vmap(fn)(x)
            want = np.stack([np.asarray(tg.as_tensor(fn(tg.tensor(v))).numpy()) for v in x])
            np.testing.assert_allclose(got, want)
    with pytest.raises(ValueError, match="axis_size 7 but the batched arguments have 4"):
        tg.vmap(lambda v: v, axis_size=7)(x)
