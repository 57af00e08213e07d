"""The CUDA target against the CPU: every op table row with a CUDA target, generated from
the table's own cases, in float64 and float32; then devices, errors and the scheduler.

In CI these run in numba's simulator (tiny arrays); ``tests/gpu/run.sh`` runs them on
a real GPU with ``TAPEGRAD_CUDA_SIZE`` elements in the size-dependent tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads

from ..optable_cases import cases
from .conftest import SIMULATED, SIZE

pytestmark = pytest.mark.cuda

CUDA_CASES = [c for c in cases() if c.op.cuda is not None]
TOL = {np.float64: (1e-10, 1e-12), np.float32: (2e-4, 2e-5)}


def _cuda():
    from tapegrad.cuda import CudaTensor

    return CudaTensor


def _close(got, want, dtype, scale=1.0):
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * max(scale, 1.0))


def test_every_core_op_has_a_cuda_target():
    names = {c.op.name for c in CUDA_CASES}
    assert {
        "add",
        "subtract",
        "multiply",
        "true_divide",
        "negative",
        "power",
        "exp",
        "log",
        "sin",
        "cos",
        "tanh",
        "sqrt",
        "absolute",
        "maximum",
        "minimum",
        "sum",
        "mean",
        "matmul",
        "reshape",
        "transpose",
        "getitem",
    } <= names


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("case", CUDA_CASES, ids=lambda c: c.id)
def test_row_matches_cpu(case, dtype):
    """Forward values and gradients of the CUDA target equal the CPU's (which
    tests/test_ops.py checks against central differences)."""
    args = [a.astype(dtype) for a in case.args()]
    cpu = [tg.tensor(a, requires_grad=True) for a in args]
    gpu = [tg.tensor(a, requires_grad=True, device="cuda") for a in args]
    want = case.f(tnp, *cpu)
    got = case.f(tnp, *gpu)
    assert isinstance(got, _cuda()) and got.device == "cuda"
    assert (got.shape, got.dtype) == (want.shape, want.dtype)
    scale = float(np.max(np.abs(want.numpy()), initial=0.0))
    _close(got.numpy(), want.numpy(), dtype, scale)
    v = np.random.default_rng(3).standard_normal(want.shape).astype(want.dtype)
    want.backward(gradient=v)
    got.backward(gradient=v)
    for c, g in zip(cpu, gpu, strict=True):
        assert isinstance(g.grad, _cuda()), "the gradient of a CUDA leaf stays on the GPU"
        assert (g.grad.shape, g.grad.dtype) == (c.grad.shape, c.grad.dtype)
        _close(g.grad.numpy(), c.grad, dtype, float(np.max(np.abs(c.grad), initial=0.0)))


def _model(m, x, w, b):
    """A small network written once for both devices: broadcasting, matmul, reductions,
    transpose, indexing with repeats and a mask."""
    h = m.tanh(x @ w + b)
    sel = h[[0, 2, 2, 1]]
    return m.mean(h**2) + m.sum(sel.T * 0.5) + m.sum(m.exp(-m.abs(h[h.shape[0] - 1])))


def test_model_gradient_against_central_differences():
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s) for s in [(4, 3), (3, 5), (5,)]]
    gpu = [tg.tensor(a, requires_grad=True, device="cuda") for a in args]
    out = _model(tnp, *gpu)
    out.backward()
    cpu = [tg.tensor(a, requires_grad=True) for a in args]
    ref = _model(tnp, *cpu)
    ref.backward()
    np.testing.assert_allclose(out.item(), ref.item(), rtol=1e-12)
    check_grads(lambda *a: _model(tnp, *a), args)  # the CPU's gradient is the exact one
    for c, g in zip(cpu, gpu, strict=True):
        np.testing.assert_allclose(g.grad.numpy(), c.grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
def test_large_chain_and_reductions(dtype):
    """SIZE elements: several blocks of threads, the block-tree full sum, broadcast
    atomics into a row vector."""
    rng = np.random.default_rng(1)
    cols = 100
    x = rng.uniform(0.5, 1.5, (max(SIZE // cols, 2), cols)).astype(dtype)
    r = rng.standard_normal(cols).astype(dtype)

    def f(m, x, r):
        y = m.sin(x) * m.exp(-x) + r * x / 3.0
        return m.sum(y**2) + m.sum(m.mean(y, axis=0) * r)

    res = {}
    for dev in ("cpu", "cuda"):
        ts = [tg.tensor(a, requires_grad=True, device=dev) for a in (x, r)]
        out = f(tnp, *ts)
        out.backward()
        grads = [t.grad.numpy() if dev == "cuda" else t.grad for t in ts]
        res[dev] = (out.item(), grads)
    rtol = 1e-9 if dtype == np.float64 else 1e-3
    np.testing.assert_allclose(res["cuda"][0], res["cpu"][0], rtol=rtol)
    for g, c in zip(res["cuda"][1], res["cpu"][1], strict=True):
        np.testing.assert_allclose(g, c, rtol=rtol, atol=rtol * np.abs(c).max())


def test_matmul_backward_sized():
    n = 8 if SIMULATED else 256
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((n, n + 1)), rng.standard_normal((n + 1, n))
    ga, gb = (tg.tensor(v, requires_grad=True, device="cuda") for v in (a, b))
    (ga @ gb).sum().backward()
    np.testing.assert_allclose(ga.grad.numpy(), np.ones((n, n)) @ b.T, rtol=1e-12)
    np.testing.assert_allclose(gb.grad.numpy(), a.T @ np.ones((n, n)), rtol=1e-12)


# --- devices ------------------------------------------------------------------------------


def test_device_and_to():
    a = np.arange(6.0).reshape(2, 3)
    c = tg.tensor(a)
    g = c.to("cuda")
    assert (c.device, g.device) == ("cpu", "cuda")
    assert g.to("cuda") is g and c.to("cpu") is c
    back = g.to("cpu")
    assert isinstance(back, tg.Tensor) and back.dtype == np.float64
    np.testing.assert_array_equal(back.numpy(), a)
    assert tg.tensor(g).device == "cpu"  # tg.tensor copies to the CPU by default
    f32 = tg.tensor(a, dtype=np.float32, device="cuda")
    assert f32.dtype == np.float32 and f32.shape == (2, 3) and len(f32) == 2
    assert "device='cuda'" in repr(f32)
    assert tg.tensor(2.5, device="cuda").item() == 2.5


def test_to_keeps_leaves_and_refuses_to_cut_graphs():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    xg = x.to("cuda")
    assert xg.requires_grad and xg.is_leaf
    (xg * xg).sum().backward()
    np.testing.assert_allclose(xg.grad.numpy(), [2.0, 4.0])
    assert x.grad is None  # a new leaf: gradients do not flow between devices
    with pytest.raises(RuntimeError, match="do not flow between devices"):
        (x * 2).to("cuda")
    with pytest.raises(RuntimeError, match="do not flow between devices"):
        (xg * 2).to("cpu")
    (xg * 2).detach().to("cpu")  # explicit: fine


def test_grad_is_a_device_array():
    x = tg.tensor(np.ones(3), requires_grad=True, device="cuda")
    (x * 3.0).sum().backward()
    assert isinstance(x.grad, _cuda())
    assert hasattr(x.grad.data, "copy_to_host")  # a numba device array underneath
    if not SIMULATED:  # the simulator's arrays are host arrays without the interface
        assert x.grad.__cuda_array_interface__["shape"] == (3,)
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0, 3.0])


def test_numpy_protocols_route_to_cuda():
    a = np.linspace(0.1, 1.0, 6).reshape(2, 3)
    x = tg.tensor(a, requires_grad=True, device="cuda")
    out = np.sum(np.sin(x) * np.exp(x), axis=0)
    assert isinstance(out, _cuda())
    np.testing.assert_allclose(out.numpy(), np.sum(np.sin(a) * np.exp(a), axis=0))
    np.testing.assert_allclose(np.matmul(x, np.transpose(x)).numpy(), a @ a.T)
    with pytest.raises(TypeError, match="does not convert to a NumPy array"):
        np.asarray(x)
    with pytest.raises(TypeError, match=r"numpy\.cumsum is not supported on CUDA"):
        np.cumsum(x)


def test_grad_accumulates_and_resets():
    x = tg.tensor([1.0, -2.0], requires_grad=True, device="cuda")
    for _ in range(2):
        (x * x).sum().backward()
    held = x.grad
    np.testing.assert_allclose(held.numpy(), [4.0, -8.0])
    (x * 1.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [5.0, -7.0])
    np.testing.assert_allclose(held.numpy(), [4.0, -8.0])  # not modified in place
    x.grad = None
    x.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 1.0])


def test_no_grad_and_detach():
    x = tg.tensor([1.0, 2.0], requires_grad=True, device="cuda")
    with tg.no_grad():
        y = x * 2.0
    assert not y.requires_grad
    assert not x.detach().requires_grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.sum().backward()


def test_retain_graph_and_freed_graph():
    x = tg.tensor([1.0, 2.0], requires_grad=True, device="cuda")
    y = (tnp.exp(x) * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp([1.0, 2.0]) * (1 + np.array([1.0, 2.0])))
    before = x.grad.numpy()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), before)


def test_create_graph_is_cpu_only():
    x = tg.tensor([1.0, 2.0], requires_grad=True, device="cuda")
    with pytest.raises(NotImplementedError, match="CPU only"):
        (x * x).sum().backward(create_graph=True)
    assert x.grad is None


# --- errors ---------------------------------------------------------------------------------


def test_mixed_devices_raise_naming_both():
    g = tg.tensor(np.ones(3), requires_grad=True, device="cuda")
    c = tg.tensor(np.ones(3), requires_grad=True)
    for f in (lambda: g + c, lambda: c * g, lambda: tnp.maximum(g, c)):
        with pytest.raises(TypeError, match="different devices: cuda and cpu"):
            f()
    for f in (lambda: c @ g, lambda: tnp.matmul(g, c)):
        with pytest.raises(TypeError, match="device"):
            f()
    assert c.grad is None and g.grad is None


def test_op_without_cuda_target():
    g = tg.tensor(np.ones(3) + 1.0, requires_grad=True, device="cuda")
    with pytest.raises(TypeError, match="gammaln is not available for CUDA"):
        tg.special.gammaln(g)
    with pytest.raises(TypeError, match="CUDA tensor"):
        tnp.prod(g)


def test_comparisons_raise_rather_than_compare_identity():
    """Comparison rows have no CUDA target: == and != raise as < and > do (Python's
    default compared identity: ``x == 0`` was False, ``x != 0`` True, silently); a
    CUDA tensor stays hashable and findable by identity in dicts and sets."""
    x = tg.tensor([0.0, 1.0, 2.0], device="cuda")
    for compare in (
        lambda: x == 0,
        lambda: x != 0,
        lambda: 0 == x,
        lambda: x == x,
        lambda: x != np.zeros(3),
        lambda: x < 1,
        lambda: x >= 1,
    ):
        with pytest.raises(TypeError):
            compare()
    with pytest.raises(TypeError, match=r"== of CUDA tensors is not available.*to\('cpu'\)"):
        x == 0  # noqa: B015
    assert {x: 1}[x] == 1 and x in {x}
    np.testing.assert_array_equal((x.to("cpu") == 0).numpy(), [True, False, False])


def test_bad_input_leaves_grads():
    x = tg.tensor(np.ones((2, 3)), requires_grad=True, device="cuda")
    (x * 2.0).sum().backward()
    with pytest.raises(ValueError, match=r"multiply: .*shapes \(2, 3\) and \(4,\)"):
        x * tg.tensor(np.ones(4), device="cuda")
    with pytest.raises(ValueError, match=r"matmul: shapes \(2, 3\) and \(2, 3\)"):
        x @ x
    y = x * x
    with pytest.raises(RuntimeError, match="implicitly created only for scalar outputs"):
        y.backward()
    with pytest.raises(RuntimeError, match=r"gradient has shape \(3,\)"):
        y.backward(gradient=np.ones(3))
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 2.0))
    with pytest.raises(TypeError, match="only floating point tensors"):
        tg.tensor([1, 2], requires_grad=True, device="cuda")
    with pytest.raises(ValueError, match="unknown device"):
        tg.tensor([1.0], device="tpu")


@pytest.mark.parametrize(
    "dtype",
    [str, "U3", complex, np.complex64, np.float16, np.int32, np.uint8, object],
    ids=lambda d: np.dtype(d).str,
)
def test_astype_refuses_what_to_device_refuses(dtype):
    """CUDA tensors hold float64, float32, int64 or bool, as ``to_device`` says: astype
    to anything else raises, naming the op, shape and dtypes, and changes nothing (it
    used to give ``['', '', '']`` for str and a complex tensor for complex)."""
    x = tg.tensor([1.5, 2.5, 3.0], requires_grad=True, device="cuda")
    (x * 2.0).sum().backward()
    with pytest.raises(TypeError, match="tensor: unsupported dtype"):
        tg.tensor([1.5, 2.5, 3.0], device="cuda", dtype=dtype)
    want = rf"astype: unsupported dtype {np.dtype(dtype)} .*shape \(3,\) and dtype float64"
    with pytest.raises(TypeError, match=want):
        x.astype(dtype)
    with pytest.raises(TypeError, match=want):
        tnp.astype(x, dtype)
    np.testing.assert_array_equal(x.numpy(), [1.5, 2.5, 3.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])
    assert x.dtype == np.float64 and x.requires_grad


def test_astype_keeps_the_supported_dtypes():
    x = tg.tensor([1.5, -2.5, 0.0], requires_grad=True, device="cuda")
    with pytest.raises(TypeError, match="astype: 'not a dtype' is not a dtype"):
        x.astype("not a dtype")
    for dtype, want in [
        (np.float32, [1.5, -2.5, 0.0]),
        (float, [1.5, -2.5, 0.0]),
        (np.int64, [1, -2, 0]),
        (bool, [True, True, False]),
    ]:
        y = x.astype(dtype)
        assert y.dtype == np.dtype(dtype) and y.requires_grad == (np.dtype(dtype).kind == "f")
        np.testing.assert_array_equal(y.numpy(), want)


def test_transpose_refuses_float_axes():
    """NumPy raises TypeError for float axes; ``int()`` used to truncate them."""
    x = tg.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True, device="cuda")
    for f in (
        lambda: x.transpose(1.0, 0.0),
        lambda: x.transpose((1.0, 0)),
        lambda: x.transpose(np.array([1.0, 0.0])),
        lambda: tnp.transpose(x, (1.5, 0)),
        lambda: x.reshape(6).transpose(0.0),
    ):
        with pytest.raises(TypeError, match=r"transpose: axes .* must be integers.*shape"):
            f()
    assert x.transpose(np.int64(1), 0).shape == (3, 2)
    assert x.transpose(np.array([1, 0])).shape == (3, 2)
    assert x.reshape(6).transpose(0).shape == (6,)
    with pytest.raises(ValueError, match=r"transpose: axes \(0, 0\) don't match"):
        x.transpose(0, 0)
    assert x.grad is None and x.shape == (2, 3)


def _run(code: str, **env) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    full.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=600
    )


def test_no_gpu_gives_a_clear_error():
    r = _run("import tapegrad as tg\ntg.tensor([1.0], device='cuda')", NUMBA_DISABLE_CUDA="1")
    assert r.returncode != 0
    assert "needs a CUDA GPU" in r.stderr and "NUMBA_ENABLE_CUDASIM=1" in r.stderr


def test_import_does_not_load_the_cuda_target():
    r = _run(
        "import sys, tapegrad, tapegrad.numpy\n"
        "print(any(m.startswith(('numba.cuda', 'numba_cuda')) for m in sys.modules))"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


@pytest.mark.skipif(not SIMULATED, reason="on a GPU the kernels compile for real")
def test_every_kernel_compiles_to_ptx():
    """The simulator runs kernels as Python, so it would accept a formula the CUDA
    target cannot compile: compile all of them with NVVM (no GPU needed)."""
    script = Path(__file__).with_name("ptx.py")
    r = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=900,
        env={k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"},
    )
    if "libnvvm" in r.stdout + r.stderr and "cannot" in (r.stdout + r.stderr).lower():
        pytest.skip("NVVM not installed (pip install 'tapegrad[cuda]')")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert " 0 failures" in r.stdout or r.stdout.rstrip().splitlines()[-1].startswith("0 failures")


def test_gpu_runner_scripts():
    """run.sh parses, and speed.py runs end to end (tiny sizes, in the simulator unless a
    GPU is here), checking CPU and GPU agree before printing its table."""
    here = Path(__file__).parent
    assert subprocess.run(["bash", "-n", str(here / "run.sh")]).returncode == 0
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1" if SIMULATED else "0")
    r = subprocess.run(
        [sys.executable, str(here / "speed.py"), "--size", "64", "--n", "8", "--repeat", "1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    lines = r.stdout.splitlines()
    assert lines[0].startswith("GPU: ")
    assert any(line.startswith("chain of 16 ops") for line in lines)
    assert any(line.startswith("matmul 8x8") for line in lines)


def test_matmul_batches_beyond_one_grid(monkeypatch):
    """More batches than a grid's z dimension holds are launched in chunks."""
    import tapegrad.cuda.ops

    monkeypatch.setattr(tapegrad.cuda.ops, "MAX_GRID_Z", 2)
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((5, 2, 3)), rng.standard_normal((3, 2))
    ga, gb = (tg.tensor(v, requires_grad=True, device="cuda") for v in (a, b))
    ca, cb = (tg.tensor(v, requires_grad=True) for v in (a, b))
    out = ga @ gb
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-12)
    v = rng.standard_normal(out.shape)
    out.backward(gradient=v)
    (ca @ cb).backward(gradient=v)
    np.testing.assert_allclose(ga.grad.numpy(), ca.grad, rtol=1e-12)
    np.testing.assert_allclose(gb.grad.numpy(), cb.grad, rtol=1e-12)


