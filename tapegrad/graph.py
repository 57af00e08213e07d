"""The graph as data: ``t.grad_fn``, saved values, a functional backward, pictures.

A recorded op is a row of the tape's typed tables, not a Python object. ``t.grad_fn``
builds a light view of the node that made ``t`` only when asked (:class:`Node`), with
PyTorch's and the functional-autograd seed's API:

* ``name``, ``next_functions`` (one ``(node, output index)`` per input; a leaf is an
  :class:`AccumulateGrad` holding it, a constant ``(None, 0)``) and ``metadata`` (each
  input's shape, dtype and requires-grad flag: what the scheduler validates against);
* ``saved()``: the values the backward reads, copied (read-only), in link order: inputs
  ``x, y, z`` then outputs; exactly the operands the row's saved mask names (for an
  elementwise row, what its formulas read). A freed graph or a value changed in place
  since it was recorded raises, as PyTorch's ``_saved_*`` attributes do;
* ``functional()``: ``fn(grads, saved) -> input gradients``, the row's **compiled**
  backward run on the given arrays: the node is recorded again on a scratch tape of
  its own, from ``saved`` (and zeros for operands the backward does not read), and
  its backward runs there. The original tape is not touched; outputs are fresh.

A view belongs to one tape epoch: once the tape is rewound (its memory reused by the
next step) every access raises the freed-graph error, so a view never shows memory
the tape reuses. :func:`print_graph` and :func:`to_dot` draw the graph from a tensor;
``tg.compile(...).graph()`` draws a captured program the same way, with its guards.
"""

from __future__ import annotations

import linecache
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from . import rule_walks
from .engine import custom_backward, gradients
from .function import FunctionCtx
from .handles import graph_freed, home_of
from .layout import DTYPE_CODE, N_FLAGS, N_OP, N_SIG, NODE_FREED, OUTPUT_BIT0
from .ops import ROWS
from .recording import general, tensor
from .shapes import user_gradient
from .tape import CAPTURE, TRANSFORM, Tape, enter, leave
from .tensors import FREED_MESSAGE, Tensor, serial, values_of

__all__ = [
    "AccumulateGrad",
    "InputMetadata",
    "Node",
    "grad_fn",
    "output_nr",
    "print_graph",
    "to_dot",
]


class InputMetadata(NamedTuple):
    """Describe an input of a node as the backward validates its gradient.

    One per input in :attr:`Node.metadata`: the gradient buffer the backward
    accumulates into must have this shape and dtype.

    Parameters
    ----------
    shape : tuple of int
        The input's shape.
    dtype : numpy.dtype
        The input's dtype.
    requires_grad : bool
        Whether the input wants a gradient.

    Raises
    ------
    TypeError
        A field is missing (a named tuple of exactly three fields).

    See Also
    --------
    Node : The node whose inputs these describe.

    Examples
    --------
    >>> import tapegrad as tg, tapegrad.numpy as tnp
    >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
    >>> y = tnp.sum(x * 3.0)
    >>> y.grad_fn.metadata
    (InputMetadata(shape=(2,), dtype=dtype('float64'), requires_grad=True),)
    """

    shape: tuple[int, ...]
    dtype: np.dtype
    requires_grad: bool


class AccumulateGrad:
    """Stand for a leaf at the end of the graph: its gradient goes into ``variable.grad``.

    :attr:`Node.next_functions` holds one for each input that is a leaf requiring
    grad, as PyTorch's graph does.

    Parameters
    ----------
    variable : Tensor
        The leaf.

    Attributes
    ----------
    variable : Tensor
        The leaf.
    name : str
        ``"AccumulateGrad"``.
    next_functions : tuple
        Empty: nothing comes before a leaf.

    Raises
    ------
    AttributeError
        From ``repr``: ``variable`` has no ``shape`` or ``dtype`` (the graph makes
        these objects from leaf tensors only).

    See Also
    --------
    Node : The nodes between the leaves and a result.

    Examples
    --------
    >>> import tapegrad as tg, tapegrad.numpy as tnp
    >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
    >>> y = tnp.sum(x * 3.0)
    >>> mul = y.grad_fn.next_functions[0][0]
    >>> acc = mul.next_functions[0][0]
    >>> acc, acc.variable is x
    (<AccumulateGrad of a leaf (2,) float64>, True)
    """

    name = "AccumulateGrad"
    next_functions: tuple = ()

    def __init__(self, variable: Tensor) -> None:
        self.variable = variable

    def __repr__(self) -> str:
        t = self.variable
        return f"<AccumulateGrad of a leaf {t.shape} {t.dtype}>"


