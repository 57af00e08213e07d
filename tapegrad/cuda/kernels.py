"""CUDA kernels of the op table's GPU target (``numba.cuda.jit``), built on first use.

Imported only by :mod:`tapegrad.cuda` when a CUDA tensor is first made: importing this
module imports numba's CUDA target (~1.5 s). The kernels are module-level closures over
``cuda`` so that numba's simulator (``NUMBA_ENABLE_CUDASIM=1``) can swap in its fake
module. One thread per output element everywhere; backward kernels only accumulate
(``gx[i] += ...``), with atomics where several threads add into one element (broadcast
operands, repeated indices, batch-broadcast matmul operands).
"""

from __future__ import annotations

import math
import types
from typing import Any

import numba
from numba import cuda

from .._jit import jitable
from ..ops.linalg.kernels import batch_offsets

# --- the row formulas, recompiled for the device ------------------------------------------
#
# The op table's scalar formulas call ``np.<ufunc>`` on scalars, which the CPU target
# compiles but numba's CUDA target only partly supports. They are recompiled as device
# functions with ``np`` bound to the namespace ``NP`` instead: the same names, spelled
# with ``math`` (libdevice) and small generic functions (``jitable``: usable from any
# target). Nothing else about a formula changes, so the GPU computes the CPU's maths,
# tie rules and special cases included.


@jitable
def _sign(x):  # NaN stays NaN
    if x > 0:
        return 1.0
    return -1.0 if x < 0 else 0.0 * x


@jitable
def _cbrt(x):  # real cube root, negative x included
    r = abs(x) ** (1.0 / 3.0)
    return -r if x < 0 else r


@jitable
def _exp2(x):
    return 2.0**x


# Rounding: numba lowers math.floor/ceil/trunc to integer results (as Python does), which
# would overflow for large values and lose NaN and inf. These stay in floating point:
# |x| >= 2**52 (and inf, NaN) are already integral, below that fmod is exact.
_INTEGRAL = 4503599627370496.0  # 2**52


@jitable
def _trunc(x):
    if not abs(x) < _INTEGRAL:
        return x + 0.0
    return x - math.fmod(x, 1.0)


@jitable
def _floor(x):
    t = _trunc(x)
    return t - 1.0 if t > x else t


@jitable
def _ceil(x):
    t = _trunc(x)
    return t + 1.0 if t < x else t


@jitable
def _rint(x):  # round half to even, as np.rint
    r = _floor(x + 0.5)
    if r - x == 0.5 and math.fmod(r, 2.0) != 0.0:
        r -= 1.0
    return r


@jitable
def _logaddexp(x, y):
    m = max(x, y)
    return m + math.log1p(math.exp(-abs(x - y))) if m > -math.inf else m


@jitable
def _logaddexp2(x, y):
    m = max(x, y)
    return m + math.log2(1.0 + 2.0 ** (-abs(x - y))) if m > -math.inf else m


@jitable
def _remainder(x, y):  # the sign of the divisor, as np.remainder
    return x - _floor(x / y) * y


NP = types.ModuleType("tapegrad_cuda_np", "np.<ufunc> names for device formulas")
for _name, _fn in {
    "abs": abs,
    "absolute": abs,
    "sqrt": math.sqrt,
    "cbrt": _cbrt,
    "exp": math.exp,
    "expm1": math.expm1,
    "exp2": _exp2,
    "log": math.log,
    "log1p": math.log1p,
    "log2": math.log2,
    "log10": math.log10,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "arcsin": math.asin,
    "arccos": math.acos,
    "arctan": math.atan,
    "sinh": math.sinh,
    "cosh": math.cosh,
    "tanh": math.tanh,
    "arcsinh": math.asinh,
    "arccosh": math.acosh,
    "arctanh": math.atanh,
    "arctan2": math.atan2,
    "hypot": math.hypot,
    "sign": _sign,
    "floor": _floor,
    "ceil": _ceil,
    "trunc": _trunc,
    "rint": _rint,
    "logaddexp": _logaddexp,
    "logaddexp2": _logaddexp2,
    "remainder": _remainder,
    "nan": math.nan,
    "pi": math.pi,
    "inf": math.inf,
}.items():
    setattr(NP, _name, _fn)


