"""Graphs held across a rewind (a metric kept without ``.detach()``, a loss after
``backward(retain_graph=True)``): the thread's tape is handed over to them, memory
follows what user code holds, and the held graphs stay exact."""

from __future__ import annotations

import copy
import threading

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import tape as tape_module
from tapegrad.tape import current_tape

RNG = np.random.default_rng(0)
X = RNG.standard_normal((5, 4))
W0 = RNG.standard_normal((4, 3))


def f(w):
    return tnp.sum(tnp.tanh(X @ w) ** 2)


def f_grad(w):
    return tg.grad(f)(w)


def _handed() -> list:
    current_tape()  # the thread's tape state exists
    return tape_module._tls.handed


def test_held_metrics_keep_their_graphs_and_nothing_else():
    w = tg.tensor(W0, requires_grad=True)
    held = []
    start = len(_handed())
    for i in range(300):
        f(w).backward()
        w.grad = None
        if i % 50 == 0:
            held.append(2.0 * f(w))  # a metric with a graph, never run backward here
    # one handed-over tape per held metric (plus at most one spare), and the tape the
    # loop records into stays at its size
    assert len(held) <= len(_handed()) - start <= len(held) + 1
    caps = current_tape().capacity()
    for _ in range(100):
        f(w).backward()
        w.grad = None
    assert current_tape().capacity() == caps
    for metric in held:  # each is still differentiable, exactly
        w.grad = None
        metric.backward()
        np.testing.assert_allclose(w.grad, 2.0 * f_grad(W0), rtol=1e-12)
    with pytest.raises(RuntimeError, match="second time"):
        held[0].backward()  # and freed by that backward, as in PyTorch


def test_dropped_metrics_give_their_tapes_back():
    w = tg.tensor(W0, requires_grad=True)
    start = len(_handed())
    for _ in range(200):
        metric = f(w) * 1.0  # held into the next step, then dropped
        f(w).backward()
        w.grad = None
        assert metric.requires_grad
    assert len(_handed()) - start <= 2


def test_retain_graph_every_step_is_freed_when_the_loss_is_dropped():
    w = tg.tensor(W0, requires_grad=True)
    start = len(_handed())
    tape = None
    for i in range(300):
        w.grad = None
        loss = f(w)
        loss.backward(retain_graph=True)
        if i == 100:
            tape = current_tape().capacity()
    assert len(_handed()) - start <= 2
    np.testing.assert_allclose(w.grad, f_grad(W0), rtol=1e-12)
    assert current_tape().capacity() == tape
    w.grad = None
    loss.backward()  # the last loss's graph is retained, as asked
    np.testing.assert_allclose(w.grad, f_grad(W0), rtol=1e-12)


def test_a_running_sum_of_losses_differentiates_through_every_step():
    """``running = running + loss`` without ``.detach()`` (a PyTorch memory leak, but
    exact): each step's tape is handed over, and the backward runs on through all."""
    w = tg.tensor(W0, requires_grad=True)
    running = 0.0
    for step in range(6):
        loss = f(w) * float(step + 1)
        running = running + loss
        loss.backward(retain_graph=True)  # a rewind is due at the next op
        w.grad = None
    running.backward()
    np.testing.assert_allclose(w.grad, 21.0 * f_grad(W0), rtol=1e-12)
    with pytest.raises(RuntimeError, match="second time"):
        running.backward()


def test_a_held_result_rebound_in_place_keeps_the_gradient_of_the_old_value():
    w = tg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    m = tnp.sum(w * w)  # held across the next backward's rewind
    tnp.sum(w * 3.0).backward()
    w.grad = None
    y = m * 2.0  # binds m's held graph into the new tape
    m += 1.0  # m is now a result of the new tape
    tnp.sum(y).backward()  # through the old value of m
    np.testing.assert_array_equal(w.grad, [4.0, 8.0])


def test_two_losses_on_a_shared_trunk_with_ops_between():
    w = tg.tensor(W0, requires_grad=True)
    h = tnp.tanh(X @ w)
    l1 = tnp.sum(h**2)
    l1.backward(retain_graph=True)
    l2 = tnp.sum(h * 3.0)  # an op after the backward, on the held trunk
    l2.backward()
    want = tg.grad(lambda v: tnp.sum(tnp.tanh(X @ v) ** 2) + tnp.sum(tnp.tanh(X @ v) * 3.0))(W0)
    np.testing.assert_allclose(w.grad, want, rtol=1e-12)


def test_a_hand_over_under_no_grad_keeps_the_grad_mode():
    w = tg.tensor(W0, requires_grad=True)
    metric = f(w)
    f(w).backward()
    with tg.no_grad():
        y = f(w)  # the first op after the backward: the tape is handed over here
        assert not y.requires_grad and not tg.is_grad_enabled()
    assert tg.is_grad_enabled()
    z = f(w)
    assert z.requires_grad
    w.grad = None
    metric.backward()
    np.testing.assert_allclose(w.grad, f_grad(W0), rtol=1e-12)


