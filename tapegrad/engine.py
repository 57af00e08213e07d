"""Driving a backward pass from Python: seeding, the compiled scheduler's callbacks
(custom functions with a Python backward, gradient hooks), leaf gradients, anomaly
mode, and the errors a failed pass raises.

The scheduler (``scheduler.py``) runs every node it can in compiled code. It returns to
this loop only for a node whose backward is Python, or before a node whose outputs have
hooks; after handling it, ``resume`` continues where it stopped. A graph without custom
Python functions or hooks makes exactly one compiled call.

Python callbacks run on a tape of their own (``tape.enter``): a hook or a custom
``backward`` may record ops, run a backward or call a transform without touching the
tape whose backward is running. :func:`backward` accumulates into ``.grad`` of the leaves
(PyTorch's ``Tensor.backward``); :func:`gradients` returns the gradients of given tensors
and accumulates nothing (``torch.autograd.grad``): the transforms use it.
"""

from __future__ import annotations

import contextlib
import linecache
import os
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from . import rule_walks
from .grad_mode import enable_grad
from .handles import add_grad, added, constant, graph_freed, home_of, slot_handle, thread_alive
from .layout import (
    DTYPE_CODE,
    DTYPE_NAMES,
    E_CALLBACK_HOOK,
    E_CALLBACK_PY,
    E_FREED,
    E_GRAD_META,
    E_LINALG,
    E_NO_BWD,
    E_NONFINITE,
    E_PYTHON,
    E_VERSION,
    H_ANOMALY,
    H_ERR_A,
    H_ERR_B,
    H_ERR_C,
    H_ERR_D,
    H_GEN,
    H_HOOKS,
    H_STAT_CALLBACKS,
    H_STAT_NODES,
    N_MASK,
    NODE_FREED,
    NP_DTYPES,
    OK,
    S_DTYPE,
    S_FLAGS,
    S_GEN,
    S_NODE,
    SLOT_CONST,
    SLOT_HOOK,
)
from .ops.elementwise.core import ADD, MUL
from .ops.reduce.rows import SUM
from .recording import elementwise, general
from .references import WeakIdMap
from .scheduler import resume, run_backward
from .shapes import gradient_buffer_error, user_gradient
from .shapes import seed as seed_rule
from .tape import EAGER, TRANSFORM, Tape, enter, leave, tape_stack
from .tensors import FREED_MESSAGE, NO_GRAD_MESSAGE, Tensor, set_result_hook, values_of
from .tiers import Unbound, call, current, entry_point, on_switch, raise_pending, upgrade

# --- hooks -------------------------------------------------------------------------------

# Hooks of tensors outside a tape (leaves), keyed weakly so they die with the tensor; a
# tensor in a tape keeps its gradient hooks in ``tape.hooks`` by slot.
_LEAF_HOOKS = WeakIdMap()
_POST_HOOKS = WeakIdMap()
_RETAIN = WeakIdMap()


class RemovableHandle:
    """Returned by hook registration; ``remove()`` unregisters the hook."""

    def __init__(self, hooks: list, fn: Callable) -> None:
        self._hooks = hooks
        self._fn = fn

    def remove(self) -> None:
        if self._fn in self._hooks:
            self._hooks.remove(self._fn)


def register_hook(t: Tensor, fn: Callable) -> RemovableHandle:
    """Run ``fn(grad)`` when ``t``'s gradient is computed (see Tensor.register_hook)."""
    if not t.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    home = home_of(t)
    if home is not None:  # an intermediate (or a leaf bound in this tape: the same slot)
        tape, slot = home
        hooks = tape.hooks.setdefault(slot, [])
        tape.set_slot_bits(slot, SLOT_HOOK)
        tape.h[H_HOOKS] = 1
    else:
        hooks = _LEAF_HOOKS.setdefault(t, [])
    hooks.append(fn)
    return RemovableHandle(hooks, fn)


def has_hooks(t: Tensor) -> bool:
    """Whether hooks are registered on ``t`` as a leaf."""
    return bool(_LEAF_HOOKS.get(t) or _POST_HOOKS.get(t))


