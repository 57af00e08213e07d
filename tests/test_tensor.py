"""The Tensor API: construction, dtypes, operators, autograd semantics, grad mode."""

from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp

# --- construction and dtypes -----------------------------------------------------------


def test_tensor_copies_its_data():
    a = np.arange(3.0)
    t = tg.tensor(a, requires_grad=True)
    a[0] = 100.0
    assert t.numpy()[0] == 0.0
    out = t.numpy()
    out[1] = 50.0  # numpy() hands out a copy
    assert t.numpy()[1] == 1.0


@pytest.mark.parametrize(
    ("data", "dtype"),
    [
        (1.5, np.float64),
        (2, np.int64),
        (True, np.bool_),
        ([1.0, 2.0], np.float64),
        (np.ones(2, np.float32), np.float32),
        (np.ones(2, np.int32), np.int64),
        ([[1, 2], [3, 4]], np.int64),
    ],
)
def test_tensor_dtypes(data, dtype):
    t = tg.tensor(data)
    assert t.dtype == dtype
    np.testing.assert_array_equal(t.numpy(), np.asarray(data))


def test_tensor_dtype_argument():
    assert tg.tensor([1, 2], dtype=np.float32).dtype == np.float32
    with pytest.raises(TypeError, match="unsupported dtype"):
        tg.tensor([1, 2], dtype=np.complex128)


@pytest.mark.parametrize("data", [[1, 2], np.arange(3), [True, False]])
def test_requires_grad_needs_floats(data):
    with pytest.raises(TypeError, match="only floating point tensors can require gradients"):
        tg.tensor(data, requires_grad=True)


def test_metadata_and_printing():
    t = tg.tensor(np.zeros((2, 3), np.float32), requires_grad=True)
    assert t.shape == (2, 3) and t.ndim == 2 and t.size == 6 and len(t) == 2
    assert t.dtype == np.float32 and t.requires_grad and t.is_leaf
    r = repr(t)
    assert r.startswith("tensor([[0., 0., 0.],") and "dtype=float32" in r
    assert "requires_grad=True" in r
    y = t * 2
    assert y.shape == (2, 3) and not y.is_leaf and y.requires_grad
    assert repr(tg.tensor(1.5)) == "tensor(1.5)"
    with pytest.raises(TypeError, match="len"):
        len(tg.tensor(1.0))


def test_item_float_int_bool():
    assert tg.tensor([[2.5]]).item() == 2.5
    assert float(tg.tensor(3.0) * 2) == 6.0
    assert int(tg.tensor(7)) == 7
    assert bool(tg.tensor(1.0) > 0)
    with pytest.raises(ValueError, match="has 3 elements"):
        tg.tensor([1.0, 2.0, 3.0]).item()


def test_numpy_interop_defers_to_tensor():
    x = tg.tensor(np.ones(3), requires_grad=True)
    a = np.arange(3.0)
    for y in (a + x, a * x, a - x, a / (x + 1), a**x, a @ x):
        assert isinstance(y, tg.Tensor) and y.requires_grad
    (a @ x).backward()
    np.testing.assert_array_equal(x.grad, a)
    np.testing.assert_array_equal(np.asarray((x * 2).detach()), 2 * np.ones(3))
    np.testing.assert_array_equal(np.asarray(tg.tensor([1.0, 2.0])), [1.0, 2.0])


def test_mixed_dtypes_follow_numpy_promotion():
    x32 = tg.tensor(np.ones(3, np.float32), requires_grad=True)
    x64 = tg.tensor(np.ones(3), requires_grad=True)
    assert (x32 * 2.0).dtype == np.float32  # Python scalars are weak (NEP 50)
    assert (x32 * x64).dtype == np.float64
    assert (x32 * np.ones(3)).dtype == np.float64
    assert (x32 * np.ones(3, np.int64)).dtype == np.float64
    assert (x32 * np.ones(3, bool)).dtype == np.float32
    assert (tg.tensor([1, 2]) * 1.5).dtype == np.float64
    y = (x32 * x64).sum()
    y.backward()
    assert x32.grad.dtype == np.float32 and x64.grad.dtype == np.float64


def test_integer_only_ops_are_numpy_and_constant():
    i = tg.tensor([1, 2, 3])
    r = i * 2 + i
    assert r.dtype == np.int64 and not r.requires_grad
    np.testing.assert_array_equal(r.numpy(), [3, 6, 9])
    np.testing.assert_array_equal((i > 1).numpy(), [False, True, True])
    assert tnp.sum(i).item() == 6


