"""The one place tapegrad talks to numba.

Everything compiled in tapegrad goes through :func:`jit` (nopython functions) or
:func:`kernel_cfunc` (the C-callable kernel wrappers whose addresses fill the
dispatch table). Both cache on disk, in a directory keyed on a hash of the whole
package's sources: numba's own cache only notices edits to the file that defines a
function, so a cached scheduler would otherwise keep calling a stale kernel from
another module after that module was edited.

This module also holds the few intrinsics the engine needs: turning an integer
address into a typed pointer, and calling a kernel through its address. Each has a
pure-Python fallback so that the whole engine also runs under
``NUMBA_DISABLE_JIT=1`` (slowly, but debuggable with pdb).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
import numba.extending
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import caching, config, event
from numba.core.datamodel import models
from numba.core.imputils import lower_constant
from numba.extending import intrinsic, register_jitable, register_model, typeof_impl

PACKAGE_DIR = Path(__file__).resolve().parent


def copy_of(module: str) -> str:
    """Which import of the compiled layers module ``module`` belongs to: ``tapegrad``,
    ``tapegrad._interpreted`` or ``tapegrad._serial``."""
    for copy in ("tapegrad._interpreted", "tapegrad._serial"):
        if module == copy or module.startswith(copy + "."):
            return copy
    return "tapegrad"


# The compilation tiers (``tapegrad.tiers``) import the compiled layers up to three
# times, from the same files:
# - ``tapegrad``: compiled with every loop a kernel has (parallel, blocked, streamed);
# - ``tapegrad._interpreted``: the same source run by Python. Every decorator below
#   hands back the Python function itself, as under NUMBA_DISABLE_JIT, and nothing is
#   registered with numba;
# - ``tapegrad._serial``: compiled with ``FULL`` false, which cuts each parallel,
#   blocked and streamed path (``if FULL and on_all_cores(n)``: numba prunes a branch
#   on a global constant before typing, so those loops are never compiled). Small work
#   takes exactly the serial paths in both (PARALLEL_MIN and STREAM_MIN lie above
#   tiers.INTERPRET_MAX), so it gives the same numbers, and compiles 2-3x faster. Its
#   cache is the subdirectory ``serial`` of this version's.
COPY: str = copy_of(__name__)
INTERPRETED: bool = COPY == "tapegrad._interpreted"
FULL: bool = COPY != "tapegrad._serial"
DISABLE_JIT: bool = bool(config.DISABLE_JIT) or INTERPRETED

# ---------------------------------------------------------------------------------
# cache location keyed on the package's sources

_hash_lock = threading.Lock()
_source_hash: str | None = None


# The modules numba compiles and every module they import (the layers up to the dispatch
# table, which never import upward: tests/test_layering.py). The Python layers above
# (tape, Tensor, driver, front ends, transforms, CUDA target) define no compiled code, so
# editing them must not throw away 420 compiled kernels; the test checks that too.
HASHED = (
    "_jit.py",
    "shapes.py",
    "boundary.py",
    "pytree.py",
    "layout.py",
    "kernels/",
    "record.py",
    "scheduler.py",
    "replay.py",
    "odesolve.py",
    "ops/",
    "_generated.py",
    "dispatch.py",
)


# An op family's folder (``ops/<family>/``) holds its rows and kernels, which are compiled,
# and its front ends and recorded rules, which are Python above Tensor: only the modules
# named here key the cache (a new compiled module of a family is added here; the layering
# test fails while one is missing).
FAMILY_COMPILED = (
    "__init__",
    "rows",
    "kernels",
    "binary_kernels",
    "core",
    "ufuncs",
    "gamma",
    "bessel",
    "incomplete",
)


def is_hashed(rel: str) -> bool:
    """Whether the package file ``rel`` (a POSIX path inside the package) keys the cache."""
    parts = rel.split("/")
    if len(parts) == 3 and parts[0] == "ops":  # a family's module
        return parts[2].removesuffix(".py") in FAMILY_COMPILED
    return any(rel == h or (h.endswith("/") and rel.startswith(h)) for h in HASHED)


def source_hash() -> str:
    """SHA-256 (hex, 16 chars) of the package's compiled modules (``HASHED``), paths
    included, and numba's version."""
    global _source_hash
    if _source_hash is None:
        with _hash_lock:
            if _source_hash is None:
                h = hashlib.sha256()
                for path in sorted(PACKAGE_DIR.rglob("*.py")):
                    rel = path.relative_to(PACKAGE_DIR).as_posix()
                    if not is_hashed(rel):
                        continue
                    h.update(rel.encode())
                    h.update(path.read_bytes())
                h.update(numba.__version__.encode())
                _source_hash = h.hexdigest()[:16]
    return _source_hash


