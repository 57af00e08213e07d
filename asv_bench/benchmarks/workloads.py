"""Workloads shared by the asv benchmarks and ``compare.py``.

Each workload exists as tapegrad code and as hand-written NumPy (forward plus a
hand-derived backward): the practical limit an autodiff tool is measured against.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.special as tsp

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


# The same forward and hand-derived backward in C, for replay's per-node cost against
# compiled code: built with the system's C compiler when one is there (a benchmark
# reference, not a dependency; None without a compiler).
RECURRENCE_C = r"""
#include <math.h>
double recurrence(const double *p, const double *u, long n, double *s, double *t,
                  double *grad) {
    double a = p[0], b = p[1], c = p[2];
    s[0] = 0.0;
    for (long k = 0; k < n; k++) {
        t[k] = tanh(a * s[k] + b * u[k]);
        s[k + 1] = s[k] + t[k] * c;
    }
    double gs = 2 * s[n], ga = 0, gb = 0, gc = 0;
    for (long k = n - 1; k >= 0; k--) {
        gc += gs * t[k];
        double gz = gs * c * (1 - t[k] * t[k]);
        ga += gz * s[k];
        gb += gz * u[k];
        gs = gs + gz * a;
    }
    grad[0] = ga; grad[1] = gb; grad[2] = gc;
    return s[n] * s[n];
}
"""


def recurrence_c():
    """``recurrence_numpy`` compiled from C (``cc -O2``), or None without a compiler."""
    import ctypes
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    where = Path(tempfile.mkdtemp(prefix="tapegrad-bench-"))
    (where / "rec.c").write_text(RECURRENCE_C)
    lib = where / "rec.so"
    try:
        subprocess.run(
            [cc, "-O2", "-shared", "-fPIC", str(where / "rec.c"), "-o", str(lib), "-lm"],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    fn = ctypes.CDLL(str(lib)).recurrence
    ptr = ctypes.POINTER(ctypes.c_double)
    fn.argtypes = [ptr, ptr, ctypes.c_long, ptr, ptr, ptr]
    fn.restype = ctypes.c_double

    def run(params, u):
        n = u.shape[0]
        p = np.ascontiguousarray(params, np.float64)
        u = np.ascontiguousarray(u, np.float64)
        s, t, grad = np.empty(n + 1), np.empty(n), np.empty(3)
        at = [a.ctypes.data_as(ptr) for a in (p, u, s, t, grad)]
        value = fn(at[0], at[1], n, at[2], at[3], at[4])
        return value, grad

    return run


def recurrence_nodes(n_steps):
    return 7 * n_steps  # gather, 2 mul, add, tanh, mul, add per step


def chain_loss(x, n_ops):
    return chain_tapegrad(x, n_ops)


def interleaved_medians(
    fns: dict, repeat: int = 15, before: Any = None, steady: bool = False
) -> dict:
    """Median time of each function, timing them in turn on every round so that a noisy,
    shared machine slows them all alike (ratios measured this way are stable);
    ``before()``, if given, runs untimed before each call. With ``steady``, each timed
    call comes right after one untimed call of the same function, as a step of a
    training loop comes after the step before: a millisecond-long step runs 15-25%
    slower right after another library's step than after its own (what the other left
    in the caches), for NumPy by hand as for tapegrad (``mlp_bounds.py --after``)."""
    times = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            if before is not None:
                before()
            if steady:
                fn()
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return {name: float(np.median(ts)) for name, ts in times.items()}


# --- model steps ----------------------------------------------------------------------------


def mlp_data(seed=0, batch=256, n_in=64, hidden=256, n_out=10):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, n_in))
    labels = rng.integers(0, n_out, batch)
    params = [
        rng.standard_normal((n_in, hidden)) / 8,
        np.zeros(hidden),
        rng.standard_normal((hidden, n_out)) / 16,
        np.zeros(n_out),
    ]
    return params, x, labels


def mlp_loss(w1, b1, w2, b2, x, onehot):
    h = tnp.tanh(x @ w1 + b1)
    return -tnp.mean(tnp.sum(onehot * tsp.log_softmax(h @ w2 + b2, axis=1), axis=1))


def mlp_tapegrad(params, x, labels):
    onehot = np.eye(params[2].shape[1])[labels]
    value, grads = tg.value_and_grad(mlp_loss, argnums=(0, 1, 2, 3))(*params, x, onehot)
    return value, list(grads)


def mlp_numpy(params, x, labels):
    w1, b1, w2, b2 = params
    n = x.shape[0]
    h = np.tanh(x @ w1 + b1)
    z = h @ w2 + b2
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    value = -np.mean(np.log(p[np.arange(n), labels]))
    gz = p.copy()
    gz[np.arange(n), labels] -= 1
    gz /= n
    gw2, gb2 = h.T @ gz, gz.sum(axis=0)
    gh = (gz @ w2.T) * (1 - h * h)
    return value, [x.T @ gh, gh.sum(axis=0), gw2, gb2]


def lv_data(steps=1000, seed=0):
    rng = np.random.default_rng(seed)
    observed = 5 + rng.standard_normal((2, steps))
    return np.array([1.0, 0.1, 1.5, 0.075]), observed


def lv_loss(theta, observed, dt=0.01):
    a, b, c, d = theta[0], theta[1], theta[2], theta[3]
    x, y = 10.0, 5.0
    total = 0.0
    for k in range(observed.shape[1]):
        x, y = x + dt * (a * x - b * x * y), y + dt * (d * x * y - c * y)
        total = total + (x - observed[0, k]) ** 2 + (y - observed[1, k]) ** 2
    return total


def lv_tapegrad(theta, observed):
    return tg.value_and_grad(lv_loss)(theta, observed)


def lv_numpy(theta, observed, dt=0.01):
    """Euler forward, then its adjoint (reverse-mode by hand) over Python floats."""
    a, b, c, d = (float(v) for v in theta)
    n = observed.shape[1]
    xs, ys = np.empty(n + 1), np.empty(n + 1)
    xs[0], ys[0] = 10.0, 5.0
    total = 0.0
    for k in range(n):
        x, y = xs[k], ys[k]
        xs[k + 1] = x + dt * (a * x - b * x * y)
        ys[k + 1] = y + dt * (d * x * y - c * y)
        total += (xs[k + 1] - observed[0, k]) ** 2 + (ys[k + 1] - observed[1, k]) ** 2
    gx = gy = 0.0
    g = np.zeros(4)
    for k in range(n - 1, -1, -1):
        gx += 2 * (xs[k + 1] - observed[0, k])
        gy += 2 * (ys[k + 1] - observed[1, k])
        x, y = xs[k], ys[k]
        g += dt * np.array([gx * x, -gx * x * y, -gy * y, gy * x * y])
        gx, gy = (
            gx * (1 + dt * (a - b * y)) + gy * dt * d * y,
            gx * (-dt * b * x) + gy * (1 + dt * (d * x - c)),
        )
    return total, g


def lj_positions(n=512, seed=0):
    rng = np.random.default_rng(seed)
    side = int(np.ceil(n ** (1 / 3)))
    grid = np.stack(np.meshgrid(*[np.arange(side)] * 3, indexing="ij"), -1).reshape(-1, 3)
    return grid[:n] * 1.12 + 0.05 * rng.standard_normal((n, 3))


def lj_energy(pos):
    n = pos.shape[0]
    diff = pos.reshape(n, 1, 3) - pos.reshape(1, n, 3)
    r2 = tnp.sum(diff * diff, axis=-1) + np.eye(n)  # the diagonal is masked below
    inv6 = 1.0 / (r2 * r2 * r2)
    return 2.0 * tnp.sum((inv6 * inv6 - inv6) * (1 - np.eye(n)))  # 4 * (each pair once)


def lj_tapegrad(pos):
    value, grad = tg.value_and_grad(lj_energy)(pos)
    return value, -grad


def lj_numpy(pos):
    n = pos.shape[0]
    diff = pos[:, None, :] - pos[None, :, :]
    r2 = np.sum(diff * diff, axis=-1) + np.eye(n)
    inv6 = 1.0 / r2**3
    mask = 1 - np.eye(n)
    energy = 2.0 * np.sum((inv6 * inv6 - inv6) * mask)
    coef = 24.0 * (2.0 * inv6 * inv6 - inv6) / r2 * mask
    return energy, np.sum(coef[:, :, None] * diff, axis=1)


# --- second order and forward mode ----------------------------------------------------------


def smooth100_data(n=100, seed=0):
    """A 100-parameter scalar function's data: softplus of a random linear map plus a
    quartic (a smooth, dense Hessian)."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, n)) / 10, rng.standard_normal(n)


