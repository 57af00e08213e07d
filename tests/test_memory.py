"""A training loop reuses the same tape memory every step."""

from __future__ import annotations

import numpy as np

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.tape import current_tape


def test_tape_capacity_stops_growing_over_10000_steps():
    rng = np.random.default_rng(0)
    data = rng.standard_normal((8, 3))
    target = rng.standard_normal(8)
    w = tg.tensor(rng.standard_normal(3) * 0.1, requires_grad=True)
    b = tg.tensor(0.0, requires_grad=True)
    tape = current_tape()
    caps = []
    losses = []
    for step in range(10_000):
        pred = tnp.tanh(tg.tensor(data) @ w + b)
        loss = tnp.mean((pred - target) ** 2)
        loss.backward()
        w = tg.tensor(w.numpy() - 0.05 * w.grad, requires_grad=True)
        b = tg.tensor(b.numpy() - 0.05 * b.grad, requires_grad=True)
        if step % 1000 == 0:
            caps.append(tape.capacity())
            losses.append(loss.item())
    assert all(c == caps[1] for c in caps[1:]), caps
    assert len(tape.chunks) == 1
    assert losses[-1] < losses[0]  # and it learned something


def test_inference_loop_without_grad_does_not_grow():
    x = tg.tensor(np.ones(64))
    tape = current_tape()
    with tg.no_grad():
        for _ in range(200):
            y = tnp.sin(x) * 2.0
        caps = tape.capacity()
        for _ in range(20_000):
            y = tnp.sin(x) * 2.0
    assert tape.capacity() == caps
    np.testing.assert_allclose(y.numpy(), 2 * np.sin(np.ones(64)))


def test_views_and_transforms_do_not_keep_graphs_alive():
    w = tg.tensor(np.array([0.3, -0.2, 0.5]), requires_grad=True)
    tape = current_tape()
    caps = None
    for step in range(3000):
        ep = w * 2.0
        a, b = ep[0:1], ep[1:]  # views of an intermediate that requires grad
        row = ep.reshape(3, 1).T
        b *= 0.5  # written through: ep changes, and a, row with it
        loss = a * tnp.sum(b) + tnp.sum(row**2)
        loss.backward()
        tg.grad(lambda v: tnp.sum(v[:2] ** 2))(np.ones(3))  # a transform on its own tape
        if step == 1000:
            caps = tape.capacity()
    assert tape.capacity() == caps
    assert len(tape.chunks) == 1
