"""The README's Python snippets, run as written (each with the few names it assumes
defined first), and the outputs its comments promise. The "Scientific models" snippet
is run in tests/test_integrate.py; the MPI and CUDA ones need their extras and run in
tests/test_distributed.py and tests/gpu."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def snippet(after: str) -> str:
    """The first ```python block after the heading ``after``."""
    start = README.index(after)
    m = re.compile(r"```python\n(.*?)```", re.S).search(README, start)
    assert m is not None, after
    return m.group(1)


def run(code: str, **names) -> dict:
    env = {"np": np, "tg": tg, "tnp": tnp, **names}
    exec(compile(code, "README.md", "exec"), env)
    return env


def test_using_it():
    env = run(snippet("## Using it"))
    x, grad = env["x"], env["x"].grad
    assert type(grad) is np.ndarray and grad.shape == (3,) and grad.dtype == np.float64
    t = np.tanh(3.0)
    np.testing.assert_allclose(grad, np.full(3, 4 * t * (1 - t * t)), rtol=1e-14)
    assert x.grad is grad


def test_compiled_training_step():
    rng = np.random.default_rng(0)
    x_batch, y_batch = rng.standard_normal((8, 3)), rng.standard_normal(8)

    def loss_fn(w, x, y):
        return tnp.mean((x @ w - y) ** 2)

    w = np.zeros(3)
    env = run(
        snippet("## Compiled training steps"),
        loss_fn=loss_fn,
        w=w,
        x_batch=x_batch,
        y_batch=y_batch,
    )
    assert env["step"].stats["captures"] == 1 and env["step"].stats["replays"] == 1000
    want = np.linalg.lstsq(x_batch, y_batch, rcond=None)[0]  # 1000 steps of descent
    np.testing.assert_allclose(w, want, rtol=1e-6, atol=1e-8)


def test_custom_function():
    x = tg.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
    env = run(snippet("## Custom functions and hooks"), x=x)
    tnp.sum(env["y"] * np.array([1.0, 2.0, 3.0])).backward()
    np.testing.assert_allclose(env["y"].numpy(), x.numpy() ** 3)
    np.testing.assert_allclose(x.grad, 3 * x.numpy() ** 2 * [1.0, 2.0, 3.0])


def test_higher_order_and_forward_mode():
    code = snippet("## Higher-order and forward mode")
    assert "tg.grad(tg.grad(lambda s: s**4))(1.5)  # 27.0" in code
    v = np.array([1.0, -0.5, 0.25])

    def g(x):
        return tnp.sin(x) * x**2

    def loss(w):
        return tnp.sum(tnp.tanh(w) ** 4)

    def block(y, params):
        return tnp.tanh(y * params)

    import tapegrad

    y0 = tg.tensor(np.array([0.1, 0.2, 0.3]), requires_grad=True)
    params = tg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    env = run(
        code,
        v=v,
        g=g,
        loss=loss,
        w=np.array([0.2, -0.4, 0.9]),
        block=block,
        y=y0,
        params=params,
        tapegrad=tapegrad,
    )
    f, x0 = env["f"], env["x0"]
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
    tnp.sum(env["y"]).backward()
    s = 1 - np.tanh(y0.numpy() * params.numpy()) ** 2
    np.testing.assert_allclose(y0.grad, s * params.numpy(), rtol=1e-14)
    np.testing.assert_allclose(params.grad, s * y0.numpy(), rtol=1e-14)


def test_looking_at_the_graph(tmp_path, monkeypatch):
    code = snippet("## Looking at the graph")
    promised = [line[2:] for line in code.splitlines() if line.startswith("# #")]
    assert len(promised) == 4
    monkeypatch.chdir(tmp_path)

    def f(x):
        return tnp.sum(tnp.sin(x) * x**3)

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        env = run(code, f=f, args=(np.array([0.3, 1.2, 2.0]),))
    printed = out.getvalue().splitlines()
    assert printed[:4] == promised  # print_graph's lines, as the comments show them
    assert any("sin" in line for line in printed[4:])  # the compiled program's listing
    node = env["node"]
    assert node.name == "power"
    np.testing.assert_allclose(env["gx"], 2 * env["x_"], rtol=1e-15)
    assert env["gy"] is None  # the exponent is a constant
    assert (tmp_path / "loss.dot").read_text().startswith("digraph")


@pytest.mark.parametrize("heading", ["## Many machines (MPI)", "## GPU (CUDA)"])
def test_other_snippets_parse(heading):
    compile(snippet(heading), "README.md", "exec")
