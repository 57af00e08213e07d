"""Linear algebra beyond the generated table tests: decompositions against
``torch.linalg`` on random inputs, their non-differentiable points (repeated
eigenvalues and singular values), bad input, and value reads inside ``tg.compile``
(pivots, expm's squarings) that must not go stale.

The table's own cases (``tapegrad/ops/linalg/rows.py``) already check every row's values
against NumPy / SciPy and its gradients against central differences in float64 and
float32, at second order and in forward mode (tests/test_ops.py, tests/test_higher.py).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.scipy.linalg as tsla
from tapegrad.testing import check_grads

RNG = np.random.default_rng(20261205)


def _sym(a: np.ndarray) -> np.ndarray:
    return a + np.swapaxes(a, -1, -2)


def _grad(f, *args):
    leaves = [tg.tensor(a, requires_grad=True) for a in args]
    out = f(*leaves)
    out.backward()
    return out.numpy(), [leaf.grad for leaf in leaves]


# --- against torch.linalg: 20 random inputs per function ------------------------------------

# (name, tapegrad loss, torch loss, input shapes, input maker); losses are invariant to
# the signs of eigen- and singular vectors
ORACLES = [
    (
        "eigh",
        lambda a: (
            tnp.sum(tnp.linalg.eigh(a)[0] * np.arange(4.0))
            + tnp.sum(tnp.linalg.eigh(a)[1] ** 3 * tnp.linalg.eigh(a)[1])
        ),
        lambda t, a: (
            (t.linalg.eigh(a)[0] * t.arange(4.0, dtype=a.dtype)).sum()
            + (t.linalg.eigh(a)[1] ** 4).sum()
        ),
        [(4, 4)],
        _sym,
    ),
    (
        "eigvalsh",
        lambda a: tnp.sum(tnp.linalg.eigvalsh(a) ** 2),
        lambda t, a: (t.linalg.eigvalsh(a) ** 2).sum(),
        [(2, 3, 3)],
        _sym,
    ),
    (
        "svd",
        lambda a: (
            tnp.sum(tnp.linalg.svd(a, full_matrices=False)[1] ** 3)
            + tnp.sum(tnp.linalg.svd(a, full_matrices=False)[0] ** 2 * np.arange(4.0)[:, None])
            + tnp.sum(tnp.linalg.svd(a, full_matrices=False)[2] ** 4)
        ),
        lambda t, a: (
            (t.linalg.svd(a, full_matrices=False)[1] ** 3).sum()
            + (
                t.linalg.svd(a, full_matrices=False)[0] ** 2 * t.arange(4.0, dtype=a.dtype)[:, None]
            ).sum()
            + (t.linalg.svd(a, full_matrices=False)[2] ** 4).sum()
        ),
        [(4, 3)],
        None,
    ),
    (
        "svd, wide",
        lambda a: tnp.sum(tnp.linalg.svd(a, full_matrices=False)[2] ** 2 * np.arange(5.0)),
        lambda t, a: (
            t.linalg.svd(a, full_matrices=False)[2] ** 2 * t.arange(5.0, dtype=a.dtype)
        ).sum(),
        [(3, 5)],
        None,
    ),
    (
        "svdvals",
        lambda a: tnp.sum(tnp.linalg.svdvals(a)),
        lambda t, a: t.linalg.svdvals(a).sum(),
        [(2, 3, 4)],
        None,
    ),
    (
        "qr, tall",
        lambda a: (
            tnp.sum(tnp.linalg.qr(a)[0] * np.arange(12.0).reshape(4, 3))
            + tnp.sum(tnp.linalg.qr(a)[1] ** 2)
        ),
        lambda t, a: (
            (t.linalg.qr(a)[0] * t.arange(12.0, dtype=a.dtype).reshape(4, 3)).sum()
            + (t.linalg.qr(a)[1] ** 2).sum()
        ),
        [(4, 3)],
        None,
    ),
    (
        "qr, wide",
        lambda a: tnp.sum(tnp.linalg.qr(a)[1] * np.arange(15.0).reshape(3, 5)),
        lambda t, a: (t.linalg.qr(a)[1] * t.arange(15.0, dtype=a.dtype).reshape(3, 5)).sum(),
        [(3, 5)],
        None,
    ),
    (
        "pinv",
        lambda a: tnp.sum(tnp.linalg.pinv(a) * np.arange(15.0).reshape(3, 5)),
        lambda t, a: (t.linalg.pinv(a) * t.arange(15.0, dtype=a.dtype).reshape(3, 5)).sum(),
        [(5, 3)],
        None,
    ),
    (
        "lstsq",
        lambda a, b: tnp.sum(tnp.linalg.lstsq(a, b)[0] ** 2),
        lambda t, a, b: (t.linalg.lstsq(a, b, driver="gelsd").solution ** 2).sum(),
        [(6, 3), (6, 2)],
        None,
    ),
    (
        "matrix_power",
        lambda a: tnp.sum(tnp.linalg.matrix_power(a, 5) * np.arange(9.0).reshape(3, 3)),
        lambda t, a: (
            t.linalg.matrix_power(a, 5) * t.arange(9.0, dtype=a.dtype).reshape(3, 3)
        ).sum(),
        [(3, 3)],
        None,
    ),
    (
        "multi_dot",
        lambda a, b, c: tnp.sum(tnp.linalg.multi_dot([a, b, c]) ** 2),
        lambda t, a, b, c: (t.linalg.multi_dot([a, b, c]) ** 2).sum(),
        [(2, 5), (5, 3), (3, 4)],
        None,
    ),
    (
        "norm ord 2",
        lambda a: tnp.linalg.norm(a, 2) + tnp.linalg.norm(a, -2) + tnp.linalg.norm(a, "nuc"),
        lambda t, a: (
            t.linalg.matrix_norm(a, 2)
            + t.linalg.matrix_norm(a, -2)
            + t.linalg.matrix_norm(a, "nuc")
        ),
        [(4, 3)],
        None,
    ),
    (
        "expm",
        lambda a: tnp.sum(tsla.expm(a) * np.arange(9.0).reshape(3, 3)),
        lambda t, a: (t.linalg.matrix_exp(a) * t.arange(9.0, dtype=a.dtype).reshape(3, 3)).sum(),
        [(3, 3)],
        lambda a: 2.0 * a,
    ),
    (
        "solve_triangular",
        lambda a, b: tnp.sum(tsla.solve_triangular(a, b, lower=True) ** 2),
        lambda t, a, b: (t.linalg.solve_triangular(a.tril(), b, upper=False) ** 2).sum(),
        [(3, 3), (3, 2)],
        lambda a: a + 3.0 * np.eye(3),
    ),
    (
        "lu_factor, lu_solve",
        lambda a, b: tnp.sum(tsla.lu_solve(tsla.lu_factor(a), b) ** 2),
        lambda t, a, b: (t.linalg.lu_solve(*t.linalg.lu_factor(a), b) ** 2).sum(),
        [(4, 4), (4, 2)],
        None,
    ),
    (
        "cho_factor, cho_solve",
        lambda a, b: tnp.sum(tsla.cho_solve(tsla.cho_factor(a @ a.T + 4.0 * np.eye(3)), b) ** 2),
        lambda t, a, b: (
            t.cholesky_solve(b, t.linalg.cholesky(a @ a.T + 4.0 * t.eye(3, dtype=a.dtype))) ** 2
        ).sum(),
        [(3, 3), (3, 2)],
        None,
    ),
]


@pytest.mark.parametrize("name, f, ft, shapes, make", ORACLES, ids=[o[0] for o in ORACLES])
def test_against_torch(name, f, ft, shapes, make):
    t = pytest.importorskip("torch")
    for trial in range(20):
        args = [RNG.uniform(-1, 1, s) for s in shapes]
        if make is not None:
            args[0] = make(args[0])
        value, grads = _grad(f, *args)
        targs = [t.tensor(a, requires_grad=True) for a in args]
        tout = ft(t, *targs)
        tout.backward()
        np.testing.assert_allclose(value, tout.item(), rtol=1e-9, err_msg=f"{name} #{trial}")
        for g, ta in zip(grads, targs, strict=True):
            np.testing.assert_allclose(
                g, ta.grad.numpy(), rtol=1e-7, atol=1e-9, err_msg=f"{name} #{trial}"
            )


def test_eig_against_torch():
    t = pytest.importorskip("torch")
    for _ in range(20):
        a = np.triu(RNG.uniform(-1, 1, (4, 4))) + 0.1 * RNG.uniform(-1, 1, (4, 4))
        a += np.diag([0.0, 5.0, 10.0, 15.0])

        def f(x):
            w, v = tnp.linalg.eig(x)
            return tnp.sum(w * np.arange(4.0)) + tnp.sum(v**4)

        value, (g,) = _grad(f, a)
        ta = t.tensor(a, requires_grad=True)
        w, v = t.linalg.eig(ta)
        tout = (w.real * t.arange(4.0, dtype=ta.dtype)).sum() + ((v * v.conj()).real ** 2).sum()
        tout.backward()
        np.testing.assert_allclose(value, tout.item(), rtol=1e-9)
        np.testing.assert_allclose(g, ta.grad.numpy(), rtol=1e-7, atol=1e-9)


# --- at and near the non-differentiable points ----------------------------------------------


def test_eigvalsh_at_repeated_eigenvalues_is_finite():
    # sum of squared eigenvalues is ||A||_F^2: gradient 2A, even with w = (1, 1, 3)
    a = np.diag([1.0, 1.0, 3.0])
    q = np.linalg.qr(RNG.standard_normal((3, 3)))[0]
    a = q @ a @ q.T
    _, (g,) = _grad(lambda x: tnp.sum(tnp.linalg.eigvalsh(x) ** 2), a)
    np.testing.assert_allclose(g, 2 * a, atol=1e-12)
    _, (g,) = _grad(lambda x: tnp.sum(tnp.linalg.svdvals(x)), np.eye(3))
    np.testing.assert_allclose(g, np.eye(3), atol=1e-12)  # the nuclear norm at I


def test_eigenvectors_at_repeated_eigenvalues_are_not_silently_plausible():
    # the documented caveat: eigenvectors of a repeated eigenvalue have no gradient; in a
    # generic basis of the repeated eigenspace the backward divides by (rounding-sized)
    # gaps and gives inf, NaN or huge numbers, never a plausible-looking one
    q = np.linalg.qr(RNG.standard_normal((3, 3)))[0]
    a = q @ np.diag([1.0, 1.0, 3.0]) @ q.T
    _, (g,) = _grad(lambda x: tnp.sum(tnp.linalg.eigh(x)[1][:, 0] ** 2 * np.arange(3.0)), a)
    assert not np.all(np.isfinite(g)) or np.abs(g).max() > 1e6


def test_near_degenerate_eigh_matches_differences():
    # eigenvalues 1 and 1 + 1e-4: large but exact gradients of a gauge-invariant loss
    q = np.linalg.qr(RNG.standard_normal((3, 3)))[0]
    a = q @ np.diag([1.0, 1.0 + 1e-4, 3.0]) @ q.T
    c = RNG.standard_normal((3, 3))
    check_grads(
        lambda x: tnp.sum(tnp.linalg.eigh(0.5 * (x + x.T))[1][:, 0] ** 2 * c[:, 0]),
        [a],
        eps=1e-8,
        rtol=1e-4,
    )


def test_pinv_with_repeated_singular_values_is_finite_and_right():
    q = np.linalg.qr(RNG.standard_normal((4, 4)))[0][:, :3] * 2.0  # s = (2, 2, 2)
    check_grads(lambda x: tnp.sum(tnp.linalg.pinv(x) ** 3), [q])
    check_grads(lambda x: tnp.sum(tnp.linalg.pinv(x) ** 3), [q], order=2)


def test_rank_deficient_lstsq():
    a = RNG.standard_normal((5, 1)) @ RNG.standard_normal((1, 3))  # rank 1
    b = RNG.standard_normal(5)
    x, res, rank, s = tnp.linalg.lstsq(tg.tensor(a), tg.tensor(b))
    xn, resn, rankn, sn = np.linalg.lstsq(a, b)
    assert rank == rankn == 1
    assert res.shape == resn.shape == (0,)
    np.testing.assert_allclose(x.numpy(), xn, atol=1e-12)
    np.testing.assert_allclose(s.numpy(), sn, atol=1e-12)
    # the factors move, the rank stays 1: the minimum-norm solution is differentiable
    u, v = RNG.standard_normal((5, 1)), RNG.standard_normal((1, 3))
    check_grads(lambda u, v, b: tnp.sum(tnp.linalg.lstsq(u @ v, b)[0] ** 2), [u, v, b])


# --- bad input -----------------------------------------------------------------------------


def test_errors_name_op_shapes_and_dtypes():
    rot = tg.tensor(np.array([[0.0, -1.0], [1.0, 0.0]]), requires_grad=True)
    with pytest.raises(np.linalg.LinAlgError, match=r"eig: complex eigenvalues.*\(2, 2\)"):
        tnp.linalg.eig(rot)
    wide = tg.tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(NotImplementedError, match=r"svd: full_matrices=True.*\(2, 3\) float64"):
        tnp.linalg.svd(wide)
    tall = tg.tensor(np.ones((3, 2)), requires_grad=True)
    with pytest.raises(NotImplementedError, match=r"qr: mode='complete'.*\(3, 2\)"):
        tnp.linalg.qr(tall, mode="complete")
    with pytest.raises(np.linalg.LinAlgError, match="solve_triangular: singular matrix"):
        tsla.solve_triangular(tg.tensor(np.array([[1.0, 0.0], [1.0, 0.0]])), np.ones(2), lower=True)
    with pytest.raises(ValueError, match=r"solve_triangular: shapes of a \(2, 2\) float64"):
        tsla.solve_triangular(tg.tensor(np.eye(2)), np.ones(3))
    with pytest.raises(np.linalg.LinAlgError, match="lstsq: 3-dimensional"):
        tnp.linalg.lstsq(tg.tensor(np.ones((2, 3, 3))), np.ones(3))
    with pytest.raises(np.linalg.LinAlgError, match="eigh: last 2 dimensions"):
        tnp.linalg.eigh(tg.tensor(np.ones((2, 3))))
    with pytest.raises(ValueError, match="eigh: UPLO"):
        tnp.linalg.eigh(tg.tensor(np.eye(2)), UPLO="X")
    with pytest.raises(np.linalg.LinAlgError, match="cholesky: matrix is not positive definite"):
        tsla.cho_factor(tg.tensor(-np.eye(2)))
    with pytest.raises(TypeError, match="matrix_power: exponent must be an integer"):
        tnp.linalg.matrix_power(tg.tensor(np.eye(2)), 1.5)
    # the plain full SVD of a non-square matrix that needs no gradient is NumPy's
    u, _, vh = tnp.linalg.svd(tg.tensor(np.arange(6.0).reshape(2, 3)))
    assert u.shape == (2, 2) and vh.shape == (3, 3)


def test_failed_decomposition_leaves_the_tape_usable():
    x = tg.tensor(np.array([[0.0, -1.0], [1.0, 0.0]]), requires_grad=True)
    with pytest.raises(np.linalg.LinAlgError):
        tnp.linalg.eig(x)
    y = tnp.sum(tnp.linalg.eigvalsh(x + x.T) ** 2)
    y.backward()
    np.testing.assert_allclose(x.grad, 4 * (x.numpy() + x.numpy().T))


def test_scipy_functions_on_tensors_point_to_tapegrad():
    x = tg.tensor(np.eye(2), requires_grad=True)
    with pytest.raises(TypeError, match=r"use tapegrad\.scipy\.linalg\.expm"):
        sla.expm(x)
    with pytest.raises(TypeError, match=r"use tapegrad\.scipy\.linalg\.solve_triangular"):
        sla.solve_triangular(x, np.ones(2))


# --- value reads inside tg.compile ---------------------------------------------------------


def test_compiled_lu_solve_follows_the_pivots():
    # pivots come from the values: a matrix that pivots differently must not replay the
    # first one's permutation
    def loss(a, b):
        return tnp.sum(tsla.lu_solve(tsla.lu_factor(a), b) ** 2)

    step = tg.compile(loss, argnums=(0, 1))
    b = RNG.standard_normal(3)
    for a in (
        np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]]),
        np.array([[0.1, 1.0, 0.0], [4.0, 3.0, 1.0], [0.0, 1.0, 2.0]]),
        np.array([[0.1, 1.0, 0.0], [0.2, 3.0, 1.0], [5.0, 1.0, 2.0]]),
        np.array([[4.5, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]]),
    ):
        v, (ga, gb) = step.value_and_grad(a, b)
        x = np.linalg.solve(a, b)
        np.testing.assert_allclose(v, np.sum(x**2), rtol=1e-12)
        gb_want = 2 * np.linalg.solve(a.T, x)
        np.testing.assert_allclose(gb, gb_want, rtol=1e-10)
        np.testing.assert_allclose(ga, -np.outer(gb_want, x), rtol=1e-10, atol=1e-12)


def test_compiled_expm_follows_the_scaling():
    step = tg.compile(lambda a: tnp.sum(tsla.expm(a)))
    c = RNG.standard_normal((3, 3))
    for scale in (0.1, 0.2, 8.0, 30.0, 0.3):
        a = scale * c
        value, got = step.value_and_grad(a)
        np.testing.assert_allclose(value, np.sum(sla.expm(a)), rtol=1e-12)
        want = tg.grad(lambda a: tnp.sum(tsla.expm(a)))(a)
        np.testing.assert_allclose(got, want, rtol=1e-10)
        # the Frechet derivative of sum(expm) is expm(A^T) summed against ones
        e = np.zeros((6, 6))
        e[:3, :3] = e[3:, 3:] = a.T
        e[:3, 3:] = np.ones((3, 3))
        np.testing.assert_allclose(got, sla.expm(e)[:3, 3:], rtol=1e-9)
    assert step.stats["captures"] < 5  # the scalings 0.1, 0.2 and 0.3 share a program


def test_eigh_float32_stays_float32():
    a = _sym(RNG.standard_normal((3, 3))).astype(np.float32)
    x = tg.tensor(a, requires_grad=True)
    w, v = tnp.linalg.eigh(x)
    assert w.dtype == v.dtype == np.float32
    (tnp.sum(w) + tnp.sum(v**2)).backward()
    assert x.grad.dtype == np.float32


# --- findings of a hostile review: each was a silent wrong number or shape --------------------


def test_lstsq_negative_rcond_is_machine_precision():
    a = RNG.standard_normal((4, 3))
    a[:, 2] = a[:, 0] + a[:, 1]  # rank 2
    b = RNG.standard_normal(4)
    x, _, rank, _ = tnp.linalg.lstsq(tg.tensor(a), b, rcond=-1)
    xn, _, rankn, _ = np.linalg.lstsq(a, b, rcond=-1)
    assert rank == rankn == 2
    np.testing.assert_allclose(x.numpy(), xn, atol=1e-10)


def test_solves_of_stacked_factors_with_a_vector():
    s = RNG.standard_normal((3, 3, 3))
    s = s @ np.swapaxes(s, -1, -2) + 3 * np.eye(3)
    b = RNG.standard_normal(3)
    for stack in (s, s[:2]):
        got = tsla.cho_solve(tsla.cho_factor(tg.tensor(stack)), b).numpy()
        np.testing.assert_allclose(got, sla.cho_solve(sla.cho_factor(stack), b), rtol=1e-10)
        for trans in (0, 1):
            got = tsla.lu_solve(tsla.lu_factor(tg.tensor(stack)), b, trans=trans).numpy()
            want = sla.lu_solve(sla.lu_factor(stack), b, trans=trans)
            np.testing.assert_allclose(got, want, rtol=1e-10)
        np.testing.assert_allclose(
            tnp.linalg.solve(tg.tensor(stack), b).numpy(), np.linalg.solve(stack, b), rtol=1e-10
        )


def test_einsum_sublists_use_numpys_letters():
    m = RNG.standard_normal((3, 3))
    np.testing.assert_allclose(tnp.einsum(tg.tensor(m), [26, 0]).numpy(), np.einsum(m, [26, 0]))
    got = tnp.einsum(tg.tensor(m), [0, 27], tg.tensor(m), [27, 26]).numpy()
    np.testing.assert_allclose(got, np.einsum(m, [0, 27], m, [27, 26]))


def test_scipy_wrappers_take_scipys_options_or_refuse_them():
    n = RNG.standard_normal((3, 3))
    spd = n @ n.T + 3 * np.eye(3)
    b = RNG.standard_normal(3)
    for kwargs in (
        {"assume_a": "sym"},
        {"assume_a": "sym", "lower": True},
        {"assume_a": "pos", "lower": True},
        {"assume_a": "pos"},
        {"assume_a": "lower triangular"},
        {"assume_a": "diagonal"},
        {"transposed": True},
    ):
        a = spd if kwargs.get("assume_a") == "pos" else n + 3 * np.eye(3)
        got = tsla.solve(tg.tensor(a), b, **kwargs).numpy()
        np.testing.assert_allclose(got, sla.solve(a, b, **kwargs), rtol=1e-10, err_msg=str(kwargs))
    with pytest.raises(NotImplementedError, match="subset_by_index= is not supported"):
        tsla.eigh(tg.tensor(spd), subset_by_index=[0, 1])
    with pytest.raises(NotImplementedError, match="generalized problems"):
        tsla.eigvalsh(tg.tensor(spd), np.eye(3))
    tall = RNG.standard_normal((4, 3))
    (r,) = tsla.qr(tg.tensor(tall), mode="r")
    (rn,) = sla.qr(tall, mode="r")
    assert r.shape == rn.shape == (4, 3)
    np.testing.assert_allclose(np.abs(r.numpy()), np.abs(rn), atol=1e-12)


def test_hermitian_reads_one_triangle():
    n = RNG.standard_normal((3, 3))  # not symmetric: NumPy reads the lower triangle
    np.testing.assert_allclose(
        tnp.linalg.pinv(tg.tensor(n), hermitian=True).numpy(), np.linalg.pinv(n, hermitian=True)
    )
    np.testing.assert_allclose(
        tnp.linalg.svd(tg.tensor(n), hermitian=True)[1].numpy(),
        np.linalg.svd(n, hermitian=True)[1],
    )


def test_eigh_never_reads_the_upper_triangle():
    """NaN or inf above the diagonal: LAPACK (NumPy) never reads it; numba's eigh refused
    the whole matrix ("did not converge"). Values, and the gradient by differences."""
    n = RNG.standard_normal((2, 3, 3))
    n[0, 0, 2], n[1, 0, 1] = np.nan, np.inf
    for uplo in ("L", "U"):
        a = n if uplo == "L" else np.swapaxes(n, -1, -2)
        w, _ = tnp.linalg.eigh(tg.tensor(a), UPLO=uplo)
        np.testing.assert_allclose(w.numpy(), np.linalg.eigh(a, UPLO=uplo)[0], rtol=1e-12)
        np.testing.assert_allclose(
            tnp.linalg.eigvalsh(tg.tensor(a), UPLO=uplo).numpy(), np.linalg.eigvalsh(a, UPLO=uplo)
        )
    # the gradient (symmetrised, as PyTorch's and JAX's) is the one without the NaN
    lower = np.tril(RNG.standard_normal((3, 3))) + 4 * np.eye(3)
    grads = []
    for above in (np.triu(np.full((3, 3), np.nan), 1), np.zeros((3, 3))):
        m = tg.tensor(lower + above, requires_grad=True)
        tnp.sum(tnp.linalg.eigvalsh(m) ** 3).backward()
        grads.append(m.grad)
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-13)
    check_grads(lambda m: tnp.sum(tnp.linalg.eigvalsh(m + m.T) ** 3), [lower])


@pytest.mark.parametrize(
    "f",
    [
        lambda m, a: m.linalg.svd(a, full_matrices=False)[1],
        lambda m, a: m.linalg.svdvals(a),
        lambda m, a: m.linalg.qr(a)[1],
        lambda m, a: m.linalg.pinv(a),
        lambda m, a: m.linalg.norm(a, "nuc"),
        lambda m, a: m.linalg.norm(a, 2),
        lambda m, a: m.linalg.lstsq(a, np.ones(a.shape[0]))[0],
    ],
)
@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 0)])
def test_empty_matrices_are_numpys(f, shape):
    got = f(tnp, tg.tensor(np.zeros(shape)))
    want = f(np, np.zeros(shape))
    np.testing.assert_array_equal(np.asarray(got.numpy()), want)


def test_eigh_and_cholesky_forward_mode_is_the_transpose_of_reverse():
    # the derivative is that of A -> f((A + A^T) / 2): <u, J v> = <J^T u, v> for any v
    a = RNG.standard_normal((3, 3))
    a = a @ a.T + 3 * np.eye(3)
    v = RNG.standard_normal((3, 3))  # not symmetric
    c = RNG.standard_normal((3, 3))
    for f in (
        lambda x: tnp.sum(tnp.linalg.eigvalsh(x) * np.arange(3.0)),
        lambda x: tnp.sum(tnp.linalg.eigh(x)[1] ** 2 * c),
        lambda x: tnp.sum(tnp.linalg.cholesky(x) * np.arange(9.0).reshape(3, 3)),
    ):
        _, tangent = tg.jvp(f, (a,), (v,))
        np.testing.assert_allclose(tangent, np.sum(tg.grad(f)(a) * v), rtol=1e-10)


def test_expm_of_nan_is_nan():
    out = tsla.expm(tg.tensor(np.array([[np.nan, 0.0], [0.0, 1.0]])))
    assert np.isnan(out.numpy()).any()


def test_scipy_namespaces_are_drop_ins():
    import scipy.integrate

    import tapegrad.scipy.integrate as tsi
    import tapegrad.scipy.special as tss
    import tapegrad.special

    assert tss.gammaln is tapegrad.special.gammaln
    a = np.array([[0.5, 1.0], [0.0, 2.0]])
    for got, want in (
        (tsla.expm(a), sla.expm(a)),
        (tsla.solve_triangular(a, np.ones(2)), sla.solve_triangular(a, np.ones(2))),
        (tsla.lu_factor(a)[0], sla.lu_factor(a)[0]),
        (tsi.cumulative_trapezoid(a[0]), scipy.integrate.cumulative_trapezoid(a[0])),
    ):
        assert type(got) is np.ndarray
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "spec, shapes",
    [
        ("ijk,ijk->ij", [(3, 4, 2), (3, 4, 2)]),  # the pairwise 'sum over coordinates'
        ("ij,ij->ij", [(3, 4), (3, 4)]),
        ("ij,ij->", [(3, 4), (3, 4)]),
        ("ijk,ikj->i", [(2, 3, 4), (2, 4, 3)]),
        ("bij,bij->b", [(2, 3, 4), (2, 3, 4)]),
        ("ij,ji->", [(3, 4), (4, 3)]),
    ],
)
def test_einsum_batched_dot_products(spec, shapes):
    """Operands with no free letters contract by a product and a reduction (not a
    matmul of 1 x k by k x 1 per batch element): values, and gradients to second
    order in both modes."""
    rng = np.random.default_rng(7)
    ops = [rng.standard_normal(s) for s in shapes]
    got = tnp.einsum(spec, *[tg.tensor(o) for o in ops]).numpy()
    np.testing.assert_allclose(got, np.einsum(spec, *ops), rtol=1e-12)
    check_grads(lambda *a: tnp.sum(tnp.einsum(spec, *a) ** 2), ops, order=2, modes=("rev", "fwd"))


def test_einsum_of_bools_stays_bool():
    a = np.array([[True, False], [True, True]])
    for spec in ("ij,ij->i", "i,i", "ij,ji->"):
        ops = (a, a) if spec != "i,i" else (a[0], a[1])
        got = tnp.einsum(spec, *[tg.tensor(o) for o in ops]).numpy()
        want = np.einsum(spec, *ops)
        assert got.dtype == want.dtype and np.array_equal(got, want), spec


@pytest.mark.parametrize("spec", [",->", "i,->i", ",i->i", ",ij,j->i"])
def test_einsum_scalar_operands(spec):
    """An operand with no subscripts is a scalar (NumPy's reading), not an error."""
    shapes = {
        ",->": [(), ()],
        "i,->i": [(3,), ()],
        ",i->i": [(), (3,)],
        ",ij,j->i": [(), (2, 3), (3,)],
    }
    rng = np.random.default_rng(3)
    ops = [np.asarray(rng.standard_normal(s)) for s in shapes[spec]]
    np.testing.assert_allclose(
        tnp.einsum(spec, *[tg.tensor(o) for o in ops]).numpy(), np.einsum(spec, *ops), rtol=1e-13
    )
    check_grads(lambda *a: tnp.sum(tnp.einsum(spec, *a) ** 2), ops, order=2)


@pytest.mark.parametrize(
    ("xs", "ys"),
    [((0, 3, 4), (4, 2)), ((3, 4), (0, 4, 2)), ((1, 2, 3), (0, 3, 4)), ((4,), (0, 4, 2))],
)
def test_matmul_with_an_empty_batch_gives_zero_gradients(xs, ys):
    """An empty batch contributes nothing: the broadcast operand's gradient is zeros
    (a fresh buffer left as it was would hold garbage)."""
    x = tg.tensor(np.ones(xs), requires_grad=True)
    y = tg.tensor(np.ones(ys), requires_grad=True)
    tnp.sum(x @ y).backward()
    np.testing.assert_array_equal(x.grad, np.zeros(xs))
    np.testing.assert_array_equal(y.grad, np.zeros(ys))


@pytest.mark.parametrize("source", ["numpy", "scipy"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(("ta", "tb"), [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_gemm_through_either_blas(source, dtype, ta, tb):
    """The products' kernel calls NumPy's BLAS (64-bit integers, a negated address) or
    SciPy's (32-bit): both give ``alpha op(a) @ op(b) + beta c`` in every transpose,
    above the size where the kernel's own loop stops (``SMALL_GEMM``)."""
    from tapegrad._jit import blas_addresses
    from tapegrad.ops.linalg.kernels import SMALL_GEMM, gemm

    fn = blas_addresses(source)[0 if dtype == np.float64 else 1]
    rng = np.random.default_rng(ta + 2 * tb)
    m, n, k = 37, 41, 29
    assert m * n * k > SMALL_GEMM
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
    c = rng.standard_normal((m, n)).astype(dtype)
    want = 0.5 * ((a.T if ta else a) @ (b.T if tb else b)) + 2.0 * c
    out = c.ravel().copy()
    gemm(fn, ta, tb, m, n, k, 0.5, a.ravel(), a.shape[1], b.ravel(), b.shape[1], 2.0, out, n)
    np.testing.assert_allclose(out.reshape(m, n), want, rtol=1e-12 if dtype == np.float64 else 1e-4)
    assert out.dtype == dtype


def test_numpys_blas_is_found_and_used():
    """NumPy's wheels bundle an ILP64 OpenBLAS: tapegrad's products use it (one thread
    pool with NumPy's own products), its address negated; SciPy's is the fallback."""
    from tapegrad._jit import _numpy_blas, blas_addresses
    from tapegrad.layout import H_DGEMM
    from tapegrad.tape import current_tape

    if _numpy_blas() is None:
        pytest.skip("this NumPy is not built with the OpenBLAS of NumPy's wheels")
    assert all(a < 0 for a in blas_addresses("numpy"))
    assert all(a > 0 for a in blas_addresses("scipy"))
    x = tg.tensor(np.ones((64, 64)), requires_grad=True)
    tnp.sum(x @ x).backward()
    assert current_tape().h[H_DGEMM] == blas_addresses()[0]
    with pytest.raises(ValueError, match="TAPEGRAD_BLAS"):
        blas_addresses("mkl")


def test_blas_environment_values_are_forgiving(monkeypatch):
    """An empty TAPEGRAD_BLAS is unset and the names ignore case and spaces (``TAPEGRAD_BLAS=``
    must not fail every product)."""
    from tapegrad._jit import blas_addresses

    monkeypatch.setenv("TAPEGRAD_BLAS", "")
    assert blas_addresses() == blas_addresses("numpy")
    monkeypatch.setenv("TAPEGRAD_BLAS", " SciPy ")
    assert blas_addresses() == blas_addresses("scipy")


def test_scipys_blas_by_environment():
    """``TAPEGRAD_BLAS=scipy`` selects SciPy's BLAS for a whole process; products and
    their gradients are the same."""
    import os
    import subprocess
    import sys

    code = (
        "import numpy as np, tapegrad as tg, tapegrad.numpy as tnp\n"
        "from tapegrad.tape import current_tape\n"
        "from tapegrad.layout import H_DGEMM\n"
        "rng = np.random.default_rng(0)\n"
        "a, b = rng.standard_normal((40, 30)), rng.standard_normal((30, 50))\n"
        "x, y = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)\n"
        "tnp.sum(tnp.sin(x @ y)).backward()\n"
        "g = np.cos(a @ b)\n"
        "assert np.allclose(x.grad, g @ b.T, rtol=1e-12) and np.allclose(y.grad, a.T @ g)\n"
        "print(current_tape().h[H_DGEMM] > 0)\n"
    )
    env = dict(os.environ, TAPEGRAD_BLAS="scipy")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


def _cofactors(a: np.ndarray) -> np.ndarray:
    """The cofactor matrix by its definition (minors)."""
    n = a.shape[0]
    c = np.empty_like(a)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(a, i, 0), j, 1)
            c[i, j] = (-1) ** (i + j) * np.linalg.det(minor)
    return c


@pytest.mark.parametrize(
    "a",
    [
        np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]]),  # rank 2
        np.array([[1.0, 2.0], [2.0, 4.0]]),
        np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]),  # rank 1: adj = 0
        np.zeros((3, 3)),
    ],
    ids=["rank 2 of 3", "rank 1 of 2", "rank 1 of 3", "zero"],
)
def test_det_gradient_at_a_singular_matrix_is_the_cofactor_matrix(a):
    # d det(A)/dA = adj(A)^T, which exists where A^-1 does not
    np.testing.assert_allclose(tg.grad(tnp.linalg.det)(a), _cofactors(a), atol=1e-12)
    stack = np.stack([a, a + np.eye(len(a))])  # a stack: one singular, one not
    g = tg.grad(lambda s: tnp.sum(tnp.linalg.det(s)))(stack)
    np.testing.assert_allclose(g[0], _cofactors(a), atol=1e-12)
    np.testing.assert_allclose(g[1], _cofactors(stack[1]), rtol=1e-10, atol=1e-12)
    f32 = tg.grad(tnp.linalg.det)(a.astype(np.float32))
    assert f32.dtype == np.float32
    np.testing.assert_allclose(f32, _cofactors(a), atol=1e-5)
