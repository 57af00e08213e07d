"""Memory layout of a tape, and the compiled accessors every kernel reads it with.

A tape is a handful of typed arrays; its *header* is one int64 array holding their
addresses, capacities and the counters. Compiled code receives only the header
(as an array when called from Python, as an address inside C-callable kernels), so a
call from Python costs one argument however many arrays the tape has.

Tables (all int64, ``[fields, capacity]`` so each field is one contiguous array):

* node table ``N_*``: one column per recorded op. ``N_LINK`` points into the link
  table where the node's inputs then outputs are listed (``N_NIN`` + ``N_NOUT``
  entries); ``N_IP``/``N_FP`` point into the int and float parameter pools.
* slot table ``S_*``: one column per value (tensor). ``S_ADDR`` is the address of its
  data (inside an arena chunk, or an array the tape keeps alive), ``S_SHAPE`` an
  offset into the shape pool, ``S_GRAD`` the byte offset of its gradient in the
  gradient arena, valid while ``S_GEN`` equals the header's backward counter ``H_GEN``
  (so nothing has to be reset between backward passes).
* link table ``[2, capacity]``: row 0 slot ids, row 1 the slot's version when the
  node was recorded (the in-place safety check compares it at backward time).

All values are stored C-contiguous; kernels see flat 1-D buffers plus shapes.
"""

from __future__ import annotations

import numpy as np
from numba import carray

from ._jit import as_pointer, jit, jitable

# --- dtypes ------------------------------------------------------------------------
F64, F32, I64, BOOL = 0, 1, 2, 3
N_DTYPES = 4
ITEMSIZE = (8, 4, 8, 1)
NP_DTYPES = (np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.int64), np.dtype(np.bool_))
DTYPE_CODE = {dt: i for i, dt in enumerate(NP_DTYPES)}
DTYPE_NAMES = ("float64", "float32", "int64", "bool")
FLOAT_CODES = (F64, F32)
MAXDIM = 64
ALIGN = 64  # bytes; every value starts on a cache line

# Kernel signatures: most ops are keyed by their computation dtype (0..3); a cast is
# keyed by the (from, to) pair.
N_SIGS = N_DTYPES + N_DTYPES * N_DTYPES


@jitable
def cast_sig(src: int, dst: int) -> int:
    return N_DTYPES + src * N_DTYPES + dst