_NODES: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


class Node:
    """A read-only view of a recorded op: what ``t.grad_fn`` returns.

    A recorded op is a row of the tape's typed tables, not a Python object; a view is
    built only when asked, one object per node while anyone holds it. It offers
    PyTorch's and the functional-autograd seed's API:

    * ``name``, ``next_functions`` (one ``(node, output index)`` per input; a leaf is
      an :class:`AccumulateGrad` holding it, a constant ``(None, 0)``), ``metadata``
      (each input's :class:`InputMetadata`) and ``outputs`` (each output's shape and
      dtype);
    * ``saved()``: the values the backward reads, copied (read-only), in link order:
      inputs ``x, y, z`` then outputs; exactly the operands the row's saved mask
      names;
    * ``functional()``: ``fn(grads, saved) -> input gradients``, the row's compiled
      backward run on the given arrays, on a scratch tape of its own (the original
      tape is not touched; outputs are fresh).

    A view belongs to one tape epoch: once the tape is rewound (its memory reused by
    the next step) every access raises the freed-graph error.

    Parameters
    ----------
    tape : Tape
        The tape that recorded the op (internal: views come from ``t.grad_fn`` and
        :func:`grad_fn`).
    k : int
        The node's row in the tape.

    Raises
    ------
    RuntimeError
        From its attributes and methods: the graph was freed (the tape was rewound,
        or a backward pass freed the saved values); from ``saved()``: a saved value
        was changed in place since it was recorded, or the node was recorded inside
        ``tg.compile``.

    See Also
    --------
    grad_fn : The node that made a tensor.
    print_graph : The whole graph, printed.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
    >>> y = tnp.sum(tnp.sin(x) * x)
    >>> y.grad_fn  # (node numbers are rows of the tape)
    <sum node ...>
    >>> mul = y.grad_fn.next_functions[0][0]
    >>> mul.name, mul.next_functions
    ('multiply', ((<sin node ...>, 0), (<AccumulateGrad of a leaf (2,) float64>, 0)))
    >>> mul.saved()  # sin(x) and x
    [array([0.84147098, 0.90929743]), array([1., 2.])]

    The compiled backward as a function of arrays: d(a * b) = (g * b, g * a).

    >>> backward = mul.functional()
    >>> backward([np.ones(2)], [np.array([1.0, 1.0]), np.array([3.0, 4.0])])
    (array([3., 4.]), array([1., 1.]))
    """

    __slots__ = ("__weakref__", "_era", "_home", "_k")

    def __new__(cls, tape: Tape, k: int) -> Node:
        # one object per node while anyone holds it, as PyTorch's grad_fn: graph walkers
        # key on id() (torchviz does). The key's tape is alive while its node is.
        key = (id(tape), k, tape.epoch)
        node = _NODES.get(key)
        if node is None:
            node = object.__new__(cls)
            node._home, node._k, node._era = tape, k, tape.epoch
            _NODES[key] = node
        return node

    # --- identity --------------------------------------------------------------------
    def _live(self) -> Tape:
        if self._home.epoch != self._era:  # rewound: the rows belong to other ops now
            raise RuntimeError(FREED_MESSAGE)
        return self._home

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Node) and (other._home, other._k, other._era) == (
            self._home,
            self._k,
            self._era,
        )

    def __hash__(self) -> int:
        return hash((id(self._home), self._k, self._era))

    @property
    def name(self) -> str:
        """The op, as in the op reference (a custom function: its class name)."""
        return rule_walks.node_name(self._live(), self._k)

    def _links(self) -> tuple[list[int], list[int]]:
        return self._live().node_links(self._k)

    def _row(self) -> Any:
        code = self._live().node_field(N_OP, self._k)
        return ROWS[code] if code < len(ROWS) else None

    # --- structure -------------------------------------------------------------------
    @property
    def next_functions(self) -> tuple[tuple[Any, int], ...]:
        """One ``(node or None, output index)`` per input: the node that made it, an
        :class:`AccumulateGrad` for a leaf that requires grad, None for a constant."""
        tape = self._live()
        ins, _ = self._links()
        leaves = dict(tape.leaves)
        return tuple(_producer(tape, s, leaves) for s in ins)

    @property
    def metadata(self) -> tuple[InputMetadata, ...]:
        """Each input's shape, dtype and requires-grad flag."""
        tape = self._live()
        ins, _ = self._links()
        return tuple(
            InputMetadata(tape.slot_shape(s), tape.slot_dtype(s), tape.slot_rg(s)) for s in ins
        )

    @property
    def outputs(self) -> tuple[tuple[tuple[int, ...], np.dtype], ...]:
        """Each output's shape and dtype (internal outputs included: prod's non-zero
        product and zero count, max's tie count)."""
        tape = self._live()
        _, outs = self._links()
        return tuple((tape.slot_shape(s), tape.slot_dtype(s)) for s in outs)

    # --- saved values ----------------------------------------------------------------
    def _saved_bits(self) -> int:
        row = self._row()
        if row is None:
            return 0
        return row.saved_mask

    def _saved_links(self) -> list[int]:
        """Positions in the link list (inputs, then outputs) of the saved operands."""
        ins, outs = self._links()
        bits = self._saved_bits()
        nin = len(ins)
        return [
            i
            for i in range(nin + len(outs))
            if (bits >> (i if i < nin else OUTPUT_BIT0 + i - nin)) & 1
        ]

    def saved(self) -> list[np.ndarray]:
        """Return the values the node's backward reads, copied and read-only.

        Exactly the operands the op's table row saves, inputs first, in link order
        (``x, y, z``, then the outputs): ``sin`` saves ``x``, ``exp`` its output,
        ``multiply`` both inputs. For a custom function (:class:`tapegrad.Function`),
        what its ``forward`` kept with ``ctx.save_for_backward``. Like PyTorch's
        ``_saved_*`` attributes, it refuses values that are gone or have changed.

        Returns
        -------
        list of numpy.ndarray
            New read-only arrays; what :meth:`functional`'s function takes as
            ``saved``.

        Raises
        ------
        RuntimeError
            The graph was freed (a backward pass without ``retain_graph=True``, or the
            tape was rewound); a saved value was changed in place since it was
            recorded; or the node was recorded inside ``tg.compile`` (its values
            change with every replay).

        See Also
        --------
        Node.functional : The backward as a function of these values.

        Examples
        --------
        >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
        >>> x = tg.tensor([0.0, 1.0], requires_grad=True)
        >>> y = tnp.exp(x)
        >>> y.grad_fn.saved()  # exp's backward reads its output: g * out
        [array([1.        , 2.71828183])]
        >>> z = tnp.sin(x) * x
        >>> z.grad_fn.saved()  # sin(x) and x
        [array([0.        , 0.84147098]), array([0., 1.])]
        >>> tnp.sum(z).backward()
        >>> z.grad_fn.saved()
        Traceback (most recent call last):
            ...
        RuntimeError: Trying to backward through the graph a second time ...
        """
        with self._home.lock:  # the owner rewinds (and retires) under it: no reuse mid-read
            tape = self._live()
            if tape.kind == CAPTURE:
                raise RuntimeError(
                    "saved() of a node recorded inside tg.compile: the program's values "
                    "change with every call that replays it. Read the program's structure "
                    "with step.graph(), or take grad_fn outside the compiled function"
                )
            if tape.node_field(N_FLAGS, self._k) & NODE_FREED:
                raise RuntimeError(FREED_MESSAGE)
            if self._row() is None:
                entry = tape.custom_entry(self._k)
                if entry[1] is None:
                    raise RuntimeError(FREED_MESSAGE)
                return [_frozen(v) for v in entry[1].saved_tensors]
            if tape.handed_over:  # leaves changed in place since the handover
                tape.refresh_leaf_versions()
            changed = tape.changed_operand(self._k, self._saved_bits())
            if changed is not None:
                raise rule_walks.version_error(tape, self._k, *changed)
            ins, outs = self._links()
            slots = ins + outs
            return [_frozen(tape.read(slots[i])) for i in self._saved_links()]

    # --- the functional backward -----------------------------------------------------
    def functional(self) -> Callable[[Sequence[Any], Sequence[Any]], tuple]:
        """Return the node's backward as a function of arrays, ``fn(grads, saved)``.

        ``fn`` runs the op's compiled backward on the arrays it is given: the node is
        recorded again on a scratch tape of its own, from ``saved`` (zeros for
        operands the backward does not read), and its backward runs there. The
        original tape is not touched, and for an op of the table ``functional()``
        still works after a backward pass freed the saved values. For a custom
        function, ``fn`` calls its Python ``backward`` with a fresh ``ctx`` holding
        ``saved`` and the attributes its ``forward`` set, and validates the result as
        a backward pass does.

        ``fn(grads, saved)`` takes two lists: ``grads``, one cotangent per output of
        the node's shape and dtype (None or missing: zero; internal outputs may be
        left out), and ``saved``, arrays like those :meth:`saved` returns. It returns
        a tuple with one gradient per input (None where the input does not require
        grad), new arrays. It raises ``TypeError`` when ``grads`` or ``saved`` is
        not a list or tuple, and ``ValueError`` when their counts, shapes or dtypes
        do not match the node.

        Returns
        -------
        callable
            ``fn(grads, saved) -> tuple`` of input gradients.

        Raises
        ------
        RuntimeError
            The graph was freed by a rewind of the tape (or, for a custom function,
            by a backward pass).
        NotImplementedError
            The node is a custom function with a compiled ``backward_kernel``: it runs
            only inside a backward pass.

        See Also
        --------
        Node.saved : The values the recorded node saved.

        Examples
        --------
        d(x * y) = (g * y, g * x), on values of one's choice:

        >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
        >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
        >>> node = (x * tg.tensor([5.0, 6.0])).grad_fn
        >>> fn = node.functional()
        >>> fn([np.ones(2)], [np.array([1.0, 1.0]), np.array([3.0, 4.0])])
        (array([3., 4.]), None)
        >>> fn([np.ones(2)], node.saved())
        (array([5., 6.]), None)
        >>> fn([np.ones(3)], node.saved())
        Traceback (most recent call last):
            ...
        ValueError: multiply.functional: cotangent 0 has shape (3,), the output has (2,)
        """
        tape = self._live()
        row = self._row()
        if row is None:
            return _custom_functional(tape, self._k)
        ins, outs = self._links()
        spec = _NodeSpec(
            row=row,
            sig=tape.node_field(N_SIG, self._k),
            params=tape.node_params(self._k),
            ins=[(tape.slot_shape(s), tape.slot_dtype(s), tape.slot_rg(s)) for s in ins],
            outs=[(tape.slot_shape(s), tape.slot_dtype(s)) for s in outs],
            saved=self._saved_links(),
            # operands the backward needs but does not "save" (a gather's positions):
            # integer and bool inputs are part of the node's description, read now
            fixed={
                i: tape.read(s)
                for i, s in enumerate(ins)
                if tape.slot_dtype(s).kind not in "f" and i not in self._saved_links()
            },
        )
        return spec.run

    def __repr__(self) -> str:
        try:
            return f"<{self.name} node {self._k}>"
        except RuntimeError:
            return "<freed node>"