def device_formula(fn: Any) -> Any:
    """A row formula (an njit function) as a CUDA device function, ``np`` -> ``NP``."""
    py = getattr(fn, "py_func", fn)
    g = dict(py.__globals__)
    g["np"] = NP
    clone = types.FunctionType(py.__code__, g, py.__name__, py.__defaults__, py.__closure__)
    return cuda.jit(device=True)(clone)


# --- kernels ---------------------------------------------------------------------------------


def elementwise_kernels(op: Any) -> tuple[Any, Any]:
    """(forward, backward) kernels of an elementwise row from its scalar formulas.

    Unary: ``fwd(x, out)``, ``bwd(g, x, out, gx)``. Binary, with broadcasting:
    ``fwd(x, y, out, meta)``, ``bwd(g, x, y, out, gx, gy, mask, meta)`` where ``meta`` is
    ``[nd, 0, 0, 0, dims (nd), x strides (nd), y strides (nd)]`` (element strides of each
    operand in a loop over the output, 0 on broadcast axes; the layout of matmul's) and
    ``mask`` bits 0/1 say whether x/y need a gradient, bits 2/3 whether x/y are broadcast.
    As on the CPU, the backward reads the saved values (x, y, out) and only accumulates
    into the gradient buffers.
    """
    f = device_formula(op.fwd)
    b = [device_formula(fn) for fn in op.backward_formulas]

    if op.is_unary:
        b0 = b[0] if b else None

        @cuda.jit
        def fwd(x, out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = f(x[i])

        @cuda.jit
        def bwd(g, x, out, gx):
            i = cuda.grid(1)
            if i < gx.size:
                gx[i] += b0(g[i], x[i], out[i])

        return fwd, bwd

    bx, by = (b[0], b[1]) if b else (None, None)

    @cuda.jit
    def fwd2(x, y, out, meta):
        i = cuda.grid(1)
        if i < out.size:
            ox, oy = offsets(i, meta[0], meta)
            out[i] = f(x[ox], y[oy])

    @cuda.jit
    def bwd2(g, x, y, out, gx, gy, mask, meta):
        i = cuda.grid(1)
        if i < out.size:
            ox, oy = offsets(i, meta[0], meta)
            # a broadcast operand gets contributions from several threads: atomics
            if mask & 1:
                v = bx(g[i], x[ox], y[oy], out[i])
                if mask & 4:
                    cuda.atomic.add(gx, ox, v)
                else:
                    gx[ox] += v
            if mask & 2:
                v = by(g[i], x[ox], y[oy], out[i])
                if mask & 8:
                    cuda.atomic.add(gy, oy, v)
                else:
                    gy[oy] += v

    return fwd2, bwd2


# Offsets into two broadcast operands of flat output index ``i``: the CPU matmul's own
# batch-offset function, compiled for the device. Its parameter layout, ``[nd, -, -, -,
# dims (nd), x strides (nd), y strides (nd)]``, is also the elementwise kernels' ``meta``.
offsets = cuda.jit(device=True)(getattr(batch_offsets, "py_func", batch_offsets))


@cuda.jit(device=True)
def reduced_offset(i, meta):
    """Offset in the reduced output of input element ``i``: ``meta = [nd, dims (nd),
    output strides (nd)]``, the strides 0 on reduced axes."""
    nd = meta[0]
    o = 0
    for d in range(nd - 1, -1, -1):
        n = meta[1 + d]
        o += (i % n) * meta[1 + nd + d]
        i //= n
    return o


def reduce_kernels() -> tuple[Any, Any]:
    """Sum over some axes, one thread per input element: ``fwd(x, out, scale, meta)``
    adds into the output atomically; ``bwd(g, gx, scale, meta)`` gathers g."""

    @cuda.jit
    def fwd(x, out, scale, meta):
        i = cuda.grid(1)
        if i < x.size:
            cuda.atomic.add(out, reduced_offset(i, meta), x[i] * scale)

    @cuda.jit
    def bwd(g, gx, scale, meta):
        i = cuda.grid(1)
        if i < gx.size:
            gx[i] += g[reduced_offset(i, meta)] * scale

    return fwd, bwd


def sum_all_kernel(dtype: Any, threads: int) -> Any:
    """Sum of all elements, ``fwd(x, out, scale)``: grid-stride partial sums, a tree
    in shared memory per block, one atomic add per block (not one per element, which
    serializes on a single address)."""
    nb_dtype = numba.from_dtype(dtype)

    @cuda.jit
    def fwd(x, out, scale):
        part = cuda.shared.array(threads, nb_dtype)
        t = cuda.threadIdx.x
        acc = 0.0  # float64 partial sums, also for float32 data
        for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
            acc += x[i]
        part[t] = acc
        cuda.syncthreads()
        step = threads // 2
        while step > 0:
            if t < step:
                part[t] += part[t + step]
            cuda.syncthreads()
            step //= 2
        if t == 0:
            cuda.atomic.add(out, 0, part[0] * scale)

    return fwd


TILE = 16  # matmul tiles: TILE x TILE threads per block, tiles staged in shared memory


@cuda.jit(device=True)
def _matrix(sel, size, t, ox, oy):
    """Offset of an operand's matrix in batch element ``t``: the batch index itself
    (``sel`` 0: the output and its gradient) or x's or y's broadcast batch index (1, 2)."""
    return size * (t if sel == 0 else (ox if sel == 1 else oy))


def matmul_kernel(dtype: Any) -> Any:
    """One strided, batched, tiled product for the forward and both backwards:

    ``c[C(t)][i, j] (=|+=) sum_r a[A(t)][i, r] * b[B(t)][r, j]``

    where ``p`` holds the batch broadcast (``[nb, m, k, n, dims, x strides, y strides]``,
    the CPU's layout) and ``q = [rows, cols, inner, a_sel, a_size, a_si, a_sr, b_sel,
    b_size, b_sr, b_sj, c_sel, c_size, add]``: which batch index and matrix size each
    operand uses and its element strides (``c`` is row-major). Forward: ``a = x``,
    ``b = y``, ``c = out`` stored. Backward: ``gx += g y^T`` and ``gy += x^T g`` -- the
    transposes are just strides -- added with atomics, since batch broadcasting makes
    several blocks add into one gradient matrix. Grid: (column tiles, row tiles, batches
    ``t0 ..``).
    """
    nb_dtype = numba.from_dtype(dtype)

    @cuda.jit
    def gemm(a, b, c, p, q, t0):
        ta = cuda.shared.array((TILE, TILE), nb_dtype)
        tb = cuda.shared.array((TILE, TILE), nb_dtype)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        j = cuda.blockIdx.x * TILE + tx
        i = cuda.blockIdx.y * TILE + ty
        t = t0 + cuda.blockIdx.z  # batches beyond the grid's z limit come in chunks
        rows, cols, inner = q[0], q[1], q[2]
        ox, oy = offsets(t, p[0], p)
        abase = _matrix(q[3], q[4], t, ox, oy)
        bbase = _matrix(q[7], q[8], t, ox, oy)
        acc = 0.0
        for r0 in range(0, inner, TILE):
            r = r0 + tx
            ta[ty, tx] = a[abase + i * q[5] + r * q[6]] if i < rows and r < inner else 0.0
            r = r0 + ty
            tb[ty, tx] = b[bbase + r * q[9] + j * q[10]] if r < inner and j < cols else 0.0
            cuda.syncthreads()
            for s in range(TILE):
                acc += ta[ty, s] * tb[s, tx]
            cuda.syncthreads()
        if i < rows and j < cols:
            o = _matrix(q[11], q[12], t, ox, oy) + i * cols + j
            if q[13]:
                cuda.atomic.add(c, o, acc)
            else:
                c[o] = acc

    return gemm


def move_kernels() -> dict[str, Any]:
    """Gather / scatter-add (indexing, transpose), cast, and gradient accumulation."""

    @cuda.jit
    def gather(x, idx, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[idx[i]]

    @cuda.jit
    def scatter_add(g, idx, gx):
        i = cuda.grid(1)
        if i < g.size:
            cuda.atomic.add(gx, idx[i], g[i])

    @cuda.jit
    def copy_cast(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i]

    @cuda.jit
    def add_cast(g, gx):
        i = cuda.grid(1)
        if i < gx.size:
            gx[i] += g[i]

    @cuda.jit
    def fill(out, value):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = value

    return {
        "gather": gather,
        "scatter_add": scatter_add,
        "copy_cast": copy_cast,
        "add": add_cast,
        "fill": fill,
    }
