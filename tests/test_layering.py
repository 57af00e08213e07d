"""The package's direction of dependency, checked on the source (AST), not at run time.

``LAYERS`` is the one declaration of the layers, bottom first (docs/design/index.md draws
it). A module may import from a lower layer, or from its own layer; never from a
higher one. A function-local import of a package module is refused except the
allow-listed lazy import of the optional CUDA target, and no ``from tapegrad.x import
_name`` may cross modules.

``DEBT`` would list imports that still break these rules, each by (importer, imported
module, kind); it is empty, and a test keeps any entry honest (one that no longer
occurs fails).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "tapegrad"

LAYERS: list[tuple[str, list[str]]] = [
    (
        "base: numba glue, pure rules, generated docstrings",
        ["_threads", "_jit", "shapes", "boundary", "pytree", "docstrings"],
    ),
    ("tape format", ["layout"]),
    (
        "compiled kernels, recorder, scheduler, replay",
        [
            "kernels",
            "kernels.loops",
            "kernels.vecmath",
            "ops.elementwise",
            "ops.shape",
            "ops.linalg",
            "ops.reduce",
            "ops.special",
            "ops.composite",
            "ops.elementwise.kernels",
            "ops.elementwise.binary_kernels",
            "ops.reduce.kernels",
            "ops.shape.kernels",
            "ops.linalg.kernels",
            "record",
            "scheduler",
            "replay",
            "odesolve",
        ],
    ),
    (
        "op declarations",
        [
            "ops.table",
            "ops.vocabulary",
            "ops.elementwise.core",
            "ops.elementwise.ufuncs",
            "ops.reduce.rows",
            "ops.shape.rows",
            "ops.linalg.rows",
            "ops.special.gamma",
            "ops.special.bessel",
            "ops.special.incomplete",
            "ops.special.rows",
            "ops.composite.rows",
            "ops",
            "ops.codegen",
            "ops.docs",
        ],
    ),
    ("generated wrappers, dispatch table", ["_generated", "dispatch"]),
    ("compilation tiers: the interpreted engine, the background compiler", ["tiers"]),
    ("Python tape", ["tuning", "references", "host_arrays", "tape"]),
    ("grad mode, where a conversion comes from", ["grad_mode", "call_sites"]),
    ("device registry", ["devices"]),
    ("Tensor: the handle and its binding into tapes", ["tensors"]),
    ("recording calls, handle accessors for the layers above", ["recording", "handles"]),
    ("backward driver", ["rule_walks", "engine"]),
    (
        "front ends, custom functions, transforms, compile, testing",
        [
            "ops.shape.front",
            "ops.elementwise.front",
            "ops.reduce.front",
            "ops.linalg.front",
            "ops.linalg.scipy_front",
            "ops.linalg.convolution",
            "ops.special.front",
            "ops.composite.rearrange",
            "ops.composite.statistics",
            "ops.composite.nan_reductions",
            "ops.composite.calculus",
            "ops.composite.products",
            "ops.composite.elementwise_composites",
            "derivatives",
            "ops.elementwise.rules",
            "ops.shape.rules",
            "ops.reduce.rules",
            "ops.linalg.rules",
            "ops.reduce.batching",
            "ops.shape.batching",
            "ops.linalg.batching",
            "ops.special.rules",
            "families",
            "function",
            "transforms",
            "forward_mode",
            "checkpoint",
            "graph",
            "closures",
            "fused",
            "program",
            "plain_guards",
            "random_watch",
            "step_node",
            "compile",
            "testing",
        ],
    ),
    ("namespace builder, NumPy protocols, views", ["views", "surface", "numpy_protocols"]),
    (
        "published namespaces, CUDA target",
        [
            "numpy",
            "numpy.linalg",
            "special",
            "scipy",
            "scipy.linalg",
            "scipy.special",
            "scipy.integrate",
            "scipy.stats.branches",
            "scipy.stats.distribution",
            "scipy.stats.continuous",
            "scipy.stats.multivariate",
            "scipy.stats.discrete",
            "scipy.stats",
            "batching",
            "ode_arguments",
            "ode_system",
            "ode_scipy",
            "ode_events",
            "integrate",
            "extend",
            "implicit",
            "scipy.optimize",
            "scipy.sparse",
            "scipy.sparse.linalg",
            "distributed",
            "cuda.runtime",
            "cuda.kernels",
            "cuda.tensor",
            "cuda.ops",
            "cuda.backward",
            "cuda",
        ],
    ),
    (
        "package, and the tools that drive it: kernel warm-up, docstring generator",
        [
            "",
            "warmup",
            "docgen.params",
            "docgen.kinds",
            "docgen.linalg_specs",
            "docgen.shape_specs",
            "docgen.other_specs",
            "docgen.specs",
            "docgen",
            "docgen.__main__",
        ],
    ),
]

# The one function-local import allowed, inside the CUDA target: its kernels module, which
# imports numba's CUDA target (~1.5 s, and only where a CUDA toolkit is installed), loaded
# when the first kernel is built. It is not a cycle (the kernels import nothing above
# them); the core reaches the target only through tapegrad.devices.
LAZY_ALLOWED = {("cuda.runtime", "cuda.kernels")}

# (importer, imported, kind) still to be removed; kind: "up" (a higher layer at module
# level), "local" (a function-local import), "private" (a private name across modules)
DEBT: set[tuple[str, str, str]] = set()


def _modules() -> dict[str, Path]:
    out = {}
    for p in PACKAGE.rglob("*.py"):
        rel = p.relative_to(PACKAGE).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _layer_of() -> dict[str, int]:
    return {m: i for i, (_, mods) in enumerate(LAYERS) for m in mods}


def _resolve(module: str, is_pkg: bool, node: ast.ImportFrom) -> str | None:
    if node.level == 0:
        name = node.module or ""
        if name != "tapegrad" and not name.startswith("tapegrad."):
            return None
        return name[len("tapegrad.") :] if name != "tapegrad" else ""
    base = module.split(".") if module else []
    if not is_pkg:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join([*base, *([node.module] if node.module else [])])


def _imports(module: str, path: Path) -> list[tuple[str, str, bool, ast.AST]]:
    """(imported module, imported name or "", function-local?, node) per import."""
    tree = ast.parse(path.read_text())
    local, typing_only = set(), set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            local.update(id(n) for n in ast.walk(fn) if n is not fn)
        elif isinstance(fn, ast.If) and "TYPE_CHECKING" in ast.unparse(fn.test):
            typing_only.update(id(n) for n in ast.walk(fn) if n is not fn)
    mods = _modules()
    out = []
    for node in ast.walk(tree):
        if id(node) in typing_only:  # annotations only: no import at run time
            continue
        if isinstance(node, ast.ImportFrom):
            target = _resolve(module, path.name == "__init__.py", node)
            if target is None:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}" if target else alias.name
                if sub in mods:  # ``from . import dispatch``: the module itself
                    out.append((sub, "", id(node) in local, node))
                else:
                    out.append((target, alias.name, id(node) in local, node))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "tapegrad" or alias.name.startswith("tapegrad."):
                    out.append((alias.name[len("tapegrad.") :], "", id(node) in local, node))
    return out


def violations() -> set[tuple[str, str, str]]:
    layer = _layer_of()
    found = set()
    for module, path in _modules().items():
        for target, name, is_local, _ in _imports(module, path):
            if target == module:
                continue
            if (module, target) in LAZY_ALLOWED and is_local:
                pass
            elif is_local:
                found.add((module, target, "local"))
            elif layer[target] > layer[module]:
                found.add((module, target, "up"))
            if name.startswith("_") and not name.startswith("__"):
                found.add((module, f"{target}.{name}", "private"))
    return found


def import_cycles() -> list[list[str]]:
    """Every cycle of the package's import graph (module-level and function-local
    imports alike), each as the list of modules around it."""
    graph: dict[str, set[str]] = {}
    for module, path in _modules().items():
        graph[module] = {t for t, _, _, _ in _imports(module, path) if t != module}
    cycles, done, stack = [], set(), []

    def visit(m: str) -> None:
        stack.append(m)
        for t in sorted(graph.get(m, ())):
            if t in stack:
                cycles.append([*stack[stack.index(t) :], t])
            elif t not in done:
                visit(t)
        stack.pop()
        done.add(m)

    for m in sorted(graph):
        if m not in done:
            visit(m)
    return cycles


def test_no_import_cycle():
    """No module imports, even lazily, one that imports it back: the CUDA target is a
    wing the core reaches only through tapegrad.devices."""
    cycles = import_cycles()
    assert not cycles, "import cycles:\n" + "\n".join("  " + " -> ".join(c) for c in cycles)


def test_every_module_has_a_layer():
    missing = sorted(set(_modules()) - set(_layer_of()))
    assert not missing, f"declare these modules in LAYERS: {missing}"


def test_no_new_violations():
    new = sorted(violations() - DEBT)
    assert not new, "imports against the layering (see LAYERS):\n" + "\n".join(
        f"  {m} -> {t} ({k})" for m, t, k in new
    )


def test_debt_only_shrinks():
    gone = sorted(DEBT - violations())
    assert not gone, "fixed: remove from DEBT:\n" + "\n".join(f"  {d}" for d in gone)


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from .engine import backward\n", {("tensors", "engine", "up")}),
        ("def f():\n    from . import numpy\n", {("tensors", "numpy", "local")}),
        ("from .tape import _workers\n", {("tensors", "tape._workers", "private")}),
        ("from .tape import current_tape\n", set()),
    ],
)
def test_the_guard_sees(tmp_path, monkeypatch, source, expected):
    """The checker itself: an upward, a local and a private import are each caught."""
    fake = tmp_path / "tapegrad"
    fake.mkdir()
    for path in _modules().values():
        dest = fake / path.relative_to(PACKAGE)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text("")
    (fake / "tensors.py").write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    assert violations() == expected


# Tensor's private fields (its ``__slots__``) outside tensors.py: the modules that manage
# handles themselves, and the fields each may touch. Everything else reads a handle
# through the accessors (handles.py: home_of, graph_freed...; tensors.values_of).
HANDLE_FRIENDS: dict[str, set[str]] = {
    "tape": {"_tape", "_slot", "_epoch", "_data"},  # binds, copies out, rebinds handles
    "views": {"_view", "_views", "_data", "_tape"},  # the view fields are its own
    "compile": {"_tape", "_slot", "_epoch", "_data", "_flags"},  # capture inputs, guards
    "program": {"_tape", "_slot", "_epoch", "_data"},  # the capture reads and binds inputs
    # the accessors the layers above use instead of the fields: they are the fields' API
    "handles": {"_tape", "_slot", "_epoch", "_data", "_flags", "_grad", "_shape"},
    # the eager hot path reads an operand's slot as the recorder wants it
    "recording": {"_tape", "_slot", "_epoch"},
}


def handle_field_uses() -> set[tuple[str, str]]:
    """(module, field) for every read or write of a Tensor private field, on anything
    but ``self``, outside tensors.py."""
    slots = set()
    body = ast.parse((PACKAGE / "tensors.py").read_text())
    for node in ast.walk(body):
        if isinstance(node, ast.ClassDef) and node.name == "Tensor":
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and ast.unparse(stmt.targets[0]) == "__slots__":
                    slots = {e.value for e in stmt.value.elts if e.value.startswith("_")}
    slots.discard("__weakref__")
    found = set()
    for module, path in _modules().items():
        if module == "tensors":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in slots
                and not (isinstance(node.value, ast.Name) and node.value.id == "self")
            ):
                found.add((module, node.attr))
    return found


def test_tensor_fields_stay_with_the_modules_that_manage_handles():
    uses = handle_field_uses()
    assert ("tape", "_slot") in uses  # the checker sees the fields (a sanity check)
    stray = sorted((m, f) for m, f in uses if f not in HANDLE_FRIENDS.get(m, set()))
    assert not stray, "Tensor fields read outside the handle's managers:\n" + "\n".join(
        f"  {m}: {f}" for m, f in stray
    )


# --- the kernel cache's key --------------------------------------------------------------

# CUDA kernels are compiled per process, never cached on disk: no key needed
NOT_CACHED = {"cuda.kernels"}
COMPILING = {"jit", "jitable", "overload", "intrinsic", "cfunc", "njit", "vectorize"}


def _compiled_definitions(path: Path) -> list[str]:
    """Functions defined in ``path`` that numba compiles (by their decorator)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for d in node.decorator_list:
                target = d.func if isinstance(d, ast.Call) else d
                name = target.attr if isinstance(target, ast.Attribute) else ast.unparse(target)
                if name in COMPILING:
                    found.append(node.name)
    return found


