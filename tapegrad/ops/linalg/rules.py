"""Linear algebra's recorded rules: matmul, inverse, determinants, solves,
Cholesky, and the decompositions (eigh, svd, qr, eig, pinv, lu_factor), convolution."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...derivatives import attach, matrix_transpose, sum_to
from ...recording import as_tensor
from ...rule_walks import NodeView
from ...tensors import Tensor
from ..reduce.front import sum as rsum
from ..shape.front import (
    concatenate,
    diagonal,
    flip,
    getitem,
    reshape,
)
from .convolution import convolution
from .front import inv, matmul, solve
from .scipy_front import row_permutation, solve_triangular, take_rows

# --- the others: both rules side by side --------------------------------------------------


def _as_matrices(node: NodeView) -> tuple[Tensor, Tensor, tuple, tuple]:
    """matmul's operands as stacks of matrices (a 1-D x a row, a 1-D y a column)."""
    x, y = as_tensor(node.ins[0]), as_tensor(node.ins[1])
    xm = reshape(x, (1, *x.shape)) if x.ndim == 1 else x
    ym = reshape(y, (*y.shape, 1)) if y.ndim == 1 else y
    return xm, ym, xm.shape, ym.shape


def _matmul_vjp(node: NodeView, grads: list) -> list:
    # out = x @ y: gx = g @ y^T, gy = x^T @ g, summed over broadcast batch axes
    xm, ym, xs, ys = _as_matrices(node)
    batch = np.broadcast_shapes(xs[:-2], ys[:-2])
    g = reshape(grads[0], (*batch, xs[-2], ys[-1]))
    gx = sum_to(matmul(g, matrix_transpose(ym)), xs, node.dtype) if node.needs[0] else None
    gy = sum_to(matmul(matrix_transpose(xm), g), ys, node.dtype) if node.needs[1] else None
    return [
        None if gx is None else reshape(gx, node.in_shapes[0]),
        None if gy is None else reshape(gy, node.in_shapes[1]),
    ]


def _matmul_jvp(node: NodeView, tangents: list) -> list:
    # d(x @ y) = dx @ y + x @ dy
    tx, ty = tangents
    total = None
    if tx is not None:
        total = matmul(tx, node.ins[1])
    if ty is not None:
        term = matmul(node.ins[0], ty)
        total = term if total is None else total + term
    return [total]


def _inv_vjp(node: NodeView, grads: list) -> list:
    # d inv(A) = -inv(A) dA inv(A): gA = -inv(A)^T g inv(A)^T
    w = matrix_transpose(node.outs[0])
    return [-matmul(matmul(w, grads[0]), w)]


def _inv_jvp(node: NodeView, tangents: list) -> list:
    w = node.outs[0]
    return [-matmul(matmul(w, tangents[0]), w)]


def _logdet_grad(node: NodeView) -> Tensor:
    """d log|det A| / dA = inv(A)^T."""
    return matrix_transpose(inv(node.ins[0]))


def _det_vjp(node: NodeView, grads: list) -> list:
    # d det A = det A tr(inv(A) dA)
    scale = reshape(grads[0] * node.outs[0], (*node.out_shapes[0], 1, 1))
    return [scale * _logdet_grad(node)]


def _det_jvp(node: NodeView, tangents: list) -> list:
    return [node.outs[0] * rsum(_logdet_grad(node) * tangents[0], axis=(-2, -1))]


def _slogdet_vjp(node: NodeView, grads: list) -> list:
    # outputs (sign, log|det|): the sign is piecewise constant
    if grads[1] is None:
        return [None]
    return [reshape(grads[1], (*node.out_shapes[1], 1, 1)) * _logdet_grad(node)]


def _slogdet_jvp(node: NodeView, tangents: list) -> list:
    return [None, rsum(_logdet_grad(node) * tangents[0], axis=(-2, -1))]


def _solve_vjp(node: NodeView, grads: list) -> list:
    # x = A^-1 b: gb = A^-T g, gA = -gb x^T
    a = node.ins[0]
    gb = solve(matrix_transpose(a), grads[0])
    ga = -matmul(gb, matrix_transpose(node.outs[0])) if node.needs[0] else None
    return [ga, gb if node.needs[1] else None]


