"""Matrix products on flat buffers: NumPy ``matmul`` semantics, batched, with BLAS.

Parameters in the tape (computed by the Python front end from the shapes):
``ip = [nb, m, k, n, batch dims (nb), x batch strides (nb), y batch strides (nb)]``.
A 1-D ``x`` is a ``(1, k)`` matrix and a 1-D ``y`` a ``(k, 1)`` matrix; batch strides
count whole matrices and are 0 where an operand is broadcast, so the backward's
``gx[b] += g[b] @ y[b].T`` adds up the contributions of every batch it was broadcast to.
"""

from __future__ import annotations

import numpy as np

from ..._jit import blas_gemm, jit
from ...kernels.loops import ux
from ...layout import (
    E_LINALG,
    H_DGEMM,
    H_SGEMM,
    OK,
    fresh_bits,
    header,
    in_data,
    in_grad,
    is_fresh,
    needs_grad,
    node_fp,
    node_ip,
    out_data,
    out_grad,
)

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
def matmul_bwd_arrays(fn, ip, mask, g, x, y, gx, gy, fx, fy):
    """``gx += g @ y.T``, ``gy += x.T @ g`` per batch; a fresh gx / gy (``fx``, ``fy``)
    of a single product is stored into (beta 0: BLAS does not read it), and zeroed
    first when a broadcast batch adds several products into it, or none (an empty
    batch: the broadcast operand's gradient is zero)."""
    nb, m, k, n = ip[0], ip[1], ip[2], ip[3]
    count = batch_count(nb, ip)
    bx = 0.0 if fx and count == 1 else 1.0
    by = 0.0 if fy and count == 1 else 1.0
    if count != 1:
        if fx:
            gx[:] = 0
        if fy:
            gy[:] = 0
    for bidx in range(count):
        ox, oy = batch_offsets(bidx, nb, ip)
        gb = g[bidx * m * n :]
        if mask & 1:  # gx (m, k) += g (m, n) @ y.T (n, k)
            gemm(fn, 0, 1, m, k, n, 1.0, gb, n, y[oy * k * n :], n, bx, gx[ox * m * k :], k)
        if mask & 2:  # gy (k, n) += x.T (k, m) @ g (m, n)
            gemm(fn, 1, 0, k, n, m, 1.0, x[ox * m * k :], k, gb, n, by, gy[oy * k * n :], n)


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
    fresh = fresh_bits(h, node)
    matmul_bwd_arrays(
        _blas(h, x),
        node_ip(h, node),
        mask,
        out_grad(h, node, 0, dt),
        x,
        y,
        gx,
        gy,
        is_fresh(fresh, 0),
        is_fresh(fresh, 1),
    )
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
def _slogdet_lu(a):
    """(sign, log|det|) of square ``a`` by Gaussian elimination with partial pivoting,
    as LAPACK's getrf (the first largest |pivot|; NaN is never larger) and NumPy's
    slogdet read it (a negative pivot flips the sign; a NaN one does not). For matrices
    with NaN or inf only, which numba's det and slogdet refuse: det([[inf, 1], [0, 2]])
    is inf, as NumPy's."""
    n = a.shape[0]
    m = a.copy()
    sign = 1.0
    logdet = 0.0
    for k in range(n):
        p = k
        for i in range(k + 1, n):
            if abs(m[i, k]) > abs(m[p, k]):
                p = i
        if p != k:
            for j in range(n):
                m[k, j], m[p, j] = m[p, j], m[k, j]
            sign = -sign
        pivot = m[k, k]
        if pivot == 0.0:
            return 0.0, -np.inf
        for i in range(k + 1, n):
            f = m[i, k] / pivot
            for j in range(k + 1, n):
                m[i, j] -= f * m[k, j]
        if pivot < 0.0:
            sign = -sign
        logdet += np.log(abs(pivot))
    return sign, logdet


