"""NumPy's view semantics on tensors that are values: writes through views reach the
base, writes to a base reach its views, and copies stay copies."""

from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import recording

from .helpers import numeric_grad


def same_in_numpy_and_tapegrad(f, x):
    """``f`` on a NumPy array and on a tensor: same value, and the gradient agrees with
    central differences of the NumPy version."""
    want = f(np.array(x, dtype=float), np)
    got = f(tg.tensor(x), tnp)
    assert got.item() == pytest.approx(want)
    g = tg.grad(lambda v: f(v, tnp))(np.array(x, dtype=float))
    np.testing.assert_allclose(
        g, numeric_grad(lambda v: f(v, tnp), np.array(x, dtype=float)), rtol=1e-6, atol=1e-8
    )


def _accumulate_scalar(x, m):
    h = x * 1.0
    acc = h[0]  # a scalar in NumPy: a copy, not a view
    for i in range(1, 6):
        acc += h[i]
    return (h * h).sum() + acc


def _squeeze_write(x, m):
    M = m.reshape(x * 1.0, (3, 2))
    col = m.squeeze(M[:, 1:2])  # squeeze and expand_dims always give views
    col += 5.0
    return (M * M).sum()


def _flip_and_split(x, m):
    h = x * 1.0
    r = m.flip(h)
    r[0] = 7.0 * r[1]
    a, b = m.split(h, 2)
    b *= 2.0
    return (h * h).sum() + a[0]


def _same_shape_reshape(x, m):
    M = m.reshape(x * 1.0, (2, 3))
    t = M.T.reshape(3, 2)  # non-contiguous, but the same shape: a view
    t[0, 1] = 10.0
    return (M * M).sum()


def _read_only_views_follow(x, m):
    h = x * 1.0
    d = m.diagonal(m.reshape(h, (2, 3)))
    b = m.broadcast_to(h, (2, 6))
    h[0] = 3.0 * h[5]  # the read-only views see it
    return (d * d).sum() + b.sum()


PROGRAMS = {
    "a scalar index is a copy": _accumulate_scalar,
    "squeeze of a strided view": _squeeze_write,
    "flip and split": _flip_and_split,
    "reshape to the same shape": _same_shape_reshape,
    "read-only views see writes to the base": _read_only_views_follow,
    "write through a slice": lambda x, m: _then(x * 1.0, lambda h: h[:2].__setitem__(0, 0.0)),
    "write through a named row": lambda x, m: _rows(x, m),
    "base written after a view": lambda x, m: _base_after(x, m),
    "write through a reshape": lambda x, m: _reshape_write(x, m),
    "write through a transpose": lambda x, m: _transpose_write(x, m),
    "augmented assignment on slices": lambda x, m: _augmented(x, m),
    "in-place on a named view": lambda x, m: _inplace_view(x, m),
    "views of views": lambda x, m: _nested(x, m),
}


def _then(h, act):
    act(h)
    return (h * h).sum()


def _rows(x, m):
    A = m.reshape(x * 1.0, (2, 3))
    row = A[1]
    row[0] = 10.0 * row[2]
    return (A * A).sum()


def _base_after(x, m):
    h = x * 1.0
    r = h.reshape(3, 2)
    h[0] = 10.0 * h[1]  # r sees it (a view)
    return (r * r).sum() + r[0, 0]


def _reshape_write(x, m):
    h = x * 1.0
    h.reshape(2, 3)[0, 0] = 7.0 * h[5]
    return (h * h).sum()


def _transpose_write(x, m):
    h = m.reshape(x * 1.0, (2, 3))
    t = h.T
    t[2, 1] = t[0, 0] * 3.0
    return (h * h).sum() + t[2, 1]


def _augmented(x, m):
    h = x * 1.0
    h[:3] += 1.0
    h[1:] *= 2.0
    h[::2] -= h[1]
    return (h * h).sum()


def _inplace_view(x, m):
    h = x * 1.0
    v = h[2:]
    v *= 3.0
    return (h * h).sum()


def _nested(x, m):
    h = m.reshape(x * 1.0, (2, 3))
    v = h[1][1:]
    v[0] = -v[1]
    return (h * h).sum()


class _OtherDevice:
    """A stand-in device tensor type: what importing ``tapegrad.cuda`` installs."""


@pytest.mark.parametrize("device", [(), (_OtherDevice,)], ids=["cpu only", "a device type"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_views_behave_as_in_numpy(name, device, monkeypatch):
    # with no device tensor type (no tapegrad.cuda imported: most users), the drop-in
    # functions call the CPU function under the device router directly; that path
    # skipped the view wrapper, and tnp.diagonal's view missed a write to its base
    # (test order hid it: an earlier test had imported tapegrad.cuda)
    monkeypatch.setattr(recording, "DEVICE_TYPES", device)
    same_in_numpy_and_tapegrad(PROGRAMS[name], np.linspace(0.3, 1.8, 6))


def test_copies_stay_copies():
    x = tg.tensor(np.arange(6.0))
    h = x * 1.0
    c = h.reshape(2, 3).T.reshape(-1)  # the strides do not allow it: NumPy copies
    c[0] = 100.0
    assert h.numpy().tolist() == list(np.arange(6.0))
    s = h.reshape(2, 3)[:, 1].reshape(-1)  # the strides allow it: a view, as in NumPy
    s[0] = 100.0
    assert h[1].item() == 100.0
    f = h.flatten()  # always a copy
    f[0] = -1.0
    assert h[0].item() == 0.0
    a = h[np.array([0, 1])]  # advanced indexing: a copy
    a[0] = 5.0
    assert h[0].item() == 0.0


def test_read_only_views_refuse_writes():
    h = tg.tensor(np.arange(6.0)) * 1.0
    d = tnp.diagonal(h.reshape(2, 3))
    with pytest.raises(ValueError, match="read-only"):
        d[0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        b = tnp.broadcast_to(h, (2, 6))
        b += 1.0


def test_views_of_a_parameter_across_training_steps():
    rng = np.random.default_rng(0)
    E = tg.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    Et = E.T  # made once, used every step (a tied embedding)
    for _ in range(3):
        E.grad = None
        loss = tnp.sum((E[0] @ Et) ** 2)
        loss.backward()
        e = E.numpy()
        want = tg.grad(lambda w: tnp.sum((w[0] @ w.T) ** 2))(e)
        np.testing.assert_allclose(E.grad, want)
        with tg.no_grad():
            E -= 0.01 * E.grad  # Et follows, and stays differentiable
        np.testing.assert_allclose(Et.numpy(), E.numpy().T)


def test_sibling_views_stay_linked_after_a_rewind():
    x = tg.tensor(np.arange(1.0, 4.0), requires_grad=True)
    h = x * 1.0
    a, b = h[:2], h[1:]
    del h
    tnp.sum(a * b).backward()  # the tape rewinds at the next op
    a[1] = 50.0
    assert b.numpy().tolist() == [50.0, 3.0]


def test_saved_values_only_matter_to_the_gradients_that_read_them():
    x = tg.tensor(np.arange(1.0, 4.0), requires_grad=True)
    h = x * 1.0
    h2 = h * 2.0  # the gradient of h reads only the 2.0
    h[0] = 5.0
    (h2.sum() + h.sum()).backward()
    np.testing.assert_allclose(x.grad, [2.0, 3.0, 3.0])
    y = x * 1.0
    z = y * y  # the gradient reads y itself: changing y in place is refused
    y[0] = 0.0
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        z.sum().backward()
