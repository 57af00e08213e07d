"""Where a function finds the tensors it reads without taking them as arguments.

A compiled step (``tapegrad.compile``) re-reads, on every call, the tensors its function
read from outside while it was captured: closures, globals, attributes of ``self`` or of
an argument. It must find them again by the same route, since the user may have put a
new tensor there (``W = W - lr * g``) or changed one in place (``W -= lr * g``). This is
torch.compile's guards on sources, in small: a breadth-first search from the function's
roots records a *path* (a tuple of steps) to each tensor, and :func:`resolve` follows
the path again later.

Roots: the function's closure cells, the globals its code names (nested functions
included), its defaults, ``self`` of a bound method, and the call's arguments. Steps go
into functions (their closures and globals), attributes of plain objects, the methods
their class defines (``obj.forward`` reads ``self.W`` and globals of its own), list and
tuple items, dict values, ``functools.partial``'s function and arguments, and the
attributes of a global module that the code names (plain values only, ``cfg.K``, and
what fn may draw from, ``cfg.rng``: :func:`draws`); modules and classes are not
entered otherwise, nor random generators (their state is watched whole). tapegrad's own
objects are not entered (a compiled step leads only to the function it wraps) and its
functions only through their closure cells (``tg.grad(f)`` leads to ``f``), and do not
count toward the depth. The search stops at depth ``DEPTH`` or after ``BUDGET`` objects.
"""

from __future__ import annotations

import functools
import io
import random
import sys
import types
from collections import deque
from collections.abc import Callable, Iterator
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

DEPTH = 5
BUDGET = 20000
ITEMS = 1000  # list, tuple and dict entries looked at per container
_MISSING = object()
_LEAVES = (str, bytes, int, float, complex, bool, type(None), types.ModuleType, type)
# (and Python's random generators: a generator's state is watched whole by
# tapegrad.compile; its attributes, ``gauss_next``, and methods are the random module's,
# not values fn reads)
_NOT_ENTERED = (*_LEAVES, random.Random)
# (None too: ``scale = None`` read by ``1.0 if scale is None else scale`` is a constant
# of the recording like any number)
_SCALARS = (bool, int, float, complex, str, bytes, np.generic, type(None), Fraction, Decimal)


def is_plain(o: Any) -> bool:
    """A value a recording takes as a constant: a number (fractions and decimals too),
    string, None or NumPy array (and subclasses), or a non-empty list, tuple, set or
    dict of those (not arrays)."""
    if isinstance(o, (*_SCALARS, np.ndarray)):
        return not isinstance(o, np.ndarray) or o.dtype != object
    # (not empty ones: a list fn appends its own records to is not a constant it read)
    if isinstance(o, list | tuple | set | frozenset):
        return bool(o) and all(isinstance(v, _SCALARS) for v in o)
    if isinstance(o, dict):
        return bool(o) and all(isinstance(v, _SCALARS) for v in o.values())
    return False


def is_random_generator(o: Any) -> bool:
    """A random generator: NumPy's (``Generator``, ``RandomState``) or Python's
    (``random.Random`` and its subclasses, ``SystemRandom`` included)."""
    return isinstance(o, np.random.Generator | np.random.RandomState | random.Random)


def is_iterator(o: Any) -> bool:
    """An iterator or generator object (``iter(xs)``, ``itertools.count()``, ``zip``, a
    file open for reading, a class with ``__next__``): something ``next()`` draws from.
    Not tapegrad's own objects, nor the standard streams or a file open only for
    writing: what fn writes (a log, ``print(file=sys.stderr)``) is a side effect, as
    ``print`` is, not a value it draws."""
    kind = type(o)
    if not hasattr(kind, "__next__") or kind.__module__.split(".")[0] == "tapegrad":
        return False
    if any(o is s for s in (sys.stdin, sys.stdout, sys.stderr)) or any(
        o is s for s in (sys.__stdin__, sys.__stdout__, sys.__stderr__)
    ):
        return False
    if isinstance(o, io.IOBase):
        try:
            return o.readable()
        except (ValueError, OSError):  # (a closed file: nothing to draw)
            return False
    return True


