"""Eager code as users write it: elementwise chains on 2e6 elements and the
Lennard-Jones energy and forces of 512 particles in three common spellings, each as
tapegrad code, PyTorch code (an oracle, not a dependency) and hand-written NumPy
(forward plus a hand-derived backward, the baseline).

Every function returns ``(value, [gradients])`` so that ``compare.py`` can check them
against the NumPy baseline before timing.
"""

from __future__ import annotations

import numpy as np

import tapegrad as tg
import tapegrad.numpy as tnp

from .workloads import lj_numpy as _lj_forces
from .workloads import lj_positions

SIZE = 2_000_000
positions = lj_positions  # 512 particles on a jittered grid, as compare.py's own


def chain_data(size: int = SIZE, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, size), rng.uniform(0.5, 1.0, size)


# --- the transcendental chain: 4 x (sin, *0.9, tanh, exp, *w, +x), 24 ops, then sum ------


def chain(m, x, w):
    y = x
    for _ in range(4):
        y = m.exp(m.tanh(m.sin(y) * 0.9)) * w + x
    return m.sum(y)


def chain_numpy(x, w):
    saved = []
    y = x
    for _ in range(4):
        t = np.tanh(np.sin(y) * 0.9)
        e = np.exp(t)
        saved.append((y, t, e))
        y = e * w + x
    value = y.sum()
    g = np.ones_like(x)
    gx, gw = np.zeros_like(x), np.zeros_like(w)
    for y_in, t, e in reversed(saved):
        gx += g
        gw += g * e
        g = g * w * e * (1.0 - t * t) * 0.9 * np.cos(y_in)
    gx += g
    return value, [gx, gw]


# --- the algebraic chain: 3 x (square, +1, sqrt, +1.5, log, **1.3, *w, +x), 24 ops ------


def chain_log(m, x, w):
    y = x
    for _ in range(3):
        y = m.log(m.sqrt(y * y + 1.0) + 1.5) ** 1.3 * w + x
    return m.sum(y)


def chain_log_numpy(x, w):
    saved = []
    y = x
    for _ in range(3):
        r = np.sqrt(y * y + 1.0)
        lg = np.log(r + 1.5)
        p = lg**1.3
        saved.append((y, r, lg, p))
        y = p * w + x
    value = y.sum()
    g = np.ones_like(x)
    gx, gw = np.zeros_like(x), np.zeros_like(w)
    for y_in, r, lg, p in reversed(saved):
        gx += g
        gw += g * p
        # d/dy lg^1.3 = 1.3 lg^0.3 / (r + 1.5) * y / r
        g = g * w * 1.3 * p / lg / (r + 1.5) * y_in / r
    gx += g
    return value, [gx, gw]


def tapegrad_fn(f):
    """``(x, w) -> (value, [dx, dw])`` of ``f(tnp, x, w)`` in eager tapegrad."""

    def run(x0, w0):
        x, w = tg.tensor(x0, requires_grad=True), tg.tensor(w0, requires_grad=True)
        loss = f(tnp, x, w)
        loss.backward()
        return loss.item(), [x.grad, w.grad]

    return run


def torch_fn(f):
    """The same with PyTorch (``None`` when it is not installed)."""
    try:
        import torch
    except ImportError:
        return None

    def run(x0, w0):
        x = torch.tensor(x0, requires_grad=True)
        w = torch.tensor(w0, requires_grad=True)
        loss = f(torch, x, w)
        loss.backward()
        return loss.item(), [x.grad.numpy(), w.grad.numpy()]

    return run


# --- pairwise: Lennard-Jones energy, forces = -gradient ---------------------------------


def lj_reshape_where(m, x):
    """Broadcast by reshape, sum the coordinate axis, mask the diagonal with where."""
    n = x.shape[0]
    eye = np.eye(n, dtype=bool)
    diff = x.reshape(n, 1, 3) - x.reshape(1, n, 3)
    r2 = m.where(eye, 1.0, m.sum(diff * diff, axis=-1))
    inv6 = 1.0 / (r2 * r2 * r2)
    return 2.0 * m.sum(m.where(eye, 0.0, inv6 * inv6 - inv6))


def lj_none_einsum(m, x):
    """Broadcast by None indexing, einsum over the coordinate axis, multiplied mask."""
    n = x.shape[0]
    eye = np.eye(n)
    diff = x[:, None, :] - x[None, :, :]
    r2 = m.einsum("ijk,ijk->ij", diff, diff) + eye
    inv6 = 1.0 / (r2 * r2 * r2)
    return 2.0 * m.sum((inv6 * inv6 - inv6) * (1.0 - eye))


def lj_norm(m, x):
    """The distance by linalg.norm over the last axis, multiplied mask."""
    n = x.shape[0]
    eye = np.eye(n)
    diff = x[:, None, :] - x[None, :, :]
    r = m.linalg.norm(diff, axis=-1) + eye
    inv6 = r**-6.0
    return 2.0 * m.sum((inv6 * inv6 - inv6) * (1.0 - eye))


LJ_SPELLINGS = {
    "reshape, sum(axis=-1), where": lj_reshape_where,
    "None, einsum, mask": lj_none_einsum,
    "None, linalg.norm, mask": lj_norm,
}


def lj_numpy(x):
    """Energy and its gradient (minus the forces) by hand (``workloads.lj_numpy``)."""
    energy, forces = _lj_forces(x)
    return energy, [-forces]