def _solve_jvp(node: NodeView, tangents: list) -> list:
    # dx = A^-1 (db - dA x)
    ta, tb = tangents
    rhs = tb if tb is not None else np.zeros(node.out_shapes[0], node.dtype)
    if ta is not None:
        rhs = rhs - matmul(ta, node.outs[0])
    return [solve(node.ins[0], rhs)]


def _sym(t: Any) -> Tensor:
    """(t + t^T) / 2. eigh and cholesky read one triangle, but their derivatives are
    those of A -> f((A + A^T) / 2), the convention of PyTorch and JAX for symmetric
    inputs: the reverse rules symmetrise the gradient, so the forward rules take the
    symmetric part of the tangent (then <u, J v> = <J^T u, v> in every direction)."""
    return 0.5 * (t + matrix_transpose(t))


def _phi(n: int, dtype: np.dtype) -> np.ndarray:
    """The lower triangle with the diagonal halved, as a mask (Murray 2016's Phi)."""
    return np.tril(np.ones((n, n), dtype)) - 0.5 * np.eye(n, dtype=dtype)


def _cholesky_vjp(node: NodeView, grads: list) -> list:
    # gA = sym(L^-T Phi(L^T gL) L^-1), symmetrised as the compiled kernel (and PyTorch)
    low = node.outs[0]
    n = node.in_shapes[0][-1]
    w = inv(low)
    s = matmul(
        matmul(matrix_transpose(w), matmul(matrix_transpose(low), grads[0]) * _phi(n, node.dtype)),
        w,
    )
    return [0.5 * (s + matrix_transpose(s))]


def _cholesky_jvp(node: NodeView, tangents: list) -> list:
    # dL = L Phi(L^-1 dA L^-T), dA's symmetric part (see _sym)
    low = node.outs[0]
    n = node.in_shapes[0][-1]
    w = inv(low)
    return [
        matmul(low, matmul(matmul(w, _sym(tangents[0])), matrix_transpose(w)) * _phi(n, node.dtype))
    ]


# --- decompositions ------------------------------------------------------------------------
# The same formulas as the compiled kernels (ops/linalg/kernels.py), in recorded ops; a
# missing output cotangent (None) drops its terms.


def _eye(n: int, dtype: np.dtype) -> np.ndarray:
    return np.eye(n, dtype=dtype)


def _diag_embed(v: Any, n: int, dtype: np.dtype) -> Tensor:
    return reshape(v, (*as_tensor(v).shape, 1)) * _eye(n, dtype)


def _diag_part(t: Any) -> Tensor:
    return diagonal(t, 0, -2, -1)


def _row(v: Any) -> Tensor:
    """(..., n) -> (..., 1, n): scales columns when multiplied."""
    return reshape(v, (*as_tensor(v).shape[:-1], 1, as_tensor(v).shape[-1]))


def _col(v: Any) -> Tensor:
    """(..., n) -> (..., n, 1): scales rows when multiplied."""
    return reshape(v, (*as_tensor(v).shape, 1))


def _gaps(w: Any, n: int, dtype: np.dtype) -> Tensor:
    """F_ij = 1 / (w_j - w_i) off the diagonal, 0 on it."""
    eye = _eye(n, dtype)
    return (1.0 - eye) / (_row(w) - _col(w) + eye)


def _eigh_vjp(node: NodeView, grads: list) -> list:
    # gA = V (diag(gw) + sym(F o V^T gV)) V^T
    w, v = node.outs
    gw, gv = grads
    n, dt = node.in_shapes[0][-1], node.dtype
    inner = _diag_embed(gw, n, dt) if gw is not None else np.zeros(node.in_shapes[0], dt)
    if gv is not None:
        m = matmul(matrix_transpose(v), gv)
        inner = inner + 0.5 * _gaps(w, n, dt) * (m - matrix_transpose(m))
    return [matmul(matmul(v, inner), matrix_transpose(v))]


def _eigh_jvp(node: NodeView, tangents: list) -> list:
    # P = V^T dA V: dw = diag(P), dV = V (F o P)
    w, v = node.outs
    n, dt = node.in_shapes[0][-1], node.dtype
    p = matmul(matmul(matrix_transpose(v), _sym(tangents[0])), v)
    return [_diag_part(p), matmul(v, _gaps(w, n, dt) * p)]


def _svd_gaps(s: Any, n: int, dtype: np.dtype) -> Tensor:
    """F_ij = 1 / (s_j^2 - s_i^2) off the diagonal."""
    return _gaps(s * s, n, dtype)