def draws(o: Any) -> bool:
    """Whether fn reading ``o`` may draw a new value from it on every call (a random
    generator or an iterator): what a recording cannot hold constant, so a capture
    watches it (``tapegrad.compile``) rather than guard it."""
    return is_random_generator(o) or is_iterator(o)


def code_names(fn: types.FunctionType) -> set[str]:
    """The names ``fn``'s code (and the code nested in it) reads: globals, attributes."""
    return set(_names(fn.__code__))


def _names(code: types.CodeType) -> Iterator[str]:
    """Global names a code object (and the code nested in it) may read."""
    yield from code.co_names
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _names(c)


def _function_steps(fn: types.FunctionType) -> Iterator[tuple[tuple, Any]]:
    for i, cell in enumerate(fn.__closure__ or ()):
        try:
            yield ("cell", i, fn.__code__.co_freevars[i]), cell.cell_contents
        except ValueError:  # an empty cell
            continue
    if (fn.__module__ or "").split(".")[0] == "tapegrad":
        return  # a tapegrad wrapper (tg.grad(f)): its cells lead to f; its globals are ours
    g = fn.__globals__
    names = list(dict.fromkeys(_names(fn.__code__)))
    for name in names:
        if name in g:
            yield ("global", name), g[name]
    # ``cfg.K`` with cfg a module: the module's attributes the code names (only plain
    # values, and generators and iterators fn may draw from, ``cfg.rng``: entering a
    # library's functions would walk the library)
    for name in names:
        module = g.get(name)
        if isinstance(module, types.ModuleType):
            attrs = vars(module)
            for attr in names:
                value = attrs.get(attr, _MISSING)
                if value is not _MISSING and (is_plain(value) or draws(value)):
                    yield ("gattr", name, attr), value
    for i, d in enumerate(fn.__defaults__ or ()):
        yield ("default", i), d
    for k, d in (fn.__kwdefaults__ or {}).items():
        yield ("kwdefault", k), d


def _steps(obj: Any) -> Iterator[tuple[tuple, Any]]:
    """The objects one step from ``obj``, with the step."""
    if isinstance(obj, _NOT_ENTERED) or hasattr(obj, "__array_interface__"):
        return
    if type(obj).__module__.split(".")[0] == "tapegrad":
        # tapegrad's own objects (a compiled step and its tapes) are not the user's; a
        # wrapper (a compiled step) leads on to the function it wraps
        wrapped = vars(obj).get("__wrapped__") if hasattr(obj, "__dict__") else None
        if wrapped is not None:
            yield ("attr", "__wrapped__"), wrapped
        return
    if isinstance(obj, types.FunctionType):
        yield from _function_steps(obj)
    elif isinstance(obj, types.MethodType):
        yield ("self",), obj.__self__
        yield ("func",), obj.__func__
    elif isinstance(obj, functools.partial):
        yield ("pfunc",), obj.func
        for i, v in enumerate(obj.args[:ITEMS]):
            yield ("parg", i), v
        for k, v in list(obj.keywords.items())[:ITEMS]:
            yield ("pkw", k), v
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj[:ITEMS]):
            yield ("item", i), v
    elif isinstance(obj, dict):
        for i, (k, v) in enumerate(obj.items()):
            if i >= ITEMS:
                break
            yield ("item", k), v  # (any key: obj[k] finds it again)
    elif hasattr(obj, "__dict__") and not callable(getattr(obj, "__array_function__", None)):
        for k, v in list(vars(obj).items())[:ITEMS]:
            yield ("attr", k), v
        call = vars(type(obj)).get("__call__")
        if isinstance(call, types.FunctionType):  # a callable object: its __call__ reads
            yield ("call",), call
        # the methods its class defines: ``obj.forward(x)`` reads ``self.W`` (and globals)
        # that no code on the way to ``obj`` names; a walk that filters attributes by the
        # names code reads (tapegrad.compile) follows only the methods some code names
        for name, method in _methods(type(obj)).items():
            yield ("meth", name), method


def _user_classes(cls: type) -> Iterator[type]:
    """``cls`` and its bases, less ``object``'s, builtins' and tapegrad's own."""
    for klass in cls.__mro__:
        module = klass.__module__ or ""
        if module not in ("builtins", "abc", "typing") and module.split(".")[0] != "tapegrad":
            yield klass