# --- header fields -----------------------------------------------------------------
(
    H_SELF,
    H_NODE,
    H_NODE_CAP,
    H_SLOT,
    H_SLOT_CAP,
    H_LINK,
    H_LINK_CAP,
    H_IP,
    H_IP_CAP,
    H_FP,
    H_FP_CAP,
    H_SHAPE,
    H_SHAPE_CAP,
    H_SCRATCH,
    H_SCRATCH_CAP,
    H_KTAB,
    H_KTAB_OPS,
    H_ARENA,
    H_ARENA_CAP,
    H_ARENA_TOP,
    H_GRAD,
    H_GRAD_CAP,
    H_DGEMM,
    H_SGEMM,
    H_NNODES,
    H_NSLOTS,
    H_NLINK,
    H_NIP,
    H_NFP,
    H_NSHAPE,
    H_GRAD_ENABLED,
    H_ERR_A,
    H_ERR_B,
    H_ERR_C,
    H_ERR_D,
    H_NEED,
    H_STAT_NODES,
    H_STAT_CALLBACKS,
    H_GEN,
    H_CAST_OP,
    H_LO,  # lowest node the running backward can reach (set by run_backward)
    H_HOOKS,  # 1 when some slot has gradient hooks: the scheduler then checks per node
    H_ANOMALY,  # 1 in detect_anomaly(): every produced gradient is checked for NaN/Inf
    H_USER_OP0,  # first op code outside the table: custom functions (see dispatch.py)
    H_SAVED,  # address of the int64 [op code, 3] table of the links a backward reads
    H_INPLACE,  # 1 once a value of this tape epoch was replaced in place: check versions
    H_OPFLAGS,  # address of the int64 table of per-op flags (OPF_*)
    H_NUMPY_MIN,  # elementwise results this large are computed by NumPy's ufunc (0: never)
    H_GRAD_USED,  # bytes of gradient arena the last backward laid out (run_backward)
    H_THREAD_MIN,  # same-shape results this large may be split across threads (0: never)
    H_REQ,  # address of the request buffer (int64; floats stored as float64 bits)
    H_REQ_CAP,
    H_POISON,  # 1: a gradient buffer a kernel will overwrite is first filled with NaN (tests)
    H_LAZY,  # 1: this backward makes buffers ready node by node (scheduler._prepare)
    H_NXGRAD,  # buffers outside the arena (S_XGRAD) this backward uses
    H_LAZY_BYTES,  # below this many gradient bytes per live node, zero the arena at once
    H_NUMPY_POOL,  # 1: the last large forward ran on NumPy's threads, 0: on numba's
    H_LEN,
) = range(58)
# The op's forward is exactly a NumPy ufunc of the same name, which computes large
# results faster than the kernel (SIMD exp, tanh; libm calls elsewhere)
OPF_UFUNC = 1
# The op has vector formulas: with several threads, its kernel may run a large result
# on all cores instead of NumPy's ufunc (record._numpy_runs)
OPF_VECTOR = 2
# The op's backward kernel honours the node's *fresh* bits (FRESH_SHIFT):
# it stores into a fresh gradient buffer instead of adding to it, so the scheduler
# need not zero that buffer first
OPF_ASSIGNS = 4
# ... and when one slot is two of its inputs (``x * x``), the kernel writes that buffer
# once with both contributions summed (binary rows), so it may be fresh there too
OPF_SHARED = 8
# Bits OPF_PASS << i: input i's gradient is the output's, element for element, when
# their dtypes and sizes match (add: both inputs; subtract: x). The scheduler then lets
# that input's buffer *be* the output's (the output's gradient is complete and nobody
# reads it after this node) and clears the input's mask bit: no copy. Binary rows
# only: their kernels leave an input alone whose mask bit is clear.
OPF_PASS = 16
# Plain arithmetic (add, subtract, multiply, true_divide): as fast in the kernel as in
# NumPy's ufunc, so a large result runs on whichever threads ran the last one
OPF_ARITH = 64
# A cheap ufunc row (sqrt, floor, maximum, comparisons) whose kernel, streaming a result
# of STREAM_MIN bytes or more on one core, beats NumPy's loop: with one worker, such a
# result runs in the kernel (record._numpy_runs)
OPF_STREAMS = 128

# Results of this many bytes and more, written on one core, are computed in small blocks
# into a buffer that stays in L1 and streamed out with non-temporal stores
# (_jit.stream_lines, ops.elementwise.kernels.streams): the result
# does not stay in cache for the next op anyway, and a store that skips reading the
# line first moves a third less memory. Measured on an AMD EPYC (Zen 4), one thread,
# chains of 8 multiplies writing fresh buffers: at 1 MiB plain stores win (0.036 ms an
# op against 0.059: the next op reads the result from cache), at 4 MiB streaming does
# (0.26 against 0.32; NumPy's ufunc 0.30), at 16 MiB 0.95-1.04 against 1.39-1.47
# (NumPy 1.24-1.32).
STREAM_MIN = 1 << 22
# On one core (or below a split result), rows with a vector formula whose NumPy loop is
# SIMD too (exp, tanh: dispatch.NUMPY_FASTER) run in the kernel below this many
# elements, NumPy's ufunc from it. Measured on the Zen 4 machine, one thread, us per
# forward in tapegrad, kernel against NumPy's ufunc (NumPy's loop alone in brackets):
# 65,536 float64, exp 60 / 71 (57), tanh 105 / 121 (112); 262,144, exp 239 / 255,
# tanh 418 / 503; 2e6, exp 1706 / 1694, tanh 3400 / 3268. Below ~1e6 the ufunc's views
# and errstate (~8 us) and its output written to arena memory cost more than it saves.
VECTOR_UFUNC_MIN = 1 << 20
DEFERRED = 1 << 40  # added to a slot id: "recorded, forward left to NumPy's ufunc"

