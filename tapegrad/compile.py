"""Capture and replay: ``step = tg.compile(fn)``, then ``step.value_and_grad(*args)``.

The first call with a new *signature* (argument shapes and dtypes, which arguments are
differentiated, the values of other arguments except Python floats) runs ``fn`` eagerly
on a private tape: that recording is the program. Later calls copy the new argument
values into the program's input slots and run its forward and backward in one compiled
call (``tapegrad.replay``), with no Python per op and no compilation per program. This
is ``jax.jit(jax.value_and_grad(f))`` for tapegrad, with torch.compile's guards.

What a program depends on is made explicit while it is captured:

* **Arguments.** Arrays and Python floats are inputs (a float is a 0-d float64 tensor
  inside ``fn``: new values replay, as in ``jax.jit``); ints, bools, strings and other
  hashable values are part of the signature.
* **Tensors from outside** (closures, globals, attributes of ``self`` or of an argument)
  are inputs too: each call finds them again by the route ``fn`` reached them
  (``tapegrad.closures``) and reads their current values. One that requires grad gets its
  gradient accumulated into ``.grad`` by ``value_and_grad`` (PyTorch-style parameters);
  ``step(*args)`` then returns a tensor, so ``step(x).backward()`` does the same.
* **Plain values from outside** (numbers, strings, NumPy arrays, containers of numbers
  in closures, globals, attributes of ``self`` or of an object passed as an argument, at
  up to ``closures.DEPTH`` levels deep (capture warns about what lies deeper) and
  through the methods fn calls on them, module attributes the code names)
  are constants of the recording, and functions it calls are what they were. Each call
  compares them with what the capture saw (arrays by bytes, functions by identity) and
  captures again when one changed, so ``k = 3.0``, ``A[:] = 0`` or ``b.X = Y`` between
  calls is never replayed with the old value. So is the length of every other list and
  tuple on the way, and a dict's keys in order: fn may iterate over them, so a layer
  appended to ``self.layers`` or a key added to a dict of tensors captures again.
  Large data compared on every call costs as much as passing it as an argument. State
  fn changes itself while captured (a counter) is a side effect that replay does not
  repeat: not guarded, warned about once. tapegrad's own objects reachable from ``fn``
  (another compiled step) are not walked, except to the function a compiled step wraps.
* **Guards.** A value Python reads during capture (``bool`` of a comparison,
  ``float()``, ``int()``, an index, ``.numpy()``) decides something the program takes for
  granted. Each read is a guard the compiled replay checks as soon as the value is
  computed (``tapegrad.replay``); when one fails, the other programs of the signature are
  tried, then the new branch is captured. ``float()`` / ``.item()`` of a tensor that
  requires grad raise instead (the gradient through a Python number is lost).
* **Draws** are constants of the program. A random generator that moved while ``fn``
  was captured is warned about once: NumPy's and Python's ``random`` global state, and
  every NumPy ``Generator`` / ``RandomState`` and ``random.Random`` reachable from ``fn``
  and its arguments. So is an iterator or generator object ``fn`` reads from outside
  (``next(it)``, ``itertools.count()``, a file), whether or not it drew from it: what
  ``next`` consumed cannot be seen without consuming more. So is a generator ``fn`` (or
  a library it calls) makes itself without a seed, however its name was imported, seen
  on the capturing thread by the entropy it takes from the operating system:
  ``default_rng()``, a bit generator, ``SeedSequence()``, ``RandomState()``,
  ``random.Random()``, draws from ``random.SystemRandom`` and ``secrets``. One made from
  a seed replays correctly and is not warned about (``RandomState(seed)`` counts as
  seeded whatever ``seed`` holds); ``os.urandom()`` and ``time.time()`` are not seen.

A compiled step called on tensors that require grad is one node of the caller's graph
(its backward replays the program; differentiated again or in forward mode, it records
``fn`` eagerly from the node's inputs, since the program's kernels are first-order);
called while another function is being captured it is inlined, as nested ``jax.jit`` is.
A signature keeps up to ``MAX_PROGRAMS`` programs (least recently used dropped first); a
step that captured more than ``RECAPTURE_WARNING`` programs warns once, saying why it
keeps capturing. ``check=True`` re-records on every call and raises when the recording
differs from the program that ran (slow, for debugging). Custom functions
(``tg.Function``) and gradient hooks cannot be captured.
"""

from __future__ import annotations

import contextlib
import dis
import functools
import math
import operator
import random
import sys
import threading
import types
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from . import closures, fused, graph, tiers, transforms
from ._jit import entry_point
from .boundary import user_line
from .engine import accumulate_grad, has_hooks, is_anomaly_enabled, raise_backward_error
from .function import Function
from .higher import inner_product, recorded_jvp, recorded_vjp, same_as_forward
from .layout import (
    E_CALLBACK_HOOK,
    E_CALLBACK_PY,
    E_GUARD,
    H_ANOMALY,
    H_ARENA,
    H_ERR_A,
    H_GEN,
    H_GRAD,
    H_NFP,
    H_NIP,
    H_NLINK,
    H_NNODES,
    H_NSHAPE,
    H_NSLOTS,
    N_FP,
    N_IP,
    N_LINK,
    N_NFP,
    N_NIN,
    N_NIP,
    N_NOUT,
    N_OP,
    N_SIG,
    OK,
    S_DTYPE,
    S_FLAGS,
    S_NDIM,
    S_NODE,
    S_SHAPE,
    S_SIZE,
    SLOT_CONST,
    SLOT_GRAD_SET,
    SLOT_LEAF,
    SLOT_RG,
)
from .pytree import flatten, is_container, structure
from .replay import backward_plan, forward_plan, replay, run_plan
from .tape import CAPTURE, Tape, enter, leave, tape_stack
from .tensors import (
    FLAG_CAPTURED,
    FLAG_DIFF,
    FLAG_FLOATARG,
    Tensor,
    active_capture,
    bind,
    capture_started,
    is_grad_enabled,
    serial,
    slot_handle,
    tensor,
)

__all__ = ["Compiled", "compile"]

MAX_PROGRAMS = 64  # programs kept per compiled step (all signatures together)
RECAPTURE_WARNING = 8  # captures after which a step warns once that it keeps capturing

_NO_PLAN = np.empty((4, 0), np.int64)  # the backward plan of a value-only replay
_NO_GUARDS = np.empty((4, 0), np.int64)
_NO_BYTES = np.empty(0, np.uint8)

# run_plan's compiled entry point (numba's dispatcher costs ~0.5 us a call to resolve
# seven arguments' types): every argument is C-contiguous and of fixed type here
_run_plan: Any = None


def _plan_call(h: np.ndarray, *args: Any) -> int:
    global _run_plan
    if _run_plan is None:
        _run_plan = entry_point(run_plan, h, *args)
    return _run_plan(h, *args)


def compile(
    fn: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False, check: bool = False
) -> Compiled:
    """Capture ``fn`` once per signature (and branch) and replay it in compiled code.

    The first call with a new signature (argument shapes and dtypes, which arguments
    are differentiated, the values of other arguments except Python floats) runs
    ``fn`` eagerly on a private tape: that recording is the program. Later calls copy
    the new argument values into the program and run its forward and backward in one
    compiled call, with no Python per op: ``jax.jit(jax.value_and_grad(f))`` for
    tapegrad, with torch.compile's guards. Values Python reads while capturing
    (``bool`` of a comparison, ``float()``, an index) are guards; when one changes,
    another program is captured for the new branch.

    Parameters
    ----------
    fn : callable
        Function of arrays / tensors (and Python constants) returning a scalar loss, or
        ``(loss, aux)`` with ``has_aux``. Tensors it reads from outside (closures,
        globals, attributes) are inputs of the program, read on every call.
    argnums : int or sequence of int, optional
        Argument(s) to differentiate (array-like or float arguments; default 0).
    has_aux : bool, optional
        ``fn`` returns ``(loss, aux)``; aux tensors come back as NumPy arrays.
    check : bool, optional
        Re-record on every call and raise if the computation differs from the program
        that ran (control flow on values the guards do not see); slow, for debugging.

    Returns
    -------
    Compiled
        ``step(*args)`` gives the loss, ``step.value_and_grad(*args)`` gives
        ``(loss, grads)``; ``step.stats`` counts captures (recordings kept as
        programs), replays (calls that ran a program: every call, the capturing one
        included), guard failures, checks, and the programs kept; ``step.graph(*args)``
        shows the program.

    Raises
    ------
    TypeError
        ``argnums`` is neither an int nor a sequence of ints. When the step is called:
        ``fn`` does not return a scalar tensor (or a pair with ``has_aux``), its loss
        does not depend on the arguments through recorded ops, it calls a custom
        :class:`Function` or registers gradient hooks (which cannot be captured), or
        an argument to differentiate is not an array or a float, or holds integers.
    RuntimeError
        When the step is called: ``fn`` modifies a tensor from outside in place,
        stores a tensor it computed where it can be found after it returns, or calls
        ``backward()`` (side effects that replays would not repeat); ``fn`` gives
        different results for the same values; with ``check=True``, the computation
        differs from the program that ran.
    NotImplementedError
        ``step.value_and_grad`` is given a tensor that requires grad (it returns
        NumPy gradients; call ``step(*args)`` to make the step one node of the graph).

    See Also
    --------
    value_and_grad : The same result, recorded afresh on every call.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> def loss(w, x, y):
    ...     return tnp.sum((x @ w - y) ** 2)
    >>> step = tg.compile(loss)
    >>> x, y = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), np.array([1.0, 2.0, 3.0])
    >>> step.value_and_grad(np.zeros(2), x, y)
    (14.0, array([-44., -56.]))
    >>> step.value_and_grad(np.ones(2), x, y)  # a replay: no Python per op
    (93.0, array([114., 144.]))
    >>> step.stats
    {'captures': 1, 'replays': 2, 'guard_failures': 0, 'checks': 0, 'programs': 1}
    """
    return Compiled(fn, argnums, has_aux, check)