@jit
def det_fwd(dt, node, tp):
    h = header(tp)
    batch, n = _stack(h, node)
    x = in_data(h, node, 0, dt)
    out = out_data(h, node, 0, dt)
    for b in range(batch):
        # numba's det raises for a matrix with NaN or inf, and an exception cannot leave
        # a kernel: it was printed and lost, leaving 0. NumPy's number instead.
        try:
            out[b] = np.linalg.det(_mat(x, b, n, n))
        except Exception:
            s, ld = _slogdet_lu(_mat(x, b, n, n))
            out[b] = s * np.exp(ld)
    return OK


@jit
def _cofactors(a):
    """The cofactor matrix adj(A)^T = d det(A) / dA, also where A is singular (where
    det(A) A^-T is 0 times infinity): from A = U S V^T, adj(A)^T = det(U) det(V^T)
    U diag(prod_{j != i} s_j) V^T."""
    u, s, vh = np.linalg.svd(a)
    n = s.shape[0]
    c = np.ones(n, a.dtype)
    for i in range(n):
        for j in range(n):
            if j != i:
                c[i] *= s[j]
    return (np.linalg.det(u) * np.linalg.det(vh)) * np.dot(u * c, vh)


@jit
def det_bwd(dt, node, tp):
    """d det(A) = tr(adj(A) dA)  =>  gA = g adj(A)^T: g det(A) A^-T where A is
    invertible and its determinant is not 0, the cofactors (by the SVD) otherwise."""
    h = header(tp)
    batch, n = _stack(h, node)
    x = in_data(h, node, 0, dt)
    out = out_data(h, node, 0, dt)
    g = out_grad(h, node, 0, dt)
    gx = in_grad(h, node, 0, dt)
    for b in range(batch):
        a = _mat(x, b, n, n)
        done = False
        if out[b] != 0.0:
            try:
                _mat(gx, b, n, n)[:, :] += g[b] * out[b] * np.linalg.inv(a).T
                done = True
            except Exception:  # singular to LAPACK although det(A) rounded to nonzero
                done = False
        if not done:
            try:
                _mat(gx, b, n, n)[:, :] += g[b] * _cofactors(a)
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
        try:  # (a NaN or inf matrix: as det_fwd)
            s, ld = np.linalg.slogdet(_mat(x, b, n, n))
        except Exception:
            s, ld = _slogdet_lu(_mat(x, b, n, n))
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


# --- decompositions ------------------------------------------------------------------------
# Their backward formulas divide by differences of eigenvalues (singular values squared):
# a term whose numerator is exactly zero is zero (eigvalsh / svdvals alone, where the
# vectors get no gradient, stay finite for repeated values); a non-zero one over a zero
# gap is the true divergence and gives inf, as in PyTorch and JAX.


@jit
def _over(num, den):
    return 0.0 if num == 0.0 else num / den


@jit
def _eigen_fwd(dt, node, tp, symmetric):
    """Eigenvalues and eigenvectors of each matrix of the stack: ``eigh`` (ascending,
    the lower triangle read, NumPy's ``UPLO='L'``) or ``eig`` (unit eigenvectors; a
    matrix with complex eigenvalues fails: E_LINALG, the front end names the cause)."""
    h = header(tp)
    batch, n = _stack(h, node)
    x = in_data(h, node, 0, dt)
    w = out_data(h, node, 0, dt)
    v = out_data(h, node, 1, dt)
    try:
        for b in range(batch):
            if symmetric:
                # the lower triangle mirrored: numba's eigh refuses a NaN or inf anywhere
                # in the matrix, LAPACK's (NumPy's) never reads the upper one
                m = _mat(x, b, n, n).copy()
                for i in range(n):
                    for j in range(i + 1, n):
                        m[i, j] = m[j, i]
                wb, vb = np.linalg.eigh(m)
            else:
                wb, vb = np.linalg.eig(_mat(x, b, n, n))
                if np.iscomplexobj(wb):
                    # NumPy (the interpreted tier) returns complex eigenvalues where
                    # numba's eig raises: storing them would drop the imaginary parts.
                    # Raised, not returned: a return inside this try stops numba from
                    # catching its own eig's error
                    raise ValueError("complex eigenvalues")
            w[b * n : (b + 1) * n] = wb
            _mat(v, b, n, n)[:, :] = vb
    except Exception:
        return E_LINALG
    return OK


@jit
def eigh_fwd(dt, node, tp):
    return _eigen_fwd(dt, node, tp, True)


