"""The compiled recorder: one call per eager op writes the node and runs its forward.

Python front ends hand these functions slot ids and parameters; they infer dtypes and
broadcast shapes (elementwise), check that everything fits, allocate the output in
the arena, append the node and call its forward kernel through the dispatch table.
They never leave a half-written tape: every check happens before the first write,
and a negative status (``layout.E_*``) comes back instead of an exception, for the
Python side to grow the tape, compile a kernel, or raise a readable error.

The same forward kernels are what a captured program replays.
"""

from __future__ import annotations

import numpy as np
from numba import carray

from ._jit import as_pointer, call_kernel, jit
from .layout import (
    ALIGN,
    ALL_AXES,
    BOOL,
    DEFERRED,
    E_BROADCAST,
    E_FRONT_END,
    E_NO_KERNEL,
    E_NOFLOAT,
    E_SPACE,
    EW_LINKS,
    EW_NODES,
    EW_SLOTS,
    F64,
    FWD,
    H_ARENA,
    H_ARENA_CAP,
    H_ARENA_TOP,
    H_CAST_OP,
    H_ERR_A,
    H_ERR_B,
    H_ERR_C,
    H_FP_CAP,
    H_GRAD_ENABLED,
    H_IP_CAP,
    H_KTAB_OPS,
    H_LINK_CAP,
    H_NEED,
    H_NFP,
    H_NIP,
    H_NLINK,
    H_NNODES,
    H_NODE_CAP,
    H_NSHAPE,
    H_NSLOTS,
    H_NUMPY_MIN,
    H_NUMPY_POOL,
    H_OPFLAGS,
    H_REQ_CAP,
    H_SELF,
    H_SHAPE_CAP,
    H_SLOT_CAP,
    H_THREAD_MIN,
    ITEMSIZE,
    N_FIELDS,
    N_FLAGS,
    N_FP,
    N_IP,
    N_LINK,
    N_MASK,
    N_NFP,
    N_NIN,
    N_NIP,
    N_NOUT,
    N_OP,
    N_SIG,
    OK,
    OPF_ARITH,
    OPF_STREAMS,
    OPF_UFUNC,
    OPF_VECTOR,
    R_ALIAS,
    R_BODY,
    R_NFP,
    R_NIN,
    R_NIP,
    R_NOUT,
    S_ADDR,
    S_DTYPE,
    S_FIELDS,
    S_FLAGS,
    S_GEN,
    S_GRAD,
    S_NDIM,
    S_NODE,
    S_SHAPE,
    S_SIZE,
    S_VERSION,
    SLOT_CONST,
    SLOT_RG,
    STREAM_MIN,
    VECTOR_UFUNC_MIN,
    cast_sig,
    fparams,
    iparams,
    is_float,
    ktable,
    links,
    nodes,
    promote,
    request,
    request_f,
    shapes,
    slot_data,
    slots,
)

SCALAR = -1  # operand is a Python scalar passed by value
ABSENT = -2  # no second operand (unary op)
WEAK = -1  # dtype of a Python scalar: adopts the other operand's float dtype (NEP 50)


@jit
def aligned(nbytes):
    """Bytes to reserve: a whole number of cache lines for arrays of a line or more (one
    pass per line), 8-byte granules below (a scalar must not cost a 64-byte line: chains
    of scalar ops then touch 8x less memory)."""
    if nbytes < ALIGN:
        return (nbytes + 7) // 8 * 8
    return (nbytes + ALIGN - 1) // ALIGN * ALIGN


@jit
def place(top, nbytes):
    """Offset at which a value of ``nbytes`` goes when the arena is filled up to ``top``:
    values of a cache line or more start on a line."""
    if nbytes >= ALIGN:
        return (top + ALIGN - 1) // ALIGN * ALIGN
    return top


@jit
def has_room(h, nslots, nnodes, nlinks, nshape, nbytes):
    """True when the tables and the arena can take this much more; else sets H_NEED."""
    ok = (
        h[H_NSLOTS] + nslots <= h[H_SLOT_CAP]
        and h[H_NNODES] + nnodes <= h[H_NODE_CAP]
        and h[H_NLINK] + nlinks <= h[H_LINK_CAP]
        and h[H_NSHAPE] + nshape <= h[H_SHAPE_CAP]
        and h[H_ARENA_TOP] + nbytes <= h[H_ARENA_CAP]
    )
    if not ok:
        h[H_NEED] = nbytes
    return ok


