"""The CUDA target's runtime: numba's CUDA module loaded on first use, launches,
the kernel cache and the device arenas values are carved from."""

from __future__ import annotations

import builtins
import itertools
import math
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

THREADS = 128  # threads per block
CHUNK = 1 << 20  # smallest value-arena chunk, in elements
ALIGN = 32  # arena offsets are multiples of this many elements (256 bytes in float64)

_lock = threading.RLock()
_cuda: Any = None
_kernels: dict[tuple, Any] = {}
_small: dict[tuple, Any] = {}  # small device arrays by content: metadata, scalars
_configs: dict[tuple, Any] = {}  # configured launches of small grids (see configure_launch)
SMALL_GRID = 128  # numba-cuda warns on launches of fewer blocks than this
SEQUENCE = itertools.count()


def numba_cuda() -> Any:
    """numba.cuda, imported on first use, or a clear error."""
    global _cuda
    if _cuda is None:
        try:
            from numba import cuda
        except ImportError as e:  # pragma: no cover - numba always ships a cuda stub
            raise RuntimeError(
                "tapegrad: device='cuda' needs numba-cuda (pip install 'tapegrad[cuda]')"
            ) from e
        if not cuda.is_available():
            raise RuntimeError(
                "tapegrad: device='cuda' needs a CUDA GPU and its driver, and none was "
                "found (pip install 'tapegrad[cuda]' provides numba-cuda). To run CUDA "
                "code without a GPU, set NUMBA_ENABLE_CUDASIM=1 before numba is imported."
            )
        _cuda = cuda
    return _cuda


def available() -> bool:
    """Tell whether CUDA tensors can be made here (a GPU, or numba's simulator).

    Loads numba's CUDA target on first use.

    Returns
    -------
    bool
        True when numba-cuda finds a GPU and its driver, or runs its simulator
        (``NUMBA_ENABLE_CUDASIM=1``).

    Examples
    --------
    >>> import tapegrad.cuda as tgc
    >>> isinstance(tgc.available(), bool)  # True on a machine with a GPU
    True
    """
    try:
        numba_cuda()
    except RuntimeError:
        return False
    return True


def configure_launch(kernel: Any, grid: Any, block: Any) -> Any:
    """``kernel[grid, block]``, without numba-cuda's low-occupancy warning.

    numba-cuda warns (``NumbaPerformanceWarning``, "Grid size N will likely result in
    GPU under-utilization") on every launch of fewer than 128 blocks. A small tensor is
    the user's choice, not a mistake in how tapegrad launches, so the warning is
    silenced for tapegrad's own launches and nowhere else. Small-grid configurations
    are made once, under the lock and with the warning filtered, then reused; large
    grids never warn and are configured per launch. (A configuration holds the default
    stream, the only one tapegrad launches on.)
    """
    if math.prod(grid if isinstance(grid, tuple) else (grid,)) >= SMALL_GRID:
        return kernel[grid, block]
    key = (kernel, grid, block)
    c = _configs.get(key)
    if c is None:
        with _lock, warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Grid size .* under-utilization")
            c = kernel[grid, block]
        if c is not kernel:  # numba's simulator configures the kernel itself: no cache
            _configs[key] = c
    return c


def launch(kernel: Any, n: int, *args: Any) -> None:
    if n > 0:
        configure_launch(kernel, (n + THREADS - 1) // THREADS, THREADS)(*args)


def built_kernels(key: tuple, build: Callable[[Any], Any]) -> Any:
    """The kernels ``build(tapegrad.cuda.kernels)`` returns, built once per key."""
    k = _kernels.get(key)
    if k is None:
        with _lock:
            k = _kernels.get(key)
            if k is None:
                numba_cuda()
                from . import kernels

                k = _kernels[key] = build(kernels)
    return k


def move_kernels() -> dict[str, Any]:
    return built_kernels(("moves",), lambda k: k.move_kernels())


def small_array(values: tuple, dtype: Any = np.int64) -> Any:
    """A small constant device array (shape metadata, scalar operands), uploaded once
    and reused: a host-to-device copy per op would cost more than the op."""
    key = (np.dtype(dtype).str, values)
    d = _small.get(key)
    if d is None:
        if len(_small) > 4096:
            _small.clear()
        d = _small[key] = numba_cuda().to_device(np.array(values, dtype))
    return d


# --- device arenas ------------------------------------------------------------------------


class _Arena:
    """Bump allocation of device arrays out of large chunks, one chunk list per dtype.

    A tensor's data is a view of a chunk; the chunk's memory goes back to numba's
    allocator when the arena has moved on and the last view of it is gone.
    """

    def __init__(self) -> None:
        self.chunks: dict[str, tuple[Any, int]] = {}  # dtype -> (chunk, next free offset)

    def take(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        n = int(np.prod(shape, dtype=np.int64))
        need = max(-(-n // ALIGN) * ALIGN, ALIGN)
        with _lock:
            chunk, off = self.chunks.get(dtype.str, (None, 0))
            if chunk is None or off + need > chunk.shape[0]:
                chunk, off = numba_cuda().device_array(builtins.max(CHUNK, need), dtype), 0
            self.chunks[dtype.str] = (chunk, off + need)
        return chunk[off : off + n].reshape(shape)


_values_arena = _Arena()


def device_empty(shape: tuple[int, ...], dtype: np.dtype) -> Any:
    return _values_arena.take(tuple(shape), np.dtype(dtype))


def device_fill(data: Any, value: float) -> None:
    launch(move_kernels()["fill"], size_of(data), flat_view(data), value)


def size_of(a: Any) -> int:
    return int(np.prod(a.shape, dtype=np.int64))


def flat_view(a: Any) -> Any:
    """A 1-d view (0-d arrays become one element): the kernels index flat."""
    return a.reshape(size_of(a)) if a.shape else a.reshape(1)
