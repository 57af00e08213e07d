"""The graph as data: ``grad_fn`` views, saved values, the functional backward (the
seed's own test: a manual backward over ``grad_fn`` with ``functional()`` equals
``backward()``), pictures, and the errors a stale view raises."""

from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.special as tsp
from tapegrad.graph import AccumulateGrad, Node, _topological
from tapegrad.ops import ELEMENTWISE

from .custom_ops import Cube
from .optable_cases import cases

DIFFERENTIABLE = [c for c in cases() if c.op.differentiable]


def manual_backward(root: tg.Tensor, seed: np.ndarray) -> dict[int, np.ndarray]:
    """Leaf gradients (by id) from ``functional()`` run over the nodes in reverse
    topological order, accumulated by hand."""
    node = root.grad_fn
    pending: dict[Node, list] = {node: [None] * root.output_nr + [seed]}
    leaves: dict[int, np.ndarray] = {}
    for n in reversed(_topological(node)):
        grads = pending.pop(n, [])
        found = n.functional()(grads, n.saved())
        for (fn, j), g in zip(n.next_functions, found, strict=True):
            if g is None or fn is None:
                continue
            if isinstance(fn, AccumulateGrad):
                key = id(fn.variable)
                leaves[key] = g if key not in leaves else leaves[key] + g
                continue
            slot = pending.setdefault(fn, [])
            slot += [None] * (j + 1 - len(slot))
            slot[j] = g if slot[j] is None else slot[j] + g
    return leaves


def _check_manual(out: tg.Tensor, leaves: list[tg.Tensor], seed: np.ndarray) -> None:
    manual = manual_backward(out, seed)
    out.backward(gradient=seed)
    for leaf in leaves:
        want = leaf.grad
        got = manual.get(id(leaf))
        if want is None:
            assert got is None or not np.any(got)
            continue
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=lambda c: c.id)
def test_manual_backward_over_grad_fn_equals_backward(case):
    args = case.args()
    leaves = [tg.tensor(a, requires_grad=True) for a in args]
    out = case.f(tnp, *leaves)
    if out.grad_fn is None:  # the case returns a leaf itself
        return
    seed = np.random.default_rng(0).standard_normal(out.shape)
    _check_manual(out, leaves, seed)


POOL = [
    ("sin", lambda h, b: tnp.sin(h)),
    ("mul-broadcast", lambda h, b: h * b[0]),
    ("div", lambda h, b: h / (b * b + 1.0)),
    ("pow", lambda h, b: (h * h + 1.0) ** 1.5),
    ("sum-axis-keepdims", lambda h, b: h - tnp.sum(h, axis=1, keepdims=True)),
    ("mean", lambda h, b: h * tnp.mean(b)),
    ("max", lambda h, b: h + tnp.max(h, axis=0)),
    ("prod", lambda h, b: h * tnp.prod(b, axis=1, keepdims=True)),
    ("cumsum", lambda h, b: tnp.cumsum(h, axis=0)),
    ("transpose", lambda h, b: h.T + b),
    (
        "reshape-getitem",
        lambda h, b: tnp.reshape(h, (9,))[[0, 2, 2, 4, 6, 7, 8, 1, 3]].reshape(3, 3),
    ),
    ("concatenate", lambda h, b: tnp.concatenate([h[:2], b[2:]], axis=0)),
    ("where", lambda h, b: tnp.where(b > 0, h, 2.0 * h)),
    ("matmul", lambda h, b: h @ b),
    ("solve", lambda h, b: tnp.linalg.solve(b @ b.T + 3.0 * np.eye(3), h)),
    (
        "inv-det",
        lambda h, b: (
            tnp.linalg.inv(b @ b.T + 3.0 * np.eye(3)) * tnp.linalg.det(h + 4.0 * np.eye(3))
        ),
    ),
    ("cholesky", lambda h, b: tnp.linalg.cholesky(h @ h.T + 3.0 * np.eye(3))),
    ("log_softmax", lambda h, b: tsp.log_softmax(h, axis=1)),
    ("logsumexp", lambda h, b: h + tsp.logsumexp(b, axis=0)),
    ("gammaln-xlogy", lambda h, b: tsp.gammaln(h * h + 1.0) + tsp.xlogy(b * b, h * h + 1.0)),
    ("custom function", lambda h, b: Cube.apply(h) * 0.1 + b),
    ("cast", lambda h, b: h.astype(np.float32).astype(np.float64)),
]


@pytest.mark.parametrize("seed", range(12))
def test_random_programs_manual_backward(seed):
    rng = np.random.default_rng(seed)
    a = tg.tensor(rng.uniform(-1, 1, (3, 3)), requires_grad=True)
    b = tg.tensor(rng.uniform(-1, 1, (3, 3)), requires_grad=True)
    h = a
    for i in rng.permutation(len(POOL))[:6]:
        h = POOL[i][1](h, b)
    out = tnp.sum(h * h)
    _check_manual(out, [a, b], np.array(1.0))


