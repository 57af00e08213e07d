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


# --- the scalar recurrence: s = s + tanh(a s + b u[k]) c, loss s**2 ------------------------


def recurrence(params, u, np_mod=tnp):
    a, b, c = params[0], params[1], params[2]
    s = 0.0
    for k in range(u.shape[0]):
        s = s + np_mod.tanh(a * s + b * u[k]) * c
    return s**2


def recurrence_numpy(params, u):
    """Forward keeping the tanh values, then the hand-derived backward."""
    a, b, c = params
    n = u.shape[0]
    s = np.zeros(n + 1)
    t = np.zeros(n)
    for k in range(n):
        t[k] = np.tanh(a * s[k] + b * u[k])
        s[k + 1] = s[k] + t[k] * c
    value = s[n] ** 2
    gs = 2 * s[n]
    ga = gb = gc = 0.0
    for k in range(n - 1, -1, -1):
        gc += gs * t[k]
        gz = gs * c * (1 - t[k] ** 2)
        ga += gz * s[k]
        gb += gz * u[k]
        gs = gs + gz * a
    return value, np.array([ga, gb, gc])


def recurrence_nodes(n_steps):
    return 7 * n_steps  # gather, 2 mul, add, tanh, mul, add per step


def chain_loss(x, n_ops):
    return chain_tapegrad(x, n_ops)


def interleaved_medians(fns: dict, repeat: int = 15) -> dict:
    """Median time of each function, timing them in turn on every round so that a noisy,
    shared machine slows them all alike (ratios measured this way are stable)."""
    times = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return {name: float(np.median(ts)) for name, ts in times.items()}
