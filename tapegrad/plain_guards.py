"""The guards on plain values from outside a compiled function: numbers, strings, NumPy
arrays, containers, functions fn calls, found in closures, globals and attributes as
``tapegrad.closures`` walks them, kept at capture and compared on every call (arrays by
bytes, functions by identity, containers by their length and keys), so that a change
captures again."""

from __future__ import annotations

import functools
import math
import operator
import types
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from . import closures
from .program import Program, SplitCall


def _identity(o: Any) -> bool:
    """Objects guarded by identity: functions fn calls (a helper rebound to another) and
    compiled steps."""
    return isinstance(o, types.FunctionType) or (
        type(o).__module__.split(".")[0] == "tapegrad"
        and "__wrapped__" in getattr(o, "__dict__", ())
    )


class _Layout:
    """What a guard on a container the function reaches (and may iterate over or take
    ``len()`` of) keeps: its type and length, and a dict's keys in order. Its items have
    guards of their own (tensors are found again by route, plain values compared)."""

    __slots__ = ("keys", "kind", "size")

    def __init__(self, obj: list | tuple | dict) -> None:
        self.kind = type(obj)
        self.size = len(obj)
        # the order too: a loop over the values stacks or sums them in that order
        self.keys = list(obj) if isinstance(obj, dict) else None

    def holds(self, now: Any) -> bool:
        if type(now) is not self.kind or len(now) != self.size:
            return False
        return self.keys is None or list(now) == self.keys

    def what(self) -> str:
        return "the keys of" if self.keys is not None else "the length of"


_NAMED_STEPS = ("attr", "meth")  # steps taken only when some code on the way names them


def _leaf_paths(tree: Any, path: tuple) -> list[tuple[tuple, Any]]:
    """``(path, leaf)`` of a pytree argument's leaves, in ``pytree.flatten``'s order."""
    if isinstance(tree, list | tuple):
        return [lp for i, v in enumerate(tree) for lp in _leaf_paths(v, (*path, ("item", i)))]
    if isinstance(tree, dict):
        return [lp for k in tree for lp in _leaf_paths(tree[k], (*path, ("item", k)))]
    return [(path, tree)]


def _constant_arguments(args: tuple, call: SplitCall | None) -> list[tuple[tuple, Any]]:
    """``(path, value)`` of the arguments (and pytree leaves) that are constants of the
    signature rather than inputs: an object passed in (``step(w, model)``), whose
    attributes fn reads as it reads ``self``'s."""
    if call is None:
        return []
    out: list[tuple[tuple, Any]] = []
    for i, (a, entry) in enumerate(zip(args, call.entries)):
        if entry[0] == "const":
            out.append(((("arg", i),), a))
        elif entry[0] == "tree":
            for (path, leaf), e in zip(_leaf_paths(a, (("arg", i),)), entry[2]):
                if e[0] == "const":
                    out.append((path, leaf))
    return out


def _reached(
    starts: list[tuple[tuple, Any]], cut: list[tuple] | None = None
) -> list[tuple[tuple, Any]]:
    """Everything reachable from ``starts`` through attributes and methods that some
    code on the way names (and any other step), on every route. An attribute no code
    names (``self.step_count`` beside the ``self.w`` the loss reads) is not read:
    guarding it would capture again whenever a training loop bumps it. The names grow
    as the walk finds more code (``model.forward`` names ``W``), so it runs until they
    stop growing."""
    used = {"__wrapped__"}

    def follow(step: tuple) -> bool:
        return step[0] not in _NAMED_STEPS or step[1] in used

    found: list[tuple[tuple, Any]] = []
    for _ in range(2 * closures.DEPTH + 2):  # (one more method level per round at most)
        stopped: list[tuple] = []
        found = list(closures.walk_from(starts, follow, stopped))
        if cut is not None:
            cut[:] = stopped
        names = set(used)
        for _, obj in found:
            if isinstance(obj, types.FunctionType):
                names |= closures.code_names(obj)
        if names == used:
            break
        used = names
    return found


