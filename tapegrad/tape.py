"""The tape, Python side: typed arrays, growth, binding tensors, rewinding, and the
per-thread stack of tapes.

Each thread records into the tape on top of its stack (:func:`current_tape`). The
bottom one is the thread's eager tape. A transform (``tg.grad``...), a capture
(``tg.compile``) or a Python callback of a running backward (a hook, a custom
function's ``backward``) pushes a fresh tape (:func:`enter`) and pops it when done
(:func:`leave`), so whatever it records and differentiates never touches the tape
below: a backward may start inside a backward, a transform inside a transform. Tables grow by
doubling; the value arena grows by adding a chunk (existing values never move, so
addresses stay valid) and is merged back into one chunk when the tape is rewound.

**Kinds.** ``EAGER`` tapes (the thread's own, and callbacks') bind a user's tensor that
requires grad as a leaf whose ``.grad`` a backward fills. ``TRANSFORM`` and ``CAPTURE``
tapes differentiate with respect to their own arguments only: a tensor that requires
grad and was made before the tape was entered (``born0``) is *foreign* there (a closure
over an outer variable). A transform gives it a slot whose gradient, if a backward
reaches it, is an error (its dependence cannot be carried, see ``tapegrad.transforms``);
a capture turns it into an input of the program (``tapegrad.compile``).

**Rewinding.** At the first op after a backward without ``retain_graph`` (and whenever
a table is full), the tape tries to start over from empty so that a training loop reuses the same
memory every step. Tensor handles created since the last rewind are kept in
``handles``; those still referenced from user code are *copied out* first (they get a
private NumPy array), so nothing a user can still see is ever overwritten. If one of
them still requires grad and its graph has not been run backward yet, the graph is
still wanted and the tape does not rewind (as PyTorch keeps such a graph alive).
"""

from __future__ import annotations

import ctypes
import itertools
import math
import os
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from . import dispatch
from ._jit import blas_addresses, serial_loops
from .host_arrays import aligned_buffer, data_address

# re-exported: tensors.py, function.py and cuda import normalize_array from here
from .host_arrays import normalize_array as normalize_array
from .layout import (
    ALIGN,
    DTYPE_CODE,
    E_GRAD_SPACE,
    E_NO_KERNEL,
    E_PYTHON,
    E_SPACE,
    F32,
    F64,
    FLOAT_CODES,
    H_ARENA,
    H_ARENA_CAP,
    H_ARENA_TOP,
    H_CAST_OP,
    H_DGEMM,
    H_ERR_A,
    H_ERR_B,
    H_ERR_C,
    H_FP,
    H_FP_CAP,
    H_GEN,
    H_GRAD,
    H_GRAD_CAP,
    H_GRAD_ENABLED,
    H_HOOKS,
    H_INPLACE,
    H_IP,
    H_IP_CAP,
    H_KTAB,
    H_KTAB_OPS,
    H_LAZY_BYTES,
    H_LEN,
    H_LINK,
    H_LINK_CAP,
    H_NEED,
    H_NFP,
    H_NIP,
    H_NLINK,
    H_NNODES,
    H_NODE,
    H_NODE_CAP,
    H_NSHAPE,
    H_NSLOTS,
    H_NUMPY_MIN,
    H_OPFLAGS,
    H_POISON,
    H_REQ,
    H_REQ_CAP,
    H_SAVED,
    H_SCRATCH,
    H_SCRATCH_CAP,
    H_SELF,
    H_SGEMM,
    H_SHAPE,
    H_SHAPE_CAP,
    H_SLOT,
    H_SLOT_CAP,
    H_THREAD_MIN,
    H_USER_OP0,
    HEADROOM,
    ITEMSIZE,
    N_FIELDS,
    N_FLAGS,
    N_FP,
    N_IP,
    N_LINK,
    N_NFP,
    N_NIN,
    N_NIP,
    N_NOUT,
    NODE_FREED,
    NP_DTYPES,
    OUTPUT_BIT0,
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
    S_XGRAD,
    SCRATCH_LEN,
    SLOT_RG,
)
from .record import import_slot, reachable
from .references import referenced_elsewhere
from .tiers import Unbound, call, current, entry_point, missing_kernel, on_switch, raise_pending
from .tuning import (
    LAZY_BYTES,
    NUMPY_MIN,
    OWN_GRAD_MIN,
    POISON_GRADIENTS,
    SOFT_ARENA,
    THREAD_MIN,
    UNHELD_MIN,
)

if TYPE_CHECKING:
    from .tensors import Tensor

# name: (address field, capacity field, count field, rows, dtype, initial capacity)
_TABLES = {
    "node": (H_NODE, H_NODE_CAP, H_NNODES, N_FIELDS, np.int64, 1024),
    "slot": (H_SLOT, H_SLOT_CAP, H_NSLOTS, S_FIELDS, np.int64, 2048),
    "link": (H_LINK, H_LINK_CAP, H_NLINK, 2, np.int64, 4096),
    "ip": (H_IP, H_IP_CAP, H_NIP, 1, np.int64, 1024),
    "fp": (H_FP, H_FP_CAP, H_NFP, 1, np.float64, 256),
    "shape": (H_SHAPE, H_SHAPE_CAP, H_NSHAPE, 1, np.int64, 4096),
}
_COUNT_FIELDS = [spec[2] for spec in _TABLES.values()]


