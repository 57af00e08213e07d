"""Graphs held across a rewind (a metric kept without ``.detach()``, a loss after
``backward(retain_graph=True)``): the thread's tape is handed over to them, memory
follows what user code holds, and the held graphs stay exact."""

from __future__ import annotations

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
