"""How tapegrad's parallel loops share the machine: set before numba starts its threads.

numba's parallel loops (``prange``) run on a pool of OpenMP threads, by default one per
CPU this process may use. Two defaults of that pool cost tapegrad dearly when the
machine is shared:

* **The wait policy.** GNU OpenMP keeps a worker spinning after each parallel region
  (``OMP_WAIT_POLICY`` unset: ~300,000 spins) so that the next region starts at once.
  With more runnable threads than cores (two other processes on a 2-core CI runner,
  a laptop, one MPI rank per core) every spinning worker holds a core the thread that
  would release it is waiting for, and each parallel region costs a scheduler time
  slice: Lennard-Jones 512 by einsum runs at 15x NumPy instead of 1.3x. ``PASSIVE`` workers
  sleep at once; on a quiet machine a region then costs a wake-up (docs/design/large_arrays.md,
  "Threads on a shared machine", gives both measurements).
* **One pool per MPI rank.** Each rank starts a thread per CPU, so ``mpiexec -n 2`` on
  two cores runs four. A rank gets the node's CPUs divided by its ranks on the node
  (``MPI_LOCALNRANKS`` from MPICH's launcher, ``OMPI_COMM_WORLD_LOCAL_SIZE`` from Open
  MPI's).

A value the user set in the environment is kept. Importing this module configures:
it must come before numba reads its configuration (``tapegrad/__init__.py`` imports it
first). If numba was imported earlier, a rank's thread count is set with
``numba.set_num_threads`` (for the importing thread).
"""

from __future__ import annotations

import os
import sys

# Launchers' variables: the number of ranks on this node.
LOCAL_RANKS = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE")


def cpus() -> int:
    """The CPUs this process may run on (its affinity mask, as numba counts them)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # (no affinity on this platform)
        return max(1, os.cpu_count() or 1)


def ranks_on_node(environ: dict | None = None) -> int:
    """MPI ranks on this node as the launcher tells it (1 outside MPI)."""
    env = os.environ if environ is None else environ
    for name in LOCAL_RANKS:
        try:
            return max(1, int(env[name]))
        except (KeyError, ValueError):
            continue
    return 1


def rank_threads(environ: dict | None = None) -> int | None:
    """Threads for one rank's parallel loops under MPI (None outside it)."""
    ranks = ranks_on_node(environ)
    return max(1, cpus() // ranks) if ranks > 1 else None


def configure() -> None:
    """Set the pool's defaults in the environment before numba reads them."""
    if "GOMP_SPINCOUNT" not in os.environ:  # (a spin count of the user's own decides)
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    threads = rank_threads()
    if threads is None or "NUMBA_NUM_THREADS" in os.environ:
        return
    if "numba" in sys.modules:  # its configuration is read already: this thread's count
        import numba

        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    else:
        os.environ["NUMBA_NUM_THREADS"] = str(threads)


configure()

__all__ = ["LOCAL_RANKS", "configure", "cpus", "rank_threads", "ranks_on_node"]