# --- capture -------------------------------------------------------------------------------


class _Input:
    """A tensor the function read from outside: an input slot of the program."""

    __slots__ = ("array", "dtype", "paths", "requires_grad", "rg", "shape", "slot", "tensor")

    def __init__(self, t: Tensor, array: np.ndarray, slot: int, rg: bool) -> None:
        self.tensor = t  # as found while capturing (the fallback when no path is known)
        self.array = array  # the program's copy: each call writes the current values here
        self.slot = slot
        self.rg = rg  # a leaf of the program (its gradient goes to .grad)
        self.requires_grad = t.requires_grad
        self.shape = t.shape
        self.dtype = t.dtype
        self.paths: list[tuple] = []  # routes to it from fn and the arguments


class _Capture:
    """What a capture learns besides the recording: inputs from outside and guards.

    Installed as ``tape.capture`` while ``fn`` runs; the tensor handle calls
    :meth:`foreign_input` when it binds a foreign tensor, :meth:`read` for every
    Python read of a value and :meth:`check_inplace` before an in-place op."""

    def __init__(self, tape: Tape) -> None:
        self.tape = tape
        self.inputs: list[_Input] = []
        self.input_slots: set[int] = set()
        self.guards: dict[int, tuple[np.ndarray, str]] = {}

    def foreign_input(self, tape: Tape, t: Tensor) -> int:
        value = np.array(t._peek(), order="C", copy=True)
        rg = t.requires_grad and tape.grad_enabled
        s = tape.import_array(value, SLOT_RG | SLOT_LEAF if rg else SLOT_CONST)
        self.inputs.append(_Input(t, value, s, rg))
        self.input_slots.add(s)
        return s

    def fixed(self, s: int) -> bool:
        """A constant of the program: the same in every replay."""
        tape = self.tape
        return (
            tape.slot_field(S_NODE, s) < 0
            and bool(tape.slot_field(S_FLAGS, s) & SLOT_CONST)
            and s not in self.input_slots
        )

    def _above(self, home: Tape) -> bool:
        """``home`` is a tape entered on top of the capture (a transform inside it)."""
        stack = tape_stack()
        mine = next(i for i, x in enumerate(stack) if x is self.tape)
        return any(x is home for x in stack[mine + 1 :])

    def outside(self, t: Tensor) -> bool:
        """``t`` comes from outside the function being captured."""
        tape = self.tape
        if t._data is not None:
            return getattr(t, "_born", 0) < tape.born0
        return t._tape is not tape and not self._above(t._tape)

    def check_inplace(self, t: Tensor) -> None:
        """An in-place op while capturing: on a tensor from outside it is a side effect
        that the replays would not repeat (the capturing call would have done it once
        more than the others)."""
        if self.outside(t):
            raise RuntimeError(
                f"tapegrad.compile: the function modifies a tensor from outside it in place "
                f"(shape {t.shape}, {t.dtype}); a captured program does not repeat side "
                "effects. Return the new value (has_aux=True) and update it outside, or "
                "call the function without tg.compile"
            )

    def read(self, t: Tensor) -> np.ndarray:
        """Python reads ``t``'s values while capturing: the program must replay only
        when they are the same, so the read becomes a guard (a tensor from outside
        becomes an input first)."""
        tape = self.tape
        bound = t._tape is tape and (t._data is None or t._epoch == tape.epoch)
        if not bound:
            if t._data is not None and getattr(t, "_born", 0) >= tape.born0:
                return t._data  # made while capturing: a constant of the program
            if t._data is None and t._tape is not tape and self._above(t._tape):
                # a transform's tape above the capture: its values come from reads
                # of the program that are guarded already
                return t._tape.read(t._slot)
        s = t._slot if bound else bind(tape, t)
        v = tape.read(s)
        if s not in self.guards and not self.fixed(s):
            self.guards[s] = (np.frombuffer(v.tobytes(), np.uint8).copy(), user_line(2))
        return v

    def guard_arrays(self) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """The guards as ``replay`` takes them: ``[node, slot, offset, length]`` sorted
        by the node whose forward computes the value (-1: inputs; values that no node
        of their own computes, like a detached alias, after the last node)."""
        tape = self.tape
        last = tape.h[H_NNODES] - 1
        rows, blobs, where = [], [], []
        off = 0
        for s, (blob, line) in self.guards.items():
            node = tape.slot_field(S_NODE, s)
            if node < 0 and s not in self.input_slots:
                node = last
            rows.append((node, s, off, blob.size))
            blobs.append(blob)
            where.append(line)
            off += blob.size
        if not rows:
            return _NO_GUARDS, _NO_BYTES, []
        order = sorted(range(len(rows)), key=lambda i: rows[i][0])
        G = np.ascontiguousarray(np.array([rows[i] for i in order], np.int64).T)
        expect = np.concatenate(blobs) if blobs else _NO_BYTES
        return G, expect, [where[i] for i in order]


class Program:
    """One captured recording: a private tape, where its inputs and outputs are, and
    the guards under which it holds."""

    def __init__(
        self,
        tape: Tape,
        inputs: list[np.ndarray],
        leaf_slots: list[int],
        root: int,
        aux: Any,
        capture: _Capture,
    ) -> None:
        self.tape = tape
        self.inputs = inputs  # arrays the argument slots point at: replay writes into them
        self.leaf_slots = leaf_slots  # of the differentiated arguments' arrays, in order
        self.root = root
        self.aux = aux  # (("slot", id) or ("value", v) per aux leaf, rebuild)
        self.n_nodes = tape.h[H_NNODES]
        self.outside = capture.inputs  # tensors read from outside (closures...)
        self.input_slots = capture.input_slots
        self.guards, self.expect, self.guard_lines = capture.guard_arrays()
        self.failed = ""  # why the last call did not replay (a guard, a changed closure)
        # plain values fn can reach from outside (numbers, strings, NumPy arrays): each a
        # constant of the recording, so each is checked before a replay (_plain_hold)
        self.plain: list[tuple[tuple, Any, Any]] = []
        self.plain_checks: tuple = ((), [])  # (self.plain, its checks: _plain_checks)
        # Plans (``tapegrad.replay``): the forward kernels after the first successful
        # replay, the live backward nodes after the first complete backward. Both are
        # dropped on any failure but a guard's, and the general path runs (and plans)
        # again.
        self.fwd_plan: np.ndarray | None = None
        self.bwd_plan: np.ndarray | None = None
        # whether each plan went through tapegrad.fused with its executors compiled (on
        # a cold cache they come later, from the background compiler: fuse_plans)
        self.fused = [False, False]
        self._views: tuple = ()  # (layout key, root value view, gradient views)
        N = tape.arrays["node"][:, : self.n_nodes]
        tiers.expect_loop(N[N_OP], N[N_SIG])  # (a cold cache: its kernels go first)

    def run(
        self, arrays: list[np.ndarray], outside: list[np.ndarray], want_grad: bool
    ) -> tuple[float, list, list, Any] | None:
        """Replay with these argument and outside values: ``(loss, argument grads,
        outside grads, aux)``, or None when a guard does not hold (``self.failed``)."""
        for dst, src in zip(self.inputs, arrays):
            np.copyto(dst, src, casting="same_kind")
        if outside:
            for inp, src in zip(self.outside, outside):
                np.copyto(inp.array, src, casting="same_kind")
        tape = self.tape
        h = tape.header
        # anomaly mode checks every gradient: the general path, not a plan
        anomaly = is_anomaly_enabled()
        h[H_ANOMALY] = int(anomaly)
        if anomaly:
            self.bwd_plan = None
        G, expect = self.guards, self.expect
        while True:
            fwd, bwd = self.fwd_plan, self.bwd_plan
            if fwd is not None and (bwd is not None or not want_grad):
                plan = bwd if want_grad else _NO_PLAN
                st = _plan_call(h, fwd, plan, self.root, want_grad, G, expect)
            else:
                st = replay(h, self.n_nodes, self.root, want_grad, G, expect)
            if st == OK:
                if fwd is None:
                    self.fwd_plan = forward_plan(h, self.n_nodes)
                    self.fused[0] = False
                if want_grad and bwd is None and not anomaly:
                    self.bwd_plan = backward_plan(h, self.root)
                    self.fused[1] = False
                self.fuse_plans()
                tiers.upgrade()  # (full kernels a background compiler just finished)
                break
            if st == E_GUARD:
                self.failed = f"a value read in Python at {self.guard_lines[h[H_ERR_A]]} changed"
                return None
            self.fwd_plan = self.bwd_plan = None
            if st in (E_CALLBACK_PY, E_CALLBACK_HOOK):
                raise RuntimeError("tapegrad.compile: a captured program cannot call Python")
            raise_backward_error(tape, st)
            tape.fix(st)  # a backward kernel compiled on first replay, a bigger grad arena
        value_view, grad_views = self._outputs()
        value = float(value_view[0])
        grads, outside_grads = [], []
        if want_grad:
            grads = [None if v is None else v.copy() for v in grad_views]
            n = len(self.leaf_slots)
            if len(grads) > n:
                grads, outside_grads = grads[:n], grads[n:]
        aux = None
        if self.aux is not None:
            slots, rebuild = self.aux
            aux = rebuild([tape.read(v) if kind == "slot" else v for kind, v in slots])
        return value, grads, outside_grads, aux

    def _outputs(self) -> tuple[np.ndarray, list[np.ndarray | None]]:
        """Views of the loss value and the gradient buffers of the leaves (arguments,
        then outside tensors that require grad), rebuilt only when the layout changed (a
        new pruning or a moved arena): building a view costs microseconds, a copy of a
        small one a fraction of that."""
        h = self.tape.h
        key = (h[H_GEN], h[H_GRAD], h[H_ARENA])
        if not self._views or self._views[0] != key:
            tape = self.tape
            value = tape.view(self.root).reshape(-1)
            slots = self.leaf_slots + [i.slot for i in self.outside if i.rg]
            grads = [tape.grad_view(s) for s in slots]
            self._views = (key, value, grads)
        return self._views[1], self._views[2]

    def fuse_plans(self) -> None:
        """Fuse the runs of scalar nodes of each plan not fused yet, once the executors
        are compiled (``tapegrad.fused``; a cheap test while they are not). The backward
        plan keeps the gradient offsets and fresh bits of the backward that made it,
        whenever it is fused: plans run on exactly those."""
        if fused.executors() is None:
            return
        if self.fwd_plan is not None and not self.fused[0]:
            self.fwd_plan = fused.fuse_forward(self.tape, self.fwd_plan)
            self.fused[0] = True
        if self.bwd_plan is not None and not self.fused[1]:
            self.bwd_plan = fused.fuse_backward(self.tape, self.bwd_plan)
            self.fused[1] = True

    def structure(self) -> dict[str, np.ndarray]:
        """Everything that defines the computation, for ``check=True``."""
        t = self.tape
        h = t.h
        n, ns = h[H_NNODES], h[H_NSLOTS]
        # the recorded structure; addresses, gradient offsets, scheduler flags and
        # versions change between recordings and replays, inputs' values between calls
        slots = t.arrays["slot"][[S_DTYPE, S_NDIM, S_SIZE, S_SHAPE, S_FLAGS, S_NODE], :ns]
        slots[4] &= ~SLOT_GRAD_SET  # the scheduler's scratch bit
        consts = [
            t.read(s).tobytes()
            for s in range(ns)
            if t.arrays["slot"][S_FLAGS, s] & SLOT_CONST and s not in self.input_slots
        ]
        return {
            "nodes": t.arrays["node"][
                [N_OP, N_SIG, N_LINK, N_NIN, N_NOUT, N_IP, N_NIP, N_FP, N_NFP], :n
            ],
            "links": t.arrays["link"][0, : h[H_NLINK]].copy(),
            "iparams": t.arrays["ip"][0, : h[H_NIP]].copy(),
            "fparams": t.arrays["fp"][0, : h[H_NFP]].copy(),
            "shapes": t.arrays["shape"][0, : h[H_NSHAPE]].copy(),
            "slots": slots,
            "constants": np.frombuffer(b"".join(consts), np.uint8),
        }


