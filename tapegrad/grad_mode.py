"""Grad mode: ``no_grad``, ``enable_grad`` and ``is_grad_enabled``, the switch each tape
carries (``Tape.grad_enabled``), as PyTorch's."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .tape import (
    current_tape,
)

# --- grad mode ----------------------------------------------------------------------------


class no_grad:
    """Turn gradient recording off: a context manager and a decorator.

    Ops inside record no gradient information: their results do not require grad.
    This is where parameter updates go (``w -= lr * w.grad``). The setting is per
    thread; transforms (``tg.grad``...) record with grad mode on even inside it.

    See Also
    --------
    enable_grad : Turn recording back on inside ``no_grad``.
    is_grad_enabled : The current setting.

    Examples
    --------
    >>> import tapegrad as tg
    >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
    >>> with tg.no_grad():
    ...     y = x * 2
    >>> y.requires_grad
    False
    >>> @tg.no_grad()
    ... def double(t):
    ...     return t * 2
    >>> double(x)
    tensor([2., 4.])
    """

    _enabled = False

    def __init__(self) -> None:
        self._prev: list[bool] = []

    def __enter__(self) -> None:
        tape = current_tape()
        self._prev.append(tape.grad_enabled)
        tape.grad_enabled = self._enabled

    def __exit__(self, *exc: object) -> None:
        current_tape().grad_enabled = self._prev.pop()

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with type(self)():
                return fn(*args, **kwargs)

        return wrapper


class enable_grad(no_grad):
    """Turn gradient recording back on inside ``no_grad``: a context manager and a decorator.

    See Also
    --------
    no_grad : Turn recording off.

    Examples
    --------
    >>> import tapegrad as tg
    >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
    >>> with tg.no_grad():
    ...     with tg.enable_grad():
    ...         y = x * 2
    >>> y.requires_grad
    True
    """

    _enabled = True


def is_grad_enabled() -> bool:
    """Tell whether ops on this thread record gradient information.

    Returns
    -------
    bool
        False inside :class:`no_grad` (and outside a nested :class:`enable_grad`).

    Examples
    --------
    >>> import tapegrad as tg
    >>> tg.is_grad_enabled()
    True
    >>> with tg.no_grad():
    ...     tg.is_grad_enabled()
    False
    """
    return current_tape().grad_enabled
