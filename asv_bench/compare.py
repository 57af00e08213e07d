"""Side-by-side comparison: tapegrad against hand-written NumPy and, when installed,
PyTorch and HIPS autograd, on the same workloads in the same run.

    python asv_bench/compare.py [--json results.json] [--repeat 15]

Every implementation's gradient is checked against the hand-written one first; the
table gives medians and ratios to hand-written NumPy. Missing peers are skipped.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks.workloads import (
    backward_seconds,
    chain_grad_tapegrad,
    chain_loss,
    chain_numpy,
    forward_seconds,
    interleaved_medians,
    recurrence,
    recurrence_nodes,
    recurrence_numpy,
)


def _torch_chain():
    try:
        import torch
    except ImportError:
        return None

    def run(x0, n_ops):
        x = torch.tensor(x0, requires_grad=True)
        y = x
        for _ in range(n_ops // 4):
            y = torch.tanh(torch.sin(y) * 1.01) + x
        loss = y.sum()
        loss.backward()
        return loss.item(), x.grad.numpy()

    return run


def _autograd_chain():
    try:
        import autograd
        import autograd.numpy as anp
    except ImportError:
        return None

    def f(x, n_ops):
        y = x
        for _ in range(n_ops // 4):
            y = anp.tanh(anp.sin(y) * 1.01) + x
        return anp.sum(y)

    vg = autograd.value_and_grad(f)

    def run(x0, n_ops):
        v, g = vg(x0, n_ops)
        return float(v), g

    return run


def _torch_recurrence():
    try:
        import torch
    except ImportError:
        return None

    def run(p0, u):
        p = torch.tensor(p0, requires_grad=True)
        a, b, c = p[0], p[1], p[2]
        ut = torch.tensor(u)
        s = torch.zeros((), dtype=torch.float64)
        for k in range(len(u)):
            s = s + torch.tanh(a * s + b * ut[k]) * c
        loss = s**2
        loss.backward()
        return loss.item(), p.grad.numpy()

    return run


def _recurrence_rows(repeat: int) -> list[dict]:
    import tapegrad as tg

    steps = 1430
    u = np.random.default_rng(0).standard_normal(steps)
    p = np.array([0.5, 0.3, 0.1])
    ref_value, ref_grad = recurrence_numpy(p, u)
    step = tg.compile(recurrence)
    impls = {
        "hand-written NumPy": recurrence_numpy,
        "tapegrad (eager)": tg.value_and_grad(recurrence),
        "tapegrad (replay)": step.value_and_grad,
        "PyTorch": _torch_recurrence(),
    }
    rows = []
    label = f"recurrence, {recurrence_nodes(steps)} nodes"
    present = {}
    for name, fn in impls.items():
        if fn is None:
            print(f"  ({name} not installed: skipped)")
            continue
        value, grad = fn(p, u)
        np.testing.assert_allclose(value, ref_value, rtol=1e-10)
        np.testing.assert_allclose(grad, ref_grad, rtol=1e-8)
        present[name] = lambda fn=fn: fn(p, u)
    medians = interleaved_medians(present, repeat)
    base = medians["hand-written NumPy"]
    for name, t in medians.items():
        rows.append(
            {"workload": label, "impl": name, "median_ms": t * 1e3, "ratio_to_numpy": t / base}
        )
    replay_t = next(r["median_ms"] for r in rows if r["impl"] == "tapegrad (replay)")
    rows.append(
        {
            "workload": label,
            "impl": "tapegrad replay per node",
            "ns": replay_t * 1e6 / recurrence_nodes(steps),
        }
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()

    rows = []
    for n_ops, size in [(1000, 16), (10000, 1)]:
        x0 = np.random.default_rng(0).uniform(-1, 1, size)
        ref_value, ref_grad = chain_numpy(x0, n_ops)
        import tapegrad as tg

        step = tg.compile(chain_loss, argnums=0)

        def replayed(x0, n, step=step):
            return step.value_and_grad(x0, n)

        impls = {
            "hand-written NumPy": chain_numpy,
            "tapegrad (eager)": chain_grad_tapegrad,
            "tapegrad (replay)": replayed,
            "PyTorch": _torch_chain(),
            "HIPS autograd": _autograd_chain(),
        }
        present = {}
        for name, fn in impls.items():
            if fn is None:
                print(f"  ({name} not installed: skipped)")
                continue
            value, grad = fn(x0, n_ops)  # warm up and check
            np.testing.assert_allclose(value, ref_value, rtol=1e-10)
            np.testing.assert_allclose(grad, ref_grad, rtol=1e-8, atol=1e-12)
            present[name] = lambda fn=fn, x0=x0, n=n_ops: fn(x0, n)
        medians = interleaved_medians(present, args.repeat)
        base = medians["hand-written NumPy"]
        for name, t in medians.items():
            rows.append(
                {
                    "workload": f"chain of {n_ops} ops, {size} elements",
                    "impl": name,
                    "median_ms": t * 1e3,
                    "ratio_to_numpy": t / base,
                }
            )
        fwd = forward_seconds(x0, n_ops, args.repeat)
        bwd = backward_seconds(x0, n_ops, args.repeat)
        rows.append(
            {
                "workload": f"chain of {n_ops} ops, {size} elements",
                "impl": "tapegrad forward per op",
                "ns": fwd / n_ops * 1e9,
            }
        )
        rows.append(
            {
                "workload": f"chain of {n_ops} ops, {size} elements",
                "impl": "tapegrad backward per node",
                "ns": bwd / n_ops * 1e9,
            }
        )

    rows += _recurrence_rows(args.repeat)

    print(
        f"\nmachine: {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}, NumPy {np.__version__}"
    )
    print(f"{'workload':34} {'implementation':28} {'median':>12} {'vs NumPy':>9}")
    for r in rows:
        if "median_ms" in r:
            print(
                f"{r['workload']:34} {r['impl']:28} {r['median_ms']:9.3f} ms "
                f"{r['ratio_to_numpy']:8.2f}x"
            )
        else:
            print(f"{r['workload']:34} {r['impl']:28} {r['ns']:9.0f} ns")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
