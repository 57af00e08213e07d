"""tapegrad.numpy as a drop-in for NumPy, and NumPy's protocols on tensors."""

from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.special as tsp
from tapegrad.testing import check_grads


def test_numpy_functions_on_tensors_record():
    x = tg.tensor(np.array([0.5, 1.0, 2.0]), requires_grad=True)
    a = np.array([1.0, 2.0, 3.0])
    for y in (
        np.sin(x),
        np.exp(x) * a,
        a + x,
        a @ x,
        np.sum(x, axis=0),
        np.maximum(x, 1.0),
        np.concatenate([x, a]),
        np.linalg.norm(x),
        np.add.reduce(x),
        np.mean(x),
        np.where(x > 0.7, x, 0.0),
        np.stack([x, x]),
        np.einsum("i,i", x, a),
    ):
        assert isinstance(y, tg.Tensor) and y.requires_grad
    np.sum(np.sin(x) * a).backward()
    np.testing.assert_allclose(x.grad, np.cos([0.5, 1.0, 2.0]) * a)


def test_unsupported_numpy_function_never_drops_a_gradient():
    x = tg.tensor([3.0, 1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match=r"numpy\.ediff1d is not supported .* requires grad"):
        np.ediff1d(x)
    with pytest.raises(TypeError, match=r"numpy\.add\.accumulate"):
        np.add.accumulate(x)
    # without grad, NumPy computes on the values and returns an array
    np.testing.assert_array_equal(np.ediff1d(x.detach()), [-2.0, 1.0])


def test_asarray_needs_detach_and_out_is_refused():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match=r"converts a tensor that requires grad.*detach"):
        np.asarray(x)
    v = np.asarray(x.detach())
    assert isinstance(v, np.ndarray) and v.tolist() == [1.0, 2.0]
    with tg.no_grad():  # no gradient asked for: the values
        assert np.asarray(x).tolist() == [1.0, 2.0]
    with pytest.raises(TypeError, match="into a NumPy array"):
        np.sin(x, out=np.empty(2))
    with pytest.raises(TypeError, match="out= is not supported"):
        tnp.sum(x, out=np.empty(()))


def test_namespace_fallbacks_and_constants():
    assert tnp.pi == np.pi and tnp.float32 is np.float32 and tnp.newaxis is None
    z = tnp.zeros_like(tg.tensor(np.ones((2, 3))))  # of a tensor: a constant tensor
    assert isinstance(z, tg.Tensor) and z.shape == (2, 3) and not z.requires_grad
    assert type(tnp.zeros((2, 3))) is np.ndarray  # of plain values: NumPy's own
    assert tnp.arange(tg.tensor(3)).dtype == np.int64
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    s = tnp.array([x[0], x[1] * 2, 3.0])  # lists holding tensors are stacked: graph kept
    assert s.requires_grad
    s.sum().backward()
    np.testing.assert_array_equal(x.grad, [1.0, 2.0])
    assert tnp.asarray(x) is x
    assert tnp.argmax(tg.tensor([1.0, 5.0, 2.0])).item() == 1
    np.testing.assert_array_equal(tnp.isnan(tg.tensor([1.0, np.nan])).numpy(), [False, True])
    with pytest.raises(AttributeError, match="no attribute 'not_a_numpy_name'"):
        tnp.not_a_numpy_name


def test_tensor_methods_with_numpy_spelling():
    a = np.arange(1.0, 7.0).reshape(2, 3)
    x = tg.tensor(a)
    for name, args in [
        ("sum", (1,)),
        ("prod", ()),
        ("max", (0,)),
        ("min", ()),
        ("var", ()),
        ("std", (1,)),
        ("cumsum", (1,)),
        ("cumprod", ()),
        ("ravel", ()),
        ("flatten", ()),
        ("swapaxes", (0, 1)),
        ("clip", (2, 5)),
        ("round", ()),
        ("argmax", ()),
        ("trace", ()),
    ]:
        got = getattr(x, name)(*args)
        np.testing.assert_allclose(np.asarray(got), getattr(a, name)(*args), err_msg=name)


