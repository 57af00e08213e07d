"""The published object of a distribution: :class:`Distribution`, whose methods record
on tensors and are SciPy's own on plain arguments."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

from ...numpy_protocols import holds_tensor

# --- the published objects ------------------------------------------------------------------


def _dropin(f: Callable, dist: str, method: str) -> Callable:
    """``f`` when an argument holds a tensor, else ``scipy.stats.<dist>.<method>``."""
    plain: list[Callable] = []

    @functools.wraps(f)
    def method_(*args: Any, **kwargs: Any) -> Any:
        if holds_tensor(args) or (kwargs and holds_tensor(kwargs)):
            return f(*args, **kwargs)
        if not plain:
            plain.append(getattr(getattr(importlib.import_module("scipy.stats"), dist), method))
        return plain[0](*args, **kwargs)

    method_.__name__ = method_.__qualname__ = method
    method_.__doc__ = f"``scipy.stats.{dist}.{method}``, recording on tensors."
    return method_


class Distribution:
    """A SciPy distribution's methods (``logpdf``, ``cdf``...) on tensors.

    Each public object of :mod:`tapegrad.scipy.stats` (``norm``, ``gamma``...) is one.
    Its methods take SciPy's arguments and give SciPy's values: written in tapegrad
    ops when an argument holds a tensor, so that they record and are differentiable in
    ``x`` and every continuous parameter; SciPy's own method on plain arguments. As in
    SciPy, a point outside the support has log-density ``-inf`` (its gradient 0, with
    no NaN from the branch not taken) and invalid parameters give NaN; shapes that do
    not broadcast raise ``ValueError``, a missing shape parameter ``TypeError``.

    Parameters
    ----------
    name : str
        SciPy's name of the distribution (``"norm"``): its plain-argument methods are
        ``scipy.stats.<name>``'s.
    methods : dict of str to callable
        The methods written in tapegrad ops, by name.

    Attributes
    ----------
    name : str
        As given.
    methods : tuple of str
        The methods' names, sorted.

    Raises
    ------
    AttributeError
        A method the distribution does not have here (``norm.ppf``).

    Examples
    --------
    >>> from tapegrad.scipy import stats
    >>> stats.norm
    <tapegrad.scipy.stats.norm: cdf, logcdf, logpdf, logsf, pdf, sf>
    >>> stats.norm.name, stats.norm.methods[:2]
    ('norm', ('cdf', 'logcdf'))
    """

    def __init__(self, name: str, methods: dict[str, Callable]) -> None:
        self.name = name
        self.methods = tuple(sorted(methods))
        for method, f in methods.items():
            setattr(self, method, _dropin(f, name, method))

    def __repr__(self) -> str:
        return f"<tapegrad.scipy.stats.{self.name}: {', '.join(self.methods)}>"