def register_post_accumulate_grad_hook(t: Tensor, fn: Callable) -> RemovableHandle:
    """Run ``fn(t)`` after ``t.grad`` was updated by a backward (leaves only)."""
    if not (t.requires_grad and t.is_leaf):
        raise RuntimeError(
            "post accumulate grad hooks can only be registered on leaf tensors that require grad"
        )
    hooks = _POST_HOOKS.setdefault(t, [])
    hooks.append(fn)
    return RemovableHandle(hooks, fn)


def retain_grad(t: Tensor) -> None:
    """Keep ``.grad`` of a non-leaf tensor after backward (accumulating, like a leaf)."""
    if not t.requires_grad:
        raise RuntimeError("can't retain_grad on a tensor that has requires_grad=False")
    if t.is_leaf or t in _RETAIN:
        return
    _RETAIN[t] = True
    ref = weakref.ref(t)

    def keep(g: Any) -> None:
        owner = ref()
        if owner is not None:  # (a create_graph gradient is a tensor: immutable, kept)
            add_grad(owner, g if isinstance(g, Tensor) else g.copy())

    keep._retain = True
    register_hook(t, keep)


def _run_hooks(hooks: list, g: np.ndarray, what: str) -> np.ndarray:
    # retain_grad's hook runs last, so .grad shows what the other hooks made of it
    for fn in sorted(hooks, key=lambda f: getattr(f, "_retain", False)):
        r = fn(g.copy())
        if r is not None:
            name = getattr(fn, "__name__", fn)
            r = user_gradient(values_of(r), f"hook {name!r} on {what}")
            if r.shape != g.shape:
                raise RuntimeError(
                    f"hook {name!r} on {what} returned "
                    f"a gradient of shape {r.shape}, expected {g.shape}"
                )
            g = r.astype(g.dtype)  # a copy: .grad accumulates into it in place
    return g


# --- anomaly mode --------------------------------------------------------------------------

_anomaly_lock = threading.Lock()
_anomaly_depth = 0
_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def _user_frame() -> str:
    """``file:line: code`` of the innermost caller outside tapegrad."""
    f = sys._getframe(2)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_PACKAGE):
        f = f.f_back
    if f is None:
        return "<unknown>"
    line = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
    return f"{f.f_code.co_filename}:{f.f_lineno}: {line}"


class detect_anomaly:
    """Check every gradient a backward pass produces for NaN and inf: a context manager.

    Inside it, backward checks every produced gradient and raises naming the op and
    the source line that recorded it. Source lines are recorded only inside this
    context; outside it nothing is checked or recorded. Contexts nest, and the
    setting is process-wide.

    Raises
    ------
    RuntimeError
        From a backward pass inside it: an op produced a NaN or inf gradient (the
        message names the op, the input, and the source line that recorded the op).

    See Also
    --------
    is_anomaly_enabled : Whether the check is on.

    Examples
    --------
    The error names the op and the line that recorded it:

    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
    >>> w = np.array([1.0, np.nan])
    >>> with tg.detect_anomaly():
    ...     loss = tnp.sum(x * w)
    ...     loss.backward()
    Traceback (most recent call last):
    ...
    RuntimeError: Function 'multiply' returned nan or inf ...: loss = tnp.sum(x * w)
    """

    def __enter__(self) -> detect_anomaly:
        global _anomaly_depth
        with _anomaly_lock:
            _anomaly_depth += 1
            if _anomaly_depth == 1:
                set_result_hook(_record_source)
        return self

    def __exit__(self, *exc: object) -> None:
        global _anomaly_depth
        with _anomaly_lock:
            _anomaly_depth -= 1
            if _anomaly_depth == 0:
                set_result_hook(None)


def _record_source(tape: Tape, slot: int) -> None:
    """Anomaly mode: the user's source line of the node that made ``slot``."""
    node = tape.slot_field(S_NODE, slot)
    if node >= 0:
        tape.sources[node] = _user_frame()


