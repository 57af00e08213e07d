"""Compilation tiers (``tapegrad.tiers``): on an empty kernel cache a process answers at
once, running the same engine source as Python, and gives the numbers compiled code
gives.

Each test runs a program in a new process with a temporary ``TAPEGRAD_CACHE_DIR`` (a
machine that never compiled this version) and ``TAPEGRAD_BACKGROUND=0`` (no background
compiler: what runs is only the interpreted tier), and compares it with the same
program on this process's warm cache.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent

# Counts numba compilations of tapegrad's own functions (cache loads are not compiles).
COUNT_COMPILES = """
import atexit, sys
from numba.core import event
compiles = []
class _Count(event.Listener):
    def on_start(self, ev):
        f = getattr(ev.data.get("dispatcher"), "py_func", None)
        if getattr(f, "__module__", "").startswith("tapegrad"):
            compiles.append(f.__qualname__)
    def on_end(self, ev):
        pass
event.register("numba:compile", _Count())
atexit.register(lambda: print("compiles", len(compiles), file=sys.stderr))
"""


def _run(code: str, cache: Path | None, timeout: float = 300, **env: str) -> tuple[str, str]:
    full = dict(os.environ, **env)
    if cache is not None:
        full.update(TAPEGRAD_CACHE_DIR=str(cache), TAPEGRAD_BACKGROUND="0")
    out = subprocess.run(
        [sys.executable, "-c", COUNT_COMPILES + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full,
        cwd=ROOT,
        timeout=timeout,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout, out.stderr


def _alive(pid: int) -> bool:
    """Running (a zombie no init has reaped yet counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _compiles(stderr: str) -> int:
    return int(stderr.rsplit("compiles", 1)[1].split()[0])


README_SNIPPET = """
import numpy as np
import tapegrad as tg
import tapegrad.numpy as tnp

x = tg.tensor(np.ones(3), requires_grad=True)
w = tg.tensor(np.ones((3, 2)), requires_grad=True)
loss = tnp.sum(tnp.tanh(x @ w) ** 2)
loss.backward()
print(repr(loss.item()), x.grad.tolist(), w.grad.tolist())
"""


def test_the_first_snippet_on_an_empty_cache_compiles_nothing(tmp_path):
    started = time.perf_counter()
    cold, err = _run(README_SNIPPET, tmp_path)
    elapsed = time.perf_counter() - started
    warm, _ = _run(README_SNIPPET, None)
    assert cold == warm
    assert _compiles(err) == 0, err
    # (seconds on this shared machine, not a benchmark: a compile would take tens)
    assert elapsed < 60


# Every op family, values and gradients: elementwise (unary, binary, broadcast, with a
# Python scalar), reductions, shape and indexing, linear algebra, special functions,
# cumulative and softmax rows, where, float32, and a custom function's Python backward.
FAMILIES = """
import json
import numpy as np
import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.special import gammaln, log_softmax, logsumexp
from tests.custom_ops import Cube  # a Python backward

rng = np.random.default_rng(0)
a = tg.tensor(rng.random((3, 4)) + 0.5, requires_grad=True)
b = tg.tensor(rng.random(4) + 0.5, requires_grad=True)
s = tg.tensor(rng.random((3, 3)) + 3 * np.eye(3), requires_grad=True)
f = tg.tensor(rng.random(5).astype(np.float32), requires_grad=True)

terms = [
    tnp.sum(tnp.exp(a) * tnp.sin(b) - tnp.log(a) / b + a ** 1.5),
    tnp.sum(tnp.maximum(a, 0.9) + tnp.arctan2(a, b) + tnp.hypot(a, 2.0)),
    tnp.sum(tnp.mean(a, axis=0) * tnp.std(a, axis=1)[:1] + tnp.max(a, axis=1)[1]),
    tnp.sum(tnp.prod(a, axis=0) + tnp.cumsum(b) * tnp.cumprod(b)),
    tnp.sum(a.T[::-1, 1:] ** 2) + tnp.sum(tnp.concatenate([a, a * 2])[[0, 2, 2]]),
    tnp.sum(tnp.where(a > 1.0, a, -a) + tnp.reshape(a, (4, 3)).sum(axis=0)[0]),
    tnp.sum(a @ tnp.transpose(a)) + tnp.linalg.det(s) + tnp.trace(tnp.linalg.inv(s)),
    tnp.sum(tnp.linalg.solve(s, a[:, :2])) + tnp.sum(tnp.linalg.cholesky(s @ s.T)),
    tnp.sum(tnp.linalg.eigh(s + s.T)[0]) + tnp.linalg.norm(a),
    tnp.sum(gammaln(a) + log_softmax(a, axis=1)) + logsumexp(b),
    tnp.sum(tnp.einsum("ij,j->i", a, b)) + tnp.sum(Cube.apply(b)),
    tnp.sum(tnp.tanh(f) * 3.0).astype(np.float64),
]
loss = terms[0]
for t in terms[1:]:
    loss = loss + t
loss.backward()
grads = [[str(t.grad.dtype), t.grad.tolist()] for t in (a, b, s, f)]
print(json.dumps([repr(loss.item())] + grads))
"""


def test_every_op_family_gives_the_compiled_numbers_when_interpreted(tmp_path):
    """The same source, so the same numbers up to rounding: Python rounds ``fma`` twice
    (``_jit.fma``) and float32 formulas round where compiled code keeps a register."""
    cold, err = _run(FAMILIES, tmp_path)
    warm, _ = _run(FAMILIES, None)
    cold, warm = json.loads(cold), json.loads(warm)
    assert float(cold[0]) == pytest.approx(float(warm[0]), rel=1e-13)
    for (dtype, c), (dtype_w, w) in zip(cold[1:], warm[1:]):
        assert dtype == dtype_w
        tol = 1e-13 if dtype == "float64" else 4 * np.finfo(np.float32).eps
        np.testing.assert_allclose(c, w, rtol=tol, atol=tol)
    assert _compiles(err) == 0, err


def test_large_work_compiles_its_kernel_and_a_failing_python_kernel_raises(tmp_path):
    code = """
        import numpy as np
        import tapegrad as tg, tapegrad.numpy as tnp
        from tapegrad import tiers
        from tapegrad.ops import BY_NAME

        x = tg.tensor(np.linspace(0.1, 1.0, 50), requires_grad=True)
        y = tnp.sum(tnp.sin(x))          # 50 elements: above TAPEGRAD_INTERPRET_MAX=10
        y.backward()
        print(np.allclose(x.grad, np.cos(x.numpy())))
        print(tiers.kernel_cached(BY_NAME["sin"].code, 0, 0))
        small = tg.tensor([0.5, 0.25], requires_grad=True)
        tnp.sum(tnp.exp(small)).backward()  # 2 elements: interpreted
        for key, shim in tiers._SHIMS.items():
            if tiers.ROWS[key[0]].name == "exp":
                shim.python = lambda node, tp: 1 // 0
        try:
            tnp.sum(tnp.exp(small)).backward()
        except ZeroDivisionError:
            print("raised")
        print(np.allclose(small.grad, np.exp([0.5, 0.25])))  # the first backward's
        small.grad = None
        tnp.sum(small * 3.0).backward()  # the tape goes on
        print(small.grad.tolist() == [3.0, 3.0])
    """
    out, _ = _run(code, tmp_path, TAPEGRAD_INTERPRET_MAX="10")
    assert out.split() == ["True", "True", "raised", "True", "True"]


def test_interpreted_backward_in_threads(tmp_path):
    code = """
        import numpy as np
        import tapegrad as tg, tapegrad.numpy as tnp
        from tests.helpers import run_in_threads

        results, errors = {}, []
        def work(k):
            try:
                x = tg.tensor(np.arange(3.0) + k, requires_grad=True)
                for _ in range(5):
                    x.grad = None
                    tnp.sum(tnp.tanh(x) ** 2 * k).backward()
                results[k] = x.grad.tolist()
            except BaseException as e:
                errors.append(e)
        run_in_threads(work)
        assert not errors, errors
        for k, g in sorted(results.items()):
            x = np.arange(3.0) + k
            assert np.allclose(g, 2 * k * np.tanh(x) / np.cosh(x) ** 2), (k, g)
        print("ok")
    """
    out, err = _run(code, tmp_path)
    assert out.strip() == "ok"
    assert _compiles(err) == 0, err


@pytest.mark.slow
def test_a_background_compile_hands_over_to_compiled_code(tmp_path):
    """A cold process starts the background compiler, which fills the cache with what
    it used; a process started afterwards running the same program runs compiled code,
    and a process that was running interpreted switches to it at a call once the cache
    holds the engine."""
    code = """
        import sys, time
        import numpy as np
        import tapegrad as tg, tapegrad.numpy as tnp
        from tapegrad import tiers

        x = tg.tensor(np.ones(3), requires_grad=True)
        w = tg.tensor(np.ones((3, 2)), requires_grad=True)
        tnp.sum(tnp.tanh(x @ w) ** 2).backward()  # (the README snippet's ops)
        tnp.sum(tnp.tanh(x) ** 2).backward()
        print(tiers.compiled())
        deadline = time.monotonic() + 600
        while not all(tiers.is_cached(f) for f in tiers.ENGINE):
            assert time.monotonic() < deadline, "the background compiler did not finish"
            time.sleep(1)
        time.sleep(tiers.POLL * 2)
        x.grad = None
        tnp.sum(tnp.tanh(x) ** 2).backward()  # the switch happens at a call
        print(tiers.compiled(), x.grad.tolist())
    """
    env = dict(os.environ, TAPEGRAD_CACHE_DIR=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=900,
    )
    # the compiler goes on with the rest of its queue (the kernels and front ends the
    # process used) and exits once it is done: wait for that, then a new process
    # running the same ops must find everything it needs
    pids = [lock.read_text().strip() for lock in tmp_path.glob("*/compiler.lock")]
    deadline = time.monotonic() + 600
    for pid in (int(p) for p in pids if p.isdigit()):
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(1)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()
    assert first == "False" and second.startswith("True")
    _, err = _run(README_SNIPPET, None, TAPEGRAD_CACHE_DIR=str(tmp_path))
    assert "not compiled on this machine" not in err


def test_interpreted_eig_refuses_complex_eigenvalues_as_compiled_code_does(tmp_path):
    """NumPy's eig returns complex eigenvalues where numba's raises; interpreted, the
    kernel must refuse them too, not store their real parts (a silent wrong number)."""
    code = """
        import numpy as np
        import tapegrad as tg, tapegrad.numpy as tnp

        rot = tg.tensor(np.array([[0.0, -1.0], [1.0, 0.0]]), requires_grad=True)
        try:
            tnp.linalg.eig(rot)
        except np.linalg.LinAlgError as e:
            print("refused:", "complex eigenvalues" in str(e))
        w, v = tnp.linalg.eig(tg.tensor(np.array([[2.0, 1.0], [0.0, 3.0]])))
        print(sorted(w.numpy().tolist()))
    """
    cold, err = _run(code, tmp_path)
    assert cold.split() == ["refused:", "True", "[2.0,", "3.0]"]
    assert _compiles(err) == 0  # (it ran interpreted)


def test_interpreted_matmul_backward_does_not_read_a_fresh_gradient_buffer(tmp_path):
    """A fresh gradient buffer is uninitialised; matmul's backward stores into it with
    beta 0, which BLAS never reads. The interpreted gemm must not read it either (0 *
    NaN): poisoned buffers (NaN) make a read show."""
    code = """
        import numpy as np
        import tapegrad as tg, tapegrad.numpy as tnp

        rng = np.random.default_rng(0)
        for dt in (np.float64, np.float32):
            a = rng.standard_normal((20, 30)).astype(dt)
            b = rng.standard_normal((30, 25)).astype(dt)
            v = rng.standard_normal((20, 25)).astype(dt)
            x, y = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
            tnp.matmul(x, y).backward(gradient=v)
            tol = 1e-12 if dt == np.float64 else 1e-4
            print(np.allclose(x.grad, v @ b.T, rtol=tol, atol=tol),
                  np.allclose(y.grad, a.T @ v, rtol=tol, atol=tol))
    """
    cold, err = _run(code, tmp_path, TAPEGRAD_POISON_GRADIENTS="1")
    assert cold.split() == ["True"] * 4
    assert _compiles(err) == 0


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry.name))
    return out


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_killed_warmup_leaves_no_workers_compiling(tmp_path):
    """SIGTERM to ``python -m tapegrad.warmup`` alone (the workers are other processes)
    must not leave its workers compiling the rest of the table for an hour."""
    env = dict(os.environ, TAPEGRAD_CACHE_DIR=str(tmp_path), TAPEGRAD_BACKGROUND="0")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tapegrad.warmup", "--jobs", "2"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while len(_children(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        workers = _children(proc.pid)
        assert len(workers) >= 2
        time.sleep(5)  # the workers have taken tasks
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        # each watches its parent once a second (mid-compile too, give or take an LLVM
        # pass that holds the GIL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(_alive(w) for w in workers):
            time.sleep(1)
        left = [w for w in workers if _alive(w)]
    finally:
        proc.kill()
    for w in left:
        with contextlib.suppress(OSError):
            os.kill(w, signal.SIGKILL)
    assert not left


