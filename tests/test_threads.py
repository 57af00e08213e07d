"""Threads sharing tensors, leaves and compiled steps: values and gradients as in a
serial run, and a short-lived thread's tape not kept alive by its results."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import tracemalloc
import warnings
import weakref

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import _threads
from tapegrad import tape as tape_module
from tapegrad.tape import current_tape

from .helpers import run_in_threads


def test_a_reader_thread_never_sees_the_next_steps_values(monkeypatch):
    """The owner copies held handles out and rewinds under the tape's lock; a reader in
    another thread reads under it too. Here the reader is paused in the middle of its
    read while the owner runs the next step: the reader must still get the values of
    the step it asked about (unlocked, it read the reused arena)."""
    w = tg.tensor(np.ones(64), requires_grad=True)
    held = tnp.sin(w) * 0.0 + 1.0  # the values a logger thread reads: all 1
    tnp.sum(held * w).backward()  # the next op rewinds (held is copied out first)
    inside, resume = threading.Event(), threading.Event()
    real_read = tape_module.Tape.read
    reader = []

    def paused_read(self, s):
        if threading.get_ident() in reader:
            inside.set()
            resume.wait(1.0)  # unlocked, the owner reuses the memory meanwhile
        return real_read(self, s)

    monkeypatch.setattr(tape_module.Tape, "read", paused_read)
    got = []

    def read():
        reader.append(threading.get_ident())
        got.append(held.numpy())

    t = threading.Thread(target=read)
    t.start()
    assert inside.wait(10)
    for _ in range(3):  # the next steps: other values into the same memory
        x = tnp.sin(w) * 0.0 + 7.0
        tnp.sum(x * w).backward()
    resume.set()
    t.join()
    np.testing.assert_array_equal(got[0], np.ones(64))
    np.testing.assert_array_equal(held.numpy(), np.ones(64))


def test_a_transform_whose_loss_is_another_threads_tensor_reads_it_locked(monkeypatch):
    """value_and_grad reads its loss in place only from its own tape; a loss that lives
    in another thread's tape (``f`` returns a tensor held from there) is read under that
    tape's lock, as any read is: paused mid-read while the owner runs more steps into
    the same memory, it still gets its value (the in-place read got 7.0)."""
    w = tg.tensor(np.ones(1), requires_grad=True)
    held = (tnp.sin(w) * 0.0 + 1.0).sum()
    tnp.sum(held * w).backward()
    inside, resume = threading.Event(), threading.Event()
    reader = []

    def pause():
        if threading.get_ident() in reader and not inside.is_set():
            inside.set()
            resume.wait(2.0)

    for name in ("read", "read_scalar"):
        real = getattr(tape_module.Tape, name)
        monkeypatch.setattr(
            tape_module.Tape, name, lambda self, s, real=real: (pause(), real(self, s))[1]
        )
    got = []

    def run():
        reader.append(threading.get_ident())
        with warnings.catch_warnings():  # "does not depend on the argument": true here
            warnings.simplefilter("ignore")
            got.append(tg.value_and_grad(lambda x: held)(np.ones(2))[0])

    t = threading.Thread(target=run)
    t.start()
    assert inside.wait(10)
    for _ in range(3):
        x = (tnp.sin(w) * 0.0 + 7.0).sum()
        tnp.sum(x * w).backward()
    resume.set()
    t.join()
    assert got == [1.0] and float(held) == 1.0


def test_a_reader_thread_during_training_reads_whole_steps():
    """A logger thread reads a tensor the training thread replaces every step: every
    read is one step's values (each step's are all equal)."""
    w = tg.tensor(np.ones((32, 32)), requires_grad=True)
    box: dict = {}
    stop = threading.Event()
    wrong = []

    def log():
        while not stop.is_set():
            item = box.get("x")
            if item is not None:
                v = item[0].numpy()
                if not np.all(v == item[1]):
                    wrong.append(v)

    t = threading.Thread(target=log)
    t.start()
    for i in range(400):
        x = tnp.sin(w) * 0.0 + float(i)
        box["x"] = (x, float(i))
        tnp.sum(x * w).backward()
        w.grad = None
    stop.set()
    t.join()
    assert not wrong


def test_threads_backward_into_one_leaf_lose_no_update():
    w = tg.tensor(np.zeros((200, 200)), requires_grad=True)

    def work(k):
        for _ in range(100):
            tnp.sum(w * 1.0).backward()

    run_in_threads(work, 4)
    np.testing.assert_array_equal(w.grad, np.full((200, 200), 400.0))


def test_grad_of_a_0d_leaf_stays_an_array():
    x = tg.tensor(2.0, requires_grad=True)
    for _ in range(3):
        (x * x).backward()
    assert type(x.grad) is np.ndarray and x.grad.shape == () and x.grad == 12.0


def test_a_compiled_step_from_threads_gets_per_call_gradients_in_graphs():
    """A compiled step used as one node of each thread's graph: each backward replays
    the program under its lock and gets its own call's gradient."""
    step = tg.compile(lambda w, x: tnp.sum(tnp.tanh(x @ w) ** 2))
    rng = np.random.default_rng(0)
    W = rng.standard_normal((6, 3))
    xs = [rng.standard_normal((5, 6)) for _ in range(4)]
    want = [tg.grad(lambda w, x=x: tnp.sum(tnp.tanh(x @ w) ** 2))(W) for x in xs]
    wrong = []

    def work(k):
        w = tg.tensor(W, requires_grad=True)
        for _ in range(40):
            w.grad = None
            (step(w, xs[k]) * 1.0).backward()
            if not np.allclose(w.grad, want[k]):
                wrong.append(k)

    run_in_threads(work, 4)
    assert not wrong


