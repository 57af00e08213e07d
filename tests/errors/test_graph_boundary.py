"""No silent wrong gradients: every way out of the graph records or raises.

Each snippet of the trust issue is here, asserting the true gradient (central
differences in float64) or the error it now raises; then the rules behind them:
``__array__`` and ``float()`` on tensors that require grad, lists and object arrays of
tensors, NumPy's creation functions, and a walk over NumPy's public namespace.
"""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest
import scipy.integrate as si
import scipy.linalg as sla
import scipy.sparse as ssp
import scipy.special as sp

import tapegrad as tg
import tapegrad.numpy as tnp

from ..helpers import numeric_grad


def cube_sum(x):
    return tnp.sum(x**3)


# --- the snippets --------------------------------------------------------------------

TRUE_GRADIENT = {
    "np.array of tensors": (lambda x: tnp.sum(np.array([x[0], 2 * x[1]])), np.ones(2)),
    "np.linspace of a tensor": (lambda a: tnp.sum(np.linspace(a, 2 * a, 5)), 1.0),
    "no_grad around the transform": (cube_sum, np.ones(2)),
    "np.full of a tensor": (lambda a: tnp.sum(np.full(3, a)), 1.3),
    "np.meshgrid of tensors": (lambda a: tnp.sum(np.meshgrid(a, 2 * a)[0] ** 2), np.ones(2)),
    "np.linalg.norm of a list": (lambda x: np.linalg.norm([x[0], 2 * x[1]]), np.array([1.0, 2.0])),
    "np.sum of a list": (lambda x: np.sum([x[0] * 2, x[1] ** 2]), np.array([1.0, 3.0])),
    "np.stack of a mixed list": (lambda x: tnp.sum(np.stack([x, np.ones(2)]) ** 2), np.ones(2)),
}


@pytest.mark.parametrize("name", sorted(TRUE_GRADIENT))
def test_snippets_now_give_the_true_gradient(name):
    f, x = TRUE_GRADIENT[name]
    if name == "no_grad around the transform":
        with tg.no_grad():  # transforms turn grad mode on inside, as torch.func.grad does
            got = tg.grad(f)(x)
    else:
        got = tg.grad(f)(x)
    np.testing.assert_allclose(got, numeric_grad(f, x), rtol=1e-7, atol=1e-8)


RAISES = {
    "scipy.linalg.expm": (
        lambda: tg.grad(lambda a: tnp.sum(sla.expm(a)))(np.zeros((2, 2))),
        TypeError,
        r"scipy\.linalg\.expm converts a tensor that requires grad",
    ),
    "scipy.special.logsumexp": (
        lambda: tg.grad(lambda x: sp.logsumexp(x))(np.zeros(2)),
        TypeError,
        r"scipy\.special\.logsumexp converts.*use tapegrad\.special\.logsumexp",
    ),
    "scipy.sparse matmul": (
        lambda: tg.grad(lambda x: tnp.sum(ssp.eye(2, format="csr") @ x))(np.ones(2)),
        TypeError,
        r"scipy\.sparse.* converts a tensor that requires grad",
    ),
    "float() inside a transform": (
        lambda: tg.grad(lambda x: float(x[0]) * x[1])(np.full(2, 3.0)),
        TypeError,
        r"float\(\) of a tensor that requires grad .* inside a function being differentiated",
    ),
    "random draw around a tensor": (
        lambda: tg.grad(lambda x: tnp.sum(np.random.default_rng(0).normal(x, 1.0)))(np.ones(2)),
        TypeError,
        "converts a tensor that requires grad",
    ),
    "np.mean of a list": (
        lambda: tg.grad(lambda x: np.mean([x[0] * 2, x[1]]))(np.ones(2)),
        TypeError,
        r"numpy\.mean converts .* use tapegrad\.numpy\.mean",
    ),
    "solve_ivp on a model": (
        lambda: tg.grad(lambda k: si.solve_ivp(lambda t, y: -k * y, (0, 1), [1.0]).y[0, -1])(0.5),
        TypeError,
        "requires grad",
    ),
    "odeint on a model": (
        lambda: tg.grad(lambda k: si.odeint(lambda y, t: -k * y, 1.0, [0.0, 1.0])[-1, 0])(0.5),
        TypeError,
        "requires grad",
    ),
    "quad on a model": (
        lambda: tg.grad(lambda k: si.quad(lambda t: k * t, 0.0, 1.0)[0])(0.5),
        TypeError,
        r"scipy\.integrate\.quad converts a tensor that requires grad",
    ),
}


