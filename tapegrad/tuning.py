"""The sizes and switches that tune the tape and the kernels it drives, most read from
the environment (the test suite sets several of them to reach every path with small
arrays): when NumPy's ufuncs or several threads compute a forward, when a backward
zeroes gradients lazily, when an eager tape is handed over or rewinds, and which leaves'
gradients get arrays of their own."""

from __future__ import annotations

import os

# Elementwise results of at least this many elements are computed by NumPy's ufunc
# (SIMD exp/tanh/log are several times faster than the scalar libm calls a numba loop
# makes; below this the ufunc call and the views cost more than they save).
NUMPY_MIN = 16384
# TAPEGRAD_POISON_GRADIENTS=1 (the test suite sets it): a gradient buffer the scheduler
# lets a kernel store into without zeroing it first is filled with NaN instead, so that
# a kernel that reads such a buffer before writing every element shows up as NaN
POISON_GRADIENTS = os.environ.get("TAPEGRAD_POISON_GRADIENTS", "") == "1"
# Below this many gradient bytes per live node a backward zeroes its whole arena at once
# instead of making buffers ready node by node (scheduler.run_backward). The test suite
# sets TAPEGRAD_LAZY_BYTES=0, so that its small graphs take the node-by-node path too.
LAZY_BYTES = int(os.environ.get("TAPEGRAD_LAZY_BYTES", "64"))
# Same-shape NumPy forwards of at least this many elements are split across the cores.
# Below it the halves cost more than they save: a result that fits a core's cache is
# read by the next op from the other core's (Lennard-Jones 512, (512, 512) float64
# values, 2 threads: 15.1 ms a step at 2^18, 13.6 at 2^20; the 2e6 chains gain the same
# either way). The test suite lowers it (TAPEGRAD_THREAD_MIN) to reach the threaded path
# with smaller arrays.
THREAD_MIN = int(os.environ.get("TAPEGRAD_THREAD_MIN", str(1 << 20)))
# An eager tape whose arena is full, holds at least this many bytes and cannot rewind
# checks whether the graphs still held need half of it; if not (a loop of forward
# passes nobody runs backward: the arena would grow without end), it is handed over to
# those graphs at the next op instead of growing (see ``Tape.fix``).
UNHELD_MIN = 64 << 20
# A rewound tape records into the first this many bytes of its arena, whatever the
# arena grew to (a soft cap: H_ARENA_CAP). Reaching it tries a rewind, and lifts the cap
# (doubling, up to the chunk) only when a graph that may still run backward is held.
# Without it, ops whose results nobody keeps (a forward on tensors that do not require
# grad, a no_grad loop) would rewind only when the whole arena was full: after one
# 2e6-element step had grown it to 474 MB, a 28 MB Lennard-Jones forward would run
# through its cold end at 80 ms a call (page faults of memory the kernel has reclaimed)
# instead of 6 ms.
SOFT_ARENA = int(os.environ.get("TAPEGRAD_SOFT_ARENA", str(64 << 20)))
# Leaves' gradients of at least this many elements get arrays of their own in a
# backward (``Tape.use_own_grads``); smaller ones are copied out of the arena. The test
# suite sets TAPEGRAD_OWN_GRAD_MIN=1, so that every leaf goes through its own array.
OWN_GRAD_MIN = int(os.environ.get("TAPEGRAD_OWN_GRAD_MIN", "4096"))