def test_hooks_on_a_held_result_run_in_the_chained_backward():
    w = tg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    m = w * w
    seen = []
    m.register_hook(lambda g: seen.append(g.copy()) or g * 10.0)
    tnp.sum(w).backward()  # m is held across this step
    w.grad = None
    tnp.sum(m * 2.0).backward()
    np.testing.assert_array_equal(seen[0], [2.0, 2.0])
    np.testing.assert_array_equal(w.grad, [40.0, 80.0])


def test_a_held_graph_of_another_thread_cannot_join_this_one():
    w = tg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    box = []

    def work():
        box.append(tnp.sum(w * w))
        tnp.sum(w).backward()  # hands the tape over at the next op
        box.append(w * 1.0)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    with pytest.raises(RuntimeError, match="another thread"):
        box[0] * 2.0
    w.grad = None
    box[0].backward()  # its own backward still runs
    np.testing.assert_array_equal(w.grad, [2.0, 4.0])


# --- ways to get a wrong number or a crash out of held graphs, each refused or right ---


def test_a_view_kept_across_handovers_keeps_its_values():
    w = tg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    xb = tg.tensor(np.arange(6.0))[0:3]  # a batch view kept across steps
    for i in range(4):
        h = w
        for _ in range(10 + 20 * i):  # steps of growing length
            h = tnp.tanh(h) * 1.5
        loss = tnp.sum(h) + tnp.sum(w * xb)
        metric = loss * 1.0 if i in (0, 2) else None  # noqa: F841 -- held into the next step
        loss.backward()
        np.testing.assert_array_equal(xb.numpy(), [0.0, 1.0, 2.0])
    w.grad = None
    tnp.sum(w * xb).backward()
    np.testing.assert_array_equal(w.grad, [0.0, 1.0, 2.0])


def test_a_copy_of_a_held_result_outlives_the_original():
    w = tg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    m = tnp.sum(w * w) * 1.0
    tnp.sum(w * 3.0).backward()
    probe = tnp.sum(w * 7.0)  # handover: m keeps the old tape
    m2 = copy.copy(m)
    del m
    for _ in range(3):  # more handovers; the old tape must not be reused under m2
        keep = tnp.sum(w) * 2.0  # noqa: F841
        tnp.sum(w * 5.0).backward()
        probe = tnp.sum(w * 7.0)  # noqa: F841
    assert m2.item() == 14.0
    w.grad = None
    m2.backward()
    np.testing.assert_array_equal(w.grad, [2.0, 4.0, 6.0])


def _step(w, c=1.0):
    tnp.sum(w * c).backward()


@pytest.mark.parametrize("order", ["ab", "ba"])
def test_a_held_result_reached_by_two_paths_runs_its_tape_once(order):
    w = tg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    a = tnp.sum(w * w)
    _step(w)
    b = a * 3.0  # a step later, from a's held graph
    _step(w, 2.0)
    z = a + b if order == "ab" else b + a  # reaches a's tape directly and through b
    w.grad = None
    z.backward()
    np.testing.assert_array_equal(w.grad, 8.0 * np.array([1.0, 2.0, 3.0]))
    with pytest.raises(RuntimeError, match="second time"):
        z.backward()
    np.testing.assert_array_equal(w.grad, 8.0 * np.array([1.0, 2.0, 3.0]))  # unchanged


def test_fan_out_of_a_held_result_over_two_steps():
    w = tg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    a = tnp.sum(w * w)
    _step(w)
    b = a * 2.0
    _step(w)
    c = a * 3.0
    _step(w)
    w.grad = None
    (b + c).backward()
    np.testing.assert_array_equal(w.grad, [10.0, 20.0, 30.0])


def test_views_of_a_held_tensor_follow_writes_after_a_handover():
    w = tg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    v = w * w
    r = v[0:2]
    _step(w)
    _ = w * 1.0  # handover: v and r held
    v[0] = w[2] * 100.0
    np.testing.assert_array_equal(r.numpy(), [300.0, 4.0])
    s = tnp.sum(r * tnp.asarray([1.0, 10.0]))
    w.grad = None
    s.backward()
    assert s.item() == 340.0
    np.testing.assert_array_equal(w.grad, [0.0, 40.0, 100.0])


def test_a_leaf_hook_sees_the_whole_gradient_once_across_tapes():
    w = tg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    w.register_hook(lambda g: np.clip(g, -1.0, 1.0))  # not linear: needs the sum
    calls = []
    w.register_post_accumulate_grad_hook(lambda t: calls.append(1))
    m = tnp.sum(w * w)
    _step(w, 3.0)
    w.grad = None
    calls.clear()
    (m + tnp.sum(w * 5.0)).backward()  # w's gradient comes from two tapes
    np.testing.assert_array_equal(w.grad, [1.0, 1.0, 1.0])
    assert len(calls) == 1


def test_a_long_running_sum_does_not_recurse():
    w = tg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    running = 0.0
    for _ in range(1500):  # one handed-over tape per step, chained
        loss = tnp.sum(w * w)
        loss.backward(retain_graph=True)
        running = running + loss
    w.grad = None
    running.backward()
    np.testing.assert_array_equal(w.grad, 3000.0 * np.array([1.0, 2.0, 3.0]))


