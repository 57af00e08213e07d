"""Compilation tiers: a cold kernel cache answers at once, compiled code takes over.

numba compiles the recorder, the scheduler and every kernel on first use, and caches
them on disk (``tapegrad._jit``). On a machine that has never compiled this version of
tapegrad (every fresh install, every upgrade, every CI container) the first gradient
would wait for that: tens of seconds for three ops. So the engine has three tiers, from
one source:

* **compiled**: numba's machine code, loaded from the cache (what a warm process runs);
* **interpreted**: the same modules imported a second time, as the package
  ``tapegrad._interpreted``, where ``_jit``'s decorators hand back the Python
  functions (as under ``NUMBA_DISABLE_JIT``). It records into, and runs backward over,
  the same tapes: the tape is typed arrays, whichever code writes them;
* **serial**: the kernels imported a third time, as ``tapegrad._serial``, compiled
  without their parallel, blocked and streamed loops (``_jit.FULL`` false): 2-3x
  faster to compile, the same numbers on small work. A kernel a loop runs gets it
  first (:func:`serial_kernel`, :func:`claim`), and the full kernel replaces it once
  the cache has that (:func:`upgrade`).

**The engine.** A process whose cache holds the compiled recorder and scheduler uses
them (this module is then never consulted again on a hot path). Otherwise the Python
layers call the interpreted engine (:func:`current`) until a background process has
compiled it into the cache; the next call after that switches (:func:`on_switch`
callbacks reset the entry points the layers keep).

**Kernels.** The dispatch table holds C addresses. An entry still 0 (``E_NO_KERNEL``)
that the cache cannot fill at once gets the address of a *shim*: the Python kernel
made callable from C (``ctypes``), which the compiled engine calls like any kernel. A
shim runs the Python kernel for small work (``TAPEGRAD_INTERPRET_MAX`` elements, by the
largest array of the node), compiles in this process for large work (interpreting a
million elements would take seconds), and hands over to the compiled kernel, in the
table too, once a background compile has put it in the cache. A Python kernel's
exception comes back as ``E_PYTHON`` and is raised again by the caller.

**The background compiler.** ``python -m tapegrad.warmup --background``, one per cache
(a lock file), nice'd, compiles what processes queued (:func:`request`: a captured
program's kernels, the engine, kernels loops run, front ends, kernels, ODE loops, the
fused executors; ``tapegrad.warmup`` gives the order) into the cache and exits when the
queue is empty; a later request starts another. ``TAPEGRAD_TIERS=0`` turns tiers off
(compile in this process, as ``tapegrad.warmup`` does); ``TAPEGRAD_BACKGROUND=0`` keeps
the interpreted tier but starts no compiler and compiles no serial kernel.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import os
import pickle
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from numba import typeof
from numba.core import caching

from . import _generated, dispatch
from ._jit import DISABLE_JIT, PACKAGE_DIR, cache_root, kernel_cfunc
from ._jit import entry_point as compiled_entry_point
from .layout import BWD, E_PYTHON, FWD, N_LINK, N_NIN, N_NOUT, S_SIZE
from .ops import ROWS
from .ops.codegen import wrapper_name
from .record import import_slot, record_elementwise, record_general, record_tensors
from .scheduler import run_backward

# Largest array (elements) a Python kernel takes on; above it, compile in this process.
INTERPRET_MAX = int(os.environ.get("TAPEGRAD_INTERPRET_MAX", str(1 << 16)))
# The compiled functions a process needs before it leaves the interpreted engine.
ENGINE = (record_elementwise, record_tensors, record_general, import_slot, run_backward)
INTERPRETED_PACKAGE = "tapegrad._interpreted"
SERIAL_PACKAGE = "tapegrad._serial"
# How often (seconds) an interpreted process looks for what the background compiled.
POLL = 0.25
# Python runs after which a shim asks the background compiler for its kernel ahead of
# the others queued (a kernel a compiled loop calls, such as an ODE solver's right-hand
# side: each Python run costs tens of microseconds)
HOT = 1000

_lock = threading.RLock()
_state: dict[str, Any] = {"enabled": None, "compiled": None, "next_poll": 0.0}
_switch_callbacks: list[Callable[[], None]] = []


def enabled() -> bool:
    """Whether tiers are on: not under ``TAPEGRAD_TIERS=0`` nor ``NUMBA_DISABLE_JIT``
    (read once, at the first decision)."""
    if _state["enabled"] is None:
        _state["enabled"] = not DISABLE_JIT and os.environ.get("TAPEGRAD_TIERS", "1") != "0"
    return _state["enabled"]


def disable() -> None:
    """Compile everything in this process from now on (``tapegrad.warmup``)."""
    _state["enabled"] = False
    _state["compiled"] = True


# --- what the cache holds ---------------------------------------------------------------


_index_files: dict[Any, Path] = {}


def _index_file(py_func: Callable) -> Path:
    """Where numba keeps the index of ``py_func``'s compiled versions: a file that exists
    once one was compiled into this version's cache (a ``cfunc``'s is named alike)."""
    path = _index_files.get(py_func)
    if path is None:
        found = caching.CompileResultCacheImpl(py_func)  # names files; compiles nothing
        path = Path(found.locator.get_cache_path()) / f"{found.filename_base}.nbi"
        _index_files[py_func] = path
    return path


def is_cached(fn: Any) -> bool:
    """Whether compiled function ``fn`` (a dispatcher) is in the disk cache."""
    return _index_file(fn.py_func).exists()


def function_cached(py_func: Callable) -> bool:
    """Whether Python function ``py_func``, compiled (a ``jit`` or ``cfunc``), is in
    the disk cache."""
    return _index_file(py_func).exists()


def kernel_cached(op: int, sig: int, direction: int) -> bool:
    """Whether the wrapper of row ``op``'s kernel is in the disk cache."""
    return _index_file(getattr(_generated, wrapper_name(ROWS[op], sig, direction))).exists()