def _svd_vjp(node: NodeView, grads: list) -> list:
    s, u, vh = node.outs
    gs, gu, gvh = grads
    m, n = node.in_shapes[0][-2:]
    k, dt = min(m, n), node.dtype
    f = _svd_gaps(s, k, dt)
    inner = _diag_embed(gs, k, dt) if gs is not None else np.zeros((k, k), dt)
    out = None
    if gu is not None:
        j = matmul(matrix_transpose(u), gu)
        inner = inner + f * (j - matrix_transpose(j)) * _row(s)
        if m > k:  # (gU - U J) S^-1 Vh
            out = matmul((gu - matmul(u, j)) / _row(s), vh)
    if gvh is not None:
        kk = matmul(vh, matrix_transpose(gvh))
        inner = inner + f * (kk - matrix_transpose(kk)) * _col(s)
        if n > k:  # U S^-1 (gVh - K^T Vh)
            term = matmul(u / _row(s), gvh - matmul(matrix_transpose(kk), vh))
            out = term if out is None else out + term
    main = matmul(matmul(u, inner), vh)
    return [main if out is None else main + out]


def _svd_jvp(node: NodeView, tangents: list) -> list:
    # P = U^T dA V: dS = diag(P), dU = U (F o (P S + S P^T)) + (I - U U^T) dA V S^-1,
    # dV = V (F o (S P + P^T S)) + (I - V V^T) dA^T U S^-1 (JAX's rule)
    s, u, vh = node.outs
    t = tangents[0]
    m, n = node.in_shapes[0][-2:]
    k, dt = min(m, n), node.dtype
    f = _svd_gaps(s, k, dt)
    v = matrix_transpose(vh)
    p = matmul(matmul(matrix_transpose(u), t), v)
    du = matmul(u, f * (p * _row(s) + matrix_transpose(p) * _col(s)))
    dv = matmul(v, f * (p * _col(s) + matrix_transpose(p) * _row(s)))
    if m > k:
        dav = matmul(t, v)
        du = du + (dav - matmul(u, matmul(matrix_transpose(u), dav))) / _row(s)
    if n > k:
        dau = matmul(matrix_transpose(t), u)
        dv = dv + (dau - matmul(v, matmul(vh, dau))) / _row(s)
    return [_diag_part(p), du, matrix_transpose(dv)]


def _columns(t: Any, lo: int, hi: int | None) -> Tensor:
    return getitem(t, (Ellipsis, slice(None), slice(lo, hi)))


def _qr_vjp(node: NodeView, grads: list) -> list:
    # square / tall: gA = (Q N + gQ) R^-T, M = Q^T gQ - gR R^T, N = tril(M - M^T, -1) - M;
    # wide [X | Y]: gY = Q gV, and X gets the square rule with gQ + Y gV^T
    q, r = node.outs
    gq, gr = grads
    m, n = node.in_shapes[0][-2:]
    k, dt = min(m, n), node.dtype
    gq = gq if gq is not None else np.zeros(node.out_shapes[0], dt)
    gr = gr if gr is not None else np.zeros(node.out_shapes[1], dt)
    gy = None
    if n > k:
        grv = _columns(gr, k, None)
        gq = gq + matmul(_columns(node.ins[0], k, None), matrix_transpose(grv))
        gy = matmul(q, grv)
        gr = _columns(gr, 0, k)
    rk = _columns(r, 0, k)
    mm = matmul(matrix_transpose(q), gq) - matmul(gr, matrix_transpose(rk))
    nn = (mm - matrix_transpose(mm)) * np.tril(np.ones((k, k), dt), -1) - mm
    gx = matrix_transpose(solve(rk, matrix_transpose(matmul(q, nn) + gq)))
    return [gx if gy is None else concatenate([gx, gy], axis=-1)]


