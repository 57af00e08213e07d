"""CPU against GPU, side by side: the speed table ``tests/gpu/run.sh`` prints.

    python tests/gpu/speed.py [--repeat 7] [--size 2000000] [--n 1024]

Workloads: the 16-op elementwise chain of ``asv_bench`` (sin, *1.01, tanh, +x) on
``--size`` float64 elements, forward and backward; and an ``n x n`` float64 matmul,
forward and backward of ``sum(a @ b)``. Each is timed in turn on every round (medians),
after checking that both devices give the same value and gradient. In the simulator
(no GPU) pass tiny sizes: it runs a few thousand threads a second.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "asv_bench"))

from benchmarks.workloads import chain_tapegrad, interleaved_medians

import tapegrad as tg


def _chain(x0: np.ndarray, device: str) -> tuple[float, np.ndarray]:
    x = tg.tensor(x0, requires_grad=True, device=device)
    loss = chain_tapegrad(x, 16)
    loss.backward()
    return loss.item(), (x.grad.numpy() if device == "cuda" else x.grad)


def _matmul(a: np.ndarray, b: np.ndarray, device: str) -> tuple[float, np.ndarray]:
    ta = tg.tensor(a, requires_grad=True, device=device)
    tb = tg.tensor(b, requires_grad=True, device=device)
    loss = (ta @ tb).sum()
    loss.backward()
    return loss.item(), (tb.grad.numpy() if device == "cuda" else tb.grad)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--size", type=int, default=2_000_000)
    ap.add_argument("--n", type=int, default=1024)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    x0 = rng.uniform(-1, 1, args.size)
    a, b = rng.standard_normal((args.n, args.n)), rng.standard_normal((args.n, args.n))
    workloads = {
        f"chain of 16 ops, {args.size:.0e} elements, fwd+bwd": lambda d: _chain(x0, d),
        f"matmul {args.n}x{args.n}, fwd+bwd": lambda d: _matmul(a, b, d),
    }
    import tapegrad.cuda

    if not tapegrad.cuda.available():
        sys.exit("no GPU (and NUMBA_ENABLE_CUDASIM is not set)")
    gpu = "numba's simulator" if _simulated() else _gpu_name()
    print(f"GPU: {gpu}; median of {args.repeat} interleaved runs (first run untimed)")
    print(f"{'workload':44s} {'CPU ms':>10s} {'GPU ms':>10s} {'CPU/GPU':>8s}")
    for label, run in workloads.items():
        (vc, gc), (vg, gg) = run("cpu"), run("cuda")  # also compiles the kernels
        np.testing.assert_allclose(vg, vc, rtol=1e-9)
        np.testing.assert_allclose(gg, gc, rtol=1e-9, atol=1e-9 * np.abs(gc).max())
        med = interleaved_medians(
            {d: (lambda d=d, run=run: run(d)) for d in ("cpu", "cuda")}, args.repeat
        )
        print(
            f"{label:44s} {med['cpu'] * 1e3:10.2f} {med['cuda'] * 1e3:10.2f} "
            f"{med['cpu'] / med['cuda']:8.1f}"
        )


def _simulated() -> bool:
    from numba.core import config

    return bool(config.ENABLE_CUDASIM)


def _gpu_name() -> str:
    from numba import cuda

    dev = cuda.get_current_device()
    name = dev.name.decode() if isinstance(dev.name, bytes) else dev.name
    return f"{name} (compute capability {'.'.join(map(str, dev.compute_capability))})"


if __name__ == "__main__":
    main()