def test_comparisons_are_bool_and_not_differentiable():
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    for m in (x < 2, x <= 2, x > 2, x >= 2, x == 2, x != 2, 2 < x):
        assert m.dtype == np.bool_ and not m.requires_grad
    np.testing.assert_array_equal((x > 1.5).numpy(), [False, True, True])
    # a comparison result used as a mask or as data
    y = (x * (x > 1.5)).sum()
    y.backward()
    np.testing.assert_array_equal(x.grad, [0.0, 1.0, 1.0])


def test_tensor_is_hashable():
    x = tg.tensor(1.0)
    assert {x: 1}[x] == 1


# --- operators and methods -----------------------------------------------------------------


def test_operators_and_methods():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    x = tg.tensor(a)
    np.testing.assert_allclose((x + 1).numpy(), a + 1)
    np.testing.assert_allclose((1 - x).numpy(), 1 - a)
    np.testing.assert_allclose((2 / x).numpy(), 2 / a)
    np.testing.assert_allclose((x**2).numpy(), a**2)
    np.testing.assert_allclose((2**x).numpy(), 2**a)
    np.testing.assert_allclose((x**x).numpy(), a**a)
    np.testing.assert_allclose((-x).numpy(), -a)
    np.testing.assert_allclose(abs(-x).numpy(), a)
    np.testing.assert_allclose((+x).numpy(), a)
    np.testing.assert_allclose((x @ x).numpy(), a @ a)
    np.testing.assert_allclose(x.sum(axis=0).numpy(), a.sum(axis=0))
    np.testing.assert_allclose(x.mean(axis=1, keepdims=True).numpy(), a.mean(1, keepdims=True))
    np.testing.assert_allclose(x.reshape(4).numpy(), a.reshape(4))
    np.testing.assert_allclose(x.reshape(1, 4).numpy(), a.reshape(1, 4))
    np.testing.assert_allclose(x.T.numpy(), a.T)
    np.testing.assert_allclose(x.transpose(1, 0).numpy(), a.T)
    np.testing.assert_allclose(x.transpose((1, 0)).numpy(), a.T)
    np.testing.assert_allclose(x.transpose(np.int64(1), np.int64(0)).numpy(), a.T)
    v = tg.tensor(a[0], requires_grad=True)  # one NumPy integer axis: NumPy's axes, not a tuple
    np.testing.assert_allclose(v.transpose(np.int64(0)).numpy(), a[0].transpose(np.int64(0)))
    np.testing.assert_allclose(x[1].numpy(), a[1])
    np.testing.assert_allclose(x.astype(np.float32).numpy(), a.astype(np.float32))
    assert [v.item() for v in tg.tensor([1.0, 2.0])] == [1.0, 2.0]  # iteration


def test_tnp_names_and_aliases():
    x = tg.tensor([-1.0, 2.0])
    np.testing.assert_allclose(tnp.abs(x).numpy(), [1.0, 2.0])
    np.testing.assert_allclose(tnp.divide(x, 2).numpy(), [-0.5, 1.0])
    np.testing.assert_allclose(tnp.pow(x, 2).numpy(), [1.0, 4.0])
    with pytest.raises(TypeError, match="out= is not supported"):
        tnp.exp(x, out=np.empty(2))


def test_maximum_tie_splits_gradient():
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = tg.tensor([1.0, 3.0, 2.0], requires_grad=True)
    tnp.maximum(x, y).sum().backward()
    np.testing.assert_array_equal(x.grad, [0.5, 0.0, 1.0])
    np.testing.assert_array_equal(y.grad, [0.5, 1.0, 0.0])
    x.grad = y.grad = None
    tnp.minimum(x, y).sum().backward()
    np.testing.assert_array_equal(x.grad, [0.5, 1.0, 0.0])
    z = tg.tensor(2.0, requires_grad=True)
    tnp.maximum(z, z).backward()  # max(z, z) = z: the halves add up
    assert z.grad == 1.0


def test_subgradients_at_kinks():
    x = tg.tensor([0.0, -2.0, 2.0], requires_grad=True)
    tnp.abs(x).sum().backward()
    np.testing.assert_array_equal(x.grad, [0.0, -1.0, 1.0])
    z = tg.tensor([0.0, 1.0], requires_grad=True)
    (z**2.0).sum().backward()
    np.testing.assert_array_equal(z.grad, [0.0, 2.0])
    e = tg.tensor([0.0, 2.0], requires_grad=True)
    (tg.tensor(0.0) ** e).sum().backward()  # d/de 0**e = 0 for e >= 0, not nan
    np.testing.assert_array_equal(e.grad, [0.0, 0.0])


