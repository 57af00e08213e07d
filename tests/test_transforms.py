"""grad, value_and_grad, vjp, jacobian."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

import tapegrad as tg
import tapegrad.numpy as tnp


def f(x, y):
    return tnp.sum(tnp.sin(x) * y) + tnp.sum(x**2)


def test_grad_argnums():
    x, y = np.array([0.1, 0.2]), np.array([2.0, 3.0])
    gx = tg.grad(f)(x, y)
    np.testing.assert_allclose(gx, np.cos(x) * y + 2 * x)
    assert isinstance(gx, np.ndarray) and gx.shape == x.shape
    gx2, gy = tg.grad(f, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx2, gx)
    np.testing.assert_allclose(gy, np.sin(x))
    np.testing.assert_allclose(tg.grad(f, argnums=-1)(x, y), np.sin(x))


def test_value_and_grad_python_floats_and_float32():
    v, g = tg.value_and_grad(lambda a, b: a * a * b)(3.0, 2.0)
    assert v == 18.0 and g == 12.0 and isinstance(v, float)
    g32 = tg.grad(lambda x: tnp.sum(x**2))(np.ones(3, np.float32))
    assert g32.dtype == np.float32


def test_pytrees_of_arguments():
    params = {"w": np.ones((2, 2)), "layers": [np.array([1.0, 2.0]), (3.0, np.zeros(1))]}

    def loss(p):
        w, (b, (c, d)) = p["w"], p["layers"]
        return tnp.sum(w @ b) * c + tnp.sum(d)

    g = tg.grad(loss)(params)
    assert set(g) == {"w", "layers"} and isinstance(g["layers"], list)
    assert isinstance(g["layers"][1], tuple)
    np.testing.assert_allclose(g["w"], 3.0 * np.array([[1.0, 2.0], [1.0, 2.0]]))
    np.testing.assert_allclose(g["layers"][0], 3.0 * np.array([2.0, 2.0]))
    assert g["layers"][1][0] == pytest.approx(6.0)
    np.testing.assert_allclose(g["layers"][1][1], [1.0])


def test_has_aux():
    (v, aux), g = tg.value_and_grad(lambda x: (tnp.sum(x**2), {"x2": x**2}), has_aux=True)(
        np.array([1.0, 2.0])
    )
    assert v == 5.0 and isinstance(aux["x2"], np.ndarray)
    np.testing.assert_allclose(g, [2.0, 4.0])
    g2, aux2 = tg.grad(lambda x: (tnp.sum(x), "note"), has_aux=True)(np.ones(2))
    assert aux2 == "note"
    np.testing.assert_array_equal(g2, [1.0, 1.0])


def test_independent_argument_gets_zeros():
    with pytest.warns(UserWarning, match="does not depend on the differentiated"):
        g = tg.grad(lambda x, y: tnp.sum(x), argnums=1)(np.ones(2), np.ones(3))
    np.testing.assert_array_equal(g, np.zeros(3))
    # one of two arguments unused: its gradient is zero, without a warning
    gx, gy = tg.grad(lambda x, y: tnp.sum(x**2), argnums=(0, 1))(np.ones(2), np.ones(3))
    np.testing.assert_array_equal(gx, [2.0, 2.0])
    np.testing.assert_array_equal(gy, np.zeros(3))


def test_errors():
    with pytest.raises(TypeError, match="must return a scalar"):
        tg.grad(lambda x: x * 2)(np.ones(2))
    with pytest.raises(TypeError, match="integer or bool"):
        tg.grad(lambda x: tnp.sum(x))(np.arange(3))
    with pytest.raises(ValueError, match="argnums 3 out of range"):
        tg.grad(lambda x: tnp.sum(x), argnums=3)(np.ones(2))
    with pytest.raises(TypeError, match=r"has_aux=True needs f to return \(value, aux\)"):
        tg.grad(lambda x: tnp.sum(x), has_aux=True)(np.ones(2))


def test_vjp_can_be_called_repeatedly():
    out, vjp_fn = tg.vjp(lambda x, y: x * y + tnp.sin(x), np.array([1.0, 2.0]), 3.0)
    np.testing.assert_allclose(out, [3 + np.sin(1), 6 + np.sin(2)])
    for c in (np.ones(2), np.array([1.0, 0.0])):
        gx, gy = vjp_fn(c)
        np.testing.assert_allclose(gx, c * (3 + np.cos([1.0, 2.0])))
        assert gy == pytest.approx(c @ np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="cotangent has shape"):
        vjp_fn(np.ones(3))


def test_jacobian():
    x = np.array([0.3, -0.7, 1.1])
    jac = tg.jacobian(lambda v: tnp.tanh(v) * v[0])(x)
    expected = np.diag((1 - np.tanh(x) ** 2) * x[0])
    expected[:, 0] += np.tanh(x)
    np.testing.assert_allclose(jac, expected)
    jx, jw = tg.jacobian(lambda v, w: w @ v, argnums=(0, 1))(x, np.ones((2, 3)))
    assert jx.shape == (2, 3) and jw.shape == (2, 2, 3)
    np.testing.assert_allclose(jx, np.ones((2, 3)))


def test_value_and_grad_drives_scipy_minimize():
    target = np.array([1.0, -2.0, 0.5])

    def rosen_like(x):
        return tnp.sum((x - target) ** 2) + 0.1 * tnp.sum(x**4)

    res = minimize(tg.value_and_grad(rosen_like), np.zeros(3), jac=True, method="BFGS")
    assert res.success
    grad_at = tg.grad(rosen_like)(res.x)
    assert np.max(np.abs(grad_at)) < 1e-5


# --- container outputs ----------------------------------------------------------------------


def test_vjp_of_container_outputs():
    x0 = np.array([0.3, 1.2, 2.0])
    value, pull = tg.vjp(lambda x: (tnp.sin(x), {"sq": x**2, "s": tnp.sum(x)}), x0)
    np.testing.assert_allclose(value[0], np.sin(x0))
    np.testing.assert_allclose(value[1]["sq"], x0**2)
    (g,) = pull((np.ones(3), {"sq": np.arange(3.0), "s": 2.0}))
    np.testing.assert_allclose(g, np.cos(x0) + 2 * x0 * np.arange(3) + 2)
    value, pull = tg.vjp(lambda x: tnp.split(x * 2.0, [1]), x0)  # HIPS's split tests
    np.testing.assert_allclose(pull([np.ones(1), np.full(2, 3.0)])[0], [2.0, 6.0, 6.0])
    with pytest.raises(ValueError, match="cotangent has 1 parts, the output 2"):
        pull([np.ones(1)])
    with pytest.raises(ValueError, match=r"cotangent has shape \(3,\)"):
        pull([np.ones(1), np.ones(3)])
    # recorded mode: the same, as tensors
    xt = tg.tensor(x0, requires_grad=True)
    _, pull = tg.vjp(lambda x: (tnp.sin(x), x**2), xt)
    (g,) = pull((np.ones(3), np.ones(3)))
    assert isinstance(g, tg.Tensor)
    np.testing.assert_allclose(g.numpy(), np.cos(x0) + 2 * x0)


def test_an_output_unrelated_to_the_input_has_zero_cotangents():
    x0 = np.array([0.3, 1.2])
    with pytest.warns(UserWarning, match="does not depend"):
        value, pull = tg.vjp(lambda x: np.ones(2), x0)
        (g,) = pull(np.ones(2))
    np.testing.assert_array_equal(value, np.ones(2))
    np.testing.assert_array_equal(g, np.zeros(2))


def test_jacobian_of_container_outputs():
    x0 = np.array([0.3, 1.2, 2.0])
    jac_sin, jac_sq = tg.jacobian(lambda x: (tnp.sin(x), tnp.sum(x**2)))(x0)
    np.testing.assert_allclose(jac_sin, np.diag(np.cos(x0)))
    np.testing.assert_allclose(jac_sq, 2 * x0)
    first, rest = tg.jacobian(lambda x: tnp.split(x, [1]))(x0)  # parts of unequal shapes
    np.testing.assert_array_equal(first, np.eye(3)[:1])
    np.testing.assert_array_equal(rest, np.eye(3)[1:])
    per_key = tg.jacobian(lambda x: {"a": x * 2.0, "b": x[0]})(x0)
    np.testing.assert_array_equal(per_key["a"], 2 * np.eye(3))
    np.testing.assert_array_equal(per_key["b"], [1.0, 0.0, 0.0])
    # a list of same-shaped parts is one array, stacked as NumPy would
    np.testing.assert_array_equal(
        tg.jacobian(lambda x: [x[0], x[1] * 2])(x0), [[1, 0, 0], [0, 2, 0]]
    )


def test_argument_arrays_are_copied_before_f_runs():
    """A differentiated float array becomes its leaf by a fast path (a copy): f changing
    the caller's array while it runs changes neither the value nor the gradient, and
    the gradient is a new array."""
    for dtype in (np.float64, np.float32):
        x = np.array([1.0, 2.0, 3.0], dtype)

        def f(t, x=x):
            y = tnp.sum(t * t)
            x[:] = 100.0
            return y + tnp.sum(t)

        v, g = tg.value_and_grad(f)(x)
        assert v == pytest.approx(20.0) and g.dtype == dtype
        np.testing.assert_allclose(g, [3.0, 5.0, 7.0])
        assert not np.shares_memory(g, x)


def test_argument_arrays_of_other_layouts():
    """Non-contiguous, read-only and big-endian arguments, 0-d arrays and Python floats
    take the general path: the same gradients, in the argument's structure."""
    base = np.linspace(0.1, 1.2, 12)
    ro = base.copy()
    ro.flags.writeable = False
    for a in (base[::2], ro, base.astype(">f8"), np.array(0.7), 0.7, base.astype(np.float32)):
        g = tg.grad(lambda t: tnp.sum(tnp.sin(t) * t))(a)
        av = np.asarray(a, np.float64)
        np.testing.assert_allclose(g, np.cos(av) * av + np.sin(av), rtol=1e-6)
        assert np.shape(g) == np.shape(a)


