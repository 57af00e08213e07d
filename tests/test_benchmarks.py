"""The benchmark workloads compute what they claim: the eager workloads
(asv_bench/benchmarks/eager_workloads.py), small, each against its hand-written NumPy
baseline (compare.py checks the same at full size before it times them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "asv_bench"))

from benchmarks import eager_workloads as ew


@pytest.mark.parametrize("name", list(ew.ELEMENTWISE))
def test_elementwise_workloads_agree_with_numpy(name):
    x = ew.elementwise_data(3000)
    value, grads = ew.elementwise_numpy(name)(x)
    got, got_grads = ew.elementwise_tapegrad(name)(x)
    np.testing.assert_allclose(got, value, rtol=1e-12)
    np.testing.assert_allclose(got_grads[0], grads[0], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("f", [ew.chain, ew.chain_log], ids=["transcendental", "log"])
def test_chains_agree_with_numpy(f):
    x, w = ew.chain_data(2000)
    ref = ew.chain_numpy if f is ew.chain else ew.chain_log_numpy
    value, grads = ref(x, w)
    got, got_grads = ew.tapegrad_fn(f)(x, w)
    np.testing.assert_allclose(got, value, rtol=1e-12)
    for g, e in zip(got_grads, grads):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("spelling", list(ew.LJ_SPELLINGS))
def test_pairwise_spellings_agree_with_numpy(spelling):
    pos = ew.positions(27)
    value, grads = ew.lj_numpy(pos)
    got, got_grads = ew.lj_tapegrad(ew.LJ_SPELLINGS[spelling])(pos)
    np.testing.assert_allclose(got, value, rtol=1e-11)
    np.testing.assert_allclose(got_grads[0], grads[0], rtol=1e-9, atol=1e-9)


def _run_script(name: str, *args: str) -> str:
    """The standard output of ``asv_bench/<name>`` run with ``args`` (which must succeed)."""
    script = Path(__file__).resolve().parents[1] / "asv_bench" / name
    r = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_chain_ops_script_runs():
    """asv_bench/chain_ops.py (docs/performance.md's op-by-op chain numbers) end to end,
    tiny."""
    out = _run_script("chain_ops.py", "--size", "3000", "--repeat", "1", "--threads", "1")
    row = next(line for line in out.splitlines() if line.startswith("tapegrad "))
    assert len([float(v) for v in row.split()[1:]]) == 8  # six ops, forward, backward
    out = _run_script("chain_ops.py", "--vecmath", "--size", "3000", "--repeat", "1")
    assert sum(line.startswith("tapegrad vecmath") for line in out.splitlines()) == 3


def test_mlp_bounds_script_runs():
    """asv_bench/mlp_bounds.py (what bounds the eager MLP row) end to end, few rounds: it
    checks eager, replay (and PyTorch where installed) against NumPy by hand first."""
    out = _run_script("mlp_bounds.py", "--repeat", "2", "--evict", "1", "--after")
    tables, after = out.split("right after another step")
    rows = [line.split() for line in tables.splitlines() if line.startswith("  tapegrad")]
    # eager and replay at each size, eager alone, then the three at each size twice
    assert len(rows) == 5 + 2 * 4
    assert all(float(row[-1].rstrip("x")) > 0 for row in rows)
    # --after: a row per step run before (each of the three, full size and 2x2), then
    # each step right after itself, against NumPy by hand right after itself
    after = after.splitlines()[2:]
    assert len(after) == 8 and all(line.count("x ") == 3 for line in after[:6])
    assert "after itself" in after[6]
    ratios = [float(w.rstrip("x")) for w in after[7].split() if w.endswith("x")]
    assert len(ratios) == 3 and ratios[0] == 1.0 and all(r > 0 for r in ratios)


def test_interleaved_medians_steady_runs_each_call_after_itself():
    """compare.py --eager --steady: every timed call follows an untimed call of the same
    function, with the rounds still interleaved."""
    from benchmarks.workloads import interleaved_medians

    calls = []
    fns = {name: (lambda name=name: calls.append(name)) for name in "abc"}
    interleaved_medians(fns, repeat=3, steady=True)
    assert calls == ["a", "a", "b", "b", "c", "c"] * 3
    calls.clear()
    interleaved_medians(fns, repeat=2)
    assert calls == ["a", "b", "c"] * 2


def test_transform_overhead_workloads_agree_with_numpy():
    """asv's TransformOverhead times value_and_grad against NumPy by hand on the same
    values: the two compute the same value and gradients."""
    from benchmarks.bench_overhead import TransformOverhead

    for workload in TransformOverhead.params:
        bench = TransformOverhead()
        bench.setup(workload)
        (value, grads), (want, want_grads) = bench.tapegrad(), bench.numpy()
        assert value == pytest.approx(want, rel=1e-12)
        as_list = lambda g: g if isinstance(g, list) else [g]  # noqa: E731
        for g, e in zip(as_list(grads), as_list(want_grads), strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-14)
