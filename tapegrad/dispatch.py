"""The kernel table: ``KTAB[op, sig, direction]`` holds C addresses of compiled kernels.

The recorder and the scheduler call kernels through it (an indirect call costs a few
nanoseconds), so they stay small, compile once, and never recompile when ops or user
kernels are added. Entries start at 0 ("not compiled"): compiled code reports
``E_NO_KERNEL`` and Python compiles the wrapper (``numba.cfunc``, cached on disk) and
retries, so only the kernels a program uses are ever compiled. An op without a
backward rule has ``NO_RULE`` in its backward entries.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from numba import carray

from . import _generated
from ._generated import scalar_bwd, scalar_fwd
from ._jit import DISABLE_JIT, as_pointer, jit, kernel_cfunc, run_cfunc
from .layout import (
    BWD,
    FWD,
    H_GRAD,
    N_SIGS,
    NO_RULE,
    OK,
    OPF_ARITH,
    OPF_ASSIGNS,
    OPF_PASS,
    OPF_SHARED,
    OPF_STREAMS,
    OPF_UFUNC,
    OPF_VECTOR,
    PY_CALLBACK,
    header,
)
from .ops import BY_NAME, ELEMENTWISE, ROWS, Kind
from .ops.codegen import sig_name, wrapper_name

# Rows with vector formulas whose forwards NumPy's own loops do as fast or faster on
# CPUs with the named feature (NumPy's AVX-512 exp and tanh): large ones only
# (layout.VECTOR_UFUNC_MIN elements on one core; split across cores, any size that is
# split). sin, cos and expit stay ours at every size: NumPy's are scalar, 5-8x slower.
# The backward is always ours.
NUMPY_FASTER = {"exp": "AVX512_SKX", "tanh": "AVX512_SKX"}

# Cheap ufunc rows whose kernel, streaming a result of STREAM_MIN bytes or more past the
# caches, beats NumPy's loop (OPF_STREAMS). Measured on 2e6 float64 (4.2e6 for binary
# rows), AMD EPYC (Zen 4), one thread, ms: sqrt 1.15 against 2.35, reciprocal 0.69 /
# 1.35, sign 0.77 / 1.24, floor 0.45 / 0.78, absolute, square, ceil, rint 0.60 / 0.80,
# maximum 2.25 / 2.79, less 1.69 / 1.82. Rows that call libm (cbrt 27.8 / 2.1, exp2,
# arctan, log) stay NumPy's.
KERNEL_STREAMS = frozenset(
    "negative absolute square reciprocal sqrt sign floor ceil trunc rint maximum minimum "
    "fmax fmin less less_equal greater greater_equal equal not_equal".split()
)


def _numpy_has(feature: str | None) -> bool:
    """Whether NumPy's runtime dispatch found CPU ``feature`` (False if unknown)."""
    if feature is None:
        return False
    try:
        from numpy._core._multiarray_umath import __cpu_features__
    except ImportError:  # NumPy 1.x
        try:
            from numpy.core._multiarray_umath import __cpu_features__
        except ImportError:
            return False
    return bool(__cpu_features__.get(feature, False))


_lock = threading.RLock()
_keepalive: list[Any] = []
_ktab: np.ndarray | None = None
_saved: np.ndarray | None = None
_opflags: np.ndarray | None = None

# Custom functions (tapegrad.function) take op codes after the table's rows: the first
# for every function with a Python backward (its table entries say PY_CALLBACK), then
# one per function class with a compiled backward kernel.
MAX_USER_FUNCTIONS = 1024
USER_FUNCTIONS: list[Any] = []  # compiled-backward Function classes, by code - first - 1


def first_user_code() -> int:
    return len(ROWS)


def op_code(name: str) -> int:
    """The code of op table row ``name``."""
    return BY_NAME[name].code


