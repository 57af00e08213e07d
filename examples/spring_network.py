"""
Fitting a hanging net through its equilibrium
=============================================

A net of springs hangs from its top row under gravity. Where it comes to rest is the
minimum of its energy::

    E(x; k) = sum_springs k_s / 2 (|x_i - x_j| - L_s)^2 + sum_nodes w y_i

over the free nodes' positions ``x``, for the stiffnesses ``k`` (one for horizontal,
vertical and diagonal springs). Given measured rest positions, which stiffnesses made
them? The model's output is a solver's answer: ``tapegrad.scipy.optimize.minimize``
finds the equilibrium with SciPy's BFGS, and differentiates it implicitly. At the
minimum the gradient of ``E`` is zero, so ``dx*/dk = -H^-1 d(grad E)/dk``: one solve
with the Hessian per gradient, whatever the number of BFGS iterations. The outer fit is
SciPy's L-BFGS on the misfit, with that gradient, checked against central differences
first.

Run ``python examples/spring_network.py``; it prints the check, the fit and the
recovered stiffnesses, and saves ``spring_network.png`` in the current directory.
"""

from __future__ import annotations

import argparse
import time

import common
import numpy as np
from scipy.optimize import minimize as scipy_minimize

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.scipy import optimize

TRUE_LOG_K = np.log([40.0, 25.0, 10.0])  # horizontal, vertical, diagonal
WEIGHT = 1.0  # each node's weight


# %%
# The net
# -------
# Nodes on a grid; springs to the right, below and on both diagonals, each at its rest
# length on the grid. The top row is held.


def build(rows, cols):
    pos = np.array([(c, -r) for r in range(rows) for c in range(cols)], float)
    springs, kinds = [], []
    for r in range(rows):
        for c in range(cols):
            i = r * cols + c
            if c + 1 < cols:
                springs.append((i, i + 1)), kinds.append(0)
            if r + 1 < rows:
                springs.append((i, i + cols)), kinds.append(1)
                if c + 1 < cols:
                    springs.append((i, i + cols + 1)), kinds.append(2)
                if c > 0:
                    springs.append((i, i + cols - 1)), kinds.append(2)
    springs = np.array(springs)
    rest = np.linalg.norm(pos[springs[:, 0]] - pos[springs[:, 1]], axis=1)
    free = np.arange(cols, rows * cols)  # all but the top row
    return pos, springs, np.array(kinds), rest, free


# %%
# The energy and the equilibrium
# ------------------------------
# ``energy`` is written once with ``tapegrad.numpy``; the equilibrium is SciPy's BFGS
# through ``tapegrad.scipy.optimize.minimize``, differentiable in ``args``.


def make_model(rows, cols):
    pos, springs, kinds, rest, free = build(rows, cols)
    held = np.setdiff1d(np.arange(len(pos)), free)

    def energy(x, log_k):
        k = tnp.exp(log_k)[kinds]
        nodes = tnp.concatenate([tnp.asarray(pos[held]), x.reshape(-1, 2)])
        order = np.argsort(np.concatenate([held, free]))
        nodes = nodes[order]
        d = nodes[springs[:, 0]] - nodes[springs[:, 1]]
        stretch = tnp.sqrt(tnp.sum(d * d, axis=1)) - rest
        return tnp.sum(0.5 * k * stretch**2) + WEIGHT * tnp.sum(x.reshape(-1, 2)[:, 1])

    def equilibrium(log_k):
        x0 = pos[free].ravel()
        return optimize.minimize(energy, x0, args=(log_k,), method="BFGS", tol=1e-10).x

    return equilibrium, pos, springs, free


def main(argv=None):
    parser = argparse.ArgumentParser(description="Fit stiffnesses through an equilibrium.")
    parser.add_argument("--rows", type=int, default=5)
    parser.add_argument("--cols", type=int, default=6)
    parser.add_argument("--noise", type=float, default=0.002)
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--out", default="spring_network.png")
    args = parser.parse_args(argv)

    equilibrium, pos, springs, free = make_model(args.rows, args.cols)
    rng = np.random.default_rng(0)
    measured = np.asarray(equilibrium(TRUE_LOG_K))
    measured = measured + args.noise * rng.standard_normal(measured.shape)

    def misfit(log_k):
        return tnp.sum((equilibrium(log_k) - measured) ** 2)

    # %%
    # The implicit gradient against central differences
    # --------------------------------------------------
    start = np.log([20.0, 20.0, 20.0])
    t0 = time.perf_counter()
    _, grad = tg.value_and_grad(misfit)(start)
    t_grad = time.perf_counter() - t0
    t0 = time.perf_counter()
    equilibrium(start)
    t_solve = time.perf_counter() - t0
    eps = 1e-3  # (a smaller step would measure BFGS's own stopping noise, not the slope)
    fd = np.array(
        [
            (float(misfit(start + eps * e)) - float(misfit(start - eps * e))) / (2 * eps)
            for e in np.eye(3)
        ]
    )
    rel = np.max(np.abs(grad - fd)) / np.max(np.abs(fd))
    print(f"gradient check: max relative difference to central differences {rel:.1e}")
    print(f"one solve {t_solve * 1e3:.0f} ms; value and gradient {t_grad * 1e3:.0f} ms")

    # %%
    # The fit
    # -------
    bar = common.progress(100, "fit", not args.no_progress)
    res = scipy_minimize(
        tg.value_and_grad(misfit),
        start,
        jac=True,
        method="L-BFGS-B",
        options={"gtol": 1e-10, "maxiter": 100},
        callback=lambda xk: bar.update(),
    )
    bar.close()
    k_fit, k_true = np.exp(res.x), np.exp(TRUE_LOG_K)
    print(f"fit: misfit {res.fun:.3g} after {res.nit} iterations")
    for name, a, b in zip(("horizontal", "vertical", "diagonal"), k_fit, k_true):
        print(f"  k_{name:<10} {a:7.2f}  (true {b:.2f})")

    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(6, 5))
    fitted = np.asarray(equilibrium(res.x)).reshape(-1, 2)
    nodes = pos.copy()
    nodes[free] = fitted
    for i, j in springs:
        ax.plot(*nodes[[i, j]].T, color="0.6", lw=0.8)
    ax.plot(*measured.reshape(-1, 2).T, "o", ms=5, label="measured rest positions")
    ax.plot(*fitted.T, "x", ms=6, color="C3", label="fitted equilibrium")
    ax.plot(*np.delete(pos, free, axis=0).T, "s", color="k", ms=5, label="held")
    ax.set_aspect("equal")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("Stiffnesses fitted through the equilibrium")
    common.save(fig, args.out)
    return k_fit, res, rel


if __name__ == "__main__":
    main()