def compile_engine(h: Any) -> None:
    """Compile (or load) the engine functions the Python layers call, for the argument
    types they pass (``h`` a tape header): what :func:`compiled` looks for."""
    compiled_entry_point(record_elementwise, h, 0, 0, 0, 0.0, 0.0, False)
    compiled_entry_point(record_tensors, h, 0, 0, 0)
    compiled_entry_point(record_general, h, 0, 0, False)
    compiled_entry_point(import_slot, h, 0, 0, 0, 0, 0)
    compiled_entry_point(run_backward, h, 0, 0, False)


def compiled() -> bool:
    """Whether the Python layers call the compiled engine (decided at the first call:
    compiled when tiers are off or the cache holds the engine)."""
    state = _state["compiled"]
    if state is None:
        with _lock:
            if _state["compiled"] is None:
                cold = enabled() and not all(is_cached(f) for f in ENGINE)
                _state["compiled"] = not cold
                if cold:
                    _interpreted()
                    request(["engine"])
            state = _state["compiled"]
    return state


def on_switch(callback: Callable[[], None]) -> None:
    """Call ``callback()`` when the process moves to the compiled engine (a layer resets
    the entry points it keeps)."""
    _switch_callbacks.append(callback)


def _poll() -> None:
    """In an interpreted process: switch to the compiled engine once the cache holds it."""
    now = time.monotonic()
    if now < _state["next_poll"]:
        return
    _state["next_poll"] = now + POLL
    if all(is_cached(f) for f in ENGINE):
        with _lock:
            if not _state["compiled"]:
                _state["compiled"] = True
                for callback in _switch_callbacks:
                    callback()


def current(fn: Any, args: tuple | None = None) -> Any:
    """What to call for compiled engine function ``fn`` now (on ``args``, where the
    caller has them): ``fn`` itself, or its interpreted twin (the same source, run by
    Python) while the cache lacks the engine, or lacks ``fn`` (for the types of
    ``args``): a front end such as ``record_reduce`` is compiled on its first use, and
    runs interpreted meanwhile, and is queued for the background compiler
    (:func:`function_item`)."""
    engine = _state["compiled"] or compiled()
    if not engine:
        _poll()
        engine = _state["compiled"]
    if fn in ENGINE or not enabled():
        return fn if engine else interpreted_twin(fn)
    if engine and fn in _ready:
        return fn
    # (looked up, and queued when missing, while the engine is interpreted too: it is
    # compiled by the time the engine is)
    key = fn if args is None else (fn, tuple(map(type, args)))
    if key in _ready or _cached_now(fn, key, lambda: function_item(fn, args), args):
        if engine:
            _ready.add(fn)  # (later calls: as fast as before; another version compiles here)
            return fn
    return interpreted_twin(fn)