def lj_tapegrad(f):
    def run(x0):
        value, grad = tg.value_and_grad(lambda x: f(tnp, x))(x0)
        return value, [grad]

    return run


def lj_torch(f):
    try:
        import torch
    except ImportError:
        return None

    def run(x0):
        x = torch.tensor(x0, requires_grad=True)
        energy = _torch_lj(f, x)
        energy.backward()
        return energy.item(), [x.grad.numpy()]

    return run


def _torch_lj(f, x):
    """``f``'s spelling in PyTorch (its masks as torch tensors)."""
    import torch

    n = x.shape[0]
    eye = torch.eye(n, dtype=torch.float64)
    if f is lj_reshape_where:
        mask = torch.eye(n, dtype=torch.bool)
        diff = x.reshape(n, 1, 3) - x.reshape(1, n, 3)
        r2 = torch.where(mask, 1.0, (diff * diff).sum(dim=-1))
        inv6 = 1.0 / (r2 * r2 * r2)
        return 2.0 * torch.where(mask, 0.0, inv6 * inv6 - inv6).sum()
    diff = x[:, None, :] - x[None, :, :]
    if f is lj_none_einsum:
        r2 = torch.einsum("ijk,ijk->ij", diff, diff) + eye
        inv6 = 1.0 / (r2 * r2 * r2)
    else:
        r = torch.linalg.norm(diff, dim=-1) + eye
        inv6 = r**-6.0
    return 2.0 * ((inv6 * inv6 - inv6) * (1.0 - eye)).sum()


# --- single elementwise functions, forward and backward, per element -------------------
#
# name: (f(m, x) for tapegrad.numpy / torch, NumPy forward, NumPy derivative (x, out)).
# Inputs in (0.5, 3) (inside every domain; erf's tails are not the point here).


def _expit(x):
    return 1.0 / (1.0 + np.exp(-x))


def _erf(m, x):
    if m is np:
        import scipy.special

        return scipy.special.erf(x)
    if m is tnp:
        import tapegrad.special as tsp

        return tsp.erf(x)
    return m.special.erf(x)


def _sigmoid(m, x):
    if m is np:
        return _expit(x)
    if m is tnp:
        import tapegrad.special as tsp

        return tsp.expit(x)
    return m.sigmoid(x)


def _softplus(m, x):
    if m is tnp:
        return m.logaddexp(x, 0.0)
    return m.nn.functional.softplus(x)  # PyTorch's own


ELEMENTWISE = {
    "exp": (lambda m, x: m.exp(x), np.exp, lambda x, out: out),
    "log": (lambda m, x: m.log(x), np.log, lambda x, out: 1.0 / x),
    "log1p": (lambda m, x: m.log1p(x), np.log1p, lambda x, out: 1.0 / (1.0 + x)),
    "expm1": (lambda m, x: m.expm1(x), np.expm1, lambda x, out: out + 1.0),
    "sqrt": (lambda m, x: m.sqrt(x), np.sqrt, lambda x, out: 0.5 / out),
    "x ** 1.3": (lambda m, x: x**1.3, lambda x: x**1.3, lambda x, out: 1.3 * out / x),
    "arctan": (lambda m, x: m.arctan(x), np.arctan, lambda x, out: 1.0 / (1.0 + x * x)),
    "tanh": (lambda m, x: m.tanh(x), np.tanh, lambda x, out: 1.0 - out * out),
    "sin": (lambda m, x: m.sin(x), np.sin, lambda x, out: np.cos(x)),
    "sigmoid (expit)": (_sigmoid, _expit, lambda x, out: out * (1.0 - out)),
    "erf": (
        _erf,
        lambda x: _erf(np, x),
        lambda x, out: 2.0 / np.sqrt(np.pi) * np.exp(-x * x),
    ),
    "logaddexp(x, y)": (
        lambda m, x: m.logaddexp(x, 0.5 * x + 1.0),  # a second, recorded operand
        lambda x: np.logaddexp(x, 0.5 * x + 1.0),
        lambda x, out: np.exp(x - out) + 0.5 * np.exp(0.5 * x + 1.0 - out),
    ),
    "softplus: logaddexp(x, 0)": (
        _softplus,
        lambda x: np.logaddexp(x, 0.0),
        lambda x, out: np.exp(x - out),
    ),
}
ELEMENTWISE_SIZE = 1_000_000


def elementwise_data(size: int = ELEMENTWISE_SIZE, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.5, 3.0, size)


def elementwise_numpy(name: str):
    """``x -> (sum f(x), [f'(x)])`` by NumPy: the ufunc and the derivative by hand."""
    _, fwd, deriv = ELEMENTWISE[name]

    def run(x):
        out = fwd(x)
        return out.sum(), [deriv(x, out)]

    return run


def elementwise_tapegrad(name: str):
    f = ELEMENTWISE[name][0]

    def run(x0):
        x = tg.tensor(x0, requires_grad=True)
        loss = tnp.sum(f(tnp, x))
        loss.backward()
        return loss.item(), [x.grad]

    return run


def elementwise_torch(name: str):
    try:
        import torch
    except ImportError:
        return None
    f = ELEMENTWISE[name][0]

    def run(x0):
        x = torch.tensor(x0, requires_grad=True)
        loss = f(torch, x).sum()
        loss.backward()
        return loss.item(), [x.grad.numpy()]

    return run
