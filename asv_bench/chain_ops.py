"""What bounds the first eager chain of ``compare.py --eager`` at two threads.

    python asv_bench/chain_ops.py [--threads 2] [--size 2000000] [--repeat 15]
    python asv_bench/chain_ops.py --vecmath

The chain is 4 x (sin, *0.9, tanh, exp, *w, +x) on 2e6 float64. The default mode times
each op of it inside the chain (summed over its four occurrences), the whole forward
and the backward, in tapegrad and PyTorch (an oracle, not a dependency), each in its
own process so that one library's thread pool cannot spin beside the other's: medians
of ``--repeat`` runs. The forward once lost here: numba's OpenMP workers
spun after ``sin`` beside the Python threads running NumPy's halves of ``*0.9`` and
``tanh`` (``GOMP_SPINCOUNT=20000`` showed it); now each large forward stays on one pool
(docs/design/large_arrays.md).

``--vecmath`` times tapegrad's vector exp, sin and tanh (``kernels/vecmath.py``) in a
plain numba loop against NumPy's ufuncs and PyTorch on one thread; run it again with
``NUMBA_CPU_FEATURES="$(python -c 'import llvmlite.binding as b;
print(b.get_host_cpu_features().flatten())'),-prefer-256-bit"`` to compare the vector
width LLVM picks with 512-bit vectors.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

OPS = ("sin", "*0.9", "tanh", "exp", "*w", "+x")


def _pin_threads(n: int) -> None:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(n)
    os.environ["NUMBA_NUM_THREADS"] = os.environ["TAPEGRAD_THREADS"] = str(n)


def _chain_times(library: str, size: int, repeat: int, threads: int) -> dict:
    """Per-op forward times (ms, four occurrences summed), forward and backward."""
    import numpy as np

    if library == "torch":
        import torch

        torch.set_num_threads(threads)
        m, make = torch, lambda a: torch.tensor(a, requires_grad=True)
    else:
        import tapegrad as tg
        import tapegrad.numpy as tnp

        m, make = tnp, lambda a: tg.tensor(a, requires_grad=True)
    rng = np.random.default_rng(0)
    x0, w0 = rng.uniform(-1, 1, size), rng.uniform(0.5, 1.0, size)
    steps = (
        lambda y, x, w: m.sin(y),
        lambda y, x, w: y * 0.9,
        lambda y, x, w: m.tanh(y),
        lambda y, x, w: m.exp(y),
        lambda y, x, w: y * w,
        lambda y, x, w: y + x,
    )
    rows = []
    for _ in range(repeat + 1):  # the first run compiles and grows the tape: dropped
        x, w = make(x0), make(w0)
        y, per_op = x, [0.0] * len(steps)
        for _ in range(4):
            for k, step in enumerate(steps):
                t = time.perf_counter()
                y = step(y, x, w)
                per_op[k] += time.perf_counter() - t
        t = time.perf_counter()
        m.sum(y).backward()
        rows.append([*per_op, sum(per_op), time.perf_counter() - t])
    med = np.median(np.array(rows[1:]), axis=0) * 1e3
    return dict(zip([*OPS, "forward", "backward"], med.tolist()))


def _vecmath(size: int, repeat: int) -> None:
    import numpy as np
    from numba import njit, prange

    from tapegrad.kernels import vecmath
    from tapegrad.ops.elementwise.kernels import BLOCK

    def loop(f):  # the kernels' shape: blocks, each a loop over views (it vectorises)
        @njit(parallel=True)
        def run(x, out):
            n = x.size
            for b in prange((n + BLOCK - 1) // BLOCK):
                s, e = b * BLOCK, min(n, (b + 1) * BLOCK)
                xb, ob = x[s:e], out[s:e]
                for i in range(ob.size):
                    ob[i] = f(xb[i])

        return run

    x = np.random.default_rng(0).uniform(-2, 2, size)
    out = np.empty_like(x)
    fns = {}
    for name in ("exp", "sin", "tanh"):
        k = loop(getattr(vecmath, name))
        k(x, out)
        fns[f"tapegrad vecmath {name}"] = lambda k=k: k(x, out)
        ufunc = getattr(np, name)
        fns[f"NumPy {name}"] = lambda f=ufunc: f(x, out=out)
    try:
        import torch

        torch.set_num_threads(1)
        tx = torch.tensor(x)
        for name in ("exp", "sin", "tanh"):
            fn = getattr(torch, name)
            fns[f"PyTorch {name}"] = lambda f=fn: f(tx)
    except ImportError:
        pass
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from benchmarks.workloads import interleaved_medians

    for name, t in interleaved_medians(fns, repeat).items():
        print(f"{name:24s} {t * 1e3:8.2f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--size", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--vecmath", action="store_true")
    ap.add_argument("--library", choices=("tapegrad", "torch"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.vecmath:
        _pin_threads(1)
        _vecmath(args.size, args.repeat)
        return
    if args.library:  # one library per process (see the module docstring)
        _pin_threads(args.threads)
        print(json.dumps(_chain_times(args.library, args.size, args.repeat, args.threads)))
        return
    print(f"chain on {args.size:.0e} float64, {args.threads} thread(s), ms (medians)")
    print(f"{'':10s}" + "".join(f"{k:>9s}" for k in (*OPS, "forward", "backward")))
    for library in ("tapegrad", "torch"):
        cmd = [sys.executable, __file__, "--library", library, "--threads", str(args.threads)]
        cmd += ["--size", str(args.size), "--repeat", str(args.repeat)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"{library}: failed\n{r.stderr[-2000:]}")
            continue
        row = json.loads(r.stdout.strip().splitlines()[-1])
        print(f"{library:10s}" + "".join(f"{v:9.2f}" for v in row.values()))


if __name__ == "__main__":
    main()
