"""Python walks of a recorded graph, for the two modes the compiled scheduler does not run.

* **Reverse, recording** (:func:`reverse`): ``backward(create_graph=True)`` and a
  transform whose arguments require grad (``tg.grad(tg.grad(f))``). Nodes run in
  reverse recording order, as in the scheduler, but each node's derivative is computed by
  its row's ``vjp`` rule *as recorded ops* on the same tape, so the gradients are
  tensors in the graph and can be differentiated again (PyTorch's double backward).
* **Forward** (:func:`forward`): tangents pushed through the nodes in recording order by
  each row's ``jvp`` rule (``tg.jvp``, ``tg.jacfwd``, forward-over-reverse Hessians).

The rules come from the op table (``Op.vjp`` / ``Op.jvp``, attached by
:mod:`tapegrad.derivatives`): one derivative per row serves the compiled first-order
backward, this walk, and forward mode. A node a rule cannot handle (a custom function
whose backward is NumPy code, a compiled user kernel) raises; nothing is skipped.

tapegrad's own custom functions (``tg.checkpoint``, a compiled step called in a graph, an
ODE solve) may carry what a user's cannot: a recorded rule, ``vjp_graph(ctx, tape, k,
needs, gs)`` for this walk (one gradient per input, recorded ops on ``tape``; they
re-run their function), and ``refusal(ctx, mode)``, the error that names the public
function a node without one came from and what to do instead.

First-order ``backward()`` never comes here: it stays one compiled call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import dispatch
from .handles import slot_handle
from .layout import H_INPLACE, H_NSLOTS, N_FLAGS, N_OP, NODE_FREED, S_FLAGS, S_NODE, SLOT_HOOK
from .ops import ELEMENTWISE, ROWS, Kind
from .record import mark_backward, mark_forward
from .tape import Tape
from .tensors import FREED_MESSAGE
from .tiers import call


class NodeView:
    """What a rule sees of node ``k``: its row, operands and parameters.

    ``ins`` / ``outs`` hold a tensor (a handle on the slot, so ops on it are recorded
    in the graph) for a value that requires grad, and a fresh NumPy copy for one that
    does not (a constant to every derivative; a handle too inside a capture, where
    ``capturing`` is set). ``needs[i]``: input ``i`` wants a gradient (reverse walk) or
    carries a tangent (forward walk).
    """

    __slots__ = (
        "capturing",
        "fp",
        "in_dtypes",
        "in_shapes",
        "ins",
        "ip",
        "k",
        "needs",
        "op",
        "out_dtypes",
        "out_shapes",
        "outs",
    )

    def __init__(self, tape: Tape, k: int, ins: list[int], outs: list[int], needs: list) -> None:
        self.k = k
        self.op = ROWS[tape.node_field(N_OP, k)]
        self.ins = [_value(tape, s) for s in ins]
        self.outs = [_value(tape, s) for s in outs]
        self.in_shapes = [tape.slot_shape(s) for s in ins]
        self.in_dtypes = [tape.slot_dtype(s) for s in ins]
        self.out_shapes = [tape.slot_shape(s) for s in outs]
        self.out_dtypes = [tape.slot_dtype(s) for s in outs]
        self.ip, self.fp = tape.node_params(k)
        self.needs = needs
        self.capturing = tape.capture is not None

    @property
    def dtype(self) -> np.dtype:
        """The node's computation dtype (its kernel signature)."""
        return self.out_dtypes[0]


def _value(tape: Tape, s: int) -> Any:
    # inside a capture (tg.compile) every operand is a handle: a value read here would be
    # a constant of the program, stale when it replays with new inputs
    if tape.slot_rg(s) or tape.capture is not None:
        return slot_handle(tape, s)
    return tape.read(s)


def node_name(tape: Tape, k: int) -> str:
    """The op of node ``k``: its row, or its custom function's class (or what the class
    says errors call it: ``primitive logsumexp`` for a ``tapegrad.extend`` primitive)."""
    op = tape.node_field(N_OP, k)
    if op < len(ROWS):
        return ROWS[op].name
    if op == len(ROWS):
        cls, ctx = tape.custom_entry(k)[:2]
        describe = getattr(cls, "describe", None)
        return describe(ctx) if describe is not None and ctx is not None else cls.__name__
    return dispatch.USER_FUNCTIONS[op - len(ROWS) - 1].__name__