@jit
def eigh_bwd(dt, node, tp):
    """gA = V (diag(gw) + sym(F o V^T gV)) V^T, F_ij = 1 / (w_j - w_i) off the diagonal
    (from A V = V W: V^T dA V = dW + W C - C W with dV = V C); symmetrised, since only
    symmetric inputs have eigh's meaning (PyTorch and JAX do the same)."""
    h = header(tp)
    batch, n = _stack(h, node)
    w = out_data(h, node, 0, dt)
    v = out_data(h, node, 1, dt)
    gw = out_grad(h, node, 0, dt)
    gv = out_grad(h, node, 1, dt)
    gx = in_grad(h, node, 0, dt)
    for b in range(batch):
        vb = _mat(v, b, n, n)
        m = np.dot(vb.T, _mat(gv, b, n, n))
        inner = np.zeros_like(m)
        for i in range(n):
            inner[i, i] = gw[b * n + i]
            for j in range(n):
                if i != j:  # F is antisymmetric: sym(F o m)_ij = F_ij (m_ij - m_ji) / 2
                    inner[i, j] = _over(0.5 * (m[i, j] - m[j, i]), w[b * n + j] - w[b * n + i])
        _mat(gx, b, n, n)[:, :] += np.dot(np.dot(vb, inner), vb.T)
    return OK


@jit
def svd_fwd(dt, node, tp):
    """Thin SVD ``A = U diag(S) Vh``; outputs (S, U, Vh) -- S first, so that svdvals is
    the first output alone."""
    h = header(tp)
    ip = node_ip(h, node)
    batch, m, n = ip[0], ip[1], ip[2]
    k = min(m, n)
    x = in_data(h, node, 0, dt)
    s = out_data(h, node, 0, dt)
    u = out_data(h, node, 1, dt)
    vh = out_data(h, node, 2, dt)
    try:
        for b in range(batch):
            ub, sb, vhb = np.linalg.svd(_mat(x, b, m, n), full_matrices=False)
            s[b * k : (b + 1) * k] = sb
            _mat(u, b, m, k)[:, :] = ub
            _mat(vh, b, k, n)[:, :] = vhb
    except Exception:
        return E_LINALG
    return OK


@jit
def svd_bwd(dt, node, tp):
    """gA = U M Vh + (I - U U^T) gU S^-1 Vh + U S^-1 gVh (I - V Vh), with
    M = diag(gS) + (J + J^T) S + S (K + K^T), J = F o U^T gU, K = F o Vh gVh^T,
    F_ij = 1 / (s_j^2 - s_i^2) off the diagonal (Townsend 2016; the transpose of
    JAX's JVP rule). The projections vanish for square matrices; 1/s is taken as 0
    where s = 0 (JAX's choice)."""
    h = header(tp)
    ip = node_ip(h, node)
    batch, m, n = ip[0], ip[1], ip[2]
    k = min(m, n)
    s = out_data(h, node, 0, dt)
    u = out_data(h, node, 1, dt)
    vh = out_data(h, node, 2, dt)
    gs = out_grad(h, node, 0, dt)
    gu = out_grad(h, node, 1, dt)
    gvh = out_grad(h, node, 2, dt)
    gx = in_grad(h, node, 0, dt)
    for b in range(batch):
        ub = _mat(u, b, m, k)
        vhb = _mat(vh, b, k, n)
        gub = _mat(gu, b, m, k)
        gvhb = _mat(gvh, b, k, n)
        sb = s[b * k : (b + 1) * k]
        j = np.dot(ub.T, gub)
        kk = np.dot(vhb, gvhb.T)
        mm = np.zeros_like(j)
        sinv = np.zeros_like(sb)
        for i in range(k):
            sinv[i] = 0.0 if sb[i] == 0.0 else 1.0 / sb[i]
            mm[i, i] = gs[b * k + i]
            for c in range(k):
                if i != c:
                    num = (j[i, c] - j[c, i]) * sb[c] + sb[i] * (kk[i, c] - kk[c, i])
                    mm[i, c] = _over(num, sb[c] * sb[c] - sb[i] * sb[i])
        out = np.dot(np.dot(ub, mm), vhb)
        if m > k:  # (gU - U J) S^-1 Vh
            out += np.dot((gub - np.dot(ub, j)) * sinv, vhb)
        if n > k:  # U S^-1 (gVh - K^T Vh)
            out += np.dot(ub * sinv, gvhb - np.dot(kk.T, vhb))
        _mat(gx, b, m, n)[:, :] += out
    return OK


