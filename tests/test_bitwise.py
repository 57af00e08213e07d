"""``~ & | ^`` on tensors: NumPy's values for bool and integer tensors (masks), as
constant tensors; float operands refused; masks made with them steer gradients
correctly, eagerly and in compiled replays whose masks change."""

from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp

from .helpers import central

OPS = {
    "~": (lambda a: ~a, np.invert),
    "&": (lambda a, b: a & b, np.bitwise_and),
    "|": (lambda a, b: a | b, np.bitwise_or),
    "^": (lambda a, b: a ^ b, np.bitwise_xor),
}
MASK = np.array([True, False, True, False])
OTHER = np.array([True, True, False, False])
INTS = np.array([0, 3, -4, 7])


@pytest.mark.parametrize("symbol", list(OPS))
@pytest.mark.parametrize("values", [(MASK, OTHER), (INTS, INTS[::-1].copy())], ids=["bool", "int"])
def test_values_match_numpy(symbol, values):
    op, ufunc = OPS[symbol]
    a, b = values
    args = (a,) if symbol == "~" else (a, b)
    want = ufunc(*args)
    tensors = [tg.tensor(v) for v in args]
    spellings = [op(*tensors), ufunc(*tensors)]
    if symbol != "~":  # a tensor on either side, NumPy arrays and Python scalars
        spellings += [op(tensors[0], b), op(a, tensors[1]), op(True, tensors[1])]
        want_scalar = ufunc(True, b)
        np.testing.assert_array_equal(spellings.pop().numpy(), want_scalar)
    for got in spellings:
        assert isinstance(got, tg.Tensor) and not got.requires_grad
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("symbol", list(OPS))
def test_float_operands_are_refused(symbol):
    op, ufunc = OPS[symbol]
    x = tg.tensor(np.ones(4), requires_grad=True)
    m = tg.tensor(MASK)
    calls = [lambda: op(x)] if symbol == "~" else [lambda: op(m, x), lambda: op(x, m)]
    calls += [lambda: ufunc(x)] if symbol == "~" else [lambda: ufunc(np.ones(4), m)]
    for call in calls:
        with pytest.raises(TypeError, match=rf"\{symbol} on tensors .*float64"):
            call()
    np.testing.assert_array_equal(x.numpy(), np.ones(4))  # nothing changed
    (tnp.sum(x * 2.0)).backward()
    np.testing.assert_array_equal(x.grad, np.full(4, 2.0))


def _masked(x):
    m = (x > 0) & ~(x > 1.5)  # in (0, 1.5]
    return tnp.sum(tnp.where(m, x**3, 0.5 * x)) + tnp.sum(x[~m] ** 2)


def _masked_numpy(x):
    m = (x > 0) & ~(x > 1.5)
    return np.sum(np.where(m, x**3, 0.5 * x)) + np.sum(x[~m] ** 2)


def test_gradient_through_masks_matches_central_differences():
    x = np.array([-1.0, 0.3, 1.2, 2.0, 0.7, -0.2])
    g = tg.grad(_masked)(x)
    np.testing.assert_allclose(g, central(_masked_numpy, x), rtol=1e-7)
    xf = x.astype(np.float32)
    assert tg.grad(_masked)(xf).dtype == np.float32


def test_compiled_masks_follow_the_values_of_each_call():
    step = tg.compile(_masked)
    rng = np.random.default_rng(0)
    for _ in range(6):  # masks differ from call to call
        x = rng.uniform(-1, 2.5, 7)
        value, g = step.value_and_grad(x)
        assert value == pytest.approx(_masked_numpy(x), rel=1e-12)
        np.testing.assert_allclose(g, tg.grad(_masked)(x), rtol=1e-12)


@pytest.mark.parametrize("symbol", ["&", "|", "^"])
def test_augmented_assignment_is_in_place(symbol):
    """m &= other changes m itself, as NumPy's and as += on tensors: another name of the
    tensor and a view of it see the change (it rebound the name only)."""
    ufunc = OPS[symbol][1]
    other = np.array([True, False, True, False])
    m = tg.tensor(MASK.copy())
    alias, view = m, m[:2]
    want = ufunc(MASK, other)
    if symbol == "&":
        m &= other
    elif symbol == "|":
        m |= other
    else:
        m ^= other
    assert m is alias
    np.testing.assert_array_equal(alias.numpy(), want)
    np.testing.assert_array_equal(view.numpy(), want[:2])


def test_refused_in_place_operand_changes_nothing():
    """A float operand of &= (or a shape that does not fit +=) raises before anything
    changes: the tensor's values and the versions a graph saved are as they were."""
    ints = tg.tensor(INTS.copy())
    with pytest.raises(TypeError, match=r"\^ on tensors"):
        ints ^= 1.5
    np.testing.assert_array_equal(ints.numpy(), INTS)
    x = tg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = x * 2.0
    z = tnp.sum(y * y)  # saves y
    with pytest.raises(ValueError):
        y += np.ones(3)
    np.testing.assert_array_equal(y.numpy(), [2.0, 4.0])
    z.backward()  # y was not modified: no version error
    np.testing.assert_array_equal(x.grad, [8.0, 16.0])


@pytest.mark.parametrize(
    "write",
    [
        lambda y: y.__setitem__(slice(1, None), np.ones(5)),  # shape
        lambda y: y.__setitem__(5, 1.0),  # index out of bounds
        lambda y: y.__setitem__(0, "a"),  # a value tapegrad cannot hold
        lambda y: np.add.at(y, [0, 7], 1.0),  # np.add.at's index
        lambda y: np.subtract.at(y, [0, 1], np.ones(3)),  # and its value's shape
    ],
)
def test_refused_item_write_changes_nothing(write):
    """x[key] = v and np.add.at refused for the index or the value leave the tensor,
    its version and a graph that saved it as they were (the version went up before the
    checks, and a later backward raised 'modified by an in-place operation'), however
    often refused; a write that succeeds still invalidates that graph."""
    x = tg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    y = x * 2.0
    z = tnp.sum(y * y)  # saves y
    for _ in range(3):
        with pytest.raises((IndexError, ValueError, TypeError)):
            write(y)
    assert y._version == 0
    np.testing.assert_array_equal(y.numpy(), [2.0, 4.0, 6.0])
    z.backward()
    np.testing.assert_array_equal(x.grad, [8.0, 16.0, 24.0])
    w = y * y  # saves y again
    y[0] = 1.0
    with pytest.raises(RuntimeError, match="modified by an in-place"):
        tnp.sum(w).backward()
