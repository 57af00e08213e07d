"""NumPy's and SciPy's common parameter names: ``name -> (type, description)``.

One entry serves every function with a parameter of that name; ``"<prefix>:<name>"``
(``"scipy.linalg:lower"``) serves one namespace, and :mod:`.specs` overrides a name for
one function where it means something specific there.
"""

from __future__ import annotations

_TENSOR = "Tensor or array_like"

PARAMS: dict[str, tuple[str, str]] = {
    # operands
    "x": (_TENSOR, "Input values."),
    "y": (_TENSOR, "Second operand; it broadcasts against ``x``."),
    "x1": (_TENSOR, "First operand."),
    "x2": (_TENSOR, "Second operand; it broadcasts against ``x1``."),
    "a": (_TENSOR, "Input tensor."),
    "b": (_TENSOR, "Second operand."),
    "m": (_TENSOR, "Input tensor."),
    "arr": (_TENSOR, "Input tensor."),
    "ary": (_TENSOR, "Tensor to split."),
    "array": (_TENSOR, "Input tensor."),
    "A": (_TENSOR, "Input tensor."),
    "v": (_TENSOR, "Second input."),
    "val": (_TENSOR, "Input values."),
    "z": (_TENSOR, "Input values."),
    "f": (_TENSOR, "Input values."),
    "tup": (
        "sequence of Tensor or array_like",
        "The tensors (or arrays, or numbers) to join.",
    ),
    "arrays": (
        "sequence of Tensor or array_like",
        "The tensors (or arrays) to join; they must have the same shape.",
    ),
    # NumPy's ufunc and reduction keywords
    "out": (
        "None, optional",
        "Not taken with tensor arguments (tensors are immutable: ``TypeError``); NumPy's, "
        "when no argument is a tensor.",
    ),
    "axis": (
        "None or int or tuple of ints",
        "Axis or axes to work along; None: all of them (the flattened input). Negative "
        "values count from the last axis.",
    ),
    "keepdims": (
        "bool",
        "Keep the reduced axes, with length 1, so that the result broadcasts against the input.",
    ),
    "dtype": (
        "data-type",
        "The dtype to compute in and return; None: the input's (integers and bools give "
        "NumPy's result dtype).",
    ),
    "where": (
        "array_like of bool",
        "Elements to include (a mask broadcast to the input's shape; not differentiable). "
        "Elements left out get no gradient.",
    ),
    "initial": (
        "scalar or Tensor",
        "A starting value that takes part in the reduction (as NumPy's).",
    ),
    "ddof": (
        "int or float",
        "Delta degrees of freedom: the divisor is ``N - ddof``, N the number of elements "
        "(0: the population value; 1: the unbiased sample variance).",
    ),
    "mean": (
        "Tensor or array_like",
        "A mean already computed, with the shape ``keepdims=True`` gives; not recomputed.",
    ),
    "order": (
        "None or str",
        "NumPy's memory-layout or field-order argument; tapegrad's tensors are C-ordered, "
        "and only NumPy's default is accepted.",
    ),
    "copy": ("bool", "NumPy's copy flag."),
    "kind": (
        "None or str",
        "NumPy's sorting algorithm (``'quicksort'``, ``'stable'``...), used on the values to "
        "find the permutation.",
    ),
    "overwrite_input": (
        "bool",
        "Accepted for NumPy's signature; the input is never changed (tensors are immutable).",
    ),
    # shapes and axes
    "shape": ("int or tuple of ints", "The new shape."),
    "axis1": ("int", "First axis."),
    "axis2": ("int", "Second axis."),
    "axes": ("None or tuple of ints", "The permutation of the axes; None: reverse them."),
    "source": ("int or sequence of int", "Original positions of the axes to move."),
    "destination": (
        "int or sequence of int",
        "Destination positions of the axes (the other axes keep their order).",
    ),
    "indices_or_sections": (
        "int or 1-D array_like of int",
        "An integer N: N equal parts (the length along the axis must be divisible by "
        "N); a sorted list of indices: where to split.",
    ),
    "indices": ("array_like of int", "Indices of the elements to take."),
    "offset": ("int", "Offset of the diagonal from the main diagonal (positive: above)."),
    "k": ("int", "The diagonal: 0 the main one, positive above, negative below."),
    "decimals": ("int", "Number of decimals to round to (negative: to tens, hundreds...)."),
    "repeats": ("int or array_like of int", "Repetitions of each element."),
    "reps": ("int or tuple of ints", "Repetitions along each axis."),
    "shift": ("int or tuple of ints", "Places by which elements move (negative: backwards)."),
    "n": ("int", "How many times to apply it."),
    "mode": ("str", "NumPy's mode argument."),
    "key": (
        "index",
        "NumPy index: ints, slices, None, ``...``, integer arrays and boolean masks, "
        "mixed freely (a tuple for several axes).",
    ),
    # SciPy's linear algebra keywords
    "overwrite_a": (
        "bool",
        "Accepted for SciPy's signature; the input is never overwritten (tensors are immutable).",
    ),
    "overwrite_b": (
        "bool",
        "Accepted for SciPy's signature; the input is never overwritten (tensors are immutable).",
    ),
    "check_finite": (
        "bool",
        "Accepted for SciPy's signature and not used: a non-finite input is not refused, "
        "it gives NaN or raises ``LinAlgError`` where the factorization fails.",
    ),
    "lower": ("bool", "Whether the lower triangle of ``a`` is the one read."),
    "hermitian": (
        "bool",
        "Whether ``a`` is symmetric (real Hermitian); only its lower triangle is then "
        "read, as NumPy does.",
    ),
    "rcond": (
        "None or float",
        "Relative cutoff for small singular values, which count as zero.",
    ),
    "full_matrices": (
        "bool",
        "Whether ``U`` and ``Vh`` are square (True, NumPy's default) or thin. A "
        "non-square input that requires grad needs ``full_matrices=False``: the extra "
        "columns are not unique.",
    ),
    "compute_uv": (
        "bool",
        "Whether to compute ``U`` and ``Vh``; False gives the singular values alone.",
    ),
    "UPLO": ("{'L', 'U'}", "The triangle of ``a`` that is read: lower or upper."),
    "ord": ("None, int, float, inf, -inf or 'fro'", "Order of the norm."),
}
