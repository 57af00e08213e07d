"""Threads and memory: what the compiled step's lock costs, and the peak
memory of the training loops that keep graphs alive."""

from __future__ import annotations

import contextlib

import numpy as np

import tapegrad as tg
import tapegrad.numpy as tnp


class CompiledStepLock:
    """One call of a small compiled step, with its lock and with the lock swapped for a
    no-op (what the lock that makes steps thread-safe costs uncontended)."""

    params = ["lock", "no_lock"]
    param_names = ["guard"]

    def setup(self, guard):
        self.step = tg.compile(lambda x: tnp.sum(tnp.sin(x) * x))
        self.x = np.linspace(0.0, 1.0, 8)
        if guard == "no_lock":
            self.step._lock = contextlib.nullcontext()
        for _ in range(100):
            self.step.value_and_grad(self.x)

    def time_value_and_grad(self, guard):
        self.step.value_and_grad(self.x)


def _mlp(steps: int, hold_every: int, retain: bool) -> list:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 32))
    y = rng.standard_normal((64, 1))
    w1 = tg.tensor(rng.standard_normal((32, 64)) * 0.1, requires_grad=True)
    w2 = tg.tensor(rng.standard_normal((64, 1)) * 0.1, requires_grad=True)
    held = []
    for i in range(steps):
        loss = tnp.mean((tnp.tanh(x @ w1) @ w2 - y) ** 2)
        loss.backward(retain_graph=retain)
        if hold_every and i % hold_every == 0:
            held.append(loss * 1.0)  # a metric kept without .detach()
        with tg.no_grad():
            w1 -= 0.01 * w1.grad
            w2 -= 0.01 * w2.grad
        w1.grad = w2.grad = None
    return held


class TrainingLoopMemory:
    """Peak memory of 2,000 MLP steps: plain, holding one metric per 100 steps, and
    with ``retain_graph=True`` every step."""

    timeout = 300

    def peakmem_plain_loop(self):
        _mlp(2000, 0, False)

    def peakmem_held_metric_loop(self):
        _mlp(2000, 100, False)

    def peakmem_retain_graph_loop(self):
        _mlp(2000, 0, True)


class ForwardAfterLargeStep:
    """Forward passes nobody differentiates (tensors that do not require grad) after
    one 2e6-element step has grown the eager tape's arena to ~470 MB: a Lennard-Jones
    512 energy, 28 MB of results a call. A rewound tape records into the arena's first
    ``tape.SOFT_ARENA`` bytes, so these stay in warm memory (through the arena's cold end
    they took 77-89 ms a call on the development VM, 6 ms in warm memory)."""

    timeout = 300

    def setup(self):
        from .workloads import chain_grad_tapegrad, lj_energy, lj_positions

        x0 = np.random.default_rng(0).uniform(-1, 1, 2_000_000)
        chain_grad_tapegrad(x0, 16)
        self.pos = lj_positions()
        self.energy = lj_energy

    def time_lj_forward(self):
        for _ in range(20):
            self.energy(tg.tensor(self.pos))