def function_item(fn: Any, args: tuple | None) -> str:
    """The background compiler's item for compiled function ``fn`` at the types of
    ``args``: ``function <module> <name> <the types, pickled, base64>``."""
    sig = () if args is None else tuple(typeof(a) for a in args)
    py = fn.py_func
    return f"function {py.__module__} {py.__name__} {base64.b64encode(pickle.dumps(sig)).decode()}"


def compile_function_item(item: str) -> None:
    """Compile what :func:`function_item` names (in the background compiler)."""
    import importlib

    _, module, name, sig = item.split()
    fn = getattr(importlib.import_module(module), name)
    sig = pickle.loads(base64.b64decode(sig))
    if sig:
        fn.compile(sig)


def call(fn: Any, *args: Any) -> Any:
    """``current(fn, args)(*args)``."""
    return current(fn, args)(*args)


# Compiled functions found in the cache (they stay there), and when each other one was
# last looked for: a miss is looked for again after POLL seconds.
_ready: set[Any] = set()
_looked: dict[Any, float] = {}
_asked: set[str] = set()


def _cached_now(fn: Any, key: Any, item: Callable[[], str], args: tuple | None) -> bool:
    """Whether ``fn`` (a dispatcher) is in the cache (its version for the types of
    ``args``, if given): remembered under ``key`` once true, looked for at most every
    POLL seconds while false; a miss queues ``item()`` for the background compiler
    (once per process)."""
    with _lock:  # (threads wait for one answer: a first look must not read as a miss)
        if key in _ready:
            return True
        now = time.monotonic()
        if now < _looked.get(key, 0.0):
            return False
        if is_cached(fn) if args is None else has_version(fn, args):
            _ready.add(key)
            return True
        _looked[key] = now + POLL
        work = item()
        # (asked again while no compiler runs: one that exited leaves it queued)
        if work not in _asked or not compiler_running(cache_root()):
            _asked.add(work)
            request([work])
    return False


def has_version(fn: Any, args: tuple) -> bool:
    """Whether the cache holds ``fn`` (a dispatcher) compiled for the types of ``args``
    (read from numba's index; compiles and loads nothing)."""
    if not _index_file(fn.py_func).exists():
        return False
    sig = tuple(typeof(a) for a in args)
    try:
        index = caching.FunctionCache(fn.py_func)._cache_file._load_index()
    except Exception:  # (being written, or unreadable: not yet)
        return False
    return any(key[0] == sig for key in index)


def loop_ready(fn: Any, args: tuple, item: str) -> bool:
    """Whether compiled loop ``fn`` (an ODE solver's) may run on ``args`` without
    compiling in this process: tiers are off, or the cache holds that version. Otherwise
    the caller runs the same source driven from Python, and ``item`` is queued. Once
    found, ``(fn, item)`` is remembered (``item`` names the dtype): typing the
    arguments again costs tens of microseconds a solve."""
    return not enabled() or (fn, item) in _ready or _cached_now(fn, (fn, item), lambda: item, args)


class Unbound:
    """What a layer keeps for an engine function before the first call decides the tier:
    calling it runs ``bind()`` (which replaces it by :func:`current`'s choice in the
    layer's globals), then the call. Importing tapegrad decides nothing, so a process
    that only imports it (``python -m tapegrad.warmup``) starts no background compiler."""

    __slots__ = ("bind", "fn")

    def __init__(self, fn: Any, bind: Callable[[], None]) -> None:
        self.fn, self.bind = fn, bind

    def __call__(self, *args: Any) -> Any:
        self.bind()
        return current(self.fn)(*args)


def entry_point(fn: Any, *example_args: Any) -> Any:
    """``_jit.entry_point`` for a compiled function, the function itself for an
    interpreted twin (what :func:`current` gave)."""
    if hasattr(fn, "compile"):
        return compiled_entry_point(fn, *example_args)
    return fn


# --- the interpreted engine ----------------------------------------------------------------