def cache_root() -> Path:
    """Directory holding compiled kernels for this exact version of the sources.

    ``$TAPEGRAD_CACHE_DIR`` overrides the default ``$XDG_CACHE_HOME/tapegrad`` (or
    ``~/.cache/tapegrad``). Each source hash gets its own subdirectory, so editing a
    compiled module (``HASHED``) means recompiling everything once, never running stale
    code. The first call in a process marks this version used and tidies the others
    (:func:`tidy_cache`).
    """
    base = os.environ.get("TAPEGRAD_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
        base = os.path.join(xdg, "tapegrad")
    root = Path(base) / f"{_PY_TAG}-{source_hash()}"
    if not _tidied:
        _mark_and_tidy(root)
    return root


# Each version of the sources leaves a directory of compiled kernels (~180 MB) behind.
# The first cache use in a process touches LAST_USED in its own directory, then removes
# the other versions' directories (same Python only) unused for KEEP_DAYS, and all but
# the KEEP_VERSIONS most recently used. TAPEGRAD_CACHE_TIDY=0 turns this off.
_PY_TAG = f"py{sys.version_info[0]}{sys.version_info[1]}"
LAST_USED = "last-used"
KEEP_DAYS = 21.0
KEEP_VERSIONS = 8
_tidied = False


def _last_used(path: Path) -> float:
    marker = path / LAST_USED
    return (marker if marker.exists() else path).stat().st_mtime


def tidy_cache(
    root: Path, keep_days: float = KEEP_DAYS, keep_versions: int = KEEP_VERSIONS
) -> list[Path]:
    """Remove the kernel caches beside ``root`` of other versions of the sources (this
    Python's) that were last used more than ``keep_days`` ago or are not among the
    ``keep_versions`` most recently used; returns what it removed. Other files and
    directories are never touched."""
    pattern = re.compile(rf"{_PY_TAG}-[0-9a-f]{{16}}")
    others = []
    for p in root.parent.iterdir() if root.parent.is_dir() else ():
        if p != root and p.is_dir() and pattern.fullmatch(p.name):
            try:
                others.append((_last_used(p), p))
            except OSError:  # removed meanwhile by another process
                pass
    others.sort(reverse=True)
    old = time.time() - keep_days * 86400.0
    stale = [p for i, (used, p) in enumerate(others) if i >= keep_versions or used < old]
    for p in stale:
        shutil.rmtree(p, ignore_errors=True)
    return stale


def _mark_and_tidy(root: Path) -> None:
    global _tidied
    _tidied = True
    if os.environ.get("TAPEGRAD_CACHE_TIDY", "1") == "0":
        return
    try:
        root.mkdir(parents=True, exist_ok=True)
        (root / LAST_USED).touch()
        tidy_cache(root)
    except OSError:  # a read-only cache: the fallback locator handles it
        pass


class _TapegradCacheLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """Numba cache locator for functions defined inside the tapegrad package."""

    def __init__(self, py_func: Callable, py_file: str) -> None:
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        rel = Path(py_file).resolve().relative_to(PACKAGE_DIR)
        self._cache_path = str(cache_root() / ("" if FULL else "serial") / rel.parent)

    def get_cache_path(self) -> str:
        return self._cache_path

    def get_source_stamp(self) -> str:
        # The directory is already keyed on the hash of all sources.
        return source_hash()

    @classmethod
    def from_function(cls, py_func: Callable, py_file: str):
        # (each import of the package has its own locator, for its own functions)
        if copy_of(getattr(py_func, "__module__", None) or "") != COPY:
            return None
        try:
            Path(py_file).resolve().relative_to(PACKAGE_DIR)
        except ValueError:
            return None
        try:
            return super().from_function(py_func, py_file)
        except OSError:
            return None


def _fallback_locator() -> type:
    class _TempLocator(_TapegradCacheLocator):
        """Used when the user cache directory is not writable."""

        def __init__(self, py_func: Callable, py_file: str) -> None:
            super().__init__(py_func, py_file)
            rel = Path(py_file).resolve().relative_to(PACKAGE_DIR)
            root = Path(tempfile.gettempdir()) / f"tapegrad-{os.getuid()}" / cache_root().name
            self._cache_path = str(root / ("" if FULL else "serial") / rel.parent)

    return _TempLocator


_impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl
for _cls in (_fallback_locator(), _TapegradCacheLocator) if not INTERPRETED else ():
    if _cls not in _impl._locator_classes:
        _impl._locator_classes.insert(0, _cls)

# numba keeps one index file per function, {signature: data file}, and saves an entry
# by reading the index, choosing the first free data-file number, writing the index and
# then the data. Two processes saving two signatures of one function at once (the
# warm-up's workers, MPI ranks or a background compiler on one cold cache: digamma's
# float32 and float64 kernels both compile polygamma) can both choose number 1: the
# index then names one signature and the file holds the other's code, and the next
# process loads a function for the wrong types ("No implementation of function bwd1
# found for signature (StaticRef[digamma], float32, ...)"). In tapegrad's cache an
# entry is saved and read under a lock on the cache directory (flock: exclusive to
# save, shared to read), so index and data always agree.
INDEX_LOCK = "index.lock"
_index_lock = threading.Lock()
_lock_files: dict[str, int] = {}


def _cache_dir_lock(cache_path: str) -> int | None:
    """The descriptor of the lock file of the tapegrad cache holding ``cache_path``, or
    None for a cache that is not tapegrad's (or where there is no flock). A bare
    descriptor, kept open for the process's life: a file object would warn
    (ResourceWarning) when the interpreter drops it at exit."""
    if fcntl is None:
        return None
    root = cache_root()
    for base in (root, Path(tempfile.gettempdir()) / f"tapegrad-{os.getuid()}" / root.name):
        if cache_path == str(base) or cache_path.startswith(str(base) + os.sep):
            key = str(base)
            fd = _lock_files.get(key)
            if fd is None:
                base.mkdir(parents=True, exist_ok=True)
                fd = os.open(base / INDEX_LOCK, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                _lock_files[key] = fd
            return fd
    return None


def _under_index_lock(method: Callable, exclusive: bool) -> Callable:
    def locked(self: Any, *args: Any) -> Any:
        fd = _cache_dir_lock(self._cache_path)
        if fd is None:
            return method(self, *args)
        with _index_lock:  # (flock is per open file: threads of one process queue here)
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                return method(self, *args)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    locked.__wrapped__ = method
    return locked


try:
    import fcntl
except ImportError:  # no flock (Windows): numba's own behaviour
    fcntl = None  # type: ignore[assignment]
if not INTERPRETED and not hasattr(caching.IndexDataCacheFile.save, "__wrapped__"):
    caching.IndexDataCacheFile.save = _under_index_lock(caching.IndexDataCacheFile.save, True)
    caching.IndexDataCacheFile.load = _under_index_lock(caching.IndexDataCacheFile.load, False)

# ---------------------------------------------------------------------------------
# the first-use notice


class _FirstUseNotice(event.Listener):
    """Prints one line once tapegrad's own compiling (numba's compile events for
    functions defined in tapegrad, cache loads excluded) has taken ``after`` seconds in
    this process: on an empty cache the first model sits silent for tens of seconds."""

    def __init__(self, after: float = 1.0) -> None:
        self.after = after
        self.spent = 0.0
        self.depth = 0
        self.started = 0.0
        self.timer: threading.Timer | None = None
        self.said = False
        self.lock = threading.Lock()

    def on_start(self, ev: event.Event) -> None:
        with self.lock:
            if self.depth == 0:
                func = getattr(ev.data.get("dispatcher"), "py_func", None)
                if not (getattr(func, "__module__", None) or "").startswith("tapegrad"):
                    return
                self.started = time.perf_counter()
                if not self.said:
                    self.timer = threading.Timer(max(self.after - self.spent, 0.0), self.say)
                    self.timer.daemon = True
                    self.timer.start()
            self.depth += 1

    def on_end(self, ev: event.Event) -> None:
        with self.lock:
            if self.depth == 0:  # the end of a compile not counted (not tapegrad's)
                return
            self.depth -= 1
            if self.depth == 0:
                self.spent += time.perf_counter() - self.started
                if self.timer is not None:
                    self.timer.cancel()
                    self.timer = None

    def say(self) -> None:
        with self.lock:
            if self.said:
                return
            self.said = True
        print(
            f"tapegrad: compiling kernels for first use (cached afterwards in {cache_root()})...",
            file=sys.stderr,
            flush=True,
        )


FIRST_USE_NOTICE = _FirstUseNotice()
if not DISABLE_JIT and FULL:
    event.register("numba:compile", FIRST_USE_NOTICE)

# ---------------------------------------------------------------------------------
# decorators

JIT_OPTIONS: dict[str, Any] = {
    "nopython": True,
    "cache": True,
    "nogil": True,
    # IEEE semantics like NumPy: 1/0 is inf, not a ZeroDivisionError.
    "error_model": "numpy",
}


def jit(fn: Callable | None = None, **options: Any):
    """``numba.jit`` with tapegrad's options (nopython, cached, nogil, numpy errors)."""
    opts = {**JIT_OPTIONS, **options}
    if DISABLE_JIT:
        return (lambda f: f) if fn is None else fn
    if fn is None:
        return lambda f: numba.jit(**opts)(f)
    return numba.jit(**opts)(fn)


def entry_point(fn: Any, *example_args: Any) -> Callable:
    """``fn``'s compiled entry point for the types of ``example_args``.

    Calling a numba dispatcher resolves the type of every argument and looks the
    overload up on each call: ~250 ns for four integers, ~340 with an array, against
    ~115 / ~160 for the entry point it ends in, which only unboxes. Eager recording
    makes one such call per op (~1 us in all), so its fast paths call entry points.
    The entry point does not check types: callers pass exactly the types it was
    compiled for (Python ints and floats for int64 and float64, the tape header array).
    Compiling (or loading from the disk cache) happens here, once per process.
    """
    if DISABLE_JIT:
        return fn
    return fn.compile(tuple(numba.typeof(a) for a in example_args))


def overload(fn: Callable, inline: str = "never") -> Callable:
    """``numba.extending.overload`` with tapegrad's options (compiled code only);
    ``inline="always"`` inlines the chosen implementation into its callers (numba IR)."""
    if DISABLE_JIT:  # the Python function is the implementation
        return lambda impl: impl
    return numba.extending.overload(fn, jit_options=dict(JIT_OPTIONS, nopython=True), inline=inline)


def jitable(fn: Callable) -> Callable:
    """A plain Python function that compiled code may also call (compiled into the caller)."""
    return fn if DISABLE_JIT else register_jitable(fn)


class StaticRef:
    """A compile-time reference to something by key (an op's formulas, say).

    Passed to compiled code, it is typed by its key and lowers to nothing, so functions
    taking it are specialised per key and stay cacheable (passing a jitted function as
    an argument would embed the function object's address in the machine code, which
    numba refuses to cache).
    """

    __slots__ = ("ref",)

    def __init__(self, ref: str) -> None:
        self.ref = ref

    def __repr__(self) -> str:
        return f"StaticRef({self.ref!r})"


class StaticRefType(types.Dummy):
    """Numba type of a :class:`StaticRef`: one type per referenced key."""

    def __init__(self, ref: str) -> None:
        self.ref = ref
        super().__init__(name=f"StaticRef[{ref}]")


if not INTERPRETED:

    @typeof_impl.register(StaticRef)
    def _typeof_static_ref(val, c):
        return StaticRefType(val.ref)

    register_model(StaticRefType)(models.OpaqueModel)

    @lower_constant(StaticRefType)
    def _lower_static_ref(context, builder, ty, pyval):
        return context.get_dummy_value()


KERNEL_SIGNATURE = "int64(int64, int64)"
# A run executor (``dispatch.fused_forward``/``fused_backward``): ``f(block, count,
# tape)`` runs the ``count`` nodes of a fused run whose instructions start at address
# ``block`` (``tapegrad.fused``), in one call
RUN_SIGNATURE = "int64(int64, int64, int64)"

# Under NUMBA_DISABLE_JIT the "address" of a kernel is its index in this list.
# Index 0 is never used: a zero in the dispatch table means "not compiled yet".
_PY_KERNELS: list[Any] = [None]


def serial_loops() -> None:
    """Give the calling thread one numba thread: the kernels take their serial loops
    (``ops.elementwise.kernels.on_all_cores``). For a forked child, where numba's OpenMP
    threads did not survive ``fork()`` and numba terminates a child that enters a
    parallel loop once its parent has run one. numba's count is per thread: this runs
    in the thread that forked, and ``tape.Tape`` runs it in each thread the child
    starts (docs/guide/threads_memory.md, "Processes")."""
    from numba.np.ufunc import parallel

    # (not launched in the parent: the child starts its own layer, which is safe)
    if getattr(parallel, "_is_initialized", True):
        numba.set_num_threads(1)


if hasattr(os, "register_at_fork") and not INTERPRETED and FULL:
    os.register_at_fork(after_in_child=serial_loops)


def kernel_cfunc(
    pyfunc: Callable[[int, int], int], cache: bool = True, parallel: bool = False
) -> tuple[int, Any]:
    """Compile a kernel wrapper ``f(node, tape_address) -> status`` to a C callback.

    Returns ``(address, keepalive)``: the address goes into the dispatch table, the
    second item must be kept alive as long as the address is used.
    """
    if DISABLE_JIT:
        _PY_KERNELS.append(pyfunc)
        return len(_PY_KERNELS) - 1, pyfunc
    # Kernels may call parallel (prange) functions: their machine code refers to the
    # threading layer's symbols, which exist once the layer is launched.
    numba.get_num_threads()
    cf = numba.cfunc(
        KERNEL_SIGNATURE, cache=cache, nopython=True, error_model="numpy", parallel=parallel
    )(pyfunc)
    return cf.address, cf


def run_cfunc(pyfunc: Callable[[int, int, int], int]) -> tuple[int, Any]:
    """Compile a run executor ``f(block, count, tape_address) -> status`` to a C
    callback in the disk cache; returns ``(address, keepalive)`` as :func:`kernel_cfunc`."""
    cf = numba.cfunc(RUN_SIGNATURE, cache=True, nopython=True, error_model="numpy")(pyfunc)
    return cf.address, cf


# ---------------------------------------------------------------------------------
# intrinsics (with Python fallbacks)

_CTYPES = {
    np.float64: ctypes.c_double,
    np.float32: ctypes.c_float,
    np.int64: ctypes.c_int64,
    np.int32: ctypes.c_int32,
    np.bool_: ctypes.c_bool,
    np.uint8: ctypes.c_uint8,
}


def as_pointer(addr: int, dtype: type) -> Any:
    """Typed pointer to memory at integer ``addr`` (use with ``numba.carray``)."""
    return ctypes.cast(int(addr), ctypes.POINTER(_CTYPES[dtype]))


@intrinsic
def _as_pointer(typingctx, addr, dtype):
    if not isinstance(dtype, types.NumberClass):
        return None
    ptr_type = types.CPointer(dtype.instance_type)

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], context.get_value_type(ptr_type))

    return ptr_type(types.int64, dtype), codegen


