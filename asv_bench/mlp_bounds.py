"""What bounds the eager MLP row of ``compare.py --eager`` (issue 24).

    python asv_bench/mlp_bounds.py

One thread per library, medians of interleaved rounds: the same MLP step on 2x2
matrices (the fixed cost per step: recording, the transform, the backward driver)
in NumPy by hand, tapegrad and PyTorch; the full-size step; and the step's two large
matrix products in OpenBLAS (which NumPy and tapegrad share) and in PyTorch's MKL.
PyTorch is an oracle here, not a dependency.
"""

from __future__ import annotations

import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ["TAPEGRAD_THREADS"] = "1"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from benchmarks.workloads import (  # noqa: E402
    interleaved_medians,
    mlp_data,
    mlp_numpy,
    mlp_tapegrad,
)


def main() -> None:
    import torch
    from compare import _torch_models  # compare.py's PyTorch step (one thread)

    torch_step = _torch_models()["mlp"]

    big, small = mlp_data(), mlp_data(batch=2, n_in=2, hidden=2, n_out=2)
    x, w1 = big[1], big[0][0]
    g = np.random.default_rng(0).standard_normal((x.shape[0], w1.shape[1]))
    xt, wt, gt = torch.tensor(x), torch.tensor(w1), torch.tensor(g)
    for _ in range(30):
        for args in (big, small):
            mlp_tapegrad(*args)
            torch_step(*args)
    medians = interleaved_medians(
        {
            "NumPy by hand, 2x2": lambda: mlp_numpy(*small),
            "tapegrad, 2x2": lambda: mlp_tapegrad(*small),
            "PyTorch, 2x2": lambda: torch_step(*small),
            "NumPy by hand": lambda: mlp_numpy(*big),
            "tapegrad": lambda: mlp_tapegrad(*big),
            "PyTorch": lambda: torch_step(*big),
            "OpenBLAS x @ W1": lambda: x @ w1,
            "MKL x @ W1": lambda: xt @ wt,
            "OpenBLAS x.T @ G": lambda: x.T @ g,
            "MKL x.T @ G": lambda: xt.T @ gt,
        },
        repeat=300,
    )
    for name, t in medians.items():
        print(f"{name:22s} {t * 1e6:8.1f} us")


if __name__ == "__main__":
    main()