@jit
def arena_alloc(h, nbytes):
    top = place(h[H_ARENA_TOP], nbytes)
    h[H_ARENA_TOP] = top + aligned(nbytes)
    return h[H_ARENA] + top


@jit
def new_slot(h, dt, ndim, shape_off, size, addr, flags, node):
    S = slots(h)
    s = h[H_NSLOTS]
    h[H_NSLOTS] = s + 1
    S[S_DTYPE, s] = dt
    S[S_NDIM, s] = ndim
    S[S_SHAPE, s] = shape_off
    S[S_SIZE, s] = size
    S[S_ADDR, s] = addr
    S[S_FLAGS, s] = flags
    S[S_NODE, s] = node
    S[S_VERSION, s] = 0
    S[S_GRAD, s] = -1
    S[S_GEN, s] = -1
    return s


@jit
def new_node(h, op, sig, nin, nout, ip_off, nip, fp_off, nfp):
    N = nodes(h)
    k = h[H_NNODES]
    h[H_NNODES] = k + 1
    N[N_OP, k] = op
    N[N_SIG, k] = sig
    N[N_LINK, k] = h[H_NLINK]
    N[N_NIN, k] = nin
    N[N_NOUT, k] = nout
    N[N_IP, k] = ip_off
    N[N_NIP, k] = nip
    N[N_FP, k] = fp_off
    N[N_NFP, k] = nfp
    N[N_FLAGS, k] = 0
    N[N_MASK, k] = 0
    return k


@jit
def push_link(h, s):
    """Append slot ``s`` to the link list, with its version at recording time."""
    L = links(h)
    i = h[H_NLINK]
    L[0, i] = s
    L[1, i] = slots(h)[S_VERSION, s]
    h[H_NLINK] = i + 1


@jit
def run_forward(h, node, op, sig):
    return call_kernel(ktable(h)[op, sig, FWD], node, h[H_SELF])


@jit
def kernel_missing(h, op, sig, direction):
    h[H_ERR_A] = op
    h[H_ERR_B] = sig
    h[H_ERR_C] = direction
    return E_NO_KERNEL


@jit
def _rg(h, s):
    return (slots(h)[S_FLAGS, s] & SLOT_RG) != 0


@jit
def record_cast(h, a, dt):
    """Record ``a.astype(dt)``; the caller has checked room and the kernel."""
    S = slots(h)
    src = S[S_DTYPE, a]
    flags = SLOT_RG if (h[H_GRAD_ENABLED] != 0 and _rg(h, a) and is_float(dt)) else 0
    size = S[S_SIZE, a]
    addr = arena_alloc(h, size * ITEMSIZE[dt])
    k = new_node(h, h[H_CAST_OP], cast_sig(src, dt), 1, 1, 0, 0, 0, 0)
    out = new_slot(h, dt, S[S_NDIM, a], S[S_SHAPE, a], size, addr, flags, k)
    push_link(h, a)
    push_link(h, out)
    run_forward(h, k, h[H_CAST_OP], cast_sig(src, dt))
    return out


@jit
def cast_slot(h, a, dt):
    """Public entry point: cast slot ``a`` to dtype code ``dt`` (returns the new slot)."""
    S = slots(h)
    src = S[S_DTYPE, a]
    if src == dt:
        return a
    if ktable(h)[h[H_CAST_OP], cast_sig(src, dt), FWD] <= 0:
        return kernel_missing(h, h[H_CAST_OP], cast_sig(src, dt), FWD)
    if not has_room(h, 1, 1, 2, 0, S[S_SIZE, a] * ITEMSIZE[dt] + 2 * ALIGN):
        return E_SPACE
    return record_cast(h, a, dt)


@jit
def _const_scalar(h, dt, value):
    addr = arena_alloc(h, ITEMSIZE[dt])
    s = new_slot(h, dt, 0, h[H_NSHAPE], 1, addr, SLOT_CONST, -1)
    if dt == F64:
        slot_data(h, s, np.float64)[0] = value
    else:
        slot_data(h, s, np.float32)[0] = value
    return s