@pytest.mark.parametrize(
    "op", [c.op for c in DIFFERENTIABLE if c.op.kind in ELEMENTWISE], ids=lambda o: o.name
)
def test_saved_lists_what_the_formulas_read(op):
    x = tg.tensor(np.array([0.6, 0.9]), requires_grad=True)
    y = tg.tensor(np.array([1.3, 0.7]), requires_grad=True)
    args = (x,) if op.arity == 1 else (x, y)
    out = op.front(*args)
    node = out.grad_fn
    assert node.name == op.name
    saved = node.saved()
    values = {"x": x.numpy(), "y": y.numpy(), "out": out.numpy()}
    assert len(saved) == len(op.saves)
    for name, got in zip(op.saves, saved, strict=True):
        np.testing.assert_array_equal(got, values[name])
        assert not got.flags.writeable


def test_views_structure_and_metadata():
    x = tg.tensor(np.array([0.3, 1.2, 2.0]), requires_grad=True)
    w = tg.tensor(np.ones((3, 2), np.float32), requires_grad=False)
    y = tnp.tanh(x @ w.astype(np.float64))
    assert x.grad_fn is None and w.grad_fn is None
    node = y.grad_fn
    assert node.name == "tanh"
    ((mm, j),) = node.next_functions
    assert mm.name == "matmul" and j == 0
    (leaf, _), (cast, _) = mm.next_functions
    assert isinstance(leaf, AccumulateGrad) and leaf.variable is x
    assert cast is None  # a constant: w does not require grad
    assert mm.metadata[0] == ((3,), np.dtype(np.float64), True)
    assert mm.metadata[1].requires_grad is False
    assert node == y.grad_fn and len({node, y.grad_fn}) == 1
    # slogdet: two outputs; the functional takes one cotangent per output
    a = tg.tensor(np.array([[2.0, 0.5], [0.3, 1.0]]), requires_grad=True)
    _, logdet = tnp.linalg.slogdet(a)
    n = logdet.grad_fn
    (ga,) = n.functional()([None, np.array(1.0)], n.saved())
    np.testing.assert_allclose(ga, np.linalg.inv(a.numpy()).T)


def test_views_are_lazy_and_never_show_reused_memory(monkeypatch):
    from tapegrad.tape import Tape

    reads = []
    original = Tape.read
    monkeypatch.setattr(Tape, "read", lambda self, s: reads.append(s) or original(self, s))
    x = tg.tensor(np.array([0.3, 1.2]), requires_grad=True)
    y = tnp.exp(tnp.sin(x))
    node = y.grad_fn
    _ = (node.name, node.next_functions, node.metadata, node.outputs)
    assert reads == []  # no value is copied until saved() is asked
    assert Node.__slots__ == ("__weakref__", "_era", "_home", "_k")
    (out,) = node.saved()  # exp saves its output
    assert len(reads) == 1
    np.testing.assert_array_equal(out, y.numpy())
    # freed by a backward without retain_graph
    tnp.sum(y).backward()
    with pytest.raises(RuntimeError, match="second time"):
        node.saved()
    # once the tape is rewound (the next op) the rows are other ops': every access raises
    tnp.sum(x * 2.0)
    with pytest.raises(RuntimeError, match="second time"):
        _ = node.name
    with pytest.raises(RuntimeError, match="second time"):
        _ = y.grad_fn.name


def test_saved_after_an_in_place_change():
    x = tg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = tnp.exp(x)
    node = y.grad_fn
    y += 1
    with pytest.raises(RuntimeError, match="modified by an in-place operation: 'exp'"):
        node.saved()
    # the in-place op is a node of its own, whose input is exp's result
    assert y.grad_fn.name == "add" and y.grad_fn.next_functions[0][0] == node


def test_print_graph_and_to_dot(capsys):
    x = tg.tensor(np.array([0.3, 1.2, 2.0]), requires_grad=True)
    w = tg.tensor(np.ones((3, 2)), requires_grad=True)
    loss = tnp.sum(tnp.tanh(x @ w) ** 2)
    tg.print_graph(loss)
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "#0 matmul -> (2,) float64  <- leaf (3,) float64, leaf (3, 2) float64",
        "#1 tanh -> (2,) float64  <- #0",
        "#2 power -> (2,) float64  <- #1, const () float64",
        "#3 sum -> () float64  <- #2",
    ]
    dot = tg.to_dot(loss)
    assert dot.startswith("digraph tapegrad {") and dot.endswith("}")
    assert dot.count("->") == 5 and 'label="matmul\\n(2,) float64"' in dot
    tg.print_graph(x)
    assert capsys.readouterr().out.strip() == "leaf (3,) float64 (requires grad)"


