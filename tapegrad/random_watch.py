"""Random generators watched while ``tg.compile`` captures: the state of NumPy's and
Python's global generators and of every generator reachable from ``fn``, compared before
and after, and the entropy the operating system gives to a generator made without a
seed on the capturing thread (draws are constants of a program: a generator that moved
is warned about)."""

from __future__ import annotations

import contextlib
import dis
import functools
import random
import sys
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from . import closures
from .tensors import Tensor


def is_arraylike(v: Any) -> bool:
    return isinstance(v, Tensor | np.ndarray | list | np.generic) or (
        isinstance(v, float | int) and not isinstance(v, bool)
    )


def random_state() -> tuple:
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
def generator_state(g: Any) -> Any:
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


def python_random_sources(
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
ENTROPY = " (the operating system's entropy: random.SystemRandom, secrets)"
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
def unseeded_generators() -> Iterator[list[tuple[str, str | None, str]]]:
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