def ktable() -> np.ndarray:
    """The process-wide kernel table (created on first use)."""
    global _ktab
    if _ktab is None:
        with _lock:
            if _ktab is None:
                tab = np.zeros((len(ROWS) + 1 + MAX_USER_FUNCTIONS, N_SIGS, 2), np.int64)
                for op in ROWS:
                    if op.bwd is None:
                        tab[op.code, :, BWD] = NO_RULE
                tab[len(ROWS), :, BWD] = PY_CALLBACK
                global _saved
                # per op code: the saved bits when all inputs want a gradient, then
                # when only input 0, only input 1 does (the scheduler picks by mask)
                saved = np.full((tab.shape[0], 3), -1, np.int64)  # custom compiled: all
                for op in ROWS:
                    saved[op.code] = (op.saved_mask, op.saved_mask_for(0), op.saved_mask_for(1))
                saved[len(ROWS)] = 0  # Python backward: its saved values are copies
                _saved = saved
                global _opflags
                flags = np.zeros(tab.shape[0], np.int64)
                for op in ROWS:
                    if op.assigns:
                        flags[op.code] |= OPF_ASSIGNS
                    if op.kind is Kind.BINARY:
                        flags[op.code] |= OPF_SHARED
                    for i in op.passes:
                        flags[op.code] |= OPF_PASS << i
                    if (
                        op.kind in ELEMENTWISE
                        and op.namespace == "numpy"
                        and isinstance(getattr(np, op.name, None), np.ufunc)
                        # arithmetic loops vectorise as well as NumPy's
                        and not op.arith
                        # vector formulas beat NumPy's ufunc loops (sin: 10x), mostly
                        and (op.vector is None or _numpy_has(NUMPY_FASTER.get(op.name)))
                    ):
                        flags[op.code] |= OPF_UFUNC
                    if op.vector is not None:
                        flags[op.code] |= OPF_VECTOR
                    if op.arith:
                        flags[op.code] |= OPF_ARITH
                    if flags[op.code] & OPF_UFUNC and op.name in KERNEL_STREAMS:
                        flags[op.code] |= OPF_STREAMS
                _opflags = flags
                _ktab = tab
    return _ktab


def op_flags() -> np.ndarray:
    """Per op code, ``OPF_*`` bits."""
    ktable()
    return _opflags


def saved_masks() -> np.ndarray:
    """Per op code, the bits of the node's links whose values its backward reads: all
    of its gradients, only input 0's, only input 1's (``[ops, 3]``)."""
    ktable()
    return _saved


def ensure(op: int, sig: int, direction: int) -> None:
    """Compile (or load from the disk cache) one kernel and enter it in the table."""
    tab = ktable()
    if tab[op, sig, direction] != 0:
        return
    if op > len(ROWS):  # a custom function's compiled backward
        with _lock:
            if tab[op, sig, direction] == 0:
                fn = USER_FUNCTIONS[op - len(ROWS) - 1]
                addr, keep = kernel_cfunc(fn._wrapper(sig), cache=False)
                _keepalive.append(keep)
                tab[op, sig, direction] = addr
        return
    row = ROWS[op]
    if sig not in row.sigs:
        raise TypeError(
            f"{row.name}: no kernel for dtype {sig_name(sig)} "
            f"(supported: {', '.join(sig_name(s) for s in row.sigs)})"
        )
    name = wrapper_name(row, sig, direction)
    fn = getattr(_generated, name, None)
    if fn is None:
        raise RuntimeError(
            f"{name} is missing from tapegrad/_generated.py; run `python -m tapegrad.ops.codegen`"
        )
    with _lock:
        if tab[op, sig, direction] == 0:
            addr, keep = kernel_cfunc(fn)
            _keepalive.append(keep)
            tab[op, sig, direction] = addr


def register_function(cls: Any) -> int:
    """Give a Function class with a compiled backward its own op code."""
    with _lock:
        if len(USER_FUNCTIONS) >= MAX_USER_FUNCTIONS:
            raise RuntimeError(f"more than {MAX_USER_FUNCTIONS} compiled custom functions")
        USER_FUNCTIONS.append(cls)
        return first_user_code() + len(USER_FUNCTIONS)


def compile_all(directions: tuple[int, ...] = (FWD, BWD)) -> int:
    """Compile every kernel of the op table into the disk cache.

    Kernels otherwise compile on first use (see ``docs/design/dispatch.md``); this
    fills the cache up front, in this process. ``python -m tapegrad.warmup --jobs N``
    does the same on ``N`` processes.

    Parameters
    ----------
    directions : tuple of int, optional
        Which kernels of each row: ``dispatch.FWD``, ``dispatch.BWD`` or both (the
        default). Rows without a backward have no ``BWD`` kernel.

    Returns
    -------
    int
        How many kernels were compiled or loaded from the cache.

    Raises
    ------
    numba.core.errors.NumbaError
        A kernel that does not compile (a bug in tapegrad: every row compiles in CI).

    Examples
    --------
    >>> import tapegrad as tg
    >>> n = tg.compile_all()  # doctest: +SKIP
    """
    n = 0
    for op in ROWS:
        for sig in op.sigs:
            for d in directions:
                if d == BWD and op.bwd is None:
                    continue
                ensure(op.code, sig, d)
                n += 1
    return n