# Tape kinds (see the module docstring).
EAGER, TRANSFORM, CAPTURE = 0, 1, 2


_CPUS = os.cpu_count() or 1  # (os.cpu_count() reads /sys: ~2 us, on every large forward)


# True in a forked child. numba's thread count is per thread, and the fork hook of
# ``_jit`` (``serial_loops``) set it to one only in the thread that forked: a thread
# the child starts gets one numba thread too when it makes its first tape (a parallel
# loop there would have numba terminate the child).
_FORKED = False


def _note_fork() -> None:
    global _FORKED
    _FORKED = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_note_fork)


def worker_count() -> int:
    """Threads for large NumPy forwards: ``$TAPEGRAD_THREADS``, else the CPU count."""
    env = os.environ.get("TAPEGRAD_THREADS")
    return max(1, int(env)) if env else _CPUS


# import_slot's compiled entry point (skipping numba's dispatcher, ~200 ns a call; see
# ``_jit.entry_point``) once the first import has compiled or loaded it; its
# interpreted twin while the kernel cache lacks it (``tapegrad.tiers``).
_import_slot: Any = Unbound(import_slot, lambda: _bind_import())


def _bind_import() -> None:
    global _import_slot
    _import_slot = current(import_slot)


def _use_import_entry_point(h: np.ndarray) -> None:
    global _import_slot
    _import_slot = entry_point(import_slot, h, 0, 0, 0, 0, 0)


on_switch(_bind_import)


