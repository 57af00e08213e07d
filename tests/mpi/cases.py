"""Run under mpiexec by tests/test_distributed.py: ``python tests/mpi/cases.py CASE``.

Each rank prints ``OK <case> <rank>`` when its checks pass; an assertion error exits
non-zero (mpiexec then fails)."""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import distributed as dist

COMM = MPI.COMM_WORLD
N, D = 1003, 5  # rows do not divide evenly among 2 or 4 ranks


def data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, D))
    y = (rng.uniform(size=N) < 1 / (1 + np.exp(-x @ rng.standard_normal(D)))).astype(float)
    return x, y


def loss(w, x, y):  # a sum over data points
    z = x @ w
    return tnp.sum(tnp.logaddexp(0.0, z) - y * z)


def same_on_every_rank(a: np.ndarray) -> None:
    everyone = COMM.allgather(np.ascontiguousarray(a).tobytes())
    assert all(b == everyone[0] for b in everyone), "results differ between ranks"


def case_agree() -> None:
    x, y = data()
    w = np.linspace(-0.5, 0.5, D)
    xs, ys = dist.shard(x), dist.shard(y)
    start, stop = dist.shard_range(N)
    assert xs.shape[0] == stop - start
    assert COMM.allreduce(xs.shape[0]) == N
    want_value, want_grad = tg.value_and_grad(loss)(w, x, y)  # the single-process result
    for fn in (tg.value_and_grad(loss), tg.compile(loss)):
        value, grad = dist.DataParallel(fn)(w, xs, ys)
        assert abs(value - want_value) <= 1e-12 * abs(want_value), (value, want_value)
        np.testing.assert_allclose(
            grad, want_grad, rtol=1e-12, atol=1e-12 * np.abs(want_grad).max()
        )
        same_on_every_rank(grad)
        same_on_every_rank(np.array([value]))
    # a mean over all points: the shard's sum over the global count, summed
    mean_value, _ = dist.DataParallel(tg.value_and_grad(lambda w, x, y: loss(w, x, y) / N))(
        w, xs, ys
    )
    assert abs(mean_value - want_value / N) <= 1e-12 * abs(want_value / N)
    # a pytree of two dtypes, reduced in place; mean divides by the number of ranks
    g64 = np.full(3, COMM.rank + 1.0)
    g32 = np.full((2, 2), COMM.rank + 1.0, np.float32)
    out = dist.allreduce_grads({"a": g64, "b": [g32, None], "c": 2.0}, op="mean")
    total = COMM.size * (COMM.size + 1) / 2
    assert out["a"] is g64 and np.all(g64 == total / COMM.size)
    assert out["b"][0] is g32 and g32.dtype == np.float32 and np.all(g32 == total / COMM.size)
    assert out["b"][1] is None and out["c"] == 2.0


def case_minimize() -> None:
    from scipy.optimize import minimize

    x, y = data()
    fun = dist.DataParallel(tg.compile(loss))
    xs, ys = dist.shard(x), dist.shard(y)
    res = dist.minimize(
        lambda w: fun(w, xs, ys), np.zeros(D), method="L-BFGS-B", options={"gtol": 1e-10}
    )
    single = minimize(
        tg.value_and_grad(loss),
        np.zeros(D),
        args=(x, y),
        jac=True,
        method="L-BFGS-B",
        options={"gtol": 1e-10},
    )
    np.testing.assert_allclose(res.x, single.x, rtol=1e-7, atol=1e-9)
    same_on_every_rank(res.x)


def case_fail() -> None:
    x, y = data()
    xs, ys = dist.shard(x), dist.shard(y)
    if COMM.rank == 1 % COMM.size:
        ys = ys.copy()
        ys[0] = np.nan  # bad data on one shard

    def checked(w, x, y):
        with tg.detect_anomaly():  # raises on the NaN gradient of the bad shard
            return tg.value_and_grad(loss)(w, x, y)

    dist.DataParallel(checked)(np.zeros(D), xs, ys)
    COMM.Barrier()


def case_contract() -> None:
    """Mismatched pytrees raise on every rank (no silent sum, no hang); 0-d arrays are
    reduced in place; minimize passes each rank's own args; aux stays local; the buffer
    cache keeps one buffer per dtype however the sizes vary."""
    r = COMM.rank
    cases = {
        "keys in another order": {"a": 1.0, "b": 2.0} if r == 0 else {"b": 2.0, "a": 1.0},
        "None on one rank": [None, np.ones(3)] if r == 0 else [np.ones(3), None],
        "another dtype": np.ones(4, np.float32 if r == 0 else np.float64),
        "op": None,
        "not numbers": [np.ones(2), "oops" if r == COMM.size - 1 else np.ones(1)],
    }
    for name, tree in cases.items():
        op = ("mean" if r == 0 else "sum") if name == "op" else "sum"
        tree = np.ones(2) if tree is None else tree
        try:
            dist.allreduce_grads(tree, op=op)
        except (ValueError, TypeError) as e:
            assert COMM.size > 1 or name == "not numbers", (name, e)
        else:
            assert COMM.size == 1 and name != "not numbers", f"{name}: no error on rank {r}"
    b = np.array(float(r + 1))
    out = dist.allreduce_grads({"b": b, "c": 3.0})
    total = COMM.size * (COMM.size + 1) / 2
    assert out["b"] is b and b == total and out["c"] == 3.0 * COMM.size
    for n in (10, 1000, 500, 20):
        dist.allreduce_grads(np.ones(n))
    assert sum(1 for key in dist._BUFFERS if key[1] == "<f8") == 1
    x, y = data()
    step = dist.DataParallel(tg.compile(lambda w, x, y: (loss(w, x, y), x.shape[0]), has_aux=True))
    (_, rows), _ = step(np.zeros(D), dist.shard(x), dist.shard(y))
    assert rows == dist.shard(x).shape[0] and COMM.allreduce(rows) == N
    evaluate = dist.DataParallel(tg.compile(loss))
    res = dist.minimize(evaluate, np.zeros(D), args=(dist.shard(x), dist.shard(y)), method="BFGS")
    same_on_every_rank(res.x)


if __name__ == "__main__":
    case = sys.argv[1]
    globals()[f"case_{case}"]()
    print(f"OK {case} {COMM.rank}", flush=True)