# --- node table fields ---------------------------------------------------------------
(
    N_OP,
    N_SIG,
    N_LINK,
    N_NIN,
    N_NOUT,
    N_IP,
    N_NIP,
    N_FP,
    N_NFP,
    N_FLAGS,
    N_MASK,
    N_FIELDS,
) = range(12)
# N_MASK holds the needs-input-grad bits (bit i: input i) and, from FRESH_SHIFT up, the
# *fresh* bits the scheduler sets just before the node's backward runs: bit
# FRESH_SHIFT + i says input i's gradient buffer holds nothing yet (not even zeros), and
# the kernel (of an OPF_ASSIGNS op) must store every element of it, not add. Nodes with
# more inputs than FRESH_SHIFT get no fresh bits (their mask bits go up there). One word:
# the kernels that read the mask get the fresh bits with it (a load less per node).
FRESH_SHIFT = 32
NODE_FREED = 1  # saved values released by a backward without retain_graph
NODE_LIVE = 2  # scheduler scratch: on a path from a requires-grad leaf to the root

# --- slot table fields ---------------------------------------------------------------
(
    S_DTYPE,
    S_NDIM,
    S_SIZE,
    S_ADDR,
    S_SHAPE,
    S_FLAGS,
    S_NODE,
    S_VERSION,
    S_GRAD,
    S_GEN,
    # the address of a gradient buffer outside the arena (0: none): a leaf's, set by
    # the engine for one backward so that kernels write the array that becomes .grad
    S_XGRAD,
    S_FIELDS,
) = range(12)
SLOT_RG = 1  # requires grad
SLOT_LEAF = 2  # a user tensor imported into the tape (its gradient lands in .grad)
SLOT_FREED = 4  # a non-leaf whose graph was freed (copied out of an earlier tape epoch)
SLOT_CONST = 8  # a constant: Python scalar, NumPy array, index array
SLOT_HOOK = 16  # has gradient hooks: the scheduler yields to Python before its producer
# scheduler scratch: the slot's gradient buffer holds a value in this backward (zeros or
# a kernel's first store); cleared when the buffer is laid out
SLOT_GRAD_SET = 32

# --- kernel table ------------------------------------------------------------------
FWD, BWD = 0, 1
NO_RULE = -1  # kernel table entry of an op without that kernel (e.g. no backward)
PY_CALLBACK = -2  # kernel table entry of a custom function whose backward is Python

# --- status codes (returned by compiled code, turned into exceptions by Python) ------
OK = 0
E_SPACE = -1  # a table or the arena is full: grow and retry (H_NEED = arena bytes)
E_NO_KERNEL = -2  # kernel not compiled yet: H_ERR_A op, H_ERR_B sig, H_ERR_C direction
E_BROADCAST = -3  # shapes do not broadcast: H_ERR_A, H_ERR_B slots
E_FREED = -4  # backward through a freed graph: H_ERR_A node
E_NO_BWD = -5  # non-differentiable op on the gradient path: H_ERR_A node
E_NOFLOAT = -6  # no floating operand: Python computes it with NumPy
E_GRAD_META = -7  # produced gradient does not match its input: A node, B slot, C/D sizes
E_VERSION = -8  # saved value modified in place: A node, B slot, C saved, D current
E_GRAD_SPACE = -9  # gradient arena too small: H_NEED bytes
E_LINALG = -10  # LAPACK failed (singular / not positive definite): H_ERR_A node
E_CALLBACK_PY = -11  # node H_ERR_A has a Python backward: run it, resume below it
E_CALLBACK_HOOK = -12  # outputs of node H_ERR_A have hooks: run them, resume at it
E_NONFINITE = -13  # anomaly mode: node H_ERR_A produced NaN/Inf for its input H_ERR_B
E_GUARD = -14  # replay: guard H_ERR_A of a captured program does not hold (tapegrad.replay)
E_FRONT_END = -15  # a compiled front end (record.record_reduce...) declines: Python's records
E_PYTHON = -16  # a kernel running as Python (tapegrad.tiers) raised: Python raises it again
E_CALLBACK_FWD = -17  # replay: node H_ERR_A's forward is Python: run it, resume after it