def test_scalar_operands_by_value():
    """Python ints and floats are weak; a NumPy float64 scalar keeps float64 and
    promotes float32 (NEP 50), whichever path records the op."""
    x64 = tg.tensor(np.array([0.5, -1.5, 2.0]), requires_grad=True)
    x32 = tg.tensor(np.array([0.5, -1.5, 2.0], np.float32), requires_grad=True)
    a64, a32 = x64 * 1.0, x32 * 1.0  # results in the tape: the operator fast path
    v = np.float64(0.25)
    cases = [
        (a64 * 3, np.float64),
        (3 - a64, np.float64),
        (a64**2, np.float64),
        (2**a64, np.float64),
        (a64 - v, np.float64),
        (a32 * 3, np.float32),
        (1 - a32, np.float32),
        (a32**2, np.float32),
        (a32 - v, np.float64),
        (a32 > 1, np.bool_),
    ]
    for r, dt in cases:
        assert r.dtype == dt, (r, dt)
    expected = [
        3 * x64.numpy(),
        3 - x64.numpy(),
        x64.numpy() ** 2,
        2 ** x64.numpy(),
        x64.numpy() - 0.25,
    ]
    for (r, _), e in zip(cases, expected):
        np.testing.assert_allclose(r.numpy(), e)
    (a64 * 3 + 3 - a64 + a64**2 + 2**a64 + (a64 - v)).sum().backward()
    g = 3 - 1 + 2 * x64.numpy() + np.log(2) * 2 ** x64.numpy() + 1
    np.testing.assert_allclose(x64.grad, g)
    (a32**2 - v).sum().backward()
    assert x32.grad.dtype == np.float32
    np.testing.assert_allclose(x32.grad, 2 * x32.numpy())


def test_basic_indexing_in_a_loop():
    """The positions of basic keys are kept per tape: reusing them across ops and
    steps gives the same values and gradients as fresh ones, and NumPy's errors."""
    u0 = np.arange(12.0).reshape(3, 4)
    for _step in range(3):
        u = tg.tensor(u0, requires_grad=True)
        total = 0.0
        for k in range(3):
            total = total + u[k, 1] * (k + 1) + u[np.int64(k)].sum() + u[k:, ::-2].sum()
        total = total + u[(2,)].sum() + u[..., None, 3].sum() + u[()].sum()
        total.backward()
        g = np.zeros_like(u0)
        for k in range(3):
            g[k, 1] += k + 1
            g[k] += 1
            g[k:, ::-2] += 1
        g[2] += 1
        g[:, 3] += 1
        g += 1
        np.testing.assert_array_equal(u.grad, g)
        np.testing.assert_array_equal(u[1, 2].numpy(), u0[1, 2])
        assert u[2:, 1:3].shape == (1, 2)
    v = tg.tensor(np.arange(5.0))
    np.testing.assert_array_equal(v[1:4].numpy(), [1.0, 2.0, 3.0])  # another shape, same key
    with pytest.raises(IndexError, match=r"getitem: .*shape \(5,\)"):
        v[7]
    with pytest.raises(IndexError, match="getitem"):
        u[0, 0, 0]


def test_basic_index_positions_are_shared_by_tapes():
    """Positions of basic keys are computed once for all tapes: a few go in the gather
    node's int parameters (one input), more in a constant tensor per tape over one
    shared array. A fresh tape (a program being captured) reuses them."""
    from tapegrad.layout import N_NIN, S_NODE
    from tapegrad.ops.shape import front as shape
    from tapegrad.tape import current_tape

    u0 = np.arange(20.0) * 0.5
    small, big = ((20,), (False, (4,))), ((20,), (False, ((2, 15, None),)))
    (tg.tensor(u0)[4] * 1.0 + tg.tensor(u0)[2:15].sum()).numpy()
    assert shape._POSITIONS[small] == ((), (4,))
    shared = shape._POSITIONS[big][1]
    assert isinstance(shared, np.ndarray) and shared.size == 13

    def loss(u):
        return u[4] * u[1] + (u[2:15] ** 2).sum()

    step = tg.compile(loss)
    for scale in (1.0, 2.0):
        value, g = step.value_and_grad(u0 * scale)
        ev, eg = tg.value_and_grad(loss)(u0 * scale)
        assert value == pytest.approx(ev)
        np.testing.assert_allclose(g, eg)
    want = np.zeros(20)
    want[2:15] = 2 * u0[2:15] * 2.0
    want[4] += u0[1] * 2.0
    want[1] += u0[4] * 2.0
    np.testing.assert_allclose(g, want)
    tape = next(iter(step.programs.values()))[0].tape
    mine = tape.gathers[big]
    assert mine._data is shared
    # each tape wraps the shared array in its own tensor (bound to that tape)
    assert current_tape().gathers[big] is not mine
    assert small not in tape.gathers
    x = tg.tensor(u0, requires_grad=True)
    y = x[4]
    k = y._tape.slot_field(S_NODE, y._slot)
    assert y._tape.arrays["node"][N_NIN, k] == 1  # positions in the int parameters
    y.backward()
    np.testing.assert_array_equal(x.grad, np.eye(20)[4])


