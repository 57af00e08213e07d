"""Before/after comparison of two source trees, interleaved, in fresh processes.

    git worktree add /tmp/base <commit>
    python asv_bench/ab.py /tmp/base . --rounds 9 --what perf

Each round runs one subprocess per tree (the order alternates between rounds), which
imports tapegrad from that tree and prints one JSON line; the table gives medians and
new/old ratios. Single-threaded (OMP, OpenBLAS, numba and tapegrad pools at 1).

``--what``:
  perf     eager forward ns/op and backward ns/node (1,000-op chain on one element),
           replay ns/node (the scalar recurrence, ~10,000 nodes)
  fixed    backward time of a 10-node and a 5,000-node chain (fixed vs per-node cost)
  plain    20,000 steps of a 32-64-1 MLP: seconds and RSS growth
  held     the same, holding one metric with a graph every 1,000 steps
  retain   3,000 steps with backward(retain_graph=True)
  threads  RSS growth of 300 results kept from short-lived threads
  mlp      compare.py's eager MLP step (``value_and_grad`` each call), us, at full size
           and at 2x2 (fixed cost), each with NumPy by hand timed beside it
  ode      a short ODE solve and its backward (``odeint``, rtol 1e-6, a new right-hand
           side each call: capture included), us, and a compiled step's
           ``value_and_grad``, us

The first run of a tree compiles its kernels (cached per source hash): warm each tree
once (``python -m tapegrad.warmup``) or discard the first round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _mlp_loop(tg, tnp, np, what: str) -> dict:
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((64, 32)), rng.standard_normal((64, 1))
    w1 = tg.tensor(rng.standard_normal((32, 64)) * 0.1, requires_grad=True)
    w2 = tg.tensor(rng.standard_normal((64, 1)) * 0.1, requires_grad=True)
    steps = 3000 if what == "retain" else 20_000
    held, start, t0 = [], None, time.perf_counter()
    for i in range(steps):
        loss = tnp.mean((tnp.tanh(x @ w1) @ w2 - y) ** 2)
        loss.backward(retain_graph=what == "retain")
        if what == "held" and i % 1000 == 0:
            held.append(loss * 1.0)
        with tg.no_grad():
            w1 -= 0.01 * w1.grad
            w2 -= 0.01 * w2.grad
        w1.grad = w2.grad = None
        if i == 10:
            start = _rss_mb()
    return {f"{what}_s": time.perf_counter() - t0, f"{what}_MB_growth": _rss_mb() - start}


def worker(tree: str, what: str) -> dict:
    sys.path.insert(0, tree)
    sys.path.insert(0, os.path.join(tree, "asv_bench"))
    import numpy as np

    import tapegrad as tg
    import tapegrad.numpy as tnp

    if not tg.__file__.startswith(os.path.abspath(tree)):
        raise RuntimeError(f"imported {tg.__file__}, not from {tree}")
    from benchmarks.workloads import (
        backward_seconds,
        forward_seconds,
        recurrence,
        recurrence_nodes,
    )

    out: dict = {}
    x0 = np.random.default_rng(0).uniform(-1, 1, 1)
    if what == "perf":
        forward_seconds(x0, 1000)
        backward_seconds(x0, 1000)
        out["fwd_ns_per_op"] = forward_seconds(x0, 1000) / 1000 * 1e9
        out["bwd_ns_per_node"] = backward_seconds(x0, 1000) / 1000 * 1e9
        u = np.random.default_rng(0).standard_normal(1430)
        p = np.array([0.5, 0.3, 0.1])
        step = tg.compile(recurrence)
        step.value_and_grad(p, u)
        times = []
        for _ in range(15):
            t = time.perf_counter()
            step.value_and_grad(p, u)
            times.append(time.perf_counter() - t)
        out["replay_ns_per_node"] = statistics.median(times) / recurrence_nodes(1430) * 1e9
    elif what == "fixed":
        for n in (10, 5000):
            backward_seconds(x0, n)
            out[f"bwd_us_{n}_nodes"] = backward_seconds(x0, n, repeat=31) * 1e6
    elif what in ("plain", "held", "retain"):
        out = _mlp_loop(tg, tnp, np, what)
    elif what == "threads":
        import gc
        import threading

        keep: list = []

        def work() -> None:
            x = tg.tensor(np.linspace(0, 1, 20_000))
            for _ in range(20):
                x = tnp.sin(x) + 1.0
            keep.append(x)

        for n in (1, 300):
            if n == 300:
                keep.clear()
                gc.collect()
                start = _rss_mb()
            for _ in range(n):
                t = threading.Thread(target=work)
                t.start()
                t.join()
        gc.collect()
        out["threads_300_results_MB"] = _rss_mb() - start
    elif what == "mlp":
        from benchmarks.workloads import mlp_data, mlp_numpy, mlp_tapegrad

        for label, size in (("full", {}), ("2x2", dict(batch=2, n_in=2, hidden=2, n_out=2))):
            params, x, labels = mlp_data(**size)
            ts: dict[str, list] = {"tapegrad": [], "numpy": []}
            for _ in range(400 if label == "full" else 3000):
                for name, f in (("tapegrad", mlp_tapegrad), ("numpy", mlp_numpy)):
                    t = time.perf_counter()
                    f(params, x, labels)
                    ts[name].append(time.perf_counter() - t)
            for name, v in ts.items():
                out[f"mlp_{label}_{name}_us"] = statistics.median(v[len(v) // 10 :]) * 1e6
    elif what == "ode":
        from tapegrad.integrate import odeint

        k = tg.tensor(np.array([0.5, 1.0]), requires_grad=True)

        def solve() -> None:
            ys = odeint(lambda y, t, k: -k * y, np.ones(2), [0.0, 1.0], k, rtol=1e-6)
            tnp.sum(ys).backward()

        step = tg.compile(lambda p, u: tnp.sum(tnp.tanh(p * u) ** 2))
        p, u = np.ones(3), np.arange(3.0)
        for name, fn, n in (
            ("ode_solve_us", solve, 300),
            ("step_us", lambda: step.value_and_grad(p, u), 3000),
        ):
            for _ in range(20):
                fn()
            best = []
            for _ in range(5):
                t = time.perf_counter()
                for _ in range(n):
                    fn()
                best.append((time.perf_counter() - t) / n * 1e6)
            out[name] = min(best)
    else:
        raise SystemExit(f"unknown --what {what}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--what", default="perf")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:  # old is the tree, new the measurement
        print(json.dumps(worker(args.old, args.new)))
        return
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS", "TAPEGRAD_THREADS"):
        env[var] = "1"
    env.pop("PYTHONPATH", None)
    trees = {"old": os.path.abspath(args.old), "new": os.path.abspath(args.new)}
    results: dict[str, list[dict]] = {"old": [], "new": []}
    for r in range(args.rounds):
        order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
        for name in order:
            cmd = [sys.executable, __file__, trees[name], args.what, "--worker"]
            # run from outside both trees, so only sys.path decides which is imported
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd="/")
            if proc.returncode:
                raise SystemExit(proc.stderr[-3000:])
            results[name].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(f"{args.rounds} interleaved rounds, medians")
    for key in results["old"][0]:
        old = statistics.median(x[key] for x in results["old"])
        new = statistics.median(x[key] for x in results["new"])
        ratio = f"{new / old:6.3f}" if old else "     -"
        print(f"{key:24s} old {old:10.2f}   new {new:10.2f}   new/old {ratio}")


if __name__ == "__main__":
    main()
