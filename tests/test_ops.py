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


# --- fresh gradient buffers (scheduler._prepare, Op.assigns) ----------------------------
# A backward kernel stores into an input's gradient buffer when it is the buffer's first
# writer (the suite fills such buffers with NaN first, conftest.py), and adds when
# another node wrote it before. Each row is run both ways: the extra term recorded after
# the op (so its backward runs first and the op's kernel adds) and before it.


@pytest.fixture(params=["node by node", "zeroed up front"])
def zeroing(request):
    """The two ways a backward readies its buffers (tapegrad/scheduler.py): the suite
    runs node by node (TAPEGRAD_LAZY_BYTES=0); small graphs normally zero up front."""
    from tapegrad.layout import H_LAZY_BYTES
    from tapegrad.tape import current_tape

    h = current_tape().h
    old = h[H_LAZY_BYTES]
    h[H_LAZY_BYTES] = 0 if request.param == "node by node" else 1 << 40
    yield request.param
    h[H_LAZY_BYTES] = old


@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=lambda c: c.id)
@pytest.mark.parametrize("order", ["other term first", "op first"])
def test_gradient_with_a_second_use_of_each_input(case, order, zeroing):
    args = case.args()
    rng = np.random.default_rng(2)
    weights = [rng.standard_normal(a.shape) for a in args]

    def plain(*leaves):
        out = case.f(tnp, *leaves)
        v = np.random.default_rng(1).standard_normal(out.shape)
        return tnp.sum(out * v)

    def other(leaves):
        return sum(tnp.sum(leaf * c) for leaf, c in zip(leaves, weights, strict=True))

    leaves = [tg.tensor(a, requires_grad=True) for a in args]
    plain(*leaves).backward()
    alone = [leaf.grad for leaf in leaves]
    leaves = [tg.tensor(a, requires_grad=True) for a in args]
    if order == "op first":
        total = other(leaves) + plain(*leaves)  # the op's node is newer: it runs first
    else:
        total = plain(*leaves) + other(leaves)
    total.backward()
    for leaf, g, c in zip(leaves, alone, weights, strict=True):
        want = c if g is None else g + c
        np.testing.assert_allclose(leaf.grad, want, rtol=1e-12, atol=1e-12)


def _shared_domain(case) -> tuple[float, float]:
    """Where a value may stand for both inputs (inside both inputs' domains)."""
    return max(case.domain(0)[0], case.domain(1)[0]), min(case.domain(0)[1], case.domain(1)[1])


SAME_SHAPE_BINARY = [
    c
    for c in DIFFERENTIABLE
    if c.op.kind.value == "binary"
    and c.label == "(3, 4) with (3, 4)"
    and _shared_domain(c)[0] < _shared_domain(c)[1]
]


@pytest.mark.parametrize("case", SAME_SHAPE_BINARY, ids=lambda c: c.id)
def test_gradient_with_one_tensor_as_both_operands(case, zeroing):
    """``f(x, x)``: the slot is both inputs; node by node, the kernel sums both formulas
    into the (maybe fresh) buffer in one pass."""
    x = np.random.default_rng(4).uniform(*_shared_domain(case), (3, 4))
    check_grads(lambda x: case.f(tnp, x, x), [x], **case.check)


@pytest.mark.parametrize(
    ("f", "shape"),
    [
        (lambda x: tnp.where(x > 0.5, x, x * 2.0), (3, 3)),
        (lambda x: tnp.where(x > 0.5, x, x), (3, 3)),
        (lambda x: x @ x, (3, 3)),
        (lambda x: tnp.matmul(x.reshape(2, 3, 3), x.reshape(2, 3, 3)), (18,)),
        (lambda x: tnp.sum(x.T * x, axis=0), (3, 3)),
    ],
    ids=["where x, 2x", "where x, x", "x @ x", "batched x @ x", "x.T * x"],
)
def test_gradient_of_array_ops_reading_one_slot_twice(f, shape, zeroing):
    check_grads(f, [np.random.default_rng(3).uniform(0.1, 1.0, shape)])


def test_the_suite_runs_with_poisoned_fresh_buffers():
    from tapegrad.layout import H_POISON
    from tapegrad.tape import current_tape

    assert current_tape().h[H_POISON] == 1


def test_formulas_pickle_small_after_eager_ops():
    """numba's disk cache keys each compiled overload on its closure cells, pickled with
    ``numba.core.serialize.dumps``; the kernels' overloads capture the rows' formulas.
    gammaln's backward calls the word ``digamma``, which could only be pickled by value,
    dragging in the whole row registry (460 KB) and, once an eager op had switched the
    fast paths to compiled entry points, failing ("cannot pickle '_dynfunc._Closure'"):
    the first compile of 13 rows' kernels (gammaln, beta, i0, polygamma...) crashed in
    any process that had run an eager op on a cold cache, and so did
    ``python -m tapegrad.warmup --jobs 1``. Every formula must pickle, small."""
    import pickle

    from numba.core.serialize import dumps

    from tapegrad.ops import ROWS

    x = tg.tensor(np.ones(3), requires_grad=True)
    (tnp.sin(x) * 2.0).sum().backward()  # the eager fast paths now hold entry points
    for op in ROWS:
        formulas = [op.fwd, *op.backward_formulas]
        if op.vector is not None:
            back = op.vector[1]
            formulas += [op.vector[0], *(back if isinstance(back, tuple) else (back,))]
        for f in formulas:
            if f is not None:
                assert len(dumps(f)) < 50_000, op.name
    assert len(dumps(ROWS[[op.name for op in ROWS].index("gammaln")].bwd)) < 5_000
    from tapegrad.ops.vocabulary import words

    assert vars(words)  # the two-faced words pickle as their names
    for face in vars(words).values():
        assert pickle.loads(pickle.dumps(face)) is face
