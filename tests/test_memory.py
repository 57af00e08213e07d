"""A training loop reuses the same tape memory every step."""

from __future__ import annotations

import collections
import contextlib
import os
import threading

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.tape import current_tape

from .helpers import in_new_thread


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


def _arena_bytes() -> int:
    """Arena bytes of this thread's eager tape and the tapes it handed over."""
    from tapegrad import tape as tape_module

    tapes = [current_tape(), *getattr(tape_module._tls, "handed", [])]
    return sum(t.capacity()["arena"] for t in tapes)


def test_forward_loop_without_backward_does_not_grow():
    """Losses computed with requires-grad inputs and dropped without backward (a line
    search's value-only evaluations): their graphs are garbage, the tape cannot rewind
    while a forward is running, so without the handover the arena grew by a whole
    forward every step."""
    in_new_thread(_forward_loop)


def _forward_loop() -> None:
    rng = np.random.default_rng(0)
    x0, w0 = rng.uniform(-1, 1, 400_000), rng.uniform(0.5, 1, 400_000)

    def loss(x, w):
        y = x
        for _ in range(3):
            y = tnp.exp(tnp.tanh(tnp.sin(y) * 0.9)) * w + x
        return tnp.sum(y)

    w = tg.tensor(w0, requires_grad=True)  # a parameter held across the loop
    sizes = []
    for _ in range(60):  # ~60 MB of results a forward: 3.6 GB without the handover
        loss(tg.tensor(x0, requires_grad=True), w)
        sizes.append(_arena_bytes())
    # the tape grows until it holds two forwards (then what the running forward reaches
    # is at most half of it: handed over); then two tapes at most, the one recording and
    # the one left to the forward that was running when it filled
    assert max(sizes[30:]) <= max(sizes[:30]) < 1000 * 2**20, [s >> 20 for s in sizes]
    # and a forward that starts on one tape and goes on in the next still differentiates
    for _ in range(3):
        x = tg.tensor(x0, requires_grad=True)
        value = loss(x, w)
        value.backward()
        gx, gw = tg.grad(lambda a, b: loss(a, b), argnums=(0, 1))(x0, w0)
        np.testing.assert_allclose(x.grad, gx, rtol=1e-13)
        np.testing.assert_allclose(w.grad, gw, rtol=1e-13)
        w.grad = None


def test_one_big_graph_is_not_handed_over():
    """A single graph larger than the handover threshold keeps its tape: the arena holds
    what the held graph needs, so it grows instead (one tape, its chunks)."""
    in_new_thread(_big_graph)


def _big_graph() -> None:
    from tapegrad import tape as tape_module

    x = tg.tensor(np.linspace(0.1, 1.0, 1_000_000), requires_grad=True)
    handed = len(getattr(tape_module._tls, "handed", []))
    y = x
    for _ in range(20):  # ~320 MB of results, all needed by the backward
        y = tnp.sin(y) + x
    assert len(current_tape().chunks) > 1  # it did grow, from the new thread's 1 MB
    tnp.sum(y).backward()
    assert len(getattr(tape_module._tls, "handed", [])) == handed
    np.testing.assert_allclose(x.grad, _chain_grad(x.numpy(), 20), rtol=1e-12)


