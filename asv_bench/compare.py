"""Side-by-side comparison: tapegrad against hand-written NumPy and, when installed,
PyTorch and HIPS autograd, on the same workloads in the same run.

    python asv_bench/compare.py [--json results.json] [--repeat 15] [--second-order] [--ode]
                                [--eager [--steady]] [--elementwise] [--threads N]
                                [--cold [--warmup]] [--busy [--hogs K]]

``--cold`` times whole processes on an empty kernel cache (a machine that never
compiled this version) against the same on the warm cache: the README's first snippet,
``examples/lotka_volterra.py``, and with ``--warmup`` ``python -m tapegrad.warmup --jobs 2``.

``--busy`` times the eager rows on a quiet machine, then while ``--hogs`` (default 2)
CPU-bound processes run beside them (a shared CI runner, a laptop, one MPI rank per
core), then busy again with numba's loops on one thread; every library keeps its
default thread count (all CPUs) unless ``--threads`` is given.

Every implementation's gradient is checked against the hand-written one first; the
table gives medians and ratios to hand-written NumPy. Missing peers are skipped.
"""

from __future__ import annotations

import argparse
import json
import os

# Thread pools: NumPy's and SciPy's OpenBLAS, PyTorch's and numba's OpenMP, tapegrad's
# ufunc threads all share the machine; interleaved timing makes idle spinning workers of
# one slow down the next. --threads N (read before NumPy is imported) gives every pool N
# threads; 1 is the reproducible single-core comparison.
# --busy measures the libraries' own defaults: no pool is set unless --threads is given.
_THREADS = None if "--busy" in os.sys.argv else "1"
for _i, _a in enumerate(os.sys.argv):
    if _a == "--threads" and _i + 1 < len(os.sys.argv):
        _THREADS = os.sys.argv[_i + 1]
for _var in (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMBA_NUM_THREADS",
    "TAPEGRAD_THREADS",
):
    if _THREADS is not None:
        os.environ[_var] = _THREADS
import platform
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks.bench_cold import README_SNIPPET, process_seconds
from benchmarks.workloads import (
    backward_seconds,
    chain_grad_tapegrad,
    chain_loss,
    chain_numpy,
    forward_seconds,
    interleaved_medians,
    lj_numpy,
    lj_positions,
    lj_tapegrad,
    lv_data,
    lv_loss,
    lv_numpy,
    lv_tapegrad,
    mlp_data,
    mlp_loss,
    mlp_numpy,
    mlp_tapegrad,
    recurrence,
    recurrence_c,
    recurrence_nodes,
    recurrence_numpy,
    second_order_impls,
    smooth100,
    smooth100_data,
)


def _torch_threads(torch) -> None:
    if _THREADS is not None:
        torch.set_num_threads(int(_THREADS))