def test_a_tensor_that_requires_grad_anywhere_in_the_arguments_records():
    """Recorded mode is chosen when a tensor that requires grad sits anywhere in the
    arguments (nested containers, named tuples, dicts, non-differentiated ones): the
    results then carry the dependence on it (a second derivative through it is right)."""
    from collections import namedtuple

    Pair = namedtuple("Pair", "a b")
    w = tg.tensor(1.5, requires_grad=True)
    x = np.array([0.5, 2.0])
    structures = [  # (wrap the tensor, find it again)
        (lambda w: w, lambda e: e),
        (lambda w: [w], lambda e: e[0]),
        (lambda w: {"k": (1.0, [w])}, lambda e: e["k"][1][0]),
        (lambda w: Pair(x, w), lambda e: e.b),
    ]
    for wrap, find in structures:

        def f(t, extra, find=find):
            return tnp.sum(t * t) * find(extra)

        g = tg.grad(f)(x, wrap(w))  # d/dt = 2 t w
        assert isinstance(g, tg.Tensor)
        np.testing.assert_allclose(g.numpy(), 2 * x * 1.5)
        gw = tg.grad(lambda w_, f=f, wrap=wrap: tnp.sum(tg.grad(f)(x, wrap(w_))))(1.5)
        assert gw == pytest.approx(2 * x.sum())