@jit
def qr_fwd(dt, node, tp):
    """Reduced QR: Q (m, k), R (k, n), k = min(m, n)."""
    h = header(tp)
    ip = node_ip(h, node)
    batch, m, n = ip[0], ip[1], ip[2]
    k = min(m, n)
    x = in_data(h, node, 0, dt)
    q = out_data(h, node, 0, dt)
    r = out_data(h, node, 1, dt)
    try:
        for b in range(batch):
            qb, rb = np.linalg.qr(_mat(x, b, m, n))
            _mat(q, b, m, k)[:, :] = qb
            _mat(r, b, k, n)[:, :] = rb
    except Exception:
        return E_LINALG
    return OK


@jit
def qr_bwd(dt, node, tp):
    """For m >= n: gA = (Q N + gQ) R^-T with M = Q^T gQ - gR R^T and
    N = tril(M - M^T, -1) - M (the transpose of JAX's JVP rule). A wide A = [X | Y] is
    Q [U | V] with Q, U the QR of the square X and V = Q^T Y: gY = Q gV, and X gets
    the square rule with gQ + Y gV^T."""
    h = header(tp)
    ip = node_ip(h, node)
    batch, m, n = ip[0], ip[1], ip[2]
    k = min(m, n)
    x = in_data(h, node, 0, dt)
    q = out_data(h, node, 0, dt)
    r = out_data(h, node, 1, dt)
    gq = out_grad(h, node, 0, dt)
    gr = out_grad(h, node, 1, dt)
    gx = in_grad(h, node, 0, dt)
    try:
        for b in range(batch):
            qb = _mat(q, b, m, k)
            rb = _mat(r, b, k, n)
            grb = _mat(gr, b, k, n)
            gxb = _mat(gx, b, m, n)
            gqb = _mat(gq, b, m, k).copy()
            if n > k:  # (slices copied: np.dot wants contiguous operands)
                grv = np.ascontiguousarray(grb[:, k:])
                gqb += np.dot(np.ascontiguousarray(_mat(x, b, m, n)[:, k:]), grv.T)
                gxb[:, k:] += np.dot(qb, grv)
            rk = np.ascontiguousarray(rb[:, :k])
            mm = np.dot(qb.T, gqb) - np.dot(np.ascontiguousarray(grb[:, :k]), rk.T)
            nn = -mm
            for i in range(k):
                for c in range(i):
                    nn[i, c] += mm[i, c] - mm[c, i]
            z = np.dot(qb, nn) + gqb  # gA = Z R^-T:  R gA^T = Z^T
            gxb[:, :k] += np.linalg.solve(rk, np.ascontiguousarray(z.T)).T
    except Exception:
        return E_LINALG
    return OK


@jit
def eig_fwd(dt, node, tp):
    return _eigen_fwd(dt, node, tp, False)


@jit
def eig_bwd(dt, node, tp):
    """gA = V^-T (diag(gw) + F o (G - V^T V diag(G))) V^T, G = V^T gV,
    F_ij = 1 / (w_j - w_i): from A V = V W with dV = V C, where C's diagonal keeps
    each eigenvector at unit length (NumPy's normalisation)."""
    h = header(tp)
    batch, n = _stack(h, node)
    w = out_data(h, node, 0, dt)
    v = out_data(h, node, 1, dt)
    gw = out_grad(h, node, 0, dt)
    gv = out_grad(h, node, 1, dt)
    gx = in_grad(h, node, 0, dt)
    try:
        for b in range(batch):
            vb = _mat(v, b, n, n)
            g = np.dot(vb.T, _mat(gv, b, n, n))
            vtv = np.dot(vb.T, vb)
            inner = np.zeros_like(g)
            for i in range(n):
                inner[i, i] = gw[b * n + i]
                for c in range(n):
                    if i != c:
                        num = g[i, c] - vtv[i, c] * g[c, c]
                        inner[i, c] = _over(num, w[b * n + c] - w[b * n + i])
            vt = np.ascontiguousarray(vb.T)
            _mat(gx, b, n, n)[:, :] += np.linalg.solve(vt, np.dot(inner, vt))
    except Exception:
        return E_LINALG
    return OK