def _plain_function(v: Any) -> types.FunctionType | None:
    """The function behind a class attribute: a method, a static or class method's
    function, a property's getter; None for anything else."""
    if isinstance(v, staticmethod | classmethod):
        v = v.__func__
    elif isinstance(v, property):
        v = v.fget
    return v if isinstance(v, types.FunctionType) else None


def _methods(cls: type) -> dict[str, types.FunctionType]:
    """The methods a user class and its bases define (:func:`_plain_function`), by name,
    the nearest definition first; dunder methods are left out (code calls them without
    naming them, and ``__call__`` has its own step)."""
    out: dict[str, types.FunctionType] = {}
    seen: set[str] = set()
    for klass in _user_classes(cls):
        for name, v in vars(klass).items():
            if name in seen or name.startswith("__"):
                continue
            seen.add(name)  # the nearest definition wins, as attribute lookup's
            f = _plain_function(v)
            if f is not None:
                out[name] = f
    return out


def _method(cls: type, name: str) -> Any:
    """:func:`_methods`'s entry ``name`` now (``_MISSING`` if there is none)."""
    for klass in _user_classes(cls):
        v = vars(klass).get(name, _MISSING)
        if v is not _MISSING:
            f = _plain_function(v)
            return _MISSING if f is None else f
    return _MISSING


def roots(fn: Callable, args: tuple) -> list[tuple[tuple, Any]]:
    """The starting points: the function's own reach, then each argument."""
    out: list[tuple[tuple, Any]] = [((("fn",),), fn)]
    out += [((("arg", i),), a) for i, a in enumerate(args)]
    return out


MAX_PATHS = 8  # routes kept to one tensor (tied parameters: self.enc is self.dec)


def walk(fn: Callable, args: tuple) -> Iterator[tuple[tuple, Any]]:
    """Every ``(path, object)`` reachable from ``fn`` and ``args`` (breadth first, each
    object entered once but reported on every route that reaches it)."""
    return walk_from(roots(fn, args))


def _is_wrapper(obj: Any) -> bool:
    return type(obj).__module__.split(".")[0] == "tapegrad" or (
        isinstance(obj, types.FunctionType) and (obj.__module__ or "").split(".")[0] == "tapegrad"
    )


def enterable(obj: Any) -> bool:
    """Whether what ``obj`` holds is reached by steps below it (so it is guarded under
    one route only): a container that is not compared whole, or an object with
    attributes of its own. Not a function: a table of helper functions five levels down
    is code, and warning for each would drown the case that matters."""
    if isinstance(obj, list | tuple | dict):
        return bool(obj) and not is_plain(obj)
    if isinstance(obj, types.FunctionType | type | types.ModuleType) or is_plain(obj):
        return False
    if type(obj).__module__.split(".")[0] in ("builtins", "numpy", "scipy", "tapegrad"):
        return False  # (a ufunc's __dict__ holds its __module__, not values fn reads)
    attrs = getattr(obj, "__dict__", None)
    return isinstance(attrs, dict) and any(not k.startswith("__") for k in attrs)


def _longer_than_searched(obj: Any) -> bool:
    """A container the walk enters only in part (its first ``ITEMS`` entries)."""
    return isinstance(obj, list | tuple | dict) and len(obj) > ITEMS and not is_plain(obj)


