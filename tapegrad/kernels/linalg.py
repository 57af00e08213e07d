"""Matrix products on flat buffers: NumPy ``matmul`` semantics, batched, with BLAS.

Parameters in the tape (computed by the Python front end from the shapes):
``ip = [nb, m, k, n, batch dims (nb), x batch strides (nb), y batch strides (nb)]``.
A 1-D ``x`` is a ``(1, k)`` matrix and a 1-D ``y`` a ``(k, 1)`` matrix; batch strides
count whole matrices and are 0 where an operand is broadcast, so the backward's
``gx[b] += g[b] @ y[b].T`` adds up the contributions of every batch it was broadcast to.
"""

from __future__ import annotations

import numpy as np

from .._jit import blas_gemm, jit
from ..layout import (
    E_LINALG,
    H_DGEMM,
    H_SGEMM,
    OK,
    header,
    in_data,
    in_grad,
    needs_grad,
    node_ip,
    out_data,
    out_grad,
)
from .loops import ux

# Below this many multiply-adds a plain loop beats the cost of a BLAS call.
SMALL_GEMM = 4096


@jit
def gemm(fn, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    """Row-major ``c = alpha * op(a) @ op(b) + beta * c`` (``op`` transposes if set)."""
    if m == 0 or n == 0:
        return
    if m * n * k > SMALL_GEMM and fn != 0:
        blas_gemm(fn, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
        return
    # small products: c is scaled first (beta 0 overwrites, whatever c held), then
    # accumulated in the order that keeps the innermost loop contiguous; offsets are
    # unsigned (ux) so that LLVM can vectorise those loops
    for i in range(m):
        for j in range(n):
            o = ux(i * ldc + j)
            c[o] = 0.0 if beta == 0.0 else beta * c[o]
    if tb == 0:
        # rows of b are contiguous: c[i, :] += alpha * op(a)[i, p] * b[p, :], an
        # axpy (a dot product per element would be a serial reduction down a strided
        # column of b)
        for i in range(m):
            for p in range(k):
                s = alpha * (a[ux(p * lda + i)] if ta else a[ux(i * lda + p)])
                for j in range(n):
                    c[ux(i * ldc + j)] += s * b[ux(p * ldb + j)]
        return
    for i in range(m):
        for j in range(n):
            acc = 0.0
            for p in range(k):
                av = a[ux(p * lda + i)] if ta else a[ux(i * lda + p)]
                acc += av * b[ux(j * ldb + p)]
            c[ux(i * ldc + j)] += alpha * acc


@jit
def batch_offsets(bidx, nb, ip):
    """Matrix offsets of x and y (in matrices) for flat batch index ``bidx``."""
    ox = 0
    oy = 0
    for d in range(nb - 1, -1, -1):
        n = ip[4 + d]
        i = bidx % n
        bidx //= n
        ox += i * ip[4 + nb + d]
        oy += i * ip[4 + 2 * nb + d]
    return ox, oy


@jit
def batch_count(nb, ip):
    t = 1
    for d in range(nb):
        t *= ip[4 + d]
    return t


@jit
def matmul_fwd_arrays(fn, ip, x, y, out):
    nb, m, k, n = ip[0], ip[1], ip[2], ip[3]
    for bidx in range(batch_count(nb, ip)):
        ox, oy = batch_offsets(bidx, nb, ip)
        gemm(
            fn,
            0,
            0,
            m,
            n,
            k,
            1.0,
            x[ox * m * k :],
            k,
            y[oy * k * n :],
            n,
            0.0,
            out[bidx * m * n :],
            n,
        )


@jit
def matmul_bwd_arrays(fn, ip, mask, g, x, y, gx, gy):
    nb, m, k, n = ip[0], ip[1], ip[2], ip[3]
    for bidx in range(batch_count(nb, ip)):
        ox, oy = batch_offsets(bidx, nb, ip)
        gb = g[bidx * m * n :]
        if mask & 1:  # gx (m, k) += g (m, n) @ y.T (n, k)
            gemm(fn, 0, 1, m, k, n, 1.0, gb, n, y[oy * k * n :], n, 1.0, gx[ox * m * k :], k)
        if mask & 2:  # gy (k, n) += x.T (k, m) @ g (m, n)
            gemm(fn, 1, 0, k, n, m, 1.0, x[ox * m * k :], k, gb, n, 1.0, gy[oy * k * n :], n)


@jit
def _blas(h, x):
    return h[H_DGEMM] if x.itemsize == 8 else h[H_SGEMM]


@jit
def matmul_fwd(dt, node, tp):
    h = header(tp)
    x = in_data(h, node, 0, dt)
    matmul_fwd_arrays(
        _blas(h, x), node_ip(h, node), x, in_data(h, node, 1, dt), out_data(h, node, 0, dt)
    )
    return OK


@jit
def matmul_bwd(dt, node, tp):
    h = header(tp)
    x = in_data(h, node, 0, dt)
    y = in_data(h, node, 1, dt)
    mask = needs_grad(h, node, 0) | (needs_grad(h, node, 1) << 1)
    gx = in_grad(h, node, 0, dt) if mask & 1 else x
    gy = in_grad(h, node, 1, dt) if mask & 2 else y
    matmul_bwd_arrays(_blas(h, x), node_ip(h, node), mask, out_grad(h, node, 0, dt), x, y, gx, gy)
    return OK


# --- dense linear algebra on stacks of n x n matrices ------------------------------------
# ``ip = [batch, n]`` (and ``k``, the right-hand sides, for solve). NumPy's LAPACK-backed
# routines inside numba allocate their results: these are O(n^3) kernels, where that
# cost does not matter. A LAPACK failure (singular or not positive definite matrix)
# returns E_LINALG and Python raises numpy.linalg.LinAlgError naming the op.


@jit
def _stack(h, node):
    """(number of matrices, their size n) of a dense linear algebra node."""
    ip = node_ip(h, node)
    return ip[0], ip[1]


@jit
def _mat(buf, b, n, m):
    return buf[b * n * m : (b + 1) * n * m].reshape((n, m))


@jit
def inv_fwd(dt, node, tp):
    h = header(tp)
    batch, n = _stack(h, node)
    x = in_data(h, node, 0, dt)
    out = out_data(h, node, 0, dt)
    try:
        for b in range(batch):
            _mat(out, b, n, n)[:, :] = np.linalg.inv(_mat(x, b, n, n))
    except Exception:
        return E_LINALG
    return OK


@jit
def inv_bwd(dt, node, tp):
    h = header(tp)
    batch, n = _stack(h, node)
    out = out_data(h, node, 0, dt)
    g = out_grad(h, node, 0, dt)
    gx = in_grad(h, node, 0, dt)
    for b in range(batch):  # d(A^-1) = -A^-1 dA A^-1  =>  gA = -A^-T g A^-T
        ai = _mat(out, b, n, n)
        _mat(gx, b, n, n)[:, :] -= np.dot(np.dot(ai.T, _mat(g, b, n, n)), ai.T)
    return OK


@jit
def det_fwd(dt, node, tp):
    h = header(tp)
    batch, n = _stack(h, node)
    x = in_data(h, node, 0, dt)
    out = out_data(h, node, 0, dt)
    for b in range(batch):
        out[b] = np.linalg.det(_mat(x, b, n, n))
    return OK


@jit
def det_bwd(dt, node, tp):
    """d det(A) = det(A) tr(A^-1 dA)  =>  gA = g det(A) A^-T (A must be invertible)."""
    h = header(tp)
    batch, n = _stack(h, node)
    x = in_data(h, node, 0, dt)
    out = out_data(h, node, 0, dt)
    g = out_grad(h, node, 0, dt)
    gx = in_grad(h, node, 0, dt)
    try:
        for b in range(batch):
            _mat(gx, b, n, n)[:, :] += g[b] * out[b] * np.linalg.inv(_mat(x, b, n, n)).T
    except Exception:
        return E_LINALG
    return OK


@jit
def slogdet_fwd(dt, node, tp):
    """Outputs (sign, log|det|)."""
    h = header(tp)
    batch, n = _stack(h, node)
    x = in_data(h, node, 0, dt)
    sign = out_data(h, node, 0, dt)
    logdet = out_data(h, node, 1, dt)
    for b in range(batch):
        s, ld = np.linalg.slogdet(_mat(x, b, n, n))
        sign[b] = s
        logdet[b] = ld
    return OK


@jit
def slogdet_bwd(dt, node, tp):
    """d log|det A| = tr(A^-1 dA); the sign is piecewise constant."""
    h = header(tp)
    batch, n = _stack(h, node)
    x = in_data(h, node, 0, dt)
    g = out_grad(h, node, 1, dt)
    gx = in_grad(h, node, 0, dt)
    try:
        for b in range(batch):
            _mat(gx, b, n, n)[:, :] += g[b] * np.linalg.inv(_mat(x, b, n, n)).T
    except Exception:
        return E_LINALG
    return OK


@jit
def solve_fwd(dt, node, tp):
    """X = A^-1 B for A (batch, n, n) and B (batch, n, k)."""
    h = header(tp)
    ip = node_ip(h, node)
    batch, n, k = ip[0], ip[1], ip[2]
    a = in_data(h, node, 0, dt)
    rhs = in_data(h, node, 1, dt)
    out = out_data(h, node, 0, dt)
    try:
        for b in range(batch):
            _mat(out, b, n, k)[:, :] = np.linalg.solve(_mat(a, b, n, n), _mat(rhs, b, n, k))
    except Exception:
        return E_LINALG
    return OK


@jit
def solve_bwd(dt, node, tp):
    """gB = A^-T g, gA = -gB X^T."""
    h = header(tp)
    ip = node_ip(h, node)
    batch, n, k = ip[0], ip[1], ip[2]
    a = in_data(h, node, 0, dt)
    out = out_data(h, node, 0, dt)
    g = out_grad(h, node, 0, dt)
    want_a = needs_grad(h, node, 0)
    want_b = needs_grad(h, node, 1)
    ga = in_grad(h, node, 0, dt) if want_a else a
    gb = in_grad(h, node, 1, dt) if want_b else a
    try:
        for b in range(batch):
            gbb = np.linalg.solve(np.ascontiguousarray(_mat(a, b, n, n).T), _mat(g, b, n, k))
            if want_b:
                _mat(gb, b, n, k)[:, :] += gbb
            if want_a:
                _mat(ga, b, n, n)[:, :] -= np.dot(gbb, _mat(out, b, n, k).T)
    except Exception:
        return E_LINALG
    return OK


@jit
def cholesky_fwd(dt, node, tp):
    h = header(tp)
    batch, n = _stack(h, node)
    x = in_data(h, node, 0, dt)
    out = out_data(h, node, 0, dt)
    try:
        for b in range(batch):
            _mat(out, b, n, n)[:, :] = np.linalg.cholesky(_mat(x, b, n, n))
    except Exception:
        return E_LINALG
    return OK


@jit
def cholesky_bwd(dt, node, tp):
    """gA = sym(L^-T Phi(L^T gL) L^-1), Phi = lower triangle with the diagonal halved
    (Murray 2016); symmetrised, as in PyTorch and JAX."""
    h = header(tp)
    batch, n = _stack(h, node)
    out = out_data(h, node, 0, dt)
    g = out_grad(h, node, 0, dt)
    gx = in_grad(h, node, 0, dt)
    try:
        for b in range(batch):
            lo = _mat(out, b, n, n)
            p = np.dot(lo.T, _mat(g, b, n, n))
            for i in range(n):
                p[i, i] *= 0.5
                for j in range(i + 1, n):
                    p[i, j] = 0.0
            lt = np.ascontiguousarray(lo.T)
            y = np.linalg.solve(lt, p)  # L^-T P
            s = np.linalg.solve(lt, np.ascontiguousarray(y.T)).T  # (L^-T (L^-T P)^T)^T
            _mat(gx, b, n, n)[:, :] += 0.5 * (s + s.T)
    except Exception:
        return E_LINALG
    return OK
