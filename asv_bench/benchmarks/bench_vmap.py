"""tg.vmap: per-example gradients of a small MLP (batch 256) against a Python loop of
tg.grad and against PyTorch's torch.func.vmap(grad) (targets: >= 20x the loop, at most
PyTorch's time), and an ensemble of Lotka-Volterra solves against a loop."""

from __future__ import annotations

import numpy as np

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.integrate import odeint

from .workloads import interleaved_medians

BATCH, D, H = 256, 16, 32
ENSEMBLE = 100  # Lotka-Volterra parameter sets


def _loss(params, x, t):
    W, b, w = params
    return (tnp.tanh(x @ W + b) @ w - t) ** 2


def _lv(z, t, theta):
    return tnp.stack(
        [theta[0] * z[0] - theta[1] * z[0] * z[1], theta[3] * z[0] * z[1] - theta[2] * z[1]]
    )


class PerExampleGradients:
    timeout = 600

    def setup(self):
        rng = np.random.default_rng(0)
        self.X, self.y = rng.standard_normal((BATCH, D)), rng.standard_normal(BATCH)
        self.params = [rng.standard_normal((D, H)) / 4, np.zeros(H), rng.standard_normal(H) / 4]
        self.vmapped = tg.vmap(tg.grad(_loss), in_axes=(None, 0, 0))
        self.one = tg.grad(_loss)
        self.vmapped(self.params, self.X, self.y)

    def _loop(self):
        return [self.one(self.params, self.X[i], self.y[i]) for i in range(BATCH)]

    def time_vmap(self):
        self.vmapped(self.params, self.X, self.y)

    def time_loop(self):
        self._loop()

    def track_loop_over_vmap(self):
        t = interleaved_medians(
            {"vmap": lambda: self.vmapped(self.params, self.X, self.y), "loop": self._loop},
            repeat=5,
        )
        return t["loop"] / t["vmap"]

    track_loop_over_vmap.unit = "ratio"

    def track_vmap_over_torch(self):
        try:
            import torch
            from torch.func import grad, vmap
        except ImportError:  # an oracle, not a dependency
            return float("nan")

        def loss(p, x, t):
            return (torch.tanh(x @ p[0] + p[1]) @ p[2] - t) ** 2

        pt = [torch.tensor(p) for p in self.params]
        xt, yt = torch.tensor(self.X), torch.tensor(self.y)
        per_example = vmap(grad(loss), in_dims=(None, 0, 0))
        t = interleaved_medians(
            {
                "vmap": lambda: self.vmapped(self.params, self.X, self.y),
                "torch": lambda: per_example(pt, xt, yt),
            },
            repeat=15,
        )
        return t["vmap"] / t["torch"]

    track_vmap_over_torch.unit = "ratio"


class Ensemble:
    """100 Lotka-Volterra parameter sets: each solved with its own adaptive steps."""

    timeout = 600

    def setup(self):
        rng = np.random.default_rng(0)
        self.thetas = np.array([1.0, 0.1, 1.5, 0.075]) * (
            1 + 0.1 * rng.standard_normal((ENSEMBLE, 4))
        )
        self.t = np.linspace(0.0, 10.0, 21)
        self.y0 = np.array([10.0, 5.0])

    def _one(self, th):
        return tnp.sum(odeint(_lv, self.y0, self.t, th)[-1])

    def time_vmap_gradient(self):
        tg.vmap(tg.grad(self._one))(self.thetas)

    def time_loop_gradient(self):
        for th in self.thetas:
            tg.grad(self._one)(th)