@jit
def pinv_fwd(dt, node, tp):
    """Moore-Penrose inverse from the thin SVD, singular values at most
    ``rcond * max(s)`` dropped (NumPy's rule); ``fp = [rcond]``."""
    h = header(tp)
    ip = node_ip(h, node)
    batch, m, n = ip[0], ip[1], ip[2]
    rcond = node_fp(h, node)[0]
    x = in_data(h, node, 0, dt)
    out = out_data(h, node, 0, dt)
    try:
        for b in range(batch):
            if m == 0 or n == 0:
                continue
            ub, sb, vhb = np.linalg.svd(_mat(x, b, m, n), full_matrices=False)
            cut = rcond * np.max(sb)
            for i in range(sb.size):
                sb[i] = 1.0 / sb[i] if sb[i] > cut else 0.0
            _mat(out, b, n, m)[:, :] = np.dot(vhb.T * sb, ub.T)
    except Exception:
        return E_LINALG
    return OK


@jit
def pinv_bwd(dt, node, tp):
    """dX = -X dA X + X X^T dA^T (I - A X) + (I - X A) dA^T X^T X (Golub and Pereyra
    1973; constant rank), so gA = -X^T G X^T + (I - A X) G^T X X^T
    + X^T X G^T (I - X A). Unlike a route through the SVD it stays finite for
    repeated singular values."""
    h = header(tp)
    ip = node_ip(h, node)
    batch, m, n = ip[0], ip[1], ip[2]
    x = in_data(h, node, 0, dt)
    out = out_data(h, node, 0, dt)
    g = out_grad(h, node, 0, dt)
    gx = in_grad(h, node, 0, dt)
    for b in range(batch):
        a = _mat(x, b, m, n)
        p = _mat(out, b, n, m)
        gb = _mat(g, b, n, m)
        gt = np.ascontiguousarray(gb.T)
        r = -np.dot(np.dot(p.T, gb), p.T)
        t = np.dot(gt, np.dot(p, p.T))  # G^T X X^T (m, n)
        r += t - np.dot(a, np.dot(p, t))
        t = np.dot(np.dot(p.T, p), gt)  # X^T X G^T (m, n)
        r += t - np.dot(np.dot(t, p), a)
        _mat(gx, b, m, n)[:, :] += r
    return OK


# --- triangular solves and LU ----------------------------------------------------------------


@jit
def tri_solve(a, rhs, out, n, k, lower, trans, unit):
    """``out = op(a)^-1 rhs`` for triangular ``a`` (n, n) and ``rhs`` (n, k), all flat
    row-major buffers, ``op`` the transpose when ``trans``; only ``a``'s triangle is
    read, its diagonal taken as ones when ``unit``. Substitution row by row, the inner
    loop along the contiguous right-hand sides (flat unsigned offsets: LLVM vectorises
    it). False for a zero on the diagonal (singular)."""
    low = lower != trans  # op(a) is lower triangular
    for step in range(n):
        i = step if low else n - 1 - step
        for c in range(k):
            out[ux(i * k + c)] = rhs[ux(i * k + c)]
        lo, hi = (0, i) if low else (i + 1, n)
        for j in range(lo, hi):
            t = a[ux(j * n + i)] if trans else a[ux(i * n + j)]
            if t != 0.0:
                for c in range(k):
                    out[ux(i * k + c)] -= t * out[ux(j * k + c)]
        if not unit:
            d = a[ux(i * n + i)]
            if d == 0.0:
                return False
            for c in range(k):
                out[ux(i * k + c)] /= d
    return True


@jit
def _flat(buf, b, size):
    return buf[b * size : (b + 1) * size]


