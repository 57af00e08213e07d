"""Strong scaling of one loss-and-gradient evaluation over MPI, and the cost of an
Allreduce by message size (the numbers docs/guide/distributed.md builds its model from).

    mpiexec -n 1 python asv_bench/mpi_scaling.py
    mpiexec -n 2 python asv_bench/mpi_scaling.py

Logistic regression with 1e6 rows and 20 features (compute dominates), sharded by rank;
medians of 15 evaluations, each timed as local evaluation plus the Allreduce.
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("TAPEGRAD_THREADS", "1")

import numpy as np
from mpi4py import MPI

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import distributed as dist

COMM = MPI.COMM_WORLD


def loss(w, x, y):
    z = x @ w
    return tnp.sum(tnp.logaddexp(0.0, z) - y * z)


def main() -> None:
    n, d = 1_000_000, 20
    rng = np.random.default_rng(0)
    start, stop = dist.shard_range(n)
    x = rng.standard_normal((n, d))[start:stop]
    y = (rng.uniform(size=n) < 0.5).astype(float)[start:stop]
    step = tg.compile(loss)
    w = np.full(d, 0.01)
    step.value_and_grad(w, x, y)
    local, reduce = [], []
    for _ in range(15):
        COMM.Barrier()
        t0 = time.perf_counter()
        value, grad = step.value_and_grad(w, x, y)
        t1 = time.perf_counter()
        dist.allreduce_grads((np.array([value]), grad))
        t2 = time.perf_counter()
        local.append(t1 - t0)
        reduce.append(t2 - t1)
    lm, rm = np.median(local), np.median(reduce)
    worst = COMM.reduce(lm + rm, op=MPI.MAX, root=0)
    sizes = [1, 21, 1_000, 100_000, 1_000_000]  # float64 elements
    costs = []
    for m in sizes:
        buf = np.ones(m)
        times = []
        for _ in range(20):
            COMM.Barrier()
            t0 = time.perf_counter()
            COMM.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
            times.append(time.perf_counter() - t0)
        costs.append(np.median(times))
    if COMM.rank == 0:
        print(f"ranks {COMM.size}: rows per rank {stop - start}")
        print(f"  local evaluation   {lm * 1e3:8.2f} ms")
        print(f"  allreduce (21 f64) {rm * 1e6:8.1f} us   ({rm / (lm + rm):.2%} of the step)")
        print(f"  step (slowest rank){worst * 1e3:8.2f} ms")
        for m, c in zip(sizes, costs):
            print(f"  Allreduce of {m:>9,} float64: {c * 1e6:9.1f} us")


if __name__ == "__main__":
    main()
