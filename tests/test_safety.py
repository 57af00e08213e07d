"""Hooks, graph lifetime, in-place safety, anomaly mode, gradient checking."""

from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import GradientCheckError, check_grads

# --- hooks ---------------------------------------------------------------------------------


def test_hook_on_intermediate_sees_and_replaces_the_gradient():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    seen = []
    handle = h.register_hook(lambda g: seen.append(g) or g * 10)
    (h**2).sum().backward()
    np.testing.assert_array_equal(seen[0], [6.0, 12.0])
    np.testing.assert_array_equal(x.grad, 3 * 10 * np.array([6.0, 12.0]))
    handle.remove()
    x.grad = None
    h2 = x * 3
    (h2**2).sum().backward()
    np.testing.assert_array_equal(x.grad, [18.0, 36.0])


def test_hooks_run_in_backward_order_and_on_leaves():
    order = []
    x = tg.tensor([1.0], requires_grad=True)
    a = x * 2
    b = a * 3
    x.register_hook(lambda g: order.append(("x", g.item())))
    a.register_hook(lambda g: order.append(("a", g.item())))
    b.register_hook(lambda g: order.append(("b", g.item())))
    b.sum().backward()
    assert order == [("b", 1.0), ("a", 3.0), ("x", 6.0)]


def test_leaf_hook_can_replace_before_accumulation_and_post_hook_sees_grad():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: g * 0 + 5)
    after = []
    x.register_post_accumulate_grad_hook(lambda t: after.append(t.grad.copy()))
    (x * 7).sum().backward()
    np.testing.assert_array_equal(x.grad, [5.0, 5.0])
    np.testing.assert_array_equal(after[0], [5.0, 5.0])
    with pytest.raises(RuntimeError, match="leaf"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)


def test_retain_grad_and_hook_errors():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    h = tnp.sin(x)
    h.retain_grad()
    h.register_hook(lambda g: g * 2)  # registered after retain_grad: .grad still sees it
    tnp.sum(h * h).backward()
    np.testing.assert_allclose(h.grad, 2 * 2 * np.sin([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        tg.tensor([1.0]).register_hook(print)
    k = x * 2
    k.register_hook(lambda g: np.ones(5))
    with pytest.raises(RuntimeError, match=r"returned a gradient of shape \(5,\)"):
        k.sum().backward()


def test_graph_without_hooks_makes_no_callbacks():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x
    for _ in range(30):
        y = tnp.sin(y) + x
    y.sum().backward()
    assert tg.backward_stats() == {"nodes": 61, "python_callbacks": 0}


# --- in-place safety ----------------------------------------------------------------------


def test_inplace_on_a_saved_value_raises_at_backward():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = tnp.exp(x)  # exp saves its output
    y += 1
    assert y._version == 1
    with pytest.raises(
        RuntimeError,
        match=r"modified by an in-place operation: 'exp' .* "
        r"version 0, which is now version 1",
    ):
        y.sum().backward()


def test_inplace_not_needed_by_backward_is_fine():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x + 1  # add saves nothing
    y *= 3
    y[0] = 5.0
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, [0.0, 3.0])


def test_inplace_on_leaf_rules():
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"in-place operation \(\+=\)"):
        w += 1
    with pytest.raises(RuntimeError, match=r"in-place operation \(setitem\)"):
        w[0] = 1.0
    loss = (w * w).sum()
    loss.backward()
    with tg.no_grad():  # a parameter update: allowed, w stays a leaf with its grad
        w -= 0.5 * w.grad
        w[1] = 0.0
    assert w.is_leaf and w.requires_grad and w._version == 2
    np.testing.assert_array_equal(w.numpy(), [0.0, 0.0])
    pending = (w * w).sum()
    with tg.no_grad():
        w += 1
    with pytest.raises(RuntimeError, match="'multiply'"):
        pending.backward()  # the leaf it saved has changed since


def test_numpy_array_passed_to_tensor_is_copied():
    a = np.array([1.0, 2.0])
    t = tg.tensor(a, requires_grad=True)
    loss = (t * t).sum()
    a[:] = 100.0
    loss.backward()
    np.testing.assert_array_equal(t.grad, [2.0, 4.0])


# --- anomaly mode ----------------------------------------------------------------------------


def test_anomaly_mode_names_op_and_source_line():
    z = tg.tensor([0.0, 1.0], requires_grad=True)
    with tg.detect_anomaly():
        w = tnp.sqrt(z) * 0.0  # sqrt'(0) = inf, times 0 -> nan
        with pytest.raises(
            RuntimeError,
            match=r"Function 'sqrt' returned nan.*"
            r"test_safety\.py:\d+: w = tnp\.sqrt\(z\)",
        ):
            w.sum().backward()
    # outside the context: no check, NaN flows into .grad
    w = tnp.sqrt(z) * 0.0
    w.sum().backward()
    assert np.isnan(z.grad[0])
    assert not tg.is_anomaly_enabled()


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


# --- gradient checking -------------------------------------------------------------------------


def test_check_grads_reports_argument_and_position():
    def wrong(x, y):
        # the second element's derivative is broken by a detach
        return tnp.sum(x * tnp.concatenate([y[:1], y[1:].detach()]))

    with pytest.raises(
        GradientCheckError,
        match=r"argument 1 .*\n.*\n.*at index \(np\.int64"
        r"\(1\),\)",
    ):
        check_grads(wrong, [np.array([1.0, 2.0]), np.array([3.0, 4.0])])
    assert tg.gradcheck(lambda x: tnp.sum(tnp.sin(x)), [np.array([0.1, 0.2])])
    assert not tg.gradcheck(
        wrong, [np.array([1.0, 2.0]), np.array([3.0, 4.0])], raise_exception=False
    )
