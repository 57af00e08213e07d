"""The backward pass: one compiled loop over the tape, no Python per node.

``run_backward(h, root, seed, retain)``

1. **prune** -- walk the nodes in reverse tape order (the tape order is already
   topological) from the root's producer. A node is *live* when one of its outputs
   wants a gradient and one of its inputs requires grad; its needs-input-grad mask
   (``N_MASK``, PyTorch's ``task_should_compute_output``) records which inputs do, and
   those inputs then want a gradient too. Only live nodes run. Freed graphs,
   non-differentiable ops and kernels not compiled yet are reported here, before
   anything is written.
2. **allocate** -- each slot that wants a gradient gets a buffer of its own dtype and
   size in the gradient arena (offsets in ``S_GRAD``). Nothing is written yet.
3. **dispatch** -- live nodes run in reverse order through the kernel table. Just
   before a node runs, each gradient buffer it touches that holds nothing yet is
   either zeroed or, when this node is the buffer's first writer and its kernel can
   store rather than add (``OPF_ASSIGNS``), marked *fresh* in the node's mask
   (``FRESH_SHIFT``): most buffers are written once, and the memset pass over them all
   (half the backward of a long elementwise chain) is gone. Where the buffers are
   small (under ``H_LAZY_BYTES``, 64, a live node), one memset of the arena is the
   cheaper, and that backward does it instead (``H_LAZY`` 0).
4. **validate** -- before a kernel runs, the gradient buffers it will touch are checked
   against their slots' metadata (dtype of the kernel's signature, size), so a kernel
   can never write a gradient of the wrong dtype or extent; the node is named if not.
5. **accumulate** -- kernels add into the buffers in place (fan-out sums for free), or
   store into fresh ones; the Python side then adds leaf gradients into ``.grad``.
"""

from __future__ import annotations

import numpy as np
from numba import carray

from ._jit import as_pointer, call_kernel, jit
from .layout import (
    BWD,
    E_CALLBACK_HOOK,
    E_CALLBACK_PY,
    E_FREED,
    E_GRAD_META,
    E_GRAD_SPACE,
    E_NO_BWD,
    E_NO_KERNEL,
    E_NONFINITE,
    E_VERSION,
    FRESH_SHIFT,
    H_ANOMALY,
    H_ERR_A,
    H_ERR_B,
    H_ERR_C,
    H_ERR_D,
    H_GEN,
    H_GRAD,
    H_GRAD_CAP,
    H_GRAD_USED,
    H_HOOKS,
    H_INPLACE,
    H_KTAB_OPS,
    H_LAZY,
    H_LAZY_BYTES,
    H_LO,
    H_NEED,
    H_NUMPY_POOL,
    H_NXGRAD,
    H_OPFLAGS,
    H_POISON,
    H_SAVED,
    H_SELF,
    H_STAT_CALLBACKS,
    H_STAT_NODES,
    H_USER_OP0,
    ITEMSIZE,
    N_DTYPES,
    N_FLAGS,
    N_LINK,
    N_MASK,
    N_NIN,
    N_NOUT,
    N_OP,
    N_SIG,
    NO_RULE,
    NODE_FREED,
    NODE_LIVE,
    OK,
    OPF_ASSIGNS,
    OPF_PASS,
    OPF_SHARED,
    PY_CALLBACK,
    S_ADDR,
    S_DTYPE,
    S_FLAGS,
    S_GEN,
    S_GRAD,
    S_NODE,
    S_SIZE,
    S_VERSION,
    S_XGRAD,
    SLOT_FREED,
    SLOT_GRAD_SET,
    SLOT_HOOK,
    SLOT_RG,
    is_float,
    ktable,
    links,
    nodes,
    saved_bit,
    slot_grad,
    slots,
)
from .record import aligned, place


@jit
def _input_dtype(sig, i):
    """The dtype the kernel of signature ``sig`` expects for its float input ``i``."""
    if sig < N_DTYPES:
        return sig
    return (sig - N_DTYPES) // N_DTYPES  # cast: (src, dst) pair, the input is src


