"""
Relaxing a Lennard-Jones cluster
================================

Relax a 38-atom Lennard-Jones cluster: forces are minus the gradient of the energy::

    E = sum_{i<j} 4 (r_ij^-12 - r_ij^-6)        (reduced units: epsilon = sigma = 1)

The energy is written once with ``tapegrad.numpy``; ``tg.value_and_grad`` gives the
forces, which are checked against the analytic formula
``F_i = sum_j 24 (2 r^-14 - r^-8) (x_i - x_j)`` before relaxing the cluster with
L-BFGS from a random compact start. The best known LJ38 minimum is -173.928 (a
truncated octahedron); a random start ends in a nearby local minimum.

Run ``python examples/lennard_jones.py``; it prints the energies and force check and
saves ``lennard_jones.png`` (energy against iteration) in the current directory.
"""

from __future__ import annotations

import argparse

import common
import numpy as np
from scipy.optimize import minimize

import tapegrad as tg
import tapegrad.numpy as tnp

# %%
# The energy, and the forces by hand
# ----------------------------------
# ``energy`` is the only function differentiated; ``analytic_forces`` is the textbook
# formula, used to check the gradient.


def energy(x):
    """Total Lennard-Jones energy of positions ``x`` (n, 3); works on arrays or tensors."""
    n = x.shape[0]
    diff = x.reshape(n, 1, 3) - x.reshape(1, n, 3)
    upper = np.triu(np.ones((n, n), dtype=bool), 1)  # each pair once; no i == j
    r2 = tnp.sum(diff**2, axis=-1)[upper]
    inv6 = (1.0 / r2) ** 3
    return tnp.sum(4.0 * (inv6 * inv6 - inv6))


def analytic_forces(x):
    diff = x[:, None, :] - x[None, :, :]
    r2 = np.sum(diff**2, axis=-1)
    np.fill_diagonal(r2, np.inf)
    coef = 24.0 * (2.0 / r2**7 - 1.0 / r2**4)
    return np.sum(coef[:, :, None] * diff, axis=1)


def random_cluster(n, seed):
    """Atoms at random in a ball of the right density, no two closer than 0.9."""
    rng = np.random.default_rng(seed)
    radius = 0.65 * n ** (1 / 3)
    pts = []
    while len(pts) < n:
        p = rng.uniform(-radius, radius, 3)
        if np.linalg.norm(p) <= radius and all(np.linalg.norm(p - q) > 0.9 for q in pts):
            pts.append(p)
    return np.array(pts)


# %%
# Check the forces, then relax
# ----------------------------
# From a random compact start: the autodiff forces are compared with the analytic ones,
# then L-BFGS minimises the energy, recording it at every iteration for the plot.


def main(argv=None):
    parser = argparse.ArgumentParser(description="Relax a Lennard-Jones cluster.")
    parser.add_argument("--atoms", type=int, default=38)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--max-iter", type=int, default=2000)
    parser.add_argument("--out", default="lennard_jones.png")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    x0 = random_cluster(args.atoms, args.seed)
    value_and_grad = tg.value_and_grad(energy)
    e0, g0 = value_and_grad(x0)
    force_error = float(np.max(np.abs(-g0 - analytic_forces(x0))))
    print(
        f"{args.atoms} atoms; start energy {e0:.4f}; forces from autodiff vs analytic: "
        f"max |difference| {force_error:.2e} (max |force| {np.max(np.abs(g0)):.2f})"
    )

    history = []
    bar = common.progress(args.max_iter, "L-BFGS", not args.no_progress)

    def objective(flat):
        e, g = value_and_grad(flat.reshape(-1, 3))
        return e, g.reshape(-1)

    def callback(intermediate_result):
        history.append(intermediate_result.fun)
        bar.set_postfix(energy=f"{intermediate_result.fun:.4f}")
        bar.update()

    res = minimize(
        objective,
        x0.reshape(-1),
        jac=True,
        method="L-BFGS-B",
        callback=callback,
        options={"maxiter": args.max_iter, "gtol": 1e-8, "ftol": 1e-15},
    )
    bar.close()
    x = res.x.reshape(-1, 3)
    forces = analytic_forces(x)
    print(
        f"relaxed in {res.nit} iterations: energy {res.fun:.4f} (best known for 38 atoms: "
        f"-173.928); residual max |force| {np.max(np.abs(forces)):.2e}"
    )
    dist = np.linalg.norm(x[:, None] - x[None], axis=-1)[np.triu_indices(args.atoms, 1)]
    print(
        f"nearest-neighbour distance {dist.min():.4f} (pair minimum at 2^(1/6) = "
        f"{2 ** (1 / 6):.4f})"
    )

    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(np.arange(1, len(history) + 1), history)
    ax.axhline(-173.928, color="gray", ls="--", lw=1, label="best known LJ38 minimum")
    ax.set_xlabel("L-BFGS iteration")
    ax.set_ylabel("energy (epsilon)")
    ax.set_title(f"Relaxing a {args.atoms}-atom Lennard-Jones cluster")
    ax.legend()
    common.save(fig, args.out)
    return {
        "start": e0,
        "energy": res.fun,
        "force_error": force_error,
        "residual_force": float(np.max(np.abs(forces))),
        "history": history,
    }


if __name__ == "__main__":
    main()
