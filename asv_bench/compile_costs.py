"""What each kernel costs to compile on an empty cache (CPU seconds, one process).

    python asv_bench/compile_costs.py [--passes] [--serial] [ROW ...]

``--passes`` also prints the wall seconds of each numba compiler pass over the rows'
kernels (the engine's excluded), each pass without the nested compiles it triggers.
``--serial`` compiles each kernel's serial flavour (``tapegrad._serial``: no parallel,
blocked or streamed loops), what a cold process compiles for a kernel a loop runs.

Compiles the engine, then each named row's float64 forward and backward in order, into
a temporary ``TAPEGRAD_CACHE_DIR`` (the first binary row also pays for the helpers the
others share). docs/design/dispatch.md, "What bounds the cold start", gives the numbers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

ROWS = ["multiply", "add", "logaddexp", "tanh", "exp", "sum", "matmul"]

CHILD = """
import collections, sys, time
from numba.core import compiler_machinery

PASSES, STACK, passes = collections.Counter(), [0.0], sys.argv[1] == "passes"
_run_pass = compiler_machinery.PassManager._runPass


def timed_pass(self, index, pss, state):
    STACK.append(0.0)
    t = time.perf_counter()
    try:
        return _run_pass(self, index, pss, state)
    finally:
        spent = time.perf_counter() - t
        PASSES[pss.name()] += spent - STACK.pop()
        STACK[-1] += spent


compiler_machinery.PassManager._runPass = timed_pass
from tapegrad import dispatch, tiers
from tapegrad._jit import FIRST_USE_NOTICE
from tapegrad.layout import BWD, FWD
from tapegrad.ops import BY_NAME
from tapegrad.tape import current_tape

FIRST_USE_NOTICE.said = True
tiers.disable()


def timed(label, f):
    c = time.process_time()
    f()
    print(f"{label:24s} {time.process_time() - c:7.1f}", flush=True)


timed("engine", lambda: tiers.compile_engine(current_tape().header))
PASSES.clear()
make = tiers.serial_kernel if sys.argv[2] == "serial" else dispatch.ensure
for name in sys.argv[3:]:
    op = BY_NAME[name]
    for d in (FWD, BWD) if op.bwd is not None else (FWD,):
        timed(f"{name} {'fwd' if d == FWD else 'bwd'}", lambda: make(op.code, 0, d))
if passes:
    print(f"numba passes over these kernels, wall seconds (total {sum(PASSES.values()):.1f}):")
    for name, seconds in PASSES.most_common(12):
        print(f"  {name:40s} {seconds:6.2f}")
"""


def main() -> None:
    args = sys.argv[1:]
    passes = "--passes" in args
    flavour = "serial" if "--serial" in args else "full"
    rows = [a for a in args if a not in ("--passes", "--serial")] or ROWS
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TAPEGRAD_CACHE_DIR=cache, TAPEGRAD_TIERS="0")
        print(f"{'float64 kernel (' + flavour + ')':24s} {'CPU s':>7s}")
        mode = "passes" if passes else "kernels"
        cmd = [sys.executable, "-c", CHILD, mode, flavour, *rows]
        subprocess.run(cmd, env=env, check=True)


if __name__ == "__main__":
    main()