@jit
def _want(h, s, gen, total):
    """Give slot ``s`` a gradient buffer in this backward (if it has none yet); returns
    the new end of the gradient arena."""
    S = slots(h)
    if S[S_GEN, s] != gen and S[S_XGRAD, s] != 0:  # a leaf's own array (engine)
        S[S_GEN, s] = gen
        # as an offset from the arena, so that kernels need no test (the arena does not
        # move during a backward: a bigger one means running it again from the start)
        S[S_GRAD, s] = S[S_XGRAD, s] - h[H_GRAD]
        S[S_FLAGS, s] &= ~SLOT_GRAD_SET
        h[H_NXGRAD] += 1
    elif S[S_GEN, s] != gen:
        nbytes = S[S_SIZE, s] * ITEMSIZE[S[S_DTYPE, s]]
        total = place(total, nbytes)
        S[S_GEN, s] = gen
        S[S_GRAD, s] = total
        S[S_FLAGS, s] &= ~SLOT_GRAD_SET
        total += aligned(nbytes)
    return total


@jit
def _prune(h, start, gen, total):
    """Mark live nodes and wanted slots (allocating their gradient offsets).

    Returns (status, lowest node that can matter, bytes of gradient arena used). The
    walk stops below the lowest producer of any wanted slot, so a long tape with older
    graphs below costs nothing.
    """
    N = nodes(h)
    S = slots(h)
    L = links(h)
    K = ktable(h)
    lo = start
    for k in range(start, -1, -1):
        if k < lo:
            break
        N[N_FLAGS, k] &= ~NODE_LIVE
        N[N_MASK, k] = 0
        base = N[N_LINK, k]
        nin = N[N_NIN, k]
        nout = N[N_NOUT, k]
        wanted = False
        for j in range(nout):
            if S[S_GEN, L[0, base + nin + j]] == gen:
                wanted = True
        if not wanted:
            continue
        mask = 0
        for i in range(nin):
            if S[S_FLAGS, L[0, base + i]] & SLOT_RG:
                mask |= 1 << i
        if mask == 0:
            continue
        if N[N_FLAGS, k] & NODE_FREED:
            h[H_ERR_A] = k
            return E_FREED, lo, total
        addr = K[N[N_OP, k], N[N_SIG, k], BWD]
        if addr == NO_RULE:
            h[H_ERR_A] = k
            return E_NO_BWD, lo, total
        if addr == 0:
            h[H_ERR_A] = N[N_OP, k]
            h[H_ERR_B] = N[N_SIG, k]
            h[H_ERR_C] = BWD
            return E_NO_KERNEL, lo, total
        saved = 0
        if h[H_INPLACE] != 0:  # what the wanted gradients read (mask 1, 2: one input)
            table = carray(as_pointer(h[H_SAVED], np.int64), (h[H_KTAB_OPS], 3))
            saved = table[N[N_OP, k], mask if mask <= 2 else 0]
        for i in range(nin + nout if saved != 0 else 0):
            if (saved >> saved_bit(i, nin)) & 1:
                s = L[0, base + i]
                if L[1, base + i] != S[S_VERSION, s]:  # modified in place since recorded
                    h[H_ERR_A] = k
                    h[H_ERR_B] = s
                    h[H_ERR_C] = L[1, base + i]
                    h[H_ERR_D] = S[S_VERSION, s]
                    return E_VERSION, lo, total
        N[N_FLAGS, k] |= NODE_LIVE
        h[H_LAZY] += 1  # counts the live nodes here; run_backward then decides
        N[N_MASK, k] = mask
        # a compiled custom function gets a buffer for every float input (its kernel may
        # write them all); the mask still says which are wanted
        every = N[N_OP, k] > h[H_USER_OP0]
        for i in range(nin):
            s = L[0, base + i]
            if every and not mask & (1 << i) and is_float(S[S_DTYPE, s]):
                total = _want(h, s, gen, total)
            if mask & (1 << i):
                s = L[0, base + i]
                if S[S_FLAGS, s] & SLOT_FREED:
                    # a non-leaf from an earlier step whose graph was already freed
                    h[H_ERR_A] = -1 - s
                    return E_FREED, lo, total
                total = _want(h, s, gen, total)
                p = S[S_NODE, s]
                if p >= 0 and p < lo:
                    lo = p
        for j in range(nout):  # every output of a live node gets a (maybe zero) buffer
            total = _want(h, L[0, base + nin + j], gen, total)
    return OK, lo, total


