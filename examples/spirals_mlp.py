"""
A neural network on two spirals
===============================

A two-layer neural network classifying two interleaved spirals::

    p = softmax(tanh(X W1 + b1) W2 + b2),    loss = mean cross-entropy

The training step (loss and gradients of all four parameter arrays) is captured once
with ``tg.compile`` and replayed every iteration in compiled code; Adam updates the
parameters in NumPy. The script prints the loss and training accuracy and saves
``spirals_mlp.png`` (decision regions and the loss curve) in the current directory.
"""

from __future__ import annotations

import argparse

import common
import numpy as np

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.scipy.special as tsp


def two_spirals(n_per_class, noise, seed):
    rng = np.random.default_rng(seed)
    t = np.sqrt(rng.uniform(0.05, 1, n_per_class)) * 3 * np.pi
    arm = np.stack([t * np.cos(t), t * np.sin(t)], axis=1) / (3 * np.pi)
    x = np.concatenate([arm, -arm]) + noise * rng.standard_normal((2 * n_per_class, 2))
    y = np.concatenate([np.zeros(n_per_class, int), np.ones(n_per_class, int)])
    return x, y


# %%
# The network and its loss
# ------------------------
# ``loss_fn`` takes the four parameter arrays first; ``tg.compile(loss_fn,
# argnums=(0, 1, 2, 3))`` differentiates with respect to all four. ``predict`` is the
# same network in NumPy.


def loss_fn(w1, b1, w2, b2, x, onehot):
    hidden = tnp.tanh(x @ w1 + b1)
    logp = tsp.log_softmax(hidden @ w2 + b2, axis=1)
    return -tnp.mean(tnp.sum(onehot * logp, axis=1))


def predict(params, x):
    w1, b1, w2, b2 = params
    return np.argmax(np.tanh(x @ w1 + b1) @ w2 + b2, axis=1)


# %%
# Training
# --------
# The first call captures the step; every call, the first included, replays it in
# compiled code on the current parameters. Adam's update is NumPy code outside the step.


def main(argv=None):
    parser = argparse.ArgumentParser(description="Train a two-layer network on two spirals.")
    parser.add_argument("--points", type=int, default=200, help="per class")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="spirals_mlp.png")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    x, y = two_spirals(args.points, 0.02, args.seed)
    onehot = np.eye(2)[y]
    rng = np.random.default_rng(args.seed + 1)
    params = [
        rng.standard_normal((2, args.hidden)) * 2.0,
        np.zeros(args.hidden),
        rng.standard_normal((args.hidden, 2)) / np.sqrt(args.hidden),
        np.zeros(2),
    ]
    step = tg.compile(loss_fn, argnums=(0, 1, 2, 3))
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    losses = []
    bar = common.progress(args.iterations, "training", not args.no_progress)
    for it in range(1, args.iterations + 1):
        loss, grads = step.value_and_grad(*params, x, onehot)
        losses.append(loss)
        for i, g in enumerate(grads):  # Adam
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            mhat = m[i] / (1 - beta1**it)
            vhat = v[i] / (1 - beta2**it)
            params[i] = params[i] - args.lr * mhat / (np.sqrt(vhat) + eps)
        if it % 50 == 0:
            bar.set_postfix(loss=f"{loss:.4f}")
        bar.update()
    bar.close()
    accuracy = float(np.mean(predict(params, x) == y))
    print(
        f"loss {losses[0]:.4f} -> {losses[-1]:.4f} in {args.iterations} Adam steps; "
        f"training accuracy {accuracy:.3f}; captures {step.stats['captures']}, "
        f"replays {step.stats['replays']}"
    )

    plt = common.pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4.5))
    grid = np.linspace(-1.3, 1.3, 200)
    gx, gy = np.meshgrid(grid, grid)
    z = predict(params, np.stack([gx.ravel(), gy.ravel()], axis=1)).reshape(gx.shape)
    ax1.contourf(gx, gy, z, levels=[-0.5, 0.5, 1.5], colors=["#c6dbef", "#fcbba1"])
    ax1.scatter(x[:, 0], x[:, 1], c=y, cmap="coolwarm", s=8)
    ax1.set_title(f"decision regions (accuracy {accuracy:.2f})")
    ax1.set_aspect("equal")
    ax2.semilogy(losses)
    ax2.set_xlabel("Adam step")
    ax2.set_ylabel("cross-entropy")
    ax2.set_title("training loss")
    common.save(fig, args.out)
    return {"losses": losses, "accuracy": accuracy, "stats": dict(step.stats)}


if __name__ == "__main__":
    main()