def walk_from(
    starts: list[tuple[tuple, Any]],
    follow: Callable[[tuple], bool] | None = None,
    cut: list[tuple] | None = None,
) -> Iterator[tuple[tuple, Any]]:
    """:func:`walk` from the given ``(path, object)`` starting points, taking only the
    steps ``follow`` accepts (all of them without it). ``cut`` receives the paths where
    the walk stopped (at ``DEPTH``, or the first one left when ``BUDGET`` ran out)
    before an object it would have entered, and of containers it entered only in part
    (more than ``ITEMS`` entries)."""
    seen: set[int] = set()
    queue = deque((path, obj, 0) for path, obj in starts)
    visited = 0
    while queue and visited < BUDGET:
        path, obj, depth = queue.popleft()
        yield path, obj
        if id(obj) in seen:
            continue
        if depth >= DEPTH:
            if cut is not None and enterable(obj):
                cut.append(path)
            continue
        seen.add(id(obj))
        visited += 1
        # tapegrad's own wrappers (tg.grad(f), the right-hand side's holder in
        # tapegrad.integrate, a compiled step) are no step of the user's: f is as deep as
        # it would be unwrapped
        below = depth + (0 if _is_wrapper(obj) else 1)
        if cut is not None and _longer_than_searched(obj):
            cut.append(path)  # (its items past ITEMS are not looked at)
        try:
            for step, child in _steps(obj):
                if follow is None or follow(step):
                    queue.append(((*path, step), child, below))
        except Exception:  # an object whose attributes cannot be listed: not entered
            continue
    if cut is not None and queue:
        cut.append(queue[0][0])


def locate(fn: Callable, args: tuple, targets: list[Any]) -> list[list[tuple]]:
    """The paths to each of ``targets`` (by identity) from ``fn`` and ``args``, shortest
    first (up to ``MAX_PATHS``; empty when it cannot be found)."""
    want = {id(t): i for i, t in enumerate(targets)}
    found: list[list[tuple]] = [[] for _ in targets]
    if not targets:
        return found
    for path, obj in walk(fn, args):
        i = want.get(id(obj))
        if i is not None and targets[i] is obj and len(found[i]) < MAX_PATHS:
            found[i].append(path)
    return found


def find(fn: Callable, args: tuple, accept: Callable[[Any], bool]) -> list[tuple[tuple, Any]]:
    """``(path, object)`` of the distinct objects reachable from ``fn`` and ``args`` that
    ``accept`` takes."""
    out, ids = [], set()
    for path, obj in walk(fn, args):
        if id(obj) not in ids and accept(obj):
            ids.add(id(obj))
            out.append((path, obj))
    return out


def _step(obj: Any, step: tuple) -> Any:
    kind = step[0]
    if kind == "cell":
        return obj.__closure__[step[1]].cell_contents
    if kind == "global":
        return obj.__globals__.get(step[1], _MISSING)
    if kind == "default":
        return obj.__defaults__[step[1]]
    if kind == "kwdefault":
        return obj.__kwdefaults__[step[1]]
    if kind == "gattr":
        return vars(obj.__globals__[step[1]]).get(step[2], _MISSING)
    if kind == "pfunc":
        return obj.func
    if kind == "parg":
        return obj.args[step[1]]
    if kind == "pkw":
        return obj.keywords[step[1]]
    if kind == "self":
        return obj.__self__
    if kind == "func":
        return obj.__func__
    if kind == "item":
        return obj[step[1]]
    if kind == "attr":
        return vars(obj).get(step[1], _MISSING)
    if kind == "call":
        return vars(type(obj))["__call__"]
    if kind == "meth":
        return _method(type(obj), step[1])
    raise ValueError(step)


def resolve(fn: Callable, args: tuple, path: tuple) -> Any:
    """Follow ``path`` (from :func:`locate`) from ``fn`` and ``args`` now; ``None`` if
    it no longer leads anywhere."""
    root = path[0]
    obj = fn if root == ("fn",) else (args[root[1]] if root[1] < len(args) else _MISSING)
    try:
        for step in path[1:]:
            if obj is _MISSING:
                return None
            obj = _step(obj, step)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        return None
    return None if obj is _MISSING else obj


def describe(path: tuple) -> str:
    """``W``, ``self.layers[0].w``, ``argument 2 .w``: a path as the user would write it."""
    root = path[0]
    out = "" if root == ("fn",) else f"argument {root[1]}"
    for step in path[1:]:
        kind = step[0]
        if kind in ("global", "cell"):
            out = step[1] if kind == "global" else step[2]
        elif kind == "gattr":
            out = f"{step[1]}.{step[2]}"
        elif kind == "pkw":
            out += f".keywords[{step[1]!r}]"
        elif kind in ("attr", "meth"):
            out += f".{step[1]}"
        elif kind == "item":
            out += f"[{step[1]!r}]"
        elif kind == "self":
            out = "self"
    return out or "<function>"