@jit
def _validate(h, k):
    """Gradient buffers of node k match their slots: dtype of the kernel, size."""
    N = nodes(h)
    S = slots(h)
    L = links(h)
    base = N[N_LINK, k]
    nin = N[N_NIN, k]
    mask = N[N_MASK, k]
    gen = h[H_GEN]
    for i in range(nin):
        if mask & (1 << i):
            s = L[0, base + i]
            expect = _input_dtype(N[N_SIG, k], i)
            if S[S_GEN, s] != gen or S[S_DTYPE, s] != expect:
                h[H_ERR_A] = k
                h[H_ERR_B] = s
                h[H_ERR_C] = expect
                h[H_ERR_D] = S[S_DTYPE, s]
                return E_GRAD_META
    return OK


@jit
def run_backward(h, root, seed, retain):
    """Backpropagate from slot ``root``; ``seed`` is a slot with the root's cotangent
    (same dtype and size) or -1 for ones. Returns a status (``OK`` = 0), or asks Python
    to run a node (``E_CALLBACK_*``) and :func:`resume` afterwards."""
    S = slots(h)
    gen = h[H_GEN] + 1
    h[H_GEN] = gen
    h[H_STAT_NODES] = 0
    h[H_STAT_CALLBACKS] = 0
    start = S[S_NODE, root]  # -1 for a leaf: nothing to run
    h[H_LAZY] = 0
    h[H_NXGRAD] = 0
    h[H_NUMPY_POOL] = 0  # its kernels run on numba's threads (see record._numpy_runs)
    total = _want(h, root, gen, 0)
    st, lo, total = _prune(h, start, gen, total)
    if st != OK:
        return st
    if total > h[H_GRAD_CAP]:
        h[H_NEED] = total
        return E_GRAD_SPACE
    h[H_GRAD_USED] = total
    h[H_LO] = lo
    # Small buffers (a scalar recurrence: 10,000 nodes, a few bytes each): one memset of
    # the arena costs less than making buffers ready node by node (~3 ns a node), so
    # that pass zeroes everything and the nodes add (no fresh bits). Buffers outside
    # the arena (leaves' own arrays) always go node by node.
    h[H_LAZY] = int(h[H_NXGRAD] > 0 or total >= h[H_LAZY_BYTES] * h[H_LAZY])
    return _seed_and_run(h, root, seed, start, retain)


@jit
def zero_arena(h):
    """Zero the whole gradient arena (small buffers, or a replay's plan)."""
    carray(as_pointer(h[H_GRAD], np.uint8), h[H_GRAD_USED])[:] = 0


@jit
def _fill(h, s, poison):
    """Zero slot ``s``'s gradient buffer, or fill it with NaN (``poison``: a buffer a
    kernel is about to store into, under ``H_POISON``, so that a kernel that reads it
    first gives NaN in the tests instead of a stale value that happens to be right)."""
    S = slots(h)
    if poison and S[S_DTYPE, s] == 0:
        slot_grad(h, s, np.float64)[:] = np.nan
    elif poison:
        slot_grad(h, s, np.float32)[:] = np.nan
    else:
        nbytes = S[S_SIZE, s] * ITEMSIZE[S[S_DTYPE, s]]
        carray(as_pointer(h[H_GRAD] + S[S_GRAD, s], np.uint8), nbytes)[:] = 0


@jit
def _once(L, base, nin, i, s):
    """Whether slot ``s`` is node input ``i`` only (``x * x`` passes it twice)."""
    for j in range(nin):
        if j != i and L[0, base + j] == s:
            return False
    return True