@jit
def record_elementwise(h, op, a, b, fa, fb, compare):
    """Record and run an elementwise op; returns the output slot or a status.

    ``a``/``b`` are slot ids, or ``SCALAR`` for a Python number passed in ``fa``/``fb``;
    ``b`` is ``ABSENT`` for unary ops. ``compare`` makes the output bool.
    """
    S = slots(h)
    K = ktable(h)
    unary = b == ABSENT
    da = S[S_DTYPE, a] if a >= 0 else WEAK
    db = S[S_DTYPE, b] if b >= 0 else WEAK
    # --- computation dtype (NumPy promotion; Python scalars are weak, NEP 50)
    if unary:
        if not is_float(da):
            return E_NOFLOAT
        dt = da
    elif da == WEAK:
        if not is_float(db):
            return E_NOFLOAT
        dt = db
    elif db == WEAK:
        if not is_float(da):
            return E_NOFLOAT
        dt = da
    else:
        dt = promote(da, db)
        if dt < 0:
            return E_NOFLOAT
    # --- kernels present?
    if K[op, dt, FWD] <= 0:
        return kernel_missing(h, op, dt, FWD)
    cast_a = a >= 0 and da != dt
    cast_b = b >= 0 and db != dt
    if cast_a and K[h[H_CAST_OP], cast_sig(da, dt), FWD] <= 0:
        return kernel_missing(h, h[H_CAST_OP], cast_sig(da, dt), FWD)
    if cast_b and K[h[H_CAST_OP], cast_sig(db, dt), FWD] <= 0:
        return kernel_missing(h, h[H_CAST_OP], cast_sig(db, dt), FWD)
    # --- broadcast shape
    P = shapes(h)
    nda = S[S_NDIM, a] if a >= 0 else 0
    ndb = S[S_NDIM, b] if b >= 0 else 0
    offa = S[S_SHAPE, a] if a >= 0 else 0
    offb = S[S_SHAPE, b] if b >= 0 else 0
    nd = max(nda, ndb)
    size = 1
    same_a = nda == nd
    same_b = ndb == nd
    for d in range(nd):
        ja = d - (nd - nda)
        jb = d - (nd - ndb)
        xa = P[offa + ja] if ja >= 0 else 1
        xb = P[offb + jb] if jb >= 0 else 1
        if xa != xb and xa != 1 and xb != 1:
            h[H_ERR_A] = a
            h[H_ERR_B] = b
            return E_BROADCAST
        n = max(xa, xb)
        if xa == 1 and xb != 1:
            n = xb
        elif xb == 1:
            n = xa
        if n != xa:
            same_a = False
        if n != xb:
            same_b = False
        size *= n
    out_dt = BOOL if compare else dt
    sz_a = S[S_SIZE, a] if cast_a else 0
    sz_b = S[S_SIZE, b] if cast_b else 0
    nbytes = (size * ITEMSIZE[out_dt] + (sz_a + sz_b) * ITEMSIZE[dt]) + 8 * ALIGN
    if not has_room(h, EW_SLOTS, EW_NODES, EW_LINKS, nd, nbytes):
        return E_SPACE
    # --- write: constants and casts first, then the node
    if a == SCALAR:
        a = _const_scalar(h, dt, fa)
    elif cast_a:
        a = record_cast(h, a, dt)
    if not unary:
        if b == SCALAR:
            b = _const_scalar(h, dt, fb)
        elif cast_b:
            b = record_cast(h, b, dt)
    # output shape: reuse an operand's shape entries when it has the output's shape
    if same_a and a >= 0 and nda == nd:
        shape_off = S[S_SHAPE, a]
    elif not unary and same_b and ndb == nd:
        shape_off = S[S_SHAPE, b]
    else:
        shape_off = h[H_NSHAPE]
        for d in range(nd):
            ja = d - (nd - nda)
            jb = d - (nd - ndb)
            xa = P[offa + ja] if ja >= 0 else 1
            xb = P[offb + jb] if jb >= 0 else 1
            P[shape_off + d] = xb if xa == 1 else xa
        h[H_NSHAPE] = shape_off + nd
    rg = h[H_GRAD_ENABLED] != 0 and not compare and (_rg(h, a) or (not unary and _rg(h, b)))
    addr = arena_alloc(h, size * ITEMSIZE[out_dt])
    k = new_node(h, op, dt, 1 if unary else 2, 1, 0, 0, 0, 0)
    out = new_slot(h, out_dt, nd, shape_off, size, addr, SLOT_RG if rg else 0, k)
    push_link(h, a)
    if not unary:
        push_link(h, b)
    push_link(h, out)
    if size >= h[H_NUMPY_MIN] > 0 and _numpy_runs(h, op, size, a, b, unary, out_dt):
        return out + DEFERRED
    run_forward(h, k, op, dt)
    return out


