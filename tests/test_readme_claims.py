"""README statements that no other test pinned down, each tried where it could quietly
give a wrong number: p-norms at 0, NumPy's ufunc ``reduce`` methods on tensors,
``functools.partial`` around a compiled or transformed function, and the environment
variables ``TAPEGRAD_SOFT_ARENA`` and ``TAPEGRAD_THREADS``."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads

from .helpers import central

ROOT = Path(__file__).resolve().parent.parent

# --- "norms and std have gradient 0 where they are 0" ---------------------------------


@pytest.mark.parametrize("ord", [3, 4, 1.5, 2.5])
def test_p_norms_have_gradient_zero_where_they_are_zero(ord):
    """``norm(x, p)`` for p other than 1, 2, inf was ``sum(|x|**p) ** (1/p)``: at a zero
    vector (or a zero row over an axis) its backward took ``0 * inf`` and gave NaN."""
    z = tg.tensor(np.zeros(3), requires_grad=True)
    r = tnp.linalg.norm(z, ord)
    assert r.item() == 0.0
    r.backward()
    np.testing.assert_array_equal(z.grad, np.zeros(3))
    # rows that are zero beside rows that are not, over an axis, keepdims too
    a = np.array([[0.0, 0.0, 0.0], [0.3, -1.0, 2.0], [0.0, 0.0, 0.0], [1.5, 0.0, -0.2]])
    w = np.array([1.0, -2.0, 0.5, 3.0])
    for keepdims in (False, True):
        got = tnp.linalg.norm(tg.tensor(a), ord, axis=1, keepdims=keepdims).numpy()
        np.testing.assert_allclose(got, np.linalg.norm(a, ord, axis=1, keepdims=keepdims))

    def f(x):
        return tnp.sum(tnp.linalg.norm(x, ord, axis=1) * w)

    g = tg.grad(f)(a)
    assert np.isfinite(g).all() and not g[[0, 2]].any()
    want = central(lambda v: np.sum(np.linalg.norm(v, ord, axis=1) * w), a)
    np.testing.assert_allclose(g[[1, 3]], want[[1, 3]], rtol=1e-7, atol=1e-9)
    # float32 stays float32, and the replayed program agrees at 0 and away from it
    g32 = tg.grad(lambda x: tnp.linalg.norm(x, ord))(np.zeros(3, np.float32))
    assert g32.dtype == np.float32 and not g32.any()
    step = tg.compile(f)
    for x in (a, np.zeros_like(a), a[::-1].copy()):
        v, gs = step.value_and_grad(x)
        np.testing.assert_allclose(v, np.sum(np.linalg.norm(x, ord, axis=1) * w), rtol=1e-13)
        np.testing.assert_allclose(gs, tg.grad(f)(x), rtol=1e-13)
    assert step.stats["captures"] == 1


def test_p_norm_second_order_at_and_away_from_zero():
    check_grads(lambda x: tnp.linalg.norm(x, 3), [np.array([0.3, 1.0, -2.0])], order=2)
    h = tg.hessian(lambda x: tnp.linalg.norm(x, 3))(np.zeros(3))
    np.testing.assert_array_equal(h, np.zeros((3, 3)))


@pytest.mark.parametrize("n", [2, 3])
def test_matrix_norms_at_a_zero_matrix(n):
    """What the README says each matrix norm's gradient is at 0: 0 for the entrywise and
    absolute-sum norms, svdvals' tie split for 2, -2 and 'nuc' (finite, never NaN)."""
    z = np.zeros((n, n))
    for ord in ("fro", 1, -1, np.inf, -np.inf):
        np.testing.assert_array_equal(tg.grad(lambda x, o=ord: tnp.linalg.norm(x, o))(z), z)
    for ord, want in ((2, np.eye(n) / n), (-2, np.eye(n) / n), ("nuc", np.eye(n))):
        np.testing.assert_allclose(tg.grad(lambda x, o=ord: tnp.linalg.norm(x, o))(z), want)


# --- np.<ufunc>.reduce on tensors -----------------------------------------------------

X = np.array([[1.0, -2.0, 3.0], [0.5, 4.0, -1.5]])


@pytest.mark.parametrize(
    "call",
    [
        lambda x: np.add.reduce(x),
        lambda x: np.add.reduce(x, 1),  # positional axis
        lambda x: np.add.reduce(x, axis=None),
        lambda x: np.add.reduce(x, axis=(0, 1)),
        lambda x: np.add.reduce(x, axis=1, keepdims=True),
        lambda x: np.multiply.reduce(x, axis=1),
        lambda x: np.maximum.reduce(x, axis=0),
        lambda x: np.minimum.reduce(x, axis=1, keepdims=True),
    ],
)
def test_ufunc_reduce_methods_record(call):
    """``np.add/multiply/maximum/minimum.reduce`` of a tensor are tnp's sum, prod, max,
    min (NumPy's default axis 0, not None): NumPy's values, central differences'
    gradients, float32 kept."""
    want = call(X)
    got = call(tg.tensor(X, requires_grad=True))
    assert isinstance(got, tg.Tensor) and got.requires_grad
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-14)
    w = np.random.default_rng(1).standard_normal(np.shape(want))
    check_grads(lambda x: tnp.sum(call(x) * w), [X])
    assert call(tg.tensor(X.astype(np.float32))).dtype == np.float32


def test_ufunc_reduce_methods_tapegrad_does_not_implement_raise():
    t = tg.tensor(X, requires_grad=True)
    for name, call in [
        ("add.reduce", lambda: np.add.reduce(t, axis=1, initial=5.0)),
        ("add.reduce", lambda: np.add.reduce(t, axis=1, where=np.array([True, False, True]))),
        ("add.reduce", lambda: np.add.reduce(t, axis=1, dtype=np.float32)),
        ("subtract.reduce", lambda: np.subtract.reduce(t, axis=1)),
        ("logaddexp.reduce", lambda: np.logaddexp.reduce(t, axis=1)),
        ("add.reduceat", lambda: np.add.reduceat(t, [0, 2], axis=1)),
        ("add.accumulate", lambda: np.add.accumulate(t, axis=1)),
        ("multiply.outer", lambda: np.multiply.outer(t, t)),
    ]:
        with pytest.raises(TypeError, match=re.escape(f"numpy.{name} ")):
            call()