def test_a_shim_run_in_a_loop_asks_for_its_kernel_first(tmp_path):
    """A kernel a loop runs interpreted (an ODE right-hand side's, say) goes to the head
    of the background compiler's queue after ``tiers.HOT`` runs, once, after its row's
    backward (the latest asked for goes first)."""
    code = """
        import numpy as np
        import tapegrad as tg, tapegrad.numpy as tnp
        from tapegrad import tiers

        asked = []
        tiers.request = asked.extend  # (the test runs no background compiler)
        x = tg.tensor(np.array([0.5, 0.25]), requires_grad=True)
        for _ in range(tiers.HOT + 5):
            tnp.sin(x)
        print(" ".join(a.replace(" ", "_") for a in asked))
    """
    out, _ = _run(code, tmp_path)
    assert out.split() == ["engine", "kernel_sin_0_0", "hot_sin_0_1", "hot_sin_0_0"]


def test_a_loop_compiles_the_serial_flavour_here_and_queues_its_mates(tmp_path):
    """With a background compiler, the shim that reaches ``tiers.HOT`` runs first
    compiles the serial flavour of its kernel in this process and enters it in the
    table; it queues the kernels its loop mates run, and the backwards of their rows,
    as ``hot``. A kernel is compiled once, by whoever claims it first
    (``tiers.claim``); a claim of a process that has gone is void."""
    code = """
        import numpy as np
        import tapegrad as tg, tapegrad.numpy as tnp
        from tapegrad import dispatch, tiers

        asked = []
        tiers.request = asked.extend  # (no background compiler starts)
        x = tg.tensor(np.array([0.5, 0.25]))
        for _ in range(tiers.HOT + 5):
            y = tnp.cos(tnp.sin(x))
        print(y.numpy().tolist() == np.cos(np.sin([0.5, 0.25])).tolist())
        tab = dispatch.ktable()
        serial = sorted(s.kernel for s in tiers._SHIMS.values()
                        if s.key in tiers._SERIAL_IN_TABLE and tab[s.key] == s.compiled_at)
        print(serial)
        print(" ".join(a.replace(" ", "_") for a in asked))
        print(tiers.claim("serial sin 0 0"), tiers.claim("serial tanh 0 0"))
        print(tiers.serial_cached(*tiers._SHIMS[next(iter(tiers._SERIAL_IN_TABLE))].key))
    """
    out, _ = _run(code, None, TAPEGRAD_CACHE_DIR=str(tmp_path))
    same, serial, asked, claims, cached = out.splitlines()
    assert same == "True"
    assert serial == "['cos 0 0', 'sin 0 0']"
    asked = asked.split()
    assert "hot_cos_0_0" in asked and "hot_sin_0_1" in asked  # when sin got hot
    assert claims == "False True"  # sin's is this process's; tanh's was free
    assert cached == "True"
    (claims_file,) = tmp_path.glob("*/compile-claims")
    code = f"""
        from pathlib import Path
        from tapegrad import tiers
        print(tiers.claim("serial sin 0 0", Path({str(claims_file.parent)!r})))
    """
    out, _ = _run(code, None)
    assert out.strip() == "True"


