"""Replay's fused runs of scalar nodes (tapegrad/fused.py, dispatch.fused_forward and
fused_backward) give the bits the unfused plan gives, for every row they serve, and
stay out of the way wherever they must not run."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import fused
from tapegrad._generated import SCALAR_BWD_OPS, SCALAR_FWD_OPS
from tapegrad.ops import Kind

from .optable_cases import cases

SCALAR_CASES = [
    c for c in cases() if c.op.kind in (Kind.UNARY, Kind.BINARY) and all(s == () for s in c.shapes)
]


@pytest.fixture
def unfused(monkeypatch):
    """A context in which no plan is fused (as on a cold cache before the executors
    come): steps made and called inside it replay unfused."""

    class Off:
        def __enter__(self):
            monkeypatch.setattr(fused, "executors", lambda: None)

        def __exit__(self, *exc):
            monkeypatch.undo()

    return Off()


def _runs(step) -> tuple[int, int]:
    """Fused entries in the forward and backward plans of ``step``'s programs."""
    fwd = bwd = 0
    for program in (p for chain in step.programs.values() for p in chain):
        if program.fwd_plan is not None:
            fwd += int(np.sum(program.fwd_plan[1] > 1))
        if program.bwd_plan is not None:
            bwd += int(np.sum(program.bwd_plan[2] > 1))
    return fwd, bwd


def _replays(fn, args, n=3):
    """``n`` calls of ``tg.compile(fn).value_and_grad`` (the first captures, the second
    replays generally and makes the plans, the third runs them)."""
    step = tg.compile(fn, argnums=tuple(range(len(args))))
    return step, [step.value_and_grad(*args) for _ in range(n)]


def _same_bits(a, b):
    (va, ga), (vb, gb) = a, b
    assert np.asarray(va).tobytes() == np.asarray(vb).tobytes()
    for x, y in zip(ga, gb, strict=True):
        assert np.asarray(x).tobytes() == np.asarray(y).tobytes()


def test_every_float64_unary_and_binary_row_is_served():
    from tapegrad.ops import ROWS

    want = {op.code for op in ROWS if op.kind in (Kind.UNARY, Kind.BINARY) and 0 in op.sigs}
    assert SCALAR_FWD_OPS == want
    assert SCALAR_BWD_OPS == {c for c in want if ROWS[c].bwd is not None}


@pytest.mark.parametrize("case", SCALAR_CASES, ids=lambda c: c.id)
def test_fused_replay_has_the_unfused_bits(case, unfused):
    """Each row between two multiplies (a run of three nodes): fused against unfused
    replay, bitwise, values and gradients; and against eager within rounding."""
    args = [float(a) for a in case.args()]

    def fn(*xs):
        return case.f(tnp, *[x * 1.0 for x in xs]) * 1.5

    step, got = _replays(fn, args)
    assert _runs(step)[0] == 1
    if case.op.differentiable:
        assert _runs(step)[1] == 1
    with unfused:
        plain, want = _replays(fn, args)
    assert _runs(plain) == (0, 0)
    for a, b in zip(got, want, strict=True):
        _same_bits(a, b)
    if case.op.differentiable:
        eager = tg.value_and_grad(fn, argnums=tuple(range(len(args))))(*args)
        np.testing.assert_allclose(got[-1][0], eager[0], rtol=1e-14)
        np.testing.assert_allclose(np.array(got[-1][1]), np.array(eager[1]), rtol=1e-14)


def recurrence(params, u):
    a, b, c = params[0], params[1], params[2]
    s = 0.0
    for k in range(u.shape[0]):
        s = s + tnp.tanh(a * s + b * u[k]) * c
    return s**2


