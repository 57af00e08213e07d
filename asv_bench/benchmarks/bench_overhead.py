"""Per-node overhead of the eager engine: chains of elementwise ops on small tensors."""

from __future__ import annotations

import time

import numpy as np

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.special as tsp

from .workloads import (
    backward_seconds,
    chain_grad_tapegrad,
    chain_numpy,
    forward_seconds,
    mlp_data,
    mlp_numpy,
    mlp_tapegrad,
)


class ChainOverhead:
    params = ([100, 1000, 10000], [1, 16])
    param_names = ["n_ops", "size"]
    timeout = 300

    def setup(self, n_ops, size):
        self.x0 = np.random.default_rng(0).uniform(-1, 1, size)
        chain_grad_tapegrad(self.x0, n_ops)  # compile / load kernels, size the tape

    def time_forward_backward(self, n_ops, size):
        chain_grad_tapegrad(self.x0, n_ops)

    def time_hand_numpy(self, n_ops, size):
        chain_numpy(self.x0, n_ops)

    def track_forward_ns_per_op(self, n_ops, size):
        return forward_seconds(self.x0, n_ops) / n_ops * 1e9

    track_forward_ns_per_op.unit = "ns/op"

    def track_backward_ns_per_node(self, n_ops, size):
        return backward_seconds(self.x0, n_ops) / n_ops * 1e9

    track_backward_ns_per_node.unit = "ns/node"

    def peakmem_forward_backward(self, n_ops, size):
        chain_grad_tapegrad(self.x0, n_ops)


class ArrayOpOverhead:
    """Eager cost of one op outside the elementwise fast path, recorded 100 times per
    step on small operands (a (16, 10) tensor): indexing with a basic key, a reduction
    over an axis, a small matmul, log_softmax, and an elementwise op with a NumPy
    float64 scalar or a NumPy array."""

    params = ["getitem", "sum_axis", "matmul", "log_softmax", "np_scalar", "np_array"]
    param_names = ["op"]
    timeout = 300
    OPS = 100

    def setup(self, op):
        rng = np.random.default_rng(0)
        self.w = tg.tensor(rng.standard_normal((16, 10)), requires_grad=True)
        m = rng.standard_normal((10, 10))
        c = rng.standard_normal((16, 10))
        s = np.float64(0.5)
        self.f = {
            "getitem": lambda y, k: y[k % 16, 3],
            "sum_axis": lambda y, k: tnp.sum(y, axis=1),
            "matmul": lambda y, k: y @ m,
            "log_softmax": lambda y, k: tsp.log_softmax(y, axis=1),
            "np_scalar": lambda y, k: y - s,
            "np_array": lambda y, k: y * c,
        }[op]
        self.step()

    def step(self):
        y = self.w * 1.0
        t = time.perf_counter()
        total = [self.f(y, k) for k in range(self.OPS)]
        elapsed = time.perf_counter() - t
        tnp.sum(total[-1]).backward()
        return elapsed

    def time_step(self, op):
        self.step()

    def track_ns_per_op(self, op):
        return float(np.median([self.step() for _ in range(15)])) / self.OPS * 1e9

    track_ns_per_op.unit = "ns/op"


class TransformOverhead:
    """The fixed cost of one ``tg.value_and_grad`` call (the eager MLP row is a step
    of ~10 ops on small matrices, so this is most of its gap to NumPy): the gradient
    of ``sum(x)`` for a 3-element array, and the MLP step of ``compare.py`` on 2x2
    matrices (four arguments, two NumPy constants), each against NumPy by hand."""

    params = ["sum", "mlp_2x2"]
    param_names = ["workload"]
    timeout = 300

    def setup(self, workload):
        x = np.ones(3)
        vg = tg.value_and_grad(lambda a: tnp.sum(a))
        small = mlp_data(batch=2, n_in=2, hidden=2, n_out=2)
        self.tapegrad, self.numpy = {
            "sum": (lambda: vg(x), lambda: (float(np.sum(x)), np.ones_like(x))),
            "mlp_2x2": (lambda: mlp_tapegrad(*small), lambda: mlp_numpy(*small)),
        }[workload]
        self.tapegrad()

    def time_tapegrad(self, workload):
        self.tapegrad()

    def time_hand_numpy(self, workload):
        self.numpy()


class ColdStart:
    """A fresh process: import tapegrad and run a first backward (warm kernel cache)."""

    timeout = 300

    def setup(self):
        import subprocess
        import sys

        self.cmd = [sys.executable, "-c", _FIRST_BACKWARD]
        subprocess.run(self.cmd, check=True)  # make sure the cache is warm

    def time_import_and_first_backward(self):
        import subprocess

        subprocess.run(self.cmd, check=True)


_FIRST_BACKWARD = """
import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
x = tg.tensor(np.ones(3), requires_grad=True)
w = tg.tensor(np.ones((3, 2)), requires_grad=True)
tnp.sum(tnp.tanh(x @ w) ** 2).backward()
"""
