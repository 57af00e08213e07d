"""Every public name has a numpydoc docstring: a summary, every parameter described,
Returns where it returns something, Raises where it takes arguments, and an Examples
section (run as doctests by ``test_docstring_examples_run``)."""

from __future__ import annotations

import doctest
import importlib
import inspect
from typing import Any

import numpy as np
import pytest

numpydoc_validate = pytest.importorskip("numpydoc.validate")
from numpydoc.docscrape import get_doc_object  # noqa: E402

# The public modules, in the order the API reference lists them (docs/api/index.rst).
PUBLIC_MODULES = (
    "tapegrad",
    "tapegrad.warmup",
    "tapegrad.numpy",
    "tapegrad.numpy.linalg",
    "tapegrad.scipy.special",
    "tapegrad.scipy.linalg",
    "tapegrad.scipy.stats",
    "tapegrad.scipy.integrate",
    "tapegrad.scipy.optimize",
    "tapegrad.scipy.sparse",
    "tapegrad.scipy.sparse.linalg",
    "tapegrad.special",
    "tapegrad.integrate",
    "tapegrad.graph",
    "tapegrad.testing",
    "tapegrad.extend",
    "tapegrad.distributed",
    "tapegrad.cuda",
)

# numpydoc's validation codes that fail the test: no docstring, no summary, a parameter
# missing or unknown, no Returns where the function returns a value, no Examples.
REQUIRED = {"GL08", "SS01", "PR01", "PR02", "RT01", "EX01"}


def public_names() -> list[str]:
    """Dotted paths of every public function, class and object (modules left out)."""
    out = []
    for modname in PUBLIC_MODULES:
        mod = importlib.import_module(modname)
        for name in mod.__all__:
            if not inspect.ismodule(getattr(mod, name)):
                out.append(f"{modname}.{name}")
    return out


def class_members() -> list[str]:
    """The public methods and properties of every public class (``tapegrad.Tensor``'s
    included): what the API reference renders under each class."""
    out = []
    for path in public_names():
        cls = resolve(path)
        if not inspect.isclass(cls) or issubclass(cls, BaseException):
            continue
        for name, value in vars(cls).items():
            member = callable(value) or isinstance(value, property | classmethod | staticmethod)
            if not name.startswith("_") and member:
                out.append(f"{path}.{name}")
    return out


def resolve(path: str) -> Any:
    modname, _, attr = path.rpartition(".")
    if not modname:
        return importlib.import_module(path)
    try:
        return getattr(importlib.import_module(modname), attr)
    except ModuleNotFoundError:  # a method: tapegrad.Tensor.backward
        return getattr(resolve(modname), attr)


def takes_arguments(obj: Any) -> bool:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return False
    return any(p.name not in ("self", "cls") for p in sig.parameters.values())


@pytest.mark.parametrize("path", public_names() + class_members())
def test_numpydoc_docstring(path):
    obj = resolve(path)
    owner, _, attr = path.rpartition(".")
    if isinstance(inspect.getattr_static(resolve(owner), attr, None), property):
        required = {"GL08", "SS01"}  # a property: what it holds, in a sentence
    else:
        required = REQUIRED
    errors = [
        f"{code}: {msg}"
        for code, msg in numpydoc_validate.validate(path)["errors"]
        if code in required
    ]
    if callable(obj) and takes_arguments(obj) and not get_doc_object(obj)["Raises"]:
        errors.append("no Raises section (what bad input gets)")
    assert not errors, f"{path}:\n" + "\n".join(errors)


def test_the_lists_are_not_empty():
    # (a check that cannot pass vacuously: an import error would empty the lists)
    assert len(public_names()) > 350 and len(class_members()) > 100


@pytest.mark.parametrize("modname", PUBLIC_MODULES)
def test_docstring_examples_run(modname):
    """The Examples sections (and module docstrings) are doctests, run as written."""
    mod = importlib.import_module(modname)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    objects = [mod] + [
        getattr(mod, n) for n in mod.__all__ if not inspect.ismodule(getattr(mod, n))
    ]
    seen = set()
    with np.printoptions(legacy=False):
        for obj in objects:
            for test in finder.find(obj, getattr(obj, "__name__", modname), module=False, globs={}):
                if test.name in seen or not test.examples:
                    continue
                seen.add(test.name)
                runner.run(test, clear_globs=True)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} doctest examples failed"


def test_the_api_reference_lists_every_public_name():
    """docs/api/index.rst names each public name once, under its module."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "api" / "index.rst").read_text()
    listed, module = [], None
    for line in text.splitlines():
        if m := re.match(r"\.\. currentmodule:: (\S+)", line):
            module = m.group(1)
        elif (m := re.match(r"   (\w+)$", line)) and module is not None:
            listed.append(f"{module}.{m.group(1)}")
    assert sorted(listed) == sorted(public_names())