def plain_values(
    fn: Callable,
    args: tuple = (),
    call: SplitCall | None = None,
    iterators: list[tuple[tuple, Any]] | None = None,
) -> list[tuple[tuple, Any, Any]]:
    """``(path, object, what to compare)`` of every plain value ``fn`` reaches from outside
    (numbers, strings, NumPy arrays, containers of numbers: ``closures.is_plain``), of
    every function or compiled step it reaches (compared by identity), and of every
    other container on the way (its length or keys, :class:`_Layout`), on every route
    (``tapegrad.closures``) from ``fn`` and from the arguments that are constants of the
    signature (an object passed in), through attributes some code on the way names. The
    recording took each as a constant; a replay is valid only while they hold (``k =
    3.0``, ``A[:] = 0``, ``obj.X = other`` or ``layers.append(layer)`` after capture
    means capturing again, never replaying the old value, as torch.compile guards on
    globals). ``iterators`` receives ``(path, object)`` of each iterator or generator
    reached the same way (``closures.is_iterator``), once each."""
    starts = [((("fn",),), fn), *_constant_arguments(args, call)]
    # the starting points themselves are fn and constants of the signature (its key)
    skip = {path for path, _ in starts}
    out: list[tuple[tuple, Any, Any]] = []
    whole: set[tuple] = set()  # containers compared whole: their items need no guard
    cut: list[tuple] = []
    reached = _reached(starts, cut)
    if cut:  # (what fn reads below these is not a guard: say so, never silently)
        warnings.warn(
            f"tapegrad.compile: values read through {closures.describe(cut[0])} and "
            f"{len(cut) - 1} other place(s) lie beyond the {closures.DEPTH} levels (or "
            f"{closures.BUDGET} objects, or {closures.ITEMS} items of a container) "
            "searched for what fn reads from outside: "
            "a change there would not be seen by a replay. Pass such values as "
            "arguments, or keep them nearer to fn",
            RuntimeWarning,
            stacklevel=4,
        )
    first: dict[int, tuple] = {}  # containers and objects: the route their items are under
    drawn: set[int] = set()  # iterators reported
    if iterators is not None:  # (an argument that is one: a generator passed in)
        for path, obj in starts:
            if closures.is_iterator(obj) and id(obj) not in drawn:
                drawn.add(id(obj))
                iterators.append((path, obj))
    for path, obj in reached:
        if path in skip or path[:-1] in whole:
            continue
        if closures.enterable(obj):
            if first.setdefault(id(obj), path) != path:
                # its items are guarded under the first route only: on this one it must
                # stay the same object (m.L = [5.0, 2.0, W] with L also a closure)
                out.append((path, obj, _Same(obj)))
        if closures.is_plain(obj):
            if isinstance(obj, np.ndarray):  # (type, shape, dtype, bytes): the cheapest check
                kept: Any = (type(obj), obj.shape, obj.dtype, obj.tobytes())
            elif isinstance(obj, list | tuple | dict | set | frozenset):  # its numbers
                kept = _Items(obj)
                whole.add(path)
            else:
                kept = obj
            out.append((path, obj, kept))
        elif isinstance(obj, list | tuple | dict):
            out.append((path, obj, _Layout(obj)))
        elif _identity(obj):
            if path[-1][0] != "meth":
                # (a method is its class's: the same on every instance a loop reaches)
                out.append((path, obj, obj))
        elif iterators is not None and closures.is_iterator(obj) and id(obj) not in drawn:
            # (looked for only here: numbers and containers, most of what fn reaches,
            # are not iterators)
            drawn.add(id(obj))
            iterators.append((path, obj))
    return out