@overload(as_pointer)
def _as_pointer_ol(addr, dtype):
    return lambda addr, dtype: _as_pointer(addr, dtype)


# The interpreted tier's caller of kernels by C address (set by ``tapegrad.tiers`` in
# its copy of this module): there the table holds compiled kernels' addresses and those
# of Python kernels made callable from C. Under NUMBA_DISABLE_JIT, None: the table holds
# indices into _PY_KERNELS.
KERNEL_CALLER: Callable[[int, int, int], int] | None = None


def call_kernel(fn: int, node: int, tape: int) -> int:
    """Call the kernel at address ``fn`` as ``fn(node, tape)``; returns its status."""
    if KERNEL_CALLER is not None:
        return KERNEL_CALLER(fn, node, tape)
    return _PY_KERNELS[fn](node, tape)


@intrinsic
def _call_kernel(typingctx, fn, node, tape):
    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        fnty = ir.FunctionType(i64, [i64, i64])
        ptr = builder.inttoptr(args[0], fnty.as_pointer())
        return builder.call(ptr, [args[1], args[2]])

    return types.int64(types.int64, types.int64, types.int64), codegen


@overload(call_kernel)
def _call_kernel_ol(fn, node, tape):
    return lambda fn, node, tape: _call_kernel(fn, node, tape)


