"""Compare a commit with its parent on the fast benchmarks; exit 1 on a regression.

``python asv_bench/regress.py`` builds HEAD and HEAD~1 into their own virtualenvs (the
history configuration, ``asv.history.conf.json``), runs the fast benchmarks of both
interleaved by ``asv continuous`` and exits non-zero when one is slower by more than
``--factor`` (default 1.10, i.e. 10%) with statistical significance. The first run
downloads tapegrad's dependencies into each environment and compiles the kernels the
benchmarks use (several minutes); later runs reuse both. It is meant for the machine
where CI runs, outside ``.ci/run`` (too slow there: two environments and two kernel
caches). ``--bench`` picks other benchmarks (a regular expression).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFIG = HERE / "asv.history.conf.json"
# per-node overhead of recording and backward, per-op overhead on arrays, replay, the MLP
# step: together they cover the hot paths, in a few minutes
FAST = r"ChainOverhead|ArrayOpOverhead|bench_replay|bench_models\.MLP"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", nargs="?", default="HEAD~1", help="the commit compared against")
    parser.add_argument("head", nargs="?", default="HEAD", help="the commit under test")
    parser.add_argument("--factor", type=float, default=1.10, help="slowdown that fails")
    parser.add_argument("--bench", default=FAST, help="benchmarks (regular expression)")
    args = parser.parse_args(argv)
    asv = [sys.executable, "-m", "asv"]
    subprocess.run([*asv, "machine", "--yes", "--config", str(CONFIG)], check=True, cwd=HERE)
    cmd = [*asv, "continuous", "--config", str(CONFIG), "--factor", str(args.factor),
           "--split", "--show-stderr", "--bench", args.bench, args.base, args.head]  # fmt: skip
    return subprocess.run(cmd, cwd=HERE).returncode


if __name__ == "__main__":
    sys.exit(main())
