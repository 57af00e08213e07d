"""What the snippets of README.md and the user guide (docs/guide/) compute, beyond the
outputs they print (tests/test_doc_pages.py runs every page and checks those).

Each test runs its page's ```python blocks top to bottom in one fresh namespace (what a
block prints must equal the ```text block that follows it) and then checks the numbers
in that namespace. A block after a ``<!-- compile-only: ... -->`` line is only compiled
there; here the MPI page's script also runs under ``mpiexec``, and the GPU page's in
numba's CUDA simulator, when their extras are installed. The ``odeint`` snippet of
docs/guide/scientific.md is checked against central differences in
tests/test_integrate.py."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "guide"
BLOCK = re.compile(
    r"(?P<only><!-- compile-only: [^>]*-->\n)?```python\n(?P<code>.*?)```\n"
    r"(?:\n```text\n(?P<shown>.*?)```\n)?",
    re.S,
)


@dataclass
class Block:
    code: str
    compile_only: bool
    shown: str | None  # the output the page shows after the block


def blocks(page: Path) -> list[Block]:
    return [
        Block(m["code"], m["only"] is not None, m["shown"])
        for m in BLOCK.finditer(page.read_text())
    ]


def run_page(page: Path) -> dict:
    """Run the page's blocks in order in one fresh namespace; check what each prints."""
    name = page.relative_to(ROOT).as_posix()
    env: dict = {"__name__": "__doc_page__"}
    for i, block in enumerate(blocks(page)):
        # (a file name that is no file: numba must not cache kernels defined here)
        code = compile(block.code, f"<{name} block {i + 1}>", "exec")
        if block.compile_only:
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(code, env)
        if block.shown is not None:
            assert out.getvalue() == block.shown, f"{name}, block {i + 1}"
    return env


def test_readme_example():
    env = run_page(ROOT / "README.md")
    x, grad = env["x"], env["x"].grad
    assert type(grad) is np.ndarray and grad.shape == (3,) and grad.dtype == np.float64
    t = np.tanh(3.0)
    np.testing.assert_allclose(grad, np.full(3, 4 * t * (1 - t * t)), rtol=1e-14)
    assert x.grad is grad


def test_readme_example_is_the_tensors_pages_first():
    assert blocks(ROOT / "README.md")[0] == blocks(GUIDE / "tensors.md")[0]


def test_compiled_training_step():
    env = run_page(GUIDE / "compile.md")
    assert env["step"].stats["captures"] == 1 and env["step"].stats["replays"] == 1000
    x_batch, y_batch = env["x_batch"], env["y_batch"]
    want = np.linalg.lstsq(x_batch, y_batch, rcond=None)[0]  # 1000 steps of descent
    np.testing.assert_allclose(env["w"], want, rtol=1e-6, atol=1e-8)


def test_custom_function():
    env = run_page(GUIDE / "extending.md")
    x = env["x"]
    np.testing.assert_allclose(env["y"].numpy(), x.numpy() ** 3)
    np.testing.assert_allclose(x.grad, 3 * x.numpy() ** 2 * [1.0, 2.0, 3.0])
    # the compiled kernel's gradients: out = 2 a b
    np.testing.assert_array_equal(env["a"].grad, 2 * env["b"].numpy())
    np.testing.assert_array_equal(env["b"].grad, 2 * env["a"].numpy())
    assert env["z"].grad.tolist() == [180.0, 360.0]  # the hook's replacement, 10 x


def test_higher_order_and_forward_mode():
    code = blocks(GUIDE / "higher_order.md")[1].code
    assert "tg.grad(tg.grad(lambda s: s**4))(1.5)  # 27.0" in code
    env = run_page(GUIDE / "higher_order.md")
    f, x0, v, g = env["f"], env["x0"], env["v"], env["g"]
    assert tg.grad(tg.grad(lambda s: s**4))(1.5) == 27.0
    h = tg.hessian(f)(x0)
    assert h.shape == (3, 3)
    np.testing.assert_allclose(tg.hvp(f, x0, v), h @ v, rtol=1e-12)
    np.testing.assert_allclose(env["t"], tg.grad(f)(x0) @ v, rtol=1e-12)
    np.testing.assert_allclose(tg.jacfwd(g)(x0), tg.jacrev(g)(x0), rtol=1e-14)
    # x.grad: the gradient of f, plus (accumulated) the gradient of |grad f|^2
    want = tg.grad(f)(x0) + tg.grad(lambda x: tnp.sum(tg.grad(f)(x) ** 2))(x0)
    np.testing.assert_allclose(env["x"].grad, want, rtol=1e-12)
    # the checkpointed block: its output and, on a backward, the gradients of its inputs
    y0, params = env["y0"], env["params"]
    tnp.sum(env["y"]).backward()
    s = 1 - np.tanh(y0.numpy() * params.numpy()) ** 2
    np.testing.assert_allclose(y0.grad, s * params.numpy(), rtol=1e-14)
    np.testing.assert_allclose(params.grad, s * y0.numpy(), rtol=1e-14)


def test_looking_at_the_graph(tmp_path, monkeypatch):
    page = blocks(GUIDE / "graph.md")
    assert len(page[0].shown.splitlines()) == 4  # print_graph's lines, as the page shows
    assert any("sin" in line for line in page[2].shown.splitlines())  # a program's listing
    monkeypatch.chdir(tmp_path)
    env = run_page(GUIDE / "graph.md")
    node = env["node"]
    assert node.name == "power"
    np.testing.assert_allclose(env["gx"], 2 * env["x_"], rtol=1e-15)
    assert env["gy"] is None  # the exponent is a constant
    assert (tmp_path / "loss.dot").read_text().startswith("digraph")


@pytest.mark.parametrize("page", ["distributed.md", "gpu.md"])
def test_compile_only_snippets_compile(page):
    found = [b for b in blocks(GUIDE / page) if b.compile_only]
    assert found
    for b in found:
        compile(b.code, page, "exec")


def _mpiexec() -> str | None:
    beside = Path(sys.executable).parent / "mpiexec"  # the mpich wheel puts it here
    return str(beside) if beside.exists() else shutil.which("mpiexec")


@pytest.mark.skipif(
    importlib.util.find_spec("mpi4py") is None or _mpiexec() is None,
    reason="needs mpi4py and mpiexec (pip install -e '.[mpi]')",
)
def test_the_mpi_script_runs_under_mpiexec(tmp_path):
    (block,) = blocks(GUIDE / "distributed.md")
    script = tmp_path / "fit.py"
    script.write_text(block.code)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run(
        [_mpiexec(), "-n", "2", sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == block.shown


@pytest.mark.skipif(
    importlib.util.find_spec("numba_cuda") is None,
    reason="needs numba-cuda (pip install -e '.[cuda]')",
)
def test_the_gpu_snippet_runs_in_the_simulator(tmp_path):
    (block,) = blocks(GUIDE / "gpu.md")
    script = tmp_path / "gpu.py"
    script.write_text(block.code)
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == block.shown