def _is_arraylike(v: Any) -> bool:
    return isinstance(v, Tensor | np.ndarray | list | np.generic) or (
        isinstance(v, float | int) and not isinstance(v, bool)
    )


def _random_state() -> tuple:
    # the legacy global generator: the one np.random.rand & co. draw from
    _, key, pos, has_gauss, gauss = np.random.get_state()  # noqa: NPY002
    return key.tobytes(), pos, has_gauss, gauss


# Random numbers drawn while capturing are constants of the program: a replay gives the
# capture's draw where eager code draws anew. A capture cannot keep a generator out of
# fn, but it can see that one moved: the state of every generator fn can reach (and of
# the global ones) is compared before and after fn runs, and a change is warned about
# once. Python's ``random`` is watched as NumPy's generators are, with the same answer:
# a warning, not a refusal, since a function that seeds and then draws (the same numbers
# on every call) replays correctly and a refusal would break it.
def _generator_state(g: Any) -> Any:
    """The state of a random generator: NumPy's (``Generator``, ``RandomState``) or
    Python's (``random.Random``). A ``random.SystemRandom`` has no state to read: a new
    object each time, so that reaching one counts as drawing from it."""
    if isinstance(g, random.Random):
        try:
            return g.getstate()
        except NotImplementedError:  # (SystemRandom: the operating system's entropy)
            return object()
    bit = getattr(g, "bit_generator", None) or getattr(g, "_bit_generator", None)
    return repr(bit.state) if bit is not None else None


def _python_random_sources(
    generators: list[tuple[tuple, Any]], changed: list[bool], module_changed: bool
) -> list[str]:
    """What Python random numbers were drawn from while capturing, as the user names it:
    ``Python's random module`` (``random.random()``, ``random.gauss``: the module's hidden
    instance, however fn reached it), ``random.Random r`` for an instance of its own."""
    out = ["Python's random module"] if module_changed else []
    for (path, g), moved in zip(generators, changed):
        if moved and isinstance(g, random.Random) and g is not getattr(random, "_inst", None):
            kind = type(g)
            what = f"{kind.__module__}.{kind.__qualname__} {closures.describe(path)}"
            if isinstance(g, random.SystemRandom):
                what += " (reached: draws from it cannot be seen)"
            out.append(what)
    return out


# A generator fn makes itself is reached by no walk, so its state is never compared; made
# without a seed, it draws anew on every eager call and the capture's numbers on every
# replay. What every such generator does is ask the operating system for entropy: NumPy's
# SeedSequence() through ``secrets.randbits`` (default_rng(), every bit generator,
# RandomState()), Python's through ``random.Random.seed(None)``, random.SystemRandom and
# ``secrets`` through ``random._urandom``. While fn is captured those three are wrapped
# for every thread (each wrapper calls the original), and a call on the capturing thread
# is noted with the line that made it. Public names (np.random.default_rng, random.Random)
# are never replaced: a class replaced by a wrapper fails isinstance on other threads, and
# a name bound at import (from numpy.random import default_rng) would miss the wrapper.
# The line is the innermost Python frame outside ``random`` and ``secrets``; one in the
# standard library (tempfile's names, copy.deepcopy of a seeded generator), NumPy
# (unpickling), numba or tapegrad is not fn's draw. Some seeded calls also take fresh
# entropy before their state is overwritten, and are told apart by the call fn makes:
# ``RandomState(seed)`` (legacy seeding), ``bit_generator.jumped()``, ``pickle.loads``.
_ENTROPY_LOCK = threading.Lock()
_entropy_users = 0  # captures running, all threads together: the wrappers are in place
_entropy_wrapped: list[tuple[Any, str, Any, Any]] = []  # (owner, name, original, wrapper)
_wrappers: dict[tuple[int, str], tuple[Any, Callable]] = {}  # made once per original
_capturing = threading.local()  # .made: the notes of the capture running on this thread
_NOT_FN = frozenset({"tapegrad", "numpy", "numba", "llvmlite", *sys.stdlib_module_names})
_ENTROPY = " (the operating system's entropy: random.SystemRandom, secrets)"
# (owner, attribute, kind) of what a generator made without a seed calls
_ENTROPY_SOURCES: list[tuple[Any, str, str]] = [
    (random, "_urandom", "os"),
    (random.Random, "seed", "random"),
    (np.random.bit_generator, "randbits", "numpy"),
]


def _watched(original: Callable, kind: str) -> Callable:
    if kind == "random":  # a method: random.Random.seed(self, a=None, version=2)

        @functools.wraps(original)
        def seed(self: Any, a: Any = None, *args: Any, **kwargs: Any) -> Any:
            if a is None:
                _note_unseeded(kind)
            return original(self, a, *args, **kwargs)

        return seed

    @functools.wraps(original)
    def entropy(*args: Any, **kwargs: Any) -> Any:
        _note_unseeded(kind)
        return original(*args, **kwargs)

    return entropy


def _note_unseeded(kind: str) -> None:
    made = getattr(_capturing, "made", None)
    if made is None:  # no capture on this thread
        return
    frame = sys._getframe(2)  # (the wrapper's caller)
    while frame is not None and frame.f_globals.get("__name__") in ("random", "secrets"):
        frame = frame.f_back
    if frame is None or (frame.f_globals.get("__name__") or "").partition(".")[0] in _NOT_FN:
        return
    called, nargs = _calling(frame)
    if called in ("jumped", "load", "loads") or (called == "RandomState" and nargs != 0):
        return  # (unpickled: a saved state)
    made.append((kind, called, f"{frame.f_code.co_filename}:{frame.f_lineno}"))


def _calling(frame: types.FrameType) -> tuple[str | None, int | None]:
    """The name a frame is calling and how many arguments it passes, read from the call
    it stands at (``np.random.RandomState(4)``: ``("RandomState", 1)``); None for what
    the bytecode does not say (Python 3.10, ``f(*args)``, ``f()()``)."""
    if not hasattr(frame.f_code, "co_positions"):
        return None, None
    # (f_lasti is the call, or its last inline cache when it called Python code)
    before = [i for i in dis.get_instructions(frame.f_code) if i.offset <= frame.f_lasti]
    if not before or not before[-1].opname.startswith("CALL"):
        return None, None
    call = before.pop()
    nargs = call.arg if call.opname in ("CALL", "CALL_KW") else None
    # the callee is the last name loaded where the call's source starts (np.random.X)
    start = (call.positions.lineno, call.positions.col_offset)
    called = [
        i.argval
        for i in before
        if i.opname.startswith("LOAD_") and (i.positions.lineno, i.positions.col_offset) == start
    ]
    return (called[-1] if called else None), nargs


