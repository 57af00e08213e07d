"""What bounds the eager MLP row of ``compare.py --eager``.

    python asv_bench/mlp_bounds.py [--repeat 300] [--threads 1] [--evict MB] [--after]

Medians of interleaved rounds, every pool at ``--threads`` threads (default one):

1. With PyTorch in the rounds, as in ``compare.py``: the MLP step on 2x2 matrices (the
   fixed cost per step: recording, the transform, the backward driver) and at full
   size, in NumPy by hand, tapegrad eager, tapegrad replayed (``tg.compile``: the same
   kernels with no Python per op) and PyTorch; and the step's two large matrix
   products in OpenBLAS (which NumPy and tapegrad share) and in PyTorch's MKL.
2. The full-size step again, NumPy by hand and eager alone: nothing else between
   them. With ``--evict MB``, NumPy by hand, eager and replay at both sizes, without
   and then with MB megabytes of other memory written before each step.

3. With ``--after``, NumPy by hand, eager and replay at full size, each timed right
   after one untimed step of each of them (full size or 2x2): what a step costs depends
   on what ran before it.

Replay against NumPy by hand is the compute (kernels and products); eager against
replay is the Python of recording. The two tables differ by what the other steps leave
behind in the machine's caches, which eager's recording pays for more than NumPy by
hand's ~25 calls (one thread: eager 1.11-1.19x with PyTorch's step in the
rounds, 1.02-1.17x alone, by the host's phase; 1.17-1.29x after 16 MB). PyTorch is an
oracle here, not a dependency: without it the PyTorch rows are left out.

The ``--after`` table (one thread): each of the three runs 15-20% faster right
after itself than after the others, and right after a 2x2 step of itself as fast as
after a full one: the cost is the state of the code paths (recording, kernels, BLAS),
not of the data. The ratio of eager to NumPy by hand is about the same either way
(1.07 with each after itself, 1.05-1.09 after a neutral step): the excess is eager's
recording (its 2x2 step less replay's, ~85 us), which replay's faster kernels do not
cover.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# compare.py, imported first, gives every thread pool --threads threads (read from the
# command line before NumPy is imported) and has the PyTorch step
import compare  # noqa: I001

import argparse
from collections.abc import Callable

import numpy as np
from benchmarks.workloads import (
    interleaved_medians,
    mlp_data,
    mlp_loss,
    mlp_numpy,
    mlp_tapegrad,
)

import tapegrad as tg


def replayed() -> Callable:
    """The MLP step as ``mlp_tapegrad``, through one ``tg.compile`` program."""
    step = tg.compile(mlp_loss, argnums=(0, 1, 2, 3))

    def run(params, x, labels):
        onehot = np.eye(params[2].shape[1])[labels]
        value, grads = step.value_and_grad(*params, x, onehot)
        return value, list(grads)

    return run


def _print(title: str, medians: dict, ref: str) -> None:
    print(title)
    for name, t in medians.items():
        print(f"  {name:24s} {t * 1e6:8.1f} us  {t / medians[ref]:6.3f}x")


def _print_sizes(title: str, medians: dict) -> None:
    """The 2x2 rows, then the others, each against NumPy by hand at its size."""
    _print(title, {k: v for k, v in medians.items() if k.endswith("2x2")}, "NumPy by hand, 2x2")
    _print("", {k: v for k, v in medians.items() if not k.endswith("2x2")}, "NumPy by hand")


def _after_table(steps: dict, big: tuple, small: tuple, repeat: int) -> None:
    """NumPy by hand, eager and replay at full size, each timed right after one untimed
    step of each of them, at full size and at 2x2 (rows: what ran before)."""
    names = ["NumPy by hand", "tapegrad", "tapegrad replay"]
    targets = {n: (lambda s=steps[n]: s(*big)) for n in names}
    befores = {n: targets[n] for n in names}
    befores.update({f"{n}, 2x2": (lambda s=steps[n]: s(*small)) for n in names})
    print("Each full-size step right after another step (us; ratios to NumPy by hand):")
    print(f"  {'after':24s}" + "".join(f"{n:>18s}" for n in names))
    itself = {}  # each step right after one of its own: a training loop's steady state
    for before, run in befores.items():
        m = interleaved_medians(targets, repeat, before=run)
        cells = [f"{m[n] * 1e6:8.1f} {m[n] / m[names[0]]:6.3f}x " for n in names]
        print(f"  {before:24s}" + "".join(f"{c:>18s}" for c in cells))
        if before in m:
            itself[before] = m[before]
    print("  each right after itself (the diagonal, as in a training loop):")
    print("  " + "  ".join(f"{n} {t / itself[names[0]]:.3f}x" for n, t in itself.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=300, help="interleaved rounds")
    parser.add_argument("--threads", type=int, default=1, help="threads for every pool")
    parser.add_argument(
        "--evict",
        type=int,
        default=0,
        metavar="MB",
        help="also time the steps with MB megabytes of other memory written before each",
    )
    parser.add_argument(
        "--after", action="store_true", help="also time each step right after each other"
    )
    args = parser.parse_args()
    torch_steps = compare._torch_models()  # {} without PyTorch
    torch = sys.modules.get("torch") if torch_steps else None

    big, small = mlp_data(), mlp_data(batch=2, n_in=2, hidden=2, n_out=2)
    replay = replayed()
    steps = {"NumPy by hand": mlp_numpy, "tapegrad": mlp_tapegrad, "tapegrad replay": replay}
    if torch is not None:
        steps["PyTorch"] = torch_steps["mlp"]
    for data in (big, small):  # the same numbers from each, before any timing
        value, grads = mlp_numpy(*data)
        for step in steps.values():
            got, got_grads = step(*data)
            np.testing.assert_allclose(got, value, rtol=1e-9)
            for g, e in zip(got_grads, grads):
                np.testing.assert_allclose(g, e, rtol=1e-7, atol=1e-9)
    for _ in range(30):
        for step in steps.values():
            step(*big)
            step(*small)

    fns = {}
    for name, step in steps.items():
        fns[f"{name}, 2x2"] = lambda step=step: step(*small)
    for name, step in steps.items():
        fns[name] = lambda step=step: step(*big)
    x, w1 = big[1], big[0][0]
    g = np.random.default_rng(0).standard_normal((x.shape[0], w1.shape[1]))
    fns["OpenBLAS x @ W1"] = lambda: x @ w1
    fns["OpenBLAS x.T @ G"] = lambda: x.T @ g
    if torch is not None:
        xt, wt, gt = torch.tensor(x), torch.tensor(w1), torch.tensor(g)
        fns["MKL x @ W1"] = lambda: xt @ wt
        fns["MKL x.T @ G"] = lambda: xt.T @ gt
    where = "PyTorch in the rounds" if torch is not None else "PyTorch not installed"
    title = f"{where}, {args.threads} thread(s), ratios to NumPy by hand at each size:"
    _print_sizes(title, interleaved_medians(fns, repeat=args.repeat))

    alone = {name: (lambda step=step: step(*big)) for name, step in steps.items()}
    alone.pop("PyTorch", None)
    alone.pop("tapegrad replay")
    title = "NumPy by hand and tapegrad alone, full size:"
    _print(title, interleaved_medians(alone, repeat=args.repeat), "NumPy by hand")
    if args.evict:  # NumPy by hand, eager and replay at each size, without and with
        cold = {k: v for k, v in fns.items() if k.split(",")[0] in steps}
        cold.pop("PyTorch", None)
        cold.pop("PyTorch, 2x2", None)
        for nbytes in (8, args.evict << 20):
            title = f"Those three alone, {nbytes >> 20} MB written (untimed) before each step:"
            # other memory written before each step: the rest of a program between two
            # steps (data loading, an optimizer, another library's step)
            other = np.zeros(nbytes // 8)
            medians = interleaved_medians(cold, args.repeat, before=lambda o=other: o.__iadd__(1))
            _print_sizes(title, medians)
    if args.after:
        _after_table(steps, big, small, args.repeat)


if __name__ == "__main__":
    main()