def _check_node(tape: Tape, k: int, bits: int) -> None:
    """The scheduler's checks, for a node a Python walk is about to differentiate."""
    if tape.node_field(N_FLAGS, k) & NODE_FREED:
        raise RuntimeError(FREED_MESSAGE)
    changed = tape.changed_operand(k, bits)
    if changed is not None:
        raise version_error(tape, k, *changed)


def version_error(tape: Tape, k: int, s: int, saved: int, now: int) -> RuntimeError:
    """PyTorch's error for a saved value changed in place before the backward read it."""
    return RuntimeError(
        "one of the values needed for gradient computation has been modified by an "
        f"in-place operation: '{node_name(tape, k)}' (node {k}) saved slot {s} at "
        f"version {saved}, which is now version {now}"
    )


def producer(tape: Tape, s: int) -> int:
    """The node that made slot ``s`` (-1 for a leaf or a constant)."""
    return tape.slot_field(S_NODE, s)


def reach(tape: Tape, sources: set[int], hi: int) -> tuple[np.ndarray, int]:
    """Which slots depend on ``sources`` through nodes ``lo .. hi - 1`` (``mark[s]`` is
    1, a uint8 array over the tape's slots: the compiled walk ``record.mark_forward``),
    and ``lo`` (the first node that can read a source)."""
    lo = max(0, min((producer(tape, s) + 1 for s in sources), default=0))
    mark = np.zeros(tape.h[H_NSLOTS], np.uint8)
    mark[list(sources)] = 1
    call(mark_forward, tape.header, mark, lo, hi)
    return mark, lo


def _accumulate(grads: dict, s: int, g: Any) -> None:
    old = grads.get(s)
    grads[s] = g if old is None else old + g


def full(g: Any, shape: tuple[int, ...]) -> Any:
    """A gradient at its slot's shape. A reduction's rule may return its cotangent
    broadcastable to the input's shape rather than broadcast (elementwise rules
    broadcast it for free); it is materialised only where a shape must be exact: array
    rules, hooks, and what the walk returns."""
    if tuple(np.shape(g)) == shape:
        return g
    return np.broadcast_to(g, shape)  # a tensor's protocol records broadcast_to


def reverse(
    tape: Tape,
    roots: list[tuple[int, Any]],
    wanted: set[int] | None = None,
    run_hooks: Callable | None = None,
) -> dict[int, Any]:
    """Gradients, as recorded tensors, of the roots ``(slot, seed)`` of ``tape``.

    Parameters
    ----------
    tape
        The tape holding the graph; the derivative ops are recorded into it (the caller
        makes it the current tape).
    roots
        ``(slot, seed)`` pairs: the seed is the root's cotangent (a tensor, which may
        itself require grad, or an array).
    wanted
        Only paths from these slots to the roots are walked (a transform's arguments);
        None: every slot that requires grad.
    run_hooks
        ``run_hooks(hooks, grad) -> grad`` for the gradient hooks of intermediate
        tensors, called once a tensor's gradient is complete.

    Returns
    -------
    dict
        Slot -> gradient (tensor or array) for the slots reached that no walked node
        produced: leaves, constants, and the ``wanted`` slots.
    """
    grads: dict[int, Any] = {}
    for s, seed in roots:
        _accumulate(grads, s, seed)
    hi = max(producer(tape, s) for s, _ in roots) + 1
    live, lo = reach(tape, wanted, hi) if wanted is not None else (None, 0)
    for k in range(hi - 1, lo - 1, -1):
        ins, outs = tape.node_links(k)
        # complete: no later node reads them (a wanted slot's is returned)
        gs = [grads.get(s) if wanted and s in wanted else grads.pop(s, None) for s in outs]
        if all(g is None for g in gs):
            continue
        if run_hooks is not None:
            for j, s in enumerate(outs):
                if gs[j] is not None and tape.slot_field(S_FLAGS, s) & SLOT_HOOK:
                    gs[j] = run_hooks(tape.hooks.get(s, []), full(gs[j], tape.slot_shape(s)))
        needs = [tape.slot_rg(s) and (live is None or bool(live[s])) for s in ins]
        if not any(needs):
            continue
        code = tape.node_field(N_OP, k)
        if code >= len(ROWS):
            gs = [g if g is None else full(g, tape.slot_shape(s)) for g, s in zip(gs, outs)]
            for s, n, g in zip(ins, needs, _custom_vjp(tape, k, needs, gs)):
                if n and g is not None:
                    _accumulate(grads, s, g)
            continue
        op = ROWS[code]
        if not op.differentiable:
            continue
        if op.vjp is None:
            raise NotImplementedError(f"create_graph: '{op.name}' has no recorded derivative")
        bits = 0
        for i, n in enumerate(needs if tape.h[H_INPLACE] else ()):  # (no in-place: no check)
            if n:
                bits |= op.saved_mask_for(i)
        _check_node(tape, k, bits)
        node = NodeView(tape, k, ins, outs, needs)
        if op.kind not in ELEMENTWISE:
            gs = [g if g is None else full(g, shape) for g, shape in zip(gs, node.out_shapes)]
        for s, n, g in zip(ins, needs, op.vjp(node, gs)):
            if n and g is not None:
                _accumulate(grads, s, g)
    return {s: full(g, tape.slot_shape(s)) for s, g in grads.items()}