def test_the_background_compiler_makes_a_hot_kernel_serial_first(tmp_path):
    """A ``hot`` item: the serial flavour (unless claimed), then the full kernel queued
    as an ordinary ``kernel`` item, in its turn."""
    code = """
        from tapegrad import tiers, warmup
        from tapegrad._jit import cache_root
        from tapegrad.ops import BY_NAME

        tiers.disable()
        warmup._compile_item("hot sin 0 0")
        sin = BY_NAME["sin"].code
        print(tiers.serial_cached(sin, 0, 0), tiers.kernel_cached(sin, 0, 0))
        print(list(tiers.queued(cache_root())))
    """
    out, _ = _run(code, None, TAPEGRAD_CACHE_DIR=str(tmp_path), TAPEGRAD_BACKGROUND="0")
    cached, queued = out.splitlines()
    assert cached == "True False"
    assert queued == "['kernel sin 0 0']"


SERIAL_AGAINST_FULL = """
import numpy as np
import tapegrad as tg, tapegrad.numpy as tnp
from tapegrad import dispatch, tiers
from tapegrad.ops import BY_NAME

rng = np.random.default_rng(1)
def run():
    out = []
    for n in (1, 7, 9, 1000, 5000):
        a = tg.tensor(rng.standard_normal(n) * 3, requires_grad=True)
        b = tg.tensor(rng.standard_normal(n), requires_grad=True)
        m = tg.tensor(rng.standard_normal((4, n)), requires_grad=True)
        c = tg.tensor(rng.standard_normal(1), requires_grad=True)
        terms = [tnp.tanh(a) * b, tnp.exp(-tnp.abs(a)) + c, tnp.maximum(a, b) * a,
                 tnp.sum(m * b, axis=0), tnp.sum(m, axis=1).sum() * c, a * c + b]
        loss = sum(tnp.sum(t * t) for t in terms)
        loss.backward()
        out.append([loss.item()] + [t.grad.tolist() for t in (a, b, m, c)])
    return out

rng = np.random.default_rng(1)
full = run()
tab = dispatch.ktable()
for name in ("tanh", "exp", "absolute", "multiply", "add", "maximum", "negative", "sum"):
    op = BY_NAME[name].code
    for d in (0, 1):
        dispatch.ensure(op, 0, d)
        tab[op, 0, d] = tiers.serial_kernel(op, 0, d)
rng = np.random.default_rng(1)
print(run() == full)
"""


