"""Devices other than the CPU: the registry the core dispatches through.

A device target (the CUDA target, :mod:`tapegrad.cuda`, is the one tapegrad ships) is a
wing of the package: the core never imports it. The package declares each target by
name and module (:func:`declare`); the target's module, once imported, registers its
tensor type and entry points (:func:`register`). The core then asks only this module:

* :func:`get` -- the device called ``name`` (``tg.tensor(x, device=name)``,
  ``t.to(name)``), importing its module on first use;
* :func:`route` -- the device of the first device tensor among some operands, or None
  for CPU operands (the elementwise hot path, the array ops' router, NumPy's
  protocols);
* :func:`listen` -- a callback run with the tuple of device tensor types whenever it
  grows, so that a hot path can keep it in a module global (one lookup, and an empty
  tuple while no device is loaded).

A device target is loaded on first use because loading one is slow (numba's CUDA
target takes ~1.5 s to import) and may fail where its toolkit is missing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Device",
    "declare",
    "get",
    "listen",
    "names",
    "register",
    "register_tracer",
    "route",
    "route_call",
]


@dataclass(frozen=True)
class Device:
    """What the core needs of a device target.

    Attributes
    ----------
    name : str
        The name users pass as ``device=`` (``"cuda"``).
    tensor_type : type
        The target's tensor class.
    to_device : callable
        ``to_device(data, requires_grad=False, dtype=None)``: a new leaf on the device
        from host data (a NumPy array, a CPU tensor's values).
    elementwise : callable
        ``elementwise(op, x, y=None)``: an elementwise row of the op table applied to
        operands of which one is a device tensor.
    function : callable
        ``function(op)``: the target's function for an array row of the op table (its
        arguments are the CPU front end's); called only for rows that declare a GPU
        target.
    """

    name: str
    tensor_type: type
    to_device: Callable[..., Any]
    elementwise: Callable[..., Any]
    function: Callable[[Any], Callable[..., Any]]


_MODULES: dict[str, str] = {}  # name -> module that registers it, imported on first use
_DEVICES: dict[str, Device] = {}
# transforms whose values stand in for tensors (vmap's batched values): routed like a
# device's tensors, ahead of them, but no device= name
_TRACERS: dict[str, Device] = {}
_LISTENERS: list[Callable[[tuple[type, ...]], None]] = []
TYPES: tuple[type, ...] = ()


def declare(name: str, module: str) -> None:
    """Make device ``name`` known, to be loaded from ``module`` on first use.

    Parameters
    ----------
    name : str
        The device's name (``device=name``).
    module : str
        The module whose import registers it (:func:`register`).
    """
    _MODULES[name] = module


def register(device: Device) -> None:
    """Register a loaded device target; the callbacks of :func:`listen` see its tensor
    type from now on.

    Parameters
    ----------
    device : Device
        The target's entry points.
    """
    _DEVICES[device.name] = device
    _announce()


def register_tracer(tracer: Device) -> None:
    """Register a transform's stand-in for tensors (``tapegrad.batching``'s batched
    values): the ops route to its entry points as to a device's, ahead of any device
    (its values may hold device tensors), and it has no ``device=`` name.

    Parameters
    ----------
    tracer : Device
        Its entry points (``to_device`` is not called).
    """
    _TRACERS[tracer.name] = tracer
    _announce()


def _announce() -> None:
    global TYPES
    TYPES = tuple(d.tensor_type for d in (*_TRACERS.values(), *_DEVICES.values()))
    for fn in _LISTENERS:
        fn(TYPES)


def listen(fn: Callable[[tuple[type, ...]], None]) -> None:
    """Call ``fn(types)`` now and whenever a device registers: ``types`` is the tuple of
    device tensor types (empty while none is loaded)."""
    _LISTENERS.append(fn)
    fn(TYPES)


def names() -> list[str]:
    """Every device name ``device=`` accepts: ``'cpu'`` and the declared targets."""
    return ["cpu", *sorted(set(_MODULES) | set(_DEVICES))]


def get(name: Any, where: str) -> Device:
    """The device called ``name``, its module imported on first use.

    Parameters
    ----------
    name : str
        A declared device name (not ``'cpu'``, which the core handles itself).
    where : str
        The function asking, for the error message.

    Returns
    -------
    Device

    Raises
    ------
    ValueError
        No device of that name is declared.
    """
    found = _DEVICES.get(name) if isinstance(name, str) else None
    if found is not None:
        return found
    if not isinstance(name, str) or name not in _MODULES:
        known = " or ".join(repr(n) for n in names())
        raise ValueError(f"{where}: unknown device {name!r} (use {known})")
    importlib.import_module(_MODULES[name])
    return _DEVICES[name]


def route(operands: Iterable[Any]) -> Device | None:
    """The device of the first device tensor among ``operands``; None when there is
    none (CPU operands)."""
    for a in operands:
        if isinstance(a, TYPES):
            for d in (*_TRACERS.values(), *_DEVICES.values()):
                if isinstance(a, d.tensor_type):
                    return d
    return None


def route_call(args: tuple, kwargs: dict) -> Device | None:
    """The target of an array op's call: a tracer's where any argument is or holds one
    of its values (a list of them included), else the device of the first two
    arguments (:func:`route`)."""
    for tracer in _TRACERS.values():
        if _holds(args, tracer.tensor_type) or _holds(kwargs, tracer.tensor_type):
            return tracer
    return route(args[:2])


def _holds(obj: Any, kind: type) -> bool:
    if isinstance(obj, kind):
        return True
    if isinstance(obj, list | tuple):
        return any(_holds(o, kind) for o in obj)
    if isinstance(obj, dict):
        return any(_holds(o, kind) for o in obj.values())
    return False
