"""NumPy's view semantics on tensors that are values: writes through views reach the
base, writes to a base reach its views, and copies stay copies."""

from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp

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


PROGRAMS = {
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


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_views_behave_as_in_numpy(name):
    same_in_numpy_and_tapegrad(PROGRAMS[name], np.linspace(0.3, 1.8, 6))


def test_copies_stay_copies():
    x = tg.tensor(np.arange(6.0))
    h = x * 1.0
    c = h.reshape(2, 3)[:, 1].reshape(-1)  # a strided slice: NumPy copies on reshape
    c[0] = 100.0
    assert h.numpy().tolist() == list(np.arange(6.0))
    f = h.flatten()  # always a copy
    f[0] = -1.0
    assert h[0].item() == 0.0
    a = h[np.array([0, 1])]  # advanced indexing: a copy
    a[0] = 5.0
    assert h[0].item() == 0.0