def test_the_serial_flavour_gives_the_full_kernels_numbers_on_small_work(tmp_path):
    """The serial flavour is the full kernels' source without their parallel, blocked
    and streamed paths, which small work never takes: bit for bit the same values and
    gradients (unary rows with vector formulas, binary rows with broadcasting and a
    gate, reductions), forward and backward."""
    out, err = _run(SERIAL_AGAINST_FULL, None)
    assert out.strip() == "True", err


def test_upgrade_puts_the_full_kernel_in_place_of_the_serial_one(tmp_path):
    """Once the cache holds a row's full kernel, ``tiers.upgrade`` (called between
    calls) swaps it into the table in place of the serial flavour."""
    code = """
        import numpy as np
        import tapegrad as tg, tapegrad.numpy as tnp
        from tapegrad import dispatch, tiers
        from tapegrad.ops import BY_NAME

        key = (BY_NAME["sin"].code, 0, 0)
        dispatch.ensure(*key)
        tab = dispatch.ktable()
        full = int(tab[key])
        tab[key] = serial = tiers.serial_kernel(*key)
        tiers._SERIAL_IN_TABLE.add(key)
        x = tg.tensor(np.array([0.5, 0.25]), requires_grad=True)
        y = tnp.sin(x)
        print(serial != full, y.numpy().tolist() == np.sin([0.5, 0.25]).tolist())
        tnp.sum(y).backward()  # (a backward calls upgrade)
        print(int(tab[key]) not in (0, serial), key in tiers._SERIAL_IN_TABLE)
    """
    out, _ = _run(code, None)
    assert out.splitlines() == ["True True", "True False"]