@contextlib.contextmanager
def _unseeded_generators() -> Iterator[list[tuple[str, str | None, str]]]:
    """The generators this thread makes without a seed meanwhile: (kind, the name
    called, ``file:line``) each."""
    global _entropy_users
    with _ENTROPY_LOCK:
        if _entropy_users == 0:
            for owner, name, kind in _ENTROPY_SOURCES:
                original = vars(owner).get(name)
                if original is None:  # (not there in this version: what it saw is missed)
                    continue
                cached = _wrappers.get((id(owner), name))
                if cached is None or cached[0] is not original:
                    cached = _wrappers[id(owner), name] = (original, _watched(original, kind))
                setattr(owner, name, cached[1])
                _entropy_wrapped.append((owner, name, original, cached[1]))
        _entropy_users += 1
    outer = getattr(_capturing, "made", None)
    _capturing.made = made = []
    try:
        yield made
    finally:
        _capturing.made = outer
        with _ENTROPY_LOCK:
            _entropy_users -= 1
            while _entropy_users == 0 and _entropy_wrapped:
                owner, name, original, wrapper = _entropy_wrapped.pop()
                if vars(owner).get(name) is wrapper:  # (else replaced meanwhile: theirs)
                    setattr(owner, name, original)


class _StepNode(Function):
    """A compiled step inside a recorded graph: one node whose forward is the replayed
    loss and whose backward replays the program's backward (see ``Compiled.__call__``).
    Differentiated again (``create_graph``, ``tg.hessian``, ``tg.hvp``) or in forward
    mode (``tg.jacfwd``), it records ``fn`` eagerly from the node's inputs on the graph's
    tape (``vjp_graph``, ``jvp_graph``): the program's kernels are first-order only."""

    @staticmethod
    def forward(ctx: Any, call: tuple, *values: Any) -> np.ndarray:
        ctx.call = call
        return call[0]

    @staticmethod
    def backward(ctx: Any, g: np.ndarray) -> tuple:
        _, step, program, arrays, outside, grad_at = ctx.call[:6]
        with step._lock:
            result = program.run(arrays, outside, True)
        if result is None:  # the same values as the forward: guards cannot fail
            raise RuntimeError(f"tapegrad.compile: replay failed its guards ({program.failed})")
        _, grads, outside_grads, _ = result
        scale = g.reshape(())
        found = [None if v is None else v * scale for v in grads + outside_grads]
        out: list[Any] = [None] * (1 + len(grad_at))
        for j, where in enumerate(grad_at):
            out[1 + j] = found[where]
        return tuple(out)

    @staticmethod
    def _rerun(ctx: Any) -> tuple[Callable, list, str]:
        """``fn`` as a function of the program's inputs (flat, each a value as the call
        gave it), those values, and how errors name the step. Raises when what ``fn``
        reads from outside changed since the call: the recording would be another
        function than the one whose value the graph holds."""
        _, step, program, arrays, values, _, call, args, outside = ctx.call
        where = f"tg.compile({getattr(step.fn, '__name__', 'fn')})"
        with step._lock:
            same = not program.plain or _plain_hold(step.reach, program, args)
            now = step._outside_now(program, args) if same and program.outside else []
        same = same and now is not None and all(a is b for a, b in zip(now, outside))
        if not (same and all(np.array_equal(t._value(), v) for t, v in zip(outside, values))):
            raise RuntimeError(
                f"{where}: something the function reads from outside (a tensor, a number, "
                "an array) was replaced or modified between the call and its second "
                "derivative (or forward-mode derivative), which records the function again. "
                "Differentiate before changing it"
            )
        flat = [float(a) if k in call.scalar else a for k, a in enumerate(arrays)]

        def again(*inputs: Any) -> Any:
            out = step.fn(*_arguments(call.entries, inputs))
            return out[0] if step.has_aux else out

        return again, flat, where

    @staticmethod
    def vjp_graph(ctx: Any, tape: Tape, k: int, needs: list, gs: list) -> list:
        """Recorded gradients of the node's inputs: ``fn`` recorded again on ``tape``
        from the differentiated arguments' tensors; the tensors it reads from outside
        that require grad are found where it reads them."""
        loss, _, program, _, _, grad_at, call, _, outside = ctx.call
        again, flat, where = _StepNode._rerun(ctx)
        ins, _ = tape.node_links(k)
        n_diff = len(call.diff_inputs)
        rg_outside = [t for t, i in zip(outside, program.outside) if i.rg]
        nums, others, at, others_at = [], [], [], []
        for j, w in enumerate(grad_at):
            if not needs[j]:
                continue
            if w < n_diff:
                kk = call.diff_inputs[w]
                flat[kk] = slot_handle(tape, ins[j])
                nums.append(kk)
                at.append(j)
            else:
                others.append(rg_outside[w - n_diff])
                others_at.append(j)
        out, grads = recorded_vjp(again, flat, nums, others, gs[0], where)
        same_as_forward(np.asarray(out._value()).reshape(loss.shape), loss, where)
        found: list[Any] = [None] * len(ins)
        for j, g in zip(at + others_at, grads):
            found[j] = g
        return found

    @staticmethod
    def jvp_graph(ctx: Any, tape: Tape, k: int, tangents: list) -> list:
        """Forward mode: the loss's tangent, ``fn`` recorded again (on the graph's tape
        when forward mode records)."""
        loss, _, _, _, _, grad_at, call, _, _ = ctx.call
        again, flat, where = _StepNode._rerun(ctx)
        ins, _ = tape.node_links(k)
        graph = is_grad_enabled()
        n_diff = len(call.diff_inputs)
        nums, ts = [], []
        for j, w in enumerate(grad_at):
            if w >= n_diff:
                if tangents[j] is not None:  # (a leaf read from outside: no tangent flows)
                    raise NotImplementedError(
                        f"forward mode through {where}: a tangent on a tensor the function "
                        "reads from outside; pass that tensor as an argument"
                    )
                continue
            kk = call.diff_inputs[w]
            if graph:
                flat[kk] = slot_handle(tape, ins[j])
            if tangents[j] is not None:
                nums.append(kk)
                ts.append(tangents[j])
        if not nums:
            return [None]
        out, tangent = recorded_jvp(again, flat, nums, ts)
        value = out._value() if isinstance(out, Tensor) else np.asarray(out)
        same_as_forward(value.reshape(loss.shape), loss, where)
        return [tangent]


def _arguments(entries: list[tuple], inputs: Sequence[Any]) -> list[Any]:
    """The arguments of a call rebuilt from its entries (``_Call``) with ``inputs`` for
    the program's inputs."""

    def rebuild(entry: tuple) -> Any:
        if entry[0] == "const":
            return entry[1]
        if entry[0] == "input":
            return inputs[entry[1]]
        return entry[1]([rebuild(e) for e in entry[2]])

    return [rebuild(e) for e in entries]


class _Call:
    """One call's arguments, split: the signature key, the arrays that are program
    inputs, and how to rebuild the arguments (``entries``, per argument: ``("const",
    value)``, ``("input", k)`` or ``("tree", rebuild, entries)``)."""

    __slots__ = ("arrays", "diff_inputs", "entries", "key", "scalar")

    def __init__(self) -> None:
        self.key: list = []
        self.arrays: list[np.ndarray] = []
        self.entries: list[tuple] = []
        self.diff_inputs: list[int] = []  # indices into arrays, differentiated, in order
        self.scalar: set[int] = set()  # inputs given as Python numbers (scalar gradients)