def test_repeated_indices_add_up():
    x = tg.tensor(np.arange(4.0), requires_grad=True)
    x[np.array([0, 1, 1, 3, 3, 3])].sum().backward()
    np.testing.assert_array_equal(x.grad, [1.0, 2.0, 0.0, 3.0])


def test_index_with_tensors():
    x = tg.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    y = x[x > 2.5]
    np.testing.assert_array_equal(y.numpy(), [3.0, 4.0, 5.0])
    z = x[tg.tensor([1, 0])]
    np.testing.assert_array_equal(z.numpy(), np.arange(6.0).reshape(2, 3)[[1, 0]])
    (y.sum() + z.sum()).backward()
    np.testing.assert_array_equal(x.grad, [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]])


def test_reshape_shares_memory_but_values_stay():
    x = tg.tensor(np.arange(6.0), requires_grad=True)
    y = x.reshape(2, 3)
    z = (y * tg.tensor(np.arange(6.0).reshape(2, 3))).sum()
    z.backward()
    np.testing.assert_array_equal(x.grad, np.arange(6.0))
    assert y.shape == (2, 3) and x.shape == (6,)


# --- autograd semantics --------------------------------------------------------------------


def test_grad_accumulates_and_resets():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad, [2.0 + 3.0, 4.0 + 3.0])
    x.grad = None
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad, [3.0, 3.0])


def test_grad_accumulates_into_the_array_the_user_holds():
    x = tg.tensor([1.0], requires_grad=True)
    (x * 2).sum().backward()
    g = x.grad
    (x * 2).sum().backward()
    assert x.grad is g and g[0] == 4.0  # in place, as PyTorch's (g.zero_() works)


def test_fan_out_sums():
    x = tg.tensor(3.0, requires_grad=True)
    y = x * x + x * 2 + tnp.sin(x)
    y.backward()
    assert x.grad == pytest.approx(2 * 3.0 + 2 + np.cos(3.0))


def test_backward_with_gradient_argument():
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * x
    y.backward(gradient=np.array([1.0, 0.0, 2.0]))
    np.testing.assert_array_equal(x.grad, [2.0, 0.0, 12.0])
    x.grad = None
    (x * 2).backward(gradient=tg.tensor([1.0, 1.0, 1.0]))
    np.testing.assert_array_equal(x.grad, [2.0, 2.0, 2.0])


def test_backward_of_a_leaf():
    x = tg.tensor(2.0, requires_grad=True)
    x.backward()
    assert x.grad == 1.0


def test_retain_graph_allows_second_backward():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = (tnp.exp(x) * x).sum()
    y.backward(retain_graph=True)
    g1 = x.grad.copy()
    y.backward()
    np.testing.assert_allclose(x.grad, 2 * g1)


def test_partial_graph_prunes_unused_branches():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    w = tg.tensor([3.0, 4.0], requires_grad=True)
    c = tg.tensor([5.0, 6.0])  # constant: no gradient
    a = (x * c).sum()
    b = (w * x).sum()
    a.backward()
    np.testing.assert_array_equal(x.grad, [5.0, 6.0])
    assert w.grad is None and c.grad is None
    b.backward()
    np.testing.assert_array_equal(w.grad, [1.0, 2.0])