def is_anomaly_enabled() -> bool:
    """Tell whether anomaly mode (:class:`detect_anomaly`) is on.

    Returns
    -------
    bool
        True inside a :class:`detect_anomaly` context.

    Examples
    --------
    >>> import tapegrad as tg
    >>> tg.is_anomaly_enabled()
    False
    >>> with tg.detect_anomaly():
    ...     tg.is_anomaly_enabled()
    True
    """
    return _anomaly_depth > 0


# --- the backward pass -------------------------------------------------------------------


def _seed(t: Tensor, gradient: Any) -> np.ndarray | None:
    """The root's cotangent as an array of its shape and dtype (None: ones)."""
    if gradient is None:  # ones: one element (the size is one field; shape and dtype
        # are read only for the error or a given cotangent)
        return None if t.size == 1 else seed_rule(t.shape, None, None)
    return seed_rule(t.shape, t.dtype, values_of(gradient))


@contextlib.contextmanager
def callback_tape() -> Iterator[None]:
    """Run Python called by a backward (hooks, custom ``backward``) on a tape of its own,
    with grad mode off as in PyTorch (``tg.enable_grad()`` and transforms turn it on)."""
    tape = enter(EAGER, grad_enabled=False)
    try:
        yield
    finally:
        leave(tape)


_last = threading.local()  # header of this thread's last backward pass, for its stats

# the scheduler's compiled entry point (see ``_jit.entry_point``: no dispatcher on each
# backward), once the first backward has compiled or loaded it
_run_backward: Any = Unbound(run_backward, lambda: _bind_scheduler())


def _use_backward_entry_point(h: np.ndarray) -> None:
    global _run_backward
    _run_backward = entry_point(run_backward, h, 0, 0, False)


def _bind_scheduler() -> None:
    global _run_backward
    _run_backward = current(run_backward)  # (its interpreted twin on a cold cache)


on_switch(_bind_scheduler)


def _drive(tape: Tape, root: int, seed: np.ndarray | None, retain_graph: bool, user: bool) -> None:
    """Run the compiled backward from slot ``root`` of ``tape``, handing Python nodes and
    hooks to Python until it is done; raise what a failed pass means. ``user``: a
    ``backward()`` the user called (else a transform's)."""
    if tape.capture is not None:
        raise RuntimeError(
            "backward() inside a function being captured by tg.compile: its effect on "
            ".grad would not be replayed. Return the loss and use step.value_and_grad, "
            "or compute inner gradients with tg.grad"
        )
    if tape.running:
        raise RuntimeError(
            "backward() of a graph whose backward is already running (called from a hook "
            "or a custom function's backward): the two passes would share its gradient "
            "buffers. Compute what the hook needs with tg.grad of its own function, or "
            "run this backward after the outer one"
        )
    if tape.handed_over:
        tape.refresh_leaf_versions()
    seed_slot = -1 if seed is None else tape.import_array(seed, SLOT_CONST)
    h = tape.header
    tape.h[H_ANOMALY] = int(_anomaly_depth > 0)
    tape.running = True
    try:
        # the leaves' gradients are computed in the arrays read_grad then hands out
        tape.use_own_grads([s for s, _ in tape.leaves])
        while True:
            st = _run_backward(h, root, seed_slot, bool(retain_graph))
            if _run_backward is run_backward:
                _use_backward_entry_point(h)
            if st >= 0 or st in (E_CALLBACK_PY, E_CALLBACK_HOOK):
                break
            raise_backward_error(tape, st)
            tape.fix(st)
        while st != OK:
            k = tape.h[H_ERR_A]
            if st == E_CALLBACK_PY:
                run_python_node(tape, k, retain_graph)
                st = call(resume, h, k - 1, retain_graph, False)
            elif st == E_CALLBACK_HOOK:
                _run_node_hooks(tape, k)
                st = call(resume, h, k, retain_graph, True)
            else:
                raise_backward_error(tape, st)
                raise RuntimeError(f"tapegrad: backward status {st}")
    finally:
        tape.own_grads_done()
        tape.running = False
    _last.header = h
    if tape.kind == TRANSFORM:
        _check_foreign(tape, user)


