"""Consistent types and clear errors at the edges: .grad assignment, dtypes tapegrad
does not hold, empty reductions, pickling and copying, what hooks and custom functions
return, and NumPy keywords tapegrad does not take."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import scipy.special

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.special as tsp

from ..custom_ops import doubling


def test_assigning_a_wrong_grad_raises_at_the_assignment():
    x = tg.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(RuntimeError, match=r"\.grad has shape \(4,\).*shape \(3,\)"):
        x.grad = np.ones(4)
    with pytest.raises(RuntimeError, match="dtype float32"):
        x.grad = np.ones(3, np.float32)
    with pytest.raises(TypeError, match="NumPy array or None"):
        x.grad = [1.0, 2.0, 3.0]
    assert x.grad is None  # unchanged by the failed assignments
    x.grad = np.full(3, 2.0)
    tnp.sum(x * x).backward()  # accumulates into what was assigned
    np.testing.assert_array_equal(x.grad, [4.0, 4.0, 4.0])
    x.grad = None
    assert x.grad is None


def test_float16_is_refused_and_large_uint64_is_not_wrapped():
    with pytest.raises(TypeError, match="not float16"):
        tg.tensor(np.ones(2, np.float16), requires_grad=True)
    with pytest.raises(TypeError, match="not float16"):
        tg.tensor(np.ones(2)) * np.ones(2, np.float16)
    with pytest.raises(OverflowError, match="uint64 value 9223372036854775813"):
        tg.tensor(np.array([2**63 + 5], np.uint64))
    small = tg.tensor(np.array([1, 2], np.uint64))  # values that fit are held as int64
    assert small.dtype == np.int64 and small.numpy().tolist() == [1, 2]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mean_of_nothing_is_nan_and_logsumexp_is_minus_inf(dtype):
    x = tg.tensor(np.ones(0, dtype), requires_grad=True)
    m = tnp.mean(x)
    assert np.isnan(m.item()) and m.dtype == dtype
    m.backward()
    assert x.grad.shape == (0,) and x.grad.dtype == dtype
    assert (
        tnp.mean(tg.tensor(np.ones((3, 0), dtype)), axis=1).numpy().tolist()
        == [pytest.approx(np.nan, nan_ok=True)] * 3
    )
    lse = tsp.logsumexp(tg.tensor(np.ones(0, dtype), requires_grad=True))
    assert lse.item() == -np.inf and lse.dtype == dtype
    rows = tsp.logsumexp(tg.tensor(np.ones((2, 0), dtype)), axis=1)
    assert rows.numpy().tolist() == [-np.inf, -np.inf]
    assert scipy.special.logsumexp(np.ones(0)) == -np.inf  # the oracle agrees


def test_pickle_keeps_values_and_requires_grad_not_the_graph():
    w = tg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = w * 3.0  # used in an op, not a leaf
    for t in (w, y):
        back = pickle.loads(pickle.dumps(t))
        np.testing.assert_array_equal(back.numpy(), t.numpy())
        assert back.requires_grad and back.is_leaf  # as torch.load gives it back
    i = pickle.loads(pickle.dumps(tg.tensor(np.arange(3))))
    assert i.dtype == np.int64 and not i.requires_grad
    f32 = pickle.loads(pickle.dumps(tg.tensor(np.ones(2, np.float32), requires_grad=True)))
    assert f32.dtype == np.float32
    tnp.sum(y).backward()  # the original graph is unaffected
    np.testing.assert_array_equal(w.grad, [3.0, 3.0])


def test_deepcopy_of_a_leaf_copies_and_of_a_non_leaf_raises():
    w = tg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    tnp.sum(w * w).backward()
    state = {"w": w, "again": w}
    c = copy.deepcopy(state)
    assert c["w"] is c["again"] and c["w"] is not w  # the memo keeps ties
    np.testing.assert_array_equal(c["w"].numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(c["w"].grad, w.grad)
    assert c["w"].grad is not w.grad and c["w"].requires_grad
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(w * 2.0)
    plain = copy.deepcopy(tg.tensor(np.ones(2)) * 2.0)  # no grad: values
    np.testing.assert_array_equal(plain.numpy(), [2.0, 2.0])


def test_shallow_copy_of_a_result_survives_the_rewind():
    w = tg.tensor(np.ones(3), requires_grad=True)
    y = tnp.sin(w) * 0.0 + 5.0
    c = copy.copy(y)
    tnp.sum(y * w).backward()
    for _ in range(3):  # later steps reuse the tape's memory
        tnp.sum((tnp.sin(w) * 0.0 + 9.0) * w).backward()
    np.testing.assert_array_equal(c.numpy(), [5.0, 5.0, 5.0])


@pytest.mark.parametrize(
    "returned, error",
    [
        ("a string", "returned str, not an array of numbers"),
        (object(), "returned object, not an array of numbers"),
        (1j, "complex values"),
    ],
)
def test_hooks_returning_non_gradients_are_type_errors(returned, error):
    x = tg.tensor(np.ones(3), requires_grad=True)
    y = x * 2.0
    y.register_hook(lambda g: returned if not isinstance(returned, complex) else g * returned)
    with pytest.raises(TypeError, match=error):
        tnp.sum(y).backward()
    leaf = tg.tensor(np.ones(3), requires_grad=True)
    leaf.register_hook(lambda g: returned if not isinstance(returned, complex) else g * returned)
    with pytest.raises(TypeError, match=error):
        tnp.sum(leaf * 2.0).backward()
    assert leaf.grad is None


@pytest.mark.parametrize("backward", [lambda g: "bad", lambda g: g * 1j])
def test_custom_backward_returning_non_gradients_is_a_type_error(backward):
    x = tg.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(TypeError, match=r"F\.backward \(gradient 0\) returned"):
        tnp.sum(doubling("F", backward).apply(x)).backward()
    assert x.grad is None


def test_numpy_keywords_tapegrad_does_not_take_are_named():
    x = tg.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(TypeError, match=r"numpy\.var: the argument correction= is not supported"):
        np.var(x, correction=1)
    with pytest.raises(TypeError, match=r"numpy\.std: the argument correction= is not supported"):
        np.std(x, correction=1)
    assert np.sum(x, axis=0, keepdims=True).shape == (1,)  # keywords it takes still work


def test_scipy_functions_are_named_as_scipy_functions():
    x = tg.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(TypeError, match=r"scipy\.special\.kv is not supported"):
        scipy.special.kv(1.5, x)


def test_shape_ndim_size_of_a_tensor_are_python_ints():
    t = tg.tensor(np.ones((2, 3)))
    assert tnp.shape(t) == (2, 3) and all(type(d) is int for d in tnp.shape(t))
    assert tnp.ndim(t) == 2 and tnp.size(t) == 6
    assert np.shape(t) == (2, 3)


@pytest.mark.parametrize(
    "name, args",
    [
        ("gammaln", (1.7,)),
        ("erf", (0.3,)),
        ("erfc", (0.3,)),
        ("expit", (0.3,)),
        ("logit", (0.3,)),
        ("xlogy", (2.0, 3.0)),
        ("gammaln", (np.array([1, 2, 3]),)),  # integers: computed by SciPy, constant
    ],
)
def test_special_functions_on_plain_numbers_compute_scipys_values(name, args):
    got = getattr(tsp, name)(*args)  # SciPy's own function: its result, its type
    want = getattr(scipy.special, name)(*args)
    assert type(got) is type(want)
    np.testing.assert_array_equal(got, want)
