"""The generated docstrings of the NumPy- and SciPy-mirroring namespaces
(``tapegrad/docstrings.py``, written by ``python -m tapegrad.docgen``): current, applied
to the functions and methods, their examples passing, and their generic Raises entries
true."""

from __future__ import annotations

import ast
import doctest
import importlib
import inspect
from typing import Any

import numpy as np
import pytest

import tapegrad
from tapegrad import docgen
from tapegrad.docgen import kinds
from tapegrad.docstrings import DOCS


def test_the_generated_file_is_current():
    assert docgen.TARGET.read_text() == docgen.render(), (
        "tapegrad/docstrings.py is stale: run `python -m tapegrad.docgen`"
    )


def test_every_function_and_method_carries_its_docstring():
    keys = set()
    for key, f, _ in docgen.public():
        assert f.__doc__ == DOCS[key], key
        keys.add(key)
    for name in docgen.method_names():
        assert getattr(tapegrad.Tensor, name).__doc__ == DOCS[f"Tensor.{name}"], name
        keys.add(f"Tensor.{name}")
    assert keys == set(DOCS)
    # (the scipy.special namespace shares tapegrad.special's functions)
    special = importlib.import_module("tapegrad.scipy.special")
    assert special.expit.__doc__ == DOCS["special.expit"]


@pytest.mark.parametrize(
    "prefix", ["numpy.", "numpy.linalg.", "special.", "scipy.linalg.", "Tensor."]
)
def test_every_example_runs(prefix):
    """Each docstring's Examples, by key: aliases too (``abs``, whose ``__name__`` is
    ``absolute``, which a doctest finder run by name would take for the same test)."""
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    with np.printoptions(legacy=False):
        for key, doc in DOCS.items():
            if key.startswith(prefix) and not key[len(prefix) :].count(".") > 0:
                runner.run(parser.get_doctest(doc, {}, key, None, 0), clear_globs=True)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0 and result.failed == 0


def _call_with(
    code: str, name: str, f: Any, keyword: str, value: str
) -> tuple[list[str], str] | None:
    """The example's statements before its first call of ``f`` (published as ``name``),
    and that call with
    ``keyword=value`` added (or put in place of the argument given by position)."""
    code = docgen._with_imports(code)
    tree = ast.parse(code)
    position = list(inspect.signature(f).parameters).index(keyword)
    bad = ast.parse(value).body[0].value
    for i, node in enumerate(tree.body):
        for call in ast.walk(node):
            if isinstance(call, ast.Call) and ast.unparse(call.func).endswith(f".{name}"):
                call.keywords = [k for k in call.keywords if k.arg != keyword]
                if len(call.args) > position:
                    call.args[position] = bad
                else:
                    call.keywords.append(ast.keyword(keyword, bad))
                before = [ast.unparse(n) for n in tree.body[:i]]
                return before, ast.unparse(call)
    return None


# keyword, bad value, the Raises entry that promises the error, the exception
GENERIC = [
    ("out", "np.zeros(1)", kinds._OUT, TypeError),
    ("out", "np.zeros(1)", kinds._UNSUPPORTED, TypeError),
    ("axis", "9", kinds._AXIS, np.exceptions.AxisError),
]


def test_the_generic_raises_entries_hold():
    """Where a docstring promises the shared Raises entries (``out=`` refused, an axis
    out of range), its example's call with that argument raises so."""
    checked = 0
    for key, f, _ in docgen.public():
        doc = DOCS[key]
        flat = " ".join(doc.split())
        code = "\n".join(line[4:] for line in doc.split("\n") if line.startswith((">>> ", "... ")))
        for keyword, value, (exc_name, why), exc in GENERIC:
            if f"{exc_name} {why}" not in flat:
                continue
            found = _call_with(code, key.rpartition(".")[2], f, keyword, value)
            assert found is not None, f"{key}: no call in its example"
            before, call = found
            globs: dict = {"np": np}
            for stmt in before:
                exec(stmt, globs)
            with pytest.raises(exc):
                eval(call, globs)
            checked += 1
    assert checked > 100