def _check_foreign(tape: Tape, user: bool) -> None:
    """A transform's backward must not reach a tensor from outside it (see
    ``tapegrad.transforms``): its NumPy result could not carry that dependence."""
    gen = tape.h[H_GEN]
    for slot, t in tape.foreign.values():
        if tape.slot_field(S_GEN, slot) != gen:
            continue
        if user:
            raise RuntimeError(
                "backward() inside a function being differentiated reached a tensor that "
                f"requires grad from outside it (shape {t.shape}, {t.dtype}); its .grad "
                "cannot be updated from inside a transform. Make that tensor inside the "
                "function, or .detach() it"
            )
        raise RuntimeError(
            "the differentiated function's result depends on a tensor that requires "
            f"grad but is not one of the transform's arguments (shape {t.shape}, "
            f"{t.dtype}: a closure, global or attribute, or an outer transform's "
            "variable). The transform returns NumPy values, which cannot carry that "
            "dependence, so gradients through it would silently be missing. Pass it as an "
            "argument: a transform whose arguments require grad returns tensors that carry "
            "the dependence (tg.grad(tg.grad(f)) works), or .detach() it"
        )


def backward(t: Tensor, gradient: Any = None, retain_graph: bool = False) -> None:
    """Run the compiled backward pass from ``t`` (see :meth:`Tensor.backward`)."""
    seed = _seed(t, gradient)
    home = home_of(t)
    if home is None:  # an external tensor: a leaf, or a freed non-leaf
        if graph_freed(t):
            raise RuntimeError(FREED_MESSAGE)
        if not t.requires_grad:
            raise RuntimeError(NO_GRAD_MESSAGE)
        # (a copy of the seed: .grad accumulates in place, never into the caller's array)
        accumulate_grad(t, np.ones(t.shape, t.dtype) if seed is None else np.array(seed))
        return
    tape, slot = home
    if not tape.slot_rg(slot):
        raise RuntimeError(NO_GRAD_MESSAGE)
    upgrade()  # (full kernels a background compiler finished, for serial ones)
    if tape.thread == threading.get_ident():
        _drive(tape, slot, seed, retain_graph, True)
    else:
        _drive_owned(tape, slot, seed, retain_graph)
    # rewound (or handed over) by the next op, see tape.current_tape; after
    # retain_graph too, so that a retained graph nothing holds any more is freed
    tape.stale = True
    if tape.foreign and tape.kind == EAGER:
        _backward_chained(tape, retain_graph)
        return
    # the common case: one tape. Every gradient is read before any is added: adding into
    # a .grad (a hook, a tensor .grad) must not find the tape changed under the loop
    found = [(leaf, tape.read_grad(s)) for s, leaf in tape.leaves]
    for leaf, g in found:
        if g is not None:
            accumulate_grad(leaf, g)


def backward_graph(t: Tensor, gradient: Any = None) -> None:
    """``backward(create_graph=True)``: the gradients added into ``.grad`` are tensors
    recorded in the graph (:func:`tapegrad.rule_walks.reverse`), so they can be
    differentiated again. The graph is kept (as PyTorch's ``retain_graph`` defaults to
    ``create_graph``)."""
    seed = gradient if isinstance(gradient, Tensor) else _seed(t, gradient)
    if seed is None:
        seed = np.ones(t.shape, t.dtype)
    elif isinstance(seed, Tensor) and seed.shape != t.shape:
        raise RuntimeError(
            f"backward: gradient has shape {seed.shape}, the tensor has shape {t.shape}"
        )
    home = home_of(t)
    if home is None:
        if graph_freed(t):
            raise RuntimeError(FREED_MESSAGE)
        if not t.requires_grad:
            raise RuntimeError(NO_GRAD_MESSAGE)
        accumulate_grad(t, seed)
        return
    tape, slot = home
    if not tape.slot_rg(slot):
        raise RuntimeError(NO_GRAD_MESSAGE)
    grads = graph_gradients(tape, slot, seed, None)
    per_leaf: dict[int, list] = {}  # a leaf bound to several slots: one sum, hooks once
    for s, leaf in tape.leaves:
        g = grads.get(s)
        if g is not None:
            entry = per_leaf.setdefault(id(leaf), [leaf, None])
            entry[1] = g if entry[1] is None else entry[1] + g
    for leaf, g in per_leaf.values():
        accumulate_grad(leaf, g)