def test_scalar_recurrence_fused_matches_unfused_and_finite_differences(unfused):
    rng = np.random.default_rng(0)
    u = rng.standard_normal(200)
    p = np.array([0.5, 0.3, 0.2])
    step = tg.compile(recurrence)
    got = [step.value_and_grad(p, u) for _ in range(3)]
    assert all(r > 0 for r in _runs(step))
    with unfused:
        plain = tg.compile(recurrence)
        want = [plain.value_and_grad(p, u) for _ in range(3)]
    for a, b in zip(got, want, strict=True):
        _same_bits((a[0], [a[1]]), (b[0], [b[1]]))
    eps = 1e-6
    fd = [
        (recurrence(p + eps * e, u).item() - recurrence(p - eps * e, u).item()) / (2 * eps)
        for e in np.eye(3)
    ]
    np.testing.assert_allclose(got[-1][1], fd, rtol=1e-6)


@pytest.mark.parametrize("x", [0.7, -1.3])
def test_one_slot_as_both_operands_and_constants(x, unfused):
    """``x * x`` (the shared-slot mark), a constant operand on either side (mask bits),
    and add's pass-through buffers, in one run."""

    def fn(x):
        y = x * x
        z = 2.0 * y + y * 3.0
        w = z - x
        return w + (1.0 - w) * w

    step, got = _replays(fn, [x])
    assert all(r > 0 for r in _runs(step))
    with unfused:
        _, want = _replays(fn, [x])
    for a, b in zip(got, want, strict=True):
        _same_bits(a, b)
    eager = tg.value_and_grad(fn)(x)
    np.testing.assert_allclose(got[-1][1], eager[1], rtol=1e-14)


def test_a_guard_inside_a_run_still_decides_the_branch():
    """A value read in Python in the middle of a run of scalar nodes: the run's guards
    are checked after it, and a changed branch is captured, not replayed."""

    def fn(x, k):
        w = k * 2.0 + 1.0  # no gradient (k is not differentiated); read below
        y = tnp.sin(x * w) * 3.0  # the run goes on past w
        if float(w) > 2.0:
            return tnp.exp(y * 0.5) + y
        return tnp.cos(y) * y

    step = tg.compile(fn, argnums=0)
    inside = 0
    for x, k in [
        (0.3, 1.0),
        (0.4, 1.0),
        (0.5, 1.0),
        (0.3, 0.2),
        (0.4, 0.2),
        (0.6, 0.9),
        (0.5, 0.1),
    ]:
        v, g = step.value_and_grad(x, k)
        ev, eg = tg.value_and_grad(fn)(x, k)
        assert v == ev
        np.testing.assert_allclose(g, eg, rtol=1e-14)
        for program in (p for chain in step.programs.values() for p in chain):
            if program.fwd_plan is None or program.guards.shape[1] == 0:
                continue
            runs = program.fwd_plan[1]
            for node in program.guards[0]:
                start = max(i for i in range(node + 1) if runs[i] != 0)
                inside += runs[start] > 1 and start + runs[start] - 1 > node
    assert inside > 0  # the guarded node was inside a fused run
    assert step.stats["guard_failures"] > 0


def test_float32_and_broadcasting_nodes_are_not_fused():
    def fn32(x):
        y = x * np.float32(2.0)
        return tnp.sum(tnp.tanh(y) * y)

    step = tg.compile(fn32)
    x32 = np.array([0.5], np.float32)
    for _ in range(3):
        _, g = step.value_and_grad(x32)
    assert _runs(step) == (0, 0)
    assert g.dtype == np.float32

    def fn(x, w):
        return tnp.sum(tnp.tanh(x * w) * x)  # (1,) times (3,): not one element

    step = tg.compile(fn, argnums=(0, 1))
    x, w = np.array([0.5]), np.array([1.0, 2.0, 3.0])
    for _ in range(3):
        _, (gx, gw) = step.value_and_grad(x, w)
    _, (ex, ew) = tg.value_and_grad(fn, argnums=(0, 1))(x, w)
    np.testing.assert_allclose(gx, ex, rtol=1e-14)
    np.testing.assert_allclose(gw, ew, rtol=1e-14)


def test_threads_replay_one_fused_step():
    rng = np.random.default_rng(1)
    u = rng.standard_normal(50)
    step = tg.compile(recurrence)
    ps = [np.array([0.5, 0.3, 0.2]) + 0.01 * i for i in range(8)]
    want = [tg.value_and_grad(recurrence)(p, u) for p in ps]
    got = [None] * len(ps)

    def work(i):
        for _ in range(5):
            got[i] = step.value_and_grad(ps[i], u)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(ps))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (v, g), (ev, eg) in zip(got, want, strict=True):
        np.testing.assert_allclose(v, ev, rtol=1e-13)
        np.testing.assert_allclose(g, eg, rtol=1e-13)