def _copy(package: str, modules: tuple[str, ...], ready: Callable[[], None]) -> types.ModuleType:
    """The compiled layers imported again from the same files as ``package`` (a module
    object whose ``__path__`` is the package directory; ``_jit`` reads which copy it is
    from its name), with ``modules`` imported, then ``ready()`` run, once."""
    pkg = sys.modules.get(package)
    if pkg is not None and hasattr(pkg, "ready"):
        return pkg
    with _lock:
        pkg = sys.modules.get(package)
        if pkg is None:
            pkg = types.ModuleType(package)
            pkg.__path__ = [str(PACKAGE_DIR)]
            pkg.__package__ = package
            sys.modules[package] = pkg
        if not hasattr(pkg, "ready"):
            import importlib

            for name in modules:
                importlib.import_module(f"{package}.{name}")
            ready()
            pkg.ready = True
    return pkg


def _interpreted() -> types.ModuleType:
    """The package ``tapegrad._interpreted``: the compiled layers imported again from the
    same files, run by Python (``_jit.INTERPRETED``). It calls kernels by the addresses
    in the one dispatch table (:func:`call_address`)."""

    def ready() -> None:
        sys.modules[f"{INTERPRETED_PACKAGE}._jit"].KERNEL_CALLER = call_address

    modules = ("_jit", "layout", "record", "scheduler", "_generated")
    return _copy(INTERPRETED_PACKAGE, modules, ready)


def interpreted_twin(fn: Any) -> Callable:
    """The interpreted engine's function of the same module and name as compiled ``fn``."""
    py = getattr(fn, "py_func", fn)
    module = py.__module__
    if module.startswith(INTERPRETED_PACKAGE):
        return fn
    _interpreted()
    twin = module.replace("tapegrad", INTERPRETED_PACKAGE, 1)
    return getattr(sys.modules[twin], py.__name__)


_C_KERNEL = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
_c_calls: dict[int, Any] = {}  # address -> ctypes function (compiled kernels)


def call_address(addr: int, node: int, tp: int) -> int:
    """The interpreted engine's ``call_kernel``: a shim's Python kernel directly, a
    compiled kernel through ctypes."""
    shim = _SHIMS_BY_ADDRESS.get(addr)
    if shim is not None:
        return shim(node, tp)
    f = _c_calls.get(addr)
    if f is None:
        f = _c_calls[addr] = _C_KERNEL(int(addr))
    return f(node, tp)


# --- kernels: shims in the table ------------------------------------------------------------

_SHIMS: dict[tuple[int, int, int], _Shim] = {}
_SHIMS_BY_ADDRESS: dict[int, _Shim] = {}
_errors: dict[int, BaseException] = {}  # thread -> what a Python kernel raised


def _largest(node: int, tp: int) -> int:
    """Elements in the largest array node ``node`` reads or writes."""
    L = sys.modules[f"{INTERPRETED_PACKAGE}.layout"]
    h = L.header(tp)
    N, S, K = L.nodes(h), L.slots(h), L.links(h)
    base = N[N_LINK, node]
    return max(
        (int(S[S_SIZE, K[0, base + i]]) for i in range(N[N_NIN, node] + N[N_NOUT, node])),
        default=0,
    )