_C_RUN = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)


def call_run(fn: int, first: int, count: int, tape: int) -> int:
    """Call the run executor at address ``fn`` as ``fn(first, count, tape)``; returns
    its status."""
    return _C_RUN(fn)(first, count, tape)


@intrinsic
def _call_run(typingctx, fn, first, count, tape):
    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        fnty = ir.FunctionType(i64, [i64, i64, i64])
        ptr = builder.inttoptr(args[0], fnty.as_pointer())
        return builder.call(ptr, [args[1], args[2], args[3]])

    return types.int64(types.int64, types.int64, types.int64, types.int64), codegen


@overload(call_run)
def _call_run_ol(fn, first, count, tape):
    return lambda fn, first, count, tape: _call_run(fn, first, count, tape)


def numba_threads() -> int:
    """numba's thread count for the calling thread (``numba.get_num_threads``)."""
    return numba.get_num_threads()


@intrinsic
def _numba_threads(typingctx):
    # the threading layer's exported symbol, which parallel loops call too (launched
    # before any kernel is compiled or loaded); numba.get_num_threads in compiled code
    # goes through a ctypes pointer, which would make every kernel uncacheable
    def codegen(context, builder, sig, args):
        fn = builder.module.globals.get("get_num_threads")  # numba's parfors declare it
        if fn is None:  # C: int get_num_threads(void)
            fn = ir.Function(builder.module, ir.FunctionType(ir.IntType(32), []), "get_num_threads")
        n = builder.call(fn, [])
        return builder.sext(n, ir.IntType(64)) if n.type.width < 64 else n

    return types.int64(), codegen


