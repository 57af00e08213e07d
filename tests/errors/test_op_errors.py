"""Bad input raises a clear error naming the op, shapes and dtypes, and changes nothing:
neither existing gradients nor the tape."""

from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.layout import H_NLINK, H_NNODES, H_NSHAPE, H_NSLOTS
from tapegrad.tape import current_tape


def _tape_counts():
    h = current_tape().h
    return (h[H_NNODES], h[H_NSLOTS], h[H_NLINK], h[H_NSHAPE])


@pytest.fixture
def x():
    x = tg.tensor(np.ones((2, 3)), requires_grad=True)
    (x * 2).sum().backward()  # an existing gradient that errors must not touch
    return x


def _unchanged(x, before):
    np.testing.assert_array_equal(x.grad, np.full((2, 3), 2.0))
    assert _tape_counts() == before


def test_broadcast_error_names_op_and_shapes(x):
    y = x * 1.0
    before = _tape_counts()
    with pytest.raises(ValueError, match=r"add: .*broadcast.*\(2, 3\) and \(4,\)"):
        y + np.ones(4)
    with pytest.raises(ValueError, match=r"multiply: .*\(2, 3\) and \(3, 2\)"):
        y * tg.tensor(np.ones((3, 2)))
    _unchanged(x, before)


def test_matmul_shape_errors(x):
    before = _tape_counts()
    with pytest.raises(ValueError, match=r"matmul: shapes \(2, 3\) and \(2, 3\) are not aligned"):
        x @ x
    with pytest.raises(ValueError, match="at least one dimension"):
        tnp.matmul(x, tg.tensor(2.0))
    with pytest.raises(ValueError, match=r"matmul: batch dimensions.*\(2, 2, 3\).*\(3, 3, 1\)"):
        tnp.matmul(tg.tensor(np.ones((2, 2, 3))), tg.tensor(np.ones((3, 3, 1))))
    _unchanged(x, before)


def test_reshape_transpose_index_errors(x):
    y = x * 1.0
    before = _tape_counts()
    with pytest.raises(ValueError, match=r"reshape: cannot reshape array of size 6"):
        y.reshape(4)
    with pytest.raises(ValueError, match="one unknown dimension"):
        y.reshape(-1, -1)
    with pytest.raises(ValueError, match=r"transpose: axes \(0, 0\) don't match.*\(2, 3\)"):
        y.transpose(0, 0)
    with pytest.raises(IndexError, match=r"getitem: .*out of bounds.*\(2, 3\)"):
        y[5]
    with pytest.raises(np.exceptions.AxisError, match="sum: axis 2 is out of bounds"):
        y.sum(axis=2)
    with pytest.raises(ValueError, match="duplicate"):
        y.sum(axis=(0, 0))
    _unchanged(x, before)


def test_non_scalar_backward_needs_gradient(x):
    y = x * 3
    before = _tape_counts()
    with pytest.raises(RuntimeError, match=r"only for scalar outputs.*\(2, 3\)"):
        y.backward()
    with pytest.raises(RuntimeError, match=r"gradient has shape \(3,\).*shape \(2, 3\)"):
        y.backward(gradient=np.ones(3))
    _unchanged(x, before)


def test_second_backward_through_freed_graph(x):
    y = (tnp.exp(x) * 3).sum()
    y.backward()
    g = x.grad.copy()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()
    np.testing.assert_array_equal(x.grad, g)
    # the same after the tape was rewound and `y` copied out
    _ = x * 1.0
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()
    np.testing.assert_array_equal(x.grad, g)


def test_freed_intermediate_reused_in_a_new_graph(x):
    h = x * 2
    h.sum().backward()
    _ = x * 1.0  # rewinds: h is copied out, its graph is gone
    g = x.grad.copy()
    z = (h * h).sum()
    with pytest.raises(RuntimeError, match="second time"):
        z.backward()
    np.testing.assert_array_equal(x.grad, g)


def test_backward_without_grad(x):
    c = tg.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="does not require grad"):
        (c * 2).sum().backward()
    with pytest.raises(RuntimeError, match="does not require grad"):
        c.backward(gradient=np.ones(2))


def test_unsupported_dtypes():
    with pytest.raises(TypeError, match="complex128"):
        tg.tensor([1j])
    x = tg.tensor([1.0, 2.0])
    with pytest.raises(TypeError, match="complex128"):
        x + np.array([1j, 2j])


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_floor_divide_shape_error_names_it_and_records_nothing(dtype):
    """floor_divide is composed of casts, remainder and divisions: the shapes are
    checked before any of them records (a float32 tensor's cast was left behind, and
    the error named remainder)."""
    y = tg.tensor(np.ones((3, 4), dtype), requires_grad=dtype != np.int64) * 1
    before = _tape_counts()
    for bad in (np.ones((3, 5)), tg.tensor(np.ones(5, np.float32))):
        with pytest.raises(ValueError, match=r"floor_divide: .*\(3, 4\) and \((3, )?5,?\)"):
            y // bad
        assert _tape_counts() == before


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix itself
def test_array_subclasses_that_change_meaning_are_refused():
    """np.matrix (``*`` is a matrix product) and masked arrays (the mask) would be read
    as plain arrays, elementwise and unmasked: a clear error instead, as an operand and
    as a tensor's data. Other subclasses (memmap) are arrays."""
    y = tg.tensor(np.ones((3, 4)), requires_grad=True) * 1.0
    before = _tape_counts()
    m = np.matrix(np.arange(12.0).reshape(3, 4))
    masked = np.ma.masked_array(np.ones((3, 4)), mask=np.eye(3, 4, dtype=bool))
    for bad, what in ((m, r"np\.matrix"), (masked, "masked arrays")):
        for attempt in (lambda b: y * b, lambda b: y + b, tg.tensor):
            with pytest.raises(TypeError, match=what):
                attempt(bad)
    with pytest.raises(TypeError, match=r"np\.matrix"):
        m * y  # NumPy's matrix defers to the tensor's __rmul__
    assert _tape_counts() == before


def test_memmap_operands_are_arrays(tmp_path):
    mm = np.memmap(tmp_path / "a.dat", dtype=np.float64, mode="w+", shape=(3,))
    mm[:] = [1.0, 2.0, 3.0]
    g = tg.grad(lambda t: tnp.sum(t * mm))(np.ones(3))
    np.testing.assert_array_equal(g, [1.0, 2.0, 3.0])