class _NodeSpec(NamedTuple):
    row: Any
    sig: int
    params: tuple
    ins: list
    outs: list
    saved: list[int]
    fixed: dict

    def run(self, grads: Sequence[Any], saved: Sequence[Any]) -> tuple:
        name = self.row.name
        if not isinstance(grads, list | tuple) or not isinstance(saved, list | tuple):
            raise TypeError(
                f"{name}.functional: grads and saved are lists (one cotangent per output, "
                "the arrays saved() gives)"
            )
        if len(saved) != len(self.saved):
            raise ValueError(
                f"{name}.functional: {len(saved)} saved values given, the backward reads "
                f"{len(self.saved)}"
            )
        grads = _cotangents(name, grads, self.outs)
        nin = len(self.ins)
        given = dict(zip(self.saved, saved))
        operands = [(shape, dtype) for shape, dtype, _ in self.ins] + list(self.outs)
        for i in self.saved:  # link order: inputs, then outputs
            shape, dtype = operands[i]
            value = given[i]
            got = np.asarray(value).dtype if value is not None else None
            # (compare dtypes only for a value: numpy reads a None dtype as float64)
            if value is None or got != dtype or tuple(np.shape(value)) != shape:
                raise ValueError(
                    f"{name}.functional: saved value for operand {i} is "
                    f"{'None' if value is None else f'{np.shape(value)} {got}'}, expected "
                    f"{shape} {dtype} (as saved() gives it)"
                )
        tape = enter(TRANSFORM, True, born0=serial())
        try:
            leaves, operands = [], []
            for i, (shape, dtype, rg) in enumerate(self.ins):
                value = given.get(i, self.fixed.get(i))
                arr = np.zeros(shape, dtype) if value is None else np.asarray(value, dtype)
                t = tensor(arr, requires_grad=rg and dtype.kind == "f")
                operands.append(t)
                leaves.append(t if t.requires_grad else None)
            result = general(
                self.row,
                self.sig,
                operands,
                [(DTYPE_CODE[dtype], shape) for shape, dtype in self.outs],
                list(self.params[0]),
                list(self.params[1]),
                alias=self.row.alias,
                visible=len(self.outs),
            )
            results = result if isinstance(result, tuple) else (result,)
            for j, out in enumerate(results):  # the recorded outputs, as given
                if nin + j in given:
                    home, slot = home_of(out)
                    home.view(slot)[...] = np.asarray(given[nin + j], out.dtype)
            total: list[Any] = [None] * nin
            wanted = [t for t in leaves if t is not None]
            for out, g in zip(results, grads):
                if not np.any(g) or not wanted or not out.requires_grad:
                    continue
                found = iter(gradients(out, wanted, g, True))
                for i, t in enumerate(leaves):
                    if t is not None:
                        gi = next(found)
                        if gi is not None:
                            total[i] = gi if total[i] is None else total[i] + gi
            return tuple(
                None if t is None else (np.zeros(t.shape, t.dtype) if g is None else g)
                for t, g in zip(leaves, total)
            )
        finally:
            leave(tape)


