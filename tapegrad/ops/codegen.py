"""Generate ``tapegrad/_generated.py``: one C-callable wrapper per (op, dtype, direction).

Each wrapper binds a row's formulas (or node kernels) and a dtype to the adapter of its
kind. They are plain functions in a real file, compiled lazily by
``tapegrad.dispatch`` with ``numba.cfunc(cache=True)``: numba can only cache
functions with a source file, and gives each its own cache entry by qualified name.

Run ``python -m tapegrad.ops.codegen`` after adding or changing a row;
``tests/test_generated_files.py`` fails while the file is stale.
"""

from __future__ import annotations

from pathlib import Path

from ..layout import DTYPE_NAMES, F64, FWD, N_DTYPES
from .table import ROWS, Kind, Op

TARGET = Path(__file__).resolve().parent.parent / "_generated.py"
NP_NAMES = ("np.float64", "np.float32", "np.int64", "np.bool_")
# the package these modules belong to: "tapegrad" (or the interpreted tier's copy of it,
# tapegrad.tiers); the generated file imports relatively, so each copy imports its own
ROOT = __package__.rsplit(".", 1)[0]
ADAPTERS = f"{ROOT}.ops.elementwise.binary_kernels"
JIT = f"{ROOT}._jit"


def _relative(module: str) -> str:
    """``.ops.elementwise.kernels`` for ``tapegrad.ops.elementwise.kernels``."""
    return "." + module.removeprefix(ROOT + ".")


def sig_name(sig: int) -> str:
    if sig < N_DTYPES:
        return DTYPE_NAMES[sig]
    src, dst = divmod(sig - N_DTYPES, N_DTYPES)
    return f"{DTYPE_NAMES[src]}_to_{DTYPE_NAMES[dst]}"


def wrapper_name(op: Op, sig: int, direction: int) -> str:
    return f"{op.name}__{sig_name(sig)}__{'fwd' if direction == FWD else 'bwd'}"


def _dtype_args(sig: int) -> str:
    if sig < N_DTYPES:
        return NP_NAMES[sig]
    src, dst = divmod(sig - N_DTYPES, N_DTYPES)
    return f"{NP_NAMES[src]}, {NP_NAMES[dst]}"


def _ref(fn: object) -> tuple[str, str]:
    py = getattr(fn, "py_func", fn)
    return py.__module__, py.__name__


def _bodies(op: Op, sig: int) -> list[tuple[int, str, set[tuple[str, str]]]]:
    """(direction, call expression, imports) for the wrappers of one signature."""
    dt = _dtype_args(sig)
    out = []
    if op.kind is Kind.ARRAY:
        for direction, fn in ((0, op.fwd), (1, op.bwd)):
            if fn is not None:
                mod, name = _ref(fn)
                out.append((direction, f"{name}({dt}, node, tp)", {(mod, name)}))
        return out
    # elementwise: the adapter looks the formulas up by the op's name at compile time
    kind = op.kind.value
    adapter = "compare_fwd" if op.kind is Kind.COMPARE else f"{kind}_fwd"
    ref = f"OP_{op.name}"
    imports = {(ADAPTERS, adapter), (JIT, "StaticRef")}
    out.append((0, f"{adapter}({ref}, {dt}, node, tp)", imports))
    if op.bwd is not None:
        imports = {(ADAPTERS, f"{kind}_bwd"), (JIT, "StaticRef")}
        out.append((1, f"{kind}_bwd({ref}, {dt}, node, tp)", imports))
    return out


def scalar_rows(rows: list[Op]) -> list[Op]:
    """The rows the scalar family kernels serve: unary and binary elementwise rows
    with a float64 kernel (comparisons give booleans: not these)."""
    return [op for op in rows if op.kind in (Kind.UNARY, Kind.BINARY) and F64 in op.sigs]