def graph_gradients(tape: Tape, root: int, seed: Any, wanted: set[int] | None) -> dict:
    """Recorded gradients of slot ``root`` of ``tape`` (the current tape) by slot:
    :func:`tapegrad.rule_walks.reverse` with grad mode on and the tape kept from being
    rewound while the walk records into it."""
    # the top of the stack, not current_tape(): a stale tape (an earlier backward with
    # retain_graph) is differentiated again, not rewound or handed over first
    if tape is not tape_stack()[-1]:
        raise NotImplementedError(
            "differentiating a recorded graph as ops (backward(create_graph=True), or a "
            "transform of tensors that require grad, or its vjp function) after its tape "
            "stopped being the current one: inside another transform, on another thread, "
            "or after a backward() freed or handed it over. Record the graph and "
            "differentiate it in the same scope, before other backward passes"
        )
    if tape.capture is not None and wanted is None:
        raise RuntimeError(
            "backward(create_graph=True) inside a function being captured by tg.compile: "
            "compute the inner gradient with tg.grad"
        )
    stale, tape.stale = tape.stale, False
    try:
        with enable_grad():
            grads = rule_walks.reverse(tape, [(root, seed)], wanted, _graph_hooks)
    finally:
        tape.stale = tape.stale or stale
    if tape.kind == EAGER and tape.foreign:
        # a result of a handed-over tape used here (tensors._bind_chained): the walk
        # cannot follow it into that tape, so its gradient would stop here
        chained = {entry[0] for entry in tape.foreign.values()}
        if not chained.isdisjoint(s for s, g in grads.items() if g is not None):
            raise NotImplementedError(
                "create_graph=True through a tensor kept from an earlier step's graph (its "
                "tape was handed over when a backward finished): the recorded derivative "
                "cannot follow it there. Recompute it in this step, or .detach() it"
            )
    return grads


def _graph_hooks(hooks: list, g: Any) -> Any:
    """Gradient hooks in a create_graph walk: they get (and may return) tensors."""
    for fn in sorted(hooks, key=lambda f: getattr(f, "_retain", False)):
        r = fn(g)
        if r is not None:
            if tuple(np.shape(r)) != tuple(g.shape):
                name = getattr(fn, "__name__", fn)
                raise RuntimeError(
                    f"hook {name!r} returned a gradient of shape {np.shape(r)}, expected {g.shape}"
                )
            g = r
    return g


def _drive_owned(tape: Tape, root: int, seed: np.ndarray | None, retain_graph: bool) -> None:
    """:func:`_drive` for a user's backward: on the thread that records into ``tape``,
    or, once that thread has ended, under the tape's lock (two threads running one
    dead thread's graph)."""
    if tape.thread == threading.get_ident():
        _drive(tape, root, seed, retain_graph, True)
        return
    if thread_alive(tape.thread):
        raise RuntimeError(
            "backward() of a graph recorded by another thread that is still running: its "
            "tape (values, gradient buffers) is that thread's, which may be using it now. "
            "Run the backward in that thread, or after it has ended"
        )
    with tape.lock:
        _drive(tape, root, seed, retain_graph, True)


def _backward_chained(tape: Tape, retain_graph: bool) -> None:
    """The rest of a backward whose graph used held results of handed-over tapes
    (``tensors._bind_chained``): continue into each such tape once, newest first, with
    all the gradients that reach it (a chained slot only ever names an earlier
    handover, so every seed of a tape is known before it runs), then add each leaf's
    total into ``.grad`` once, as a single graph's backward would: hooks see the sum."""
    leaf_grads: dict[int, list] = {}
    pending: dict[Tape, dict[int, np.ndarray]] = {}
    _collect(tape, leaf_grads, pending)
    while pending:
        home = max(pending, key=lambda tp: tp.handed_over)
        root, seed = _merged_root(home, pending.pop(home))
        _drive_owned(home, root, seed, retain_graph)
        _collect(home, leaf_grads, pending)
    for leaf, g in leaf_grads.values():
        accumulate_grad(leaf, g)