def test_small_launches_do_not_warn():
    """numba-cuda warns on every launch of fewer than 128 blocks; a small tensor is not
    a mistake, so tapegrad's own launches (elementwise, reduce, sum_all, matmul) make
    none. On a GPU the real warning is checked; everywhere, a stand-in kernel that warns
    as numba-cuda does."""
    import warnings

    import tapegrad.cuda.runtime as tc

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = tg.tensor(np.linspace(0.1, 1.0, 300), requires_grad=True, device="cuda")
        m = x[:12].reshape(3, 4)
        loss = (tnp.sin(x) * x).sum() + (m @ m.T).sum() + tnp.sum(m, axis=0).sum()
        loss.backward()
    assert x.grad.numpy().shape == (300,)

    calls = []

    class Warns:  # what numba-cuda's _LaunchConfiguration does for small grids
        def __getitem__(self, config):
            warnings.warn(
                f"Grid size {config[0]} will likely result in GPU under-utilization "
                "due to low occupancy.",
                stacklevel=2,
            )
            return lambda *args: calls.append((config, args))

    k = Warns()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tc.launch(k, 5, "a")
        tc.launch(k, 5, "b")  # the configured launch is reused
        with pytest.raises(UserWarning, match="under-utilization"):
            k[1, 1]  # the user's own launches keep the warning
    assert calls == [((1, tc.THREADS), ("a",)), ((1, tc.THREADS), ("b",))]