def _scalar_family(rows: list[Op]) -> tuple[list[str], set[tuple[str, str]]]:
    """``scalar_fwd`` and ``scalar_bwd``: every float64 unary and binary row's formulas
    behind one switch on the op code (the executors of replay's fused runs of scalar
    nodes, ``dispatch.fused_forward``/``fused_backward``), and the op codes each
    serves."""
    fwd, bwd, codes, bwd_codes = [], [], [], []
    for op in scalar_rows(rows):
        ref = f"OP_{op.name}"
        unary = op.kind is Kind.UNARY
        codes.append(op.code)
        call = f"fwd1({ref}, x)" if unary else f"fwd2({ref}, x, y)"
        fwd.append(f"    if op == {op.code}:\n        return {call}\n")
        if op.bwd is None:
            continue
        bwd_codes.append(op.code)
        if unary:
            bwd.append(f"    if op == {op.code}:\n        return bwd1({ref}, g, x, out)\n")
        else:
            bwd.append(
                f"    if op == {op.code}:\n"
                f"        if which == 0:\n"
                f"            return bwd2({ref}, 0, g, x, y, out)\n"
                f"        return bwd2({ref}, 1, g, x, y, out)\n"
            )
    text = [
        f"SCALAR_FWD_OPS = frozenset({tuple(codes)!r})\n"
        f"SCALAR_BWD_OPS = frozenset({tuple(bwd_codes)!r})\n",
        '@jit(inline="always")\ndef scalar_fwd(op, x, y):\n'
        '    """Row ``op``\'s forward formula at float64 ``x`` (and ``y``: binary rows)."""\n'
        + "".join(fwd)
        + "    return np.nan\n",
        '@jit(inline="always")\ndef scalar_bwd(op, which, g, x, y, out):\n'
        '    """Row ``op``\'s backward formula for input ``which`` (0: x, 1: y) at float64\n'
        '    values: the gradient ``g`` times d out / d input."""\n'
        + "".join(bwd)
        + "    return np.nan\n",
    ]
    imports = {(JIT, "jit")} | {(ADAPTERS, n) for n in ("fwd1", "fwd2", "bwd1", "bwd2")}
    return text, imports


def render(rows: list[Op]) -> str:
    imports: set[tuple[str, str]] = set()
    funcs = []
    for op in rows:
        for sig in op.sigs:
            for direction, call, refs in _bodies(op, sig):
                imports |= refs
                funcs.append(
                    f"def {wrapper_name(op, sig, direction)}(node, tp):\n    return {call}\n"
                )
    scalar, refs = _scalar_family(rows)
    imports |= refs
    by_module: dict[str, list[str]] = {}
    for mod, name in imports:
        by_module.setdefault(mod, []).append(name)
    lines = [
        '"""@generated by ``python -m tapegrad.ops.codegen`` from the op table. Do not edit.',
        "",
        "One wrapper ``<op>__<dtype>__<fwd|bwd>(node, tp) -> status`` per row, signature and",
        "direction; ``tapegrad.dispatch`` compiles them lazily into C callbacks.",
        '"""',
        "",
        "# ruff: noqa: I001",
        "import numpy as np",
        "",
    ]
    for mod in sorted(by_module):
        names = sorted(by_module[mod])
        lines.append(f"from {_relative(mod)} import (")
        lines += [f"    {n}," for n in names]
        lines.append(")")
    lines += ["", ""]
    lines += [f'OP_{op.name} = StaticRef("{op.name}")' for op in rows if op.kind is not Kind.ARRAY]
    lines += ["", ""]
    return "\n".join(lines) + "\n\n".join(funcs + scalar).rstrip("\n") + "\n"


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description=f"Write {TARGET.name} from the op table.")
    parser.add_argument("--check", action="store_true", help="only say whether it is stale")
    args = parser.parse_args()
    text = render(ROWS)
    if args.check:
        stale = not TARGET.exists() or TARGET.read_text() != text
        print("stale" if stale else "up to date")
        return 1 if stale else 0
    TARGET.write_text(text)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