def smooth100(w, x, np_mod=tnp):
    return np_mod.sum(np_mod.log1p(np_mod.exp(w @ x))) + 0.5 * np_mod.sum(x**4)


def second_order_impls():
    """``{workload: {name: thunk}}`` for tapegrad's HVP / JVP against its gradient /
    forward on the MLP and Lennard-Jones 512 (the budgets: an HVP within 4x a
    gradient, a JVP within 3x a forward pass)."""
    params, x, labels = mlp_data()
    onehot = np.eye(10)[labels]
    rng = np.random.default_rng(1)
    v_mlp = tuple(rng.standard_normal(p.shape) for p in params)
    pos = lj_positions()
    v_lj = rng.standard_normal(pos.shape)
    nums = (0, 1, 2, 3)

    def f_mlp(*p):
        return mlp_loss(*p, x, onehot)

    step = tg.compile(mlp_loss, argnums=nums)
    step.hvp(*params, x, onehot, v_mlp)
    return {
        "MLP 256x64->256->10": {
            "gradient": lambda: tg.grad(f_mlp, nums)(*params),
            "HVP": lambda: tg.hvp(f_mlp, tuple(params), v_mlp),
            "forward (no grad)": lambda: f_mlp(*[tg.tensor(p) for p in params]),
            "JVP": lambda: tg.jvp(f_mlp, params, v_mlp),
            "replay: value_and_grad": lambda: step.value_and_grad(*params, x, onehot),
            "replay: HVP": lambda: step.hvp(*params, x, onehot, v_mlp),
        },
        "Lennard-Jones 512": {
            "gradient": lambda: tg.grad(lj_energy)(pos),
            "HVP": lambda: tg.hvp(lj_energy, pos, v_lj),
            "forward (no grad)": lambda: lj_energy(tg.tensor(pos)),
            "JVP": lambda: tg.jvp(lj_energy, (pos,), (v_lj,)),
        },
    }