def _results_from_a_thread(n: int) -> tuple[list, list]:
    """Results of a short-lived thread (a big tape: 20 ops on 2e4 elements) and a weak
    reference to that thread's eager tape."""
    out, tapes = [], []

    def work():
        x = tg.tensor(np.linspace(0, 1, 20_000))
        for _ in range(20):
            x = tnp.sin(x) + 1.0
        tapes.append(weakref.ref(current_tape()))
        out.append(x)

    for _ in range(n):
        t = threading.Thread(target=work)
        t.start()
        t.join()
    return out, tapes


def test_results_kept_from_short_lived_threads_do_not_keep_their_tapes():
    out, tapes = _results_from_a_thread(5)
    gc.collect()
    for ref in tapes:
        tape = ref()
        # the tape object may live on (a bound leaf can name it) but holds no memory
        assert tape is None or not tape.chunks
    want = np.linspace(0, 1, 20_000)
    for _ in range(20):
        want = np.sin(want) + 1.0
    for x in out:
        np.testing.assert_allclose(x.numpy(), want)


def test_a_thread_that_holds_a_graph_keeps_its_tape_for_backward():
    w = tg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    box = []
    t = threading.Thread(target=lambda: box.append(tnp.sum(w * w)))
    t.start()
    t.join()
    box[0].backward()  # the graph is still there after its thread ended
    np.testing.assert_array_equal(w.grad, [2.0, 4.0])


def test_a_compiled_step_stays_flat_over_10000_calls_with_new_floats():
    step = tg.compile(lambda x, s: tnp.sum(tnp.sin(x) * s))
    x = np.linspace(0, 1, 8)
    for i in range(200):  # warm up (program, caches, allocator)
        step.value_and_grad(x, 0.5 + i)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(10_000):
            step.value_and_grad(x, 1.0 + i * 1e-3)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert step.stats["captures"] == 1
    assert grown < 200_000, grown  # bytes; a program or array kept per call is far more


def _large_scaled_gradient(seed: int) -> float:
    """A spawned worker's job: a backward on all cores (x * 0.9 over 200,000 elements)."""
    x = tg.tensor(np.random.default_rng(seed).standard_normal(200_000), requires_grad=True)
    (x * 0.9 + x * x).sum().backward()
    want = 0.9 + 2 * x.numpy()
    return float(np.abs(x.grad - want).max())


def _large_loops() -> tuple:
    """Large forwards and a backward that run on all cores (a vector forward,
    arithmetic, NumPy's halves of log with two threads): their values."""
    a = np.linspace(0.5, 2.0, 400_000)
    x = tg.tensor(a, requires_grad=True)
    y = tnp.log(x) * 0.9 + tnp.sin(x) * x
    y.sum().backward()
    with tg.no_grad():
        z = x * 2.0 - 1.0
    return y.numpy(), x.grad, z.numpy()


def _forked_job(conn) -> None:
    """A forked child's job: the large loops in its main thread, then in a thread it
    starts (numba's thread count is per thread)."""
    got = [_large_loops()]
    t = threading.Thread(target=lambda: got.append(_large_loops()))
    t.start()
    t.join()
    conn.send(got)
    conn.close()