@overload(numba_threads)
def _numba_threads_ol():
    return lambda: _numba_threads()


def _gemm_py(fn, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    raise NotImplementedError  # only reached through the overload below


def blas_gemm(
    fn: int,
    ta: int,
    tb: int,
    m: int,
    n: int,
    k: int,
    alpha: float,
    a: Any,
    lda: int,
    b: Any,
    ldb: int,
    beta: float,
    c: Any,
    ldc: int,
) -> None:
    """Row-major ``C = alpha * op(A) @ op(B) + beta * C`` through a Fortran ``?gemm``.

    ``fn`` is the address of a Fortran ``dgemm``/``sgemm`` (matching the dtype of
    ``a``, ``b``, ``c``; negated for 64-bit integer arguments, see
    :func:`blas_addresses`); ``ta``/``tb`` are 0 or 1 (transpose). ``a``, ``b``,
    ``c`` are 1-D arrays whose first element is the matrix origin. Calling BLAS
    directly (rather than ``np.dot``) lets backward kernels accumulate in place
    (``beta = 1``) without a temporary.
    """
    # Python fallback (NUMBA_DISABLE_JIT, the interpreted tier): plain NumPy on reshaped
    # views. As in BLAS, beta 0 does not read C: a fresh gradient buffer is uninitialised
    # memory, and 0 * NaN would be NaN.
    A = np.lib.stride_tricks.as_strided(a, (k, m) if ta else (m, k), (lda * a.itemsize, a.itemsize))
    B = np.lib.stride_tricks.as_strided(b, (n, k) if tb else (k, n), (ldb * b.itemsize, b.itemsize))
    C = np.lib.stride_tricks.as_strided(c, (m, n), (ldc * c.itemsize, c.itemsize))
    A = A.T if ta else A
    B = B.T if tb else B
    C[...] = alpha * (A @ B) if beta == 0.0 else alpha * (A @ B) + beta * C


@intrinsic
def _gemm(typingctx, fn, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    dtype = c.dtype

    def codegen(context, builder, sig, args):
        fn_, ta_, tb_, m_, n_, k_, alpha_, a_, lda_, b_, ldb_, beta_, c_, ldc_ = args
        i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
        flt = context.get_value_type(dtype)
        fptr = flt.as_pointer()

        def chars(flag):  # 'N' (78) or 'T' (84)
            slot = builder.alloca(i8)
            val = builder.select(
                builder.icmp_signed("!=", flag, ir.Constant(flag.type, 0)),
                ir.Constant(i8, 84),
                ir.Constant(i8, 78),
            )
            builder.store(val, slot)
            return slot

        def real(v, vty):
            slot = builder.alloca(flt)
            builder.store(context.cast(builder, v, vty, dtype), slot)
            return slot

        def data(ary, aryty):
            arr = context.make_array(aryty)(context, builder, ary)
            return builder.bitcast(arr.data, fptr)

        def call(addr, ity):
            """The Fortran call with integers of type ``ity`` (passed by reference)."""

            def integer(v):
                slot = builder.alloca(ity)
                builder.store(builder.trunc(v, ity) if ity.width < 64 else v, slot)
                return slot

            ip = ity.as_pointer()
            # (transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
            args = [i8.as_pointer()] * 2 + [ip] * 3 + [fptr, fptr, ip, fptr, ip, fptr, fptr, ip]
            fnty = ir.FunctionType(ir.VoidType(), args)
            # Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap
            # the operands and the m/n roles, keep each operand's own transpose flag.
            builder.call(
                builder.inttoptr(addr, fnty.as_pointer()),
                [
                    chars(tb_),
                    chars(ta_),
                    integer(n_),
                    integer(m_),
                    integer(k_),
                    real(alpha_, sig.args[6]),
                    data(b_, sig.args[9]),
                    integer(ldb_),
                    data(a_, sig.args[7]),
                    integer(lda_),
                    real(beta_, sig.args[11]),
                    data(c_, sig.args[12]),
                    integer(ldc_),
                ],
            )

        # a negative address is an ILP64 BLAS (64-bit integers, see blas_addresses)
        wide = builder.icmp_signed("<", fn_, ir.Constant(i64, 0))
        with builder.if_else(wide) as (ilp64, lp64):
            with ilp64:
                call(builder.neg(fn_), i64)
            with lp64:
                call(fn_, i32)
        return context.get_dummy_value()

    return types.void(*[fn, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc]), codegen


@overload(blas_gemm)
def _blas_gemm_ol(fn, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    def impl(fn, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
        _gemm(fn, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)

    return impl


# The BLAS of NumPy's wheels: OpenBLAS built for 64-bit integers, its symbols renamed
# (scipy-openblas64). SciPy's wheels bundle another copy (32-bit integers).
NUMPY_GEMM = ("scipy_dgemm_64_", "scipy_sgemm_64_")


def _numpy_blas() -> tuple[int, int] | None:
    """Addresses of ``dgemm``/``sgemm`` in the BLAS NumPy itself loaded, if it is the
    OpenBLAS of NumPy's wheels (None for any other build)."""
    root = Path(np.__file__).resolve().parent
    for folder in (root.parent / "numpy.libs", root / ".dylibs"):
        for path in sorted(folder.glob("*openblas64*")) if folder.is_dir() else ():
            try:
                lib = ctypes.CDLL(str(path))  # loaded already by NumPy: the same copy
                fns = [getattr(lib, name) for name in NUMPY_GEMM]
            except (OSError, AttributeError):
                continue
            return tuple(ctypes.cast(f, ctypes.c_void_p).value for f in fns)  # type: ignore[return-value]
    return None


_BLAS: dict[str, tuple[int, int]] = {}


def blas_addresses(source: str | None = None) -> tuple[int, int]:
    """The ``fn`` arguments of :func:`blas_gemm` for float64 and float32.

    ``source`` ``"numpy"`` is the BLAS NumPy's wheels bundle, ``"scipy"`` SciPy's
    ``cython_blas``; by default ``$TAPEGRAD_BLAS``, else NumPy's where it is found.
    NumPy's comes first because a process that calls NumPy's matrix products between
    tapegrad's would otherwise run two OpenBLAS thread pools whose idle threads spin
    against each other: with 2 threads on 2 cores a (256, 64) @ (64, 256) product took
    11 ms instead of 0.5 when NumPy's and SciPy's copies alternated. An address is
    negated for an ILP64 BLAS (64-bit integer arguments), which the call reads.
    """
    source = (source or os.environ.get("TAPEGRAD_BLAS") or "numpy").strip().lower()
    if source not in _BLAS:
        found = _numpy_blas() if source == "numpy" else None
        if found is not None:
            _BLAS[source] = (-found[0], -found[1])
        elif source in ("numpy", "scipy"):
            from numba.extending import get_cython_function_address

            _BLAS[source] = (
                get_cython_function_address("scipy.linalg.cython_blas", "dgemm"),
                get_cython_function_address("scipy.linalg.cython_blas", "sgemm"),
            )
        else:
            raise ValueError(f"TAPEGRAD_BLAS: expected 'numpy' or 'scipy', got {source!r}")
    return _BLAS[source]


# ---------------------------------------------------------------------------------
# floating-point building blocks of the vector maths (kernels/vecmath.py)


def fma(a: float, b: float, c: float) -> float:
    """``a * b + c`` in float64 with one rounding (LLVM's ``llvm.fma``: one instruction
    on x86-64 with FMA, vectorised with the loop around it).

    The Python fallback (``NUMBA_DISABLE_JIT``) rounds twice.
    """
    return float(a) * float(b) + float(c)


@intrinsic
def _fma(typingctx, a, b, c):
    f64 = types.float64

    def codegen(context, builder, sig, args):
        a_, b_, c_ = (context.cast(builder, v, t, f64) for v, t in zip(args, sig.args))
        return builder.fma(a_, b_, c_)

    return f64(a, b, c), codegen


@overload(fma)
def _fma_ol(a, b, c):
    if all(isinstance(t, types.Float | types.Integer) for t in (a, b, c)):
        return lambda a, b, c: _fma(a, b, c)


def cold_branch() -> None:
    """Nothing; compiled, an empty inline-assembly statement with a side effect. Placed in
    a rarely taken branch, it keeps LLVM from speculating the branch: otherwise a loop
    vectoriser may compute both sides for every element (a libm call in the rare side
    then costs ~10 ns an element in the common case)."""


@intrinsic
def _cold_branch(typingctx):
    def codegen(context, builder, sig, args):
        builder.asm(ir.FunctionType(ir.VoidType(), []), "", "", [], side_effect=True)
        return context.get_dummy_value()

    return types.none(), codegen


@overload(cold_branch)
def _cold_branch_ol():
    return lambda: _cold_branch()


def float_from_bits(bits: int) -> float:
    """The float64 whose IEEE-754 bit pattern is the int64 ``bits``."""
    return float(np.int64(bits).view(np.float64))


@intrinsic
def _float_from_bits(typingctx, bits):
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.DoubleType())

    if isinstance(bits, types.Integer) and bits.bitwidth == 64:
        return types.float64(bits), codegen


@overload(float_from_bits)
def _float_from_bits_ol(bits):
    return lambda bits: _float_from_bits(bits)


# ---------------------------------------------------------------------------------
# writing large results past the caches


def stream_lines(src: Any, dst: Any, start: int, m: int) -> None:
    """``dst[start:start + m] = src[:m]`` for two contiguous 1-D arrays of one dtype,
    ``dst[start]`` on a 64-byte boundary and ``m`` whole cache lines of elements;
    compiled, by non-temporal stores (a whole line each, no read of the line first).
    The caller ends its run of streamed blocks with :func:`store_fence`.

    Kernels compute a large result in small blocks into a buffer that stays in L1 and
    stream each block out (``layout.STREAM_MIN``). Between two blocks
    nothing may be an atomic instruction (a reference count: a view handed to a
    function): a locked instruction drains the write buffers and takes the gain back.
    """
    dst[start : start + m] = src[:m]


@intrinsic
def _stream_line(typingctx, src, si, dst, di):
    # 64 bytes from src (element si, any alignment) to dst (element di, 64-byte aligned)
    def codegen(context, builder, sig, args):
        line = ir.VectorType(ir.IntType(64), 8)

        def at(k, i):
            arr = context.make_array(sig.args[k])(context, builder, args[k])
            ptr = builder.gep(arr.data, [args[i]], inbounds=True)
            return builder.bitcast(ptr, line.as_pointer())

        value = builder.load(at(0, 1), align=1)
        store = builder.store(value, at(2, 3), align=64)
        one = builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
        store.set_metadata("nontemporal", one)
        return context.get_dummy_value()

    return types.none(src, si, dst, di), codegen


def store_fence() -> None:
    """Nothing; compiled, a sequentially consistent fence. Non-temporal stores are weakly
    ordered: a thread that streamed lines fences them before another thread (the next
    op, after a parallel loop's barrier) may read them."""


@intrinsic
def _store_fence(typingctx):
    def codegen(context, builder, sig, args):
        builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.none(), codegen


@overload(stream_lines, inline="always")
def _stream_lines_ol(src, dst, start, m):
    per_line = 64 // numba.np.numpy_support.as_dtype(dst.dtype).itemsize  # a constant

    def impl(src, dst, start, m):
        for i in range(0, m, per_line):
            _stream_line(src, i, dst, start + i)

    return impl


@overload(store_fence)
def _store_fence_ol():
    return lambda: _store_fence()