def test_detach_and_requires_grad_():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.is_leaf
    (d * x).sum().backward()
    np.testing.assert_array_equal(x.grad, [2.0, 4.0])
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad_()
    d.requires_grad_()
    (d * d).sum().backward()
    np.testing.assert_array_equal(d.grad, [4.0, 8.0])
    with tg.no_grad():
        c = x * 3
    c.requires_grad_()  # an op result that does not require grad is a leaf
    c.sum().backward()
    np.testing.assert_array_equal(c.grad, [1.0, 1.0])


def test_no_grad_context_and_decorator():
    x = tg.tensor([1.0], requires_grad=True)
    with tg.no_grad():
        assert not tg.is_grad_enabled()
        y = x * 2
        with tg.enable_grad():
            z = x * 2
        assert not tg.is_grad_enabled()
    assert tg.is_grad_enabled()
    assert not y.requires_grad and z.requires_grad

    @tg.no_grad()
    def f(t):
        return t * 2

    assert not f(x).requires_grad
    assert tg.is_grad_enabled()


def test_held_tensor_keeps_its_value_across_steps():
    """A result the user holds survives the tape's reuse of its memory."""
    x = tg.tensor(np.arange(4.0), requires_grad=True)
    kept = []
    for step in range(5):
        y = tnp.sin(x * (step + 1))
        loss = y.sum()
        loss.backward()
        kept.append((y, loss, step))
    for y, loss, step in kept:
        np.testing.assert_allclose(y.numpy(), np.sin(np.arange(4.0) * (step + 1)))
        assert loss.item() == pytest.approx(np.sin(np.arange(4.0) * (step + 1)).sum())
        assert y.shape == (4,) and y.requires_grad and not y.is_leaf


def test_values_survive_no_grad_loop_rewinds():
    x = tg.tensor(np.ones(100))
    first = x * 2
    with tg.no_grad():
        for _ in range(3000):  # fills the tape several times over
            x = x * 1.0
    np.testing.assert_array_equal(first.numpy(), np.full(100, 2.0))


def test_graph_held_across_rewind_attempts_still_works():
    """A pending graph (requires grad, not yet run backward) is never rewound away."""
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    pending = (w * w).sum()
    for _ in range(3):
        (w * 3).sum().backward()
        _ = w * 1.0  # the next op tries to rewind
    pending.backward()
    np.testing.assert_array_equal(w.grad, [9.0 + 2.0, 9.0 + 4.0])


# NumPy arrays as operands of binary ops go by a fast path (tensors.elementwise_function):
# a copy of the array is imported as a constant. The same rules as every other path.
@pytest.mark.parametrize("array_first", [False, True])
@pytest.mark.parametrize("const_dtype", [np.float64, np.float32])
def test_array_operands_are_copied_constants(array_first, const_dtype):
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((3, 4))
    c = rng.standard_normal((3, 4)).astype(const_dtype)
    kept = c.copy()
    x = tg.tensor(xv, requires_grad=True)
    for bound in (False, True):  # a leaf not yet in the tape, a result in it (the fast path)
        c[:] = kept
        x1 = x * 1.0 if bound else x
        y = (c * x1) if array_first else (x1 * c)
        c[:] = 100.0  # the caller changes the array after the op: the graph kept the old values
        (y * y).sum().backward()
        expected = 2 * xv * kept.astype(np.float64) ** 2
        rtol = 1e-6 if const_dtype is np.float32 else 1e-12
        np.testing.assert_allclose(x.grad, expected, rtol=rtol)
        assert y.dtype == np.float64  # float32 array with a float64 tensor: NumPy's promotion
        x.grad = None


def test_array_operands_of_every_layout_and_dtype():
    """Non-contiguous, read-only, big-endian, integer, 0-d and object arrays as operands
    give what NumPy gives, and gradients that match central differences."""
    base = np.arange(24, dtype=np.float64).reshape(4, 6) / 10
    x = tg.tensor(np.linspace(0.5, 1.5, 12).reshape(4, 3), requires_grad=True)
    ro = base[:, ::2].copy()
    ro.flags.writeable = False
    cases = [
        base[:, ::2],
        base.T[::2, :4].T[:, :3],
        ro,
        base[:, ::2].astype(">f8"),
        np.arange(12).reshape(4, 3),
        np.array(2.5),
        base[:, ::2].astype(np.float32),
    ]
    xv = x.numpy()
    for c in cases:
        for got, want in ((x * c, xv * c), (c - x, c - xv), (x / (c + 1.0), xv / (c + 1.0))):
            assert got.shape == want.shape
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
        g = tg.grad(lambda t, c=c: tnp.sum(t * c - c / (t + 3.0)))(x.numpy())
        np.testing.assert_allclose(g, c + c / (x.numpy() + 3.0) ** 2, rtol=1e-6)
    objects = np.empty(2, object)  # an object array of tensors is stacked, keeping the graph
    objects[0], objects[1] = tg.tensor(1.0, requires_grad=True), tg.tensor(2.0)
    z = x[0, :2] * objects
    z.sum().backward()
    assert objects[0].grad == pytest.approx(x.numpy()[0, 0])