def _torch_chain():
    try:
        import torch
    except ImportError:
        return None
    _torch_threads(torch)

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
        "C (cc -O2)": recurrence_c(),
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
    rows += _ratio_rows(label, medians, "hand-written NumPy")
    # capture: a new signature (one more step) on a fresh compiled function, against one
    # eager step on the same arguments, interleaved
    u2 = np.append(u, 0.1)
    eager = impls["tapegrad (eager)"]
    both = interleaved_medians(
        {
            "capture": lambda: tg.compile(recurrence).value_and_grad(p, u2),
            "eager": lambda: eager(p, u2),
        },
        max(5, repeat // 3),
    )
    rows.append(
        {"workload": label, "impl": "capture / eager step", "x": both["capture"] / both["eager"]}
    )
    rows.append(
        {
            "workload": label,
            "impl": "eager / replay (x faster)",
            "x": medians["tapegrad (eager)"] / medians["tapegrad (replay)"],
        }
    )
    if "C (cc -O2)" in medians:
        # the two alone, each call right after one of its own: a 0.1 ms function run
        # right after a 50 ms one of another library starts from cold caches (2-10x
        # slower here), which the round-robin above does to both
        pair = interleaved_medians(
            {"replay": present["tapegrad (replay)"], "C": present["C (cc -O2)"]},
            max(repeat, 21),
            steady=True,
        )
        rows.append(
            {
                "workload": label,
                "impl": "replay / C, steady (x slower)",
                "x": pair["replay"] / pair["C"],
            }
        )
        rows.append(
            {
                "workload": label,
                "impl": "replay per node, steady",
                "ns": pair["replay"] * 1e9 / recurrence_nodes(steps),
            }
        )
        rows.append(
            {
                "workload": label,
                "impl": "C per node, steady",
                "ns": pair["C"] * 1e9 / recurrence_nodes(steps),
            }
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


def _torch_models() -> dict:
    try:
        import torch
    except ImportError:
        return {}
    _torch_threads(torch)

    def mlp(params, x, labels):
        ps = [torch.tensor(p, requires_grad=True) for p in params]
        h = torch.tanh(torch.tensor(x) @ ps[0] + ps[1])
        loss = torch.nn.functional.cross_entropy(h @ ps[2] + ps[3], torch.tensor(labels))
        loss.backward()
        return loss.item(), [p.grad.numpy() for p in ps]

    def lv(theta, observed, dt=0.01):
        th = torch.tensor(theta, requires_grad=True)
        a, b, c, d = th[0], th[1], th[2], th[3]
        obs = torch.tensor(observed)
        x = torch.tensor(10.0, dtype=torch.float64)
        y = torch.tensor(5.0, dtype=torch.float64)
        total = torch.tensor(0.0, dtype=torch.float64)
        for k in range(observed.shape[1]):
            x, y = x + dt * (a * x - b * x * y), y + dt * (d * x * y - c * y)
            total = total + (x - obs[0, k]) ** 2 + (y - obs[1, k]) ** 2
        total.backward()
        return total.item(), th.grad.numpy()

    def lj(pos):
        p = torch.tensor(pos, requires_grad=True)
        n = p.shape[0]
        diff = p[:, None, :] - p[None, :, :]
        eye = torch.eye(n, dtype=torch.float64)
        r2 = (diff * diff).sum(-1) + eye
        inv6 = 1.0 / (r2 * r2 * r2)
        energy = 2.0 * ((inv6 * inv6 - inv6) * (1 - eye)).sum()
        energy.backward()
        return energy.item(), -p.grad.numpy()

    return {"mlp": mlp, "lv": lv, "lj": lj}


def _large_rows(repeat: int) -> list[dict]:
    """A 16-op elementwise chain on 2e6 float64 (forward and backward)."""
    n_ops, size = 16, 2_000_000
    x0 = np.random.default_rng(0).uniform(-1, 1, size)
    ref_value, ref_grad = chain_numpy(x0, n_ops)
    impls = {
        "hand-written NumPy": chain_numpy,
        "tapegrad (eager)": chain_grad_tapegrad,
        "PyTorch": _torch_chain(),
    }
    present = {}
    for name, fn in impls.items():
        if fn is None:
            continue
        value, grad = fn(x0, n_ops)
        np.testing.assert_allclose(value, ref_value, rtol=1e-10)
        np.testing.assert_allclose(grad, ref_grad, rtol=1e-8, atol=1e-12)
        present[name] = lambda fn=fn: fn(x0, n_ops)
    medians = interleaved_medians(present, max(3, repeat // 3))
    base = medians["hand-written NumPy"]
    return [
        {
            "workload": "chain of 16 ops, 2e6 elements",
            "impl": name,
            "median_ms": t * 1e3,
            "ratio_to_numpy": t / base,
        }
        for name, t in medians.items()
    ]


def _model_rows(repeat: int) -> list[dict]:
    import tapegrad as tg

    torch_impls = _torch_models()
    if not torch_impls:
        print("  (PyTorch not installed: skipped)")
    params, x, labels = mlp_data()
    onehot = np.eye(10)[labels]
    mlp_step = tg.compile(mlp_loss, argnums=(0, 1, 2, 3))
    theta, observed = lv_data()
    lv_step = tg.compile(lv_loss)
    pos = lj_positions()
    workloads = {
        "MLP 256x64->256->10, tanh, CE": (
            mlp_numpy,
            {
                "tapegrad (eager)": lambda: mlp_tapegrad(params, x, labels),
                "tapegrad (replay)": lambda: _listed(mlp_step.value_and_grad(*params, x, onehot)),
                "PyTorch": torch_impls.get("mlp")
                and (lambda: torch_impls["mlp"](params, x, labels)),
            },
            (params, x, labels),
        ),
        "Lotka-Volterra Euler, 1000 steps": (
            lv_numpy,
            {
                "tapegrad (eager)": lambda: lv_tapegrad(theta, observed),
                "tapegrad (replay)": lambda: lv_step.value_and_grad(theta, observed),
                "PyTorch": torch_impls.get("lv") and (lambda: torch_impls["lv"](theta, observed)),
            },
            (theta, observed),
        ),
        "Lennard-Jones 512, energy+forces": (
            lj_numpy,
            {
                "tapegrad (eager)": lambda: lj_tapegrad(pos),
                "PyTorch": torch_impls.get("lj") and (lambda: torch_impls["lj"](pos)),
            },
            (pos,),
        ),
    }
    rows = []
    for label, (ref, impls, args) in workloads.items():
        ref_value, ref_grad = ref(*args)
        present = {"hand-written NumPy": lambda ref=ref, args=args: ref(*args)}
        for name, fn in impls.items():
            if not fn:
                continue
            value, grad = fn()
            np.testing.assert_allclose(value, ref_value, rtol=1e-9)
            for g, e in zip(
                grad if isinstance(grad, list) else [grad],
                ref_grad if isinstance(ref_grad, list) else [ref_grad],
            ):
                np.testing.assert_allclose(g, e, rtol=1e-7, atol=1e-9)
            present[name] = fn
        medians = interleaved_medians(present, repeat)
        rows += _ratio_rows(label, medians, "hand-written NumPy")
    return rows


def _second_order_rows(repeat: int) -> list[dict]:
    """HVP / gradient and JVP / forward ratios (tapegrad, side by side), and the Hessian
    of a 100-parameter function against torch.func.hessian and HIPS autograd."""
    import tapegrad as tg

    rows = []
    for label, impls in second_order_impls().items():
        for fn in impls.values():
            fn()
        medians = interleaved_medians(impls, repeat)
        for name, t in medians.items():
            rows.append({"workload": label, "impl": name, "median_ms": t * 1e3})
        for what, num, den in (
            ("HVP / gradient", "HVP", "gradient"),
            ("JVP / forward", "JVP", "forward (no grad)"),
            ("replayed HVP / value_and_grad", "replay: HVP", "replay: value_and_grad"),
        ):
            if num in medians:
                rows.append({"workload": label, "impl": what, "x": medians[num] / medians[den]})

    w, x = smooth100_data()
    ours = tg.hessian(lambda v: smooth100(w, v))
    want = ours(x)
    impls = {"tapegrad": lambda: ours(x)}
    try:
        import torch

        _torch_threads(torch)
        wt = torch.tensor(w)
        theirs = torch.func.hessian(lambda v: smooth100(wt, v, torch))
        np.testing.assert_allclose(theirs(torch.tensor(x)).numpy(), want, rtol=1e-10, atol=1e-12)
        impls["torch.func.hessian"] = lambda: theirs(torch.tensor(x))
    except ImportError:
        print("  (PyTorch not installed: skipped)")
    try:
        import autograd
        import autograd.numpy as anp

        hips = autograd.hessian(lambda v: smooth100(w, v, anp))
        np.testing.assert_allclose(hips(x), want, rtol=1e-10, atol=1e-12)
        impls["HIPS autograd"] = lambda: hips(x)
    except ImportError:
        print("  (HIPS autograd not installed: skipped)")
    medians = interleaved_medians(impls, repeat)
    for name, t in medians.items():
        rows.append(
            {
                "workload": "Hessian, 100 parameters",
                "impl": name,
                "median_ms": t * 1e3,
                "ratio_to_numpy": t / medians["tapegrad"],
            }
        )
    return rows


def _ode_rows(repeat: int, peers: bool = True) -> list[dict]:
    """The Lotka-Volterra fit's loss and gradient through an ODE solver:
    1000 RK4 steps, by tapegrad's solver, hand-written NumPy (RK4 and its discrete
    adjoint), PyTorch + torchdiffeq and HIPS autograd's odeint; and each tapegrad
    gradient's cost in forward solves."""
    from benchmarks import ode_workloads as ode

    log_obs = ode.observed()
    theta = ode.START
    ref_value, ref_grad = ode.numpy_fit(theta, log_obs)
    label = "Lotka-Volterra fit, 1000 RK4 steps"
    fwd = ode.tapegrad_forward(log_obs)
    fwd45 = ode.tapegrad_forward(log_obs, "RK45")
    direct, adjoint = ode.tapegrad_fit(log_obs), ode.tapegrad_fit(log_obs, adjoint=True)
    direct45 = ode.tapegrad_fit(log_obs, "RK45")
    adjoint45 = ode.tapegrad_fit(log_obs, "RK45", True)
    fwd_long, direct_long = (
        ode.tapegrad_forward(log_obs, "RK45-long"),
        ode.tapegrad_fit(log_obs, "RK45-long"),
    )
    impls = {
        "hand-written NumPy + adjoint": (lambda: ode.numpy_fit(theta, log_obs), 1e-12),
        "NumPy forward solve alone": (lambda: (ode.numpy_loss(theta, log_obs), None), 0),
        "tapegrad odeint": (lambda: direct(theta), 1e-9),
        "tapegrad odeint adjoint": (lambda: adjoint(theta), 1e-6),
        "tapegrad forward solve alone": (lambda: (fwd(theta), None), 0),
        "tapegrad RK45 rtol 1e-6": (lambda: direct45(theta), 1e-4),
        "tapegrad RK45 adjoint": (lambda: adjoint45(theta), 1e-4),
        "tapegrad RK45 forward alone": (lambda: (fwd45(theta), None), 0),
        "tapegrad RK45 rtol 1e-13 (~1000 steps)": (lambda: direct_long(theta), 1e-6),
        "tapegrad RK45 rtol 1e-13 forward alone": (lambda: (fwd_long(theta), None), 0),
    }
    torch_fn, torch_label = ode.torch_fit(log_obs) if peers else (None, None)
    if not peers:
        print("  (--no-peers: PyTorch and HIPS autograd left out)")
    elif torch_fn is not None:
        impls[torch_label] = (lambda: torch_fn(theta), 1e-7)
    else:
        print("  (PyTorch not installed: skipped)")
    hips = ode.autograd_fit(log_obs) if peers else None
    if hips is not None:
        impls["HIPS autograd odeint (LSODA)"] = (lambda: hips(theta), 1e-6)
    elif peers:
        print("  (HIPS autograd not installed: skipped)")
    present = {}
    for name, (fn, tol) in impls.items():
        value, grad = fn()  # warm up and check against the hand-written gradient
        if grad is not None:
            np.testing.assert_allclose(value, ref_value, rtol=max(tol, 1e-9))
            np.testing.assert_allclose(grad, ref_grad, rtol=tol, atol=tol)
        present[name] = fn
    medians = interleaved_medians(present, repeat)
    rows = _ratio_rows(label, medians, "hand-written NumPy + adjoint")
    for name, alone in (
        ("tapegrad odeint", "tapegrad forward solve alone"),
        ("tapegrad odeint adjoint", "tapegrad forward solve alone"),
        ("tapegrad RK45 rtol 1e-6", "tapegrad RK45 forward alone"),
        ("tapegrad RK45 adjoint", "tapegrad RK45 forward alone"),
        ("tapegrad RK45 rtol 1e-13 (~1000 steps)", "tapegrad RK45 rtol 1e-13 forward alone"),
    ):
        rows.append({"workload": label, "impl": f"{name} / its forward (x)",
                     "x": medians[name] / medians[alone]})  # fmt: skip
    ratio = medians["tapegrad odeint"] / medians["NumPy forward solve alone"]
    rows.append({"workload": label, "impl": "tapegrad odeint / NumPy forward (x)", "x": ratio})
    return rows


def _eager_rows(repeat: int, steady: bool = False) -> list[dict]:
    """The eager workloads, as users write them: two elementwise chains on 2e6
    elements (transcendental; log/sqrt/pow), Lennard-Jones 512 in three spellings, and
    the MLP; each against hand-written NumPy and PyTorch, gradients checked first.
    ``steady``: each timed call right after an untimed one of the same implementation
    (see ``interleaved_medians``)."""
    from benchmarks import eager_workloads as ew

    x, w = ew.chain_data()
    pos = ew.positions()
    params, xm, labels = mlp_data()
    torch_mlp = _torch_models().get("mlp")
    workloads = {
        "chain: 4 x (sin, *c, tanh, exp, *w, +x), 2e6": (
            lambda: ew.chain_numpy(x, w),
            {"tapegrad (eager)": (ew.tapegrad_fn(ew.chain), (x, w)),
             "PyTorch": (ew.torch_fn(ew.chain), (x, w))},
        ),
        "chain: 3 x (x*x+1, sqrt, +c, log, **1.3, *w, +x), 2e6": (
            lambda: ew.chain_log_numpy(x, w),
            {"tapegrad (eager)": (ew.tapegrad_fn(ew.chain_log), (x, w)),
             "PyTorch": (ew.torch_fn(ew.chain_log), (x, w))},
        ),
        **{
            f"Lennard-Jones 512: {spelling}": (
                lambda: ew.lj_numpy(pos),
                {"tapegrad (eager)": (ew.lj_tapegrad(f), (pos,)),
                 "PyTorch": (ew.lj_torch(f), (pos,))},
            )
            for spelling, f in ew.LJ_SPELLINGS.items()
        },
        "MLP 256x64->256->10, tanh, CE": (
            lambda: mlp_numpy(params, xm, labels),
            {"tapegrad (eager)": (lambda: mlp_tapegrad(params, xm, labels), ()),
             "PyTorch": (torch_mlp and (lambda: torch_mlp(params, xm, labels)), ())},
        ),
    }  # fmt: skip
    rows = []
    for label, (ref, impls) in workloads.items():
        value, grads = ref()
        present = {"hand-written NumPy": ref}
        for name, (fn, args) in impls.items():
            if fn is None:
                continue
            got, got_grads = fn(*args)
            np.testing.assert_allclose(got, value, rtol=1e-9)
            for g, e in zip(got_grads, grads):
                np.testing.assert_allclose(g, e, rtol=1e-7, atol=1e-9)
            present[name] = lambda fn=fn, args=args: fn(*args)
        # a step of about a millisecond: fifteen single calls, with PyTorch's between
        # them, moved its ratio by +-5% from run to run; it takes more
        rounds = max(repeat, MIN_ROUNDS_MS) if label.startswith("MLP") else repeat
        medians = interleaved_medians(present, rounds, steady=steady)
        rows += _ratio_rows(label, medians, "hand-written NumPy")
    return rows


MIN_ROUNDS_MS = 61  # rounds of a millisecond-long row of --eager (the MLP)


def _elementwise_rows(repeat: int) -> list[dict]:
    """Single elementwise functions on 1e6 float64, forward and
    backward (1 ms = 1 ns an element), against NumPy's ufunc plus the derivative by
    hand, and PyTorch."""
    from benchmarks import eager_workloads as ew

    x = ew.elementwise_data()
    rows = []
    for name in ew.ELEMENTWISE:
        ref = ew.elementwise_numpy(name)
        value, grads = ref(x)
        present = {"NumPy ufunc + derivative": lambda ref=ref: ref(x)}
        for impl, fn in (("tapegrad (eager)", ew.elementwise_tapegrad(name)),
                         ("PyTorch", ew.elementwise_torch(name))):  # fmt: skip
            if fn is None:
                continue
            got, got_grads = fn(x)
            np.testing.assert_allclose(got, value, rtol=1e-12)
            np.testing.assert_allclose(got_grads[0], grads[0], rtol=1e-12, atol=1e-15)
            present[impl] = lambda fn=fn: fn(x)
        medians = interleaved_medians(present, repeat)
        rows += _ratio_rows(name, medians, "NumPy ufunc + derivative")
    return rows


def _listed(value_and_grads):
    value, grads = value_and_grads
    return value, list(grads)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument(
        "--repeat",
        type=int,
        default=15,
        help="timed rounds per row (default 15; --eager's MLP row takes at least 61)",
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="threads for every library's pool (default 1)"
    )
    parser.add_argument(
        "--second-order", action="store_true", help="only the HVP / JVP / Hessian rows"
    )
    parser.add_argument("--ode", action="store_true", help="only the ODE-solver rows")
    parser.add_argument(
        "--eager", action="store_true", help="only the eager rows (chains, pairwise, MLP)"
    )
    parser.add_argument(
        "--steady",
        action="store_true",
        help="with --eager: time each call right after an untimed call of the same "
        "implementation (a training loop's steady state) instead of after the others'",
    )
    parser.add_argument(
        "--elementwise",
        action="store_true",
        help="only single elementwise functions on 1e6 elements",
    )
    parser.add_argument(
        "--no-peers", action="store_true", help="ODE rows without PyTorch and HIPS autograd"
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="whole processes on an empty kernel cache against the warm cache",
    )
    parser.add_argument(
        "--warmup",
        action="store_true",
        help="with --cold: also python -m tapegrad.warmup --jobs 2",
    )
    parser.add_argument(
        "--busy",
        action="store_true",
        help="the eager rows quiet, beside CPU-bound processes, and so with one numba thread",
    )
    parser.add_argument("--hogs", type=int, default=2, help="with --busy: how many processes")
    args = parser.parse_args()
    if args.busy:
        _print(_busy_rows(args.repeat, args.hogs), args.json)
        return
    if args.cold:
        _print(_cold_rows(args.repeat, args.warmup), args.json)
        return
    if args.second_order:
        _print(_second_order_rows(args.repeat), args.json)
        return
    if args.ode:
        _print(_ode_rows(args.repeat, not args.no_peers), args.json)
        return
    if args.eager:
        _print(_eager_rows(args.repeat, args.steady), args.json)
        return
    if args.elementwise:
        _print(_elementwise_rows(args.repeat), args.json)
        return

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
        rows.append(
            {
                "workload": f"chain of {n_ops} ops, {size} elements",
                "impl": "eager / replay (x faster)",
                "x": medians["tapegrad (eager)"] / medians["tapegrad (replay)"],
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
    rows += _model_rows(args.repeat)
    rows += _large_rows(args.repeat)
    rows += _second_order_rows(args.repeat)
    rows += _ode_rows(args.repeat)
    _print(rows, args.json)


def _cold_rows(repeat: int, warmup: bool) -> list[dict]:
    """Whole processes, empty cache (a new temporary directory each run) and warm."""
    import tempfile

    py = sys.executable
    root = Path(__file__).resolve().parent.parent
    runs = {
        "README first snippet": [py, "-c", README_SNIPPET],
        "examples/lotka_volterra.py": [
            py,
            str(root / "examples" / "lotka_volterra.py"),
            "--no-progress",
            "--out",
            str(Path(tempfile.gettempdir()) / "lotka_volterra_cold.png"),
        ],
    }
    if warmup:
        runs["python -m tapegrad.warmup --jobs 2"] = [py, "-m", "tapegrad.warmup", "--jobs", "2"]
    rows = []
    for label, argv in runs.items():
        warm, cold = [], []
        n = 1 if "warmup" in label else max(1, min(repeat, 3))
        for _ in range(n):  # interleaved: cold, then warm (the warm cache is this one)
            cold.append(process_seconds(argv, True))
            if "warmup" not in label:
                warm.append(process_seconds(argv, False))
        for impl, seconds in (("empty cache", cold), ("warm cache", warm)):
            if seconds:
                rows.append(
                    {"workload": label, "impl": impl, "median_ms": 1e3 * np.median(seconds)}
                )
    return rows


# A CPU-bound neighbour: pure Python on one core, until its deadline or until the
# process that started it is gone (it never outlives a benchmark that crashed).
HOG = """
import os, sys, time
end, parent = time.monotonic() + float(sys.argv[1]), os.getppid()
while time.monotonic() < end and os.getppid() == parent:
    sum(i * i for i in range(100_000))
"""


def _busy_rows(repeat: int, hogs: int, limit: float = 1800.0) -> list[dict]:
    """The eager rows three times in one process: quiet; beside ``hogs`` CPU-bound
    processes; and beside them again with numba's loops on one thread in this one
    (``numba.set_num_threads(1)``, what ``NUMBA_NUM_THREADS=1`` gives). Each row's
    ratio to hand-written NumPy, measured in the same condition."""
    import subprocess

    import numba

    quiet = _eager_rows(repeat)
    procs = [subprocess.Popen([sys.executable, "-c", HOG, str(limit)]) for _ in range(hogs)]
    try:
        busy = _eager_rows(repeat)
        threads = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            single = _eager_rows(repeat)
        finally:
            numba.set_num_threads(threads)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    rows = []
    for condition, got in (
        ("quiet", quiet),
        (f"{hogs} busy neighbours", busy),
        (f"{hogs} busy, 1 numba thread", single),
    ):
        rows += [{**r, "impl": f"{r['impl']} [{condition}]"} for r in got]
    for q, b, s in zip(quiet, busy, single):
        if q["impl"] == "tapegrad (eager)":
            rows.append(
                {
                    "workload": q["workload"],
                    "impl": "busy / quiet ratio",
                    "x": b["ratio_to_numpy"] / q["ratio_to_numpy"],
                }
            )
            rows.append(
                {
                    "workload": q["workload"],
                    "impl": "busy / busy one-thread",
                    "x": b["median_ms"] / s["median_ms"],
                }
            )
    return rows


def _ratio_rows(label: str, medians: dict, base: str) -> list[dict]:
    """One table row per implementation: its median and its ratio to ``base``'s."""
    return [
        {"workload": label, "impl": name, "median_ms": t * 1e3, "ratio_to_numpy": t / medians[base]}
        for name, t in medians.items()
    ]


def _print(rows: list[dict], json_path: str | None) -> None:
    print(
        f"\nmachine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"{_THREADS or 'default'} thread(s) per library; Python {platform.python_version()}, "
        f"NumPy {np.__version__}"
    )
    print(f"{'workload':36} {'implementation':28} {'median':>12} {'ratio':>9}")
    for r in rows:
        if "median_ms" in r:
            ratio = r.get("ratio_to_numpy")
            print(
                f"{r['workload']:34} {r['impl']:28} {r['median_ms']:9.3f} ms "
                + (f"{ratio:8.2f}x" if ratio is not None else "")
            )
        elif "x" in r:
            print(f"{r['workload']:34} {r['impl']:28} {r['x']:9.2f} x")
        else:
            print(f"{r['workload']:34} {r['impl']:28} {r['ns']:9.0f} ns")
    if json_path:
        Path(json_path).write_text(json.dumps(rows, indent=2))
        print(f"wrote {json_path}")


if __name__ == "__main__":
    main()