@jit
def _prepare(h, k, gen):
    """Make the gradient buffers node ``k`` touches ready for it, just before it runs:
    an output's buffer that nothing wrote is zeroed (the kernel, or a hook, reads it);
    an input's buffer that holds nothing yet is zeroed, or, when the op's kernel stores
    into fresh buffers (``OPF_ASSIGNS``) and the slot is this input only (or the kernel
    sums a slot passed twice in one pass, ``OPF_SHARED``: the first input's bit
    speaks for it), marked fresh in the node's mask (``FRESH_SHIFT``); or, when its
    gradient is the output's unchanged (``OPF_PASS``: add, subtract's x), it takes the
    output's buffer itself and leaves the node's mask. Every such buffer then counts as
    written."""
    N = nodes(h)
    S = slots(h)
    L = links(h)
    base = N[N_LINK, k]
    nin = N[N_NIN, k]
    mask = N[N_MASK, k]
    op = N[N_OP, k]
    every = op > h[H_USER_OP0]
    flags = carray(as_pointer(h[H_OPFLAGS], np.int64), h[H_KTAB_OPS])[op]
    assigns = flags & OPF_ASSIGNS
    shared = flags & OPF_SHARED
    # (not in anomaly mode: its check after the kernel reads the inputs the mask names,
    # and must name this node for a NaN a hook put on the output)
    passes = (flags // OPF_PASS) & 3 if N[N_NOUT, k] == 1 and h[H_ANOMALY] == 0 else 0
    fresh = 0
    mask0 = mask
    narrow = nin <= FRESH_SHIFT  # a wider node's mask bits reach the fresh bits' place
    if shared and nin == 2 and mask == 3 and L[0, base] == L[0, base + 1]:
        fresh = 4  # one slot as both operands: the kernel sums both formulas in one pass
    poison = h[H_POISON] != 0
    for j in range(N[N_NOUT, k]):
        s = L[0, base + nin + j]
        if S[S_GEN, s] == gen and not S[S_FLAGS, s] & SLOT_GRAD_SET:
            _fill(h, s, False)
            S[S_FLAGS, s] |= SLOT_GRAD_SET
    for i in range(nin):
        s = L[0, base + i]
        if S[S_GEN, s] != gen or S[S_FLAGS, s] & SLOT_GRAD_SET:
            continue
        wanted = (mask >> i) & 1
        if not wanted and not every:
            continue  # not this node's to write
        if wanted and (passes >> i) & 1 and _can_pass(h, s, L[0, base + nin], L, base, nin, i):
            # The output's gradient is complete (its consumers ran) and nothing reads
            # it after this node (hooks on it run before its kernel and change that
            # very buffer, which the input should see): the input's gradient starts as
            # it. Later writers of the input add to it; this node's kernel leaves the
            # input alone (mask bit cleared; replay plans keep the mask and the offset
            # this run left). One input per node: two sharing a buffer would add each
            # other's later contributions.
            S[S_GRAD, s] = S[S_GRAD, L[0, base + nin]]
            S[S_FLAGS, s] |= SLOT_GRAD_SET
            mask &= ~(1 << i)
            passes = 0
            continue
        if wanted and assigns and narrow and (shared or _once(L, base, nin, i, s)):
            fresh |= 1 << i
            if poison:
                _fill(h, s, True)
        else:
            _fill(h, s, False)
        S[S_FLAGS, s] |= SLOT_GRAD_SET
    if fresh or mask != mask0:
        N[N_MASK, k] = mask | (fresh << FRESH_SHIFT)


@jit
def _can_pass(h, s, o, L, base, nin, i):
    """Whether input slot ``s`` (input ``i`` of the node whose output is ``o``) may take
    ``o``'s gradient buffer: same dtype and size (no broadcast, no cast), both in the
    arena (a leaf's own array stays its own), and ``s`` is this input only."""
    S = slots(h)
    return (
        S[S_SIZE, s] == S[S_SIZE, o]
        and S[S_DTYPE, s] == S[S_DTYPE, o]
        and S[S_XGRAD, s] == 0
        and S[S_XGRAD, o] == 0
        and _once(L, base, nin, i, s)
    )


@jit
def seed_gradients(h, root, seed):
    """Put the cotangent of ``root`` in its buffer (a copy of slot ``seed``, or ones);
    the other buffers are made ready node by node (:func:`_prepare`), or zeroed here
    first (``H_LAZY`` 0)."""
    S = slots(h)
    if h[H_LAZY] == 0:
        zero_arena(h)
    S[S_FLAGS, root] |= SLOT_GRAD_SET
    nbytes = S[S_SIZE, root] * ITEMSIZE[S[S_DTYPE, root]]
    if seed >= 0:
        groot = carray(as_pointer(h[H_GRAD] + S[S_GRAD, root], np.uint8), nbytes)
        src = carray(as_pointer(S[S_ADDR, seed], np.uint8), nbytes)
        # a loop, not groot[:] = src: numba's slice assignment checks for overlap and
        # copies through a temporary (512 KB: 170 us instead of 20)
        for i in range(nbytes):
            groot[i] = src[i]
    elif S[S_DTYPE, root] == 0:
        slot_grad(h, root, np.float64)[:] = 1.0
    else:
        slot_grad(h, root, np.float32)[:] = 1.0


@jit
def _seed_and_run(h, root, seed, start, retain):
    """Seed the gradients, then run the live nodes from ``start`` down."""
    seed_gradients(h, root, seed)
    return resume(h, start, retain, False)


@jit
def _hooked_outputs(h, k, gen):
    N = nodes(h)
    S = slots(h)
    L = links(h)
    base = N[N_LINK, k] + N[N_NIN, k]
    for j in range(N[N_NOUT, k]):
        s = L[0, base + j]
        if S[S_FLAGS, s] & SLOT_HOOK and S[S_GEN, s] == gen:
            return True
    return False


@jit
def _all_finite(g):
    for v in g:
        if not np.isfinite(v):
            return False
    return True


@jit
def _finite(h, k):
    """Anomaly mode: index of the first input whose gradient has NaN/Inf, or -1."""
    N = nodes(h)
    S = slots(h)
    L = links(h)
    base = N[N_LINK, k]
    for i in range(N[N_NIN, k]):
        if (N[N_MASK, k] >> i) & 1:
            s = L[0, base + i]
            if S[S_DTYPE, s] == 0:
                ok = _all_finite(slot_grad(h, s, np.float64))
            else:
                ok = _all_finite(slot_grad(h, s, np.float32))
            if not ok:
                return i
    return -1


@jit
def resume(h, k0, retain, hooks_done):
    """Run the live nodes from ``k0`` down, newest first. With ``hooks_done`` the hooks
    of node ``k0``'s outputs have just run (in Python)."""
    N = nodes(h)
    K = ktable(h)
    me = h[H_SELF]
    gen = h[H_GEN]
    for k in range(k0, h[H_LO] - 1, -1):
        if not N[N_FLAGS, k] & NODE_LIVE:
            continue
        if h[H_LAZY] != 0 and not (hooks_done and k == k0):  # else done before its hooks
            _prepare(h, k, gen)
        if h[H_HOOKS] != 0 and not (hooks_done and k == k0) and _hooked_outputs(h, k, gen):
            h[H_ERR_A] = k
            return E_CALLBACK_HOOK
        addr = K[N[N_OP, k], N[N_SIG, k], BWD]
        if addr == PY_CALLBACK:  # a custom function with a Python backward
            h[H_ERR_A] = k
            h[H_STAT_CALLBACKS] += 1
            return E_CALLBACK_PY
        st = _validate(h, k)
        if st != OK:
            return st
        st = call_kernel(addr, k, me)
        if st != OK:
            h[H_ERR_A] = k
            return st
        if h[H_ANOMALY] != 0:
            bad = _finite(h, k)
            if bad >= 0:
                h[H_ERR_A] = k
                h[H_ERR_B] = bad
                return E_NONFINITE
        h[H_STAT_NODES] += 1
        if not retain:
            N[N_FLAGS, k] |= NODE_FREED
    return OK