# Each path that takes a NumPy array as an op's constant copies it (the fast binary path,
# the compiled front ends, bind_operand): the copy must be of the values the op read, made
# before the user's next write, on every path, in every layout, and of any size.
def _constant_cases():
    rng = np.random.default_rng(3)
    big = rng.standard_normal((700, 600))  # 3.4 MB: more than a fresh tape's arena
    cases = {
        "fast binary": (lambda x, c: (x * 1.0) * c, (3, 4), (3, 4)),
        "binary, array first, leaf unbound": (lambda x, c: c - x, (3, 4), (3, 4)),
        "matmul front end": (lambda x, c: (x * 1.0) @ c, (3, 4), (4, 2)),
        "matmul, array first": (lambda x, c: c @ (x * 1.0), (3, 4), (5, 3)),
        "matmul, leaf unbound": (lambda x, c: c @ x, (3, 4), (5, 3)),
        "transposed constant": (lambda x, c: (x * 1.0) @ c.T, (3, 4), (2, 4)),
        "broadcast row": (lambda x, c: tnp.tanh(x) * c, (3, 4), (4,)),
        "larger than the arena": (lambda x, c: (x * 1.0) * c, big.shape, big.shape),
    }
    return rng, cases


@pytest.mark.parametrize("name", list(_constant_cases()[1]))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_constant_changed_after_the_op_does_not_change_the_gradient(name, dtype):
    rng, cases = _constant_cases()
    op, xshape, cshape = cases[name]
    xv = rng.standard_normal(xshape).astype(dtype)
    kept = rng.standard_normal(cshape).astype(dtype)

    def loss(x, c):
        y = op(x, c)
        return y, (y * y).sum()

    # the expected gradient: the same ops, on an array nobody changes
    x0 = tg.tensor(xv, requires_grad=True)
    loss(x0, kept.copy())[1].backward()
    for strided in (False, True):  # (every other element of a larger array: not contiguous)
        c = np.repeat(kept[..., None], 2, axis=-1)[..., 0] if strided else kept.copy()
        x = tg.tensor(xv, requires_grad=True)
        y, total = loss(x, c)
        c[...] = 1e3  # the caller reuses its array before the backward
        total.backward()
        assert x.grad.dtype == dtype and y.dtype == dtype
        np.testing.assert_array_equal(x.grad, x0.grad)
        # inside a transform: the function itself changes the array after the op
        c = kept.copy()

        def f(t, c=c):
            _, total = loss(t, c)
            c[...] = -7.0
            return total

        np.testing.assert_array_equal(tg.grad(f)(xv), x0.grad)


def test_array_operand_shape_error_leaves_the_tape_as_it_was():
    from tapegrad.layout import H_ARENA_TOP, H_NNODES, H_NSHAPE, H_NSLOTS
    from tapegrad.tape import current_tape

    x = tg.tensor(np.ones((2, 3)), requires_grad=True)
    y = x * 2.0
    h = current_tape().h
    before = (h[H_NNODES], h[H_NSLOTS], h[H_NSHAPE], h[H_ARENA_TOP])
    for bad in (np.ones(4), np.ones((3, 2), np.float32)):
        with pytest.raises(ValueError, match=r"\(2, 3\) and \(.*\)"):
            y + bad
        with pytest.raises(ValueError, match=r"\(.*\) and \(2, 3\)"):
            bad * y
        assert (h[H_NNODES], h[H_NSLOTS], h[H_NSHAPE], h[H_ARENA_TOP]) == before
    for bad in (np.ones((2, 5)), np.ones((4, 2, 5), np.float32)):
        with pytest.raises(ValueError, match="matmul"):
            y @ bad
        assert (h[H_NNODES], h[H_NSLOTS], h[H_NSHAPE], h[H_ARENA_TOP]) == before
    (y * np.ones(3)).sum().backward()
    np.testing.assert_array_equal(x.grad, np.full((2, 3), 2.0))