class Compiled:
    """A function captured once per signature (and branch) and replayed in compiled
    code; see :func:`compile`."""

    def __init__(
        self, fn: Callable, argnums: int | Sequence[int], has_aux: bool, check: bool
    ) -> None:
        self.fn = fn
        # where the tensors and values fn reads from outside are searched from: fn, or
        # the user's function a tapegrad wrapper around it calls (tapegrad.integrate)
        self.reach: Callable = fn
        self.single = isinstance(argnums, int)
        self.argnums = (argnums,) if self.single else tuple(argnums)
        self.has_aux = has_aux
        self.check = check
        self.programs: dict[tuple, list[Program]] = {}  # by signature, most recent first
        self._used: dict[tuple, int] = {}  # signature -> when it was last called
        self._clock = 0
        self._stats = {"captures": 0, "replays": 0, "guard_failures": 0, "checks": 0}
        self._diffs: dict[int, frozenset[int]] = {}
        self._warned: set[str] = set()
        self._hvp: Compiled | None = None  # step.hvp's program (see hvp)
        # one call at a time: a program's tape holds one call's values (threads wait)
        self._lock = threading.RLock()
        functools.update_wrapper(self, fn)

    def graph(self, *args: Any) -> str:
        """The captured program that replays for ``args`` (capturing it if needed): its
        nodes as ``tg.print_graph`` shows them, inputs first, then its guards (the
        values Python read while capturing, which must be equal for it to replay)."""
        nargs = len(args)
        with self._lock:
            _, program, _, _, _ = self._run(args, False, self._diff(nargs))
        return "\n".join(graph.program_lines(program.tape, program.root, program.guard_lines))

    @property
    def lock(self) -> threading.RLock:
        """Held while a call replays (a program's tape holds one call's values)."""
        return self._lock

    def run_program(self, args: tuple, want_grad: bool) -> tuple[tuple, Program, list[Tensor]]:
        """Replay for ``args``, capturing first if needed (hold :attr:`lock`): ``((loss,
        argument grads, outside grads, aux), the program that ran, the tensors it read
        from outside)``. For code that then drives the program's plans itself
        (``tapegrad.integrate`` runs them inside its compiled solver loops)."""
        result, program, _, outside, _ = self._run(args, want_grad, self._diff(len(args)))
        return result, program, list(outside)

    def current_reads(self, program: Program, args: tuple = ()) -> list[Tensor] | None:
        """The tensors ``program`` would read from outside now, or None when a plain value
        it took as a constant changed or one of those tensors is gone (hold :attr:`lock`;
        for code that reuses a program without replaying it, ``tapegrad.integrate``).
        ``args``: the call's arguments, where the function found some of them."""
        if program.plain and not _plain_hold(self.reach, program, args):
            return None
        return self._outside_now(program, args) if program.outside else []

    @property
    def stats(self) -> dict[str, int]:
        """Counts: captures, replays, guard failures, checks, and programs kept."""
        programs = sum(len(c) for c in self.programs.values())
        return {**self._stats, "programs": programs}

    def _warn_once(self, what: str, message: str) -> None:
        if what not in self._warned:
            self._warned.add(what)
            warnings.warn(message, RuntimeWarning, stacklevel=4)

    # --- signature -------------------------------------------------------------------
    def _diff(self, nargs: int) -> frozenset[int]:
        """The positions differentiated in a call with ``nargs`` arguments."""
        diff = self._diffs.get(nargs)
        if diff is None:
            diff = self._diffs[nargs] = (
                frozenset(a % nargs for a in self.argnums) if nargs else frozenset()
            )
        return diff

    def _leaf(self, call: _Call, a: Any, i: int, diff: bool) -> tuple:
        """One argument (or pytree leaf): its key, and an entry (an input or a constant)."""
        kind = type(a)
        if kind is np.ndarray and a.dtype.kind == "f":  # the common case, checked fast
            arr = a
        elif kind is float:  # a value, as in jax.jit: new values replay
            arr = np.array(a)
            call.scalar.add(len(call.arrays))
        elif kind is int and not diff:
            call.key.append((i, "const", "int", a))
            return ("const", a)
        elif diff or isinstance(a, Tensor | np.ndarray | np.generic):
            if not _is_arraylike(a):
                raise TypeError(
                    f"compile: argument {i} to differentiate must be an array or a number "
                    f"(or a list / tuple / dict of them), got {type(a).__name__}"
                )
            arr = np.asarray(a._value() if isinstance(a, Tensor) else a)
            if (arr.dtype.kind in "iu" and diff) or arr.dtype.kind not in "fiub":
                raise TypeError(f"compile: cannot differentiate argument {i} of dtype {arr.dtype}")
            if diff and arr.dtype.kind != "f":
                arr = arr.astype(np.float64)
            if isinstance(a, int | float):
                call.scalar.add(len(call.arrays))
        else:
            try:
                hash(a)
            except TypeError:
                raise TypeError(
                    f"compile: argument {i} ({type(a).__name__}) is neither an array, a "
                    "list / tuple / dict, nor a hashable constant"
                ) from None
            call.key.append((i, "const", type(a).__name__, a))
            return ("const", a)
        k = len(call.arrays)
        call.key.append((i, "array", arr.shape, arr.dtype, diff))
        call.arrays.append(arr)
        if diff:
            call.diff_inputs.append(k)
        return ("input", k)

    def _split(self, args: tuple, diff: frozenset[int]) -> _Call:
        call = _Call()
        key, arrays, entries = call.key, call.arrays, call.entries
        for i, a in enumerate(args):
            if type(a) is np.ndarray and a.dtype.kind == "f":  # the common case, inline
                k = len(arrays)
                d = i in diff
                key.append((i, "array", a.shape, a.dtype, d))
                arrays.append(a)
                entries.append(("input", k))
                if d:
                    call.diff_inputs.append(k)
            elif is_container(a):
                leaves, rebuild = flatten(a)
                call.key.append((i, "tree", structure(a)))
                parts = [self._leaf(call, v, i, i in diff) for v in leaves]
                call.entries.append(("tree", rebuild, parts))
            else:
                call.entries.append(self._leaf(call, a, i, i in diff))
        call.key = tuple(call.key)
        return call

    def _new_signature(self, key: tuple) -> str:
        """Why a signature is new: how it differs from the last one seen."""
        if not self._used:
            return "the first call"
        last = max(self._used, key=self._used.__getitem__)
        for a, b in zip(last, key):  # entries: (argument, kind, ...) per array or value
            if a != b:
                return f"argument {b[0]} changed: {a[2:]} -> {b[2:]}"
        return f"{len(key)} values in the arguments instead of {len(last)}"

    # --- capture ----------------------------------------------------------------------
    def _capture(self, args: tuple, call: _Call) -> Program:
        """Run ``fn`` eagerly on a fresh private tape and keep the recording."""
        generators = closures.find(self.reach, args, closures.is_random_generator)
        generators_before = [_generator_state(g) for _, g in generators]
        python_random_before = random.getstate()
        iterators: list[tuple[tuple, Any]] = []  # reached from outside (_plain_values)
        tape = Tape()
        tape.pinned = True  # never rewound: the recording is the program
        cap = _Capture(tape)
        tape.capture = cap
        enter(CAPTURE, grad_enabled=True, born0=serial(), tape=tape)
        capture_started(1)
        random_before = _random_state()
        diff = set(call.diff_inputs)
        try:
            inputs = []
            for k, arr in enumerate(call.arrays):
                t = tensor(arr, requires_grad=k in diff)
                bind(tape, t)
                cap.input_slots.add(t._slot)
                t._flags |= FLAG_CAPTURED | (FLAG_DIFF if k in diff else 0)
                t._flags |= FLAG_FLOATARG if k in call.scalar else 0
                inputs.append(t)
            # the arrays the input slots point at (fn may replace an argument in place)
            arrays = [t._data for t in inputs]

            # before fn runs: what it was captured with
            plain = _plain_values(self.reach, args, call, iterators)
            with _unseeded_generators() as made:
                out = self.fn(*_arguments(call.entries, inputs))
            aux = None
            if self.has_aux:
                if not (isinstance(out, tuple) and len(out) == 2):
                    raise TypeError("compile: has_aux=True needs fn to return (loss, aux)")
                out, aux = out
            if not isinstance(out, Tensor) or out.size != 1:
                raise TypeError(
                    "compile: fn must return a scalar tensor (or (loss, aux) with has_aux=True)"
                )
            if out._tape is not tape:
                raise TypeError(
                    "compile: the loss does not depend on the arguments through recorded ops"
                )
            if tape.custom:
                raise TypeError(
                    "compile: custom functions (tg.Function) cannot be captured: "
                    "their Python forward would not run during replay"
                )
            if tape.hooks or any(has_hooks(t) for t in inputs):
                raise TypeError("compile: gradient hooks cannot be captured")
            aux_info = None
            if aux is not None:
                items, rebuild_aux = flatten(aux)
                # a tensor of the program is read from its slot on every replay; any
                # other value (a Python int, a constant) is kept as it is: tagged, so
                # that an int is never taken for a slot id
                # a tensor read from outside is an input of the program: its slot too
                found = {id(i.tensor): i.slot for i in cap.inputs}
                slots = [
                    ("slot", v._slot)
                    if isinstance(v, Tensor) and v._tape is tape
                    else ("slot", found[id(v)])
                    if isinstance(v, Tensor) and id(v) in found
                    else ("value", v.numpy() if isinstance(v, Tensor) else v)
                    for v in items
                ]
                aux_info = (slots, rebuild_aux)
            leaf_slots = [inputs[k]._slot for k in call.diff_inputs]
            program = Program(tape, arrays, leaf_slots, out._slot, aux_info, cap)
        finally:
            for t in inputs:
                t._flags &= ~(FLAG_CAPTURED | FLAG_DIFF | FLAG_FLOATARG)
            capture_started(-1)
            tape.capture = None
            leave(tape, keep=True)
        leaked = closures.find(
            self.reach,
            args,
            lambda o: isinstance(o, Tensor) and o._data is None and o._tape is tape,
        )
        if leaked:
            raise RuntimeError(
                "tapegrad.compile: the function stored a tensor it computed where it can be "
                f"found after it returns ({closures.describe(leaked[0][0])}); a captured "
                "program does not repeat side effects. Return it (has_aux=True) instead"
            )
        name = getattr(self.fn, "__name__", "fn")
        changed = [_generator_state(g) != s for (_, g), s in zip(generators, generators_before)]
        numpy_changed = any(
            moved and not isinstance(g, random.Random) for (_, g), moved in zip(generators, changed)
        )
        if _random_state() != random_before or numpy_changed:
            self._warn_once(
                "random",
                f"tapegrad.compile({name}): a NumPy random generator was used while "
                "capturing; the numbers drawn are constants of the program (the same on "
                "every replay). Pass random draws as arguments.",
            )
        drawn = _python_random_sources(
            generators, changed, random.getstate() != python_random_before
        )
        if drawn:
            self._warn_once(
                "python random",
                f"tapegrad.compile({name}) drew from {', '.join(drawn)} while capturing: "
                "the numbers drawn are constants of the program (the same on every replay, "
                "where eager code draws anew). Draw them outside and pass them as "
                "arguments: step(w, random.random()).",
            )
        # An iterator has no state to compare: what next() consumed cannot be seen without
        # consuming more (and a generator's frame may stand at the same yield after every
        # draw). So reaching one from outside is what is warned about, by name, whether
        # or not fn drew from it: a false alarm costs a line, a frozen item a wrong number.
        if iterators:
            where = ", ".join(
                f"{closures.describe(path)} (a {type(it).__name__})" for path, it in iterators[:3]
            )
            more = f" and {len(iterators) - 3} more" if len(iterators) > 3 else ""
            self._warn_once(
                "iterator",
                f"tapegrad.compile({name}) reads an iterator from outside: {where}{more}. "
                "The items it draws while capturing (next(it), a for loop) are "
                "constants of the program: every replay gives them again where eager "
                "code would draw the next ones, and does not advance the iterator. Draw "
                "outside and pass the items as arguments: step(w, next(it)).",
            )
        # (a SystemRandom reached from outside is warned about above, by name)
        if any(isinstance(g, random.SystemRandom) for _, g in generators):
            made = [m for m in made if m[0] != "os"]
        if made:
            sites = list(
                dict.fromkeys(
                    f"{f'{called}()' if called else 'a generator'}"
                    f"{_ENTROPY if kind == 'os' else ''} at {where}"
                    for kind, called, where in made
                )
            )
            more = f" and {len(sites) - 3} more" if len(sites) > 3 else ""
            self._warn_once(
                "unseeded",
                f"tapegrad.compile({name}) created an unseeded random generator while "
                f"capturing: {', '.join(sites[:3])}{more}. Its draws are constants of the "
                "program (the same on every replay, where eager code draws anew). Draw "
                "outside and pass them in, step(w, rng.standard_normal(3)), or seed it: "
                "np.random.default_rng(0), random.Random(0).",
            )
        paths = closures.locate(self.reach, args, [i.tensor for i in program.outside])
        program.plain = self._own_state_left_out(plain, args)
        for inp, found in zip(program.outside, paths):
            inp.paths = found
            if not found:
                self._warn_once(
                    "unlocated",
                    f"tapegrad.compile: fn reads a tensor (shape {inp.shape}, {inp.dtype}) "
                    "that is neither an argument nor found from its closure, globals or "
                    "arguments; that tensor object is read on every call, so a "
                    "replacement put where fn finds it would not be seen. Pass it as an "
                    "argument.",
                )
        self._stats["captures"] += 1
        return program

    def _own_state_left_out(self, plain: list[tuple], args: tuple) -> list[tuple]:
        """The plain values as the capture found them, less those fn itself changed while
        it ran (a call counter, ``C += 1``): a side effect, which a replay does not
        repeat; guarding it would capture again on every call. Warned about once."""
        kept, changed = [], []
        for guard in plain:
            path, obj, kept_value = guard
            same = _same_plain(closures.resolve(self.reach, args, path), obj, kept_value)
            (kept if same else changed).append(guard if same else path)
        if changed:
            where = ", ".join(closures.describe(p) for p in changed[:3])
            self._warn_once(
                "own state",
                f"tapegrad.compile({getattr(self.reach, '__name__', 'fn')}) changed {where} "
                "(read from outside) while it was captured: a replay does not repeat that "
                "side effect, and what the recording computed from it stays as captured. "
                "Keep such state out of the compiled function, or pass it as an argument.",
            )
        return kept

    def _outside_now(self, program: Program, args: tuple) -> list[Tensor] | None:
        """The tensors now where ``fn`` found its outside tensors, or None (with
        ``program.failed``) if one is gone, changed shape, dtype or requires_grad, or
        routes that led to one tensor now lead to different ones."""
        found = []
        for inp in program.outside:
            if not inp.paths:
                found.append(inp.tensor)
                continue
            now = [closures.resolve(self.reach, args, p) for p in inp.paths]
            t = now[0]
            where = closures.describe(inp.paths[0])
            other = next((p for p, o in zip(inp.paths, now) if o is not t), None)
            if other is not None:  # tied tensors (self.enc is self.dec) were untied
                program.failed = (
                    f"{where} and {closures.describe(other)} are no longer the same tensor"
                )
                return None
            if not (
                isinstance(t, Tensor)
                and t.shape == inp.shape
                and t.dtype == inp.dtype
                and t.requires_grad == inp.requires_grad
            ):
                program.failed = (
                    f"{where} is not a tensor of shape {inp.shape}, {inp.dtype}"
                    f"{' that requires grad' if inp.requires_grad else ''} any more"
                )
                return None
            if t._data is None and t._tape.pinned:
                raise RuntimeError(
                    f"tapegrad.compile: {where} holds a tensor computed inside a compiled "
                    "function; a captured program does not repeat side effects. Return it "
                    "(has_aux=True) instead"
                )
            found.append(t)
        return found

    # --- calls ------------------------------------------------------------------------
    def _run(
        self, args: tuple, want_grad: bool, diff: frozenset[int]
    ) -> tuple[tuple, Program, _Call, list[Tensor], list[np.ndarray]]:
        """Replay the program for these arguments (capturing it first if needed):
        ``(result of Program.run, program, the call, outside tensors, their values)``."""
        call = self._split(args, diff)
        chain = self.programs.get(call.key)
        self._clock += 1
        if (
            chain is not None
            and len(chain) == 1
            and not chain[0].outside
            and not self.check
            and (not chain[0].plain or _plain_hold(self.reach, chain[0], args))
        ):
            # the common case: one program, nothing from outside
            result = chain[0].run(call.arrays, (), want_grad)
            if result is not None:
                self._used[call.key] = self._clock
                self._stats["replays"] += 1
                return result, chain[0], call, (), ()
        reason = ""
        if chain is None:
            reason = self._new_signature(call.key)
            chain = self.programs[call.key] = []
        self._used[call.key] = self._clock  # the least recently used are evicted first
        for i, program in enumerate(chain):
            if program.plain and not _plain_hold(self.reach, program, args):
                self._stats["guard_failures"] += 1
                reason = program.failed
                continue
            if program.outside:
                outside = self._outside_now(program, args)
                # read with _value(): a capture around this call sees what it reads
                values = [t._value() for t in outside] if outside is not None else []
            else:
                outside, values = [], []
            result = None if outside is None else program.run(call.arrays, values, want_grad)
            if result is None:
                self._stats["guard_failures"] += 1
                reason = program.failed
                continue
            if i:  # the branch taken now is tried first next time
                chain.insert(0, chain.pop(i))
            if self.check:
                fresh = self._capture(args, call)
                self._stats["captures"] -= 1
                self._stats["checks"] += 1
                _compare(program.structure(), fresh.structure())
            self._stats["replays"] += 1
            return result, program, call, outside, values
        program = self._capture(args, call)
        chain.insert(0, program)
        self._evict()
        if self._stats["captures"] > RECAPTURE_WARNING:
            self._warn_once(
                "recapture",
                f"tapegrad.compile({getattr(self.fn, '__name__', 'fn')}) has captured "
                f"{self._stats['captures']} programs; it keeps capturing because "
                f"{reason}. Each capture runs fn eagerly: make that value an argument, "
                "or the decision a tensor op (tnp.where), or call fn without tg.compile.",
            )
        outside = self._outside_now(program, args)
        values = [t._value() for t in outside] if outside is not None else []
        result = None if outside is None else program.run(call.arrays, values, want_grad)
        if result is None:
            raise RuntimeError(
                "tapegrad.compile: a program failed its guards right after it was captured "
                f"({program.failed}): fn gives different results for the same values"
            )
        self._stats["replays"] += 1
        return result, program, call, outside, values

    def _evict(self) -> None:
        """Keep at most MAX_PROGRAMS programs: drop the least recently used ones."""
        total = sum(len(c) for c in self.programs.values())
        while total > MAX_PROGRAMS:
            oldest = min(self.programs, key=self._used.__getitem__)
            chain = self.programs[oldest]
            chain.pop()
            total -= 1
            if not chain:
                del self.programs[oldest]
                del self._used[oldest]

    def __call__(self, *args: Any) -> Any:
        """The loss (and aux) for these arguments, replayed.

        A float; a tensor instead (one node of the caller's graph) when grad mode is on
        and an argument, or a tensor ``fn`` reads from outside, requires grad. While
        another function is being captured, ``fn`` runs inline in that capture."""
        if active_capture() is not None:
            return self.fn(*args)  # nested in a capture: part of the outer program
        grad_on = is_grad_enabled()
        diff = self._diff(len(args))
        rg_args = {
            i
            for i, a in enumerate(args)
            if any(isinstance(v, Tensor) and v.requires_grad for v in flatten(a)[0])
        }
        if grad_on and rg_args:
            diff = diff | rg_args
        with self._lock:
            result, program, call, outside, values = self._run(args, False, diff)
        value, _, _, aux = result
        in_graph = grad_on and (rg_args or any(i.rg for i in program.outside))
        if not in_graph:
            return (value, aux) if self.has_aux else value
        # one node: its inputs are the tensors among the differentiated arguments' leaves
        # and the outside tensors that require grad; grad_at maps each to its place in
        # the program's gradients (differentiated inputs, then outside leaves)
        tensors = [v for a in args for v in flatten(a)[0]]
        node_inputs: list[Any] = []
        grad_at: list[int] = []
        for j, k in enumerate(call.diff_inputs):
            t = _input_tensor(call, tensors, k)
            if isinstance(t, Tensor) and t.requires_grad:
                node_inputs.append(t)
                grad_at.append(j)
        j = len(call.diff_inputs)
        for inp, t in zip(program.outside, outside):
            if inp.rg:
                node_inputs.append(t)
                grad_at.append(j)
                j += 1
        loss = np.full(program.tape.slot_shape(program.root), value)
        loss = loss.astype(program.tape.slot_dtype(program.root))
        arrays = [a.copy() for a in call.arrays]
        kept = [v.copy() for v in values]
        node = (loss, self, program, arrays, kept, grad_at, call, args, list(outside))
        out = _StepNode.apply(node, *node_inputs)
        return (out, aux) if self.has_aux else out

    def value_and_grad(self, *args: Any) -> Any:
        """``(loss, grads)`` (``((loss, aux), grads)`` with ``has_aux``): grads are NumPy
        arrays for the ``argnums`` arguments (one array for an int ``argnums``), in the
        arguments' structure (lists, tuples, dicts).

        Tensors that ``fn`` reads from outside and that require grad get their gradient
        accumulated into ``.grad``, as ``loss.backward()`` would."""
        return self._value_and_grad(args, True)

    def _value_and_grad(self, args: tuple, accumulate: bool) -> Any:
        """:meth:`value_and_grad`; ``accumulate``: into outside tensors' ``.grad`` (not
        for ``hvp``, whose outside tensors are constants of the product)."""
        for a in args:
            if type(a) is np.ndarray or not _requires_grad(a):
                continue
            raise NotImplementedError(
                "value_and_grad of a compiled step was given a tensor that requires grad: "
                "it returns NumPy gradients, which cannot carry that dependence. Call the "
                "step itself, step(*args), to make it one node of the graph, or use "
                "step.hvp for second derivatives"
            )
        nargs = len(args)
        diff = self._diff(nargs)
        with self._lock:
            result, program, call, outside, _ = self._run(args, True, diff)
        value, grads, outside_grads, aux = result
        if outside_grads and accumulate:
            found = iter(outside_grads)
            for inp, t in zip(program.outside, outside):
                g = next(found) if inp.rg else None
                if g is not None:
                    accumulate_grad(t, g)
        if self.single and len(grads) == 1 and grads[0] is not None:
            entry = call.entries[self.argnums[0] % nargs]
            if entry[0] == "input":  # the common case: one array (or float) argument
                grad = grads[0].dtype.type(grads[0]) if call.scalar else grads[0]
                return ((value, aux), grad) if self.has_aux else (value, grad)
        tape = program.tape
        by_input = {}
        for j, (g, s) in enumerate(zip(grads, program.leaf_slots)):
            # an argument the loss does not depend on has a zero gradient
            g = np.zeros(tape.slot_shape(s), tape.slot_dtype(s)) if g is None else g
            k = call.diff_inputs[j]
            by_input[k] = g.dtype.type(g) if k in call.scalar else g

        def gather(entry: tuple) -> Any:
            if entry[0] == "input":
                return by_input[entry[1]]
            if entry[0] == "tree":
                return entry[1]([gather(e) for e in entry[2]])
            return None

        out = [gather(call.entries[a % nargs]) for a in self.argnums]
        result_grads = out[0] if self.single else tuple(out)
        return ((value, aux), result_grads) if self.has_aux else (value, result_grads)

    def hvp(self, *args: Any) -> Any:
        """Hessian-vector product of the captured loss: ``step.hvp(*args, v)``, ``v``
        shaped like the differentiated argument(s) (a tuple of them for a tuple
        ``argnums``); the result has that shape.

        It is the gradient of ``<grad fn(*args), v>``: the inner gradient is recorded
        (``tg.grad`` on tensors that require grad) into a program of its own, captured
        once per signature like ``value_and_grad`` and replayed for new ``args`` and
        ``v`` in compiled code, so a Newton-CG loop runs no Python per op. A recorded
        derivative that decides on values (``max``, ``min``) cannot be captured and
        raises.
        """
        if len(args) < 2:
            raise TypeError("hvp: call it as step.hvp(*args, v)")
        if self._hvp is None:
            nums = self.argnums[0] if self.single else self.argnums
            self._hvp = Compiled(self._inner_product, nums, False, self.check)
            self._hvp.reach = self.reach  # what fn reads, not the bound method
        return self._hvp._value_and_grad(args, False)[1]

    def _inner_product(self, *args: Any) -> Tensor:
        """``<grad fn(*args[:-1]), args[-1]>``, the function ``hvp`` differentiates."""
        *xs, v = args
        g = transforms.grad(self.fn, self.argnums[0] if self.single else self.argnums)(*xs)
        if self.has_aux:
            g = g[0]
        gs, vs = (g,), (v,)
        if not self.single:
            gs, vs = tuple(g), tuple(v)
        return inner_product(gs, vs, "hvp")


