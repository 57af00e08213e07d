"""
Fitting a conductivity field through a sparse solve
===================================================

Steady diffusion in a square plate, ``-div(k grad u) = f``, discretised by finite
volumes on an ``m x m`` grid: one unknown per cell, a sparse matrix whose values are
the conductances between neighbouring cells (the harmonic mean of their
conductivities). Four experiments inject heat at different places; each gives the
temperature everywhere, with noise. Which conductivity field ``k`` (one value per cell)
explains them?

The model's output is a sparse solve, ``tapegrad.scipy.sparse.linalg.spsolve``, one per
experiment. Its gradient in the matrix's values is implicit: one more solve with the
transposed matrix, which reuses the forward solve's LU factors. So the misfit's gradient
in all ``m * m`` log-conductivities costs about one forward solve more, and L-BFGS fits
them (with a smoothness penalty, since the data cannot pin down every cell alone).

Run ``python examples/conductivity.py``; it prints the fit and saves
``conductivity.png`` (true and fitted fields) in the current directory.
"""

from __future__ import annotations

import argparse
import time

import common
import numpy as np
from scipy.optimize import minimize

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.scipy.sparse import csr_matrix
from tapegrad.scipy.sparse.linalg import spsolve

# %%
# The grid and its matrix
# -----------------------
# Cells ``i`` and ``j`` that share a face exchange heat at the rate
# ``c_ij (u_i - u_j)``, with ``c_ij`` the harmonic mean of their conductivities; the
# plate's edge is held at 0 through a half cell (``2 k_i``).


def grid(m):
    idx = np.arange(m * m).reshape(m, m)
    faces = np.r_[
        np.c_[idx[:, :-1].ravel(), idx[:, 1:].ravel()],
        np.c_[idx[:-1, :].ravel(), idx[1:, :].ravel()],
    ]
    border = np.zeros((m, m))
    border[0, :] += 1
    border[-1, :] += 1
    border[:, 0] += 1
    border[:, -1] += 1
    return faces, border.ravel()


def make_model(m):
    n = m * m
    faces, border = grid(m)
    i, j = faces[:, 0], faces[:, 1]
    row = np.r_[np.arange(n), i, j, i, j]
    col = np.r_[np.arange(n), j, i, i, j]
    xs = (np.arange(m) + 0.5) / m
    X, Y = np.meshgrid(xs, xs)
    sources = np.stack(
        [
            np.exp(-((X - a) ** 2 + (Y - b) ** 2) / 0.01).ravel()
            for a, b in ((0.3, 0.3), (0.7, 0.3), (0.3, 0.7), (0.7, 0.7))
        ]
    )

    def temperatures(log_k):
        k = tnp.exp(log_k)
        c = 2.0 * k[i] * k[j] / (k[i] + k[j])  # the faces' conductances
        values = tnp.concatenate([2.0 * k * border, -c, -c, c, c])
        A = csr_matrix((values, (row, col)), shape=(n, n))
        return [spsolve(A, s) for s in sources]

    def penalty(log_k):
        d = log_k[i] - log_k[j]
        return tnp.sum(d * d)

    return temperatures, penalty, X, Y


def true_field(X, Y):
    """A conductive inclusion and a resistive band, on a background of 1."""
    blob = 1.2 * np.exp(-((X - 0.35) ** 2 + (Y - 0.6) ** 2) / 0.02)
    band = -0.8 * np.exp(-((X - 0.7) ** 2) / 0.005)
    return (blob + band).ravel()


def main(argv=None):
    parser = argparse.ArgumentParser(description="Fit a conductivity field through sparse solves.")
    parser.add_argument("--m", type=int, default=32, help="cells per side")
    parser.add_argument("--noise", type=float, default=1e-3, help="relative noise")
    parser.add_argument("--smooth", type=float, default=3e-4, help="smoothness weight")
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--out", default="conductivity.png")
    args = parser.parse_args(argv)

    temperatures, penalty, X, Y = make_model(args.m)
    truth = true_field(X, Y)
    rng = np.random.default_rng(0)
    data = [np.asarray(u) for u in temperatures(truth)]
    scale = max(float(np.max(u)) for u in data)
    data = [u + args.noise * scale * rng.standard_normal(u.shape) for u in data]

    def loss(log_k):
        misfit = sum(tnp.sum((u - d) ** 2) for u, d in zip(temperatures(log_k), data))
        return misfit / scale**2 + args.smooth * penalty(log_k)

    # %%
    # The gradient, checked, and its cost against a forward solve
    # -----------------------------------------------------------
    start = np.zeros(args.m * args.m)
    probe = rng.standard_normal(start.size)
    eps = 1e-6
    slope = (float(loss(start + eps * probe)) - float(loss(start - eps * probe))) / (2 * eps)
    _, g = tg.value_and_grad(loss)(start)
    rel = abs(float(g @ probe) - slope) / abs(slope)
    print(f"directional derivative against central differences: {rel:.1e} relative")
    t0 = time.perf_counter()
    temperatures(start)
    t_forward = time.perf_counter() - t0
    t0 = time.perf_counter()
    tg.value_and_grad(loss)(start)
    t_grad = time.perf_counter() - t0
    print(f"forward solves {t_forward * 1e3:.0f} ms; loss and gradient {t_grad * 1e3:.0f} ms")

    # %%
    # The fit
    # -------
    bar = common.progress(args.iters, "fit", not args.no_progress)
    res = minimize(
        tg.value_and_grad(loss),
        start,
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": args.iters},
        callback=lambda xk: bar.update(),
    )
    bar.close()
    error = np.sqrt(np.mean((res.x - truth) ** 2)) / np.std(truth)
    print(
        f"fit: loss {res.fun:.3g} after {res.nit} iterations; field error {error:.2f} of its spread"
    )

    plt = common.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.8))
    lim = (truth.min(), truth.max())
    for ax, field, title in ((axes[0], truth, "true log k"), (axes[1], res.x, "fitted log k")):
        im = ax.imshow(
            field.reshape(args.m, args.m),
            origin="lower",
            vmin=lim[0],
            vmax=lim[1],
            extent=(0, 1, 0, 1),
            cmap="viridis",
        )
        ax.set_title(title)
    fig.colorbar(im, ax=axes[1], shrink=0.8)
    common.save(fig, args.out)
    return res, error, rel


if __name__ == "__main__":
    main()
