"""
Gaussian-process hyperparameters by maximum likelihood
======================================================

Gaussian-process regression: fit the kernel's hyperparameters by maximising the log
marginal likelihood, through a Cholesky factorisation, triangular solves and a log-det::

    k(x, x') = s^2 exp(-(x - x')^2 / (2 l^2)),    K = k(X, X) + noise^2 I
    log p(y) = -1/2 y^T K^-1 y - sum(log diag L) - n/2 log(2 pi),    L = chol(K)

Data: a noisy sine (fixed seed). The three log-hyperparameters are fitted with L-BFGS
on ``tg.value_and_grad`` of the negative log marginal likelihood; the script prints
them, the fit's test error, and saves ``gaussian_process.png`` (posterior mean and a
95% band) in the current directory.
"""

from __future__ import annotations

import argparse

import common
import numpy as np
from scipy.optimize import minimize

import tapegrad as tg
import tapegrad.numpy as tnp

TRUE_NOISE = 0.1

# %%
# The kernel and the marginal likelihood
# --------------------------------------
# Written once with ``tapegrad.numpy``: on tensors (inside ``tg.value_and_grad``) the
# Cholesky factor, the solves and the log-determinant are recorded and differentiated;
# on plain arrays the same ``kernel`` is NumPy code, used for the posterior.


def make_data(n, seed):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(-3, 3, n))
    y = np.sin(2 * x) + 0.3 * x + TRUE_NOISE * rng.standard_normal(n)
    return x, y


def kernel(a, b, log_len, log_scale):
    d2 = (a.reshape(-1, 1) - b.reshape(1, -1)) ** 2
    return tnp.exp(2 * log_scale) * tnp.exp(-0.5 * d2 * tnp.exp(-2 * log_len))


def negative_log_marginal_likelihood(params, x, y):
    log_len, log_scale, log_noise = params[0], params[1], params[2]
    n = x.shape[0]
    k = kernel(x, x, log_len, log_scale) + (tnp.exp(2 * log_noise) + 1e-8) * np.eye(n)
    chol = tnp.linalg.cholesky(k)
    alpha = tnp.linalg.solve(chol.T, tnp.linalg.solve(chol, y))
    return (
        0.5 * tnp.dot(y, alpha) + tnp.sum(tnp.log(tnp.diagonal(chol))) + 0.5 * n * np.log(2 * np.pi)
    )


def posterior(params, x, y, xs):
    log_len, log_scale, log_noise = params
    # plain parameters: the same kernel gives NumPy arrays (tapegrad.numpy is NumPy there)
    k = kernel(x, x, log_len, log_scale) + (np.exp(2 * log_noise) + 1e-8) * np.eye(len(x))
    ks = kernel(xs, x, log_len, log_scale)
    kss = np.exp(2 * log_scale)
    chol = np.linalg.cholesky(k)
    alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, y))
    v = np.linalg.solve(chol, ks.T)
    return ks @ alpha, np.sqrt(np.maximum(kss - np.sum(v * v, axis=0), 0) + np.exp(2 * log_noise))


# %%
# Fit, predict and plot
# ---------------------
# L-BFGS on the three log-hyperparameters, then the posterior mean and a 95% predictive
# band on a grid a little wider than the data.


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Fit a Gaussian process's hyperparameters by maximum likelihood."
    )
    parser.add_argument("--points", type=int, default=80)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="gaussian_process.png")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    x, y = make_data(args.points, args.seed)
    objective = tg.value_and_grad(negative_log_marginal_likelihood)
    start = np.log([1.0, 1.0, 0.5])
    bar = common.progress(None, "L-BFGS", not args.no_progress)

    def callback(intermediate_result):
        bar.set_postfix(nll=f"{intermediate_result.fun:.4f}")
        bar.update()

    res = minimize(
        lambda p: objective(p, x, y), start, jac=True, method="L-BFGS-B", callback=callback
    )
    bar.close()
    length, scale, noise = np.exp(res.x)
    print(f"negative log marginal likelihood {res.fun:.3f} after {res.nit} iterations")
    print(
        f"length scale {length:.3f}, signal scale {scale:.3f}, noise {noise:.4f} "
        f"(true noise {TRUE_NOISE})"
    )
    xs = np.linspace(-3.5, 3.5, 200)
    mean, sd = posterior(res.x, x, y, xs)
    truth = np.sin(2 * xs) + 0.3 * xs
    inside = np.abs(xs) <= 3
    rmse = float(np.sqrt(np.mean((mean[inside] - truth[inside]) ** 2)))
    print(f"posterior mean vs the noise-free function on [-3, 3]: RMSE {rmse:.4f}")

    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.fill_between(
        xs,
        mean - 1.96 * sd,
        mean + 1.96 * sd,
        color="tab:blue",
        alpha=0.2,
        label="95% predictive band",
    )
    ax.plot(xs, mean, color="tab:blue", label="posterior mean")
    ax.plot(xs, truth, color="black", ls="--", lw=1, label="noise-free function")
    ax.plot(x, y, "o", ms=3, color="tab:red", label="data")
    ax.set_title("Gaussian-process regression, hyperparameters by maximum likelihood")
    ax.legend()
    common.save(fig, args.out)
    return {
        "length": length,
        "scale": scale,
        "noise": noise,
        "rmse": rmse,
        "nll": res.fun,
        "success": res.success,
    }


if __name__ == "__main__":
    main()
