"""Per-node overhead of the eager engine: chains of elementwise ops on small tensors."""

from __future__ import annotations

import numpy as np

from .workloads import (
    backward_seconds,
    chain_grad_tapegrad,
    chain_numpy,
    forward_seconds,
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
