"""The last escapes from the graph: each way a gradient used to vanish quietly now
records, raises, or shares memory as PyTorch does.

* ``tg.tensor(t)`` of a tensor that requires grad raises (a new leaf from values);
* conversions to a Python number made from C code (``math.exp(t)``, ``np.float64(t)``,
  ``a.fill(t)``, ``complex(t)``) raise in eager code; ``float(t)`` and ``t.item()`` ask
  for the number explicitly and keep working;
* ``.grad`` accumulates into the array already there (a held ``.grad`` sees it);
* ``detach()`` of a leaf shares its values, with versions; of a computed tensor it is
  a copy that refuses in-place writes.
"""

from __future__ import annotations

import math
import operator
import threading

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp

# --- tg.tensor of a tensor that requires grad ---------------------------------------------


def test_tensor_of_a_tensor_that_requires_grad_raises_everywhere():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match=r"tensor\(\) of a tensor that requires grad.*tnp.array"):
        tg.tensor(x * 2)
    with pytest.raises(TypeError, match="requires grad"):
        tg.grad(lambda v: tnp.sum(tg.tensor(v * 2) * v))(np.array([1.0, 2.0]))
    with pytest.raises(TypeError, match="requires grad"):
        tg.compile(lambda v: tnp.sum(tg.tensor(v * 2) * v)).value_and_grad(np.ones(2))
    # what the message offers: a recorded copy keeps the gradient, [4, 8]
    g = tg.grad(lambda v: tnp.sum(tnp.array(v * 2) * v))(np.array([1.0, 2.0]))
    np.testing.assert_array_equal(g, [4.0, 8.0])
    # and values on purpose
    np.testing.assert_array_equal(tg.tensor(x.detach()).numpy(), [1.0, 2.0])
    with tg.no_grad():
        assert not tg.tensor(x).requires_grad
    assert x.grad is None


def test_tensor_of_a_tensor_that_requires_no_grad_copies():
    c = tg.tensor([1.0, 2.0])
    d = tg.tensor(c, dtype=np.float32)
    assert d.dtype == np.float32 and not d.requires_grad


# --- conversions to numbers made from C ----------------------------------------------------

C_CONVERSIONS = {
    "math.exp": lambda t: math.exp(t),
    "math.log": lambda t: math.log(t),
    "math.fsum": lambda t: math.fsum([t, t]),
    "complex": lambda t: complex(t),
    "np.float64": lambda t: np.float64(t),
    "np.fromiter": lambda t: np.fromiter((t for _ in range(2)), float),
    "ndarray.fill": lambda t: np.zeros(2).fill(t),
    "operator.setitem": lambda t: operator.setitem(np.zeros(2), 0, t),
}


@pytest.mark.parametrize("name", list(C_CONVERSIONS))
def test_a_conversion_from_c_code_raises_in_eager_code(name):
    x = tg.tensor([0.3, 2.0], requires_grad=True)
    # (NumPy raises its own ValueError with ours as the cause: np.fromiter)
    with pytest.raises((TypeError, ValueError)) as info:
        C_CONVERSIONS[name](x[0])
    error = info.value if info.type is TypeError else info.value.__cause__
    assert isinstance(error, TypeError) and "requires grad" in str(error)
    assert x.grad is None