@jit
def _numpy_runs(h, op, size, a, b, unary, dt):
    """Whether NumPy's ufunc computes a large elementwise result (``DEFERRED``) rather
    than the kernel.

    With one worker, a cheap row (``OPF_STREAMS``: sqrt, floor, maximum...) whose
    result the kernel streams past the caches (``STREAM_MIN`` bytes) runs in it.
    On one thread: where NumPy's loop is faster (``OPF_UFUNC``: SIMD log, arctan...; exp
    and tanh, which have vector formulas too, from ``VECTOR_UFUNC_MIN`` elements).
    With several, results of ``H_THREAD_MIN`` elements and more run on all cores, either
    as NumPy's ufunc in halves on Python threads or as a kernel on numba's (OpenMP)
    threads, and the two pools must not meet: OpenMP's workers spin for milliseconds
    after a parallel kernel, and NumPy's halves beside them run at half speed (2e6
    chain, 2 threads: tanh 13.3 ms after sin, 7.6 away from it). So rows only NumPy
    does well go to NumPy, rows only the kernels do well (sin) to numba, and rows as
    fast either way (arithmetic; exp and tanh, which have vector formulas) follow the
    pool of the last large forward (``H_NUMPY_POOL``; a backward's kernels reset it
    to numba's)."""
    S = slots(h)
    f = carray(as_pointer(h[H_OPFLAGS], np.int64), h[H_KTAB_OPS])[op]
    sa, sb = S[S_SIZE, a], (size if unary else S[S_SIZE, b])
    # same-shape or scalar operands: the kernels' streamed and parallel loops take them,
    # and NumPy's halves (a broadcast operand takes the kernels' strided loop)
    halves = (sa == 1 or sa == size) and (sb == 1 or sb == size)
    if halves and (f & OPF_STREAMS) and h[H_THREAD_MIN] == 0 and size * ITEMSIZE[dt] >= STREAM_MIN:
        return False  # one worker: the kernel streams it (ops.elementwise.kernels.streams)
    numpy = (f & OPF_UFUNC) != 0
    if not size >= h[H_THREAD_MIN] > 0:
        # one core: exp and tanh (a vector formula and NumPy's SIMD loop) by size
        return numpy and ((f & OPF_VECTOR) == 0 or size >= VECTOR_UFUNC_MIN)
    if halves and ((f & OPF_ARITH) != 0 or (numpy and (f & OPF_VECTOR) != 0)):
        numpy = h[H_NUMPY_POOL] != 0  # as fast either way: stay on the last pool
    if halves:
        if numpy:
            h[H_NUMPY_POOL] = 1
        elif (f & (OPF_ARITH | OPF_VECTOR)) != 0:  # the kernel's parallel loops
            h[H_NUMPY_POOL] = 0
    return numpy


@jit
def record_tensors(h, opc, a, b):
    """``record_elementwise`` for tensor operands (the common case, fewer arguments to
    convert on each call from Python): ``opc = 2 * op + compare``."""
    return record_elementwise(h, opc >> 1, a, b, 0.0, 0.0, (opc & 1) != 0)