@pytest.mark.parametrize("name", sorted(RAISES))
def test_snippets_now_raise_a_clear_error(name):
    call, kind, message = RAISES[name]
    with pytest.raises(kind, match=message):
        call()


def test_an_inner_transform_never_touches_outer_leaves():
    w = tg.tensor([2.0, 3.0], requires_grad=True)
    # the inner function closes over w but does not depend on it differentiably
    g = tg.grad(lambda x: tnp.sum(x * w.detach()))(np.ones(2))
    np.testing.assert_array_equal(g, [2.0, 3.0])
    assert w.grad is None
    # a transform's own leaves are fresh: .grad of the caller's tensors is untouched
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    np.testing.assert_array_equal(tg.grad(cube_sum)(x.detach()), [3.0, 12.0])
    assert x.grad is None


def test_output_independent_of_input_gives_zeros_with_a_warning():
    with pytest.warns(UserWarning, match="does not depend on the differentiated"):
        g = tg.grad(lambda x: tnp.sum(np.ones(2)) * 2.0)(np.ones(3))
    np.testing.assert_array_equal(g, np.zeros(3))
    with pytest.warns(UserWarning, match="does not depend"):
        j = tg.jacobian(lambda x: tg.tensor([1.0, 2.0]))(np.ones(3))
    assert j.shape == (2, 3) and not j.any()


# --- __array__, float(), and lists of tensors -------------------------------------------------


def test_implicit_array_conversion_raises_and_names_the_function():
    x = tg.tensor([0.5, 1.5], requires_grad=True)
    with pytest.raises(TypeError, match=r"np\.asarray / np\.array converts .*t\.detach\(\)"):
        np.asarray(x)
    with pytest.raises(TypeError, match=r"scipy\.special\.logsumexp .* tapegrad\.special"):
        sp.logsumexp(x * 2)
    with pytest.raises(TypeError, match=r"scipy\.linalg\.solve converts"):
        sla.solve(np.eye(2), x)
    np.testing.assert_array_equal(np.asarray(x.detach()), [0.5, 1.5])  # explicit
    np.testing.assert_array_equal(x.numpy(), [0.5, 1.5])
    with tg.no_grad():  # no gradient asked for
        np.testing.assert_array_equal(np.asarray(x), [0.5, 1.5])
    # a tensor that does not require grad converts freely
    assert sp.logsumexp(tg.tensor([0.0, 0.0])) == pytest.approx(np.log(2))


def test_float_is_explicit_in_eager_code_but_not_from_numpy_or_in_transforms():
    x = tg.tensor([2.0, 3.0], requires_grad=True)
    assert float(x[0]) == 2.0 and x[1].item() == 3.0 and int(x[0]) == 2  # eager: asked for
    with pytest.raises(TypeError, match=r"numpy\.mean converts"):
        np.mean([x[0], x[1]])  # NumPy's own code would make the Python float
    for conv in (float, int, lambda t: t.item()):
        with pytest.raises(TypeError, match="inside a function being differentiated"):
            tg.grad(lambda v, conv=conv: conv(v[0]) * v[1])(np.ones(2))

    # under no_grad the user says no gradient is wanted: allowed inside a transform
    def f(v):
        with tg.no_grad():
            k = float(v[0])
        return v[1] * k

    np.testing.assert_array_equal(tg.grad(f)(np.array([2.0, 5.0])), [0.0, 2.0])
    # comparisons stay free for control flow
    np.testing.assert_array_equal(
        tg.grad(lambda v: tnp.sum(v**2) if v.sum() > 0 else tnp.sum(-v))(np.ones(2)), [2.0, 2.0]
    )


def test_object_arrays_of_tensors_keep_the_graph():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    a = np.array([x[0], 2 * x[1], 3.0])  # NumPy makes an object array holding the tensors
    assert a.dtype == object
    y = tnp.sum(a * x[0])
    y.backward()
    np.testing.assert_allclose(x.grad, [1 + 4 + 3 + 1, 2])  # d/dx0 of x0^2 + 4 x0 x1 + 3 x0
    with pytest.raises(TypeError, match="copies values"):
        tg.tensor(a)
    # NumPy's object loops call the tensors' own methods (named like the ufuncs)
    x.grad = None
    tnp.sum(np.exp(np.array([x[0], 2 * x[1]]))).backward()
    np.testing.assert_allclose(x.grad, [np.exp(1.0), 2 * np.exp(4.0)])
    assert tnp.sum(np.array([x[0], 1])).item() == 2.0  # mixed with a Python int
    with pytest.raises(TypeError, match=r"numpy\.std converts"):
        np.std([x[0], x[1]])
    with pytest.raises(TypeError, match="converts a tensor that requires grad"):
        np.array([x, x])  # tensors with elements: tnp.stack / tnp.array instead
    np.testing.assert_array_equal(tnp.array([x, x]).numpy(), [[1.0, 2.0], [1.0, 2.0]])