class Tape:
    """Typed struct-of-arrays record of the ops run since the last rewind."""

    def __init__(self, like: Tape | None = None) -> None:
        """An empty tape; with ``like``, with that tape's capacities (the tape a thread
        records into next after handing ``like`` over, see :meth:`hand_over`)."""
        if _FORKED:
            serial_loops()
        self.header = np.zeros(H_LEN, np.int64)
        self.h = memoryview(self.header)
        self.h[H_SELF] = self.header.ctypes.data
        self.arrays: dict[str, np.ndarray] = {}
        self.views: dict[str, memoryview] = {}
        for name, (_, cap_f, _, _, _, cap) in _TABLES.items():
            self._set_table(name, like.h[cap_f] if like is not None else cap, None)
        self.scratch = np.zeros(SCRATCH_LEN, np.int64)  # kernels' loop plans
        self.h[H_SCRATCH] = self.scratch.ctypes.data
        self.h[H_SCRATCH_CAP] = self.scratch.size
        self.grow_request(256)
        ktab = dispatch.ktable()
        self.h[H_KTAB] = ktab.ctypes.data
        self.h[H_KTAB_OPS] = ktab.shape[0]
        self.h[H_CAST_OP] = dispatch.op_code("astype")
        self.h[H_USER_OP0] = dispatch.first_user_code()
        self.h[H_SAVED] = dispatch.saved_masks().ctypes.data
        self.h[H_OPFLAGS] = dispatch.op_flags().ctypes.data
        self.h[H_NUMPY_MIN] = NUMPY_MIN
        self.h[H_POISON] = int(POISON_GRADIENTS)
        self.h[H_LAZY_BYTES] = LAZY_BYTES
        self.h[H_THREAD_MIN] = THREAD_MIN if worker_count() > 1 else 0
        self.chunks: list[np.ndarray] = []
        self.top: tuple[np.ndarray, int] | None = None  # the last chunk and its address
        # the arena's usable bytes (each chunk has ALIGN bytes of padding); after a
        # handover for want of room, the size before the op that found it full
        if like is None:
            self._new_chunk(1 << 20)
        else:
            self._new_chunk(like.crowded or sum(c.size - ALIGN for c in like.chunks))
        grad_cap = like.h[H_GRAD_CAP] if like is not None else 1 << 16
        self.grad_buf, self.h[H_GRAD] = aligned_buffer(grad_cap)
        self.grad_skip = self.h[H_GRAD] - self.grad_buf.ctypes.data  # bytes before ALIGN
        self.h[H_GRAD_CAP] = grad_cap
        self.h[H_GRAD_ENABLED] = like.h[H_GRAD_ENABLED] if like is not None else 1
        self.epoch = 0
        self.handles: list[Tensor] = []  # in-tape tensors created this epoch
        self.leaves: list[tuple[int, Tensor]] = []  # bound leaves that require grad
        self.keep: list[Any] = []  # arrays whose memory slots point into
        self.custom: list[Any] = []  # custom functions' Python state, by node iparam
        self.hooks: dict[int, list] = {}  # gradient hooks of tensors in this tape, by slot
        self.sources: dict[int, str] = {}  # anomaly mode: where each node was recorded
        # positions gathered by basic keys (ops.shape.getitem), per (shape, key)
        self.gathers: dict[tuple, Tensor] = {}
        self.blas = False
        self.pinned = False  # a captured program's tape: never rewound
        self.retaking = False  # views being taken again after a rewind (see fix)
        self.soft = 0  # 4x the largest op that lifted the soft cap (see fix, rewind)
        # Set by a backward that freed its graph: the next op first tries to rewind, so
        # the sweep over handles is paid once per step, not inside backward().
        self.stale = False
        self.kind = EAGER
        self.born0 = 0  # tensors made before this serial are foreign (not EAGER kinds)
        # a transform entered with grad mode on: foreign tensors that require grad keep
        # requiring it here (reaching one is an error); entered under no_grad, the caller
        # wants no gradient through them, so they are constants
        self.foreign_rg = True
        # id -> (slot, tensor) this epoch; an eager tape's chained slots add the result's
        # tape and slot: (slot, tensor, tape, slot there) (tensors._bind_chained)
        self.foreign: dict[int, tuple] = {}
        self.capture: Any = None  # the capture state while tg.compile records here
        # left to the graphs held in it (hand_over): never rewound; then the handover's
        # serial (later handovers, higher serials: a chained slot names an earlier one)
        self.handed_over = 0
        # (H_GEN of the backward, {slot: [array, handed out]}) of use_own_grads; -1
        # while that backward runs
        self.own_grads: tuple[int, dict] = (0, {})
        # the arena's size when it was found full of results of graphs nobody holds
        # (``fix``): the thread hands this tape over at its next op, and the next tape
        # gets this size, not the extra chunk added for the one op
        self.crowded = 0
        self.running = False  # a backward is running here (engine._drive)
        self.leaf_versions: list[tuple] = []  # (slot, leaf, version) at the handover
        # merged roots of chained backwards, by seeded slots (engine._merged_root)
        self.merged: dict[tuple, tuple] = {}
        self.thread = threading.get_ident()
        # Held by this thread while it copies handles out and rewinds, and by any thread
        # reading a handle's values from the tape (Tensor._value): a reader in another
        # thread never sees memory the next step has reused. Reentrant: the view hooks
        # of a rewind read values too.
        self.lock = threading.RLock()

    # --- tables -----------------------------------------------------------------
    def _set_table(self, name: str, cap: int, old: np.ndarray | None) -> None:
        addr_f, cap_f, count_f, rows, dtype, _ = _TABLES[name]
        arr = np.zeros((rows, cap), dtype)
        if old is not None:
            n = self.h[count_f]
            arr[:, :n] = old[:, :n]
        self.arrays[name] = arr
        self.views[name] = memoryview(arr.reshape(-1))
        self.h[addr_f] = arr.ctypes.data
        self.h[cap_f] = cap

    def grow(self, name: str, extra: int = 1) -> None:
        """Double a table (at least ``extra`` more free entries)."""
        _, cap_f, count_f, *_ = _TABLES[name]
        cap = self.h[cap_f]
        self._set_table(name, max(2 * cap, self.h[count_f] + extra), self.arrays[name])

    def reserve(self, name: str, n: int) -> int:
        """Make room for ``n`` more entries; returns the current count (write position)."""
        _, cap_f, count_f, *_ = _TABLES[name]
        count = self.h[count_f]
        if count + n > self.h[cap_f]:
            self.grow(name, n)
        return count

    def grow_request(self, n: int) -> None:
        """A request buffer (see ``layout.R_BODY``) of at least ``n`` cells; ``rq`` and
        ``rqf`` are its int and float views, whose bounds raise IndexError so that
        :func:`~tapegrad.recording.general` notices a request too large for it."""
        self.request = np.zeros(n, np.int64)
        self.rq = memoryview(self.request)
        self.rqf = self.rq.cast("B").cast("d")
        self.h[H_REQ] = self.request.ctypes.data
        self.h[H_REQ_CAP] = n

    def reserve_request(self, nlink: int, nip: int, nfp: int, nshape: int) -> tuple:
        """:meth:`reserve` for the four tables an array op's request fills, in one call
        (one op records these per call: the common case is one comparison each)."""
        h = self.h
        if (
            h[H_NLINK] + nlink > h[H_LINK_CAP]
            or h[H_NIP] + nip > h[H_IP_CAP]
            or h[H_NFP] + nfp > h[H_FP_CAP]
            or h[H_NSHAPE] + nshape > h[H_SHAPE_CAP]
        ):
            for name, n in (("link", nlink), ("ip", nip), ("fp", nfp), ("shape", nshape)):
                self.reserve(name, n)
        return h[H_NLINK], h[H_NIP], h[H_NFP], h[H_NSHAPE]

    def _new_chunk(self, nbytes: int) -> None:
        buf, addr = aligned_buffer(nbytes)
        self.chunks.append(buf)
        self.top = (buf, buf.ctypes.data)
        self.h[H_ARENA] = addr
        self.h[H_ARENA_CAP] = nbytes
        self.h[H_ARENA_TOP] = 0

    def fix(self, status: int) -> None:
        """Make a failed record/backward call possible to retry, or raise."""
        h = self.h
        if status == E_SPACE:
            # the failed op's need, read first: a rewind takes held views again from
            # their roots, which records ops (and writes H_NEED)
            need = h[H_NEED]
            if not self.retaking:  # (a view taken again after a rewind: no new rewind)
                self.try_rewind()  # then grow whatever is still too small
            for name, (_, cap_f, count_f, *_rest) in _TABLES.items():
                if h[cap_f] - h[count_f] < HEADROOM[name]:
                    self.grow(name, HEADROOM[name])
            room = self.chunks[-1].size - ALIGN  # the chunk's own capacity
            if h[H_ARENA_CAP] < h[H_ARENA_TOP] + need <= room:  # the soft cap: lift it
                h[H_ARENA_CAP] = min(room, max(2 * h[H_ARENA_CAP], h[H_ARENA_TOP] + need))
                # and keep room for a few such ops after later rewinds: each rewind
                # copies out what user code holds, so ops as large as the cap would
                # rewind (and copy) at every op (a stencil on 136 MB arrays: +20%)
                self.soft = max(self.soft, 4 * need)
            elif h[H_ARENA_TOP] + need > h[H_ARENA_CAP]:
                if self._mostly_unheld():
                    # room for this op only; the next op records into a new tape
                    # (current_tape: stale, no rewind possible, so _hand_over)
                    self.crowded = sum(c.size - ALIGN for c in self.chunks)
                    self._new_chunk(need + ALIGN)
                    self.stale = True
                else:
                    self._new_chunk(max(2 * h[H_ARENA_CAP], need + ALIGN))
        elif status == E_NO_KERNEL:
            missing_kernel(h[H_ERR_A], h[H_ERR_B], h[H_ERR_C])
        elif status == E_PYTHON:
            raise_pending()
        elif status == E_GRAD_SPACE:
            need = h[H_NEED]
            self.grad_buf, h[H_GRAD] = aligned_buffer(max(2 * h[H_GRAD_CAP], need))
            self.grad_skip = h[H_GRAD] - self.grad_buf.ctypes.data
            h[H_GRAD_CAP] = max(2 * h[H_GRAD_CAP], need)
        else:
            raise RuntimeError(f"tapegrad: internal status {status} not handled")

    def init_blas(self) -> None:
        self.h[H_DGEMM], self.h[H_SGEMM] = blas_addresses()
        self.blas = True

    # --- fields (the tables are field-major: field f of entry k is f * cap + k) ------
    def slot_field(self, field: int, s: int) -> int:
        return self.views["slot"][field * self.h[H_SLOT_CAP] + s]

    def set_slot_bits(self, s: int, bits: int) -> None:
        self.views["slot"][S_FLAGS * self.h[H_SLOT_CAP] + s] |= bits

    def node_field(self, field: int, k: int) -> int:
        return self.views["node"][field * self.h[H_NODE_CAP] + k]

    def set_node_bits(self, k: int, bits: int) -> None:
        self.views["node"][N_FLAGS * self.h[H_NODE_CAP] + k] |= bits

    def node_links(self, k: int) -> tuple[list[int], list[int]]:
        """Node ``k``'s input slots and output slots."""
        base, nin = self.node_field(N_LINK, k), self.node_field(N_NIN, k)
        nout = self.node_field(N_NOUT, k)
        lv = self.views["link"]
        return list(lv[base : base + nin]), list(lv[base + nin : base + nin + nout])

    def node_params(self, k: int) -> tuple[tuple[int, ...], tuple[float, ...]]:
        """Node ``k``'s int and float parameters (axes, permutations, scales...)."""
        ip, nip = self.node_field(N_IP, k), self.node_field(N_NIP, k)
        fp, nfp = self.node_field(N_FP, k), self.node_field(N_NFP, k)
        return tuple(self.views["ip"][ip : ip + nip]), tuple(self.views["fp"][fp : fp + nfp])

    def changed_operand(self, k: int, bits: int) -> tuple[int, int, int] | None:
        """``(slot, version recorded, version now)`` of the first operand of node ``k``
        among the link entries ``bits`` selects (inputs first, then outputs from
        ``layout.OUTPUT_BIT0``) changed in place since the node was recorded; None if
        none was (the scheduler's in-place check, for Python walks of the graph)."""
        if not self.h[H_INPLACE]:
            return None
        base, nin = self.node_field(N_LINK, k), self.node_field(N_NIN, k)
        cap = self.h[H_LINK_CAP]
        lv = self.views["link"]
        for i in range(nin + self.node_field(N_NOUT, k)):
            if (bits >> (i if i < nin else OUTPUT_BIT0 + i - nin)) & 1:
                s = lv[base + i]
                now = self.slot_field(S_VERSION, s)
                if lv[cap + base + i] != now:
                    return s, lv[cap + base + i], now
        return None

    def links(self, start: int, n: int) -> list[int]:
        """The slots of link entries ``start .. start + n``."""
        return list(self.views["link"][start : start + n])

    def set_links(self, start: int, slots: list[int]) -> None:
        lv = self.views["link"]
        for i, s in enumerate(slots):
            lv[start + i] = s

    def custom_entry(self, k: int) -> Any:
        """The Python state of node ``k`` (a custom function: its first int parameter
        indexes ``custom``)."""
        return self.custom[self.views["ip"][self.node_field(N_IP, k)]]

    def set_custom_entry(self, k: int, entry: Any) -> None:
        self.custom[self.views["ip"][self.node_field(N_IP, k)]] = entry

    def add_custom(self, pi: int, entry: Any) -> None:
        """Keep ``entry`` as the Python state of the node whose int parameter is ``pi``."""
        self.views["ip"][pi] = len(self.custom)
        self.custom.append(entry)

    def slot_shape(self, s: int) -> tuple[int, ...]:
        off = self.slot_field(S_SHAPE, s)
        return tuple(self.views["shape"][off : off + self.slot_field(S_NDIM, s)])

    def slot_dtype(self, s: int) -> np.dtype:
        return NP_DTYPES[self.slot_field(S_DTYPE, s)]

    def slot_rg(self, s: int) -> bool:
        return bool(self.slot_field(S_FLAGS, s) & SLOT_RG)

    def view(self, s: int) -> np.ndarray:
        """A writable NumPy view of slot ``s``'s memory (for large values: building it
        costs a microsecond or two)."""
        dt = NP_DTYPES[self.slot_field(S_DTYPE, s)]
        shape = self.slot_shape(s)
        nbytes = math.prod(shape) * dt.itemsize
        addr = self.slot_field(S_ADDR, s)
        # most values are in the arena's last chunk: a view of its array (one call; the
        # ctypes route below builds two objects, ~1.5 us, and runs cold in a step whose
        # large arrays have evicted the interpreter's data from the caches)
        if self.top is not None:
            buf, lo = self.top
            if lo <= addr and addr + nbytes <= lo + buf.size:
                return np.ndarray(shape, dt, buf, addr - lo)
        cbuf = (ctypes.c_char * nbytes).from_address(addr)
        return np.frombuffer(cbuf, dt).reshape(shape)

    # --- gradient buffers outside the arena ------------------------------------------
    def use_own_grads(self, slots: list[int]) -> None:
        """For the next backward, the gradients of ``slots`` (leaves) of at least
        ``OWN_GRAD_MIN`` elements are computed in arrays of their own rather than in the
        arena (``S_XGRAD``): the array that becomes ``.grad`` is the one the kernels
        wrote, not a copy of the arena (a 16 MB copy and its page faults per leaf of a
        2e6 chain; a small one is cheaper to copy than to set up). Cleared by
        :meth:`own_grads_done` when the backward ends, however it ends."""
        own: dict[int, list] = {}
        sv = self.views["slot"]
        cap = self.h[H_SLOT_CAP]
        for s in slots:
            if sv[S_SIZE * cap + s] < OWN_GRAD_MIN or s in own:
                continue
            buf = np.empty(self.slot_shape(s), NP_DTYPES[sv[S_DTYPE * cap + s]])
            own[s] = [buf, False]  # (array, handed out by read_grad)
            sv[S_XGRAD * cap + s] = data_address(buf)
        self.own_grads = (-1, own)

    def own_grads_done(self) -> None:
        """The backward that :meth:`use_own_grads` prepared has ended: no slot names its
        arrays any more (the next backward writes the arena); they stay readable, once
        each, through :meth:`read_grad` while ``H_GEN`` is this backward's."""
        gen, own = self.own_grads
        if gen != -1:
            return
        if not own:
            self.own_grads = (0, own)
            return
        sv = self.views["slot"]
        base = S_XGRAD * self.h[H_SLOT_CAP]
        for s in own:
            sv[base + s] = 0
        self.own_grads = (self.h[H_GEN], own)

    def _own_grad(self, s: int) -> list | None:
        """``[array, handed out]`` of slot ``s``'s own gradient array in the running
        backward, or in the last one while no other has run, or None."""
        gen, own = self.own_grads
        if not own:
            return None
        if gen == -1:  # running: the slot field names the array
            return own.get(s) if self.slot_field(S_XGRAD, s) != 0 else None
        return own.get(s) if gen == self.h[H_GEN] else None

    def grad_view(self, s: int) -> np.ndarray | None:
        """A view of slot ``s``'s gradient buffer from the last backward (valid until the
        next one lays the arena out again), or None if it got no gradient."""
        if self.slot_field(S_GEN, s) != self.h[H_GEN]:
            return None
        own = self._own_grad(s)
        if own is not None:
            return own[0]
        dt = NP_DTYPES[self.slot_field(S_DTYPE, s)]
        shape = self.slot_shape(s)
        n = math.prod(shape)
        addr = self.h[H_GRAD] + self.slot_field(S_GRAD, s)
        buf = (ctypes.c_char * (n * dt.itemsize)).from_address(addr)
        return np.frombuffer(buf, dt, n).reshape(shape)

    def read(self, s: int) -> np.ndarray:
        """A fresh array with slot ``s``'s values."""

        dt = self.slot_field(S_DTYPE, s)
        out = np.empty(self.slot_shape(s), NP_DTYPES[dt])
        if out.size:
            ctypes.memmove(data_address(out), self.slot_field(S_ADDR, s), out.size * ITEMSIZE[dt])
        return out

    def read_scalar(self, s: int) -> float | None:
        """The value of one-element float slot ``s`` as a Python float (None for another
        dtype): read in place, no array made. The owning thread's call only."""
        dt = self.slot_field(S_DTYPE, s)
        if dt == F64:
            return ctypes.c_double.from_address(self.slot_field(S_ADDR, s)).value
        if dt == F32:
            return ctypes.c_float.from_address(self.slot_field(S_ADDR, s)).value
        return None

    def read_grad(self, s: int) -> np.ndarray | None:
        """A fresh array with slot ``s``'s gradient from the last backward, or None."""
        h, sv = self.h, self.views["slot"]
        cap = h[H_SLOT_CAP]
        if sv[S_GEN * cap + s] != h[H_GEN]:
            return None
        own = self._own_grad(s) if self.own_grads[1] else None
        if own is not None:  # the array itself the first time (nothing else holds it)
            if own[1]:
                return own[0].copy()
            own[1] = True
            return own[0]
        off = sv[S_SHAPE * cap + s]
        shape = tuple(self.views["shape"][off : off + sv[S_NDIM * cap + s]])
        # a view of the gradient arena, copied (one call: an empty array filled by
        # ctypes.memmove took 2.5 us, this 0.9)
        at = self.grad_skip + sv[S_GRAD * cap + s]
        return np.ndarray(shape, NP_DTYPES[sv[S_DTYPE * cap + s]], self.grad_buf, at).copy()

    def import_array(self, arr: np.ndarray, flags: int) -> int:
        """Slot for an array the caller owns and will not modify (kept alive here)."""
        addr = data_address(arr)
        shape = arr.shape
        ndim = len(shape)
        while True:
            pos = self.reserve("shape", ndim)
            sv = self.views["shape"]
            for d in shape:
                sv[pos] = d
                pos += 1
            s = _import_slot(self.header, addr, DTYPE_CODE[arr.dtype], ndim, arr.size, flags)
            if s >= 0:
                if _import_slot is import_slot:
                    _use_import_entry_point(self.header)
                self.keep.append(arr)
                return s
            self.fix(s)

    def bump_version(self, s: int, by: int = 1) -> None:
        """Slot ``s``'s value was replaced in place (``+=``, ``x[key] = v``, or a leaf
        updated under no_grad): nodes that saved it will refuse to run backward
        (``by=-1``: a refused in-place op takes its bump back)."""
        self.views["slot"][S_VERSION * self.h[H_SLOT_CAP] + s] += by
        self.h[H_INPLACE] = 1

    def mark(self) -> tuple[int, int, int, int, int]:
        """The tape's fill level, to :meth:`restore` if an op fails after binding."""
        return (self.epoch, self.h[H_NSLOTS], self.h[H_NSHAPE], len(self.keep), len(self.leaves))

    def restore(self, mark: tuple[int, int, int, int, int], operands: tuple = ()) -> None:
        """Forget slots bound since ``mark`` (only bindings: no node was recorded)."""
        epoch, nslots, nshape, nkeep, nleaves = mark
        if epoch != self.epoch:
            return
        self.h[H_NSLOTS] = nslots
        self.h[H_NSHAPE] = nshape
        del self.keep[nkeep:]
        unbind = [t for _, t in self.leaves[nleaves:]]
        del self.leaves[nleaves:]
        unbind += [t for t in operands if getattr(t, "_data", None) is not None]
        for t in unbind:
            if t._tape is self and t._slot >= nslots:
                t._tape, t._slot, t._epoch = None, -1, -1

    # --- rewinding ------------------------------------------------------------------
    def try_rewind(self) -> bool:
        """Start over from an empty tape if no graph that may still run backward is
        held; copy out the values of tensors user code still references."""
        self.stale = False
        if self.pinned:
            return False
        live = self._live()
        if self.holds_graph(live):
            return False  # a graph still waiting for its backward
        self._copy_out_and_rewind(live)
        return True

    def _live(self) -> list:
        """Handles user code still references that are still in this tape
        (``requires_grad_()`` or a rewind can take a handle out of it)."""
        return [
            t for t in referenced_elsewhere(self.handles) if t._data is None and t._tape is self
        ]

    def _copy_out_and_rewind(self, live: list, rewind: bool = True) -> None:
        """Copy the handles in ``live`` out of the tape, rewind (unless not ``rewind``),
        and let the views among them (``tapegrad.views``) be taken again from their
        roots."""
        views = _VIEW_HOOKS[0](live) if _VIEW_HOOKS is not None else []
        if views:
            live = live + _VIEW_HOOKS[1](views, self)
        with self.lock:
            for t in live:
                if t._data is None and t._tape is self:  # a handle can be listed twice
                    t._detach_from_tape(self.read(t._slot), self.slot_rg(t._slot))
            if rewind:
                self.rewind()
        if views:
            # taking them again records into the rewound tape, whose soft cap they may
            # exceed: the E_SPACE then lifts the cap (Tape.fix) instead of rewinding
            # again, which would take them again, and so on for ever
            self.retaking = True
            try:
                _VIEW_HOOKS[2](views)
            finally:
                self.retaking = False

    def hand_over(self, serial: int) -> None:
        """Leave this tape to the graphs held in it (the thread records into another
        already, see :func:`_hand_over`).

        Called when a rewind is due but a handle user code holds still has a graph that
        may run backward (a metric kept without ``.detach()``, a loss after
        ``backward(retain_graph=True)``). Held handles without such a graph are copied
        out; leaves bound here are unbound (a stale binding would keep the tape alive).
        The tape is never rewound or reused: it lives as long as a handle of it does,
        and its held graphs stay usable: ``backward()`` runs here, and an op of a later
        step that uses one binds it as a chained slot (``tensors._bind_chained``)
        through which that step's backward continues into this tape.
        """
        live = self._live()
        graphs = [t for t in live if self.holds_graph([t])]
        kept = {id(t) for t in graphs}
        self._copy_out_and_rewind([t for t in live if id(t) not in kept], rewind=False)
        # chained slots (results of earlier handed-over tapes used here) that the held
        # graphs do not reach can never receive a gradient: dropping their entries lets
        # those tapes go once their own handles are dropped (else every handed-over
        # tape of a loop of forward passes would keep the one before it alive)
        if any(len(entry) == 4 for entry in self.foreign.values()):
            _, mark = self._reach(graphs)
            self.foreign = {
                key: entry
                for key, entry in self.foreign.items()
                if len(entry) != 4 or mark[entry[0]]
            }
        # leaves bound here are unbound; their in-place updates (a parameter step under
        # no_grad) then no longer bump this tape's slot, so note their versions now
        # (refresh_leaf_versions compares before a backward here)
        self.leaf_versions = []
        for s, t in self.leaves:
            if t._data is not None and t._tape is self:
                t._tape, t._slot, t._epoch = None, -1, -1
                self.leaf_versions.append((s, t, t._version))
        # the held handles stay listed (tapegrad.views counts on that reference), and so
        # do any made here later (copies, a chained backward's merged root)
        self.handles = graphs
        self.handed_over = serial
        self.stale = False

    def refresh_leaf_versions(self) -> None:
        """A handed-over tape, before a backward: a leaf changed in place since the
        handover gets its slot's version bumped, so nodes that saved it refuse to run,
        as they would had the tape not been handed over."""
        for i, (s, t, version) in enumerate(self.leaf_versions):
            if t._version != version:
                self.bump_version(s)
                self.leaf_versions[i] = (s, t, t._version)

    def graphs_dropped(self) -> bool:
        """A handed-over tape none of whose handles user code still references: its
        handle list is dropped, which frees it (a handle names its tape)."""
        if referenced_elsewhere(self.handles):
            return False
        # drop what it references too: the handles of earlier tapes its chained slots
        # bound, so a dropped chain of tapes is let go in one pass (newest first)
        self.handles, self.foreign, self.leaves, self.merged = [], {}, [], {}
        self.leaf_versions = []
        self.epoch += 1  # views of its nodes (grad_fn) now see a graph that is gone
        return True

    def holds_graph(self, live: list) -> bool:
        """True when a handle in ``live`` (or the root of a view among them) requires
        grad through a graph of this tape that has not run backward yet."""
        return next(self._graph_slots(live), None) is not None

    def _mostly_unheld(self) -> bool:
        """The arena is full (and the tape could not rewind): is it mostly results of
        graphs that no handle holds, so that handing the tape over to the held ones
        frees more than growing it? Only a thread's own eager tape is handed over."""
        if self.kind != EAGER or self.pinned or self.handed_over or self.capture is not None:
            return False
        stack = _stack()
        if len(stack) != 1 or stack[0] is not self:
            return False
        used = sum(c.size - ALIGN for c in self.chunks[:-1]) + self.h[H_ARENA_TOP]
        if used < UNHELD_MIN:
            return False
        live = self._live()
        if _VIEW_HOOKS is not None and _VIEW_HOOKS[0](live):
            # views are taken again from their roots at a handover; with in-place
            # writes through them (z = y[1:]; z += 1 in the loop) the handed-over tapes
            # would hold each other for good: so the tape grows, and the next backward
            # rewinds it
            return False
        held, _ = self._reach(live)
        return 2 * held < used

    def _reach(self, live: list) -> tuple[int, np.ndarray]:
        """(bytes of results, mark per slot) of what the graphs held by handles in
        ``live`` reach (``record.reachable``)."""
        mark = np.zeros(self.h[H_NSLOTS], np.uint8)
        roots = np.array(list(self._graph_slots(live)), np.int64)
        return call(reachable, self.header, roots, mark), mark

    def _graph_slots(self, live: list):
        """The slots of handles in ``live`` whose graph (in this tape) may still run
        backward (for a view, its root's)."""
        nodes = self.views["node"]
        ncap = self.h[H_NODE_CAP]
        root_of = _VIEW_HOOKS[3] if _VIEW_HOOKS is not None else None
        for t in live:
            if root_of is not None:
                # a view is gathered again from its root after the rewind: the root's
                # graph is what must not be lost
                t = root_of(t)
                if not (t._data is None and t._tape is self):
                    continue
            s = t._slot
            node = self.slot_field(S_NODE, s)
            if (
                self.slot_field(S_FLAGS, s) & SLOT_RG
                and node >= 0
                and not nodes[N_FLAGS * ncap + node] & NODE_FREED
            ):
                yield s

    def retire(self) -> None:
        """The owning thread has ended: copy out what user code still holds and give
        back the tables and arenas, so a result kept from a short-lived thread costs its
        own values, not the thread's tape. A tape holding a graph that may still run
        backward is kept whole."""
        live = self._live()
        if self.pinned or self.holds_graph(live):
            return
        self._copy_out_and_rewind(live)
        # leaves bound in earlier epochs may still name this tape (a stale binding that
        # is never used again): keep the object, drop its memory
        with self.lock:
            self.arrays, self.views, self.chunks = {}, {}, []
            self.top = None
            self.grad_buf = self.scratch = self.request = None
            self.gathers = {}

    def release(self) -> None:
        """Rewind unconditionally (a transform or callback is done with this tape): held
        handles are copied out; those that required grad become non-leaves whose graph
        is gone, so a later backward through them raises instead of reading reused memory."""
        self.stale = False
        live = referenced_elsewhere(self.handles)
        if not live:  # nothing holds a handle (the common case): no reader to lock out
            self.rewind()
            return
        self._copy_out_and_rewind(live)

    def rewind(self) -> None:
        """Reset to empty (callers have copied out what must survive)."""
        h = self.h
        for count_f in _COUNT_FIELDS:
            h[count_f] = 0
        if len(self.chunks) > 1:  # merge: the steady state is one chunk, no growth
            total = sum(c.size for c in self.chunks)
            self.chunks = []
            self._new_chunk(total)
        h[H_ARENA_TOP] = 0
        if self.chunks:  # record into the arena's start again (SOFT_ARENA)
            h[H_ARENA_CAP] = min(self.chunks[-1].size - ALIGN, max(SOFT_ARENA, self.soft, 1))
        self.crowded = 0
        self.own_grads = (0, {})
        self.epoch += 1
        self.handles = []
        self.leaves = []
        self.keep = []
        self.custom = []
        self.hooks = {}
        self.sources = {}
        self.foreign = {}
        self.merged = {}
        h[H_HOOKS] = 0
        h[H_INPLACE] = 0

    def capacity(self) -> dict[str, int]:
        """Current capacities (entries, or bytes for the arenas)."""
        caps = {name: self.h[spec[1]] for name, spec in _TABLES.items()}
        caps["arena"] = sum(c.size for c in self.chunks)
        caps["grad"] = self.h[H_GRAD_CAP]
        return caps

    @property
    def grad_enabled(self) -> bool:
        return bool(self.h[H_GRAD_ENABLED])

    @grad_enabled.setter
    def grad_enabled(self, value: bool) -> None:
        self.h[H_GRAD_ENABLED] = int(bool(value))