@jit
def record_general(h, op, sig, differentiable):
    """Record and run the array op described in the request buffer (see ``R_BODY``).

    Checks that the tables and the arena can take it (else ``E_SPACE``, the request
    left as it is for the retry), copies input slots, parameters and output shapes into
    the tables, allocates the outputs and runs the forward kernel. Returns the first
    output slot or a status.
    """
    rq = request(h)
    nin = rq[R_NIN]
    nout = rq[R_NOUT]
    nip = rq[R_NIP]
    nfp = rq[R_NFP]
    alias = rq[R_ALIAS] != 0
    if ktable(h)[op, sig, FWD] <= 0:
        return kernel_missing(h, op, sig, FWD)
    ip0 = R_BODY + nin
    out0 = ip0 + nip
    # sizes of the outputs
    nbytes = 0
    nshape = 0
    c = out0
    for j in range(nout):
        ndim = rq[c + 1]
        size = 1
        for d in range(ndim):
            size *= rq[c + 2 + d]
        nshape += ndim
        if not (alias and j == 0):
            nbytes += aligned(size * ITEMSIZE[rq[c]]) + ALIGN
        c += 2 + ndim
    fp0 = c
    if not (
        has_room(h, nout, 1, nin + nout, nshape, nbytes)
        and h[H_NIP] + nip <= h[H_IP_CAP]
        and h[H_NFP] + nfp <= h[H_FP_CAP]
    ):
        return E_SPACE
    S = slots(h)
    L = links(h)
    P = shapes(h)
    base = h[H_NLINK]
    top = h[H_ARENA_TOP]
    off = h[H_NSHAPE]
    rg = False
    for i in range(nin):
        s = rq[R_BODY + i]
        L[0, base + i] = s
        L[1, base + i] = S[S_VERSION, s]
        if differentiable and h[H_GRAD_ENABLED] != 0 and _rg(h, s):
            rg = True
    IP = iparams(h)
    for i in range(nip):
        IP[h[H_NIP] + i] = rq[ip0 + i]
    FP = fparams(h)
    rqf = request_f(h)
    for i in range(nfp):
        FP[h[H_NFP] + i] = rqf[fp0 + i]
    k = new_node(h, op, sig, nin, nout, h[H_NIP], nip, h[H_NFP], nfp)
    h[H_NIP] += nip
    h[H_NFP] += nfp
    h[H_NLINK] = base + nin
    first = -1
    cursor = off
    c = out0
    for j in range(nout):
        dt = rq[c]
        ndim = rq[c + 1]
        size = 1
        for d in range(ndim):
            P[cursor + d] = rq[c + 2 + d]
            size *= rq[c + 2 + d]
        c += 2 + ndim
        if alias and j == 0:
            addr = S[S_ADDR, L[0, base]]
        else:
            addr = arena_alloc(h, size * ITEMSIZE[dt])
        flags = SLOT_RG if (rg and is_float(dt)) else 0
        s = new_slot(h, dt, ndim, cursor, size, addr, flags, k)
        cursor += ndim
        push_link(h, s)
        if j == 0:
            first = s
    h[H_NSHAPE] = cursor
    st = run_forward(h, k, op, sig)
    if st != OK:  # the kernel failed (LAPACK): forget the node and its outputs
        h[H_NNODES] = k
        h[H_NSLOTS] = first
        h[H_NLINK] = base
        h[H_NSHAPE] = off
        h[H_NIP] -= nip
        h[H_NFP] -= nfp
        h[H_ARENA_TOP] = top
        h[H_ERR_A] = k
        return st
    return first


# --- compiled front ends: the request of a common array op, written here -------------
#
# ``general`` (tensors.py) writes an array op's request cell by cell from Python, after
# its front end has worked out the result's shape: ~2-3 us a call, against ~1 for an
# elementwise op, whose recorder reads the operands' shapes itself. These do the same
# for the array ops models call most: they read the operand slots' shapes, write the
# request ``record_general`` reads, and record. Anything off their common case (an
# integer dtype, an axis out of range, batch dimensions, a mean of nothing, a request
# longer than the buffer) returns ``E_FRONT_END`` before anything is written to the
# tables, and the Python front end records the op (and raises NumPy's errors).


@jit
def _fits(h, nin, nip, nfp, nshape):
    """Whether a one-output request of these counts fits the request buffer."""
    return R_BODY + nin + nip + 2 + nshape + nfp <= h[H_REQ_CAP]


@jit
def _open_request(h, nin, nip, nfp):
    """The request buffer with the counts of a one-output request written."""
    rq = request(h)
    rq[R_NIN] = nin
    rq[R_NOUT] = 1
    rq[R_NIP] = nip
    rq[R_NFP] = nfp
    rq[R_ALIAS] = 0
    return rq


