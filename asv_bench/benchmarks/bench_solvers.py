"""Differentiating through solvers: implicit against unrolled, and a sparse fit's
gradient against its forward solve (the targets: less time and memory than unrolling;
a gradient at most twice a forward solve)."""

from __future__ import annotations

import tracemalloc

import numpy as np

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.scipy.sparse import csr_matrix
from tapegrad.scipy.sparse.linalg import spsolve

from .workloads import interleaved_medians

N_FIXED = 1000  # unknowns of the fixed point
GRID = 100  # the Poisson problem's grid is GRID x GRID


def _layer(x, a, b):
    return tnp.tanh(a @ x + b)


class FixedPoint:
    """``x = tanh(A x + b)`` on 1,000 unknowns, contracting by about 0.9 a step (about
    200 iterations to 1e-9): the gradient in ``b`` by the implicit rule (one GMRES
    solve over vector-Jacobian products) and by recording every iteration."""

    timeout = 600

    def setup(self):
        rng = np.random.default_rng(0)
        a = rng.standard_normal((N_FIXED, N_FIXED))
        self.a = 0.9 * a / np.linalg.norm(a, 2)
        self.b = rng.standard_normal(N_FIXED)
        self.x0 = np.zeros(N_FIXED)

    def _loss(self, b, unroll):
        x = tg.fixed_point(_layer, self.x0, self.a, b, tol=1e-9, unroll=unroll)
        return tnp.sum(x**2)

    def _grad(self, unroll):
        return tg.grad(lambda b: self._loss(b, unroll))(self.b)

    def time_implicit(self):
        self._grad(False)

    def time_unrolled(self):
        self._grad(True)

    def track_unrolled_over_implicit(self):
        t = interleaved_medians(
            {"implicit": lambda: self._grad(False), "unrolled": lambda: self._grad(True)},
            repeat=5,
        )
        return t["unrolled"] / t["implicit"]

    track_unrolled_over_implicit.unit = "ratio"

    def _peak_mb(self, unroll):
        tracemalloc.start()
        try:
            self._grad(unroll)
            return tracemalloc.get_traced_memory()[1] / 2**20
        finally:
            tracemalloc.stop()

    def track_implicit_peak_mb(self):
        return self._peak_mb(False)

    track_implicit_peak_mb.unit = "MiB"

    def track_unrolled_peak_mb(self):
        return self._peak_mb(True)

    track_unrolled_peak_mb.unit = "MiB"


class SparsePoisson:
    """``-div(k grad u) = f`` on a 100 x 100 grid (10,000 unknowns, a conductivity per
    edge), solved by ``spsolve``; the misfit's value and gradient in the 19,800
    log-conductivities against the forward solve alone."""

    timeout = 600

    def setup(self):
        m = GRID
        n = m * m
        idx = np.arange(n).reshape(m, m)
        edges = np.r_[
            np.c_[idx[:, :-1].ravel(), idx[:, 1:].ravel()],
            np.c_[idx[:-1, :].ravel(), idx[1:, :].ravel()],
        ]
        i, j = edges[:, 0], edges[:, 1]
        self.n = n
        self.row = np.r_[np.arange(n), i, j, i, j]
        self.col = np.r_[np.arange(n), j, i, i, j]
        self.ground = np.full(n, 1e-2)  # a weak link to ground: non-singular
        self.f = np.ones(n) / n
        rng = np.random.default_rng(0)
        self.measured = np.asarray(self.solve(0.3 * rng.standard_normal(len(edges))))
        self.log_k = np.zeros(len(edges))

    def solve(self, log_k):
        k = tnp.exp(log_k)
        values = tnp.concatenate([tnp.asarray(self.ground), -k, -k, k, k])
        return spsolve(csr_matrix((values, (self.row, self.col)), shape=(self.n, self.n)), self.f)

    def misfit(self, log_k):
        return tnp.sum((self.solve(log_k) - self.measured) ** 2)

    def time_forward(self):
        self.solve(self.log_k)

    def time_value_and_grad(self):
        tg.value_and_grad(self.misfit)(self.log_k)

    def track_gradient_over_forward(self):
        t = interleaved_medians(
            {
                "forward": lambda: self.solve(self.log_k),
                "gradient": lambda: tg.value_and_grad(self.misfit)(self.log_k),
            },
            repeat=9,
        )
        return t["gradient"] / t["forward"]

    track_gradient_over_forward.unit = "ratio"
