"""Capture and replay (tg.compile): replay equals eager for every op, capture counts,
check=True, and what capture refuses."""

from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.layout import H_STAT_NODES

from .custom_ops import Cube
from .optable_cases import cases

DIFFERENTIABLE = [c for c in cases() if c.op.differentiable]


@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=lambda c: c.id)
def test_replay_equals_eager(case):
    args = case.args()
    out_shape = np.shape(case.f(np, *args))
    v = np.random.default_rng(2).standard_normal(out_shape)

    def loss(*a):
        return tnp.sum(case.f(tnp, *a) * v)

    argnums = tuple(range(len(args)))
    step = tg.compile(loss, argnums=argnums)
    # capture (its first backward prunes), then replays on new values that reuse the
    # pruning of the first one
    for scale in (1.0, 0.9, 1.1):
        moved = [a * scale for a in args]
        value, grads = step.value_and_grad(*moved)
        ev, eg = tg.value_and_grad(loss, argnums=argnums)(*moved)
        np.testing.assert_allclose(value, ev, rtol=1e-12, atol=1e-12)
        for g, e in zip(grads, eg):
            np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)
    if case.op.name in READS_VALUES:  # an order read in Python is a guard: new values
        assert step.stats["replays"] == 3  # may capture again (never replay stale)
        return
    assert step.stats == {
        "captures": 1,
        "replays": 3,
        "guard_failures": 0,
        "checks": 0,
        "programs": 1,
    }


# rows whose function reads the values in Python (a sort order, an interpolation
# segment): tg.compile guards them
READS_VALUES = {"sort", "median", "quantile", "percentile", "interp", "partition"}


def test_capture_counts_per_signature():
    rng = np.random.default_rng(0)
    step = tg.compile(lambda x, n: tnp.sum(tnp.sin(x) ** n))
    for _ in range(5):
        step.value_and_grad(rng.random(3), 2)
    assert step.stats["captures"] == 1 and step.stats["replays"] == 5
    step.value_and_grad(rng.random(4), 2)  # new shape
    assert step.stats["captures"] == 2
    step.value_and_grad(rng.random(4), 3)  # new Python constant
    assert step.stats["captures"] == 3
    step.value_and_grad(rng.random(4).astype(np.float32), 3)  # new dtype
    assert step.stats["captures"] == 4
    assert len(step.programs) == 4


def test_value_only_aux_argnums_and_float32():
    def f(w, b, x):
        pred = tnp.tanh(x @ w + b)
        return tnp.mean(pred**2), {"pred": pred}

    step = tg.compile(f, argnums=(0, 1), has_aux=True)
    w, b, x = np.ones((3, 2)), 0.5, np.random.default_rng(0).standard_normal((4, 3))
    (value, aux), (gw, gb) = step.value_and_grad(w, b, x)
    (ev, eaux), (ew, eb) = tg.value_and_grad(f, argnums=(0, 1), has_aux=True)(w, b, x)
    assert value == pytest.approx(ev) and isinstance(gb, np.floating)
    assert gb == pytest.approx(eb)
    np.testing.assert_allclose(gw, ew)
    np.testing.assert_allclose(aux["pred"], eaux["pred"])
    v2, aux2 = step(w * 2, b, x)
    assert v2 == pytest.approx(f(tg.tensor(w * 2), b, x)[0].item())
    assert aux2["pred"].shape == (4, 2)
    s32 = tg.compile(lambda a: tnp.sum(a * a))
    _, g = s32.value_and_grad(np.ones(3, np.float32))
    assert g.dtype == np.float32


def test_training_loop_replays_without_growing():
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((32, 2)), rng.standard_normal(32)

    def loss(w):
        return tnp.mean((tnp.tanh(x @ w) - y) ** 2)

    step = tg.compile(loss)
    w = np.zeros(2)
    first = None
    for _ in range(200):
        value, g = step.value_and_grad(w)
        first = first if first is not None else value
        w = w - 0.5 * g
    assert value < first
    program = next(iter(step.programs.values()))[0]
    caps = program.tape.capacity()
    for _ in range(50):
        step.value_and_grad(w)
    assert program.tape.capacity() == caps
    assert step.stats["captures"] == 1


SETTINGS = {"scale": 1.0}  # a Python number fn reads from outside: a guard sees it


class Holder:
    factor = 1.0  # a class attribute read through an instance: no route, no guard


HOLDER = Holder()


def test_check_mode_catches_what_guards_cannot_see():
    def f(x):
        return tnp.sum(tnp.sin(x)) * SETTINGS["scale"] * HOLDER.factor

    checked = tg.compile(f, check=True)
    checked.value_and_grad(np.ones(2))
    checked.value_and_grad(np.ones(2) * 2)  # same computation: fine
    assert checked.stats["checks"] == 1
    SETTINGS["scale"] = 2.0  # a plain value read from outside: a guard, captured again
    try:
        value, _ = checked.value_and_grad(np.ones(2))
        assert value == pytest.approx(2.0 * 2 * np.sin(1.0))
        assert checked.stats["captures"] == 2
        Holder.factor = 3.0
        with pytest.raises(RuntimeError, match="different computation"):
            checked.value_and_grad(np.ones(2))
    finally:
        SETTINGS["scale"] = 1.0
        Holder.factor = 1.0