def test_integer_index_and_size_conversions():
    i = tg.tensor(2)
    assert [10, 20, 30][i] == 30 and list(range(i)) == [0, 1]
    for not_an_index in (tg.tensor(1.0), tg.tensor(True), tg.tensor([1])):  # as NumPy's
        with pytest.raises(TypeError, match="only integer scalar tensors can be an index"):
            [1, 2, 3][not_an_index]


# --- creation functions --------------------------------------------------------------------


def test_creation_functions_are_differentiable_or_refuse():
    np.testing.assert_allclose(
        tg.grad(lambda a: tnp.sum(tnp.linspace(a, 3.0, 4) ** 2))(1.0),
        numeric_grad(lambda a: tnp.sum(tnp.linspace(a, 3.0, 4) ** 2), 1.0),
    )
    f = lambda b: tnp.sum(tnp.logspace(0.0, b, 3, base=2.0))  # noqa: E731
    np.testing.assert_allclose(tg.grad(f)(1.5), numeric_grad(f, 1.5), rtol=1e-7)
    f = lambda v: tnp.sum(tnp.full_like(np.ones((2, 2)), v[0]) * v[1])  # noqa: E731
    np.testing.assert_allclose(tg.grad(f)(np.array([2.0, 3.0])), [12.0, 8.0])
    out, step = tnp.linspace(tg.tensor(0.0), tg.tensor(1.0), 5, retstep=True)
    assert step.item() == 0.25 and out.shape == (5,)
    np.testing.assert_allclose(
        tnp.linspace(tg.tensor([0.0, 1.0]), 2.0, 3, axis=1).numpy(),
        np.linspace([0.0, 1.0], 2.0, 3, axis=1),
    )
    for ij in ("xy", "ij"):
        got = tnp.meshgrid(tg.tensor([1.0, 2.0]), tg.tensor([3.0, 4.0, 5.0]), indexing=ij)
        want = np.meshgrid([1.0, 2.0], [3.0, 4.0, 5.0], indexing=ij)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w)
    x = tg.tensor(3.0, requires_grad=True)
    with pytest.raises(TypeError, match="arange uses only its values"):
        tnp.arange(x)
    assert tnp.zeros_like(x).shape == () and not tnp.zeros_like(x).requires_grad
    assert tnp.isnan(x * np.nan).item() and not tnp.isfinite(x / 0.0).item()


# --- the public NumPy namespace --------------------------------------------------------------

# not callable on one array in any meaningful way, or with side effects
_NOT_CALLED = {
    "save", "savez", "savez_compressed", "savetxt", "load", "loadtxt", "genfromtxt",
    "fromfile", "memmap", "info", "show_config", "show_runtime", "test", "get_include",
    "set_printoptions", "printoptions", "setbufsize", "seterr", "seterrcall", "from_dlpack",
    "frombuffer", "fromregex", "fromstring", "getbufsize", "geterr", "geterrcall",
    "get_printoptions", "asmatrix", "bmat", "vectorize", "frompyfunc", "piecewise",
    "apply_along_axis", "apply_over_axes", "nditer", "einsum_path", "broadcast", "ndindex",
    "ndenumerate", "errstate", "busdaycalendar", "seed", "set_state", "set_bit_generator",
    "get_bit_generator",
}  # fmt: skip
# the tensor is a size, a shape or a flag there (int()/bool() in NumPy's C code): the
# result does not depend on it differentiably
_SIZE_ARGUMENTS = {
    "numpy": {"empty", "ones", "zeros"},
    "numpy.random": {
        "get_state", "random", "random_sample", "ranf", "sample", "standard_cauchy",
        "standard_exponential", "standard_normal",
    },
}  # fmt: skip


def _silently_numeric(r):
    """A result that holds floats computed from the tensor's values: a lost gradient."""
    if isinstance(r, tg.Tensor):
        return False
    if isinstance(r, float | complex | np.floating | np.complexfloating):
        return True
    if isinstance(r, np.ndarray):
        if r.dtype == object:
            return any(_silently_numeric(v) for v in r.flat)
        return r.dtype.kind in "fc"
    if isinstance(r, list | tuple):
        return any(_silently_numeric(v) for v in r)
    return False