def _custom_functional(tape: Tape, k: int) -> Callable:
    """A custom function's Python backward as a functional: the same validation as in a
    backward pass (``engine.custom_backward``), one result per tensor input, fresh
    arrays, on a callback tape (nothing recorded on the caller's)."""
    cls, ctx, nargs, positions = tape.custom_entry(k)
    if ctx is None:
        raise RuntimeError(FREED_MESSAGE)
    if cls.backward_kernel is not None:
        raise NotImplementedError(
            f"{cls.__name__}.functional: a compiled custom kernel runs only inside a backward"
        )
    state = {n: v for n, v in vars(ctx).items() if n != "_saved"}
    ins, outs = tape.node_links(k)
    outputs = [(tape.slot_shape(s), tape.slot_dtype(s)) for s in outs]
    wanted = [(tape.slot_shape(s), tape.slot_dtype(s)) if tape.slot_rg(s) else None for s in ins]
    count = len(ctx.saved_tensors)

    def run(grads: Sequence[Any], saved: Sequence[Any]) -> tuple:
        if not isinstance(grads, list | tuple) or not isinstance(saved, list | tuple):
            raise TypeError(f"{cls.__name__}.functional: grads and saved are lists")
        if len(saved) != count:
            raise ValueError(
                f"{cls.__name__}.functional: {len(saved)} saved values given, it saved {count}"
            )
        fresh = FunctionCtx(ctx.needs_input_grad)
        vars(fresh).update(state)
        fresh._saved = tuple(np.array(v, copy=True) for v in saved)
        cotangents = _cotangents(cls.__name__, grads, outputs)
        found = custom_backward(cls, fresh, nargs, positions, cotangents, wanted)
        return tuple(None if g is None else np.array(g, copy=True) for g in found)

    return run