def test_capture_refuses_python_code_it_cannot_replay():
    with pytest.raises(TypeError, match="_Checkpoint cannot be captured"):
        tg.compile(lambda x: tnp.sum(tg.checkpoint(Cube.apply, x))).value_and_grad(np.ones(2))

    def hooked(x):
        y = x * 2
        y.register_hook(lambda g: g)
        return tnp.sum(y)

    with pytest.raises(TypeError, match="hooks"):
        tg.compile(hooked).value_and_grad(np.ones(2))
    with pytest.raises(TypeError, match="scalar"):
        tg.compile(lambda x: x * 2).value_and_grad(np.ones(2))
    with pytest.raises(TypeError, match="cannot differentiate argument 0"):
        tg.compile(lambda x: tnp.sum(x * 1.0)).value_and_grad(np.arange(3))


def test_plans_follow_value_only_calls_and_survive_errors():
    """Replays after the first run from plans (flat kernel lists): a value-only call
    before any gradient, a kernel error mid-forward (singular matrix) and a following
    good call must all give eager's answers."""

    def f(a, b):
        return tnp.sum(tnp.linalg.inv(a) @ b) + tnp.sum(tnp.tanh(b) ** 2)

    step = tg.compile(f, argnums=(0, 1))
    eager = tg.value_and_grad(f, argnums=(0, 1))
    rng = np.random.default_rng(5)
    b = rng.standard_normal((2, 3))
    good = [np.eye(2) + 0.1 * rng.standard_normal((2, 2)) for _ in range(4)]
    assert step(good[0], b) == pytest.approx(eager(good[0], b)[0])  # forward plan only
    program = next(iter(step.programs.values()))[0]
    assert program.fwd_plan is not None and program.bwd_plan is None
    for a in good[:2]:
        value, (ga, gb) = step.value_and_grad(a, b)
        ev, (ea, eb) = eager(a, b)
        assert value == pytest.approx(ev, rel=1e-12)
        np.testing.assert_allclose(ga, ea, rtol=1e-10)
        np.testing.assert_allclose(gb, eb, rtol=1e-10)
    assert program.bwd_plan is not None
    # the plan runs exactly the nodes the scheduler found live
    assert program.tape.h[H_STAT_NODES] == program.bwd_plan.shape[1] > 0
    with pytest.raises(np.linalg.LinAlgError, match="singular matrix"):
        step.value_and_grad(np.ones((2, 2)), b)
    assert program.fwd_plan is None and program.bwd_plan is None
    value, (ga, gb) = step.value_and_grad(good[3], b)
    ev, (ea, eb) = eager(good[3], b)
    assert value == pytest.approx(ev, rel=1e-12)
    np.testing.assert_allclose(ga, ea, rtol=1e-10)
    np.testing.assert_allclose(gb, eb, rtol=1e-10)
    assert step.stats["captures"] == 1


def test_replay_under_anomaly_mode_checks_gradients():
    step = tg.compile(lambda z: tnp.sum(tnp.sqrt(z) * 0.0))
    for _ in range(2):  # plans built
        _, g = step.value_and_grad(np.array([1.0, 2.0]))
        np.testing.assert_array_equal(g, 0.0)
    _, g = step.value_and_grad(np.array([0.0, 1.0]))  # unchecked: NaN flows through
    assert np.isnan(g[0])
    with tg.detect_anomaly():
        with pytest.raises(RuntimeError, match="Function 'sqrt' returned nan"):
            step.value_and_grad(np.array([0.0, 1.0]))
        _, g = step.value_and_grad(np.array([4.0, 1.0]))
        np.testing.assert_allclose(g, 0.0)
    _, g = step.value_and_grad(np.array([4.0, 1.0]))  # planned again
    np.testing.assert_allclose(g, 0.0)
    assert next(iter(step.programs.values()))[0].bwd_plan is not None


def test_aux_with_python_numbers_is_not_read_as_slots():
    # an int in aux used to be taken for a slot id (a read of arbitrary memory)
    def loss(w, x):
        return tnp.sum(x @ w), (x.shape[0], x * 2.0, "label")

    step = tg.compile(loss, has_aux=True)
    for scale in (1.0, 2.0):
        (value, (rows, doubled, label)), _ = step.value_and_grad(np.ones(3), np.full((4, 3), scale))
        assert rows == 4 and label == "label" and value == pytest.approx(12 * scale)
        np.testing.assert_array_equal(doubled, np.full((4, 3), 2 * scale))
    assert step.stats["captures"] == 1
