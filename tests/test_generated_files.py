"""The generated files and the op table they come from: tapegrad/_generated.py and
docs/ops.md are current, every row has test cases and a public function, and saved
values are read off the formulas."""

from __future__ import annotations

from tapegrad.ops import ROWS, Kind, codegen


def test_generated_wrappers_are_up_to_date():
    assert codegen.TARGET.read_text() == codegen.render(ROWS), (
        "tapegrad/_generated.py is stale: run `python -m tapegrad.ops.codegen`"
    )


def test_op_reference_in_docs_is_up_to_date():
    from tapegrad.ops.docs import TARGET, render

    assert TARGET.read_text() == render(), "docs/ops.md is stale: run python -m tapegrad.ops.docs"


def test_every_row_has_test_cases_and_a_public_function():
    from tapegrad.surface import NAMESPACES

    from .optable_cases import cases

    covered = {c.op.name for c in cases()}
    for op in ROWS:
        assert op.name in covered
        assert callable(NAMESPACES[op.namespace][op.name])
        if op.kind not in (Kind.ARRAY, Kind.COMPOSITE):
            assert op.differentiable == (op.bwd is not None)
    assert sum(op.differentiable for op in ROWS) >= 80


def test_saved_values_are_read_off_the_formulas():
    by = {op.name: op for op in ROWS}
    assert by["exp"].saves == ("out",)
    assert by["sin"].saves == ("x",)
    assert by["multiply"].saves == ("x", "y")
    assert by["add"].saves == ()  # needs nothing but g
    assert by["true_divide"].saves == ("y", "out")