class _Shim:
    """Table entry ``(op, sig, direction)`` while its compiled kernel is not loaded: a C
    callable (ctypes) running the Python kernel, or the compiled one once it exists."""

    def __init__(self, op: int, sig: int, direction: int) -> None:
        self.key = (op, sig, direction)
        self.name = wrapper_name(ROWS[op], sig, direction)
        self.kernel = f"{ROWS[op].name} {sig} {direction}"  # (as queued)
        gen = sys.modules[f"{INTERPRETED_PACKAGE}._generated"]
        self.python = getattr(gen, self.name)
        self.compiled: Any = None
        self.compiled_at = 0  # the address of what ``compiled`` calls, once known
        self.next_poll = 0.0
        self.calls = 0  # Python runs, up to HOT
        self.thunk = _C_KERNEL(self)  # kept alive here: the table holds its address
        self.address = ctypes.cast(self.thunk, ctypes.c_void_p).value

    def _load(self) -> Any:
        """The compiled kernel (from the cache, else compiled now), entered in the table
        in place of this shim."""
        with _lock:
            if self.compiled is None:
                addr = load_kernel(*self.key)
                self.compiled = _C_KERNEL(int(addr))
                self.compiled_at = int(addr)
        return self.compiled

    def __call__(self, node: int, tp: int) -> int:
        try:
            if self.compiled is not None:
                return self.compiled(node, tp)
            now = time.monotonic()
            if now >= self.next_poll:
                self.next_poll = now + POLL
                if kernel_cached(*self.key):
                    return self._load()(node, tp)
                if self.calls >= HOT and (
                    serial_cached(*self.key)  # (another compiled it, or
                    or (_background_enabled() and claim(f"serial {self.kernel}"))
                ):  # its claimant died)
                    return self._enter_serial()(node, tp)
                if _background_enabled() and not compiler_running(cache_root()):
                    request([f"kernel {self.kernel}"])  # (the compiler exited: another)
            if _largest(node, tp) > INTERPRET_MAX:
                return self._load()(node, tp)
            if self.calls < HOT:
                self.calls += 1
                if self.calls == HOT:  # called from a loop
                    # Python runs are ~30x slower than compiled ones. Every kernel this
                    # loop runs (most shims of a loop get here together) goes to the
                    # head of the background compiler's queue, and this process
                    # compiles this one: both in the serial flavour first (2-3x faster
                    # to compile, the same numbers on small work), each kernel once
                    # (claim). With no background compiler (the cold tests) it stays
                    # Python.
                    with _lock:
                        mates = [s for s in _SHIMS.values() if s.calls >= HOT // 4]
                    # (and their backwards first: a loop of forwards is usually
                    # differentiated, and the latest asked for goes first)
                    backs = [_backward_of(s) for s in mates if s.key[2] == FWD]
                    hot = [k for k in backs if k is not None]
                    hot += [s.kernel for s in mates if s.compiled is None]
                    request([f"hot {k}" for k in hot])
                    if _background_enabled() and (
                        serial_cached(*self.key) or claim(f"serial {self.kernel}")
                    ):
                        return self._enter_serial()(node, tp)
            return self.python(node, tp)
        except BaseException as e:  # (a C caller cannot take an exception: a status)
            _errors[threading.get_ident()] = e
            return E_PYTHON

    def _enter_serial(self) -> Any:
        """The serial flavour of the kernel (from its cache, else compiled now), entered
        in the table in place of this shim until the full one is in the cache
        (:func:`upgrade`)."""
        with _lock:
            if self.compiled is None:
                addr = serial_kernel(*self.key)
                dispatch.ktable()[self.key] = addr
                self.compiled = _C_KERNEL(int(addr))
                self.compiled_at = int(addr)
                _SERIAL_IN_TABLE.add(self.key)
        return self.compiled


# Table entries holding a serial flavour, replaced by the full kernel once the cache has
# it, when the Python layers next call upgrade() (at most every POLL seconds).
_SERIAL_IN_TABLE: set[tuple[int, int, int]] = set()
_next_upgrade = [0.0]


def upgrade() -> None:
    """Put each full kernel the background compiler has finished in the table, in place
    of its serial flavour: a serial kernel gives the same numbers on small work, but
    runs large work on one core (the full kernel's one-thread numbers) and without
    streaming stores. Called between calls (a compiled step, an
    ODE solve, a backward); an entry swaps in one store, so a backward running in
    another thread calls one kernel or the other, both complete."""
    if not _SERIAL_IN_TABLE:
        return
    now = time.monotonic()
    if now < _next_upgrade[0]:
        return
    _next_upgrade[0] = now + POLL
    for key in list(_SERIAL_IN_TABLE):
        if kernel_cached(*key):
            load_kernel(*key)
            _SERIAL_IN_TABLE.discard(key)
            shim = _SHIMS.get(key)
            if shim is not None:
                shim.compiled_at = int(dispatch.ktable()[key])
                shim.compiled = _C_KERNEL(shim.compiled_at)


def expect_loop(ops: Any, sigs: Any) -> None:
    """A captured program (``tg.compile``) is there to be replayed in a loop: queue the
    kernels of its nodes (rows ``ops`` at signatures ``sigs``, in recording order) that
    are not compiled yet, as ``loop`` items, ahead of everything else: the forwards in
    the order they run, then the backwards in theirs. The background compiler starts
    on them while this process compiles replay, instead of after ``HOT`` Python runs of
    each, and before the engine (a replay does not record)."""
    if not _background_enabled():
        return
    tab = dispatch.ktable()
    keys = list(dict.fromkeys(zip(ops.tolist(), sigs.tolist())))
    order = [(op, sig, FWD) for op, sig in keys]
    order += [(op, sig, BWD) for op, sig in reversed(keys)]
    loop = []
    for op, sig, d in order:
        if not 0 <= op < len(ROWS) or (d == BWD and ROWS[op].bwd is None):
            continue
        if _missing(tab, op, sig, d):
            loop.append(f"loop {ROWS[op].name} {sig} {d}")
    if loop:
        request(loop)


_in_cache: set[tuple[int, int, int]] = set()  # kernels found in the cache (they stay)


def _missing(tab: Any, op: int, sig: int, d: int) -> bool:
    """Whether a kernel is neither in the table nor in the cache (a shim, or 0 and not
    cached; a file lookup the first time only)."""
    entry = int(tab[op, sig, d])
    if entry in _SHIMS_BY_ADDRESS:
        return True
    if entry != 0 or (op, sig, d) in _in_cache:
        return False
    if kernel_cached(op, sig, d):
        _in_cache.add((op, sig, d))
        return False
    return True


def _backward_of(shim: _Shim) -> str | None:
    """The queue name of the backward kernel of a forward shim's row, if it has one
    that is not compiled in the table yet (0, or a shim)."""
    op, sig, _ = shim.key
    if ROWS[op].bwd is None or not _missing(dispatch.ktable(), op, sig, BWD):
        return None
    return f"{ROWS[op].name} {sig} {BWD}"


_keep: list[Any] = []


def load_kernel(op: int, sig: int, direction: int) -> int:
    """Load (or compile) the compiled kernel of a row into the dispatch table, over a
    shim if one stands there; its address."""
    tab = dispatch.ktable()
    wrapper = getattr(_generated, wrapper_name(ROWS[op], sig, direction))
    with _lock:
        addr, keep = kernel_cfunc(wrapper)
        _keep.append(keep)
        tab[op, sig, direction] = addr
    return addr


def _serial() -> types.ModuleType:
    """The package ``tapegrad._serial``: the compiled layers imported again from the
    same files, compiled without their parallel, blocked and streamed loops
    (``_jit.FULL`` false), into their own cache directory."""
    return _copy(SERIAL_PACKAGE, ("_jit", "_generated"), lambda: None)


def _serial_wrapper(op: int, sig: int, direction: int) -> Any:
    _serial()
    gen = sys.modules[f"{SERIAL_PACKAGE}._generated"]
    return getattr(gen, wrapper_name(ROWS[op], sig, direction))


def serial_cached(op: int, sig: int, direction: int) -> bool:
    """Whether the serial flavour of a row's kernel is in the disk cache."""
    return _index_file(_serial_wrapper(op, sig, direction)).exists()


def serial_kernel(op: int, sig: int, direction: int) -> int:
    """The address of a row's kernel in the serial flavour, compiled (or loaded from its
    cache) in this process."""
    wrapper = _serial_wrapper(op, sig, direction)
    with _lock:
        addr, keep = sys.modules[f"{SERIAL_PACKAGE}._jit"].kernel_cfunc(wrapper)
        _keep.append(keep)
    return addr


def missing_kernel(op: int, sig: int, direction: int) -> None:
    """A table entry a record or a backward found 0: loaded from the cache, a shim (and
    a background compile) on a cold cache, compiled here with tiers off."""
    if op >= len(ROWS) or not enabled() or kernel_cached(op, sig, direction):
        dispatch.ensure(op, sig, direction)
        return
    _interpreted()
    with _lock:
        shim = _SHIMS.get((op, sig, direction))
        if shim is None:
            shim = _SHIMS[op, sig, direction] = _Shim(op, sig, direction)
            _SHIMS_BY_ADDRESS[shim.address] = shim
        tab = dispatch.ktable()
        if tab[op, sig, direction] == 0:
            tab[op, sig, direction] = shim.address
    request([f"kernel {ROWS[op].name} {sig} {direction}"])


def raise_pending() -> None:
    """Raise what a Python kernel of this thread raised (it returned ``E_PYTHON``)."""
    e = _errors.pop(threading.get_ident(), None)
    if e is None:
        raise RuntimeError("tapegrad: a kernel failed (E_PYTHON) and left no exception")
    raise e


# --- the background compiler -----------------------------------------------------------------

QUEUE = "compile-queue"
LOCK = "compiler.lock"


def _background_enabled() -> bool:
    if "background" not in _state:  # (read once: the environment, as enabled() does)
        _state["background"] = os.environ.get("TAPEGRAD_BACKGROUND", "1") != "0"
    return enabled() and _state["background"]


def request(items: list[str]) -> None:
    """Queue work for the background compiler (``engine``; ``kernel <row> <sig> <dir>``
    ...: ``tapegrad.warmup``) and start one if none runs for this cache."""
    if not _background_enabled():
        return
    root = cache_root()
    with contextlib.suppress(OSError):
        enqueue(root, items)
        if not compiler_running(root):
            _start_compiler()


def enqueue(root: Path, items: list[str]) -> None:
    """Append ``items`` to the queue of the cache ``root`` (the background compiler's
    own follow-up work goes here directly)."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / QUEUE, "a") as fh:  # one short append: atomic between processes
        fh.write("".join(f"{item}\n" for item in items))


def compiler_running(root: Path) -> bool:
    """Whether a background compiler holds this cache's lock."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): no background compiler
        return True
    try:
        with open(root / LOCK, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fh, fcntl.LOCK_UN)
        return False
    except OSError:
        return True


# When this process last started a background compiler. The compiler exits once its
# queue has been empty for two seconds; a later request starts another, but not within
# RESTART seconds of the last start (a new compiler takes ~1 s to import and lock).
RESTART = 10.0
_started: list[float] = []


def _start_compiler() -> None:
    now = time.monotonic()
    with _lock:
        if _started and now - _started[-1] < RESTART:
            return
        first = not _started
        _started.append(now)
    env = dict(os.environ, TAPEGRAD_TIERS="0")
    subprocess.Popen(
        [sys.executable, "-m", "tapegrad.warmup", "--background"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # outlives this process: the cache fills for the next
        cwd=str(PACKAGE_DIR.parent),
    )
    if first:
        print(
            "tapegrad: this version's kernels are not compiled on this machine yet; small "
            "work runs interpreted while a background process compiles them into "
            f"{cache_root()}",
            file=sys.stderr,
            flush=True,
        )


def queued(root: Path) -> dict[str, tuple[int, int]]:
    """The background compiler's queue: each item, with where it was first and last
    asked for (line numbers), in the order first asked for."""
    try:
        lines = (root / QUEUE).read_text().splitlines()
    except OSError:
        return {}
    seen: dict[str, tuple[int, int]] = {}
    for i, line in enumerate(lines):
        item = line.strip()
        if item:
            seen[item] = (seen[item][0] if item in seen else i, i)
    return seen


CLAIMS = "compile-claims"


def claim(work: str, root: Path | None = None) -> bool:
    """Take ``work`` (``"serial <row> <sig> <direction>"``) to compile: False if a live
    process (this one, another, the background compiler) took it before. Two compilers
    on one machine would otherwise compile the same kernel side by side."""
    root = root or cache_root()
    try:
        import fcntl

        root.mkdir(parents=True, exist_ok=True)
        with open(root / CLAIMS, "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            fh.seek(0)
            for line in fh:
                pid, _, taken = line.strip().partition(" ")
                if taken == work and _alive(int(pid)):  # (a dead one's claim is void)
                    return False
            fh.write(f"{os.getpid()} {work}\n")
            return True
    except (ImportError, OSError, ValueError):  # no flock (Windows), a cache not written
        return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # (another user's process)
        pass
    return True


def renew_hot() -> None:
    """Count every shim's Python runs from zero again: replay's fused runs have just
    taken some of them over. A kernel a loop still runs asks again (``hot``), and the
    background compiler takes the latest such requests first."""
    with _lock:
        for shim in _SHIMS.values():
            shim.calls = 0


__all__ = [
    "ENGINE",
    "call",
    "claim",
    "compile_engine",
    "compile_function_item",
    "compiled",
    "current",
    "enqueue",
    "entry_point",
    "expect_loop",
    "function_cached",
    "function_item",
    "has_version",
    "interpreted_twin",
    "is_cached",
    "kernel_cached",
    "load_kernel",
    "loop_ready",
    "missing_kernel",
    "on_switch",
    "raise_pending",
    "renew_hot",
    "request",
    "serial_cached",
    "serial_kernel",
    "upgrade",
]
