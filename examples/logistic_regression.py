"""
Logistic regression, checked against Newton's method
=====================================================

L2-penalised logistic regression fitted two ways: scipy's L-BFGS on tapegrad's
gradient, and Newton's method with the hand-derived gradient and Hessian::

    loss(w) = sum_i [log(1 + exp(x_i w)) - y_i x_i w] + lam/2 |w|^2

Both must land on the same (unique) minimiser. Data: a fixed-seed synthetic problem
with an intercept column. The script prints both coefficient vectors and their
difference, and saves ``logistic_regression.png`` (the two fits and the data) in the
current directory.
"""

from __future__ import annotations

import argparse

import common
import numpy as np
from scipy.optimize import minimize

import tapegrad as tg
import tapegrad.numpy as tnp


def make_data(n, d, seed):
    rng = np.random.default_rng(seed)
    x = np.concatenate([np.ones((n, 1)), rng.standard_normal((n, d - 1))], axis=1)
    w_true = rng.standard_normal(d)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-x @ w_true))).astype(float)
    return x, y, w_true


# %%
# The loss, and Newton's method by hand
# -------------------------------------
# ``penalised_loss`` is all tapegrad sees; ``newton`` uses the closed-form gradient
# ``X^T (p - y) + lam w`` and Hessian ``X^T diag(p (1 - p)) X + lam I``.


def penalised_loss(w, x, y, lam):
    z = x @ w
    return tnp.sum(tnp.logaddexp(0.0, z) - y * z) + 0.5 * lam * tnp.sum(w * w)


def newton(x, y, lam, iterations=50):
    """Newton's method with the exact gradient and Hessian (iteratively reweighted)."""
    w = np.zeros(x.shape[1])
    for _ in range(iterations):
        p = 1 / (1 + np.exp(-x @ w))
        grad = x.T @ (p - y) + lam * w
        hess = x.T @ (x * (p * (1 - p))[:, None]) + lam * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.max(np.abs(step)) < 1e-13:
            break
    return w


# %%
# Both fits
# ---------
# L-BFGS on ``tg.value_and_grad(penalised_loss)``, Newton from the same data; the plot
# shows the data and the two decision boundaries.


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Logistic regression by L-BFGS on tapegrad's gradient and by Newton."
    )
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--features", type=int, default=3, help="including the intercept")
    parser.add_argument("--lam", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="logistic_regression.png")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    x, y, w_true = make_data(args.samples, args.features, args.seed)
    bar = common.progress(None, "L-BFGS", not args.no_progress)
    res = minimize(
        tg.value_and_grad(penalised_loss),
        np.zeros(args.features),
        args=(x, y, args.lam),
        jac=True,
        method="L-BFGS-B",
        callback=lambda r: bar.update(),
        options={"gtol": 1e-12, "ftol": 1e-15},
    )
    bar.close()
    w_newton = newton(x, y, args.lam)
    difference = float(np.max(np.abs(res.x - w_newton)))
    with np.printoptions(precision=6, suppress=True):  # (not set for the whole process)
        print(f"tapegrad + L-BFGS: {res.x}  ({res.nit} iterations)")
        print(f"Newton (closed-form derivatives): {w_newton}")
        print(f"max |difference| {difference:.2e}; true coefficients {w_true}")

    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(6, 5))
    ax.scatter(
        x[:, 1], x[:, 2] if args.features > 2 else np.zeros(len(y)), c=y, cmap="coolwarm", s=10
    )
    if args.features > 2:  # the decision boundaries x w = 0
        xs = np.linspace(x[:, 1].min(), x[:, 1].max(), 2)
        for w, style, label in ((res.x, "-", "tapegrad + L-BFGS"), (w_newton, ":", "Newton")):
            ax.plot(xs, -(w[0] + w[1] * xs) / w[2], style, color="black", label=label)
        ax.legend()
    ax.set_title("logistic regression: the two fits coincide")
    common.save(fig, args.out)
    return {"lbfgs": res.x, "newton": w_newton, "difference": difference}


if __name__ == "__main__":
    main()