@jit
def record_reduce(h, op, differentiable, s, axis, keepdims, mean):
    """``sum`` or ``mean`` (``mean``: scale by 1 / count) of slot ``s`` over one axis,
    or over all (``axis`` ``ALL_AXES``), as ``ops.reduce.front._reduce`` records it:
    int params ``(naxes, *axes)``, one float param, the scale."""
    S = slots(h)
    P = shapes(h)
    dt = S[S_DTYPE, s]
    ndim = S[S_NDIM, s]
    off = S[S_SHAPE, s]
    if not is_float(dt):
        return E_FRONT_END
    if axis == ALL_AXES:
        naxes = ndim
    else:
        naxes = 1
        if axis < 0:
            axis += ndim
        if axis < 0 or axis >= ndim:
            return E_FRONT_END
    count = 1
    for d in range(ndim):
        if axis == ALL_AXES or d == axis:
            count *= P[off + d]
    if mean and count == 0:
        return E_FRONT_END
    out_ndim = ndim if keepdims else ndim - naxes
    if not _fits(h, 1, 1 + naxes, 1, out_ndim):
        return E_FRONT_END
    rq = _open_request(h, 1, 1 + naxes, 1)
    c = R_BODY
    rq[c] = s
    rq[c + 1] = naxes
    c += 2
    for d in range(ndim):
        if axis == ALL_AXES or d == axis:
            rq[c] = d
            c += 1
    rq[c] = dt
    rq[c + 1] = out_ndim
    c += 2
    for d in range(ndim):
        if axis == ALL_AXES or d == axis:
            if keepdims:
                rq[c] = 1
                c += 1
        else:
            rq[c] = P[off + d]
            c += 1
    request_f(h)[c] = 1.0 / count if mean else 1.0
    return record_general(h, op, dt, differentiable)


@jit
def record_matmul(h, op, differentiable, a, b):
    """``a @ b`` of two 2-D slots of one float dtype, as ``ops.linalg.front.matmul``
    records it: int params ``(0 batch dims, m, k, n)``, result ``(m, n)``."""
    S = slots(h)
    P = shapes(h)
    dt = S[S_DTYPE, a]
    if not is_float(dt) or S[S_DTYPE, b] != dt or S[S_NDIM, a] != 2 or S[S_NDIM, b] != 2:
        return E_FRONT_END
    m = P[S[S_SHAPE, a]]
    k = P[S[S_SHAPE, a] + 1]
    n = P[S[S_SHAPE, b] + 1]
    if P[S[S_SHAPE, b]] != k:
        return E_FRONT_END
    if not _fits(h, 2, 4, 0, 2):
        return E_FRONT_END
    rq = _open_request(h, 2, 4, 0)
    c = R_BODY
    rq[c] = a
    rq[c + 1] = b
    rq[c + 2] = 0
    rq[c + 3] = m
    rq[c + 4] = k
    rq[c + 5] = n
    rq[c + 6] = dt
    rq[c + 7] = 2
    rq[c + 8] = m
    rq[c + 9] = n
    return record_general(h, op, dt, differentiable)


@jit
def record_along(h, op, differentiable, s, axis):
    """An op along one axis whose result has the operand's shape and dtype
    (``log_softmax``): int param the axis, normalised."""
    S = slots(h)
    P = shapes(h)
    dt = S[S_DTYPE, s]
    ndim = S[S_NDIM, s]
    off = S[S_SHAPE, s]
    if axis < 0:
        axis += ndim
    if not is_float(dt) or axis < 0 or axis >= ndim:
        return E_FRONT_END
    if not _fits(h, 1, 1, 0, ndim):
        return E_FRONT_END
    rq = _open_request(h, 1, 1, 0)
    rq[R_BODY] = s
    rq[R_BODY + 1] = axis
    rq[R_BODY + 2] = dt
    rq[R_BODY + 3] = ndim
    for d in range(ndim):
        rq[R_BODY + 4 + d] = P[off + d]
    return record_general(h, op, dt, differentiable)


@jit
def import_slot(h, addr, dt, ndim, size, flags):
    """A slot for existing memory (a user's tensor, a constant, an index array).

    Its shape is at ``shapes[nshape:nshape + ndim]`` (written by Python)."""
    if not has_room(h, 1, 0, 0, ndim, 0):
        return E_SPACE
    off = h[H_NSHAPE]
    h[H_NSHAPE] = off + ndim
    return new_slot(h, dt, ndim, off, size, addr, flags, -1)