def test_the_cache_key_covers_every_compiled_module():
    """``_jit.HASHED`` keys the kernel cache: every module with compiled code is in it,
    and a hashed module imports only hashed modules, so no cached kernel can call code
    that changed without a new key."""
    from tapegrad._jit import is_hashed

    modules = _modules()

    def rel(m: str) -> str:
        return modules[m].relative_to(PACKAGE).as_posix()

    for module, path in modules.items():
        if not is_hashed(rel(module)):
            if module in NOT_CACHED:
                continue
            assert not _compiled_definitions(path), f"{module} compiles code but is not hashed"
            continue
        for imported, _, _, _ in _imports(module, path):
            if imported in modules:
                assert is_hashed(rel(imported)), f"hashed {module} imports unhashed {imported}"
    assert _compiled_definitions(PACKAGE / "ops" / "elementwise" / "kernels.py")  # the check sees


# generated files (python -m tapegrad.docgen, python -m tapegrad.ops.codegen)
GENERATED = {"docstrings", "_generated"}
MAX_LINES = 1000


def test_no_hand_written_module_is_over_a_thousand_lines():
    """A module that grows past 1,000 lines holds several ideas: split it by what they
    are (the op families, scipy.stats, compile, tensors were)."""
    long = {
        m: n
        for m, p in _modules().items()
        if m not in GENERATED and (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"