def test_compiled_program_graph_with_guards():
    def loss(w, x):
        h = tnp.tanh(w * x)
        if tnp.sum(h) > 0:  # a Python decision on a value: a guard
            return tnp.sum(h**2)
        return tnp.sum(h)

    step = tg.compile(loss)
    text = step.graph(np.array([0.5, 1.0]), np.array([1.0, 2.0]))
    lines = text.splitlines()
    assert lines[0].startswith("#0 multiply")
    assert any(" tanh " in line for line in lines)
    assert any("power" in line for line in lines)
    assert "guards (1)" in text and "if tnp.sum(h) > 0" in text
    value, _ = step.value_and_grad(np.array([0.5, 1.0]), np.array([1.0, 2.0]))
    assert step.stats["captures"] == 1 and value == pytest.approx(np.sum(np.tanh([0.5, 2.0]) ** 2))


# --- found by attacking the feature ----------------------------------------------------------


def test_a_view_of_a_dropped_handed_over_graph_goes_stale():
    import gc

    x = tg.tensor(np.array([0.5, 1.5]), requires_grad=True)
    loss = tnp.sum(tnp.sin(x) * x)
    loss.backward(retain_graph=True)
    node = loss.grad_fn
    for _ in range(3):  # backward while loss is held: its tape is handed over
        tnp.sum(x * x).backward()
    assert node.next_functions[0][0].name == "multiply"
    del loss
    gc.collect()
    for _ in range(3):  # the handed-over tape, no longer held, is let go
        tnp.sum(x * x).backward()
    with pytest.raises(RuntimeError, match="second time"):
        _ = node.next_functions


def test_views_inside_a_compiled_function_show_structure_only():
    seen = []

    def loss(w):
        h = tnp.exp(w)
        seen.append(h.grad_fn)
        return tnp.sum(h)

    step = tg.compile(loss)
    with pytest.warns(RuntimeWarning, match="changed seen"):  # a side effect, said once
        step.value_and_grad(np.array([0.0, 1.0]))
    assert seen[0].name == "exp"
    with pytest.raises(RuntimeError, match=r"inside tg\.compile"):
        seen[0].saved()


def test_saved_sees_a_leaf_changed_after_a_handover():
    x = tg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = tnp.sum(tnp.sin(x))
    node = y.grad_fn.next_functions[0][0]
    y.backward(retain_graph=True)
    with tg.no_grad():
        x += 1.0
    with pytest.raises(RuntimeError, match="modified by an in-place operation: 'sin'"):
        node.saved()


class ScaleFirst(tg.Function):
    """(c, x) -> c * x with a Python backward returning one gradient per argument."""

    @staticmethod
    def forward(ctx, c, x):
        ctx.c = c
        return c * x

    @staticmethod
    def backward(ctx, g):
        return None, ctx.c * g


class Widen(tg.Function):
    """x (3,) -> x * ones((2, 3)); its backward returns a (2, 3) gradient to be summed."""

    @staticmethod
    def forward(ctx, x):
        return x * np.ones((2, 3))

    @staticmethod
    def backward(ctx, g):
        return g.astype(np.float32)  # a dtype to be cast back and a shape to reduce


def test_functional_of_custom_functions_is_validated_like_a_backward():
    x = tg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    node = ScaleFirst.apply(5.0, x).grad_fn
    (gx,) = node.functional()([np.ones(3)], node.saved())  # one per tensor input
    np.testing.assert_allclose(gx, [5.0, 5.0, 5.0])
    (zero,) = node.functional()([None], node.saved())  # a missing cotangent is zero
    np.testing.assert_array_equal(zero, np.zeros(3))
    w = Widen.apply(x).grad_fn
    (gw,) = w.functional()([np.ones((2, 3))], w.saved())
    assert gw.shape == (3,) and gw.dtype == np.float64
    np.testing.assert_allclose(gw, [2.0, 2.0, 2.0])
    with pytest.raises(ValueError, match="2 cotangents for 1 outputs"):
        w.functional()([np.ones((2, 3)), np.ones(1)], [])
    # and the manual backward over a graph with custom functions and a checkpoint
    a = tg.tensor(np.array([0.3, 0.7, 1.1]), requires_grad=True)
    h = tg.checkpoint(lambda v: tnp.sin(v) * v, a)
    out = tnp.sum(ScaleFirst.apply(2.0, h) + Widen.apply(h).sum(axis=0) + Cube.apply(a))
    _check_manual(out, [a], np.array(1.0))


def test_functional_refuses_bad_input():
    x = tg.tensor(np.array([1.0, 2.0], np.float32), requires_grad=True)
    node = tnp.exp(x).grad_fn
    fn, saved = node.functional(), node.saved()
    assert fn([np.ones(2)], saved)[0].dtype == np.float32
    with pytest.raises(ValueError, match="saved value for operand 1 is None"):
        fn([np.ones(2)], [None])
    with pytest.raises(ValueError, match=r"expected \(2,\) float32"):
        fn([np.ones(2)], [saved[0].astype(np.float64)])
    with pytest.raises(TypeError, match="complex"):
        fn([np.ones(2) * 1j], saved)
    with pytest.raises(ValueError, match="2 cotangents for 1 outputs"):
        fn([np.ones(2), np.ones(2)], saved)
    with pytest.raises(TypeError, match="lists"):
        fn(np.ones(2), saved)
    with pytest.raises(TypeError, match="expected a tensor"):
        tg.print_graph(np.ones(2))