def custom_rules(tape: Tape, k: int) -> tuple[type, Any] | None:
    """``(class, ctx)`` of custom-function node ``k`` (a Python backward); None for a
    compiled user kernel."""
    if tape.node_field(N_OP, k) != len(ROWS):
        return None
    cls, ctx, _, _ = tape.custom_entry(k)
    if ctx is None:
        raise RuntimeError(FREED_MESSAGE)
    return cls, ctx


def _custom_vjp(tape: Tape, k: int, needs: list, gs: list) -> list:
    """The recorded gradients of custom node ``k``'s inputs (its ``vjp_graph``), or the
    error that says why there are none."""
    found = custom_rules(tape, k)
    if found is not None:
        cls, ctx = found
        rule = getattr(cls, "vjp_graph", None)
        if rule is not None:
            return rule(ctx, tape, k, needs, gs)
        refusal = getattr(cls, "refusal", None)
        if refusal is not None:
            raise NotImplementedError(refusal(ctx, "reverse"))
    raise NotImplementedError(
        f"create_graph / higher-order derivatives through custom function "
        f"'{node_name(tape, k)}': its backward computes on NumPy arrays, so the "
        "gradients it returns cannot be differentiated again. Write it with "
        "tapegrad.numpy ops instead of a Function, or differentiate once"
    )


def forward(
    tape: Tape,
    tangents: dict[int, Any],
    hi: int,
    custom_jvp: Callable | None = None,
    targets: set[int] | None = None,
) -> dict[int, Any]:
    """Push ``tangents`` (slot -> tangent) through the nodes of ``tape`` recorded before
    node ``hi``, in recording order; returns the tangents of every slot reached.

    ``custom_jvp(tape, k, tangents_in) -> tangents_out`` handles custom-function nodes.
    ``targets``: only nodes some of these slots depend on are pushed through (a value
    read for a decision and then detached, such as ``logsumexp``'s shifting max, is
    not, so its tangent rule is never asked for).
    """
    lo = max(0, min(producer(tape, s) + 1 for s in tangents))
    needed = None
    if targets is not None:  # the nodes the targets depend on: record.mark_backward
        wanted = np.zeros(tape.h[H_NSLOTS], np.uint8)
        wanted[list(targets)] = 1
        needed = np.zeros(hi, np.uint8)
        call(mark_backward, tape.header, wanted, lo, hi, needed)
    for k in range(lo, hi):
        if needed is not None and not needed[k]:
            continue
        ins, outs = tape.node_links(k)
        ts = [tangents.get(s) for s in ins]
        if all(t is None for t in ts):
            continue
        code = tape.node_field(N_OP, k)
        if code >= len(ROWS):
            if code > len(ROWS) or custom_jvp is None:
                raise NotImplementedError(
                    f"forward mode through '{node_name(tape, k)}': a compiled custom "
                    "kernel has no tangent rule"
                )
            result = custom_jvp(tape, k, ts)
        else:
            op = ROWS[code]
            if not op.differentiable or op.kind is Kind.COMPARE:
                continue
            if op.jvp is None:
                raise NotImplementedError(f"forward mode: '{op.name}' has no tangent rule")
            _check_node(tape, k, op.saved_mask)
            node = NodeView(tape, k, ins, outs, [t is not None for t in ts])
            result = op.jvp(node, ts)
        for s, t in zip(outs, result):
            if t is not None:
                tangents[s] = t
    return tangents
