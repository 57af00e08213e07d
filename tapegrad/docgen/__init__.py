"""Generate ``tapegrad/docstrings.py``: the numpydoc docstrings of the namespaces that
mirror NumPy and SciPy (``tapegrad.numpy``, ``tapegrad.numpy.linalg``,
``tapegrad.special`` = ``tapegrad.scipy.special``, ``tapegrad.scipy.linalg``) and of the
``Tensor`` methods that mirror them.

``python -m tapegrad.docgen`` writes the file; ``tests/test_docgen.py`` fails while it is
stale. A docstring is composed from what is already declared:

* the summary and extended summary: the recording function's own docstring (elementwise
  rows: the op table row's ``doc``), or a summary written in :mod:`.specs`;
* Parameters: the signature, each name described by the shared table of NumPy's and
  SciPy's parameter names (:mod:`.params`), overridden per function in :mod:`.specs`;
* Returns, Raises, See Also and Notes: from the row's kind (elementwise, comparison,
  reduction, ...), whether it is differentiable, its dtypes and test domain, and the
  library function it stands in for;
* Examples: code from a template per kind of row, or written per function in
  :mod:`.specs`, run here: the output shown is the output the code printed.

The composed text is written out (not composed at import, which would cost the import
time of ~300 docstrings): ``tapegrad.numpy_protocols.publish`` sets each published
function's ``__doc__`` from the file, ``tapegrad.surface`` the Tensor methods'.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import io
import re
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from .. import ops, surface
from ..ops import BY_NAME, Kind
from ..tensors import Tensor
from .kinds import Doc, defaults, method_doc
from .params import PARAMS
from .specs import FAMILIES, METHODS, SPECS

TARGET = Path(__file__).resolve().parent.parent / "docstrings.py"

# (key prefix, the tapegrad module, the library function it stands in for)
MODULES = (
    ("numpy", "tapegrad.numpy", "numpy"),
    ("numpy.linalg", "tapegrad.numpy.linalg", "numpy.linalg"),
    ("special", "tapegrad.special", "scipy.special"),
    ("scipy.linalg", "tapegrad.scipy.linalg", "scipy.linalg"),
    ("scipy.integrate", "tapegrad.scipy.integrate", "scipy.integrate"),
)
# the functions of tapegrad.scipy.integrate that are op-table rows
INTEGRATE = ("cumulative_trapezoid",)
# the import line of each alias an example may use
IMPORTS = (
    ("np.", "import numpy as np"),
    ("tg.", "import tapegrad as tg"),
    ("tnp.", "import tapegrad.numpy as tnp"),
    ("special.", "from tapegrad import special"),
    ("linalg.", "from tapegrad.scipy import linalg"),
    ("integrate.", "from tapegrad.scipy import integrate"),
)
WIDTH = 88


# --- the public functions -----------------------------------------------------------------


def public() -> list[tuple[str, Any, str]]:
    """``(key, published function, library module)`` of every public function."""
    out = []
    for prefix, modname, library in MODULES:
        mod = importlib.import_module(modname)
        for name in mod.__all__:
            f = getattr(mod, name)
            # (scipy.integrate's solvers are written by hand, in tapegrad/integrate.py)
            if not inspect.ismodule(f) and (prefix != "scipy.integrate" or name in INTEGRATE):
                out.append((f"{prefix}.{name}", f, library))
    return out


def _row(key: str, f: Any) -> ops.Op | None:
    """The op table row the published function ``f`` records (aliases included)."""
    prefix, _, name = key.rpartition(".")
    for op in ops.ROWS:
        if op.namespace == prefix and name in (op.name, *op.aliases):
            return op
    raw = inspect.unwrap(getattr(f, "on_tensors", f))
    op = BY_NAME.get(name)
    if op is not None and op.front is not None and inspect.unwrap(op.front) is raw:
        return op
    return None


# --- composing ---------------------------------------------------------------------------


def _wrap(text: str, indent: str = "") -> str:
    """Paragraphs of ``text`` filled to the width (lines that start with a marker, such
    as list items, and indented lines are kept as written)."""
    out = []
    for para in text.strip().split("\n\n"):
        lines = para.split("\n")
        if any(ln.startswith((" ", "-", "*", ">>>")) for ln in lines[1:]):
            out.append("\n".join(indent + ln for ln in lines))
        else:
            out.append(
                textwrap.fill(
                    " ".join(ln.strip() for ln in lines),
                    WIDTH,
                    initial_indent=indent,
                    subsequent_indent=indent,
                    break_on_hyphens=False,
                    break_long_words=False,
                )
            )
    return "\n\n".join(out)


def signature_params(f: Any) -> list[tuple[str, inspect.Parameter]]:
    """(documented name, parameter) per parameter: ``*args`` and ``**kwargs`` starred."""
    out = []
    for p in inspect.signature(f).parameters.values():
        if p.name in ("self", "cls"):
            continue
        star = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "")
        out.append((star + p.name, p))
    return out


def _param_entry(key: str, name: str, p: inspect.Parameter, spec: Doc) -> tuple[str, str]:
    bare = name.lstrip("*")
    prefix = key.rpartition(".")[0]
    entry = (
        spec.params.get(name)
        or spec.params.get(bare)
        or PARAMS.get(f"{prefix}:{bare}")
        or PARAMS.get(bare)
    )
    if entry is None:
        raise KeyError(f"{key}: parameter {name!r} is not described (docgen.params or specs)")
    typ, desc = entry
    has_default = p.default is not p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    if has_default and "optional" not in typ:
        typ += ", optional"
    return typ, desc


def _section(title: str, body: str) -> str:
    return f"{title}\n{'-' * len(title)}\n{body}"


def _render_params(key: str, f: Any, spec: Doc) -> str:
    blocks = []
    for name, p in signature_params(f):
        typ, desc = _param_entry(key, name, p, spec)
        head = f"{name} : {typ}" if typ else name
        blocks.append(head + "\n" + _wrap(desc, "    "))
    return "\n".join(blocks)


def _render_returns(returns: str) -> str:
    """``returns``: "type\\n description" blocks separated by blank lines."""
    blocks = []
    for block in returns.strip().split("\n\n"):
        head, _, desc = block.partition("\n")
        blocks.append(head.strip() + "\n" + _wrap(desc, "    "))
    return "\n".join(blocks)


def _render_raises(raises: list[tuple[str, str]]) -> str:
    return "\n".join(f"{exc}\n{_wrap(why, '    ')}" for exc, why in raises)


def _see_also(library: str, name: str, spec: Doc, family: list[str]) -> list[str]:
    lines = []
    lib = importlib.import_module(library)
    if spec.library is not None:
        if spec.library:
            lines.append(spec.library)
    elif hasattr(lib, name):
        lines.append(f"{library}.{name} : The function this one stands in for.")
    lines += list(spec.see)
    seen = {ln.partition(" :")[0] for ln in lines}
    for other in family:
        if other != name and other not in seen:
            lines.append(other)
    return lines


def _family(key: str) -> list[str]:
    """Related functions of the same namespace (the first family that has ``key``'s)."""
    prefix, _, name = key.rpartition(".")
    names = set(importlib.import_module(dict((p, m) for p, m, _ in MODULES)[prefix]).__all__)
    for fam in FAMILIES:
        if name in fam:
            return [n for n in fam if n != name and n in names][:6]
    return []


# --- examples ----------------------------------------------------------------------------


def _with_imports(code: str) -> str:
    code = textwrap.dedent(code).strip()
    heads = []
    for marker, line in IMPORTS:
        if re.search(r"(?<![\w.])" + re.escape(marker), code) and line not in code:
            heads.append(line)
    return "\n".join([*heads, code])


def run_example(code: str) -> str:
    """The doctest of ``code``: each statement as typed at the prompt, followed by what
    it printed (the value of an expression statement, as the interpreter shows it)."""
    code = _with_imports(code)
    tree = ast.parse(code)
    lines = code.split("\n")
    globs: dict[str, Any] = {"__name__": "__docgen__"}
    out = []
    with np.printoptions(legacy=False):
        for node in tree.body:
            src = lines[node.lineno - 1 : node.end_lineno]
            out.append(">>> " + src[0])
            out += ["... " + ln for ln in src[1:]]
            if len(src) > 1 and isinstance(node, ast.FunctionDef | ast.For | ast.With | ast.If):
                out.append("...")
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                exec(compile("\n".join(src) + "\n", "<example>", "single"), globs)
            shown = buf.getvalue().rstrip("\n")
            if re.search(r"-0\.0*(?![0-9])", shown):
                raise ValueError(
                    f"example prints a negative zero, which may print as 0. "
                    f"elsewhere; choose other inputs:\n{code}"
                )
            if shown:
                out += [ln.rstrip() if ln.strip() else "<BLANKLINE>" for ln in shown.split("\n")]
    return "\n".join(out)


def _template_example(key: str, op: ops.Op, name: str) -> str:
    mod = "special" if key.startswith("special.") else "tnp"
    call = f"{mod}.{name}"
    dx, dy = op.domain if isinstance(op.domain[0], tuple) else (op.domain, op.domain)
    if op.kind is Kind.UNARY:
        vals = SAMPLES.get(op.name, _samples(*dx, 3))
        return f"""
            x = tg.tensor({vals}, requires_grad=True)
            y = {call}(x)
            y
            tnp.sum(y).backward()
            x.grad
            """
    if op.kind is Kind.COMPARE:
        return f"""
            x = tg.tensor([1.0, 2.0, 3.0])
            {call}(x, 2.0)
            {call}(x, tg.tensor([[3.0], [1.0]]))
            """
    xs, ys = SAMPLES.get(op.name, (_samples(*dx, 2), _samples(*dy, 2, 1)))
    return f"""
        x = tg.tensor({xs}, requires_grad=True)
        y = tg.tensor({ys}, requires_grad=True)
        z = {call}(x, y)
        z
        tnp.sum(z).backward()
        x.grad
        y.grad
        """


# sample inputs of binary rows whose operands have their own domains (polygamma's
# integer order, gammainc's positive a), or make a clearer example than the default
SAMPLES = {
    "log": "[0.5, 1.0, 2.0]",
    "log2": "[0.5, 1.0, 2.0]",
    "log10": "[0.5, 1.0, 2.0]",
    "sqrt": "[0.25, 1.0, 2.25]",
    "cbrt": "[0.125, 1.0, 8.0]",
    "floor": "[-1.5, 0.3, 2.7]",
    "ceil": "[-1.5, 0.3, 2.7]",
    "trunc": "[-1.5, 0.3, 2.7]",
    "rint": "[-1.5, 0.3, 2.5]",
    "exp": "[-1.0, 0.0, 1.0]",
    "polygamma": ("[1.0, 2.0]", "[0.5, 1.5]"),
    "gammainc": ("[0.5, 2.0]", "[1.0, 1.5]"),
    "gammaincc": ("[0.5, 2.0]", "[1.0, 1.5]"),
    "ive": ("[0.5, 1.5]", "[1.0, 2.0]"),
    "beta": ("[0.5, 2.0]", "[1.5, 3.0]"),
    "betaln": ("[0.5, 2.0]", "[1.5, 3.0]"),
    "xlogy": ("[0.0, 2.0]", "[0.5, 3.0]"),
    "xlog1py": ("[0.0, 2.0]", "[0.5, 3.0]"),
    "power": ("[1.5, 2.0]", "[2.0, 0.5]"),
    "arctan2": ("[1.0, -1.0]", "[1.0, 2.0]"),
    "remainder": ("[5.5, -2.5]", "[2.0, 2.0]"),
    "maximum": ("[1.0, 2.0, 3.0]", "[2.0, 2.0, 2.0]"),
    "minimum": ("[1.0, 2.0, 3.0]", "[2.0, 2.0, 2.0]"),
    "fmax": ("[1.0, np.nan, 3.0]", "[2.0, 2.0, np.nan]"),
    "fmin": ("[1.0, np.nan, 3.0]", "[2.0, 2.0, np.nan]"),
}


def _samples(lo: float, hi: float, n: int, shift: int = 0) -> str:
    """``n`` round values inside the row's test domain."""
    # fractions of the domain; a symmetric one keeps 0 out (a gradient of 0 there may
    # print as -0. on one compilation tier and 0. on another)
    fractions = {3: (0.25, 0.5, 0.75), 2: (0.25, 0.75)}[n]
    if lo == -hi:
        fractions = {3: (0.25, 0.625, 0.875), 2: (0.25, 0.75)}[n]
    vals = []
    for f in fractions:
        v = lo + (hi - lo) * (f + 0.125 * shift)
        vals.append(float(f"{v:.2g}") if abs(v) >= 0.1 else round(v, 2))
    return "[" + ", ".join(repr(v) for v in vals) + "]"


# --- the docstrings ----------------------------------------------------------------------


def resolve(key: str, f: Any, library: str) -> Doc:
    """The docstring parts of the published function ``key``, the kind's defaults
    filled in."""
    name = key.rpartition(".")[2]
    return defaults(key, name, f, _row(key, f), library, SPECS.get(key, Doc()))


def compose(key: str, f: Any, library: str) -> str:
    """The numpydoc docstring of the published function ``key``."""
    name = key.rpartition(".")[2]
    op = _row(key, f)
    spec = resolve(key, f, library)
    elementwise = op is not None and op.kind in (Kind.UNARY, Kind.BINARY, Kind.COMPARE)
    code = spec.example or (_template_example(key, op, name) if elementwise else "")
    if not code:
        raise KeyError(f"{key}: no example (write one in docgen.specs)")
    see = _see_also(library, name, spec, _family(key) if spec.family else [])
    return _assemble(key, f, spec, see, code)


def _assemble(key: str, f: Any, spec: Doc, see: list[str], code: str) -> str:
    parts = [spec.summary]
    if spec.body:
        parts.append(_wrap(spec.body))
    if signature_params(f):
        parts.append(_section("Parameters", _render_params(key, f, spec)))
    if spec.returns:
        parts.append(_section("Returns", _render_returns(spec.returns)))
    if spec.raises:
        parts.append(_section("Raises", _render_raises(spec.raises)))
    if see:
        parts.append(_section("See Also", "\n".join(see)))
    if spec.notes:
        parts.append(_section("Notes", _wrap(spec.notes)))
    parts.append(_section("Examples", run_example(code)))
    return "\n\n".join(p.rstrip() for p in parts) + "\n"


def compose_method(name: str, f: Any) -> str:
    """The docstring of ``Tensor.<name>``: the method form of ``tapegrad.numpy.<name>``."""
    function = METHOD_OF.get(name, name)
    published = importlib.import_module("tapegrad.numpy")
    fdoc = resolve(f"numpy.{function}", getattr(published, function), "numpy")
    spec = method_doc(function, f, METHODS.get(name, Doc()), fdoc)
    code = spec.example
    op = BY_NAME.get(name)
    if not code and op is not None and op.kind is Kind.UNARY:
        dx = op.domain if not isinstance(op.domain[0], tuple) else op.domain[0]
        code = f"x = tg.tensor({SAMPLES.get(op.name, _samples(*dx, 3))}, requires_grad=True)"
        code += f"\nx.{name}()"
    if not code:
        raise KeyError(f"Tensor.{name}: no example (write one in docgen.specs.METHODS)")
    return _assemble(f"numpy.{function}", f, spec, list(spec.see), code)


# methods whose function has another name
METHOD_OF = {"conjugate": "conj", "flatten": "ravel", "copy": "array"}


def docstrings() -> dict[str, str]:
    """Every docstring, by key (``numpy.tanh``, ``special.expit``, ``Tensor.sum``)."""
    out = {key: compose(key, f, library) for key, f, library in public()}
    for name in sorted(method_names()):
        out[f"Tensor.{name}"] = compose_method(name, vars(Tensor)[name])
    return out


def method_names() -> list[str]:
    """The Tensor methods ``tapegrad.surface`` installs from ``tapegrad.numpy``."""
    return list(surface.MIRRORED)


def render() -> str:
    docs = docstrings()
    lines = [
        '"""The numpydoc docstrings of ``tapegrad.numpy``, ``tapegrad.numpy.linalg``,',
        "``tapegrad.special`` and ``tapegrad.scipy.linalg``, and of the Tensor methods that",
        "mirror them, by key (``numpy.tanh``, ``special.expit``, ``Tensor.sum``).",
        "",
        "@generated by ``python -m tapegrad.docgen`` (see tapegrad/docgen/); do not edit.",
        "tests/test_docgen.py fails while it is stale.",
        '"""',
        "",
        "DOCS: dict[str, str] = {",
    ]
    for key, doc in docs.items():
        lines.append(f'    "{key}": {_literal(doc)},')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _literal(doc: str) -> str:
    """A triple-quoted literal of ``doc`` (its lines kept as they read)."""
    body = doc.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return '"""\\\n' + body + '"""'


def main() -> None:
    import argparse

    argparse.ArgumentParser(
        description=f"Write {TARGET.name}: run every example and compose the docstrings."
    ).parse_args()
    TARGET.write_text(render())
    print(f"wrote {TARGET}")


__all__ = ["TARGET", "compose", "compose_method", "docstrings", "main", "render", "run_example"]
