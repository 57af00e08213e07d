"""Per-op tests generated from the op table: forward against NumPy, float64 gradients
against central differences, float32 gradients stay float32 and agree with float64."""

from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads

from .optable_cases import cases

CASES = cases()
DIFFERENTIABLE = [c for c in CASES if c.op.differentiable]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_forward_matches_numpy(case):
    args = case.args()
    got = case.f(tnp, *[tg.tensor(a) for a in args])
    want = np.asarray(case.f(np, *args))
    assert isinstance(got, tg.Tensor)
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=lambda c: c.id)
def test_gradient_float64(case):
    check_grads(lambda *a: case.f(tnp, *a), case.args(), **case.check)


@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=lambda c: c.id)
def test_gradient_float32(case):
    args64 = case.args()
    args32 = [a.astype(np.float32) for a in args64]
    grads = {}
    for dtype, args in ((np.float64, args64), (np.float32, args32)):
        leaves = [tg.tensor(a, requires_grad=True) for a in args]
        out = case.f(tnp, *leaves)
        if case.op.namespace == "special":  # SciPy lacks float32 loops for some: we keep it
            assert out.dtype == dtype
        else:
            assert out.dtype == np.asarray(case.f(np, *args)).dtype  # NumPy's promotion
        v = np.random.default_rng(1).standard_normal(out.shape)
        out.backward(gradient=v)
        grads[dtype] = [leaf.grad for leaf in leaves]
    for g32, g64 in zip(grads[np.float32], grads[np.float64], strict=True):
        if g64 is None:  # an input the result does not depend on (copysign's y)
            assert g32 is None
            continue
        assert g32.dtype == np.float32
        scale = max(1.0, float(np.max(np.abs(g64), initial=0.0)))
        np.testing.assert_allclose(g32, g64, rtol=2e-4, atol=2e-5 * scale)


@pytest.mark.parametrize("case", [c for c in CASES if not c.op.differentiable], ids=lambda c: c.id)
def test_not_differentiable(case):
    leaves = [tg.tensor(a, requires_grad=True) for a in case.args()]
    out = case.f(tnp, *leaves)
    assert not out.requires_grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        out.sum().backward() if out.dtype.kind == "f" else out.backward(gradient=np.ones(out.shape))