def _collect(tape: Tape, leaf_grads: dict, pending: dict) -> None:
    """Gather what the backward just run in ``tape`` found: leaf gradients (summed per
    leaf) and the seeds of handed-over tapes (summed per slot)."""
    for slot, leaf in tape.leaves:
        g = tape.read_grad(slot)
        if g is not None:
            entry = leaf_grads.setdefault(id(leaf), [leaf, None])
            entry[1] = added(entry[1], g)
    if tape.kind != EAGER:
        return
    for slot, _, home, home_slot in tape.foreign.values():
        g = tape.read_grad(slot)
        if g is not None:
            seeds = pending.setdefault(home, {})
            seeds[home_slot] = added(seeds.get(home_slot), g)


def _merged_root(home: Tape, seeds: dict[int, np.ndarray]) -> tuple[int, np.ndarray | None]:
    """One root for several seeds into a handed-over tape: ``sum_i sum(r_i * c_i)`` of its
    held results ``r_i`` with constants ``c_i = g_i``, recorded there once per set of
    seeded slots, whose gradient at each ``r_i`` is exactly ``g_i`` (so the tape runs
    backward once, and hooks in it see summed gradients). A later backward into the
    same slots (``retain_graph``) refills the constants in place instead of recording
    again, so the tape does not grow."""
    if len(seeds) == 1:
        return next(iter(seeds.items()))
    key = tuple(sorted(seeds))
    cached = home.merged.get(key)
    if cached is not None:
        root, buffers = cached
        for slot, buf in zip(key, buffers, strict=True):
            np.copyto(buf, seeds[slot])
        return root, None
    home.pinned = True  # recording here must not rewind the tape
    enter(EAGER, grad_enabled=True, tape=home)
    try:
        total, buffers = None, []
        for slot in key:
            c, buf = constant(seeds[slot])
            buffers.append(buf)
            part = elementwise(MUL, slot_handle(home, slot), c)
            nd = part.ndim
            code = DTYPE_CODE[part.dtype]
            part = general(SUM, code, [part], [(code, ())], [nd, *range(nd)], [1.0])
            total = part if total is None else elementwise(ADD, total, part)
    finally:
        leave(home, keep=True)
        home.pinned = False
    root = home_of(total)[1]
    home.merged[key] = (root, buffers)
    return root, None


def gradients(
    out: Tensor, inputs: list[Tensor], gradient: Any = None, retain_graph: bool = False
) -> list[np.ndarray | None]:
    """d(out)/d(input) pulled back from ``gradient`` for each of ``inputs`` (leaves),
    or None where ``out`` does not depend on one; no ``.grad`` is changed (PyTorch's
    ``torch.autograd.grad``)."""
    seed = _seed(out, gradient)
    home = home_of(out)
    if home is None:  # the output is a leaf itself
        ones = np.ones(out.shape, out.dtype) if seed is None else seed
        return [ones.copy() if t is out and out.requires_grad else None for t in inputs]
    tape, slot = home
    if not tape.slot_rg(slot):
        return [None] * len(inputs)
    _drive(tape, slot, seed, retain_graph, False)
    found: list[np.ndarray | None] = [None] * len(inputs)
    where = {id(t): i for i, t in enumerate(inputs)}
    for slot, leaf in tape.leaves:
        i = where.get(id(leaf))
        if i is not None and inputs[i] is leaf:
            g = tape.read_grad(slot)
            if g is not None:
                found[i] = g if found[i] is None else found[i] + g
    for i, t in enumerate(inputs if _LEAF_HOOKS.entries else ()):  # hooks on the inputs
        hooks = _LEAF_HOOKS.get(t)
        if hooks and found[i] is not None:
            with callback_tape():
                found[i] = _run_hooks(hooks, found[i], "a leaf tensor")
    if not retain_graph:
        tape.stale = True
    return found


