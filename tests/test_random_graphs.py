"""Random multi-op graphs with fan-out, checked against central differences."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

import tapegrad.numpy as tnp
from tapegrad.testing import check_grads

# Ops that are smooth everywhere on the values the graphs produce.
UNARY = {
    "sin": tnp.sin,
    "cos": tnp.cos,
    "tanh": tnp.tanh,
    "soft": lambda a: tnp.sqrt(a * a + 1.0),
    "exp_tanh": lambda a: tnp.exp(tnp.tanh(a)),
    "square": lambda a: a**2,
    "neg": lambda a: -a,
    "sum0": lambda a: tnp.sum(a, axis=0) if a.ndim == 2 else a * 0.5,
    "mean_keep": lambda a: tnp.mean(a, axis=-1, keepdims=True) if a.ndim else a,
    "T": lambda a: a.T,
    "row": lambda a: a[-1] if a.ndim == 2 else a,  # (a mean with keepdims can leave one row)
}
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (b * b + 1.0),
    "max": tnp.maximum,
    "pow": lambda a, b: (a * a + 1.0) ** (tnp.tanh(b) * 0.5),
}

step = st.one_of(
    st.tuples(st.just("u"), st.sampled_from(sorted(UNARY)), st.integers(0, 99)),
    st.tuples(
        st.just("b"), st.sampled_from(sorted(BINARY)), st.integers(0, 99), st.integers(0, 99)
    ),
)


def _compatible(a, b):
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        return False
    return True


def run(program, x, y, z):
    """Values start with three leaves; every step reads earlier values (fan-out)."""
    values = [x, y, z]
    for ins in program:
        if ins[0] == "u":
            values.append(UNARY[ins[1]](values[ins[2] % len(values)]))
        else:
            a, b = values[ins[2] % len(values)], values[ins[3] % len(values)]
            if not _compatible(a, b):
                b = tnp.sum(b)
            values.append(BINARY[ins[1]](a, b))
    total = values[0].sum() * 0.0
    for v in values[3:]:  # every intermediate feeds the output
        total = total + tnp.sum(v) * 0.1
    return total


@given(program=st.lists(step, min_size=1, max_size=12), seed=st.integers(0, 2**16))
# (2, 3) -> transposes and a mean with keepdims -> one row, then "row": found by a CI run
@example(
    program=[("u", "T", 0)] * 3 + [("u", "mean_keep", 0), ("u", "T", 6), ("u", "row", 7)], seed=0
)
def test_random_graphs_match_central_differences(program, seed):
    rng = np.random.default_rng(seed)
    args = [rng.uniform(-1, 1, (2, 3)), rng.uniform(-1, 1, 3), rng.uniform(-1, 1, ())]
    check_grads(lambda x, y, z: run(program, x, y, z), args)