def _qr_jvp(node: NodeView, tangents: list) -> list:
    # B = dX R^-1, C = Q^T B, dO = tril(C, -1) - tril(C, -1)^T: dQ = Q (dO - C) + B,
    # dR = (C - dO) R (JAX's rule, square / tall); wide: dV = dQ^T Y + Q^T dY
    q, r = node.outs
    t = tangents[0]
    m, n = node.in_shapes[0][-2:]
    k, dt = min(m, n), node.dtype
    rk = _columns(r, 0, k)
    b = matrix_transpose(solve(matrix_transpose(rk), matrix_transpose(_columns(t, 0, k))))
    c = matmul(matrix_transpose(q), b)
    low = c * np.tril(np.ones((k, k), dt), -1)
    do = low - matrix_transpose(low)
    dq = matmul(q, do - c) + b
    dr = matmul(c - do, rk)
    if n > k:
        dv = matmul(matrix_transpose(dq), _columns(node.ins[0], k, None)) + matmul(
            matrix_transpose(q), _columns(t, k, None)
        )
        dr = concatenate([dr, dv], axis=-1)
    return [dq, dr]


def _eig_vjp(node: NodeView, grads: list) -> list:
    # gA = V^-T (diag(gw) + F o (G - V^T V diag(G))) V^T, G = V^T gV
    w, v = node.outs
    gw, gv = grads
    n, dt = node.in_shapes[0][-1], node.dtype
    inner = _diag_embed(gw, n, dt) if gw is not None else np.zeros(node.in_shapes[0], dt)
    if gv is not None:
        g = matmul(matrix_transpose(v), gv)
        h = g - matmul(matrix_transpose(v), v) * _row(_diag_part(g))
        inner = inner + _gaps(w, n, dt) * h
    return [solve(matrix_transpose(v), matmul(inner, matrix_transpose(v)))]


def _eig_jvp(node: NodeView, tangents: list) -> list:
    # P = V^-1 dA V: dw = diag(P), dV = V (E - diag(V^T V E)), E = F o P
    w, v = node.outs
    n, dt = node.in_shapes[0][-1], node.dtype
    p = solve(v, matmul(tangents[0], v))
    e = _gaps(w, n, dt) * p
    dv = matmul(v, e) - v * _row(_diag_part(matmul(matmul(matrix_transpose(v), v), e)))
    return [_diag_part(p), dv]


def _pinv_vjp(node: NodeView, grads: list) -> list:
    # gA = -X^T G X^T + (I - A X) G^T X X^T + X^T X G^T (I - X A)
    a, x = node.ins[0], node.outs[0]
    g = grads[0]
    xt, gt = matrix_transpose(x), matrix_transpose(g)
    t2 = matmul(gt, matmul(x, xt))
    t3 = matmul(matmul(xt, x), gt)
    return [
        -matmul(matmul(xt, g), xt) + t2 - matmul(a, matmul(x, t2)) + t3 - matmul(matmul(t3, x), a)
    ]


def _pinv_jvp(node: NodeView, tangents: list) -> list:
    # dX = -X dA X + X X^T dA^T (I - A X) + (I - X A) dA^T X^T X
    a, x = node.ins[0], node.outs[0]
    t = tangents[0]
    xt, tt = matrix_transpose(x), matrix_transpose(t)
    w1 = matmul(x, matmul(xt, tt))
    w2 = matmul(tt, matmul(xt, x))
    return [
        -matmul(matmul(x, t), x) + w1 - matmul(matmul(w1, a), x) + w2 - matmul(x, matmul(a, w2))
    ]


def _triangle(ip: list, n: int, dtype: np.dtype) -> np.ndarray:
    """The entries of a that solve_triangular reads (ip: lower, trans, unit at 3-5)."""
    ones = np.ones((n, n), dtype)
    mask = np.tril(ones) if ip[3] else np.triu(ones)
    return mask - np.eye(n, dtype=dtype) if ip[5] else mask


def _solve_triangular_vjp(node: NodeView, grads: list) -> list:
    # gb = op(A)^-T g; gA = -gb x^T (-x gb^T when op transposes) on the triangle read
    ip = node.ip
    n, dt = ip[1], node.dtype
    a, x = node.ins[0], node.outs[0]
    gb = solve_triangular(
        a, grads[0], trans=1 - ip[4], lower=bool(ip[3]), unit_diagonal=bool(ip[5])
    )
    ga = None
    if node.needs[0]:
        outer = matmul(x, matrix_transpose(gb)) if ip[4] else matmul(gb, matrix_transpose(x))
        ga = -outer * _triangle(ip, n, dt)
    return [ga, gb if node.needs[1] else None]