# tapegrad.views' hooks: (select the views among held handles, the roots to copy out
# with them, take them again from their roots after the rewind, a tensor's root), or None
_VIEW_HOOKS: tuple | None = None


def set_rewind_hooks(select: Any, before: Any, after: Any, root_of: Any) -> None:
    global _VIEW_HOOKS
    _VIEW_HOOKS = (select, before, after, root_of)


def is_float_code(dt: int) -> bool:
    return dt in FLOAT_CODES


_tls = threading.local()


class _ThreadTapes:
    """A thread's stack and pool of tapes. It lives in the thread's local storage, which
    Python clears when the thread ends: then every tape is retired (:meth:`Tape.retire`)."""

    __slots__ = ("pool", "stack")

    def __init__(self, stack: list[Tape], pool: list[Tape]) -> None:
        self.stack, self.pool = stack, pool

    def __del__(self) -> None:
        try:
            for tape in {id(t): t for t in self.stack + self.pool}.values():
                tape.retire()
        except Exception:  # at interpreter shutdown there is nothing to give back
            pass


def _stack() -> list[Tape]:
    """This thread's tapes, its eager tape first (both created on first use)."""
    try:
        return _tls.stack
    except AttributeError:
        _tls.tape = Tape()
        _tls.stack = [_tls.tape]
        _tls.pool = []
        _tls.handed = []  # tapes this thread handed over to held graphs (see _hand_over)
        _tls.owner = _ThreadTapes(_tls.stack, _tls.pool)
        return _tls.stack