def test_ode_gradients_fused_and_unfused_agree(unfused):
    from tapegrad.integrate import odeint

    def lv(z, t, th):
        x, y = z[0], z[1]
        return tnp.stack([th[0] * x - th[1] * x * y, th[3] * x * y - th[2] * y])

    def loss(th):
        z = odeint(lv, np.array([10.0, 5.0]), np.linspace(0, 2, 5), th, rtol=1e-8)
        return tnp.sum(z**2)

    th = np.array([1.0, 0.1, 1.5, 0.075])
    got = tg.value_and_grad(loss)(th)
    with unfused:
        want = tg.value_and_grad(loss)(th)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-10)


def test_hvp_and_composition_through_fused_programs(unfused):
    """Second order: ``step.hvp`` replays a recorded gradient (a program of scalar
    nodes), and a compiled step called on tensors that require grad is one node of the
    caller's graph, differentiated again by ``tg.hessian``."""

    def f(p):
        a, b = p[0], p[1]
        s = a
        for _ in range(20):
            s = tnp.sin(s * b) + a * 0.5
        return s * s

    p = np.array([0.4, 1.3])
    v = np.array([0.3, -0.7])
    step = tg.compile(f)
    got = [step.hvp(p, v) for _ in range(3)]
    assert _runs(step._hvp)[1] > 0
    with unfused:
        plain = tg.compile(f)
        want = [plain.hvp(p, v) for _ in range(3)]
    for a, b in zip(got, want, strict=True):
        assert a.tobytes() == b.tobytes()
    np.testing.assert_allclose(got[-1], tg.hessian(f)(p) @ v, rtol=1e-12)
    eps = 1e-5
    fd = (tg.grad(f)(p + eps * v) - tg.grad(f)(p - eps * v)) / (2 * eps)
    np.testing.assert_allclose(got[-1], fd, rtol=1e-6)
    for _ in range(3):
        step.value_and_grad(p)  # the value-and-grad programs, fused too
    np.testing.assert_allclose(tg.hessian(lambda q: step(q))(p), tg.hessian(f)(p), rtol=1e-12)


def test_float_arguments_in_containers_are_fused_inputs(unfused):
    """Python floats in a dict and a list are 0-d inputs of the program: new values
    each call, never frozen into the fused run."""

    def f(params):
        s = params["a"] * params["xs"][0]
        for x in params["xs"][1:]:
            s = tnp.tanh(s + x * params["a"])
        return s * s

    step = tg.compile(f)
    for i in range(5):
        params = {"a": 0.3 + 0.1 * i, "xs": [0.1 * i, -0.2, 0.5 + i]}
        v, g = step.value_and_grad(params)
        ev, eg = tg.value_and_grad(f)(params)
        assert v == ev
        np.testing.assert_allclose(g["a"], eg["a"], rtol=1e-14)
        np.testing.assert_allclose(g["xs"], eg["xs"], rtol=1e-14)
    assert all(r > 0 for r in _runs(step))


def test_plans_made_before_the_executors_are_fused_when_they_come(monkeypatch):
    """On a cold cache the executors come from the background compiler after a
    program's plans exist: the next call fuses them, and nothing changes but speed."""
    rng = np.random.default_rng(2)
    u = rng.standard_normal(30)
    p = np.array([0.5, 0.3, 0.2])
    monkeypatch.setattr(fused, "executors", lambda: None)
    step = tg.compile(recurrence)
    before = [step.value_and_grad(p, u) for _ in range(3)]
    assert _runs(step) == (0, 0)
    monkeypatch.undo()
    after = [step.value_and_grad(p, u) for _ in range(2)]
    assert all(r > 0 for r in _runs(step))
    for a in after:
        _same_bits((a[0], [a[1]]), (before[-1][0], [before[-1][1]]))
