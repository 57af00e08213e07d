"""``import tapegrad.numpy as np`` as a drop-in for NumPy.

On plain inputs every ``tapegrad.numpy`` / ``tapegrad.special`` function is NumPy's or
SciPy's own: realistic scripts give the same outputs, types included, under both imports.
Given tensors (also inside lists, dicts and object arrays) the functions record and no
gradient is lost; integer tensors work where NumPy's integer arrays do, and inside
``tg.compile`` their values never become stale constants.
"""

from __future__ import annotations

import numpy
import pytest
import scipy.special

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.numpy.linalg as tla
import tapegrad.special as tsp
from tapegrad.testing import check_grads

from .helpers import numeric_grad

# --- realistic scripts, written against whichever ``np`` they are given -------------------


def one_hot(np):
    labels = np.array([2, 0, 1, 2, 1, 0, 0])
    n_classes = np.max(labels) + 1
    onehot = np.zeros((labels.shape[0], n_classes))
    onehot[np.arange(len(labels)), labels] = 1.0
    mask = np.array([True, False, True, True, False, False, True])
    return {
        "onehot": onehot,
        "eye": np.eye(n_classes)[labels],
        "counts": np.sum(onehot, axis=0),
        "back": np.argmax(onehot, axis=1),
        "kept": labels[mask],
        "any": np.any(mask),
        "none": np.array([]),
        "flags": np.logical_and(mask, labels > 0),
        "n_classes": n_classes,
    }