def test_forked_child_runs_large_loops_on_one_thread():
    """docs/guide/threads_memory.md, "Worker processes": OpenMP does not survive fork(),
    and numba terminates a child that enters a parallel loop after its parent ran one;
    tapegrad's fork hook gives the child one numba thread (serial loops) and a fresh NumPy
    thread pool, so a forked child computes the same values as the parent instead of
    dying or waiting for threads it does not have."""
    import multiprocessing

    want = _large_loops()  # the parent's parallel loops and thread pool
    ctx = multiprocessing.get_context("fork")
    mine, theirs = ctx.Pipe()
    child = ctx.Process(target=_forked_job, args=(theirs,))
    child.start()
    got = mine.recv() if mine.poll(120) else None
    child.join(30)
    assert child.exitcode == 0 and got is not None and len(got) == 2
    for values in got:
        for g, w in zip(values, want):
            np.testing.assert_allclose(g, w, rtol=1e-15, atol=1e-15)


def test_spawned_workers_run_parallel_backwards_after_the_parent_did():
    """docs/guide/threads_memory.md, "Worker processes": after the parent ran parallel
    loops (OpenMP started), the documented way to use worker processes, `spawn`, works and
    gives exact gradients."""
    import multiprocessing

    assert _large_scaled_gradient(0) == 0.0  # the parent's own parallel backward
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        errors = pool.map(_large_scaled_gradient, range(2), chunksize=1)
    assert errors == [0.0, 0.0]


_POOL = (
    "import os, sys\n"
    "if sys.argv[1] == 'numba-first':\n"
    "    import numba\n"
    "import tapegrad, numba\n"
    "print(os.environ.get('OMP_WAIT_POLICY'), numba.config.NUMBA_NUM_THREADS,"
    " numba.get_num_threads())\n"
)


def _pool(order: str = "tapegrad-first", **env: str) -> list[str]:
    """(wait policy, threads launched, this thread's count) in a new process."""
    clean = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    out = subprocess.run(
        [sys.executable, "-c", _POOL, order],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


_CLEARED = {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "NUMBA_NUM_THREADS", *_threads.LOCAL_RANKS}


def test_the_thread_pool_is_set_for_a_shared_machine():
    """Importing tapegrad makes numba's OpenMP workers sleep between parallel regions
    (spinning ones cost a time slice per region on a busy machine: 15x NumPy instead of
    1.3x) and gives each MPI rank its share of the node's CPUs; what the user set is
    kept."""
    cpus = str(_threads.cpus())
    share = str(max(1, _threads.cpus() // 2))
    assert _pool() == ["PASSIVE", cpus, cpus]
    assert _pool(OMP_WAIT_POLICY="ACTIVE")[0] == "ACTIVE"
    assert _pool(GOMP_SPINCOUNT="10000")[0] == "None"  # the user's spin count decides
    assert _pool(MPI_LOCALNRANKS="2") == ["PASSIVE", share, share]  # MPICH's launcher
    assert _pool(OMPI_COMM_WORLD_LOCAL_SIZE="2")[1:] == [share, share]  # Open MPI's
    assert _pool(MPI_LOCALNRANKS="2", NUMBA_NUM_THREADS="1")[1:] == ["1", "1"]
    assert _pool(MPI_LOCALNRANKS="1")[1:] == [cpus, cpus]
    # numba imported (its configuration read) before tapegrad: this thread's count
    assert _pool("numba-first", MPI_LOCALNRANKS="2") == ["PASSIVE", cpus, share]


def test_threads_record_and_backpropagate_independently():
    results = {}

    def work(k):
        rng = np.random.default_rng(k)
        a = rng.standard_normal(50)
        x = tg.tensor(a, requires_grad=True)
        for _ in range(30):
            x.grad = None
            loss = tnp.sum(tnp.sin(x * (k + 1)) ** 2)
            loss.backward()
        results[k] = (a, x.grad)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, (a, g) in results.items():
        c = k + 1
        np.testing.assert_allclose(g, 2 * np.sin(c * a) * np.cos(c * a) * c, rtol=1e-12)


def test_tensor_from_another_thread_is_a_constant_unless_it_requires_grad():
    box = {}

    def make():
        box["c"] = tg.tensor([1.0, 2.0]) * 2
        box["g"] = tg.tensor([1.0, 2.0], requires_grad=True) * 2

    t = threading.Thread(target=make)
    t.start()
    t.join()
    np.testing.assert_array_equal((box["c"] + 1).numpy(), [3.0, 5.0])
    with pytest.raises(RuntimeError, match="another thread"):
        box["g"] + 1
