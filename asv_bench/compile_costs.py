"""What each kernel costs to compile on an empty cache (CPU seconds, one process).

    python asv_bench/compile_costs.py [ROW ...]

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
import sys, time
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
for name in sys.argv[1:]:
    op = BY_NAME[name]
    for d in (FWD, BWD) if op.bwd is not None else (FWD,):
        timed(f"{name} {'fwd' if d == FWD else 'bwd'}", lambda: dispatch.ensure(op.code, 0, d))
"""


def main() -> None:
    rows = sys.argv[1:] or ROWS
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TAPEGRAD_CACHE_DIR=cache, TAPEGRAD_TIERS="0")
        print(f"{'float64 kernel':24s} {'CPU s':>7s}")
        subprocess.run([sys.executable, "-c", CHILD, *rows], env=env, check=True)


if __name__ == "__main__":
    main()