def _solve_triangular_jvp(node: NodeView, tangents: list) -> list:
    # dx = op(A)^-1 (db - op(dA) x), dA on the triangle read
    ip = node.ip
    n, dt = ip[1], node.dtype
    ta, tb = tangents
    rhs = tb if tb is not None else np.zeros(node.out_shapes[0], dt)
    if ta is not None:
        da = ta * _triangle(ip, n, dt)
        rhs = rhs - matmul(matrix_transpose(da) if ip[4] else da, node.outs[0])
    return [
        solve_triangular(
            node.ins[0], rhs, trans=ip[4], lower=bool(ip[3]), unit_diagonal=bool(ip[5])
        )
    ]


def _lu_parts(node: NodeView) -> tuple[Tensor, np.ndarray, int, np.dtype]:
    lu = node.outs[0]
    n, dt = node.in_shapes[0][-1], node.dtype
    piv = node.outs[1]
    piv = piv._value() if isinstance(piv, Tensor) else piv  # a guard while capturing
    return lu, row_permutation(np.asarray(piv).astype(np.int64)), n, dt


def _lu_factor_vjp(node: NodeView, grads: list) -> list:
    # gA = P^T L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T
    lu, perm, n, dt = _lu_parts(node)
    g = grads[0]
    strict = np.tril(np.ones((n, n), dt), -1)
    upper = np.triu(np.ones((n, n), dt))
    low = lu * strict + _eye(n, dt)
    up = lu * upper
    z = (
        matmul(matrix_transpose(low), g * strict) * strict
        + matmul(g * upper, matrix_transpose(up)) * upper
    )
    y = solve_triangular(lu, z, trans=1, lower=True, unit_diagonal=True)
    w = matrix_transpose(solve_triangular(lu, matrix_transpose(y), lower=False))
    return [take_rows(w, np.argsort(perm, axis=-1))]


def _lu_factor_jvp(node: NodeView, tangents: list) -> list:
    # X = L^-1 P dA U^-1: dL = L tril(X, -1), dU = triu(X) U
    lu, perm, n, dt = _lu_parts(node)
    strict = np.tril(np.ones((n, n), dt), -1)
    upper = np.triu(np.ones((n, n), dt))
    y = solve_triangular(lu, take_rows(tangents[0], perm), lower=True, unit_diagonal=True)
    x = matrix_transpose(solve_triangular(lu, matrix_transpose(y), trans=1, lower=False))
    low = lu * strict + _eye(n, dt)
    return [matmul(low, x * strict) + matmul(x * upper, lu * upper), None]


def _convolve_vjp(node: NodeView, grads: list) -> list:
    # out[k] = sum_i a[k + lo - i] v[i]: ga is g convolved with v reversed from offset
    # m - 1 - lo (length n), gv is g convolved with a reversed from n - 1 - lo (length m)
    n, m, lo, _ = node.ip
    a, v = node.ins
    g = grads[0]
    ga = convolution(g, flip(v, 0), m - 1 - lo, n) if node.needs[0] else None
    gv = convolution(g, flip(a, 0), n - 1 - lo, m) if node.needs[1] else None
    return [ga, gv]


def _convolve_jvp(node: NodeView, tangents: list) -> list:
    # bilinear: d out = conv(da, v) + conv(a, dv), the same window
    _, _, lo, length = node.ip
    a, v = node.ins
    ta, tv = tangents
    total = None
    if ta is not None:
        total = convolution(ta, v, lo, length)
    if tv is not None:
        term = convolution(a, tv, lo, length)
        total = term if total is None else total + term
    return [total]


attach(
    {
        "matmul": (_matmul_vjp, _matmul_jvp),
        "inv": (_inv_vjp, _inv_jvp),
        "det": (_det_vjp, _det_jvp),
        "slogdet": (_slogdet_vjp, _slogdet_jvp),
        "solve": (_solve_vjp, _solve_jvp),
        "cholesky": (_cholesky_vjp, _cholesky_jvp),
        "eigh": (_eigh_vjp, _eigh_jvp),
        "svd": (_svd_vjp, _svd_jvp),
        "qr": (_qr_vjp, _qr_jvp),
        "eig": (_eig_vjp, _eig_jvp),
        "pinv": (_pinv_vjp, _pinv_jvp),
        "solve_triangular": (_solve_triangular_vjp, _solve_triangular_jvp),
        "lu_factor": (_lu_factor_vjp, _lu_factor_jvp),
        "convolve": (_convolve_vjp, _convolve_jvp),
    }
)