def _cotangents(name: str, grads: Sequence[Any], outputs: list) -> list[np.ndarray]:
    """One cotangent per output: checked (real numbers, the output's shape), cast to
    its dtype; None or missing is zero."""
    if len(grads) > len(outputs):
        raise ValueError(f"{name}.functional: {len(grads)} cotangents for {len(outputs)} outputs")
    out = []
    for j, (shape, dtype) in enumerate(outputs):
        g = grads[j] if j < len(grads) else None
        if g is None:
            out.append(np.zeros(shape, dtype))
            continue
        g = user_gradient(values_of(g), f"{name}.functional (cotangent {j})")
        if g.shape != shape:
            raise ValueError(
                f"{name}.functional: cotangent {j} has shape {g.shape}, the output has {shape}"
            )
        out.append(g.astype(dtype))
    return out


def _frozen(value: Any) -> np.ndarray:
    arr = np.array(value, copy=True)
    arr.flags.writeable = False
    return arr


def _producer(tape: Tape, s: int, leaves: dict) -> tuple[Any, int]:
    """``(node, output index)`` for slot ``s`` as an input (None: it does not require
    grad, so no gradient flows there)."""
    if not tape.slot_rg(s):
        return None, 0
    k = rule_walks.producer(tape, s)
    if k >= 0:
        _, outs = tape.node_links(k)
        return Node(tape, k), outs.index(s)
    leaf = leaves.get(s)
    if leaf is not None:
        return AccumulateGrad(leaf), 0
    for entry in tape.foreign.values():  # a result of another tape used here
        if entry[0] == s and len(entry) == 4:
            home, home_slot = entry[2], entry[3]
            return _producer(home, home_slot, dict(home.leaves))
        if entry[0] == s:
            return AccumulateGrad(entry[1]), 0
    return None, 0


