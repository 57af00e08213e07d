"""Engine properties: the kernel cache, the generated file, NUMBA_DISABLE_JIT, threads,
and the backward pass staying in compiled code."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import _jit
from tapegrad.layout import H_STAT_CALLBACKS, H_STAT_NODES
from tapegrad.ops import ROWS, Kind, codegen
from tapegrad.tape import current_tape

ROOT = Path(__file__).resolve().parent.parent


def _run(code: str, **env: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        cwd=ROOT,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_generated_wrappers_are_up_to_date():
    assert codegen.TARGET.read_text() == codegen.render(ROWS), (
        "tapegrad/_generated.py is stale: run `python -m tapegrad.ops.codegen`"
    )


def test_op_reference_in_docs_is_up_to_date():
    from tapegrad.ops.docs import TARGET, render

    assert TARGET.read_text() == render(), "docs/ops.md is stale: run python -m tapegrad.ops.docs"


def test_every_row_has_test_cases_and_a_public_function():
    from tapegrad._namespace import NAMESPACES

    from .optable_cases import cases

    covered = {c.op.name for c in cases()}
    for op in ROWS:
        assert op.name in covered
        assert callable(NAMESPACES[op.namespace][op.name])
        if op.kind not in (Kind.ARRAY, Kind.COMPOSITE):
            assert op.differentiable == (op.bwd is not None)
    assert sum(op.differentiable for op in ROWS) >= 80


def test_saved_values_are_read_off_the_formulas():
    by = {op.name: op for op in ROWS}
    assert by["exp"].saves == ("out",)
    assert by["sin"].saves == ("x",)
    assert by["multiply"].saves == ("x", "y")
    assert by["add"].saves == ()  # needs nothing but g
    assert by["true_divide"].saves == ("y", "out")


def test_cache_directory_is_keyed_on_the_sources(tmp_path):
    root = _jit.cache_root()
    assert root.name.endswith(_jit.source_hash())
    code = "import tapegrad._jit as j; print(j.source_hash())"
    assert _run(code).strip() == _jit.source_hash()
    # an edited copy of the package gets another hash
    import shutil

    copy = tmp_path / "tapegrad"
    shutil.copytree(ROOT / "tapegrad", copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "kernels" / "loops.py").write_text(
        (copy / "kernels" / "loops.py").read_text() + "\n# edited\n"
    )
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert other.returncode == 0, other.stderr
    assert other.stdout.strip() != _jit.source_hash()


def test_first_use_notice_is_one_line_for_tapegrad_compiles_only():
    """A second of tapegrad's own compiling prints one line to stderr, once; a user's
    numba function compiling says nothing."""
    code = """
        import sys, numba
        from tapegrad import _jit
        _jit.FIRST_USE_NOTICE.after = 0.05

        def user(x):
            return x + 1
        numba.njit(user)(1.0)
        print("after user", _jit.FIRST_USE_NOTICE.said, flush=True)
        for k in range(3):
            def probe(x, k=k):
                return x * 2.0 + k
            probe.__module__ = "tapegrad.probe"
            _jit.jit(probe, cache=False)(1.0)
        print("after tapegrad", _jit.FIRST_USE_NOTICE.said)
    """
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["after user False", "after tapegrad True"]
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("tapegrad:")]
    assert len(lines) == 1 and "compiling kernels for first use" in lines[0]


def test_cache_tidy_removes_only_other_stale_versions(tmp_path):
    import time

    tag = _jit._PY_TAG
    root = tmp_path / f"{tag}-{'0' * 16}"
    names = [f"{tag}-{k:016x}" for k in range(1, 13)]
    for k, name in enumerate(names):  # one a day, the first the most recent
        (tmp_path / name).mkdir()
        marker = tmp_path / name / _jit.LAST_USED
        marker.touch()
        os.utime(marker, (time.time() - 86400 * k,) * 2)
    for name in ("py27-0123456789abcdef", f"{tag}-notahash", "results", "py399-0123456789abcdef"):
        (tmp_path / name).mkdir()
    (tmp_path / "notes.txt").write_text("keep me")
    removed = _jit.tidy_cache(root, keep_days=10, keep_versions=5)
    assert sorted(p.name for p in removed) == sorted(names[5:])
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([*names[:5], "py27-0123456789abcdef", f"{tag}-notahash",
                           "results", "py399-0123456789abcdef", "notes.txt"])  # fmt: skip
    removed = _jit.tidy_cache(root, keep_days=2.5, keep_versions=5)
    assert removed == [tmp_path / n for n in names[3:5]]
    # a process's first cache use marks its own version and tidies the rest
    old = tmp_path / f"{tag}-{'f' * 16}"
    old.mkdir()
    os.utime(old, (time.time() - 86400 * 60,) * 2)
    code = "import tapegrad; from tapegrad import _jit; print(_jit.cache_root())"
    mine = Path(_run(code, TAPEGRAD_CACHE_DIR=str(tmp_path)).strip())
    assert (mine / _jit.LAST_USED).exists() and not old.exists()
    assert (tmp_path / names[0]).exists()
    old.mkdir()
    os.utime(old, (time.time() - 86400 * 60,) * 2)
    _run(code, TAPEGRAD_CACHE_DIR=str(tmp_path), TAPEGRAD_CACHE_TIDY="0")
    assert old.exists()


def test_warm_process_compiles_nothing():
    code = """
        from numba.core import event
        rec = event.RecordingListener()
        event.register("numba:compile", rec)
        import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
        from tapegrad import dispatch
        x = tg.tensor(np.ones(3), requires_grad=True)
        w = tg.tensor(np.ones((3, 2)), requires_grad=True)
        tnp.sum(tnp.tanh(x @ w) ** 2).backward()
        hits = [k.cache_hits for k in dispatch._keepalive]
        print(len(rec.buffer), min(hits), len(hits))
    """
    _run(code)  # fills the cache if needed
    events, min_hits, n = map(int, _run(code).split())
    assert events == 0 and min_hits == 1 and n >= 6


def test_import_does_not_load_cuda_or_compile():
    code = """
        from numba.core import event
        rec = event.RecordingListener()
        event.register("numba:compile", rec)
        import sys, tapegrad, tapegrad.numpy
        print(len(rec.buffer), any(m.startswith("numba.cuda") for m in sys.modules))
    """
    assert _run(code).split() == ["0", "False"]


def test_engine_runs_without_jit():
    """NUMBA_DISABLE_JIT=1: the recorder, scheduler and kernels run as plain Python."""
    code = """
        import numba, numpy as np, tapegrad as tg, tapegrad.numpy as tnp
        from tapegrad.testing import check_grads
        assert numba.config.DISABLE_JIT
        rng = np.random.default_rng(0)
        check_grads(lambda x, y: tnp.sum(tnp.tanh(x @ y) ** 2 + tnp.maximum(x @ y, 0.1)),
                    [rng.random((3, 4)), rng.random((4, 2))])
        check_grads(lambda x, y: (tnp.sin(x) * y / 2.0 - tnp.exp(y)).mean(axis=0),
                    [rng.random((2, 3)), rng.random(3)])
        check_grads(lambda x: x.T[1:, ::-1].reshape(-1)[np.array([0, 0, 2])],
                    [rng.random((3, 2))])
        check_grads(lambda x, y: (x ** y + x / y - tnp.log(x) * tnp.sqrt(y)).sum(),
                    [rng.random(4) + 0.5, rng.random(4) + 0.5])
        x = tg.tensor(np.ones(3, np.float32), requires_grad=True)
        (x * tg.tensor(np.ones(3))).sum().backward()
        assert x.grad.dtype == np.float32
        print("ok")
    """
    assert _run(code, NUMBA_DISABLE_JIT="1").strip() == "ok"


def test_backward_runs_in_compiled_code():
    x = tg.tensor(np.ones(4), requires_grad=True)
    y = x
    for _ in range(50):
        y = tnp.tanh(y) * 1.5 + x
    y.sum().backward()
    h = current_tape().h
    assert h[H_STAT_NODES] == 151  # every node ran inside the compiled loop
    assert h[H_STAT_CALLBACKS] == 0  # with no return to Python


def test_threads_record_and_backpropagate_independently():
    results = {}

    def work(k):
        rng = np.random.default_rng(k)
        a = rng.standard_normal(50)
        x = tg.tensor(a, requires_grad=True)
        for _ in range(30):
            x.grad = None
            loss = tnp.sum(tnp.sin(x * (k + 1)) ** 2)
            loss.backward()
        results[k] = (a, x.grad)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, (a, g) in results.items():
        c = k + 1
        np.testing.assert_allclose(g, 2 * np.sin(c * a) * np.cos(c * a) * c, rtol=1e-12)


def test_tensor_from_another_thread_is_a_constant_unless_it_requires_grad():
    box = {}

    def make():
        box["c"] = tg.tensor([1.0, 2.0]) * 2
        box["g"] = tg.tensor([1.0, 2.0], requires_grad=True) * 2

    t = threading.Thread(target=make)
    t.start()
    t.join()
    np.testing.assert_array_equal((box["c"] + 1).numpy(), [3.0, 5.0])
    with pytest.raises(RuntimeError, match="another thread"):
        box["g"] + 1


def test_array_ops_larger_than_the_request_buffer_and_the_tables():
    # An array op's request is written into a fixed buffer that grows when it does not
    # fit (600 inputs), and the tables grow by what one op asks when their headroom is
    # less (5000 inputs on a fresh thread's tape, link table 4096): both retried.
    box = {}

    def work():
        rng = np.random.default_rng(1)
        for n in (600, 5000):
            a = rng.standard_normal(n)
            w = rng.standard_normal(n)
            x = tg.tensor(a, requires_grad=True)
            parts = [x[i] for i in range(n)]
            y = tnp.stack(parts)
            tnp.sum(y * w).backward()
            box[n] = (y.numpy(), a, x.grad, w)
        box["request"] = current_tape().request.size

    t = threading.Thread(target=work)
    t.start()
    t.join()
    for n in (600, 5000):
        y, a, g, w = box[n]
        np.testing.assert_array_equal(y, a)
        np.testing.assert_array_equal(g, w)
    assert box["request"] >= 5000


def test_cached_shape_plans_keep_numpy_errors():
    # matmul and reductions keep their shape computations per (shapes, axis): a bad
    # call raises every time, also after a good call with equal-comparing arguments
    x = tg.tensor(np.ones((3, 4)), requires_grad=True)
    for _ in range(2):
        with pytest.raises(ValueError, match=r"matmul: shapes \(3, 4\) and \(3, 4\) are not"):
            x @ x
        np.testing.assert_array_equal((x @ x.T).numpy(), np.full((3, 3), 4.0))
        np.testing.assert_array_equal(tnp.sum(x, axis=1).numpy(), np.full(3, 4.0))
        for bad in (1.0, (1.0,)):
            with pytest.raises(TypeError):
                tnp.sum(x, axis=bad)
        with pytest.raises(np.exceptions.AxisError, match="sum: axis 2 is out of bounds"):
            tnp.sum(x, axis=2)
    kept = tnp.sum(x, axis=np.int64(0), keepdims=np.True_)
    assert kept.shape == (1, 4)


def test_general_takes_numpy_scalars_as_params():
    # the request is written with plain stores, which refuse np.bool_: general converts
    import importlib

    from tapegrad.layout import F64
    from tapegrad.ops.shape import TRANSPOSE

    general = importlib.import_module("tapegrad.tensors").general
    a = np.arange(12.0).reshape(3, 4)
    x = tg.tensor(a, requires_grad=True)
    y = general(TRANSPOSE, F64, [x], [(F64, (np.int64(4), 3))], [np.True_, np.False_])
    np.testing.assert_array_equal(y.numpy(), a.T)
    tnp.sum(y * a.T).backward()
    np.testing.assert_array_equal(x.grad, a)


# --- leaves' own gradient arrays (Tape.use_own_grads) -------------------------------------


@pytest.fixture(params=[1, 10**9], ids=["own arrays", "copied out"])
def own_grad_min(request, monkeypatch):
    from tapegrad import tape as tape_module

    monkeypatch.setattr(tape_module, "OWN_GRAD_MIN", request.param)
    return request.param


def test_leaf_gradient_arrays_are_never_written_after_a_backward(own_grad_min):
    """Kernels write a leaf's gradient into the array that becomes its ``.grad``. Once
    handed out, no kernel may touch it again: not a second backward of a retained
    graph, not another step reusing the tape. Only accumulation into ``.grad`` writes
    into the array ``.grad`` holds (PyTorch's rule)."""
    from tapegrad.layout import S_XGRAD

    a = np.linspace(0.1, 1.0, 50)
    x = tg.tensor(a, requires_grad=True)
    y = tnp.sum(tnp.sin(x) * x)
    y.backward(retain_graph=True)
    first = x.grad
    kept = first.copy()
    x.grad = None
    y.backward()  # the same graph again: a new array, the first one untouched
    np.testing.assert_array_equal(first, kept)
    np.testing.assert_allclose(x.grad, kept)
    assert x.grad is not first
    second = x.grad
    for _ in range(3):  # later steps on the same tape
        z = tnp.sum(tnp.exp(x) * 2.0)
        z.backward()
    np.testing.assert_array_equal(first, kept)
    assert x.grad is second  # accumulated in place, as PyTorch's
    np.testing.assert_allclose(second, kept + 3 * 2.0 * np.exp(a))
    assert not current_tape().arrays["slot"][S_XGRAD].any()  # no slot names an own array


def test_leaf_gradient_arrays_with_python_nodes_hooks_and_fan_out(own_grad_min):
    """A custom function's Python backward adds into a leaf's own array (grad_view), a
    hook on an intermediate sees its gradient, a leaf used three times gets one sum."""

    class Square(tg.Function):
        @staticmethod
        def forward(ctx, v):
            ctx.save_for_backward(v)
            return v * v

        @staticmethod
        def backward(ctx, g):
            (v,) = ctx.saved_tensors
            return 2 * v * g

    a = np.array([0.5, -1.5, 2.0])
    x = tg.tensor(a, requires_grad=True)
    seen = []
    mid = x * 3.0
    mid.register_hook(lambda g: seen.append(np.array(g)))
    loss = tnp.sum(Square.apply(x)) + tnp.sum(mid * x) + tnp.sum(x)
    loss.backward()
    np.testing.assert_allclose(x.grad, 2 * a + 6 * a + 1.0)
    np.testing.assert_allclose(seen[0], a)
    gx = tg.grad(lambda v: tnp.sum(Square.apply(v) * v))(a)
    np.testing.assert_allclose(gx, 3 * a**2)


# --- gradients passed through without a copy (OPF_PASS: add, subtract's x) --------------


def _central(f, a, eps=1e-6):
    g = np.zeros_like(a)
    for i in range(a.size):
        d = np.zeros_like(a)
        d.flat[i] = eps
        g.flat[i] = (f(a + d) - f(a - d)) / (2 * eps)
    return g


@pytest.mark.parametrize("order", ["fan-out first", "fan-out last"])
def test_passed_gradients_with_fan_out_sum_every_use(own_grad_min, order):
    """``y + 1`` hands the output's gradient buffer to y; y's other uses then add into
    that buffer. Chains of passes (y + 1 - 3 + c), a pass into a leaf, and a node whose
    both inputs could take the buffer (only one may) against central differences."""

    def f(m, x):
        y = m.sin(x) * 2.0
        if order == "fan-out first":
            z = y * y
        a = y + 1.0
        b = a - 3.0
        c = b + y  # both operands the same size: one takes c's buffer, one is written
        if order == "fan-out last":
            z = y * y
        d = (x + 0.5) - x * 0.25  # passes straight into a leaf (arena or own array)
        return m.sum(c * c) + m.sum(z * b) + m.sum(d * d)

    a = np.linspace(-1.0, 1.2, 7)
    x = tg.tensor(a, requires_grad=True)
    f(tnp, x).backward()
    np.testing.assert_allclose(x.grad, _central(lambda v: f(np, v), a), rtol=1e-7, atol=1e-8)


def test_a_retained_or_hooked_output_keeps_its_gradient_when_passed(own_grad_min):
    """After ``o = y + 1`` passes its buffer to y, y's later contributions are added
    into it: ``o.grad`` (retain_grad, a hook run before the pass's kernel) must keep
    o's own gradient, and a hook that changes o's gradient changes what y receives."""
    a = np.array([0.3, -0.7, 1.1])
    w = np.array([2.0, 3.0, 5.0])
    v = np.array([7.0, 11.0, 13.0])
    x = tg.tensor(a, requires_grad=True)
    y = x * 1.0
    t = tnp.sum(y * v)  # recorded first, so its backward runs after the pass
    o = y + 1.0
    o.retain_grad()
    seen = []
    o.register_hook(lambda g: seen.append(np.array(g)))
    (tnp.sum(o * w) + t).backward()
    from tapegrad.layout import S_GRAD

    offsets = current_tape().arrays["slot"][S_GRAD]
    assert offsets[y._slot] == offsets[o._slot]  # y took o's buffer: no copy ran
    np.testing.assert_array_equal(o.grad, w)
    np.testing.assert_array_equal(seen[0], w)
    np.testing.assert_array_equal(x.grad, w + v)
    x2 = tg.tensor(a, requires_grad=True)
    y2 = x2 * 1.0
    t2 = tnp.sum(y2 * v)
    o2 = y2 - 1.0
    o2.register_hook(lambda g: g * 3.0)
    (tnp.sum(o2 * w) + t2).backward()
    np.testing.assert_array_equal(x2.grad, 3.0 * w + v)


def test_no_pass_across_dtypes_or_broadcasts():
    """A float32 operand of a float64 sum, or a broadcast bias, gets its own buffer
    (cast, reduced); the same-size operand beside it may take the output's."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((4, 5)), rng.standard_normal(5)
    x = tg.tensor(a, requires_grad=True)
    s32 = tg.tensor(a.astype(np.float32), requires_grad=True)
    bias = tg.tensor(b, requires_grad=True)
    o = x + bias
    p = s32 + x
    (tnp.sum(o * o) + tnp.sum(p * 2.0)).backward()
    np.testing.assert_allclose(x.grad, 2 * (a + b) + 2.0)
    np.testing.assert_allclose(bias.grad, (2 * (a + b)).sum(axis=0))
    assert s32.grad.dtype == np.float32
    np.testing.assert_allclose(s32.grad, np.full((4, 5), 2.0, np.float32))


def test_passed_gradients_replay_like_the_eager_run():
    """Replay plans keep the masks and buffer offsets the first run left: the same
    gradients, replay after replay, with the values changing."""

    def loss(x, w):
        y = tnp.tanh(x) * w
        a = y + 0.5
        b = a - x
        return tnp.sum(b * y) + tnp.sum(a)

    step = tg.compile(loss, argnums=(0, 1))
    rng = np.random.default_rng(4)
    for _ in range(4):
        a, w = rng.standard_normal(300), rng.standard_normal(300)
        x, wt = tg.tensor(a, requires_grad=True), tg.tensor(w, requires_grad=True)
        value = loss(x, wt)
        value.backward()
        got_value, (gx, gw) = step.value_and_grad(a, w)
        np.testing.assert_allclose(got_value, value.item(), rtol=1e-13)
        np.testing.assert_allclose(gx, x.grad, rtol=1e-13)
        np.testing.assert_allclose(gw, wt.grad, rtol=1e-13)


@pytest.mark.parametrize("op", ["add", "subtract"])
def test_anomaly_mode_names_the_add_for_a_nan_on_its_output(op):
    """A NaN a hook puts on an add's output is reported, and blamed on the add (were the
    input to take the output's buffer, the check after the add would skip it, or blame
    the op upstream). Anomaly mode does not pass buffers."""
    x = tg.tensor(np.linspace(-1.0, 1.0, 10), requires_grad=True)
    with tg.detect_anomaly():
        z = x * 3.0
        y = z + 1.0 if op == "add" else z - 1.0
        y.register_hook(lambda g: g * np.nan)
        with pytest.raises(RuntimeError, match=f"'{op}' returned nan or inf"):
            tnp.sum(y * 2.0).backward()


_SAVER = """
import sys, time
from numba.core import caching
from tapegrad import _jit
who, path, save = sys.argv[1], sys.argv[2], caching.IndexDataCacheFile.save
if sys.argv[3] == "numba":  # numba's own save, without tapegrad's lock
    save = save.__wrapped__