# record_reduce's axis for a reduction over all axes (axis=None)
ALL_AXES = -(1 << 62)

# --- request buffer: one array op as Python describes it to record_general ---------
# Counts, then from R_BODY on: the input slots, the int params, per output its dtype,
# ndim and dims, and last the float params (float64 bits in the same 8-byte cells).
# Python writes it with plain stores into a memoryview; the compiled recorder checks
# table capacity and copies it into the tables (so Python never reserves).
R_NIN, R_NOUT, R_NIP, R_NFP, R_ALIAS, R_BODY = range(6)
# the kernels' scratch: a loop plan (dims and three stride arrays), then an odometer
# over the plan's axes, MAXDIM cells each (named views: plan_arrays, odometer)
SCRATCH_DIMS, SCRATCH_SA, SCRATCH_SB, SCRATCH_SC, SCRATCH_CTR = (i * MAXDIM for i in range(5))
SCRATCH_LEN = 5 * MAXDIM

# Saved-value masks (``Op.saved_mask``, the scheduler's in-place check): bit i is the
# node's input i, bit OUTPUT_BIT0 + j its output j (see :func:`saved_bit`).
OUTPUT_BIT0 = 32

# Table entries one binary elementwise record may add (record.record_elementwise): the
# result and up to two cast results (slots), their nodes, and the links (two per cast,
# three for the op). Tables are grown with HEADROOM free entries kept (tape.fix), at
# least that much, so the eager fast path never finds a freshly grown table full.
EW_SLOTS, EW_NODES, EW_LINKS = 3, 3, 7
HEADROOM = {"node": 8, "slot": 8, "link": 16, "ip": 0, "fp": 0, "shape": 4 * MAXDIM}
if HEADROOM["slot"] < EW_SLOTS or HEADROOM["node"] < EW_NODES or HEADROOM["link"] < EW_LINKS:
    raise AssertionError("layout: HEADROOM must cover one elementwise record")


# ====================================================================================
# compiled accessors


@jit
def is_float(dt):
    """Whether dtype code ``dt`` is a floating point one (differentiable)."""
    return dt == F64 or dt == F32


@jit
def promote(da, db):
    """NumPy's result dtype for two array dtypes, or -1 when neither is floating."""
    if da == db:
        return da if is_float(da) else -1
    if da == F64 or db == F64:
        return F64
    if da == F32 or db == F32:
        other = db if da == F32 else da
        return F32 if other == BOOL else F64  # float32 with int64 is float64 in NumPy
    return -1


def result_dtype(a: np.dtype, b: np.dtype | None = None) -> np.dtype | None:
    """The dtype an op on arrays of dtype ``a`` (and ``b``) computes in, by the
    recorder's rule (:func:`promote`), for host code such as the CUDA target; None when
    no operand is floating."""
    ca = DTYPE_CODE[np.dtype(a)]
    code = (ca if is_float(ca) else -1) if b is None else promote(ca, DTYPE_CODE[np.dtype(b)])
    return None if code < 0 else NP_DTYPES[code]


@jit
def saved_bit(i, nin):
    """The saved-mask bit of entry ``i`` of a node's link list (``nin`` inputs first,
    then the outputs)."""
    return i if i < nin else OUTPUT_BIT0 + i - nin


@jit
def header(tp):
    """The header as an int64 array, from its address."""
    return carray(as_pointer(tp, np.int64), H_LEN)


@jit
def nodes(h):
    return carray(as_pointer(h[H_NODE], np.int64), (N_FIELDS, h[H_NODE_CAP]))


@jit
def slots(h):
    return carray(as_pointer(h[H_SLOT], np.int64), (S_FIELDS, h[H_SLOT_CAP]))


@jit
def links(h):
    return carray(as_pointer(h[H_LINK], np.int64), (2, h[H_LINK_CAP]))


@jit
def iparams(h):
    return carray(as_pointer(h[H_IP], np.int64), h[H_IP_CAP])


@jit
def fparams(h):
    return carray(as_pointer(h[H_FP], np.float64), h[H_FP_CAP])


@jit
def shapes(h):
    return carray(as_pointer(h[H_SHAPE], np.int64), h[H_SHAPE_CAP])