@jit
def alias_slot(h, s, flags):
    """A new slot sharing ``s``'s memory and shape, with other flags (``detach``)."""
    if not has_room(h, 1, 0, 0, 0, 0):
        return E_SPACE
    S = slots(h)
    return new_slot(
        h, S[S_DTYPE, s], S[S_NDIM, s], S[S_SHAPE, s], S[S_SIZE, s], S[S_ADDR, s], flags, -1
    )


# Field counts, re-exported for the Python side.
NODE_FIELDS = N_FIELDS
SLOT_FIELDS = S_FIELDS
CAPS = (H_NODE_CAP, H_SLOT_CAP, H_LINK_CAP, H_IP_CAP, H_FP_CAP, H_SHAPE_CAP, H_ARENA_CAP)


@jit
def record_custom(h, op, sig, nin, nout, rg_mask):
    """Record a custom function's node. Python has written its input slots then its
    output slots (already holding the forward's values) at ``links[0, nlink:]`` and the
    index of its Python state at ``iparams[nip]``. Output j requires grad when bit j of
    ``rg_mask`` is set."""
    if not has_room(h, 0, 1, 0, 0, 0):
        return E_SPACE
    S = slots(h)
    L = links(h)
    base = h[H_NLINK]
    k = new_node(h, op, sig, nin, nout, h[H_NIP], 1, h[H_NFP], 0)
    h[H_NIP] += 1
    for i in range(nin + nout):
        L[1, base + i] = S[S_VERSION, L[0, base + i]]
    h[H_NLINK] = base + nin + nout
    for j in range(nout):
        s = L[0, base + nin + j]
        S[S_NODE, s] = k
        S[S_FLAGS, s] = SLOT_RG if (rg_mask >> j) & 1 else 0
    return k


@jit
def mark_backward(h, mark, lo, hi, needed):
    """Backward liveness over the typed tape: walking nodes ``hi - 1`` down to ``lo``
    (the tape order is topological), a node with a marked output (``mark[s] = 1``, a
    uint8 array over the slots) is needed: its inputs are marked, and ``needed[k] = 1``
    (when ``needed`` has room). Returns the bytes of the needed nodes' marked outputs.

    With :func:`mark_forward`, this is the liveness every walk over the tape asks
    for: the compiled scheduler's prune (``scheduler._prune``, which fuses it with
    laying out the gradient buffers), the recording walks (``rule_walks``: which nodes
    a tangent must be pushed through, which slots a transform's arguments reach) and
    the tape's memory account (:func:`reachable`)."""
    N = nodes(h)
    S = slots(h)
    L = links(h)
    total = 0
    for k in range(hi - 1, lo - 1, -1):
        base = N[N_LINK, k]
        nin = N[N_NIN, k]
        hit = False
        for j in range(N[N_NOUT, k]):
            s = L[0, base + nin + j]
            if mark[s]:
                hit = True
                total += S[S_SIZE, s] * ITEMSIZE[S[S_DTYPE, s]]
        if hit:
            if k < needed.size:
                needed[k] = 1
            for i in range(nin):
                mark[L[0, base + i]] = 1
    return total


@jit
def mark_forward(h, mark, lo, hi):
    """Forward reach over the typed tape: walking nodes ``lo .. hi - 1`` in recording
    order, every output of a node with a marked input (``mark[s] = 1``) is marked.
    What depends on a transform's arguments (the record-time ``SLOT_RG`` flag is this
    walk from every tensor that requires grad, kept per slot as it is recorded)."""
    N = nodes(h)
    L = links(h)
    for k in range(lo, hi):
        base = N[N_LINK, k]
        nin = N[N_NIN, k]
        for i in range(nin):
            if mark[L[0, base + i]]:
                for j in range(N[N_NOUT, k]):
                    mark[L[0, base + nin + j]] = 1
                break


@jit
def reachable(h, roots, mark):
    """Mark (``mark[s] = 1``, a uint8 array of at least ``H_NSLOTS``) the slots the
    graphs of slots ``roots`` reach; returns the bytes of op results among them (values
    the tape computed, not imported arrays): what the tape must keep for those graphs.
    One walk down the nodes in reverse order (:func:`mark_backward`). The tape
    compares the bytes with what its arena holds to tell a big graph from results of
    graphs nobody holds any more (a loop of forward passes without backward, see
    ``Tape.fix``)."""
    for r in roots:
        mark[r] = 1
    return mark_backward(h, mark, 0, h[H_NNODES], mark[:0])
