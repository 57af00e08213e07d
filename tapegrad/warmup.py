"""Compile every kernel of the op table into the disk cache: ``python -m tapegrad.warmup``.

First use of an op compiles its kernels (a few seconds each, a binary row's backward up
to ~40 s), and the cache lives in a directory keyed on the package's compiled modules
and numba's version (``tapegrad._jit.HASHED``). Run this once after installing or
upgrading tapegrad, or editing a compiled module, to pay that cost up front, in
parallel: ``python -m tapegrad.warmup`` (one worker per CPU; ``--jobs N`` sets the
number; the 420 kernels take 15-20 minutes on 2 cores). Each worker process compiles
a share of the kernels and numba writes them to the shared cache.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import numpy as np

import tapegrad as tg

from . import dispatch, tiers
from ._jit import FIRST_USE_NOTICE, cache_root
from .layout import BWD, FWD
from .ops import BY_NAME, ROWS, Kind
from .tape import current_tape

# the public name; the rest (warmup, background, kernels) is the command line's
__all__ = ["compile_all"]


def kernels() -> list[tuple[int, int, int]]:
    """Every (op code, signature, direction) of the table."""
    return [
        (op.code, sig, d)
        for op in ROWS
        for sig in op.sigs
        for d in (FWD, BWD)
        if d == FWD or op.bwd is not None
    ]


def _leave_with(parent: int) -> None:
    """A worker's initializer: exit once ``parent`` has (a warm-up killed by a signal to
    its own pid, which the workers, other processes, do not get). Otherwise a worker
    compiles on, or waits for work forever: its end of the task queue never closes."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="tapegrad-warmup-parent", daemon=True).start()


def _compile_share(share: list[tuple[int, int, int]], engine: bool) -> int:
    FIRST_USE_NOTICE.said = True  # compiling is what was asked for: no notice
    tiers.disable()  # compiled here, never interpreted
    if engine:  # the recorder and the scheduler: small forwards and backwards
        tiers.compile_engine(current_tape().header)  # (what tapegrad.tiers looks for)
        _front_ends()
        dispatch.run_executors()  # replay's fused runs of scalar nodes
        _ode_solvers((np.float64, np.float32))
    for op, sig, d in share:
        dispatch.ensure(op, sig, d)
    return len(share)


def _front_ends() -> None:
    """The engine functions the Python layers call by op (``record.record_reduce``,
    ``record_matmul``, ``record_along``, ``cast_slot``...), compiled on their first
    use: a small program that uses them (and the kernels of its ops)."""
    x = tg.tensor(np.ones(3), requires_grad=True)
    w = tg.tensor(np.ones((3, 2)), requires_grad=True)
    tg.numpy.sum(tg.numpy.tanh(x @ w) ** 2).backward()
    m = tg.tensor(np.ones((2, 3)), requires_grad=True)
    f = tg.tensor(np.ones(3, np.float32), requires_grad=True)
    for _ in range(2):
        y = m @ w  # (the second product finds BLAS set up: record_matmul)
        y = tg.special.log_softmax(m @ w, axis=1) + tg.numpy.cumsum(y, axis=0)
        z = tg.numpy.sum(f.astype(np.float64))
        tg.numpy.mean(tg.numpy.sum(y, axis=0) * z).backward()


def _weight(kernel: tuple[int, int, int]) -> int:
    """A rough order of compile cost: a binary row's backward (its parallel, blocked and
    streamed loops for each input: 15-40 s) far above a unary one's or a forward (2-8 s)."""
    op, _, d = kernel
    binary = ROWS[op].kind is Kind.BINARY
    return (2 if d == BWD else 0) + (1 if binary else 0) + (2 if binary and d == BWD else 0)


def _ode_solvers(dtypes: tuple) -> None:
    """The ODE solvers' compiled loops (``tapegrad.odesolve``): forward, reverse pass
    and adjoint, in each of ``dtypes`` (and the kernels of a small right-hand side)."""
    for dtype in dtypes:
        k = tg.tensor(np.ones(2, dtype), requires_grad=True)
        for adjoint in (False, True):
            ys = tg.integrate.odeint(
                lambda y, t, k: -k * y, np.ones(2, dtype), [0.0, 1.0], k, adjoint=adjoint
            )
            tg.numpy.sum(ys).backward()


def compile_all(directions: tuple[int, ...] = (FWD, BWD)) -> int:
    """Compile every kernel of the op table into the disk cache, in this process.

    Kernels otherwise compile on first use (see the design page on dispatch); this fills
    the cache up front. ``python -m tapegrad.warmup --jobs N`` does the same (and
    compiles the engine, the ODE solvers and replay's executors) on ``N`` processes.
    Not to be confused with :func:`tapegrad.compile`, which captures a training step.

    Parameters
    ----------
    directions : tuple of int, optional
        Which kernels of each row: ``tapegrad.layout.FWD``, ``tapegrad.layout.BWD`` or
        both (the default). Rows without a backward have no ``BWD`` kernel.

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
    >>> from tapegrad.warmup import compile_all
    >>> n = compile_all()  # doctest: +SKIP
    """
    return dispatch.compile_all(directions)


