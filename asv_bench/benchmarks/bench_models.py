"""Model steps (loss and gradients): tapegrad eager and replayed against hand-written
NumPy: an MLP, a Lotka-Volterra Euler integration, Lennard-Jones energy and forces."""

from __future__ import annotations

import numpy as np

import tapegrad as tg

from .workloads import (
    lj_numpy,
    lj_positions,
    lj_tapegrad,
    lv_data,
    lv_loss,
    lv_numpy,
    lv_tapegrad,
    mlp_data,
    mlp_loss,
    mlp_numpy,
    mlp_tapegrad,
)


class MLP:
    """batch 256, 64 -> 256 (tanh) -> 10, softmax cross-entropy."""

    def setup(self):
        self.params, self.x, self.labels = mlp_data()
        self.onehot = np.eye(10)[self.labels]
        self.step = tg.compile(mlp_loss, argnums=(0, 1, 2, 3))
        self.step.value_and_grad(*self.params, self.x, self.onehot)
        mlp_tapegrad(self.params, self.x, self.labels)

    def time_eager(self):
        mlp_tapegrad(self.params, self.x, self.labels)

    def time_replay(self):
        self.step.value_and_grad(*self.params, self.x, self.onehot)

    def time_hand_numpy(self):
        mlp_numpy(self.params, self.x, self.labels)

    def peakmem_training_loop(self):
        params = list(self.params)
        for _ in range(20):
            _, grads = mlp_tapegrad(params, self.x, self.labels)
            params = [p - 0.1 * g for p, g in zip(params, grads)]


class LotkaVolterraEuler:
    """1,000 Euler steps of the predator-prey ODE, squared error, 4 parameter gradients."""

    timeout = 300

    def setup(self):
        self.theta, self.observed = lv_data()
        self.step = tg.compile(lv_loss)
        self.step.value_and_grad(self.theta, self.observed)
        lv_tapegrad(self.theta, self.observed)

    def time_eager(self):
        lv_tapegrad(self.theta, self.observed)

    def time_replay(self):
        self.step.value_and_grad(self.theta, self.observed)

    def time_hand_numpy(self):
        lv_numpy(self.theta, self.observed)


class LennardJones:
    """Energy and forces of 512 particles (all pairs)."""

    timeout = 300

    def setup(self):
        self.pos = lj_positions()
        lj_tapegrad(self.pos)

    def time_eager(self):
        lj_tapegrad(self.pos)

    def time_hand_numpy(self):
        lj_numpy(self.pos)


class LargeArrays:
    """Throughput of kernels on 2e6 float64 (bytes moved per second)."""

    timeout = 300
    params = ["elementwise", "reduction", "broadcast"]
    param_names = ["kernel"]

    def setup(self, kernel):
        rng = np.random.default_rng(0)
        self.a = rng.uniform(0.5, 1.5, 2_000_000)
        self.row = rng.uniform(0.5, 1.5, 2000)
        self.run(kernel)

    def run(self, kernel):
        import tapegrad.numpy as tnp

        x = tg.tensor(self.a, requires_grad=True)
        if kernel == "elementwise":  # exp forward (NumPy ufunc) and backward
            tnp.sum(tnp.exp(x)).backward()
        elif kernel == "reduction":  # sums over an axis and their backward
            tnp.sum(tnp.sum(x.reshape(1000, 2000), axis=0) ** 2).backward()
        else:  # broadcast multiply and its reducing backward
            r = tg.tensor(self.row, requires_grad=True)
            tnp.sum(x.reshape(1000, 2000) * r).backward()

    def time_forward_backward(self, kernel):
        self.run(kernel)

    def track_gigabytes_per_second(self, kernel):
        import time

        times = []
        for _ in range(5):
            t = time.perf_counter()
            self.run(kernel)
            times.append(time.perf_counter() - t)
        # at least: read x, write out, read g/x, write gx (4 passes of 16 MB)
        return 4 * self.a.nbytes / float(np.median(times)) / 1e9

    track_gigabytes_per_second.unit = "GB/s"
