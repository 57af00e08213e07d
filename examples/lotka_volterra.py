"""Fit the four Lotka-Volterra parameters to predator-prey data by gradient-based
optimisation through an RK4 integrator.

    dx/dt = alpha x - beta x y        (prey)
    dy/dt = delta x y - gamma y       (predator)

By default the data are simulated from known parameters with log-normal noise (fixed
seed), so the fit can be checked against the truth. ``--data hudson-bay`` fits the
classic Hudson's Bay Company lynx-hare pelt counts (1900-1920, shipped in
``examples/data/hudson_bay.csv``) instead, with the initial populations fitted too.

The loss is the mean squared error of log populations; its gradient with respect to
the log-parameters comes from one tapegrad backward pass through the whole integration
(about 20,000 recorded ops), and scipy's L-BFGS-B does the rest.

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

NAMES = ("alpha", "beta", "gamma", "delta")
TRUE = np.array([1.0, 0.1, 1.5, 0.075])
TRUE_X0 = (10.0, 5.0)  # initial prey and predator populations (simulated data)
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "hudson_bay.csv")


def rk4_trajectory(theta, x0, y0, n_obs, dt, substeps):
    """Integrate with RK4; return (prey, predator) at every ``substeps``-th step.

    Works on tensors (recording for the gradient) and on plain floats alike.
    """
    a, b, c, d = theta

    def f(x, y):
        return a * x - b * x * y, d * x * y - c * y

    x, y = x0, y0
    xs, ys = [x], [y]
    for _ in range(n_obs - 1):
        for _ in range(substeps):
            k1x, k1y = f(x, y)
            k2x, k2y = f(x + 0.5 * dt * k1x, y + 0.5 * dt * k1y)
            k3x, k3y = f(x + 0.5 * dt * k2x, y + 0.5 * dt * k2y)
            k4x, k4y = f(x + dt * k3x, y + dt * k3y)
            x = x + dt / 6 * (k1x + 2 * k2x + 2 * k3x + k4x)
            y = y + dt / 6 * (k1y + 2 * k2y + 2 * k3y + k4y)
        xs.append(x)
        ys.append(y)
    return xs, ys


def simulate(theta, x0, y0, n_obs, dt, substeps, noise, seed):
    xs, ys = rk4_trajectory(tuple(theta), x0, y0, n_obs, dt, substeps)
    rng = np.random.default_rng(seed)
    obs = np.array([xs, ys]) * np.exp(noise * rng.standard_normal((2, n_obs)))
    return obs


def load_hudson_bay():
    with open(DATA) as fh:
        rows = [r for r in csv.DictReader(fh)]
    years = np.array([int(r["year"]) for r in rows])
    obs = np.array([[float(r["hare"]) for r in rows], [float(r["lynx"]) for r in rows]])
    return years, obs


def squared_log_error(xs, ys, log_obs):
    """Sum of squared differences between the log populations and ``log_obs``."""
    total = 0.0
    for k in range(log_obs.shape[1]):
        total = (
            total + (tnp.log(xs[k]) - log_obs[0, k]) ** 2 + (tnp.log(ys[k]) - log_obs[1, k]) ** 2
        )
    return total


def make_objective(log_obs, n_obs, dt, substeps, fit_initial):
    """``phi -> (loss, gradient)`` for scipy; phi = log(theta) [+ log(x0, y0)]."""
    x0_known, y0_known = TRUE_X0

    def loss(phi):
        ep = tnp.exp(phi)
        theta = (ep[0], ep[1], ep[2], ep[3])
        x0, y0 = (ep[4], ep[5]) if fit_initial else (x0_known, y0_known)
        xs, ys = rk4_trajectory(theta, x0, y0, n_obs, dt, substeps)
        return squared_log_error(xs, ys, log_obs) / (2 * n_obs)

    return tg.value_and_grad(loss)


def fit(obs, dt, substeps, fit_initial, start, progress=True):
    n_obs = obs.shape[1]
    objective = make_objective(np.log(obs), n_obs, dt, substeps, fit_initial)
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=("simulated", "hudson-bay"), default="simulated")
    parser.add_argument("--n-obs", type=int, default=41, help="observations (simulated)")
    parser.add_argument("--noise", type=float, default=0.1, help="log-normal noise sd")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="lotka_volterra.png")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    substeps = 10
    if args.data == "simulated":
        dt = 0.05
        x0, y0 = TRUE_X0
        obs = simulate(TRUE, x0, y0, args.n_obs, dt, substeps, args.noise, args.seed)
        t_obs = np.arange(args.n_obs) * dt * substeps
        start = np.array([0.7, 0.07, 2.0, 0.1])
        fit_initial = False
    else:
        years, obs = load_hudson_bay()
        dt = 0.1  # years
        t_obs = years.astype(float)
        start = np.array([0.5, 0.02, 0.8, 0.02, obs[0, 0], obs[1, 0]])
        fit_initial = True

    t0 = time.perf_counter()
    res = fit(obs, dt, substeps, fit_initial, start, progress=not args.no_progress)
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
    n_fine = (len(t_obs) - 1) * substeps + 1
    xi, yi = (est[4], est[5]) if fit_initial else TRUE_X0
    xs, ys = rk4_trajectory(tuple(est[:4]), xi, yi, n_fine, dt, 1)
    t_fine = t_obs[0] + np.arange(n_fine) * dt
    plot(args.out, t_obs, obs, t_fine, np.array([xs, ys]), f"Lotka-Volterra fit ({args.data} data)")
    return est, res


if __name__ == "__main__":
    main()
