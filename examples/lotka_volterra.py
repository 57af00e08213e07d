"""
Fitting Lotka-Volterra parameters
=================================

Fit the four Lotka-Volterra parameters to predator-prey data by gradient-based
optimisation through a differentiable ODE solver (``tapegrad.integrate.odeint``)::

    dx/dt = alpha x - beta x y        (prey)
    dy/dt = delta x y - gamma y       (predator)

By default the data are simulated from known parameters with log-normal noise (fixed
seed), so the fit can be checked against the truth. ``--data hudson-bay`` fits the
classic Hudson's Bay Company lynx-hare pelt counts (1900-1920, shipped in
``examples/data/hudson_bay.csv``) instead, with the initial populations fitted too.

The loss is the mean squared error of log populations. The solver is adaptive
Dormand-Prince 5(4) at ``rtol = 1e-8``; the right-hand side is captured once and
replayed inside the solver's compiled loop, and the gradient with respect to the
log-parameters (and initial populations) is its discrete reverse pass through the
steps taken (``--adjoint`` for the continuous adjoint). SciPy's L-BFGS-B does the rest.

Run ``python examples/lotka_volterra.py``; it prints the fit and saves
``lotka_volterra.png`` in the current directory.
"""

from __future__ import annotations

import argparse
import csv
import os
import time

import common
import numpy as np
from scipy.optimize import minimize

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.scipy.integrate import odeint

NAMES = ("alpha", "beta", "gamma", "delta")
TRUE = np.array([1.0, 0.1, 1.5, 0.075])
TRUE_X0 = (10.0, 5.0)  # initial prey and predator populations (simulated data)
RTOL = 1e-8

# %%
# The model
# ---------
# The right-hand side is ordinary ``tapegrad.numpy`` code; ``odeint`` takes it and the
# parameters, and the trajectory it returns is differentiable with respect to both the
# parameters and the initial populations.


def lotka_volterra(z, t, theta):
    """The right-hand side: populations ``z = (x, y)``, parameters ``theta``."""
    x, y = z[0], z[1]
    return tnp.stack([theta[0] * x - theta[1] * x * y, theta[3] * x * y - theta[2] * y])


def trajectory(theta, z0, t, adjoint=False):
    """Populations at the times ``t``: ``(len(t), 2)``; tensors in, tensor out."""
    return odeint(lotka_volterra, z0, t, theta, rtol=RTOL, atol=1e-8, adjoint=adjoint)


# %%
# Data
# ----
# Simulated observations: the true trajectory at the observation times, multiplied by
# log-normal noise. The Hudson's Bay counts are read from ``examples/data``.


def simulate(theta, x0, y0, t, noise, seed):
    """Noisy observations ``(2, len(t))`` of the true trajectory."""
    z = trajectory(np.asarray(theta), np.array([x0, y0]), t)
    rng = np.random.default_rng(seed)
    return z.T * np.exp(noise * rng.standard_normal((2, len(t))))


def load_hudson_bay():
    """Years, and pelt counts ``(2, len(years))`` (hare, lynx; thousands) from the CSV."""
    # the path is found from __file__ when called: sphinx-gallery runs the script (the
    # simulated fit only) without a __file__
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "hudson_bay.csv")
    with open(data) as fh:
        rows = [r for r in csv.DictReader(fh)]
    years = np.array([int(r["year"]) for r in rows])
    obs = np.array([[float(r["hare"]) for r in rows], [float(r["lynx"]) for r in rows]])
    return years, obs


# %%
# The loss and its gradient
# -------------------------
# The parameters are fitted on the log scale, which keeps them positive. One call of
# the objective solves the ODE and returns the loss and its gradient together, the
# ``(fun, jac)`` pair that ``scipy.optimize.minimize(..., jac=True)`` expects.