ODE_FIT = """
import numpy as np
import tapegrad as tg, tapegrad.numpy as tnp
from tapegrad.integrate import odeint

def lv(z, t, th):
    x, y = z[0], z[1]
    return tnp.stack([th[0] * x - th[1] * x * y, th[3] * x * y - th[2] * y])

th = tg.tensor(np.array([1.0, 0.1, 1.5, 0.075]), requires_grad=True)
out = []
for adjoint in (False, True):
    th.grad = None
    z = odeint(lv, np.array([10.0, 5.0]), np.linspace(0.0, 4.0, 9), th, rtol=1e-7,
               adjoint=adjoint)
    tnp.sum(tnp.log(z) ** 2).backward()
    out.append([z.numpy().tolist(), th.grad.tolist()])
print(repr(out))
"""


def test_a_cold_ode_solve_runs_its_loops_from_python_with_the_same_numbers(tmp_path):
    """On a cold cache the ODE solvers' compiled loops are left to the background
    compiler (``ode float64``); Python drives the same source meanwhile, step for step:
    the same solution and gradients, bit for bit, in both gradient modes."""
    cold, _ = _run(ODE_FIT, tmp_path)
    warm, _ = _run(ODE_FIT, None)
    assert cold == warm
    assert not list(tmp_path.glob("*/odesolve.forward*")), "the loop compiled in-process"


