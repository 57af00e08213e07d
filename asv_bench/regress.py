"""Compare a commit with its parent on the fast benchmarks; exit 1 on a regression.

    python asv_bench/regress.py [BASE [HEAD]] [--factor F] [--rounds R] [--bench REGEX]

Checks out BASE (default HEAD~1) and HEAD into temporary git worktrees and times the
fast asv benchmarks (``FAST``: per-node overhead of recording and backward, per-op
overhead on arrays, replay, the MLP step) of both in this environment: each round runs
one fresh process per tree (which imports tapegrad from that tree; the order alternates
between rounds), single-threaded, and times each benchmark's ``time_*`` methods for
every parameter (``time_hand_numpy`` excluded: the same NumPy code in both). A
benchmark regresses when HEAD is slower than BASE by more than ``--factor`` (default
1.10) in the median over the rounds *and* in the fastest round, and again when the
flagged benchmarks are timed a second time over twice the rounds: noise on a shared
machine moves one of them, or comes in bursts, a slower kernel stays. Exit 1 if one
does.

The kernel cache is keyed on the compiled sources (``tapegrad._jit.HASHED``): a commit
that did not touch them shares HEAD's cache. Otherwise the first round (not timed)
compiles the kernels the benchmarks use, for that tree, in the process.

``--asv`` runs ``asv continuous`` on the history configuration instead
(``asv.history.conf.json``: a virtualenv per commit, downloading tapegrad's dependencies
into each), for the machine where benchmark history is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import timeit
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFIG = HERE / "asv.history.conf.json"
# per-node overhead of recording and backward, per-op overhead on arrays, replay, the MLP
# step: together they cover the hot paths, in a few minutes
FAST = r"ChainOverhead|ArrayOpOverhead|bench_replay|bench_models\.MLP"
SKIP = ("time_hand_numpy",)
SAMPLE = 0.05  # seconds a timed sample takes, at least


def worker(tree: str, bench: str) -> dict[str, float]:
    """Seconds per call of each matching ``time_*`` benchmark of ``tree``."""
    import importlib
    import itertools
    import pkgutil

    sys.path.insert(0, tree)
    sys.path.insert(0, os.path.join(tree, "asv_bench"))
    import tapegrad

    if not tapegrad.__file__.startswith(os.path.abspath(tree)):
        raise RuntimeError(f"imported {tapegrad.__file__}, not from {tree}")
    import benchmarks

    pattern = re.compile(bench)
    out: dict[str, float] = {}
    for info in pkgutil.iter_modules(benchmarks.__path__):
        module = importlib.import_module(f"benchmarks.{info.name}")
        for cname, cls in vars(module).items():
            if not isinstance(cls, type) or cls.__module__ != module.__name__:
                continue
            for mname in sorted(vars(cls)):
                name = f"{info.name}.{cname}.{mname}"
                if not mname.startswith("time_") or mname in SKIP or not pattern.search(name):
                    continue
                params = getattr(cls, "params", [])
                grid = params if params and isinstance(params[0], list) else [params]
                combos = list(itertools.product(*grid)) if params else [()]
                for combo in combos:
                    obj = cls()
                    if hasattr(obj, "setup"):
                        obj.setup(*combo)
                    fn = getattr(obj, mname)
                    timer = timeit.Timer(lambda fn=fn, combo=combo: fn(*combo))
                    number = max(1, int(SAMPLE / max(timer.timeit(1), 1e-7)))
                    best = min(timer.repeat(repeat=3, number=number)) / number
                    out[f"{name}({', '.join(map(str, combo))})"] = best
    return out


def _tree(root: Path, commit: str, where: Path) -> None:
    subprocess.run(
        ["git", "-C", str(root), "worktree", "add", "--detach", "--force", str(where), commit],
        check=True,
        capture_output=True,
    )


def compare(base: str, head: str, factor: float, rounds: int, bench: str) -> int:
    root = HERE.parent
    for commit in (base, head):
        found = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"],
            capture_output=True,
        )
        if found.returncode:  # (a shallow clone has no parent)
            print(f"regress.py: no commit {commit} here; nothing to compare")
            return 0
    with tempfile.TemporaryDirectory(prefix="tapegrad-regress-") as tmp:
        trees = {"base": Path(tmp) / "base", "head": Path(tmp) / "head"}
        try:
            _tree(root, base, trees["base"])
            _tree(root, head, trees["head"])
            slower = _rounds(trees, bench, rounds, factor, f"{head} against {base}")
            if slower:
                # a burst of load on a shared machine can slow every process of a tree for
                # a while: what was flagged is timed again, twice as long, and fails only
                # if it is slower again (a slower kernel is, every time)
                again = "|".join(re.escape(k.split("(")[0]) for k in slower)
                slower = _rounds(trees, again, 2 * rounds, factor, "flagged, timed again")
        finally:
            for where in trees.values():
                subprocess.run(
                    ["git", "-C", str(root), "worktree", "remove", "--force", str(where)],
                    capture_output=True,
                )
    if slower is None:
        return 2
    if slower:
        print(f"{len(slower)} benchmark(s) slower than {factor:.2f}x: {', '.join(slower)}")
        return 1
    print(f"no benchmark slower than {factor:.2f}x")
    return 0


def _rounds(trees: dict[str, Path], bench: str, rounds: int, factor: float, title: str):
    """Time ``bench`` in both trees over interleaved rounds and print the table; the
    benchmarks slower than ``factor`` in the median and the fastest round (None if a
    worker failed)."""
    env = dict(os.environ, TAPEGRAD_TIERS="0")  # (kernels a tree lacks compile here)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS", "TAPEGRAD_THREADS"):
        env[var] = "1"
    env.pop("PYTHONPATH", None)
    results: dict[str, list[dict]] = {"base": [], "head": []}
    for r in range(rounds + 1):  # round 0 loads (or compiles) the kernels
        for name in ("base", "head") if r % 2 == 0 else ("head", "base"):
            cmd = [sys.executable, __file__, "--worker", str(trees[name]), bench]
            # from outside both trees: only sys.path decides which is imported
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd="/")
            if proc.returncode:
                print(proc.stderr[-3000:], file=sys.stderr)
                return None
            if r:
                results[name].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(f"{title}: {rounds} interleaved rounds, us per call")
    print(f"{'benchmark':58s} {'base':>9s} {'head':>9s} {'median':>7s} {'fastest':>7s}")
    slower = []
    for key in sorted(set(results["base"][0]) & set(results["head"][0])):
        b = [x[key] for x in results["base"]]
        h = [x[key] for x in results["head"]]
        median, fastest = statistics.median(h) / statistics.median(b), min(h) / min(b)
        flag = median > factor and fastest > factor
        slower += [key] if flag else []
        print(
            f"{key:58s} {statistics.median(b) * 1e6:9.1f} {statistics.median(h) * 1e6:9.1f} "
            f"{median:7.3f} {fastest:7.3f}{'  SLOWER' if flag else ''}"
        )
    return slower


def asv_continuous(base: str, head: str, factor: float, bench: str) -> int:
    asv = [sys.executable, "-m", "asv"]
    subprocess.run([*asv, "machine", "--yes", "--config", str(CONFIG)], check=True, cwd=HERE)
    cmd = [*asv, "continuous", "--config", str(CONFIG), "--factor", str(factor),
           "--split", "--show-stderr", "--bench", bench, base, head]  # fmt: skip
    return subprocess.run(cmd, cwd=HERE).returncode


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        print(json.dumps(worker(argv[1], argv[2])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", nargs="?", default="HEAD~1", help="the commit compared against")
    parser.add_argument("head", nargs="?", default="HEAD", help="the commit under test")
    parser.add_argument("--factor", type=float, default=1.10, help="slowdown that fails")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timed rounds")
    parser.add_argument("--bench", default=FAST, help="benchmarks (regular expression)")
    parser.add_argument("--asv", action="store_true", help="asv continuous, a virtualenv each")
    args = parser.parse_args(argv)
    if args.asv:
        return asv_continuous(args.base, args.head, args.factor, args.bench)
    return compare(args.base, args.head, args.factor, args.rounds, args.bench)


if __name__ == "__main__":
    sys.exit(main())
