"""Compile every CUDA kernel of the op table to PTX, without a GPU.

numba's simulator runs kernels as Python, so it would not notice a formula the CUDA
target cannot compile; NVVM (from the ``cuda`` extra's wheels) does, with no GPU or
driver. Run as ``python tests/gpu/ptx.py [cc]``; prints one line per kernel and exits 1
if any fails. ``test_cuda.py`` runs it in a subprocess (the simulator must be off).
"""

from __future__ import annotations

import sys
import time
import traceback
from types import SimpleNamespace

import numpy as np
from numba import cuda, types


def main(cc: tuple[int, int] = (8, 0)) -> int:
    # Device functions called from a kernel are compiled for "the current device";
    # there is none here, so name one (only the compute capability is read).
    import numba.cuda.dispatcher as dispatcher

    dispatcher.get_current_device = lambda: SimpleNamespace(compute_capability=cc)

    from tapegrad.cuda import kernels
    from tapegrad.ops import ROWS

    i64 = types.int64[::1]
    failures = 0
    t0 = time.perf_counter()

    def compile_one(name: str, kernel, *args) -> None:
        nonlocal failures
        try:
            cuda.compile_ptx(kernel.py_func, tuple(args), cc=cc)
            print(f"ok    {name}")
        except Exception:
            failures += 1
            print(f"FAIL  {name}\n{traceback.format_exc(limit=1)}")

    for dt in (types.float64, types.float32):
        a = dt[::1]
        for op in ROWS:
            if op.cuda != "formulas":
                continue
            fwd, bwd = kernels.elementwise_kernels(op)
            if op.is_unary:
                compile_one(f"{op.name} fwd {dt}", fwd, a, a)
                compile_one(f"{op.name} bwd {dt}", bwd, a, a, a, a)
            else:
                compile_one(f"{op.name} fwd {dt}", fwd, a, a, a, i64)
                compile_one(f"{op.name} bwd {dt}", bwd, a, a, a, a, a, a, types.int64, i64)
        red, red_bwd = kernels.reduce_kernels()
        compile_one(f"sum fwd {dt}", red, a, a, types.float64, i64)
        compile_one(f"sum bwd {dt}", red_bwd, a, a, types.float64, i64)
        total = kernels.sum_all_kernel(np.dtype(dt.name), 128)
        compile_one(f"sum_all {dt}", total, a, a, types.float64)
        gemm = kernels.matmul_kernel(np.dtype(dt.name))
        compile_one(f"matmul {dt}", gemm, a, a, a, i64, i64, types.int64)
        moves = kernels.move_kernels()
        compile_one(f"gather {dt}", moves["gather"], a, i64, a)
        compile_one(f"scatter_add {dt}", moves["scatter_add"], a, i64, a)
        compile_one(f"add {dt}", moves["add"], a, a)
        compile_one(f"fill {dt}", moves["fill"], a, types.float64)
        other = types.float32 if dt == types.float64 else types.float64
        compile_one(f"copy_cast {other}->{dt}", moves["copy_cast"], other[::1], a)
    print(f"{failures} failures, {time.perf_counter() - t0:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    cc = tuple(int(v) for v in sys.argv[1].split(".")) if len(sys.argv) > 1 else (8, 0)
    sys.exit(main(cc))