def test_front_ends_missing_from_the_cache_run_interpreted_beside_the_compiled_engine(
    tmp_path,
):
    """A cache holding the engine but not the front ends (``record_reduce`` and the
    others, compiled on their first use): the process runs the compiled engine, the
    front ends interpreted and the kernels through shims, compiles nothing, and gives
    the warm numbers."""
    engine_only = """
        from tapegrad import tiers
        from tapegrad.tape import current_tape
        tiers.disable()
        tiers.compile_engine(current_tape().header)
    """
    _run(engine_only, None, TAPEGRAD_CACHE_DIR=str(tmp_path))
    code = FAMILIES + "\nfrom tapegrad import tiers\nprint(tiers.compiled())\n"
    cold, err = _run(code, tmp_path)
    warm, _ = _run(FAMILIES, None)
    cold, compiled = cold.splitlines()
    assert compiled == "True"
    cold, warm = json.loads(cold), json.loads(warm)
    assert float(cold[0]) == pytest.approx(float(warm[0]), rel=1e-13)
    for (dtype, c), (_, w) in zip(cold[1:], warm[1:]):
        tol = 1e-13 if dtype == "float64" else 4 * np.finfo(np.float32).eps
        np.testing.assert_allclose(c, w, rtol=tol, atol=tol)
    assert _compiles(err) == 0, err


def test_a_warm_process_runs_nothing_interpreted():
    """On the warm cache every engine function and front end is found in the cache for
    the types it is called with (``tiers.current`` reads numba's index): nothing falls
    back to the interpreted copy, which is never even imported, and nothing is queued
    for a background compiler (a captured program, an ODE solve included)."""
    code = (
        """
import sys
from tapegrad import tiers
asked = []
tiers.request = asked.extend
"""
        + FAMILIES
        + """
from tapegrad.integrate import odeint
x = tg.tensor(np.ones(4), requires_grad=True)
tnp.sum(tnp.cumsum(x) * tnp.linalg.norm(x)).backward(retain_graph=True)
step = tg.compile(lambda p, u: tnp.sum(tnp.tanh(p * u) ** 2))
for _ in range(3):
    step.value_and_grad(np.ones(3), np.arange(3.0))
k = tg.tensor(np.array([0.5, 1.0]), requires_grad=True)
tnp.sum(odeint(lambda y, t, k: -k * y, np.ones(2), [0.0, 1.0], k)).backward()
print(tiers.compiled(), "tapegrad._interpreted" in sys.modules, "tapegrad._serial" in sys.modules)
print(asked)
"""
    )
    out, err = _run(code, None)
    assert out.splitlines()[-2:] == ["True False False", "[]"], err