def accumulate_grad(leaf: Tensor, g: Any) -> None:
    """Add ``g`` into ``leaf.grad`` (running its hooks, on a callback tape, if any); a
    tensor ``g`` (create_graph) is added as a tensor, its hooks run with grad on."""
    if isinstance(g, Tensor):
        hooks = _LEAF_HOOKS.get(leaf)
        if hooks:
            g = _graph_hooks(hooks, g)
        add_grad(leaf, g)
        for fn in list(_POST_HOOKS.get(leaf) or ()):
            fn(leaf)
        return
    if not _LEAF_HOOKS.entries and not _POST_HOOKS.entries:  # no leaf has hooks
        add_grad(leaf, g)
        return
    hooks = _LEAF_HOOKS.get(leaf)
    post = _POST_HOOKS.get(leaf)
    if not hooks and not post:
        add_grad(leaf, g)
        return
    with callback_tape():
        if hooks:
            g = _run_hooks(hooks, g, "a leaf tensor")
        add_grad(leaf, g)
        for fn in list(post or ()):
            fn(leaf)


def backward_stats() -> dict[str, int]:
    """Return counts of this thread's last backward pass.

    The nodes the pass ran, and how many of them called back into Python (nodes of
    custom functions with a Python backward): a backward pass of ordinary ops, or of
    custom functions with a compiled ``backward_kernel``, makes no callback.

    Returns
    -------
    dict of str to int
        ``{"nodes": ..., "python_callbacks": ...}``; both 0 before the first backward
        pass on this thread.

    Examples
    --------
    >>> import tapegrad as tg, tapegrad.numpy as tnp
    >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
    >>> tnp.sum(tnp.sin(x) * x).backward()
    >>> tg.backward_stats()
    {'nodes': 3, 'python_callbacks': 0}
    """
    h = getattr(_last, "header", None)
    if h is None:
        return {"nodes": 0, "python_callbacks": 0}
    return {"nodes": int(h[H_STAT_NODES]), "python_callbacks": int(h[H_STAT_CALLBACKS])}


# --- callbacks -----------------------------------------------------------------------------


def grad_view(tape: Tape, slot: int) -> np.ndarray:
    """A writable view of ``slot``'s gradient buffer in the running backward (callers
    ask only for slots that have one: ``Tape.grad_view`` is None otherwise)."""
    return tape.grad_view(slot)


def _has_grad(tape: Tape, slot: int) -> bool:
    return tape.slot_field(S_GEN, slot) == tape.h[H_GEN]


def _run_node_hooks(tape: Tape, k: int) -> None:
    _, outs = tape.node_links(k)
    for s in outs:
        if tape.slot_field(S_FLAGS, s) & SLOT_HOOK and _has_grad(tape, s):
            view = grad_view(tape, s)
            with callback_tape():
                new = _run_hooks(tape.hooks.get(s, []), view.copy(), "a tensor")
            view[...] = new


def run_python_node(tape: Tape, k: int, retain: bool) -> None:
    """Run a custom function's Python backward for node ``k`` and add what it returns
    into the inputs' gradient buffers."""
    cls, ctx, nargs, positions = tape.custom_entry(k)
    if ctx is None:
        raise RuntimeError(FREED_MESSAGE)
    name = rule_walks.node_name(tape, k)  # a primitive says "primitive <name>"
    ins, outs = tape.node_links(k)
    grads = [
        grad_view(tape, s).copy()
        if _has_grad(tape, s)
        else np.zeros(tape.slot_shape(s), NP_DTYPES[tape.slot_field(S_DTYPE, s)])
        for s in outs
    ]
    mask = tape.node_field(N_MASK, k)
    wanted = [
        (tape.slot_shape(s), tape.slot_dtype(s)) if (mask >> i) & 1 else None
        for i, s in enumerate(ins)
    ]
    found = custom_backward(cls, ctx, nargs, positions, grads, wanted)
    anomaly = tape.h[H_ANOMALY]
    for i, (s, g) in enumerate(zip(ins, found)):
        if g is None:
            continue
        if anomaly and not np.all(np.isfinite(g)):
            raise RuntimeError(
                f"Function '{name}' returned nan or inf values in its {i}th "
                f"input gradient; the op was recorded at "
                f"{tape.sources.get(k, '<unknown>')}"
            )
        view = grad_view(tape, s)
        view += g
    tape.h[H_STAT_NODES] += 1
    if not retain:
        tape.set_node_bits(k, NODE_FREED)
        tape.set_custom_entry(k, (cls, None, nargs, positions))