def _requires_grad(a: Any) -> bool:
    """``a`` (an argument: a tensor, a pytree) holds a tensor that requires grad, with
    grad mode on."""
    if isinstance(a, Tensor):
        return a.requires_grad and is_grad_enabled()
    if is_container(a):
        return any(_requires_grad(v) for v in flatten(a)[0])
    return False


def _input_tensor(call: _Call, tensors: list[Any], k: int) -> Any:
    """The argument leaf that became input ``k`` (leaves in order: pytrees flattened)."""
    n = -1
    i = 0
    for entry in call.entries:
        parts = entry[2] if entry[0] == "tree" else [entry]
        for e in parts:
            if e[0] == "input" and e[1] == k:
                n = i
            i += 1
    return tensors[n] if n >= 0 else None


def _compare(old: dict[str, np.ndarray], new: dict[str, np.ndarray]) -> None:
    for name in old:
        a, b = old[name], new[name]
        if a.shape != b.shape or not np.array_equal(a, b):
            raise RuntimeError(
                f"tapegrad.compile(check=True): this call recorded a different computation "
                f"than the captured program ({name} differ): the function's control flow "
                "or constants depend on values the program's guards do not see (Python "
                "numbers or NumPy arrays it reads from outside, randomness), which a "
                "captured program cannot follow. Make them arguments, use eager mode for "
                "this function, or make the branch an op (tnp.where)."
            )


