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
differs from the program that ran (slow, for debugging). Gradient hooks cannot be
captured. A custom function (``tg.Function``, a ``tapegrad.extend`` primitive) is one
node of the program whose forward (and Python backward) runs again, in Python, on each
replay's values: a replay stops there and resumes after it.
"""

from __future__ import annotations

import functools
import random
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import closures, graph, rule_walks, transforms
from .engine import accumulate_grad, has_hooks
from .forward_mode import inner_product
from .grad_mode import is_grad_enabled
from .plain_guards import plain_hold, plain_values, same_plain
from .program import Capture, Program, SplitCall, rebuilt_arguments
from .pytree import flatten, is_container, structure
from .random_watch import (
    ENTROPY,
    generator_state,
    is_arraylike,
    python_random_sources,
    random_state,
    unseeded_generators,
)
from .recording import tensor
from .step_node import StepNode
from .tape import CAPTURE, Tape, enter, leave
from .tensors import (
    FLAG_CAPTURED,
    FLAG_DIFF,
    FLAG_FLOATARG,
    Tensor,
    active_capture,
    bind,
    capture_started,
    serial,
)

__all__ = ["Compiled", "compile"]

MAX_PROGRAMS = 64  # programs kept per compiled step (all signatures together)
RECAPTURE_WARNING = 8  # captures after which a step warns once that it keeps capturing


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
        does not depend on the arguments through recorded ops, it registers gradient
        hooks or calls a function whose forward cannot run again (an ODE solve,
        ``tg.checkpoint``), which cannot be captured, or an argument to differentiate
        is not an array or a float, or holds integers.
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
        if program.plain and not plain_hold(self.reach, program, args):
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

    def _leaf(self, call: SplitCall, a: Any, i: int, diff: bool) -> tuple:
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
            if not is_arraylike(a):
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

    def _split(self, args: tuple, diff: frozenset[int]) -> SplitCall:
        call = SplitCall()
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
    def _capture(self, args: tuple, call: SplitCall) -> Program:
        """Run ``fn`` eagerly on a fresh private tape and keep the recording."""
        generators = closures.find(self.reach, args, closures.is_random_generator)
        generators_before = [generator_state(g) for _, g in generators]
        python_random_before = random.getstate()
        iterators: list[tuple[tuple, Any]] = []  # reached from outside (plain_values)
        tape = Tape()
        tape.pinned = True  # never rewound: the recording is the program
        cap = Capture(tape)
        tape.capture = cap
        enter(CAPTURE, grad_enabled=True, born0=serial(), tape=tape)
        capture_started(1)
        random_before = random_state()
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
            plain = plain_values(self.reach, args, call, iterators)
            with unseeded_generators() as made:
                out = self.fn(*rebuilt_arguments(call.entries, inputs))
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
            if cap.refused:  # custom functions a replay cannot run (Function.apply)
                k = min(cap.refused)
                raise TypeError(
                    f"compile: {rule_walks.node_name(tape, k)} cannot be captured: {cap.refused[k]}"
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
        changed = [generator_state(g) != s for (_, g), s in zip(generators, generators_before)]
        numpy_changed = any(
            moved and not isinstance(g, random.Random) for (_, g), moved in zip(generators, changed)
        )
        if random_state() != random_before or numpy_changed:
            self._warn_once(
                "random",
                f"tapegrad.compile({name}): a NumPy random generator was used while "
                "capturing; the numbers drawn are constants of the program (the same on "
                "every replay). Pass random draws as arguments.",
            )
        drawn = python_random_sources(
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
                    f"{ENTROPY if kind == 'os' else ''} at {where}"
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
            same = same_plain(closures.resolve(self.reach, args, path), obj, kept_value)
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
    ) -> tuple[tuple, Program, SplitCall, list[Tensor], list[np.ndarray]]:
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
            and (not chain[0].plain or plain_hold(self.reach, chain[0], args))
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
            if program.plain and not plain_hold(self.reach, program, args):
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
        if transforms.IN_VMAP and transforms.in_vmap() is not None:
            return self.fn(*args)  # inside tg.vmap: its batching rules record fn
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
        out = StepNode.apply(node, *node_inputs)
        return (out, aux) if self.has_aux else out

    def value_and_grad(self, *args: Any) -> Any:
        """``(loss, grads)`` (``((loss, aux), grads)`` with ``has_aux``): grads are NumPy
        arrays for the ``argnums`` arguments (one array for an int ``argnums``), in the
        arguments' structure (lists, tuples, dicts).

        Tensors that ``fn`` reads from outside and that require grad get their gradient
        accumulated into ``.grad``, as ``loss.backward()`` would."""
        if transforms.IN_VMAP and transforms.in_vmap() is not None:
            # inside tg.vmap: per-example gradients, fn recorded by the batching rules
            argnums = self.argnums[0] if self.single else self.argnums
            return transforms.value_and_grad(self.fn, argnums, self.has_aux)(*args)
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


def _input_tensor(call: SplitCall, tensors: list[Any], k: int) -> Any:
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