f = caching.IndexDataCacheFile(path, "shared_helper-1.py311", _jit.source_hash())
while time.time() < float(sys.argv[4]):  # both start together
    pass
for k in range(200):  # one signature after another, as two workers compiling one helper
    save(f, f"{who}{k}", f"{who}{k}")
"""


def saved_by_two_processes(path: Path, how: str) -> tuple[int, dict]:
    """Two processes each save 200 signatures of one function into the index at
    ``path``: how many entries the index holds, and those whose data is another's."""
    from numba.core import caching

    path.mkdir(parents=True)
    go = str(time.time() + 4.0)
    procs = [
        subprocess.Popen([sys.executable, "-c", _SAVER, who, str(path), how, go], cwd=ROOT)
        for who in ("a", "b")
    ]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    f = caching.IndexDataCacheFile(str(path), "shared_helper-1.py311", _jit.source_hash())
    index = f._load_index()
    data = {k: f._load_data(name) for k, name in index.items()}
    return len(index), {k: v for k, v in data.items() if v != k}


def test_two_processes_saving_signatures_of_one_function_keep_index_and_data_together(
    tmp_path,
):
    """numba's cache chooses a data file by reading the index first; two processes
    saving at once (warm-up workers on one cold cache) chose one file for two
    signatures, and a third process loaded code compiled for other types. In
    tapegrad's cache an entry is saved under a lock on the directory (numba's own save
    lost 100-180 of the 400 entries here and mixed up ~20: ``saved_by_two_processes(p,
    "numba")``)."""
    path = _jit.cache_root() / "lock-test" / tmp_path.name
    try:
        assert saved_by_two_processes(path, "tapegrad") == (400, {})
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)