def current_tape() -> Tape:
    """The tape this thread records into (the top of its stack), rewound first if a
    backward has finished with it."""
    try:
        tape = _tls.tape
    except AttributeError:
        tape = _stack()[0]
    if tape.stale:
        if not tape.try_rewind():
            stack = _stack()
            if len(stack) == 1 and tape.kind == EAGER and not tape.pinned:
                tape = _hand_over(tape)
        elif _tls.handed:
            _let_go()
    return tape


def _let_go() -> None:
    """Drop this thread's handed-over tapes whose handles were all dropped."""
    kept = [t for t in reversed(_tls.handed) if not t.graphs_dropped()]  # newest first
    _tls.handed[:] = kept[::-1]


_HANDOVERS = itertools.count(1)


def _hand_over(tape: Tape) -> Tape:
    """Leave this thread's eager tape to the graphs held in it (:meth:`Tape.hand_over`)
    and record into a new one of the same capacities. The new one is current first, so
    that what the handover records (views taken again from copied-out roots) goes
    there. Handed-over tapes whose handles were all dropped are let go."""
    new = Tape(like=tape)
    _tls.stack[0] = new
    _tls.tape = new
    tape.hand_over(next(_HANDOVERS))
    _let_go()
    _tls.handed.append(tape)
    return new


def tape_stack() -> list[Tape]:
    """This thread's stack of tapes (bottom first); do not modify."""
    return _stack()


def enter(kind: int, grad_enabled: bool, born0: int = 0, tape: Tape | None = None) -> Tape:
    """Push a tape for a transform, a capture or a callback: ``tape``, or an empty one
    from this thread's pool. Ops record into it until :func:`leave`."""
    stack = _stack()
    if tape is None:
        tape = _tls.pool.pop() if _tls.pool else Tape()
    tape.kind = kind
    tape.born0 = born0
    tape.foreign_rg = True
    tape.grad_enabled = grad_enabled
    stack.append(tape)
    _tls.tape = tape
    return tape


def leave(tape: Tape, keep: bool = False) -> None:
    """Pop ``tape`` (entered by :func:`enter`). Unless ``keep`` (its owner holds on to
    it: ``vjp``, a captured program), it is released and goes back to the pool."""
    stack = _stack()
    if stack[-1] is not tape:
        raise RuntimeError("tapegrad: tapes left out of order")
    stack.pop()
    _tls.tape = stack[-1]
    if not keep:
        tape.release()
        tape.kind = EAGER
        tape.capture = None
        if len(_tls.pool) < 8:
            _tls.pool.append(tape)
