"""
Parameter uncertainty from the Hessian
======================================

Parameter uncertainty for the Lotka-Volterra model from second derivatives.

The predator-prey model of ``lotka_volterra.py`` is fitted to simulated data with
log-normal noise of known size by maximum likelihood, and the fit is then asked how
sure it is: the Hessian of the negative log-likelihood at the optimum is the observed
Fisher information, whose inverse is the covariance of the estimates (the Laplace
approximation). Two things need second derivatives through the integrator, which
``tapegrad.integrate`` does not give (its solve is one node whose backward is not
recorded), so this example integrates with RK4 written out in tensor ops, every step
recorded:

* the fit itself, by Newton-CG: scipy's ``minimize(..., hessp=...)`` takes
  Hessian-vector products, here from a captured program (``tg.compile(nll).hvp``)
  replayed in compiled code. It converges in fewer iterations than L-BFGS from the
  same start;
* the standard errors, from ``tg.hessian`` at the optimum.

They are checked against a parametric bootstrap: datasets simulated from the fitted
model and refitted; the spread of the refits should match the Laplace standard errors.

Run ``python examples/lotka_volterra_uncertainty.py``; it prints both fits, the
estimates with their standard errors next to the truth and the bootstrap spread, and
saves ``lotka_volterra_uncertainty.png``.
"""

from __future__ import annotations

import argparse
import time

import common
import numpy as np
from lotka_volterra import NAMES, TRUE, TRUE_X0
from scipy.optimize import minimize

import tapegrad as tg
import tapegrad.numpy as tnp

DT, SUBSTEPS = 0.05, 10

# %%
# The trajectory, step by step
# ----------------------------
# A fixed-step RK4 loop in plain arithmetic: on tensors each operation is recorded, so
# the tape holds every step and can be differentiated twice.