def output_nr(t: Tensor) -> int:
    """Tell which output of its ``grad_fn`` a tensor is, as PyTorch's ``output_nr``.

    Also the property ``t.output_nr``.

    Parameters
    ----------
    t : Tensor
        A tensor.

    Returns
    -------
    int
        The index of ``t`` among the outputs of the node that made it; 0 for a leaf.

    Raises
    ------
    AttributeError
        ``t`` is not a tensor.

    Examples
    --------
    >>> import tapegrad as tg, tapegrad.numpy as tnp
    >>> A = tg.tensor([[2.0, 1.0], [1.0, 2.0]], requires_grad=True)
    >>> w, v = tnp.linalg.eigh(A)
    >>> w.grad_fn is v.grad_fn, w.output_nr, v.output_nr
    (True, 0, 1)
    """
    home = home_of(t)
    if home is None:
        return 0
    tape, slot = home
    k = rule_walks.producer(tape, slot)
    return tape.node_links(k)[1].index(slot) if k >= 0 else 0


def grad_fn(t: Tensor) -> Node | None:
    """Return the node that made ``t``: the property ``t.grad_fn``.

    Parameters
    ----------
    t : Tensor
        A tensor.

    Returns
    -------
    Node or None
        A :class:`Node` view of the recorded op; None for a leaf or a tensor that does
        not require grad. For a result whose graph is gone (its tape was rewound) an
        object whose every attribute raises the freed-graph error.

    Raises
    ------
    AttributeError
        ``t`` is not a tensor.

    Examples
    --------
    >>> import tapegrad as tg, tapegrad.numpy as tnp
    >>> from tapegrad.graph import grad_fn
    >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
    >>> grad_fn(x * 2.0), grad_fn(x) is None
    (<multiply node ...>, True)
    """
    home = home_of(t)
    if home is None:
        return _FreedNode() if graph_freed(t) else None
    tape, slot = home
    if not tape.slot_rg(slot):
        return None
    k = rule_walks.producer(tape, slot)
    return Node(tape, k) if k >= 0 else None


class _FreedNode:
    """The node of a result whose graph is gone (its tape was rewound)."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(FREED_MESSAGE)

    def __repr__(self) -> str:
        return "<freed node>"


# --- pictures -------------------------------------------------------------------------------


def _topological(root: Node) -> list[Node]:
    """The nodes ``root`` depends on, inputs before their users."""
    order: list[Node] = []
    seen: set[Node] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if node in seen:
            continue
        seen.add(node)
        stack.append((node, True))
        for fn, _ in reversed(node.next_functions):
            if isinstance(fn, Node) and fn not in seen:
                stack.append((fn, False))
    return order


def _describe(nodes: list[Node]) -> tuple[dict, list[str]]:
    ids = {n: i for i, n in enumerate(nodes)}
    lines = []
    for n in nodes:
        shape, dtype = n.outputs[0]
        inputs = []
        for (fn, j), meta in zip(n.next_functions, n.metadata):
            if isinstance(fn, Node):
                inputs.append(f"#{ids[fn]}" + (f"[{j}]" if j else ""))
            elif isinstance(fn, AccumulateGrad):
                inputs.append(f"leaf {meta.shape} {meta.dtype}")
            else:
                inputs.append(f"const {meta.shape} {meta.dtype}")
        lines.append(f"#{ids[n]} {n.name} -> {shape} {dtype}  <- {', '.join(inputs)}")
    return ids, lines


def graph_lines(t: Tensor) -> list[str]:
    """:func:`print_graph`'s lines."""
    if not isinstance(t, Tensor):
        raise TypeError(f"print_graph: expected a tensor, got {type(t).__name__}")
    node = grad_fn(t)
    if node is None:
        return [f"leaf {t.shape} {t.dtype}" + (" (requires grad)" if t.requires_grad else "")]
    return _describe(_topological(node))[1]