def test_setitem_records_and_keeps_other_handles():
    x = tg.tensor(np.arange(4.0), requires_grad=True)
    y = x * 1.0
    before = y
    y[1:3] = tg.tensor([10.0, 20.0], requires_grad=True) * 2
    np.testing.assert_array_equal(y.numpy(), [0.0, 20.0, 40.0, 3.0])
    (y * y).sum().backward()
    np.testing.assert_array_equal(x.grad, [0.0, 0.0, 0.0, 6.0])  # overwritten: no gradient
    assert before is y  # the same handle, now the new value
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        x[0] = 1.0


def test_linalg_errors():
    singular = tg.tensor(np.ones((2, 2)), requires_grad=True)
    with pytest.raises(np.linalg.LinAlgError, match="inv: singular matrix"):
        tnp.linalg.inv(singular)
    with pytest.raises(np.linalg.LinAlgError, match="cholesky: matrix is not positive"):
        tnp.linalg.cholesky(tg.tensor(-np.eye(2)))
    with pytest.raises(np.linalg.LinAlgError, match="square"):
        tnp.linalg.det(tg.tensor(np.ones((2, 3))))
    with pytest.raises(ValueError, match="norm: invalid norm order 'bad' for matrices"):
        tnp.linalg.norm(tg.tensor(np.eye(2)), "bad")
    # nothing half-recorded: the tape still works
    tnp.linalg.det(singular * 1.0 + np.eye(2)).backward()
    np.testing.assert_allclose(singular.grad, np.array([[2.0, -1.0], [-1.0, 2.0]]))


def test_stable_forms():
    big = tg.tensor(np.array([1000.0, 1000.0]), requires_grad=True)
    lse = tsp.logsumexp(big)
    assert np.isfinite(lse.item()) and abs(lse.item() - (1000 + np.log(2))) < 1e-9
    lse.backward()
    np.testing.assert_allclose(big.grad, [0.5, 0.5])
    s = tsp.expit(tg.tensor([-1000.0, 0.0, 1000.0], requires_grad=True))
    np.testing.assert_allclose(s.numpy(), [0.0, 0.5, 1.0])
    z = tg.tensor(np.zeros(3), requires_grad=True)
    tnp.linalg.norm(z).backward()  # documented subgradient 0 at 0, not nan
    np.testing.assert_array_equal(z.grad, np.zeros(3))
    small = tg.tensor(1e-12, requires_grad=True)
    assert tnp.log1p(small).item() == pytest.approx(1e-12, rel=1e-12)
    p = tsp.softmax(tg.tensor([[1e4, 0.0], [0.0, 0.0]]), axis=1)
    np.testing.assert_allclose(p.numpy(), [[1.0, 0.0], [0.5, 0.5]])


def test_norm_over_an_axis_at_zero_rows_first_and_second_order():
    """linalg.norm(axis=-1) and std are one safe_sqrt node over the sum: rows that are
    zero (coincident points) get gradient 0, a second derivative through them is
    finite, and elsewhere both orders match central differences."""
    a = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 0.5], [0.0, 0.0, 0.0], [0.3, 0.2, -0.1]])
    w = np.array([1.0, 2.0, 3.0, 4.0])

    def f(x):
        return tnp.sum(tnp.linalg.norm(x, axis=-1) * w)

    g = tg.grad(f)(a)
    nz = np.linalg.norm(a, axis=-1)
    want = np.where(nz[:, None] > 0, a / np.where(nz > 0, nz, 1)[:, None], 0.0) * w[:, None]
    np.testing.assert_allclose(g, want, rtol=1e-14)
    v = np.random.default_rng(0).standard_normal(a.shape)
    hv = tg.grad(lambda x: tnp.sum(tg.grad(f)(x) * v))(a)
    assert np.isfinite(hv).all() and not hv[[0, 2]].any()  # zero rows: 0, not NaN
    eps = 1e-6
    fd = (tg.grad(f)(a + eps * v) - tg.grad(f)(a - eps * v)) / (2 * eps)
    np.testing.assert_allclose(hv[[1, 3]], fd[[1, 3]], rtol=1e-6, atol=1e-8)
    g32 = tg.grad(lambda x: tnp.sum(tnp.linalg.norm(x, axis=-1)))(a.astype(np.float32))
    assert g32.dtype == np.float32 and not g32[[0, 2]].any()
    gs = tg.grad(lambda x: tnp.std(x, axis=1).sum())(np.array([[2.0, 2.0], [1.0, 3.0]]))
    np.testing.assert_allclose(gs, [[0.0, 0.0], [-0.5, 0.5]])