def make_objective(log_obs, t, fit_initial, adjoint=False):
    """``phi -> (loss, gradient)`` for scipy; phi = log(theta) [+ log(x0, y0)]."""
    known = np.array(TRUE_X0)

    def loss(phi):
        ep = tnp.exp(phi)
        z0 = ep[4:6] if fit_initial else known
        z = trajectory(ep[:4], z0, t, adjoint)
        return tnp.sum((tnp.log(z.T) - log_obs) ** 2) / (2 * len(t))

    return tg.value_and_grad(loss)


def fit(obs, t, fit_initial, start, progress=True, adjoint=False):
    objective = make_objective(np.log(obs), t, fit_initial, adjoint)
    bar = common.progress(None, "L-BFGS-B", progress)

    def callback(intermediate_result):
        bar.set_postfix(loss=f"{intermediate_result.fun:.4g}")
        bar.update()

    res = minimize(
        objective,
        np.log(start),
        jac=True,
        method="L-BFGS-B",
        callback=callback,
        options={"maxiter": 500, "gtol": 1e-9},
    )
    bar.close()
    return res


# %%
# Plot and command line
# ---------------------
# ``main`` simulates (or loads) the data, fits, prints the estimates and plots the fitted
# trajectory on a fine grid over the data.


def plot(path, t_obs, obs, t_fine, fine, title):
    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, (name, color) in enumerate((("prey", "tab:blue"), ("predator", "tab:red"))):
        ax.plot(t_obs, obs[i], "o", color=color, alpha=0.7, label=f"{name} (data)")
        ax.plot(t_fine, fine[i], "-", color=color, label=f"{name} (fitted model)")
    ax.set_xlabel("time")
    ax.set_ylabel("population")
    ax.set_title(title)
    ax.legend(ncol=2)
    return common.save(fig, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Fit Lotka-Volterra parameters to data.")
    parser.add_argument("--data", choices=("simulated", "hudson-bay"), default="simulated")
    parser.add_argument("--n-obs", type=int, default=41, help="observations (simulated)")
    parser.add_argument("--noise", type=float, default=0.1, help="log-normal noise sd")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="lotka_volterra.png")
    parser.add_argument("--adjoint", action="store_true", help="continuous adjoint gradients")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    if args.data == "simulated":
        x0, y0 = TRUE_X0
        t_obs = np.arange(args.n_obs) * 0.5
        obs = simulate(TRUE, x0, y0, t_obs, args.noise, args.seed)
        start = np.array([0.7, 0.07, 2.0, 0.1])
        fit_initial = False
    else:
        years, obs = load_hudson_bay()
        t_obs = years.astype(float)
        start = np.array([0.5, 0.02, 0.8, 0.02, obs[0, 0], obs[1, 0]])
        fit_initial = True

    t0 = time.perf_counter()
    res = fit(obs, t_obs, fit_initial, start, not args.no_progress, args.adjoint)
    elapsed = time.perf_counter() - t0
    est = np.exp(res.x)
    print(
        f"{res.message} after {res.nit} iterations, {res.nfev} loss+gradient "
        f"evaluations, {elapsed:.1f} s; final loss {res.fun:.5f}"
    )
    print(
        f"{'parameter':>10} {'fitted':>10}" + (f" {'true':>10}" if args.data == "simulated" else "")
    )
    for i, name in enumerate(NAMES):
        line = f"{name:>10} {est[i]:10.4f}"
        if args.data == "simulated":
            line += f" {TRUE[i]:10.4f}"
        print(line)
    if fit_initial:
        print(f"{'x0, y0':>10} {est[4]:10.2f} {est[5]:10.2f}")

    # the fitted trajectory on a fine grid, for the plot
    t_fine = np.linspace(t_obs[0], t_obs[-1], 10 * (len(t_obs) - 1) + 1)
    z0 = est[4:6] if fit_initial else np.array(TRUE_X0)
    fine = trajectory(est[:4], z0, t_fine).T
    plot(args.out, t_obs, obs, t_fine, fine, f"Lotka-Volterra fit ({args.data} data)")
    return est, res


if __name__ == "__main__":
    main()