def _identity(o: Any) -> bool:
    """Objects guarded by identity: functions fn calls (a helper rebound to another) and
    compiled steps."""
    return isinstance(o, types.FunctionType) or (
        type(o).__module__.split(".")[0] == "tapegrad"
        and "__wrapped__" in getattr(o, "__dict__", ())
    )


class _Layout:
    """What a guard on a container the function reaches (and may iterate over or take
    ``len()`` of) keeps: its type and length, and a dict's keys in order. Its items have
    guards of their own (tensors are found again by route, plain values compared)."""

    __slots__ = ("keys", "kind", "size")

    def __init__(self, obj: list | tuple | dict) -> None:
        self.kind = type(obj)
        self.size = len(obj)
        # the order too: a loop over the values stacks or sums them in that order
        self.keys = list(obj) if isinstance(obj, dict) else None

    def holds(self, now: Any) -> bool:
        if type(now) is not self.kind or len(now) != self.size:
            return False
        return self.keys is None or list(now) == self.keys

    def what(self) -> str:
        return "the keys of" if self.keys is not None else "the length of"


_NAMED_STEPS = ("attr", "meth")  # steps taken only when some code on the way names them


def _leaf_paths(tree: Any, path: tuple) -> list[tuple[tuple, Any]]:
    """``(path, leaf)`` of a pytree argument's leaves, in ``pytree.flatten``'s order."""
    if isinstance(tree, list | tuple):
        return [lp for i, v in enumerate(tree) for lp in _leaf_paths(v, (*path, ("item", i)))]
    if isinstance(tree, dict):
        return [lp for k in tree for lp in _leaf_paths(tree[k], (*path, ("item", k)))]
    return [(path, tree)]


def _constant_arguments(args: tuple, call: _Call | None) -> list[tuple[tuple, Any]]:
    """``(path, value)`` of the arguments (and pytree leaves) that are constants of the
    signature rather than inputs: an object passed in (``step(w, model)``), whose
    attributes fn reads as it reads ``self``'s."""
    if call is None:
        return []
    out: list[tuple[tuple, Any]] = []
    for i, (a, entry) in enumerate(zip(args, call.entries)):
        if entry[0] == "const":
            out.append(((("arg", i),), a))
        elif entry[0] == "tree":
            for (path, leaf), e in zip(_leaf_paths(a, (("arg", i),)), entry[2]):
                if e[0] == "const":
                    out.append((path, leaf))
    return out


def _reached(
    starts: list[tuple[tuple, Any]], cut: list[tuple] | None = None
) -> list[tuple[tuple, Any]]:
    """Everything reachable from ``starts`` through attributes and methods that some
    code on the way names (and any other step), on every route. An attribute no code
    names (``self.step_count`` beside the ``self.w`` the loss reads) is not read:
    guarding it would capture again whenever a training loop bumps it. The names grow
    as the walk finds more code (``model.forward`` names ``W``), so it runs until they
    stop growing."""
    used = {"__wrapped__"}

    def follow(step: tuple) -> bool:
        return step[0] not in _NAMED_STEPS or step[1] in used

    found: list[tuple[tuple, Any]] = []
    for _ in range(2 * closures.DEPTH + 2):  # (one more method level per round at most)
        stopped: list[tuple] = []
        found = list(closures.walk_from(starts, follow, stopped))
        if cut is not None:
            cut[:] = stopped
        names = set(used)
        for _, obj in found:
            if isinstance(obj, types.FunctionType):
                names |= closures.code_names(obj)
        if names == used:
            break
        used = names
    return found