@jit
def scratch(h):
    return carray(as_pointer(h[H_SCRATCH], np.int64), h[H_SCRATCH_CAP])


@jit
def plan_arrays(sc):
    """Views of the kernel scratch ``sc``: ``dims, sa, sb, sc`` of a loop plan."""
    return (
        sc[SCRATCH_DIMS : SCRATCH_DIMS + MAXDIM],
        sc[SCRATCH_SA : SCRATCH_SA + MAXDIM],
        sc[SCRATCH_SB : SCRATCH_SB + MAXDIM],
        sc[SCRATCH_SC : SCRATCH_SC + MAXDIM],
    )


@jit
def odometer(sc):
    """The view of the kernel scratch ``sc`` that counts a walk's position per axis."""
    return sc[SCRATCH_CTR : SCRATCH_CTR + MAXDIM]


@jit
def request(h):
    return carray(as_pointer(h[H_REQ], np.int64), h[H_REQ_CAP])


@jit
def request_f(h):
    return carray(as_pointer(h[H_REQ], np.float64), h[H_REQ_CAP])


@jit
def ktable(h):
    return carray(as_pointer(h[H_KTAB], np.int64), (h[H_KTAB_OPS], N_SIGS, 2))


@jit
def slot_data(h, s, dt):
    """Flat view of slot ``s``'s values as dtype ``dt``."""
    S = slots(h)
    return carray(as_pointer(S[S_ADDR, s], dt), S[S_SIZE, s])


@jit
def slot_grad(h, s, dt):
    """Flat view of slot ``s``'s gradient buffer as dtype ``dt`` (a buffer outside the
    arena, ``S_XGRAD``, has its offset from the arena in ``S_GRAD`` for the backward)."""
    S = slots(h)
    return carray(as_pointer(h[H_GRAD] + S[S_GRAD, s], dt), S[S_SIZE, s])


@jit
def slot_shape(h, s):
    S = slots(h)
    off = S[S_SHAPE, s]
    return shapes(h)[off : off + S[S_NDIM, s]]


@jit
def node_slot(h, node, i):
    """Slot id of entry ``i`` of the node's link list (inputs first, then outputs)."""
    return links(h)[0, nodes(h)[N_LINK, node] + i]


@jit
def node_in(h, node, i):
    return node_slot(h, node, i)


@jit
def node_out(h, node, i):
    return node_slot(h, node, nodes(h)[N_NIN, node] + i)


@jit
def node_ip(h, node):
    N = nodes(h)
    off = N[N_IP, node]
    return iparams(h)[off : off + N[N_NIP, node]]


@jit
def node_fp(h, node):
    N = nodes(h)
    off = N[N_FP, node]
    return fparams(h)[off : off + N[N_NFP, node]]


@jit
def needs_grad(h, node, i):
    """The needs-input-grad mask: bit ``i`` set when input ``i`` wants a gradient."""
    return (nodes(h)[N_MASK, node] >> i) & 1


@jit(inline="always")
def fresh_bits(h, node):
    """The node's fresh bits for the backward about to run it (see ``FRESH_SHIFT``)."""
    return nodes(h)[N_MASK, node] >> FRESH_SHIFT


@jit(inline="always")
def is_fresh(bits, i):
    """Whether fresh bits ``bits`` mark input ``i``'s gradient buffer fresh (see
    ``FRESH_SHIFT``): the kernel must store into it rather than add."""
    return ((bits >> i) & 1) != 0


@jit
def in_data(h, node, i, dt):
    return slot_data(h, node_in(h, node, i), dt)


@jit
def out_data(h, node, i, dt):
    return slot_data(h, node_out(h, node, i), dt)


@jit
def in_grad(h, node, i, dt):
    return slot_grad(h, node_in(h, node, i), dt)


@jit
def out_grad(h, node, i, dt):
    return slot_grad(h, node_out(h, node, i), dt)


@jit
def in_shape(h, node, i):
    return slot_shape(h, node_in(h, node, i))


@jit
def out_shape(h, node, i):
    return slot_shape(h, node_out(h, node, i))