def test_a_numba_function_from_exec_d_code_compiles_beside_tapegrad():
    """tapegrad listens to numba's compile events to say when it compiles its own
    functions; a user's function whose module is None (code exec'd without
    ``__name__``) must compile as it would without tapegrad."""
    import numba

    env = {"numba": numba}
    exec("@numba.njit\ndef f(x):\n    return x + 1\n", env)
    assert env["f"].py_func.__module__ is None
    assert env["f"](41) == 42


def test_compile_all_lives_in_warmup_and_the_old_name_warns(monkeypatch):
    """tg.compile_all warms the kernel cache, tg.compile captures a step: the first moved
    to tapegrad.warmup; the old name forwards its arguments, with a DeprecationWarning."""
    import tapegrad.warmup
    from tapegrad import dispatch
    from tapegrad.layout import FWD

    seen = []
    monkeypatch.setattr(dispatch, "compile_all", lambda *a, **k: seen.append((a, k)) or 7)
    assert tapegrad.warmup.compile_all((FWD,)) == 7
    with pytest.warns(DeprecationWarning, match=r"tapegrad\.warmup\.compile_all"):
        assert tg.compile_all(directions=(FWD,)) == 7
    assert seen == [(((FWD,),), {}), ((), {"directions": (FWD,)})]