def _chain_grad(v: np.ndarray, n: int) -> np.ndarray:
    """d/dx of y_n, y_0 = x, y_k = sin(y_{k-1}) + x, by forward accumulation."""
    y, dy = v, np.ones_like(v)
    for _ in range(n):
        y, dy = np.sin(y) + v, np.cos(y) * dy + 1.0
    return dy


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


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.slow
def test_soak_50000_steps_mixing_eager_replay_held_graphs_and_threads():
    """50,000 steps: eager steps, compiled replays, ``retain_graph`` steps, a metric
    with a graph held every 100 steps (the last 5 kept), and a result from a short-lived
    thread every 1,000 steps (the last 5 kept). After warm-up, RSS and the tape's
    capacities stay flat."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 8))
    y = rng.standard_normal((32, 1))
    w1 = tg.tensor(rng.standard_normal((8, 16)) * 0.3, requires_grad=True)
    w2 = tg.tensor(rng.standard_normal((16, 1)) * 0.3, requires_grad=True)

    def loss_of(a, b):
        return tnp.mean((tnp.tanh(x @ a) @ b - y) ** 2)

    step = tg.compile(loss_of, argnums=(0, 1))
    metrics: collections.deque = collections.deque(maxlen=5)
    results: collections.deque = collections.deque(maxlen=5)
    samples = []
    caps = None
    for i in range(50_000):
        kind = i % 3
        if kind == 0:
            loss_of(w1, w2).backward()
            g1, g2 = w1.grad, w2.grad
        elif kind == 1:
            _, (g1, g2) = step.value_and_grad(w1.numpy(), w2.numpy())
        else:
            loss = loss_of(w1, w2)
            loss.backward(retain_graph=True)
            g1, g2 = w1.grad, w2.grad
        with tg.no_grad():
            w1 -= 0.01 * g1
            w2 -= 0.01 * g2
        w1.grad = w2.grad = None
        if i % 100 == 0:
            metrics.append(loss_of(w1, w2) * 1.0)
        if i % 1000 == 0:
            t = threading.Thread(target=lambda: results.append(tnp.sin(tg.tensor(x)) * 2.0))
            t.start()
            t.join()
        if i == 10_000:
            caps = current_tape().capacity()
        if i % 5000 == 0 and i >= 10_000:
            samples.append(_rss_mb())
    print(f"soak: RSS MB every 5,000 steps from 10,000: {samples}; tape {caps}")
    assert np.isfinite(loss_of(w1, w2).item())
    assert current_tape().capacity()["node"] == caps["node"]
    assert max(samples) - samples[0] < 40, samples  # MB
    metrics[-1].backward()  # held graphs stay usable
    assert w1.grad is not None


def test_forward_loop_with_in_place_writes_through_views_is_released():
    """Views written in place in a forward loop without backward: the
    tape grows while the loop runs (no handover with views around), and the next step
    with a backward gives all of it back: one tape, no handed-over ones kept."""
    in_new_thread(_view_loop)


def _view_loop() -> None:
    from tapegrad import tape as tape_module

    x = tg.tensor(np.random.default_rng(0).standard_normal(400_000), requires_grad=True)
    for _ in range(12):
        y = x * 2.0
        z = y[1:]
        z += 1.0
    del y, z
    for _ in range(2):
        tnp.sum(tnp.exp(x * 0.5)).backward()
        x.grad = None
    tnp.sum(x * 1.0)  # the first op after the backward rewinds
    assert getattr(tape_module._tls, "handed", []) == []
    assert len(current_tape().chunks) == 1


def test_forward_only_loops_reuse_the_start_of_a_grown_arena(monkeypatch):
    """After one large step has grown the arena, ops whose results nobody keeps (here
    on tensors that do not require grad, and under no_grad) record into its first
    SOFT_ARENA bytes again: reaching that soft cap rewinds the tape instead of running
    on into the arena's cold end. A graph held across the cap lifts it instead (no
    rewind, no hand-over), and its backward is right; a value held across rewinds
    keeps its values."""
    from tapegrad import tape as tape_module
    from tapegrad.layout import H_ARENA_CAP, H_ARENA_TOP

    monkeypatch.setattr(tape_module, "SOFT_ARENA", 1 << 20)  # 1 MB, small steps
    tape = current_tape()
    x = tg.tensor(np.linspace(-1, 1, 300_000), requires_grad=True)  # 2.4 MB values
    tnp.sum(tnp.sin(x) * 2.0 + x).backward()  # grows the arena past the cap
    assert current_tape() is tape  # rewound after the backward (its chunks merged)
    arena = tape.capacity()["arena"]
    assert arena > 2 << 20
    a = np.linspace(0.0, 1.0, 20_000)  # 160 KB a result
    kept = tg.tensor(a) * 3.0  # held across the rewinds below: copied out, unchanged
    tops = []
    for k in range(40):
        with tg.no_grad() if k % 2 else contextlib.nullcontext():
            y = tnp.exp(tg.tensor(a) * 0.5) + float(k)
            assert y.numpy()[-1] == pytest.approx(np.exp(0.5) + k)
        tops.append(int(tape.h[H_ARENA_TOP]))
    assert current_tape() is tape and tape.capacity()["arena"] == arena
    assert max(tops) <= (1 << 20) + (1 << 20) and tape.h[H_ARENA_CAP] == 1 << 20
    np.testing.assert_array_equal(kept.numpy(), a * 3.0)
    # a graph larger than the cap, held while it is recorded: the cap lifts
    w = tg.tensor(np.linspace(0.5, 1.5, 100_000), requires_grad=True)
    h = w
    for _ in range(8):  # 8 x 800 KB of graph
        h = tnp.sin(h) + w
    assert tape.h[H_ARENA_CAP] > 1 << 20 and current_tape() is tape
    tnp.sum(h).backward()
    hv = w.numpy()
    h_k, d_k = hv, np.ones_like(hv)  # h_{k+1} = sin(h_k) + w: d' = cos(h_k) d + 1
    for _ in range(8):
        h_k, d_k = np.sin(h_k) + hv, np.cos(h_k) * d_k + 1.0
    np.testing.assert_allclose(w.grad, d_k, rtol=1e-12)


def test_views_held_across_a_soft_cap_rewind_make_progress(monkeypatch):
    """A rewind takes held views again from their roots, recording into the rewound
    tape: with views larger than the soft cap, that used to overwrite the failed op's
    need, so Tape.fix lifted the cap for the view, the op failed again, and the next
    rewind took the views again, for ever (a stencil loop, a training step with
    ``w[1:] - w[:-1]``, a leaf view inside tg.grad). Each must finish with few fix
    calls and NumPy's values; ops larger than the cap leave it raised after rewinds."""
    from tapegrad import tape as tape_module
    from tapegrad.layout import H_ARENA_CAP

    monkeypatch.setattr(tape_module, "SOFT_ARENA", 1 << 16)  # 64 KB: views are 10x that
    calls = [0]
    real_fix = tape_module.Tape.fix

    def counted(self, status):
        calls[0] += 1
        if calls[0] > 2000:
            raise RuntimeError("Tape.fix does not make progress")
        return real_fix(self, status)

    monkeypatch.setattr(tape_module.Tape, "fix", counted)
    n = 100_000  # 800 KB arrays
    u0 = np.sin(np.linspace(0, np.pi, n))
    u, ref = tg.tensor(u0), u0.copy()
    for _ in range(4):  # a stencil under no grad: temporary views of the held grid
        lap = u[2:] - 2.0 * u[1:-1] + u[:-2]
        u = tnp.concatenate([u[:1], u[1:-1] + 0.25 * lap, u[-1:]])
        rl = ref[2:] - 2 * ref[1:-1] + ref[:-2]
        ref = np.concatenate([ref[:1], ref[1:-1] + 0.25 * rl, ref[-1:]])
    np.testing.assert_array_equal(u.numpy(), ref)
    w0 = np.cos(np.linspace(0, 3, n))
    w = tg.tensor(w0, requires_grad=True)
    for _ in range(3):  # training steps whose loss reads two views of the leaf
        loss = tnp.sum((w[1:] - w[:-1]) ** 2)
        loss.backward()
        d = np.diff(w0)
        want = np.concatenate([[0.0], 2 * d]) - np.concatenate([2 * d, [0.0]])
        np.testing.assert_allclose(w.grad, want, rtol=1e-12, atol=1e-15)
        w.grad = None
    g = tg.grad(lambda x: tnp.sum(tnp.exp(x[1:] * 0.5) * x[:-1]))(w0)
    e = np.exp(w0[1:] * 0.5)
    want = np.concatenate([[0.0], 0.5 * e * w0[:-1]]) + np.concatenate([e, [0.0]])
    np.testing.assert_allclose(g, want, rtol=1e-12)
    assert calls[0] < 500
    tape = current_tape()
    assert tape.soft >= 4 * 8 * (n - 2) and tape.h[H_ARENA_CAP] > 1 << 16
