"""Statements of the user guide (docs/guide/) that no other test pinned down, each tried
where it could quietly give a wrong number: p-norms at 0 and NumPy's ufunc ``reduce``
methods on tensors (tensors.md), ``functools.partial`` around a compiled or transformed
function (compile.md), the environment variables ``TAPEGRAD_SOFT_ARENA`` and
``TAPEGRAD_THREADS`` (threads_memory.md), and tensors.md's counts of tapegrad.numpy."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import threading
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
    """What docs/guide/tensors.md says each matrix norm's gradient is at 0: 0 for the
    entrywise and absolute-sum norms, svdvals' tie split for 2, -2 and 'nuc' (finite, never
    NaN)."""
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


# --- functools.partial: "functools.partial arguments are constants of the program" ----


def _weighted(w, k, c=1.0):
    return tnp.sum(w * k) * c


def test_compiled_partial_arguments_are_guarded_constants():
    """An array bound by ``functools.partial`` is compared on every call: changed in
    place, or rebound in the partial's keywords, the step captures again instead of
    replaying the old value."""
    k = np.array([1.0, 2.0])
    p = functools.partial(_weighted, k=k, c=3.0)
    step = tg.compile(p)
    w = np.array([3.0, 4.0])
    for _ in range(2):
        v, g = step.value_and_grad(w)
        assert v == 33.0
        np.testing.assert_array_equal(g, [3.0, 6.0])
    assert step.stats["captures"] == 1
    k[:] = [5.0, -1.0]
    v, g = step.value_and_grad(w)
    assert v == 33.0
    np.testing.assert_array_equal(g, [15.0, -3.0])
    p.keywords["k"] = np.array([0.5, 0.5])
    assert step(w) == 10.5
    assert step.stats["captures"] == 3
    # nested partials, a positional one: the call's argument is then k
    q = functools.partial(functools.partial(_weighted, c=2.0), np.array([1.0, -1.0]))
    v, g = tg.compile(q).value_and_grad(w)
    assert v == -2.0
    np.testing.assert_array_equal(g, [2.0, -2.0])


def test_tensors_inside_a_partial_are_inputs():
    """A tensor that requires grad bound by a partial is an input of the program, read
    again on every call, with its gradient accumulated into ``.grad``; an eager
    transform of the same partial refuses (its NumPy result would drop the
    dependence)."""
    k = tg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    step = tg.compile(functools.partial(_weighted, k=k))
    w = np.array([3.0, 4.0])
    assert step.value_and_grad(w)[0] == 11.0
    np.testing.assert_array_equal(k.grad, w)
    with tg.no_grad():
        k -= 1.0  # in place: the same tensor, new values
    v, g = step.value_and_grad(w)
    assert v == 4.0
    np.testing.assert_array_equal(g, [0.0, 1.0])
    np.testing.assert_array_equal(k.grad, 2 * w)
    k2 = tg.tensor(np.array([10.0, 20.0]), requires_grad=True)
    p = functools.partial(_weighted, k=k2)
    assert tg.compile(p).value_and_grad(w)[0] == 110.0
    np.testing.assert_array_equal(k2.grad, w)
    with pytest.raises(RuntimeError, match="not one of the transform's arguments"):
        tg.grad(functools.partial(_weighted, k=k2))(w)


def test_ode_right_hand_side_in_a_partial():
    """odeint finds a tensor bound by ``functools.partial`` as it finds closures."""
    from tapegrad.integrate import odeint

    th = tg.tensor(0.5, requires_grad=True)
    z = odeint(functools.partial(lambda y, t, k: -k * y, k=th), np.ones(1), np.array([0.0, 1.0]))
    z[-1, 0].backward()
    assert th.grad == pytest.approx(-np.exp(-0.5), rel=1e-6)


def test_compiled_partial_from_threads():
    """One compiled partial called from several threads: each gets its own numbers."""
    step = tg.compile(functools.partial(_weighted, c=2.0))
    out = {}

    def run(i):
        k = np.full(2, float(i))
        for _ in range(3):
            out[i] = step.value_and_grad(np.ones(2), k)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(1, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(1, 4):
        assert out[i][0] == 4.0 * i
        np.testing.assert_array_equal(out[i][1], [2.0 * i, 2.0 * i])


# --- environment variables ------------------------------------------------------------


@pytest.mark.parametrize("threads", ["1", "3"])
def test_soft_arena_and_threads_are_read_from_the_environment(threads):
    """``TAPEGRAD_SOFT_ARENA`` (bytes) sets the soft cap of a tape's arena and
    ``TAPEGRAD_THREADS`` the threads of a large NumPy forward (one: no splitting at all);
    the numbers computed are the same either way."""
    code = (
        "import numpy as np, tapegrad as tg, tapegrad.numpy as tnp\n"
        "from tapegrad import tape\n"
        "from tapegrad.layout import H_THREAD_MIN\n"
        "x = tg.tensor(np.linspace(-1, 1, 5), requires_grad=True)\n"
        "tnp.sum(tnp.sin(x) ** 2).backward()\n"
        "split = int(tape.current_tape().h[H_THREAD_MIN])\n"
        "print(tape.SOFT_ARENA, tape.worker_count(), split, repr(x.grad.tolist()))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.update(TAPEGRAD_SOFT_ARENA="123456", TAPEGRAD_THREADS=threads)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split(maxsplit=3)
    assert out[:2] == ["123456", threads]
    assert (int(out[2]) == 0) == (threads == "1")
    x = np.linspace(-1, 1, 5)
    np.testing.assert_allclose(eval(out[3]), np.sin(2 * x), rtol=1e-14)


# --- "196 names (tnp and tnp.linalg) for 175 op-table rows, 167 differentiable" --------


def test_the_numpy_namespace_counts_in_the_guide():
    """docs/guide/tensors.md's counts of tapegrad.numpy's names and rows are the op
    table's."""
    from tapegrad.ops import ROWS
    from tapegrad.surface import NAMESPACES

    text = (ROOT / "docs" / "guide" / "tensors.md").read_text()
    found = re.search(
        r"(\d+) names \(`tnp` and `tnp.linalg`\) for (\d+) op-table rows, (\d+)", text
    )
    assert found is not None
    names, rows, differentiable = (int(v) for v in found.groups())
    assert names == len(NAMESPACES["numpy"]) + len(NAMESPACES["numpy.linalg"])
    assert f"`tapegrad.numpy`'s {names} names" in (ROOT / "README.md").read_text()
    mine = [r for r in ROWS if r.namespace in ("numpy", "numpy.linalg")]
    assert rows == len(mine)
    assert differentiable == sum(r.differentiable for r in mine)