def test_the_issue_snippet_math_exp_no_longer_gives_gradient_zero():
    x = tg.tensor([0.3, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match=r"math.exp\(\).*tnp.exp"):
        (math.exp(x[0]) * x[1]).backward()
    (tnp.exp(x[0]) * x[1]).backward()
    np.testing.assert_allclose(x.grad, [math.exp(0.3) * 2.0, math.exp(0.3)])


def _float_in_a_loop(t):
    out = 0.0
    for _ in range(2):
        out += float(t)  # (the call is a jump target's neighbour: the walk must see it)
    return out


def test_explicit_requests_for_the_number_still_work():
    x = tg.tensor([0.5, 2.0], requires_grad=True)
    t = x[0] * 3
    assert float(t) == 1.5 and int(t) == 1 and t.item() == 1.5
    to_float = float
    assert to_float(t) == 1.5  # the builtin under another name
    assert _float_in_a_loop(t) == 3.0
    # (and with no gradient involved, every conversion is free)
    c = tg.tensor(0.3)
    assert math.exp(c) == math.exp(0.3) and np.float64(c) == 0.3 and complex(c) == 0.3
    with tg.no_grad():
        assert math.exp(x[0]) == math.exp(0.5)


def test_float_and_int_keep_working_once_the_interpreter_specialises_the_call():
    """CPython 3.11 quickens code run often: ``float(t)`` then runs from a specialised
    PRECALL, the frame stopped there and not at the CALL. A training loop that prints
    ``float(loss)`` each step must keep working past its first iterations, as must the
    refusal of ``math.exp(t)`` at the same place."""
    x = tg.tensor([0.5, 2.0], requires_grad=True)
    values = []
    for _ in range(200):
        loss = tnp.sum(x**2)
        values.append(float(loss) + int(loss))
    assert values == [8.25] * 200
    for _ in range(50):
        with pytest.raises(TypeError, match=r"math\.exp"):
            math.exp(tnp.sum(x))


def test_a_shadowed_float_is_not_the_builtin():
    x = tg.tensor([0.5], requires_grad=True)

    def float(v):  # a user's own function named float
        return math.exp(v)

    with pytest.raises(TypeError, match="requires grad"):
        float(x[0])


def test_round_format_floor_on_tensors():
    x = tg.tensor([2.567, -1.5], requires_grad=True)
    r = round(x[0] * 1.0, 2)
    assert isinstance(r, tg.Tensor) and r.item() == pytest.approx(2.57)
    assert round(x).numpy().tolist() == [3.0, -2.0]
    assert f"{x[0]:.3f}" == "2.567" and f"{x}" == str(x)
    assert "%.1f" % x[0] == "2.6"  # noqa: UP031 - display, as the f-string
    assert math.floor(x[0]) == 2 and math.ceil(x[1]) == -1 and math.trunc(x[1]) == -1
    tnp.sum(round(x) * x).backward()  # round is recorded, with gradient 0 through it
    np.testing.assert_array_equal(x.grad, [3.0, -2.0])


# --- .grad accumulates in place ------------------------------------------------------------


def test_grad_accumulates_into_the_array_the_user_holds():
    w = tg.tensor([1.0, -2.0], requires_grad=True)
    tnp.sum(w**2).backward()
    g = w.grad
    tnp.sum(w**2).backward()
    assert w.grad is g
    np.testing.assert_array_equal(g, [4.0, -8.0])
    g[:] = 0  # PyTorch's zero_(): the next backward starts from it
    tnp.sum(3 * w).backward()
    np.testing.assert_array_equal(w.grad, [3.0, 3.0])


def test_a_training_loop_that_zeroes_grad_in_place_moves():
    w = tg.tensor([2.0], requires_grad=True)
    g = None
    for _ in range(50):
        loss = tnp.sum((w - 0.5) ** 2)
        loss.backward()
        g = w.grad
        with tg.no_grad():
            w -= 0.1 * g
        g[:] = 0
    np.testing.assert_allclose(w.numpy(), [0.5], atol=1e-4)


def test_grad_accumulation_does_not_write_into_arrays_the_user_passed():
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    seed = np.array([1.0, 1.0])
    w.backward(seed)  # a leaf's own backward: .grad is a copy of the seed
    w.backward(seed)
    np.testing.assert_array_equal(seed, [1.0, 1.0])
    np.testing.assert_array_equal(w.grad, [2.0, 2.0])
    mine = np.array([10.0, 10.0])
    v = tg.tensor([1.0, 2.0], requires_grad=True)
    v.register_hook(lambda g: mine)
    tnp.sum(v).backward()
    tnp.sum(v).backward()
    np.testing.assert_array_equal(mine, [10.0, 10.0])
    np.testing.assert_array_equal(v.grad, [20.0, 20.0])


def test_create_graph_grad_is_a_new_tensor_and_threads_add_up():
    x = tg.tensor(1.5, requires_grad=True)
    (x**3).backward(create_graph=True)
    first = x.grad
    (x**3).backward(create_graph=True)
    assert x.grad is not first and float(x.grad.detach()) == pytest.approx(13.5)
    w = tg.tensor(np.zeros(3), requires_grad=True)
    tnp.sum(w).backward()
    held = w.grad

    def work():
        for _ in range(50):
            tnp.sum(w * 2.0).backward()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert w.grad is held
    np.testing.assert_array_equal(held, np.full(3, 401.0))


def test_compiled_steps_accumulate_into_held_grad():
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    step = tg.compile(lambda x: tnp.sum(w * x))
    step.value_and_grad(np.array([1.0, 1.0]))
    g = w.grad
    step.value_and_grad(np.array([2.0, 3.0]))
    assert w.grad is g
    np.testing.assert_array_equal(g, [3.0, 4.0])


# --- detach shares a leaf's values ----------------------------------------------------------


def test_detach_of_a_leaf_shares_its_values_both_ways():
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    wd = w.detach()
    assert not wd.requires_grad
    wd -= 0.5 * np.array([2.0, 2.0])  # the issue's update: w moves
    np.testing.assert_array_equal(w.numpy(), [0.0, 1.0])
    with tg.no_grad():
        w += 1.0
    np.testing.assert_array_equal(wd.numpy(), [1.0, 2.0])
    wd[0] = 7.0
    np.testing.assert_array_equal(w.numpy(), [7.0, 2.0])
    tnp.sum(w**2).backward()  # w is still a leaf with its gradient
    np.testing.assert_array_equal(w.grad, [14.0, 4.0])


def test_writing_through_detach_after_the_forward_refuses_the_backward():
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    loss = tnp.sum(w**3)  # saves w
    wd = w.detach()
    wd *= 2.0
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation|version"):
        loss.backward()


def test_a_view_of_the_leaf_sees_writes_through_detach():
    w = tg.tensor([1.0, 2.0, 3.0])
    row = w[1:]
    wd = w.detach()
    wd += 1.0
    np.testing.assert_array_equal(row.numpy(), [3.0, 4.0])


def test_detach_of_a_computed_tensor_is_a_copy_that_refuses_writes():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    d = y.detach()
    np.testing.assert_array_equal(d.numpy(), [2.0, 4.0])
    for write in (lambda: d.__isub__(1.0), lambda: d.__setitem__(0, 5.0)):
        with pytest.raises(RuntimeError, match=r"detach\(\) of a computed tensor"):
            write()
    np.testing.assert_array_equal(d.numpy(), [2.0, 4.0])
    scratch = d.copy()
    scratch -= 1.0  # a copy made on purpose
    np.testing.assert_array_equal(scratch.numpy(), [1.0, 3.0])
    np.testing.assert_array_equal(y.detach().numpy(), [2.0, 4.0])


# --- graph nodes, arrays updated in place, jacfwd of several outputs -----------------------


def test_grad_fn_is_the_same_object_while_held():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = tnp.sin(x) * x
    assert y.grad_fn is y.grad_fn
    seen = {id(y.grad_fn)}
    for fn, _ in y.grad_fn.next_functions:
        if fn is not None:
            assert fn is y.grad_fn.next_functions[0][0] or id(fn) not in seen


def test_augmented_assignment_into_an_array_names_the_fix():
    a = np.zeros(2)
    t = tg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match=r"a \+= t.*a = a \+ t"):
        a += t
    np.testing.assert_array_equal(a, [0.0, 0.0])
    a += tg.tensor([1.0, 2.0])  # no gradient to lose: NumPy's in-place add
    np.testing.assert_array_equal(a, [1.0, 2.0])


def test_jacfwd_of_a_dict_and_a_tuple_of_outputs_matches_jacrev():
    def f(x):
        return {"s": tnp.sin(x), "p": tnp.prod(x)}, x[0] * x

    x = np.array([0.3, 1.2, -0.7])
    fwd, rev = tg.jacfwd(f)(x), tg.jacobian(f)(x)
    for k in ("s", "p"):
        np.testing.assert_allclose(fwd[0][k], rev[0][k], rtol=1e-12)
    np.testing.assert_allclose(fwd[1], rev[1], rtol=1e-12)
    np.testing.assert_allclose(fwd[0]["s"], np.diag(np.cos(x)))


def test_copies_are_recorded_and_leave_the_original_alone():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    for make in (lambda t: t.copy(), tnp.copy, np.copy, tnp.array):
        y = x * 1.0
        c = make(y)
        assert c is not y and c.requires_grad
        c *= 3.0
        np.testing.assert_array_equal(y.detach().numpy(), [1.0, 2.0])
        x.grad = None
        tnp.sum(c * y).backward()
        np.testing.assert_array_equal(x.grad, [6.0, 12.0])  # d/dx 3 x^2
    y = x * 1.0
    assert tnp.asarray(y) is y