class _Same:
    """What a guard on a second route to a container or object keeps: the object."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def holds(self, now: Any) -> bool:
        return now is self.obj

    def what(self) -> str:
        return "the object at"


def same_plain(now: Any, obj: Any, kept: Any) -> bool:
    """Whether ``now`` is what the capture read (``obj``, kept as ``kept``). Anything
    that cannot be compared (an array where a number was) is a change."""
    try:
        if type(kept) is _Layout or type(kept) is _Items or type(kept) is _Same:
            return kept.holds(now)
        if isinstance(obj, np.ndarray):
            return (
                type(now) is kept[0]
                and now.shape == kept[1]
                and now.dtype == kept[2]
                and now.tobytes() == kept[3]
            )
        if _identity(obj):  # a function or compiled step: the same object
            return now is obj
        return _same_scalar(now, kept)
    except Exception:  # (a comparison that raises: not the value the capture read)
        return False


def _same_scalar(now: Any, kept: Any) -> bool:
    """The same number (or string): the same type, and for floats and complex numbers
    (NumPy's too) the same sign of zero (1 / x differs), NaN being NaN."""
    if now is kept:
        return True
    if type(now) is not type(kept):
        return False
    if isinstance(kept, float | np.floating):
        return _same_float(now, kept)
    if isinstance(kept, complex | np.complexfloating):
        return _same_float(now.real, kept.real) and _same_float(now.imag, kept.imag)
    return bool(now == kept)


def _same_float(now: Any, kept: Any) -> bool:
    return math.copysign(1.0, now) == math.copysign(1.0, kept) and (
        now == kept or (now != now and kept != kept)
    )


def _signed_zero(v: Any) -> bool:
    """Whether ``v`` has a zero whose sign ``==`` does not see (float or complex)."""
    if isinstance(v, float | np.floating):
        return v == 0
    if isinstance(v, complex | np.complexfloating):
        return v.real == 0 or v.imag == 0
    return False


class _Items:
    """What a guard on a list, tuple or dict of numbers (compared whole) keeps: its type,
    a dict's keys in order, its values and their types. Values that are the very objects
    the capture read are the same (one pass in C); else ``==`` over them runs in C, but
    says ``0.0 == -0.0`` and ``3 == 3.0``: the types are compared too, and the signs of
    the zeros the capture saw; only when ``==`` fails (a NaN, another number) are the
    values compared one by one."""

    __slots__ = ("keys", "kind", "members", "types", "values", "zeros")

    def __init__(self, obj: list | tuple | dict | set | frozenset) -> None:
        self.kind = type(obj)
        # a set has no order: compared by ==, which takes 0.0 for -0.0 and 3 for 3.0
        self.members = frozenset(obj) if isinstance(obj, set | frozenset) else None
        self.keys = list(obj) if isinstance(obj, dict) else None
        self.values = list(obj.values()) if isinstance(obj, dict) else list(obj)
        self.types = [type(v) for v in self.values]
        self.zeros = [i for i, v in enumerate(self.values) if _signed_zero(v)]

    def holds(self, now: Any) -> bool:
        if type(now) is not self.kind or len(now) != len(self.values):
            return False
        if self.members is not None:
            return now == self.members
        values = now
        if self.keys is not None:
            if not all(map(operator.is_, now, self.keys)) and list(now) != self.keys:
                return False
            values = now.values()
        kept = self.values
        if all(map(operator.is_, values, kept)):  # (the same objects: one pass in C)
            return True
        values = list(values)
        if values == kept and list(map(type, values)) == self.types:
            return all(_same_scalar(values[i], kept[i]) for i in self.zeros)
        return all(map(_same_scalar, values, kept))


def _by_identity(obj: Any, kept: Any) -> bool:
    """Whether a guard holds whenever its value is still the very same object: an
    immutable value (number, string, tuple of them) or one guarded by identity, not a
    mutable one compared by contents (list, dict, array) nor a container's layout."""
    return type(kept) is not _Layout and (
        _identity(obj) or not isinstance(obj, np.ndarray | list | dict)
    )


def _plain_checks(plain: list[tuple[tuple, Any, Any]]) -> list[tuple]:
    """The guards of ``plain`` in the form :func:`plain_hold` runs them. Items of one
    container (``consts[0]``, ``consts[1]``... of a list that also holds a tensor, so
    not compared whole) become one check: the container is found once and its items
    taken by one ``operator.itemgetter`` and compared by identity in C (434 floats
    were 434 walks from ``fn``, 0.56 ms against a 0.06 ms replay); only when one is a
    different object are they compared one by one, as any other guard."""
    groups: dict[tuple, list[tuple]] = {}
    checks: list[tuple] = []
    for entry in plain:
        path, obj, kept = entry
        if len(path) > 1 and path[-1][0] == "item" and _by_identity(obj, kept):
            group = groups.get(path[:-1])
            if group is None:
                group = groups[path[:-1]] = []
                checks.append(("items", path[:-1], group))
            group.append(entry)
        else:
            checks.append(("one", entry))
    # the container's own guard (its length, a dict's keys) goes with its items' check,
    # which finds the container anyway
    layouts = {
        c[1][0]: c[1]
        for c in checks
        if c[0] == "one" and type(c[1][2]) is _Layout and len(groups.get(c[1][0], ())) > 1
    }
    out = []
    for check in checks:
        if check[0] == "items" and len(check[2]) > 1:
            entries = check[2]
            keys = [path[-1][1] for path, _, _ in entries]
            get = operator.itemgetter(*keys)
            if type(keys[0]) is int and keys == list(range(keys[0], keys[0] + len(keys))):
                get = functools.partial(_run_of_items, slice(keys[0], keys[0] + len(keys)), get)
            objs = tuple(obj for _, obj, _ in entries)
            out.append(("items", check[1], layouts.get(check[1]), get, objs, entries))
        elif check[0] == "items":
            out.append(("one", check[2][0]))
        elif check[1][0] not in layouts or type(check[1][2]) is not _Layout:
            out.append(check)
    return out


def _run_of_items(run: slice, get: Callable, container: Any) -> Any:
    """Items ``run`` of a list or tuple (a slice: a copy in C), else ``get``'s."""
    return container[run] if type(container) in (list, tuple) else get(container)


def plain_hold(fn: Callable, program: Program, args: tuple = ()) -> bool:
    """Whether every plain value the program took as a constant is unchanged (else
    ``program.failed`` says which changed). ``args``: the call's arguments."""
    plain, checks = program.plain_checks
    if plain is not program.plain:
        checks = _plain_checks(program.plain)
        program.plain_checks = (program.plain, checks)
    for check in checks:
        if check[0] == "items":
            _, parent, layout, get, objs, entries = check
            container = closures.resolve(fn, args, parent)
            if layout is not None and not _plain_holds(fn, program, args, layout):
                return False
            try:
                items = get(container)
                same = len(items) == len(objs) and all(map(operator.is_, items, objs))
            except Exception:  # (a container that no longer answers: one by one)
                same = False
            if same or all(_plain_holds(fn, program, args, e) for e in entries):
                continue
            return False
        if not _plain_holds(fn, program, args, check[1]):
            return False
    return True


def _plain_holds(fn: Callable, program: Program, args: tuple, entry: tuple) -> bool:
    """One guard of :func:`plain_hold`."""
    path, obj, kept = entry
    now = closures.resolve(fn, args, path)
    if same_plain(now, obj, kept):
        return True
    where = closures.describe(path)
    if type(kept) is _Layout or type(kept) is _Same:
        program.failed = f"{kept.what()} {where} (read from outside) changed"
    else:
        program.failed = f"{where} (a value read from outside) changed"
    return False