def custom_backward(
    cls: type, ctx: Any, nargs: int, positions: list[int], grads: list, wanted: list
) -> list[np.ndarray | None]:
    """A custom function's Python ``backward`` on the cotangents ``grads`` (one array per
    output), on a callback tape: what it returns, validated (count, real numbers, shape:
    a gradient the input broadcasts to is summed down, PyTorch's validate_outputs) and
    cast, per tensor input. ``wanted[i]``: input ``i``'s ``(shape, dtype)``, or None if
    it needs no gradient."""
    name = cls.__name__
    with callback_tape():
        result = cls.backward(ctx, *grads)
    result = result if isinstance(result, tuple) else (result,)
    nin = len(wanted)
    if len(result) == nin and nin != nargs and len(result) != nargs:
        per_input = list(result)
    elif len(result) == nargs:
        per_input = [result[p] for p in positions]
    else:
        raise RuntimeError(
            f"function {name}.backward returned {len(result)} gradients, "
            f"expected {nargs} (one per forward argument)"
        )
    found: list[np.ndarray | None] = []
    for i, (g, want) in enumerate(zip(per_input, wanted)):
        if g is None or want is None:
            found.append(None)
            continue
        g = user_gradient(values_of(g), f"function {name}.backward (gradient {i})")
        found.append(_reduce_to(g, want[0], name, i).astype(want[1], copy=False))
    return found


def _reduce_to(g: np.ndarray, shape: tuple[int, ...], name: str, i: int) -> np.ndarray:
    """PyTorch's validate_outputs: a gradient the input broadcasts to is summed down to
    the input's shape; any other shape is an error naming the function."""
    if g.shape == shape:
        return g
    try:
        if np.broadcast_shapes(shape, g.shape) != g.shape:
            raise ValueError
    except ValueError:
        raise RuntimeError(
            f"function {name}.backward returned an invalid gradient at index "
            f"{i}: got shape {g.shape} but expected shape compatible with "
            f"{shape}"
        ) from None
    lead = g.ndim - len(shape)
    g = g.sum(axis=tuple(range(lead))) if lead else g
    axes = tuple(d for d, n in enumerate(shape) if n == 1 and g.shape[d] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


def raise_backward_error(tape: Tape, st: int) -> None:
    """Raise the exception for a failed backward status (statuses that ``Tape.fix``
    can repair -- a kernel to compile, a bigger gradient arena -- return)."""
    h = tape.h
    if st == E_PYTHON:  # a kernel running as Python raised (tapegrad.tiers)
        raise_pending()
    if st == E_FREED:
        raise RuntimeError(FREED_MESSAGE)
    if st == E_NO_BWD:
        raise NotImplementedError(
            f"backward of '{rule_walks.node_name(tape, h[H_ERR_A])}' is not "
            "implemented (the op table has no backward rule for it)"
        )
    if st == E_LINALG:
        raise np.linalg.LinAlgError(
            f"backward of '{rule_walks.node_name(tape, h[H_ERR_A])}': singular matrix"
        )
    if st == E_NONFINITE:
        k, i = h[H_ERR_A], h[H_ERR_B]
        raise RuntimeError(
            f"Function '{rule_walks.node_name(tape, k)}' returned nan or inf values in "
            f"its {i}th input gradient; the op was recorded at "
            f"{tape.sources.get(k, '<unknown>')}"
        )
    if st == E_VERSION:
        raise rule_walks.version_error(tape, h[H_ERR_A], h[H_ERR_B], h[H_ERR_C], h[H_ERR_D])
    if st == E_GRAD_META:
        node, s, expect, actual = h[H_ERR_A], h[H_ERR_B], h[H_ERR_C], h[H_ERR_D]
        got = DTYPE_NAMES[actual] if 0 <= actual < len(DTYPE_NAMES) else str(actual)
        raise gradient_buffer_error(
            rule_walks.node_name(tape, node),
            f"node {node}, slot {s}",
            f"dtype {DTYPE_NAMES[expect]}",
            got,
        )
