"""Pytrees: nested lists, tuples (named tuples included) and dicts of leaves, as the
transforms and ``tg.compile`` take their arguments and give back gradients.

A tensor or an array is a leaf, never a container, even though it can be indexed.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any


def is_container(tree: Any) -> bool:
    return isinstance(tree, list | tuple | dict)


def flatten(tree: Any) -> tuple[list[Any], Callable[[list[Any]], Any]]:
    """The leaves of ``tree`` in order, and a function rebuilding the structure from
    new leaves."""
    if isinstance(tree, list | tuple):
        parts = [flatten(t) for t in tree]
        counts = [len(p[0]) for p in parts]
        kind = type(tree)

        def unflatten(leaves: list[Any]) -> Any:
            out, i = [], 0
            for (_, rebuild), n in zip(parts, counts):
                out.append(rebuild(leaves[i : i + n]))
                i += n
            return kind(*out) if hasattr(kind, "_fields") else kind(out)  # named tuples

        return [leaf for p in parts for leaf in p[0]], unflatten
    if isinstance(tree, dict):
        keys = list(tree)
        parts = [flatten(tree[k]) for k in keys]
        counts = [len(p[0]) for p in parts]

        def unflatten_dict(leaves: list[Any]) -> dict:
            out = copy.copy(tree)  # a dict subclass stays one (OrderedDict, defaultdict...)
            out.clear()
            i = 0
            for k, (_, rebuild), n in zip(keys, parts, counts):
                out[k] = rebuild(leaves[i : i + n])
                i += n
            return out

        return [leaf for p in parts for leaf in p[0]], unflatten_dict
    return [tree], lambda leaves: leaves[0]


def structure(tree: Any) -> Any:
    """A hashable description of ``tree``'s containers (not of its leaves)."""
    if isinstance(tree, list | tuple):
        return (type(tree), tuple(structure(t) for t in tree))
    if isinstance(tree, dict):
        return (type(tree), tuple((k, structure(v)) for k, v in tree.items()))
    return None
