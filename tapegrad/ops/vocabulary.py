"""The vocabulary backward formulas are written in, so that one formula serves every mode.

A backward formula (``sin_bwd(g, x, out) = g * np.cos(x)``) is compiled by numba for
scalars: that is the first-order backward, lifted to whole tensors by the kernels. The
same Python function, called with *tensors*, records the derivative as table ops, so the
gradient it returns can be differentiated again (``backward(create_graph=True)``,
``tg.grad`` of ``tg.grad``); called with a tangent in place of ``g`` it is the op's
forward-mode rule. This is how PyTorch's ``derivatives.yaml`` formulas serve double
backward, with numba's scalar compilation as the fast path.

A formula may therefore use only what works both ways:

* arithmetic and comparisons, NumPy's ufuncs (``np.cos``: a tensor's
  ``__array_ufunc__`` records the row) and constants;
* :func:`select` in place of a Python branch on values;
* the words below with two faces: compiled code calls the scalar kernel, Python calls
  the row's public function (:func:`row_function`), or an expression of table ops.

A Python ``if`` on a tensor raises (its truth value is ambiguous), so a formula that
leaves this vocabulary fails loudly in the recorded modes, never silently.
"""

from __future__ import annotations

import numbers
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from .._jit import cold_branch, jit, overload
from .table import BY_NAME


def select(cond: Any, a: Any, b: Any) -> Any:
    """``a`` where ``cond`` holds, else ``b``: a branch on values, written as a value.

    Compiled, it is ``a if cond else b`` on scalars (LLVM inlines it and emits a select; both
    operands are computed, so keep them cheap). With tensors it records ``where``; the gradient
    of the branch not taken is multiplied by zero, so a second derivative that is
    infinite in that branch (``log(x)`` at ``x == 0``) shows as NaN there, as it does
    in PyTorch and JAX.
    """
    if isinstance(cond, bool | np.bool_):  # a condition on constants: no op to record
        return a if cond else b
    return np.where(cond, a, b)


@overload(select)
def _select_compiled(cond, a, b):  # numba compares its signature: no annotations
    def impl(cond, a, b):
        return a if cond else b

    return impl


@jit
def _power_less_one(x, y, out):
    # A libm pow costs ~20 ns an element, the backward's whole budget: x ** 1 is x
    # exactly (the squares of every loss), and x^(y-1) = x^y / x = out / x (one division,
    # two roundings) wherever x and out lie in [1e-15, 1e15], so that the ratio stays
    # inside float32's normal range too; pow elsewhere (zero, tiny, huge, inf, NaN).
    if y == 2:
        return x
    ax, ao = abs(x), abs(out)
    if 1e-15 <= ax <= 1e15 and 1e-15 <= ao <= 1e15:
        return out / x
    cold_branch()  # or a vectorised loop would call pow for every element
    return x ** (y - 1)


def power_less_one(x: Any, y: Any, out: Any) -> Any:
    """``x ** (y - 1)`` for ``out = x ** y``, the power rule's factor; compiled, no pow
    for ``y == 2`` or where ``out / x`` is exact to rounding."""
    return x ** (y - 1)


@overload(power_less_one)
def _power_less_one_compiled(x, y, out):
    return lambda x, y, out: _power_less_one(x, y, out)


# The two-faced words, importable by name (``tapegrad.ops.vocabulary.words.digamma``).
# numba's disk cache keys a compiled overload on its closure cells, pickled: the kernels'
# overloads capture row formulas, which call these words. A word defined inside a
# factory cannot be pickled by reference, so cloudpickle took it by value with its
# globals, the whole row registry: a 460 KB key, and a TypeError ("cannot pickle
# '_dynfunc._Closure'") once the eager fast paths held compiled entry points, i.e. the
# first compile of gammaln's (digamma's, beta's, i0's...) kernels after any eager op
# on a cold cache. Registered here, each word pickles as its name.
words = types.SimpleNamespace()


def _named(face: Callable, name: str) -> Callable:
    """``face`` as ``words.<name>``, so that pickling it stores that name."""
    face.__name__ = name
    face.__qualname__ = f"words.{name}"
    face.__module__ = __name__
    setattr(words, name, face)
    return face


def first_order(name: str, compiled: Callable, arity: int, what: str) -> Callable:
    """A word for a derivative that exists only compiled (no table op records it): the
    kernels call ``compiled``; Python (a recorded backward, forward mode) raises,
    naming ``what``, instead of returning a number that could not be differentiated."""

    def face(*args: Any) -> Any:
        if all(isinstance(a, numbers.Number) for a in args):
            return compiled(*args)  # numbers: a kernel run as Python (tapegrad.tiers)
        raise NotImplementedError(
            f"{what} is computed only inside the compiled backward kernel: second "
            "derivatives through it and forward mode (tg.jvp) are not implemented"
        )

    if arity == 1:

        def typing(x):
            return lambda x: compiled(x)

    else:

        def typing(x, y):
            return lambda x, y: compiled(x, y)

    _named(face, name)
    overload(face)(typing)
    return face


def row_function(name: str, compiled: Callable, arity: int) -> Callable:
    """A word with two faces: compiled code calls ``compiled`` (a scalar kernel); Python
    calls it with numbers (a kernel run as Python), else row ``name``'s public function,
    which records (so a formula that calls it,
    such as ``gammaln``'s backward ``g * digamma(x)``, records ``digamma``)."""
    if arity == 1:

        def face(x):
            if isinstance(x, numbers.Number):  # a kernel run as Python (tapegrad.tiers)
                return compiled(x)
            return BY_NAME[name].front(x)

        def typing(x):
            return lambda x: compiled(x)

    else:

        def face(x, y):
            if isinstance(x, numbers.Number) and isinstance(y, numbers.Number):
                return compiled(x, y)
            return BY_NAME[name].front(x, y)

        def typing(x, y):
            return lambda x, y: compiled(x, y)

    _named(face, name)
    face.__doc__ = f"``{name}``: its scalar kernel compiled, its row's function in Python."
    overload(face)(typing)
    return face