def test_threads_looking_up_a_front_end_together_all_get_the_compiled_one():
    """On the warm cache, threads making their first matmul at the same moment all run
    the compiled front ends: the first look-up into the cache holds the others until it
    has its answer (a look under way once read as a miss, and handed out the
    interpreted twin)."""
    code = """
        import sys, threading
        import numpy as np
        import tapegrad as tg, tapegrad.numpy as tnp
        from tapegrad import tiers

        handed = []
        twin = tiers.interpreted_twin
        tiers.interpreted_twin = lambda fn: handed.append(fn) or twin(fn)
        barrier = threading.Barrier(6)

        def work():
            barrier.wait()
            w = tg.tensor(np.ones((6, 4)), requires_grad=True)
            tnp.sum(np.ones((5, 6)) @ w @ w.T).backward()

        threads = [threading.Thread(target=work) for _ in range(6)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        print(len(handed), "tapegrad._interpreted" in sys.modules)
    """
    for _ in range(3):
        out, err = _run(code, None)
        assert out.strip() == "0 False", err


def test_a_background_compiler_that_exited_is_started_again(tmp_path):
    """The background compiler exits once its queue has been empty for two seconds; a
    later request of the same process starts another (not within ``tiers.RESTART``
    seconds of the last start), and says so on stderr once."""
    code = """
        import subprocess
        from tapegrad import tiers

        started = []
        subprocess.Popen = lambda *a, **k: started.append(a)
        tiers.compiler_running = lambda root: False
        tiers.request(["kernel sin 0 0"])
        tiers.request(["kernel cos 0 0"])  # (within RESTART: one start)
        print(len(started))
        tiers._started[-1] -= tiers.RESTART + 1
        tiers.request(["kernel tan 0 0"])
        print(len(started))
    """
    out, err = _run(code, None, TAPEGRAD_CACHE_DIR=str(tmp_path))
    assert out.split() == ["1", "2"]
    assert err.count("not compiled on this machine") == 1


@pytest.mark.slow
def test_a_cold_float32_ode_solve_gives_the_warm_numbers(tmp_path):
    """A float32 solve is not driven from Python on a cold cache (NumPy keeps
    ``float32 * 0.2`` in float32 where numba promotes: driven steps would round
    differently); its loop compiles in the process, and the numbers are the warm ones,
    bit for bit."""
    code = ODE_FIT.replace(
        "np.array([1.0, 0.1, 1.5, 0.075])", "np.array([1.0, 0.1, 1.5, 0.075], np.float32)"
    )
    code = code.replace("np.array([10.0, 5.0])", "np.array([10.0, 5.0], np.float32)")
    cold, _ = _run(code, tmp_path, timeout=900)
    warm, _ = _run(code, None)
    assert cold == warm


def test_on_large_work_the_serial_flavour_gives_the_full_kernels_one_thread_numbers():
    """Before ``upgrade()`` a serial kernel may get work past ``PARALLEL_MIN``: it takes
    the full kernel's serial paths, so its numbers are the full kernel's on one thread
    (a sum over a broadcast operand in order; on several cores the full kernel adds
    per-core partial sums)."""
    code = """
        import numba
        import numpy as np
        import tapegrad as tg, tapegrad.numpy as tnp
        from tapegrad import dispatch, tiers
        from tapegrad.ops import BY_NAME

        xl = np.random.default_rng(0).standard_normal(300_000)

        def grads():
            s = tg.tensor(np.array(0.7), requires_grad=True)
            x = tg.tensor(xl, requires_grad=True)
            tnp.sum(tnp.exp(x * s) * s).backward()
            return [float(s.grad)] + x.grad[:: 997].tolist()

        numba.set_num_threads(1)
        one_thread = grads()
        tab = dispatch.ktable()
        for name in ("multiply", "exp", "sum"):
            for d in (0, 1):
                key = (BY_NAME[name].code, 0, d)
                dispatch.ensure(*key)
                tab[key] = tiers.serial_kernel(*key)
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        print(grads() == one_thread)
    """
    out, err = _run(code, None)
    assert out.strip() == "True", err