# --- fused runs of scalar nodes --------------------------------------------------------
# A plan entry (tapegrad.replay.run_plan) costs one indirect call into a kernel that
# reads its node's operands as arrays, picks a loop for their shapes and runs it: ~10 ns
# a node for one element, where the formula itself takes 1-5. A replayed program of
# Python floats (a scalar recurrence, an ODE's right-hand side) is mostly such nodes.
# ``tapegrad.fused`` marks runs of consecutive plan entries whose node is a float64
# unary or binary row on one-element values (or one element picked from an array by a
# constant position); one call of an executor below runs a whole
# run, the formulas reached through the generated family switch (``scalar_fwd``,
# ``scalar_bwd``: every row's formulas, compiled once for all programs). They compute
# what the row's kernel computes on one element (its plain loop, the same formulas) and
# store or accumulate as it does (fresh bits, the mask, one slot as both operands), so
# a fused replay gives the same bits as the plan it replaces.


@jit
def _value(addr):
    return carray(as_pointer(addr, np.float64), 1)[0]


@jit
def _set(addr, v):
    carray(as_pointer(addr, np.float64), 1)[0] = v


@jit
def _put(addr, v, fresh):
    """Store ``v`` into a fresh gradient buffer, add it to any other."""
    p = carray(as_pointer(addr, np.float64), 1)
    if fresh:
        p[0] = v
    else:
        p[0] += v


# A fused run's instructions (built by tapegrad.fused from the node and slot tables once
# the first replay has fixed the program's layout; read by the executors below): a
# row-major int64 block of F_WIDTH per node forward, B_WIDTH per node backward. Data are
# absolute addresses (a program's values never move); gradients are offsets into the
# gradient arena (fixed for the plan's life, as the plans themselves assume), added to
# the arena's address at each replay.
F_OP, F_X, F_Y, F_OUT, F_WIDTH = range(5)
B_OP, B_X, B_Y, B_OUT, B_GX, B_GY, B_G, B_FLAGS, B_WIDTH = range(9)
# B_FLAGS bits: which inputs want a gradient, which of their buffers are fresh (stored
# into, not added to), one slot as both operands (both formulas summed into x's buffer)
WANT_X, WANT_Y, FRESH_X, FRESH_Y, SHARED = 1, 2, 4, 8, 16
# The op code of a copy: one element picked from a float64 array by a constant position
# (``u[k]`` in a loop over Python ints, a ``getitem`` node). Forward: out = x; backward:
# the gradient adds into the element's place in the source's buffer (B_GX), as the
# gather kernel adds.
COPY = -1
GATHER = BY_NAME["getitem"].code


def fused_forward(block, count, tp):
    """The forwards of a fused run: ``count`` nodes whose instructions start at address
    ``block`` (``F_WIDTH`` int64 each), in order."""
    code = carray(as_pointer(block, np.int64), (count, F_WIDTH))
    for j in range(count):
        op = code[j, F_OP]
        x = _value(code[j, F_X])
        if op == COPY:
            _set(code[j, F_OUT], x)
        else:
            _set(code[j, F_OUT], scalar_fwd(op, x, _value(code[j, F_Y])))
    return OK


def fused_backward(block, count, tp):
    """The backwards of a fused run: ``count`` nodes whose instructions start at address
    ``block`` (``B_WIDTH`` int64 each), in the backward plan's order."""
    arena = header(tp)[H_GRAD]
    code = carray(as_pointer(block, np.int64), (count, B_WIDTH))
    for j in range(count):
        op = code[j, B_OP]
        flags = code[j, B_FLAGS]
        g = _value(arena + code[j, B_G])
        if op == COPY:
            _put(arena + code[j, B_GX], g, False)
            continue
        x = _value(code[j, B_X])
        y = _value(code[j, B_Y])
        out = _value(code[j, B_OUT])
        if flags & SHARED:
            v = scalar_bwd(op, 0, g, x, y, out) + scalar_bwd(op, 1, g, x, y, out)
            _put(arena + code[j, B_GX], v, flags & FRESH_X)
            continue
        if flags & WANT_X:
            _put(arena + code[j, B_GX], scalar_bwd(op, 0, g, x, y, out), flags & FRESH_X)
        if flags & WANT_Y:
            _put(arena + code[j, B_GY], scalar_bwd(op, 1, g, x, y, out), flags & FRESH_Y)
    return OK


_executors: list[Any] = []


def run_executors() -> tuple[int, int]:
    """Compile (or load from the disk cache) the fused-run executors; returns the
    addresses of ``fused_forward`` and ``fused_backward`` (``_jit.RUN_SIGNATURE``)."""
    with _lock:
        if not _executors:
            if DISABLE_JIT:
                raise RuntimeError("fused runs need compiled code (NUMBA_DISABLE_JIT is set)")
            for fn in (fused_forward, fused_backward):
                _executors.append(run_cfunc(fn))
    return _executors[0][0], _executors[1][0]