def batching(np):
    rng = np.random.default_rng(0)
    X = np.arange(60, dtype=np.float32).reshape(10, 2, 3)
    flat = X.reshape(X.shape[0], np.prod(X.shape[1:]))  # np.prod as a size
    perm = rng.permutation(len(X))
    bs = 4
    n_full, rest = divmod(len(X), bs)
    n_batches = -(-len(X) // bs)
    batches = [flat[perm[i * bs : (i + 1) * bs]] for i in range(n_batches)]
    mean, std = flat.mean(axis=0), flat.std(axis=0)
    norm = (flat - mean) / np.where(std > 0, std, 1.0)
    return {
        "flat": flat,
        "shape": np.shape(flat),
        "size": np.size(flat),
        "ndim": np.ndim(X),
        "n": (n_full, rest, n_batches),
        "batches": batches,
        "last": batches[-1],
        "norm": norm,
        "split": np.array_split(norm, 3),
        "stacked": np.stack([b.sum(axis=0) for b in batches]),
        "window": np.floor_divide(np.arange(10), 3),
        "mod": np.remainder(np.arange(10), 3),
        "lin": np.linspace(0.0, 1.0, 5, dtype=np.float32),
        "grid": np.meshgrid(np.arange(3), np.arange(2)),
        "full": np.full((2, 2), 7, dtype=np.int32),
    }


def simulation(np):
    # a damped oscillator by semi-implicit Euler, into preallocated arrays
    dt, k, c, n_steps = 0.01, 4.0, 0.3, 400
    x, v = np.zeros(n_steps + 1), np.zeros(n_steps + 1)
    x[0] = 1.0
    for i in range(n_steps):
        v[i + 1] = v[i] + dt * (-k * x[i] - c * v[i])
        x[i + 1] = x[i] + dt * v[i + 1]
    energy = 0.5 * v**2 + 0.5 * k * x**2
    up = np.nonzero(np.diff(np.sign(x)) > 0)[0]
    # a random walk on a ring of 7 sites
    rng = np.random.default_rng(1)
    pos = np.cumsum(rng.choice([-1, 1], size=200)) % 7
    return {
        "x": x,
        "energy_drop": energy[0] - energy[-1],
        "crossings": np.count_nonzero(np.diff(np.sign(x))),
        "period": np.mean(np.diff(up)) if len(up) > 1 else 0.0,
        "visits": np.bincount(pos, minlength=7),
        "pos_sorted": np.sort(pos)[::20],
        "clipped": np.clip(x, -0.5, 0.5),
        "log_energy": np.log(energy),
        "norm": np.linalg.norm(x),
        "erf": scipy.special.erf(0.3),
        "rounded": np.round(x[:5], 2),
        "isfinite": np.all(np.isfinite(x)),
    }


def _same(got, want, where=""):
    """Equal values and equal types (an ndarray where NumPy gives one, a NumPy scalar where
    it gives one): the drop-in contract."""
    assert type(got) is type(want), (where, type(got), type(want))
    if isinstance(want, dict):
        assert got.keys() == want.keys()
        for key in want:
            _same(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list | tuple):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{where}[{i}]")
    elif isinstance(want, numpy.ndarray | numpy.generic):
        assert got.dtype == want.dtype, (where, got.dtype, want.dtype)
        numpy.testing.assert_array_equal(got, want, err_msg=where)
    else:
        assert got == want, where


@pytest.mark.parametrize("script", [one_hot, batching, simulation])
def test_a_numpy_script_runs_unchanged_with_tapegrad_numpy(script):
    _same(script(tnp), script(numpy))


def test_what_a_new_user_tried():
    x = numpy.ones((4, 3, 2))
    n = tnp.prod(x.shape[1:])
    assert type(n) is numpy.int64 and numpy.zeros(n).shape == (6,) and [0] * 7 == [0] * 7
    assert numpy.empty(n).shape == (6,) and list(range(10))[n] == 6
    for value in ([1, 2, 3], [True, False], [], [[1.5]], 3):
        _same(tnp.array(value), numpy.array(value))
        _same(tnp.asarray(value), numpy.asarray(value))
    t = tg.tensor(x)
    assert tnp.shape(t) == (4, 3, 2) and tnp.ndim(t) == 3 and tnp.size(t) == 24
    assert type(tnp.ndim(t)) is int and type(tnp.size(t)) is int
    for name, args in [("gammaln", (1.7,)), ("erf", (0.3,)), ("expit", (0.3,))]:
        _same(getattr(tsp, name)(*args), getattr(scipy.special, name)(*args))
    _same(tsp.xlogy(2.0, 3.0), scipy.special.xlogy(2.0, 3.0))
    _same(tsp.logsumexp([1.0, 2.0]), scipy.special.logsumexp([1.0, 2.0]))
    assert type(tnp.float32(1.0)) is numpy.float32 and tnp.pi == numpy.pi


# arguments for the sweep below: the first that the library function accepts is used
_PLAIN_ARGS = [
    (numpy.array([0.3, 0.5, 0.7]),),
    (numpy.array([0.3, 0.5, 0.7]), numpy.array([0.2, 0.5, 0.9])),
    (numpy.array([[2.0, 0.5], [0.5, 1.0]]),),
    (numpy.array([[2.0, 0.5], [0.5, 1.0]]), numpy.array([1.0, 2.0])),
    (numpy.array([[1.0, 2.0], [3.0, 4.0]]), 1),
    ([numpy.ones(2), numpy.zeros(2)],),
    ("ii", numpy.eye(2)),
    (numpy.array([1, 0, 3]),),
    (3,),
    (0.4, 0.6, 3),
    ((2, 3),),
    ((2, 3), 1.5),
    (numpy.eye(2), numpy.eye(2)),
    (numpy.array([0.3, 0.5, 0.7]), (2, 3)),
    (numpy.ones((2, 3, 2)), 0, 1),
    (numpy.ones((2, 2, 2)), 2),
    (numpy.ones((2, 3)), (3, 2)),
    (numpy.array([1, 0, 3]), numpy.float32),
    (0.5, numpy.array([0.0, 1.0]), numpy.array([1.0, 3.0])),
    (numpy.array([1, 0]), [numpy.ones(2), numpy.zeros(2)]),  # choose
    ([numpy.array([True, False])], [numpy.array([1.0, 2.0])]),  # select
    (numpy.array([0.3, 0.5, 0.7]), numpy.array([2, 0]), 0),  # take_along_axis
]


def _library_result(f, args):
    try:
        with numpy.errstate(all="ignore"):
            return True, f(*args)
    except Exception:
        return False, None


def _namespaces():
    yield tnp, numpy
    yield tla, numpy.linalg
    yield tsp, scipy.special


@pytest.mark.parametrize("module, library", list(_namespaces()), ids=lambda m: m.__name__)
def test_every_function_on_plain_inputs_is_the_librarys(module, library):
    """Each public function, on the first of a few plain argument lists that the library
    function takes, gives the library's result exactly (type, dtype and values)."""
    tried = 0
    for name in module.__all__:
        f = getattr(module, name)
        if not callable(f) or name in ("getitem", "setitem"):  # tapegrad's own names
            continue
        lib = getattr(library, name)  # every public name exists in the library
        for args in _PLAIN_ARGS:
            ok, want = _library_result(lib, args)
            if not ok:
                continue
            with numpy.errstate(all="ignore"):
                got = f(*args)
            _same(got, want, f"{module.__name__}.{name}{args!r}")
            tried += 1
            break
    assert tried >= len(module.__all__) - 3  # all but linalg, getitem, setitem


# --- tensors anywhere in the arguments record ------------------------------------------------


def test_a_tensor_inside_a_list_keeps_its_gradient():
    x = tg.tensor([2.0, 3.0], requires_grad=True)
    cases = [
        (lambda: tnp.array([[x[0], 1.0], [2.0, x[1]]]), [1.0, 1.0]),
        (lambda: tnp.asarray([x[0], 2.0 * x[1]]), [1.0, 2.0]),
        (lambda: tnp.concatenate([numpy.ones(2), x]), [1.0, 1.0]),
        (lambda: tnp.stack([numpy.ones(2), x * x]), [4.0, 6.0]),
        (lambda: tnp.sum([[1.0, x[0]], [x[1], 2.0]]), [1.0, 1.0]),
        (lambda: tnp.max([1.0, x[1]]), [0.0, 1.0]),
        (lambda: tnp.clip(numpy.array([1.0, 2.5, 4.0]), a_min=x[0], a_max=x[1]), [1.0, 1.0]),
        (lambda: tnp.where(numpy.array([True, False]), 1.0, x), [0.0, 1.0]),
        (lambda: tnp.maximum(0.5, x), [1.0, 1.0]),
        (lambda: tnp.sum(numpy.array([x[0], x[1]]) * 2.0), [2.0, 2.0]),  # an object array
        (lambda: tla.norm([x[0], x[1]]) ** 2, [4.0, 6.0]),
        (lambda: tnp.einsum("i,i", numpy.ones(2), x), [1.0, 1.0]),
        (lambda: tnp.linspace(x[0], 4.0, 3), [1.5, 0.0]),
        (lambda: tsp.logsumexp([x[0], x[0]]), [1.0, 0.0]),
    ]
    for make, want in cases:
        x.grad = None
        y = make()
        assert isinstance(y, tg.Tensor) and y.requires_grad
        tnp.sum(y).backward()
        numpy.testing.assert_allclose(x.grad, want)


def test_storing_a_tensor_into_a_numpy_array_is_refused_not_silent():
    """``tnp.zeros`` is NumPy's array now: writing a tensor that requires grad into it
    would keep only the number (a silently wrong gradient), so it raises."""
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    a = tnp.zeros(3)
    for store in (
        lambda: exec("a[0] = x[0]", {"a": a, "x": x}),
        lambda: exec("a[1:2] = x[1]", {"a": a, "x": x}),
        lambda: exec("a[2] += x[0]", {"a": a, "x": x}),
    ):
        with pytest.raises((TypeError, ValueError)) as info:
            store()
        err = info.value
        text = f"{err} {err.__cause__}"
        assert "requires grad" in text, text
    numpy.testing.assert_array_equal(a, [0.0, 0.0, 0.0])
    a[0] = x[0].detach()  # asked for: the number
    a[1] = x[1].item()
    with tg.no_grad():
        a[2] = x[0]
    numpy.testing.assert_array_equal(a, [1.0, 2.0, 1.0])
    assert float(x[1]) == 2.0  # an explicit float() in eager code is the user's request


def test_gradient_through_a_script_that_mixes_plain_and_tensor():
    """Data preparation in plain NumPy (through tapegrad.numpy), the model in tensors."""

    def loss(params, np=tnp):
        w, b = params[:3], params[3]
        rng = numpy.random.default_rng(2)
        raw = rng.normal(size=(40, 3))
        X = (raw - np.mean(raw, axis=0)) / np.std(raw, axis=0)
        labels = np.array(X @ np.array([1.0, -2.0, 0.5]) > 0, dtype=np.int64)
        onehot = np.eye(2)[labels]
        batches = np.array_split(np.arange(len(X)), np.prod((2, 2)))
        total = 0.0
        for idx in batches:
            logits = np.stack([np.zeros(len(idx)), X[idx] @ w + b], axis=1)
            total = total - np.sum(onehot[idx] * tsp.log_softmax(logits, axis=1))
        return total / len(X)

    p = numpy.array([0.1, -0.2, 0.3, 0.05])
    got = tg.grad(loss)(p)
    numpy.testing.assert_allclose(got, numeric_grad(loss, p), rtol=1e-6, atol=1e-9)
    assert type(loss(p)) is numpy.float64  # plain parameters: a plain NumPy result
    check_grads(loss, (p,))


def test_a_simulation_differentiated_in_its_parameter():
    def final_position(k, np=tnp):
        dt, c = 0.05, 0.3
        x, v = [1.0], [0.0]
        for _ in range(60):
            v.append(v[-1] + dt * (-k * x[-1] - c * v[-1]))
            x.append(x[-1] + dt * v[-1])
        return np.sum(np.array(x[-10:]) ** 2)

    assert type(final_position(4.0)) is numpy.float64
    assert final_position(4.0) == final_position(4.0, numpy)
    numpy.testing.assert_allclose(
        tg.grad(final_position)(4.0), numeric_grad(final_position, 4.0), rtol=1e-6
    )


# --- integer and bool tensors; //, divmod, __index__ ------------------------------------------


def test_integer_and_bool_tensors_take_the_shape_ops():
    a = numpy.arange(12).reshape(3, 4)
    t = tg.tensor(a)
    m = tg.tensor(a % 3 == 0)
    for got, want in [
        (t.reshape(4, 3), a.reshape(4, 3)),
        (t.T, a.T),
        (t[1:, ::2], a[1:, ::2]),
        (t[[0, 2]], a[[0, 2]]),
        (t[m], a[a % 3 == 0]),
        (tnp.concatenate([t, t], axis=1), numpy.concatenate([a, a], axis=1)),
        (tnp.stack([t[0], t[1]]), numpy.stack([a[0], a[1]])),
        (m.reshape(-1), (a % 3 == 0).reshape(-1)),
        (tnp.concatenate([m, m]), numpy.concatenate([a % 3 == 0] * 2)),
        (tnp.where(m, t, -1), numpy.where(a % 3 == 0, a, -1)),
        (t // 5, a // 5),
        (7 // (t + 1), 7 // (a + 1)),
        (t % 5, a % 5),
        (tnp.floor_divide(t, 2.5), numpy.floor_divide(a, 2.5)),
    ]:
        assert isinstance(got, tg.Tensor)
        _same(got.numpy(), want)
    q, r = divmod(t, 5)
    _same((q.numpy(), r.numpy()), divmod(a, 5))
    q, r = tnp.divmod(t, 5)
    _same((q.numpy(), r.numpy()), numpy.divmod(a, 5))
    i = tg.tensor(numpy.int64(2))
    assert [10, 20, 30][i] == 30 and list(range(i)) == [0, 1] and numpy.zeros(i).shape == (2,)
    assert t[i, i].item() == 10 and numpy.arange(5)[i] == 2
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        list(i)
    assert [int(v) for v in tg.tensor([4, 5])] == [4, 5]
    for bad in (tg.tensor(2.0), tg.tensor(True), tg.tensor([2])):
        with pytest.raises(TypeError, match="only integer scalar tensors"):
            [1, 2, 3][bad]
    u = tg.tensor(numpy.arange(6.0))
    u //= 4
    u %= 1.5
    _same(u.numpy(), numpy.arange(6.0) // 4 % 1.5)


_EDGES = numpy.array(
    [0.0, -0.0, 1.0, -1.0, 0.1, -0.1, 3.0, -7.5, 1e300, -1e300, 5e-324, 1 / 3, 2.0**60 + 1]
)
_EDGES = numpy.concatenate([_EDGES, [numpy.inf, -numpy.inf, numpy.nan]])


@pytest.mark.parametrize("dtype", [numpy.float64, numpy.float32])
def test_floor_divide_has_numpys_values_and_gradient_zero(dtype):
    x, y = (g.ravel() for g in numpy.meshgrid(_EDGES, _EDGES))
    rng = numpy.random.default_rng(0)
    with numpy.errstate(over="ignore"):  # 1e300 is inf in float32
        x = numpy.concatenate([x, rng.normal(size=200) * 10]).astype(dtype)
        y = numpy.concatenate([y, rng.choice([0.1, 0.3, 0.7, -0.1, 2.5], 200)]).astype(dtype)
    tx, ty = tg.tensor(x, requires_grad=True), tg.tensor(y, requires_grad=True)
    with numpy.errstate(all="ignore"):
        want = numpy.floor_divide(x, y)
    for got in (tx // ty, tnp.floor_divide(tx, ty), divmod(tx, ty)[0], numpy.floor_divide(tx, ty)):
        assert got.dtype == dtype and got.requires_grad
        numpy.testing.assert_array_equal(got.numpy(), want)
        numpy.testing.assert_array_equal(numpy.signbit(got.numpy()), numpy.signbit(want))
    (tx // ty).sum().backward()  # piecewise constant: 0, also where y is 0 (no NaN)
    numpy.testing.assert_array_equal(tx.grad, numpy.zeros_like(x))
    numpy.testing.assert_array_equal(ty.grad, numpy.zeros_like(y))
    assert (tx // 2.0).dtype == dtype and (3.0 // tx).dtype == dtype


def test_divmod_remainder_has_gradient_one_in_x():
    x = tg.tensor([5.5, -3.25, 7.0], requires_grad=True)
    q, r = divmod(x, 2.0)
    (q * 0.0 + r * numpy.array([1.0, 2.0, 3.0])).sum().backward()
    numpy.testing.assert_array_equal(x.grad, [1.0, 2.0, 3.0])
    check_grads(lambda v: tnp.sum(tnp.divmod(v, 1.7)[1] ** 2), (numpy.array([2.5, 0.6]),))
    check_grads(lambda v: tnp.sum(v * (v // 0.7)), (numpy.array([2.5, 0.6]),))


# --- tg.compile: plain results and integer tensors never go stale ---------------------------


def test_compile_replays_integer_tensor_ops_on_new_values():
    """Integer tensor ops (NumPy on the values) are guarded reads: new index values run
    a new program, never the old one with stale constants."""

    def loss(w, idx):
        k = idx // 2
        r = idx % 3
        onehot = tnp.zeros((len(idx), 3))  # NumPy's array
        onehot[tnp.arange(len(idx)), r] = 1.0  # indexed by an integer tensor's values
        n = tnp.prod(w.shape)
        pick = w[k] * w[r] + w[idx.sum() // n]  # __index__ of a 0-d integer tensor
        return tnp.sum(pick) + tnp.sum(onehot @ w[:3]) + tnp.sum(w.reshape(n // 2, 2)[r[0]])

    step = tg.compile(loss)
    w = numpy.linspace(0.5, 2.0, 6)
    for idx in ([0, 1, 2, 5], [3, 3, 4, 1], [0, 1, 2, 5], [5, 5, 5, 5]):
        idx = numpy.array(idx)
        value, grad = step.value_and_grad(w, idx)
        want_value, want_grad = tg.value_and_grad(loss)(w, idx)
        assert value == want_value
        numpy.testing.assert_array_equal(grad, want_grad)
    assert step.stats["guard_failures"] > 0  # the reads were guarded


def test_compile_records_float_floor_divide():
    """Float // is recorded (no guard): replays follow new values."""

    def loss(w, h):  # h, a Python float, is a 0-d tensor while captured: it records
        q, r = divmod(w, h)
        plain_looking = tsp.gammaln(h + 1.0) + tnp.floor_divide(h, 0.1) * tnp.exp(h)
        return tnp.sum(w * (w // h)) + tnp.sum(r**2) + tnp.sum(q) + plain_looking

    step = tg.compile(loss)
    for scale, h in ((1.0, 0.3), (1.7, 0.3), (2.9, 0.45), (-1.3, 0.2)):
        w = numpy.array([0.25, 1.1, 2.6]) * scale
        value, grad = step.value_and_grad(w, h)
        want_value, want_grad = tg.value_and_grad(loss)(w, h)
        numpy.testing.assert_allclose(value, want_value, rtol=1e-14)
        numpy.testing.assert_allclose(grad, want_grad, rtol=1e-14)
    assert step.stats["captures"] == 1 and step.stats["guard_failures"] == 0


def test_compile_with_plain_numpy_inside():
    """Plain calls inside a compiled function are constants of the program (they do not
    depend on the arguments); calls on the arguments record."""

    def loss(w):
        scale = tnp.sqrt(tnp.prod((2, 2)))  # plain: numpy.float64(2.0)
        basis = tnp.eye(3)[tnp.array([2, 0, 1])]
        return tnp.sum(tnp.tanh(w @ basis) * scale)

    step = tg.compile(loss)
    for s in (1.0, 0.5, -2.0):
        w = numpy.array([0.1, 0.2, 0.3]) * s
        value, grad = step.value_and_grad(w)
        want_value, want_grad = tg.value_and_grad(loss)(w)
        numpy.testing.assert_allclose(value, want_value, rtol=1e-14)
        numpy.testing.assert_allclose(grad, want_grad, rtol=1e-14)
    assert step.stats["captures"] == 1