@pytest.mark.parametrize("module", ["numpy", "numpy.linalg", "numpy.fft", "numpy.random"])
def test_numpy_namespace_never_returns_values_of_a_tensor_that_requires_grad(module):
    mod = {"numpy": np, "numpy.linalg": np.linalg, "numpy.fft": np.fft, "numpy.random": np.random}[
        module
    ]
    lost = []
    saved = (np.random.get_state(), np.geterr(), np.get_printoptions())  # noqa: NPY002
    try:
        _walk(mod, module, lost)
    finally:  # whatever a function did to NumPy's global state
        np.random.set_state(saved[0])  # noqa: NPY002
        np.seterr(**saved[1])
        np.set_printoptions(**saved[2])
    assert not lost, "returned values of a tensor that requires grad: " + ", ".join(lost)


def _walk(mod, module, lost):
    for name in sorted(dir(mod)):
        f = getattr(mod, name)
        if name.startswith("_") or name in _NOT_CALLED or name in _SIZE_ARGUMENTS.get(module, ()):
            continue
        if isinstance(f, type | types.ModuleType) or not callable(f):
            continue
        for shape in [(), (3,), (3, 3)]:
            values = np.linspace(0.2, 0.9, int(np.prod(shape))).reshape(shape)
            x = tg.tensor(values, requires_grad=True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    r = f(x)
                except Exception:  # raising is what a function tapegrad lacks must do
                    continue
            if _silently_numeric(r):
                lost.append(f"{module}.{name} on shape {shape}")


# --- more ways a transform could lose a gradient ----------------------------------------------


def test_jacobian_of_pytrees_and_lists():
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    ja, jb = tg.jacobian(lambda xs: xs[0] * xs[1])([a, b])
    np.testing.assert_allclose(ja, np.diag(b))
    np.testing.assert_allclose(jb, np.diag(a))
    (j0, j1), jc = tg.jacobian(lambda xs, c: xs[0] * xs[1] * c, argnums=(0, 1))([a, b], 2.0)
    np.testing.assert_allclose(j0, 2 * np.diag(b))
    np.testing.assert_allclose(j1, 2 * np.diag(a))
    np.testing.assert_allclose(jc, a * b)
    jl = tg.jacobian(lambda x: [x[0] ** 2, x[1]])(a)  # a list output is stacked
    np.testing.assert_allclose(jl, [[2.0, 0.0], [0.0, 1.0]])


def test_a_transform_argument_used_from_another_thread_raises():
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as ex:

        def f(z):
            return tnp.sum(z) * sum(ex.map(lambda i: float(z[i]), range(2)))

        with pytest.raises(RuntimeError, match="used outside that transform's recording"):
            tg.grad(f)(np.ones(2))


def test_hooks_on_transform_arguments_run():
    def f(z):
        z.register_hook(lambda g: g * 100)
        return tnp.sum(z**2)

    np.testing.assert_allclose(tg.grad(f)(np.array([1.0, 2.0])), [200.0, 400.0])


def test_outer_no_grad_makes_outside_tensors_constants():
    w = tg.tensor([2.0, 3.0], requires_grad=True)
    with tg.no_grad():
        np.testing.assert_allclose(tg.grad(lambda x: tnp.sum(x * w))(np.ones(2)), [2.0, 3.0])
    assert w.grad is None
    with pytest.raises(RuntimeError, match="not one of the transform's arguments"):
        tg.grad(lambda x: tnp.sum(x * w))(np.ones(2))

    def own_backward(x):
        (w * 2.0).sum().backward()
        return tnp.sum(x)

    with pytest.raises(RuntimeError, match=r"backward\(\) inside a function being differentiated"):
        tg.grad(own_backward)(np.ones(2))


def test_functions_named_like_numpys_but_different_are_not_confused():
    x = tg.tensor([-1.0, 4.0], requires_grad=True)
    with pytest.raises(TypeError, match=r"numpy\.lib\.scimath\.sqrt is not supported"):
        np.emath.sqrt(x)  # complex results for negatives: not numpy.sqrt
    with pytest.raises(TypeError, match=r"scipy\.special\.kv is not supported"):
        sp.kv(1.5, x)
    np.testing.assert_allclose(sp.expit(x).numpy(), sp.expit(x.numpy()))  # tapegrad's own