def warmup(jobs: int | None = None) -> int:
    """Compile (or load) all kernels using ``jobs`` processes; returns how many."""
    todo = kernels()
    jobs = max(1, jobs or os.cpu_count() or 1)
    if jobs == 1:
        return _compile_share(todo, True)
    # one kernel a task, the costliest first: the workers take the next from one queue
    # (fixed shares left one worker compiling alone for the last 8-10 minutes: every
    # backward fell to one of two workers)
    todo.sort(key=_weight, reverse=True)
    spawn = get_context("spawn")
    with ProcessPoolExecutor(jobs, spawn, _leave_with, (os.getpid(),)) as pool:
        tasks = [pool.submit(_compile_share, [], True)]
        tasks += [pool.submit(_compile_share, [k], False) for k in todo]
        return sum(t.result() for t in tasks)


# The background compiler's order. The kernels of a captured program (``loop``: it is
# there to be replayed in a loop; their serial flavour) go first, while the process
# compiles replay. A process on a cold cache runs interpreted until the engine is
# compiled (``engine``); then the kernels shims run in loops (``hot``: their serial
# flavour first, the process compiles some itself); the engine's other functions a
# process runs interpreted meanwhile, at the types it called them with (``function``: a
# front end such as ``record_reduce``); the kernels as they were asked for (2-15 s
# each); the ODE solvers' loops (``ode <dtype>``, ~30 s: Python drives the same source
# meanwhile); replay's fused-run executors (``fused``, 30-40 s: replay of scalar nodes
# works without them, faster with them).
_ORDER = ("loop", "engine", "hot", "function", "kernel", "ode", "fused")


def _urgency(item: str, first: int, last: int) -> tuple[int, int]:
    """Sort key of a queued item asked for first and last at those lines of the queue:
    by kind (``_ORDER``); hot kernels the latest asked for first (a loop that asked
    before replay's fused runs took its nodes over may not run the kernel any more),
    the others in the order asked for."""
    kind = item.split()[0]
    return (
        _ORDER.index(kind) if kind in _ORDER else len(_ORDER),
        -last if kind == "hot" else first,
    )


def _compile_item(item: str) -> None:
    """Compile one queued item into the cache."""
    kind, *rest = item.split()
    if kind == "engine":
        tiers.compile_engine(current_tape().header)
    elif kind == "fused":
        dispatch.run_executors()
    elif kind == "ode":
        _ode_solvers((np.dtype(rest[0]).type,))
    elif kind == "function":
        tiers.compile_function_item(item)
    elif kind in ("loop", "hot"):  # the serial flavour, unless taken or compiled
        name, sig, direction = rest
        key = (BY_NAME[name].code, int(sig), int(direction))
        if not tiers.kernel_cached(*key):
            if tiers.claim(f"serial {' '.join(rest)}"):
                tiers.serial_kernel(*key)
            tiers.enqueue(cache_root(), [f"kernel {' '.join(rest)}"])  # (the full one, later)
    elif kind == "kernel":
        name, sig, direction = rest
        dispatch.ensure(BY_NAME[name].code, int(sig), int(direction))


def background(idle: float = 2.0) -> int:
    """The background compiler (``tapegrad.tiers``): compile what processes queued for
    this cache (``loop``/``hot <row> <sig> <direction>``, ``engine``, ``function ...``,
    ``kernel <row> <sig> <direction>``, ``ode <dtype>``, ``fused``: ``_ORDER``), newest requests
    included, until the queue has been done for ``idle`` seconds; one per cache (a
    lock), at low priority. Returns how many items it compiled."""
    import fcntl

    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    lock = open(root / tiers.LOCK, "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another compiler serves this cache
    (root / tiers.LOCK).write_text(f"{os.getpid()}\n")  # who it is (benchmarks stop it)
    with contextlib.suppress(OSError):
        os.nice(10)
    tiers.disable()
    FIRST_USE_NOTICE.said = True
    done: set[str] = set()
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < idle:
        todo = {k: at for k, at in tiers.queued(root).items() if k not in done}
        if not todo:
            time.sleep(0.2)
            continue
        # one item at a time, the most urgent first (a newer request may outrank what
        # is left of an older list)
        item = min(todo, key=lambda k: _urgency(k, *todo[k]))
        done.add(item)
        with contextlib.suppress(Exception):  # one that fails compiles on first use
            _compile_item(item)
        quiet_since = time.monotonic()
    return len(done)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--jobs", "-j", type=int, default=None, help="worker processes (default: CPU count)"
    )
    parser.add_argument(
        "--background",
        action="store_true",
        help="compile what tapegrad processes queued for this cache, then exit "
        "(started by tapegrad itself on a cold cache)",
    )
    args = parser.parse_args()
    if args.background:
        background()
        return
    tiers.disable()
    os.environ["TAPEGRAD_TIERS"] = "0"  # (the workers too)
    t = time.perf_counter()
    print(f"tapegrad: compiling every kernel into {cache_root()}...", flush=True)
    n = warmup(args.jobs)
    print(f"tapegrad: {n} kernels ready in {cache_root()} ({time.perf_counter() - t:.1f} s)")


if __name__ == "__main__":
    main()
