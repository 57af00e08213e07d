"""Engine properties: NUMBA_DISABLE_JIT, the backward pass staying in compiled code,
array ops larger than the request buffer and the tables, cached shape plans, and
``general`` taking NumPy scalars."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.layout import H_STAT_CALLBACKS, H_STAT_NODES
from tapegrad.tape import current_tape

from .helpers import run_python


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
    assert run_python(code, NUMBA_DISABLE_JIT="1").strip() == "ok"


def test_backward_runs_in_compiled_code():
    x = tg.tensor(np.ones(4), requires_grad=True)
    y = x
    for _ in range(50):
        y = tnp.tanh(y) * 1.5 + x
    y.sum().backward()
    h = current_tape().h
    assert h[H_STAT_NODES] == 151  # every node ran inside the compiled loop
    assert h[H_STAT_CALLBACKS] == 0  # with no return to Python


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
    from tapegrad.ops.shape.rows import TRANSPOSE

    general = importlib.import_module("tapegrad.recording").general
    a = np.arange(12.0).reshape(3, 4)
    x = tg.tensor(a, requires_grad=True)
    y = general(TRANSPOSE, F64, [x], [(F64, (np.int64(4), 3))], [np.True_, np.False_])
    np.testing.assert_array_equal(y.numpy(), a.T)
    tnp.sum(y * a.T).backward()
    np.testing.assert_array_equal(x.grad, a)
