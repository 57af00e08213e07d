"""
Logistic regression on sharded data over MPI
============================================

Logistic regression on sharded data over MPI: every rank holds a slice of the rows,
evaluates its part of the loss and gradient, and one Allreduce sums them::

    mpiexec -n 4 python examples/distributed_fit.py

Rank 0 runs scipy's L-BFGS (``tapegrad.distributed.minimize``); the other ranks serve
the evaluations of the same points. The loss is a sum over data points, so the sum of
the shards' losses is the loss of all the data, and the fit is the one a single
process finds: rank 0 checks that by fitting all the data on its own too (``--check``,
on by default), prints both, and saves ``distributed_fit.png``. Data: a fixed-seed
synthetic problem, generated identically on every rank and sliced by rank (a real job
reads its own shard from disk).
"""

from __future__ import annotations

import argparse
import time

import common
import numpy as np
from logistic_regression import make_data, penalised_loss
from mpi4py import MPI
from scipy.optimize import minimize

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import distributed as dist

# %%
# One shard's loss
# ----------------
# The loss and data come from ``logistic_regression.py``; each rank evaluates the sum
# over its own rows, and ``DataParallel`` adds the ranks' values and gradients.


def shard_loss(w, x, y, lam, ranks):
    """This shard's part of the penalised loss: its data term, plus the penalty split
    evenly between the ranks (so the sum over ranks is the whole loss)."""
    z = x @ w
    return tnp.sum(tnp.logaddexp(0.0, z) - y * z) + 0.5 * lam * tnp.sum(w * w) / ranks


# %%
# The fit on every rank
# ---------------------
# Every rank runs ``main``; ``dist.minimize`` drives scipy on rank 0 while the others
# evaluate the same points, and rank 0 alone prints, checks and plots.


def main(argv=None):
    parser = argparse.ArgumentParser(description="Logistic regression on sharded data over MPI.")
    parser.add_argument("--samples", type=int, default=200_000)
    parser.add_argument("--features", type=int, default=20, help="including the intercept")
    parser.add_argument("--lam", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-check", action="store_true", help="skip the single-process fit")
    parser.add_argument("--out", default="distributed_fit.png")
    args = parser.parse_args(argv)
    comm = MPI.COMM_WORLD

    x, y, w_true = make_data(args.samples, args.features, args.seed)
    xs, ys = dist.shard(x, comm), dist.shard(y, comm)
    evaluate = dist.DataParallel(tg.compile(shard_loss), comm)

    t0 = time.perf_counter()
    res = dist.minimize(
        lambda w: evaluate(w, xs, ys, args.lam, comm.size),
        np.zeros(args.features),
        comm,
        method="L-BFGS-B",
        options={"gtol": 1e-10, "ftol": 1e-15},
    )
    elapsed = time.perf_counter() - t0
    rows = comm.gather(xs.shape[0], root=0)
    if comm.rank != 0:
        return {"w": res.x}

    fmt = {"precision": 5, "suppress": True}  # (printoptions for these lines only)
    print(
        f"{comm.size} rank(s), rows per rank {rows}; {res.nit} L-BFGS iterations, {elapsed:.2f} s"
    )
    with np.printoptions(**fmt):
        print(f"distributed fit: {res.x[:6]}{' ...' if args.features > 6 else ''}")
    out = {"w": res.x, "ranks": comm.size}
    if not args.no_check:
        single = minimize(
            tg.value_and_grad(penalised_loss),
            np.zeros(args.features),
            args=(x, y, args.lam),
            jac=True,
            method="L-BFGS-B",
            options={"gtol": 1e-10, "ftol": 1e-15},
        )
        out["difference"] = float(np.max(np.abs(res.x - single.x)))
        with np.printoptions(**fmt):
            print(f"single process:  {single.x[:6]}{' ...' if args.features > 6 else ''}")
        print(f"max |difference| {out['difference']:.2e}")
    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(w_true, res.x, "o", label=f"fit on {comm.size} rank(s)")
    lim = np.abs(w_true).max() * 1.1
    ax.plot([-lim, lim], [-lim, lim], ":", color="gray", label="true = fitted")
    ax.set_xlabel("true coefficient")
    ax.set_ylabel("fitted coefficient")
    ax.legend()
    ax.set_title(f"logistic regression, {args.samples} rows sharded over {comm.size} rank(s)")
    common.save(fig, args.out)
    return out


if __name__ == "__main__":
    main()