# --- unchanged NumPy code, differentiated two ways ------------------------------------------


def gaussian_loglik(mu, log_sigma, data, np=np):
    sigma = np.exp(log_sigma)
    z = (data - mu) / sigma
    return np.sum(-0.5 * z**2 - np.log(sigma) - 0.5 * np.log(2 * np.pi))


def softmax_classifier_loss(w, b, x, labels, np=np):
    logits = x @ w + b
    m = np.max(logits, axis=1, keepdims=True)
    logp = logits - m - np.log(np.sum(np.exp(logits - m), axis=1, keepdims=True))
    onehot = np.eye(w.shape[1])[labels]
    return -np.mean(np.sum(onehot * logp, axis=1))


def rk4_step(y, params, dt=0.1, np=np):
    a, b = params[0], params[1]

    def f(s):
        return np.stack([a * s[0] - s[0] * s[1], -b * s[1] + s[0] * s[1]])

    k1 = f(y)
    k2 = f(y + 0.5 * dt * k1)
    k3 = f(y + 0.5 * dt * k2)
    k4 = f(y + dt * k3)
    return np.sum((y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)) ** 2)


RNG = np.random.default_rng(0)
PROGRAMS = {
    "gaussian log-likelihood": (gaussian_loglik, [0.3, -0.2], (RNG.standard_normal(20),)),
    "softmax classifier loss": (
        softmax_classifier_loss,
        [RNG.standard_normal((4, 3)), RNG.standard_normal(3)],
        (RNG.standard_normal((10, 4)), RNG.integers(0, 3, 10)),
    ),
    "RK4 step": (rk4_step, [np.array([1.2, 0.8]), np.array([1.1, 0.4])], ()),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_numpy_code_through_array_protocols(name):
    """The function written against NumPy, given tensors."""
    f, params, consts = PROGRAMS[name]
    check_grads(lambda *p: f(*p, *consts), params)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_numpy_code_through_tapegrad_numpy(name):
    """The same function with ``np`` replaced by ``tapegrad.numpy``."""
    f, params, consts = PROGRAMS[name]
    check_grads(lambda *p: f(*p, *consts, np=tnp), params)
    value = f(*[tg.tensor(p) for p in params], *consts, np=tnp).item()
    assert value == pytest.approx(f(*params, *consts))


def test_scipy_names_are_canonical_and_the_short_modules_alias_them():
    """tapegrad.scipy.* is where SciPy's names live; tapegrad.special and
    tapegrad.integrate hold the very same objects (aliases, not copies)."""
    import tapegrad.integrate
    import tapegrad.scipy.integrate
    import tapegrad.scipy.special
    import tapegrad.special

    assert tapegrad.special.__all__ == tapegrad.scipy.special.__all__
    for name in tapegrad.special.__all__:
        assert getattr(tapegrad.special, name) is getattr(tapegrad.scipy.special, name)
    for name in tapegrad.integrate.__all__:
        assert getattr(tapegrad.integrate, name) is getattr(tapegrad.scipy.integrate, name)


def test_rows_declare_their_tensor_methods():
    """A row's ``method=True`` is the one place a Tensor method is declared: every such
    row is a method with the function's parameters, the tensor first, and gives what
    the function gives."""
    import inspect

    from tapegrad import surface
    from tapegrad.ops import ROWS

    declared = [op.name for op in ROWS if op.method]
    assert {"sum", "cumsum", "astype", "trace"} <= set(declared)
    x = tg.tensor(np.arange(1.0, 7.0).reshape(2, 3))
    for name in declared:
        method = getattr(tg.Tensor, name)
        assert name in surface.MIRRORED and method.__qualname__ == f"Tensor.{name}"
        params = list(inspect.signature(method).parameters)
        assert params[0] == "self"
        assert params[1:] == list(inspect.signature(tnp.__dict__[name]).parameters)[1:]
    for name, args in {"sum": (0,), "cumsum": (1,), "trace": (), "var": (), "round": ()}.items():
        np.testing.assert_allclose(
            getattr(x, name)(*args).numpy(), getattr(tnp, name)(x, *args).numpy()
        )