def print_graph(t: Tensor) -> None:
    """Print the graph that made ``t``, inputs first.

    One line per node: its number, its op, its output's shape and dtype, and where
    each input comes from (``#i``: node i, ``#i[j]``: its output j; a leaf; a
    constant). ``tg.compile(fn).graph(*args)`` shows a captured program the same way.

    Parameters
    ----------
    t : Tensor
        The result whose graph to print (a leaf prints one line).

    Raises
    ------
    TypeError
        ``t`` is not a tensor.
    RuntimeError
        ``t``'s graph was freed (its tape was rewound).

    See Also
    --------
    to_dot : The same graph as Graphviz source.

    Examples
    --------
    >>> import tapegrad as tg, tapegrad.numpy as tnp
    >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
    >>> tg.print_graph(tnp.sum(tnp.sin(x) * x))
    #0 sin -> (2,) float64  <- leaf (2,) float64
    #1 multiply -> (2,) float64  <- #0, leaf (2,) float64
    #2 sum -> () float64  <- #1
    """
    print("\n".join(graph_lines(t)))


def to_dot(t: Tensor) -> str:
    """Return Graphviz source (text) of the graph that made ``t``.

    ``dot -Tpng`` draws it; tapegrad has no Graphviz dependency. Ops are ellipses
    labelled with the op and the output's shape and dtype, leaves are boxes.

    Parameters
    ----------
    t : Tensor
        The result whose graph to draw.

    Returns
    -------
    str
        A ``digraph`` in the DOT language.

    Raises
    ------
    TypeError
        ``t`` is not a tensor.
    RuntimeError
        ``t``'s graph was freed (its tape was rewound).

    See Also
    --------
    print_graph : The same graph as text.

    Examples
    --------
    >>> import tapegrad as tg, tapegrad.numpy as tnp
    >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
    >>> print(tg.to_dot(tnp.sum(x * 3.0)))
    digraph tapegrad {
      node [fontname=monospace];
      n0 [shape=ellipse, label="multiply\\n(2,) float64"];
      l0 [shape=box, label="leaf\\n(2,) float64"];
      l0 -> n0;
      n1 [shape=ellipse, label="sum\\n() float64"];
      n0 -> n1;
    }
    """
    if not isinstance(t, Tensor):
        raise TypeError(f"to_dot: expected a tensor, got {type(t).__name__}")
    node = grad_fn(t)
    lines = ["digraph tapegrad {", "  node [fontname=monospace];"]
    if node is not None:
        nodes = _topological(node)
        ids, _ = _describe(nodes)
        leaf_ids: dict[int, str] = {}
        for n in nodes:
            shape, dtype = n.outputs[0]
            lines.append(f'  n{ids[n]} [shape=ellipse, label="{n.name}\\n{shape} {dtype}"];')
            for (fn, _), meta in zip(n.next_functions, n.metadata):
                if isinstance(fn, Node):
                    lines.append(f"  n{ids[fn]} -> n{ids[n]};")
                elif isinstance(fn, AccumulateGrad):
                    key = id(fn.variable)
                    if key not in leaf_ids:
                        leaf_ids[key] = f"l{len(leaf_ids)}"
                        lines.append(
                            f'  {leaf_ids[key]} [shape=box, label="leaf\\n{meta.shape} '
                            f'{meta.dtype}"];'
                        )
                    lines.append(f"  {leaf_ids[key]} -> n{ids[n]};")
    lines.append("}")
    return "\n".join(lines)


def program_lines(tape: Tape, root: int, guards: Sequence[str]) -> list[str]:
    """A captured program (``tg.compile``): its nodes as :func:`print_graph` shows them,
    then the guards under which it replays (``file:line: code`` of each Python read)."""
    k = rule_walks.producer(tape, root)
    lines = _describe(_topological(Node(tape, k)))[1] if k >= 0 else ["(no recorded op)"]
    if guards:
        lines.append(f"guards ({len(guards)}): values read by Python while capturing")
        for where in guards:
            path, _, line = where.rpartition(":")
            code = linecache.getline(path, int(line)).strip() if line.isdigit() else ""
            lines.append(f"  {where}: {code}" if code else f"  {where}")
    return lines
