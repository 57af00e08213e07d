"""
A classifier trained with per-example gradient clipping
=======================================================

Differentially private SGD (Abadi et al., 2016) needs each example's gradient: it clips
every one to a norm ``C`` before averaging and adds Gaussian noise, so that no single
example moves the parameters by more than ``C``. The loss is written for one example;
``tg.vmap(tg.grad(loss), in_axes=(None, 0, 0))`` gives the gradients of a whole batch in
one recording, parameters shared and examples batched::

    g_i = grad loss(theta; x_i, y_i),   g_i <- g_i / max(1, |g_i| / C),
    theta <- theta - lr (sum_i g_i + N(0, sigma^2 C^2)) / batch

A small network learns two interleaved half-moons this way and without clipping or
noise, for comparison. The script prints both accuracies and saves
``private_classifier.png`` (decision regions and loss curves) in the current directory.
"""

from __future__ import annotations

import argparse

import common
import numpy as np

import tapegrad as tg
import tapegrad.numpy as tnp


def two_moons(n_per_class, noise, seed):
    rng = np.random.default_rng(seed)
    a = rng.uniform(0, np.pi, n_per_class)
    upper = np.stack([np.cos(a), np.sin(a)], axis=1)
    lower = np.stack([1 - np.cos(a), 0.5 - np.sin(a)], axis=1)
    x = np.concatenate([upper, lower]) + noise * rng.standard_normal((2 * n_per_class, 2))
    y = np.repeat([0.0, 1.0], n_per_class)
    return x - x.mean(0), y


# %%
# One example's loss
# ------------------
# A logistic output on a tanh layer; ``log(1 + exp(-s z))`` written stably.


def loss(params, x, y):
    W, b, w, c = params
    z = tnp.tanh(x @ W + b) @ w + c
    s = 2.0 * y - 1.0
    return tnp.logaddexp(0.0, -s * z)


per_example = tg.vmap(tg.grad(loss), in_axes=(None, 0, 0))


def batch_loss(params, x, y):
    return tnp.mean(tg.vmap(loss, in_axes=(None, 0, 0))(params, x, y))


# %%
# Training
# --------
# The same steps with and without privacy: clipped per-example gradients plus noise,
# or the plain mean gradient.


def train(x, y, params, args, private, rng):
    params = [p.copy() for p in params]
    losses = []
    for _ in range(args.epochs):
        for idx in np.array_split(rng.permutation(len(x)), len(x) // args.batch):
            if private:
                grads = per_example(params, x[idx], y[idx])
                norms = np.sqrt(sum(np.sum(g.reshape(len(idx), -1) ** 2, 1) for g in grads))
                scale = 1.0 / np.maximum(1.0, norms / args.clip)
                step = [
                    (np.tensordot(scale, g, 1) + args.sigma * args.clip * rng.standard_normal(g.shape[1:]))
                    / len(idx)
                    for g in grads
                ]  # fmt: skip
            else:
                step = tg.grad(batch_loss)(params, x[idx], y[idx])
            params = [p - args.lr * s for p, s in zip(params, step)]
        losses.append(float(tg.value_and_grad(batch_loss)(params, x, y)[0]))
    return params, losses


def accuracy(params, x, y):
    z = tg.vmap(lambda xi: tnp.tanh(xi @ params[0] + params[1]) @ params[2] + params[3])(x)
    return float(np.mean((z > 0) == (y > 0.5)))


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Train a classifier with per-example gradient clipping and noise."
    )
    parser.add_argument("--points", type=int, default=200, help="per class")
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--clip", type=float, default=1.0, help="per-example norm C")
    parser.add_argument("--sigma", type=float, default=0.5, help="noise multiplier")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="private_classifier.png")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    x, y = two_moons(args.points, 0.1, args.seed)
    rng = np.random.default_rng(args.seed + 1)
    init = [
        rng.standard_normal((2, args.hidden)),
        np.zeros(args.hidden),
        rng.standard_normal(args.hidden) / np.sqrt(args.hidden),
        np.zeros(()),
    ]
    results = {}
    for name, private in (("clipped and noised", True), ("plain", False)):
        params, losses = train(x, y, init, args, private, np.random.default_rng(args.seed + 2))
        results[name] = (params, losses, accuracy(params, x, y))
        print(f"{name:>18}: training accuracy {results[name][2]:.3f}, loss {losses[-1]:.3f}")

    plt = common.pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    grid = np.stack(np.meshgrid(np.linspace(-2, 2, 120), np.linspace(-1.5, 1.5, 90)), -1)
    for ax, (name, (params, _, acc)) in zip(axes, results.items()):
        z = tg.vmap(lambda xi: tnp.tanh(xi @ params[0] + params[1]) @ params[2] + params[3])(
            grid.reshape(-1, 2)
        )
        ax.contourf(grid[..., 0], grid[..., 1], z.reshape(grid.shape[:2]) > 0, alpha=0.3)
        ax.scatter(x[:, 0], x[:, 1], c=y, s=8, cmap="coolwarm")
        ax.set_title(f"{name} (accuracy {acc:.2f})")
    for name, (_, losses, _) in results.items():
        axes[2].plot(losses, label=name)
    axes[2].set_xlabel("epoch")
    axes[2].set_ylabel("mean loss")
    axes[2].legend()
    common.save(fig, args.out)
    return {name: r[2] for name, r in results.items()}


if __name__ == "__main__":
    main()