def _plain_values(
    fn: Callable,
    args: tuple = (),
    call: _Call | None = None,
    iterators: list[tuple[tuple, Any]] | None = None,
) -> list[tuple[tuple, Any, Any]]:
    """``(path, object, what to compare)`` of every plain value ``fn`` reaches from outside
    (numbers, strings, NumPy arrays, containers of numbers: ``closures.is_plain``), of
    every function or compiled step it reaches (compared by identity), and of every
    other container on the way (its length or keys, :class:`_Layout`), on every route
    (``tapegrad.closures``) from ``fn`` and from the arguments that are constants of the
    signature (an object passed in), through attributes some code on the way names. The
    recording took each as a constant; a replay is valid only while they hold (``k =
    3.0``, ``A[:] = 0``, ``obj.X = other`` or ``layers.append(layer)`` after capture
    means capturing again, never replaying the old value, as torch.compile guards on
    globals). ``iterators`` receives ``(path, object)`` of each iterator or generator
    reached the same way (``closures.is_iterator``), once each."""
    starts = [((("fn",),), fn), *_constant_arguments(args, call)]
    # the starting points themselves are fn and constants of the signature (its key)
    skip = {path for path, _ in starts}
    out: list[tuple[tuple, Any, Any]] = []
    whole: set[tuple] = set()  # containers compared whole: their items need no guard
    cut: list[tuple] = []
    reached = _reached(starts, cut)
    if cut:  # (what fn reads below these is not a guard: say so, never silently)
        warnings.warn(
            f"tapegrad.compile: values read through {closures.describe(cut[0])} and "
            f"{len(cut) - 1} other place(s) lie beyond the {closures.DEPTH} levels (or "
            f"{closures.BUDGET} objects, or {closures.ITEMS} items of a container) "
            "searched for what fn reads from outside: "
            "a change there would not be seen by a replay. Pass such values as "
            "arguments, or keep them nearer to fn",
            RuntimeWarning,
            stacklevel=4,
        )
    first: dict[int, tuple] = {}  # containers and objects: the route their items are under
    drawn: set[int] = set()  # iterators reported
    if iterators is not None:  # (an argument that is one: a generator passed in)
        for path, obj in starts:
            if closures.is_iterator(obj) and id(obj) not in drawn:
                drawn.add(id(obj))
                iterators.append((path, obj))
    for path, obj in reached:
        if path in skip or path[:-1] in whole:
            continue
        if closures.enterable(obj):
            if first.setdefault(id(obj), path) != path:
                # its items are guarded under the first route only: on this one it must
                # stay the same object (m.L = [5.0, 2.0, W] with L also a closure)
                out.append((path, obj, _Same(obj)))
        if closures.is_plain(obj):
            if isinstance(obj, np.ndarray):  # (type, shape, dtype, bytes): the cheapest check
                kept: Any = (type(obj), obj.shape, obj.dtype, obj.tobytes())
            elif isinstance(obj, list | tuple | dict | set | frozenset):  # its numbers
                kept = _Items(obj)
                whole.add(path)
            else:
                kept = obj
            out.append((path, obj, kept))
        elif isinstance(obj, list | tuple | dict):
            out.append((path, obj, _Layout(obj)))
        elif _identity(obj):
            if path[-1][0] != "meth":
                # (a method is its class's: the same on every instance a loop reaches)
                out.append((path, obj, obj))
        elif iterators is not None and closures.is_iterator(obj) and id(obj) not in drawn:
            # (looked for only here: numbers and containers, most of what fn reaches,
            # are not iterators)
            drawn.add(id(obj))
            iterators.append((path, obj))
    return out


class _Same:
    """What a guard on a second route to a container or object keeps: the object."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def holds(self, now: Any) -> bool:
        return now is self.obj

    def what(self) -> str:
        return "the object at"


def _same_plain(now: Any, obj: Any, kept: Any) -> bool:
    """Whether ``now`` is what the capture read (``obj``, kept as ``kept``). Anything
    that cannot be compared (an array where a number was) is a change."""
    try:
        if type(kept) is _Layout or type(kept) is _Items or type(kept) is _Same:
            return kept.holds(now)
        if isinstance(obj, np.ndarray):
            return (
                type(now) is kept[0]
                and now.shape == kept[1]
                and now.dtype == kept[2]
                and now.tobytes() == kept[3]
            )
        if _identity(obj):  # a function or compiled step: the same object
            return now is obj
        return _same_scalar(now, kept)
    except Exception:  # (a comparison that raises: not the value the capture read)
        return False


def _same_scalar(now: Any, kept: Any) -> bool:
    """The same number (or string): the same type, and for floats and complex numbers
    (NumPy's too) the same sign of zero (1 / x differs), NaN being NaN."""
    if now is kept:
        return True
    if type(now) is not type(kept):
        return False
    if isinstance(kept, float | np.floating):
        return _same_float(now, kept)
    if isinstance(kept, complex | np.complexfloating):
        return _same_float(now.real, kept.real) and _same_float(now.imag, kept.imag)
    return bool(now == kept)


def _same_float(now: Any, kept: Any) -> bool:
    return math.copysign(1.0, now) == math.copysign(1.0, kept) and (
        now == kept or (now != now and kept != kept)
    )


def _signed_zero(v: Any) -> bool:
    """Whether ``v`` has a zero whose sign ``==`` does not see (float or complex)."""
    if isinstance(v, float | np.floating):
        return v == 0
    if isinstance(v, complex | np.complexfloating):
        return v.real == 0 or v.imag == 0
    return False


class _Items:
    """What a guard on a list, tuple or dict of numbers (compared whole) keeps: its type,
    a dict's keys in order, its values and their types. Values that are the very objects
    the capture read are the same (one pass in C); else ``==`` over them runs in C, but
    says ``0.0 == -0.0`` and ``3 == 3.0``: the types are compared too, and the signs of
    the zeros the capture saw; only when ``==`` fails (a NaN, another number) are the
    values compared one by one."""

    __slots__ = ("keys", "kind", "members", "types", "values", "zeros")

    def __init__(self, obj: list | tuple | dict | set | frozenset) -> None:
        self.kind = type(obj)
        # a set has no order: compared by ==, which takes 0.0 for -0.0 and 3 for 3.0
        self.members = frozenset(obj) if isinstance(obj, set | frozenset) else None
        self.keys = list(obj) if isinstance(obj, dict) else None
        self.values = list(obj.values()) if isinstance(obj, dict) else list(obj)
        self.types = [type(v) for v in self.values]
        self.zeros = [i for i, v in enumerate(self.values) if _signed_zero(v)]

    def holds(self, now: Any) -> bool:
        if type(now) is not self.kind or len(now) != len(self.values):
            return False
        if self.members is not None:
            return now == self.members
        values = now
        if self.keys is not None:
            if not all(map(operator.is_, now, self.keys)) and list(now) != self.keys:
                return False
            values = now.values()
        kept = self.values
        if all(map(operator.is_, values, kept)):  # (the same objects: one pass in C)
            return True
        values = list(values)
        if values == kept and list(map(type, values)) == self.types:
            return all(_same_scalar(values[i], kept[i]) for i in self.zeros)
        return all(map(_same_scalar, values, kept))


def _by_identity(obj: Any, kept: Any) -> bool:
    """Whether a guard holds whenever its value is still the very same object: an
    immutable value (number, string, tuple of them) or one guarded by identity, not a
    mutable one compared by contents (list, dict, array) nor a container's layout."""
    return type(kept) is not _Layout and (
        _identity(obj) or not isinstance(obj, np.ndarray | list | dict)
    )


def _plain_checks(plain: list[tuple[tuple, Any, Any]]) -> list[tuple]:
    """The guards of ``plain`` in the form :func:`_plain_hold` runs them. Items of one
    container (``consts[0]``, ``consts[1]``... of a list that also holds a tensor, so
    not compared whole) become one check: the container is found once and its items
    taken by one ``operator.itemgetter`` and compared by identity in C (434 floats
    were 434 walks from ``fn``, 0.56 ms against a 0.06 ms replay); only when one is a
    different object are they compared one by one, as any other guard."""
    groups: dict[tuple, list[tuple]] = {}
    checks: list[tuple] = []
    for entry in plain:
        path, obj, kept = entry
        if len(path) > 1 and path[-1][0] == "item" and _by_identity(obj, kept):
            group = groups.get(path[:-1])
            if group is None:
                group = groups[path[:-1]] = []
                checks.append(("items", path[:-1], group))
            group.append(entry)
        else:
            checks.append(("one", entry))
    # the container's own guard (its length, a dict's keys) goes with its items' check,
    # which finds the container anyway
    layouts = {
        c[1][0]: c[1]
        for c in checks
        if c[0] == "one" and type(c[1][2]) is _Layout and len(groups.get(c[1][0], ())) > 1
    }
    out = []
    for check in checks:
        if check[0] == "items" and len(check[2]) > 1:
            entries = check[2]
            keys = [path[-1][1] for path, _, _ in entries]
            get = operator.itemgetter(*keys)
            if type(keys[0]) is int and keys == list(range(keys[0], keys[0] + len(keys))):
                get = functools.partial(_run_of_items, slice(keys[0], keys[0] + len(keys)), get)
            objs = tuple(obj for _, obj, _ in entries)
            out.append(("items", check[1], layouts.get(check[1]), get, objs, entries))
        elif check[0] == "items":
            out.append(("one", check[2][0]))
        elif check[1][0] not in layouts or type(check[1][2]) is not _Layout:
            out.append(check)
    return out


def _run_of_items(run: slice, get: Callable, container: Any) -> Any:
    """Items ``run`` of a list or tuple (a slice: a copy in C), else ``get``'s."""
    return container[run] if type(container) in (list, tuple) else get(container)


def _plain_hold(fn: Callable, program: Program, args: tuple = ()) -> bool:
    """Whether every plain value the program took as a constant is unchanged (else
    ``program.failed`` says which changed). ``args``: the call's arguments."""
    plain, checks = program.plain_checks
    if plain is not program.plain:
        checks = _plain_checks(program.plain)
        program.plain_checks = (program.plain, checks)
    for check in checks:
        if check[0] == "items":
            _, parent, layout, get, objs, entries = check
            container = closures.resolve(fn, args, parent)
            if layout is not None and not _plain_holds(fn, program, args, layout):
                return False
            try:
                items = get(container)
                same = len(items) == len(objs) and all(map(operator.is_, items, objs))
            except Exception:  # (a container that no longer answers: one by one)
                same = False
            if same or all(_plain_holds(fn, program, args, e) for e in entries):
                continue
            return False
        if not _plain_holds(fn, program, args, check[1]):
            return False
    return True


def _plain_holds(fn: Callable, program: Program, args: tuple, entry: tuple) -> bool:
    """One guard of :func:`_plain_hold`."""
    path, obj, kept = entry
    now = closures.resolve(fn, args, path)
    if _same_plain(now, obj, kept):
        return True
    where = closures.describe(path)
    if type(kept) is _Layout or type(kept) is _Same:
        program.failed = f"{kept.what()} {where} (read from outside) changed"
    else:
        program.failed = f"{where} (a value read from outside) changed"
    return False