@jit
def solve_triangular_fwd(dt, node, tp):
    """``ip = [batch, n, k, lower, trans, unit_diagonal]``."""
    h = header(tp)
    ip = node_ip(h, node)
    batch, n, k = ip[0], ip[1], ip[2]
    a = in_data(h, node, 0, dt)
    rhs = in_data(h, node, 1, dt)
    out = out_data(h, node, 0, dt)
    for b in range(batch):
        if not tri_solve(
            _flat(a, b, n * n),
            _flat(rhs, b, n * k),
            _flat(out, b, n * k),
            n,
            k,
            ip[3],
            ip[4],
            ip[5],
        ):
            return E_LINALG
    return OK


@jit
def solve_triangular_bwd(dt, node, tp):
    """x = op(A)^-1 b: gb = op(A)^-T g, and gA = -gb x^T (or -x gb^T when op
    transposes) on the triangle the solve read (without the diagonal when it is taken
    as ones)."""
    h = header(tp)
    ip = node_ip(h, node)
    batch, n, k = ip[0], ip[1], ip[2]
    lower, trans, unit = ip[3], ip[4], ip[5]
    a = in_data(h, node, 0, dt)
    out = out_data(h, node, 0, dt)
    g = out_grad(h, node, 0, dt)
    want_a = needs_grad(h, node, 0)
    want_b = needs_grad(h, node, 1)
    ga = in_grad(h, node, 0, dt) if want_a else a
    gb = in_grad(h, node, 1, dt) if want_b else a
    for b in range(batch):
        flat = np.empty(n * k, dtype=a.dtype)
        if not tri_solve(
            _flat(a, b, n * n), _flat(g, b, n * k), flat, n, k, lower, 1 - trans, unit
        ):
            return E_LINALG
        gbb = flat.reshape((n, k))
        if want_b:
            _mat(gb, b, n, k)[:, :] += gbb
        if want_a:
            xb = _mat(out, b, n, k)
            gab = _mat(ga, b, n, n)
            for i in range(n):
                lo, hi = (0, i + 1) if lower else (i, n)
                for j in range(lo, hi):
                    if unit and i == j:
                        continue
                    acc = 0.0
                    for c in range(k):
                        acc += gbb[j, c] * xb[i, c] if trans else gbb[i, c] * xb[j, c]
                    gab[i, j] -= acc
    return OK


@jit
def lu_factor_fwd(dt, node, tp):
    """LU with partial pivoting, LAPACK's ``getrf`` packing: L (unit diagonal, strict
    lower triangle) and U in one matrix; pivots (0-based row swaps, in order) as the
    second output. Right-looking, one rank-1 update per column along contiguous rows
    (flat unsigned offsets, so LLVM vectorises it: 64x64 in ~18 us, SciPy's getrf
    ~30 us with its call overhead); the column is scaled by the pivot's reciprocal, as
    LAPACK's dgetf2. A zero pivot leaves its column as it is (LAPACK goes on too)."""
    h = header(tp)
    batch, n = _stack(h, node)
    x = in_data(h, node, 0, dt)
    lu = out_data(h, node, 0, dt)
    piv = out_data(h, node, 1, dt)
    nn = n * n
    for b in range(batch):
        a = _flat(lu, b, nn)
        a[:] = _flat(x, b, nn)
        for c in range(n):
            p = c
            best = abs(a[ux(c * n + c)])
            for i in range(c + 1, n):
                v = abs(a[ux(i * n + c)])
                if v > best:
                    p, best = i, v
            piv[b * n + c] = p
            if p != c:
                for j in range(n):
                    t = a[ux(c * n + j)]
                    a[ux(c * n + j)] = a[ux(p * n + j)]
                    a[ux(p * n + j)] = t
            d = a[ux(c * n + c)]
            if d == 0.0:
                continue
            r = 1.0 / d
            for i in range(c + 1, n):
                f = a[ux(i * n + c)] * r
                a[ux(i * n + c)] = f
                if f != 0.0:
                    for j in range(c + 1, n):
                        a[ux(i * n + j)] -= f * a[ux(c * n + j)]
    return OK


