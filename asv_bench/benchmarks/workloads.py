"""Workloads shared by the asv benchmarks and ``compare.py``.

Each workload exists as tapegrad code and as hand-written NumPy (forward plus a
hand-derived backward): the practical limit an autodiff tool is measured against.
"""

from __future__ import annotations

import time

import numpy as np

import tapegrad as tg
import tapegrad.numpy as tnp

# --- the elementwise chain: (sin, *1.01, tanh, +x) repeated; n_ops ops in all ----------


def chain_tapegrad(x, n_ops):
    y = x
    for _ in range(n_ops // 4):
        y = tnp.sin(y)
        y = y * 1.01
        y = tnp.tanh(y)
        y = y + x
    return y.sum()


def chain_numpy(x0, n_ops):
    """Forward keeping what the backward needs, then the hand-derived backward."""
    saved = []
    y = x0
    for _ in range(n_ops // 4):
        c = np.tanh(np.sin(y) * 1.01)
        saved.append((y, c))
        y = c + x0
    value = y.sum()
    g = np.ones_like(y)
    gx = np.zeros_like(x0)
    for y_in, c in reversed(saved):
        gx += g
        g = g * (1.0 - c * c) * 1.01 * np.cos(y_in)
    gx += g
    return value, gx


def chain_grad_tapegrad(x0, n_ops):
    x = tg.tensor(x0, requires_grad=True)
    loss = chain_tapegrad(x, n_ops)
    loss.backward()
    return loss.item(), x.grad


def median_time(fn, repeat=15, number=1):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t) / number)
    return float(np.median(times))


def backward_seconds(x0, n_ops, repeat=15):
    """Median time of ``loss.backward()`` alone (the forward is recorded untimed)."""
    times = []
    for _ in range(repeat):
        x = tg.tensor(x0, requires_grad=True)
        loss = chain_tapegrad(x, n_ops)
        t = time.perf_counter()
        loss.backward()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def forward_seconds(x0, n_ops, repeat=15):
    """Median time of recording the forward pass."""
    times = []
    for _ in range(repeat):
        x = tg.tensor(x0, requires_grad=True)
        t = time.perf_counter()
        loss = chain_tapegrad(x, n_ops)
        times.append(time.perf_counter() - t)
        loss.backward()  # free the graph, as a training step would
    return float(np.median(times))