def test_backward_of_a_running_threads_graph_raises():
    u = tg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    box, made, go = [], threading.Event(), threading.Event()

    def worker():
        box.append(tnp.sum(u * u))
        made.set()
        go.wait(10)  # still running (and free to record into its tape)

    t = threading.Thread(target=worker)
    t.start()
    made.wait(10)
    try:
        with pytest.raises(RuntimeError, match="another thread that is still running"):
            box[0].backward()
        assert u.grad is None
    finally:
        go.set()
        t.join()
    box[0].backward()  # once the thread has ended, its graph is free to run
    np.testing.assert_array_equal(u.grad, [2.0, 4.0, 6.0])


# --- more of them ------------------------------------------------------------------------


def _flush():
    """An unrelated backward: the next op rewinds or hands the tape over."""
    d = tg.tensor(1.0, requires_grad=True)
    (d * 1.0).backward()


@pytest.mark.parametrize("handover", [False, True])
def test_a_backward_into_a_tape_whose_backward_runs_raises(handover):
    x = tg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    y = tg.tensor(np.array([0.5, 0.25, 2.0]), requires_grad=True)
    u = x * x
    r = tnp.sum(u * 3.0)
    s = tnp.sum(x * y)  # the same tape as r
    if handover:
        _flush()
        _ = y * 1.0

    def hook(g):
        s.backward()  # re-enters r's tape in the middle of its backward

    u.register_hook(hook)
    with pytest.raises(RuntimeError, match="already running"):
        r.backward()
    assert y.grad is None
    s.backward()  # each on its own is fine
    np.testing.assert_array_equal(y.grad, [1.0, 2.0, 3.0])


def test_a_chained_backward_from_a_hook_into_the_running_tape_raises():
    x = tg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    y = tg.tensor(np.array([0.5, 0.25, 2.0]), requires_grad=True)
    u = x * x
    r = tnp.sum(u * 3.0)
    s = tnp.sum(x * y)
    _flush()
    _ = y * 1.0  # r and s are in a handed-over tape

    def hook(g):
        with tg.enable_grad():
            (s * 2.0).backward()  # chains back into the tape that is running

    u.register_hook(hook)
    with pytest.raises(RuntimeError, match="already running"):
        r.backward()


def test_repeated_retained_backwards_through_a_merged_root_do_not_grow():
    x = tg.tensor(np.linspace(0.0, 1.0, 1000), requires_grad=True)
    r, s = tnp.sin(x), tnp.cos(x)  # held in one tape
    _flush()
    _ = x * 1.0
    out = tnp.sum(r * r) + tnp.sum(s * 2.0)  # two seeds into that tape
    out.backward(retain_graph=True)
    home = r._tape
    sizes = (len(home.handles), home.h[tape_module.H_NNODES])
    for _ in range(20):
        x.grad = None
        out.backward(retain_graph=True)
    assert (len(home.handles), home.h[tape_module.H_NNODES]) == sizes
    xv = np.linspace(0.0, 1.0, 1000)
    np.testing.assert_allclose(x.grad, 2 * np.sin(xv) * np.cos(xv) - 2 * np.sin(xv))


def test_a_dropped_chain_of_tapes_is_let_go_at_once():
    w = tg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    start = len(_handed())
    running = 0.0
    for _ in range(30):
        loss = tnp.sum(tnp.sin(w))
        loss.backward(retain_graph=True)
        running = running + loss
    assert len(_handed()) - start >= 29
    running.backward()
    del running, loss
    _flush()
    _ = w * 1.0  # the next rewind lets every dropped tape go
    assert len(_handed()) - start <= 1


def test_anomaly_mode_names_the_line_of_a_held_op_reached_through_a_merged_root():
    with tg.detect_anomaly():
        x = tg.tensor(np.array([0.0, 1.0]), requires_grad=True)
        r = tnp.sqrt(x)  # the line anomaly mode must name
        s = tnp.sum(x * 2.0)
        _flush()
        _ = x * 1.0
        out = tnp.sum(r) + s * 3.0
        with pytest.raises(RuntimeError, match=r"r = tnp\.sqrt\(x\)"):
            out.backward()


def test_a_leaf_changed_in_place_after_a_handover_refuses_the_held_backward():
    """As without a handover (and in PyTorch): the held graph saved the leaf's old value."""
    w = tg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    m = tnp.sum(w * w)  # saves w
    _flush()
    _ = w * 1.0  # handover: w is unbound from m's tape
    with tg.no_grad():
        w -= 0.1  # a parameter step
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        m.backward()
    y = m * 2.0  # through a chained slot too
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.backward()
    k = tnp.sum(w * 3.0)  # w * 3 saves no w: a later step without updates is exact
    _flush()
    _ = w * 1.0
    k.backward()
    np.testing.assert_array_equal(w.grad, [3.0, 3.0, 3.0])