def rk4_trajectory(theta, x0, y0, n_obs, dt, substeps):
    """Integrate with RK4; return (prey, predator) at every ``substeps``-th step.

    Works on tensors (recording every step, so that second derivatives exist) and on
    plain floats alike.
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
    return np.array([xs, ys]) * np.exp(noise * rng.standard_normal((2, n_obs)))


# %%
# The likelihood
# --------------
# Log-normal noise of known size ``noise``: the negative log-likelihood is the sum of
# squared log errors over ``2 noise^2`` (up to a constant).


def squared_log_error(xs, ys, log_obs):
    """Sum of squared differences between the log populations and ``log_obs``."""
    total = 0.0
    for k in range(log_obs.shape[1]):
        total = (
            total + (tnp.log(xs[k]) - log_obs[0, k]) ** 2 + (tnp.log(ys[k]) - log_obs[1, k]) ** 2
        )
    return total


def make_nll(n_obs, noise):
    """Negative log-likelihood of log-normal observations, in phi = log(theta); the data
    are an argument, so one captured program serves every dataset."""
    x0, y0 = TRUE_X0

    def nll(phi, log_obs):
        ep = tnp.exp(phi)
        xs, ys = rk4_trajectory((ep[0], ep[1], ep[2], ep[3]), x0, y0, n_obs, DT, SUBSTEPS)
        return squared_log_error(xs, ys, log_obs) / (2 * noise**2)

    return nll


# %%
# Fitting, and the Laplace approximation
# --------------------------------------
# ``step`` is the captured NLL (``tg.compile``): ``step.value_and_grad`` and
# ``step.hvp`` replay it in compiled code, for every dataset of the same shape.


def fit(step, log_obs, start, method):
    """Minimise the captured NLL from ``start`` by Newton-CG (exact Hessian-vector
    products) or L-BFGS-B (gradients only)."""
    fun = lambda phi: step.value_and_grad(phi, log_obs)  # noqa: E731
    if method == "Newton-CG":
        hessp = lambda phi, v: step.hvp(phi, log_obs, v)  # noqa: E731
        return minimize(fun, start, jac=True, hessp=hessp, method=method, options={"xtol": 1e-8})
    return minimize(fun, start, jac=True, method=method, options={"gtol": 1e-9, "maxiter": 500})


# %%
# Plot and command line
# ---------------------
# ``main`` fits both ways, takes the Hessian at the optimum, runs the bootstrap and
# plots the fit and the estimates with their error bars.


def plot(path, obs, fitted, estimates, errors, boot):
    plt = common.pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    t_obs = np.arange(obs.shape[1]) * DT * SUBSTEPS
    for i, (name, color) in enumerate((("prey", "tab:blue"), ("predator", "tab:red"))):
        ax.plot(t_obs, obs[i], "o", color=color, alpha=0.6, label=f"{name} (data)")
        ax.plot(t_obs, fitted[i], "-", color=color, label=f"{name} (fit)")
    ax.set_xlabel("time")
    ax.set_ylabel("population")
    ax.legend(ncol=2, fontsize=8)
    ax.set_title("maximum-likelihood fit")
    pos = np.arange(len(NAMES))
    bx.axhline(1.0, color="k", lw=0.8, label="truth")
    bx.errorbar(
        pos - 0.1,
        estimates / TRUE,
        yerr=2 * errors / TRUE,
        fmt="o",
        capsize=4,
        label="estimate, 2 SE (Hessian)",
    )
    if boot.size:
        bx.plot(np.tile(pos + 0.1, (len(boot), 1)), boot / TRUE, ".", color="tab:gray", alpha=0.5)
        bx.plot([], [], ".", color="tab:gray", label="bootstrap refits")
    bx.set_xticks(pos, NAMES)
    bx.set_ylabel("relative to the true value")
    bx.legend(fontsize=8)
    bx.set_title("Laplace standard errors against a bootstrap")
    return common.save(fig, path)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Lotka-Volterra parameter uncertainty from the Hessian."
    )
    parser.add_argument("--n-obs", type=int, default=41)
    parser.add_argument("--noise", type=float, default=0.1, help="log-normal noise sd")
    parser.add_argument("--bootstrap", type=int, default=40, help="refits (0: none)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="lotka_volterra_uncertainty.png")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    x0, y0 = TRUE_X0
    obs = simulate(TRUE, x0, y0, args.n_obs, DT, SUBSTEPS, args.noise, args.seed)
    nll = make_nll(args.n_obs, args.noise)
    step = tg.compile(nll)
    log_obs = np.log(obs)
    start = np.log([0.7, 0.07, 2.0, 0.1])

    t0 = time.perf_counter()
    results = {m: fit(step, log_obs, start, m) for m in ("Newton-CG", "L-BFGS-B")}
    for method, res in results.items():
        print(
            f"{method:>9}: {res.nit:3d} iterations, {res.nfev:3d} loss+gradient evaluations, "
            f"NLL {res.fun:.6f}"
        )
    phi = results["Newton-CG"].x
    estimates = np.exp(phi)

    # Laplace: Cov(phi) = H^-1 at the optimum; theta = exp(phi), so SE(theta) = theta SE(phi)
    h = tg.hessian(nll)(phi, log_obs)
    cov = np.linalg.inv(h)
    errors = estimates * np.sqrt(np.diag(cov))

    # parametric bootstrap from the fitted model, refits warm-started at the estimate
    rng = np.random.default_rng(args.seed + 1)
    bar = common.progress(args.bootstrap, "bootstrap", not args.no_progress)
    boot = []
    for _ in range(args.bootstrap):
        sim = simulate(estimates, x0, y0, args.n_obs, DT, SUBSTEPS, args.noise, rng.integers(2**31))
        boot.append(np.exp(fit(step, np.log(sim), phi, "Newton-CG").x))
        bar.update()
    bar.close()
    boot = np.array(boot).reshape(-1, len(NAMES))
    spread = boot.std(axis=0, ddof=1) if len(boot) > 1 else np.full(len(NAMES), np.nan)
    elapsed = time.perf_counter() - t0

    print(
        f"{'parameter':>10} {'estimate':>10} {'SE (Hessian)':>13} {'SD (bootstrap)':>15} "
        f"{'true':>8} {'z':>6}"
    )
    for i, name in enumerate(NAMES):
        z = (estimates[i] - TRUE[i]) / errors[i]
        print(
            f"{name:>10} {estimates[i]:10.4f} {errors[i]:13.4f} {spread[i]:15.4f} "
            f"{TRUE[i]:8.4f} {z:6.2f}"
        )
    print(f"{len(boot)} bootstrap refits; {elapsed:.1f} s in all")

    xs, ys = rk4_trajectory(tuple(estimates), x0, y0, args.n_obs, DT, SUBSTEPS)
    plot(args.out, obs, np.array([xs, ys]), estimates, errors, boot)
    return {"results": results, "estimates": estimates, "errors": errors, "spread": spread}


if __name__ == "__main__":
    main()