@jit
def lu_factor_bwd(dt, node, tp):
    """P A = L U: gA = P^T L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T, with gL and gU
    the strict lower and the upper part of the packed gradient (the transpose of
    dL = L tril(X, -1), dU = triu(X) U, X = L^-1 P dA U^-1)."""
    h = header(tp)
    batch, n = _stack(h, node)
    lu = out_data(h, node, 0, dt)
    piv = out_data(h, node, 1, dt)
    g = out_grad(h, node, 0, dt)
    gx = in_grad(h, node, 0, dt)
    for b in range(batch):
        a = _mat(lu, b, n, n)
        gb = _mat(g, b, n, n)
        low = np.tril(a, -1) + np.eye(n, dtype=a.dtype)
        up = np.triu(a)
        z = np.tril(np.dot(low.T, np.tril(gb, -1)), -1) + np.triu(np.dot(np.triu(gb), up.T))
        packed = _flat(lu, b, n * n)
        y = np.empty(n * n, dtype=z.dtype)  # L^-T Z
        if not tri_solve(packed, np.ascontiguousarray(z).reshape(-1), y, n, n, 1, 1, 1):
            return E_LINALG
        yt = np.ascontiguousarray(y.reshape((n, n)).T).reshape(-1)
        wt = np.empty(n * n, dtype=z.dtype)  # (Y U^-T)^T = U^-1 Y^T
        if not tri_solve(packed, yt, wt, n, n, 0, 0, 0):
            return E_LINALG
        w = wt.reshape((n, n)).T
        # rows of P A are rows of A swapped in order: undo the swaps backwards
        for c in range(n - 1, -1, -1):
            p = int(piv[b * n + c])
            if p != c:
                for j in range(n):
                    w[c, j], w[p, j] = w[p, j], w[c, j]
        _mat(gx, b, n, n)[:, :] += w
    return OK


# --- 1-D convolution -------------------------------------------------------------------------
# ``ip = [n, m, lo, length]``: out[k] = sum_i a[k + lo - i] v[i] for k < length, the terms
# with 0 <= k + lo - i < n (NumPy's full convolution from offset lo: 'same' and 'valid'
# are windows of it). Direct loops: O(length m), what NumPy does.


@jit
def convolve_fwd(dt, node, tp):
    """One shifted axpy per element of ``v`` (the short sequence): out[k] += v[i]
    a[k + lo - i] over the k that stay inside ``a``; contiguous, so LLVM vectorises."""
    h = header(tp)
    ip = node_ip(h, node)
    n, m, lo, length = ip[0], ip[1], ip[2], ip[3]
    a = in_data(h, node, 0, dt)
    v = in_data(h, node, 1, dt)
    out = out_data(h, node, 0, dt)
    for k in range(length):
        out[ux(k)] = 0.0
    for i in range(m):
        c = v[ux(i)]
        shift = lo - i  # a's index of out[k] is k + shift
        for k in range(max(0, -shift), min(length, n - shift)):
            out[ux(k)] += c * a[ux(k + shift)]
    return OK


@jit
def convolve_bwd(dt, node, tp):
    """ga[k + lo - i] += g[k] v[i] (axpy per i, like the forward) and
    gv[i] += sum_k g[k] a[k + lo - i] (a dot product per i), over the k inside."""
    h = header(tp)
    ip = node_ip(h, node)
    n, m, lo, length = ip[0], ip[1], ip[2], ip[3]
    a = in_data(h, node, 0, dt)
    v = in_data(h, node, 1, dt)
    g = out_grad(h, node, 0, dt)
    want_a = needs_grad(h, node, 0)
    want_v = needs_grad(h, node, 1)
    ga = in_grad(h, node, 0, dt) if want_a else a
    gv = in_grad(h, node, 1, dt) if want_v else v
    for i in range(m):
        shift = lo - i
        k0, k1 = max(0, -shift), min(length, n - shift)
        if want_a:
            c = v[ux(i)]
            for k in range(k0, k1):
                ga[ux(k + shift)] += c * g[ux(k)]
        if want_v:
            acc = 0.0
            for k in range(k0, k1):
                acc += g[ux(k)] * a[ux(k + shift)]
            gv[ux(i)] += acc
    return OK
