"""What is written per function: summaries where the function's own docstring has no
one-line first sentence, parameters that mean something specific, Returns of what is
not one tensor, Raises, related functions, and the Examples' code (run by the
generator: the output shown is what it printed).

Keys are ``<namespace>.<name>``: ``numpy.pad``, ``numpy.linalg.inv``, ``special.softmax``,
``scipy.linalg.expm``; :data:`METHODS` is keyed by method name (``Tensor.sum``).
"""

from __future__ import annotations

from .kinds import Doc
from .linalg_specs import LINALG
from .other_specs import OTHER
from .shape_specs import SHAPE

T = "Tensor or array_like"

# Related functions (See Also), by family; a function's first family is used
FAMILIES: list[tuple[str, ...]] = [
    ("sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "hypot"),
    ("sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh"),
    ("asin", "acos", "atan", "atan2", "asinh", "acosh", "atanh"),
    ("deg2rad", "rad2deg", "radians", "degrees"),
    ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "logaddexp"),
    ("logaddexp2", "logaddexp", "exp2", "log2"),
    ("sqrt", "cbrt", "square", "power", "float_power", "reciprocal", "pow"),
    ("add", "subtract", "multiply", "true_divide", "divide", "negative", "positive"),
    ("remainder", "mod", "fmod", "divmod", "floor_divide"),
    ("floor", "ceil", "trunc", "fix", "rint", "round", "around"),
    ("sign", "copysign", "absolute", "abs", "fabs"),
    ("less", "less_equal", "greater", "greater_equal", "equal", "not_equal"),
    ("sum", "nansum", "mean", "average", "prod", "cumsum", "cumprod"),
    ("max", "min", "amax", "amin", "nanmax", "nanmin", "ptp", "argmax", "argmin"),
    ("maximum", "minimum", "fmax", "fmin", "max", "min"),
    ("argmax", "argmin", "argsort", "max", "min"),
    ("mean", "nanmean", "median", "average", "var", "std"),
    ("var", "std", "nanvar", "nanstd", "mean", "cov"),
    ("median", "quantile", "percentile", "sort", "partition"),
    ("nanprod", "nancumsum", "nancumprod", "nansum", "nan_to_num"),
    ("cov", "corrcoef", "var"),
    ("reshape", "ravel", "squeeze", "expand_dims", "transpose", "swapaxes", "moveaxis"),
    ("transpose", "swapaxes", "moveaxis", "rollaxis"),
    ("concatenate", "stack", "vstack", "hstack", "dstack", "column_stack", "append"),
    ("split", "array_split", "vsplit", "hsplit", "dsplit"),
    ("flip", "flipud", "fliplr", "rot90", "roll"),
    ("tile", "repeat", "broadcast_to", "pad"),
    ("atleast_1d", "atleast_2d", "atleast_3d", "expand_dims"),
    ("diagonal", "diag", "trace", "tril", "triu"),
    ("take", "take_along_axis", "getitem", "choose", "compress", "extract", "where"),
    ("where", "select", "choose", "clip"),
    ("matmul", "dot", "vdot", "inner", "outer", "tensordot", "einsum", "kron"),
    ("convolve", "correlate"),
    ("diff", "gradient", "trapezoid", "interp", "polyval", "vander"),
    ("real", "imag", "conj", "conjugate", "angle", "real_if_close"),
    ("isnan", "isinf", "isfinite", "nan_to_num"),
    ("zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like"),
    ("arange", "linspace", "logspace", "meshgrid", "eye", "identity", "tri"),
    ("array", "asarray", "astype"),
    ("logical_and", "logical_or", "logical_xor", "logical_not", "all", "any"),
    ("nonzero", "count_nonzero", "searchsorted", "digitize", "argsort"),
    ("shape", "ndim", "size"),
    ("getitem", "setitem"),
    ("expit", "logit", "log_ndtr", "ndtr", "ndtri", "softmax", "log_softmax"),
    ("softmax", "log_softmax", "logsumexp", "expit"),
    ("erf", "erfc", "erfinv", "erfcinv", "erfcx", "ndtr"),
    ("gamma", "gammaln", "digamma", "psi", "polygamma", "multigammaln"),
    ("beta", "betaln", "betainc"),
    ("gammainc", "gammaincc", "gammaln"),
    ("i0", "i1", "i0e", "i1e", "ive"),
    ("xlogy", "xlog1py"),
    # linear algebra
    ("inv", "pinv", "solve", "lstsq", "det", "slogdet", "matrix_power"),
    ("det", "slogdet", "inv"),
    ("eig", "eigvals", "eigh", "eigvalsh", "svd", "svdvals"),
    ("eigh", "eigvalsh", "eig", "eigvals"),
    ("svd", "svdvals", "pinv", "qr", "norm"),
    ("cholesky", "cho_factor", "cho_solve", "qr", "lu_factor"),
    ("solve", "solve_triangular", "cho_solve", "lu_solve", "inv"),
    ("lu_factor", "lu_solve", "solve"),
    ("cho_factor", "cho_solve", "cholesky"),
    ("matmul", "multi_dot", "matrix_power", "norm"),
    ("expm", "solve", "inv"),
]


def _reduction(name: str, call: str = "", grad: bool = True) -> str:
    """Example of a reduction with ``axis``: along an axis, then over all elements
    with the gradient."""
    call = call or f"tnp.{name}(x)"
    code = f"""
        x = tg.tensor([[1.0, 4.0, 2.0], [3.0, 0.5, 6.0]], requires_grad=True)
        tnp.{name}(x, axis=0)
        """
    if grad:
        code += f"""
        y = {call}
        y
        y.backward()
        x.grad
        """
    return code


_MASK_NOT_DIFF = "Not differentiable: the result is a constant."

SPECS: dict[str, Doc] = {
    # --- elementwise rows: what the template does not say --------------------------------
    "numpy.power": Doc(
        notes="``power`` has gradient 0 in the exponent where the base is 0 and the "
        "exponent non-negative, and 0 in the base where the exponent is 0.",
    ),
    "numpy.maximum": Doc(
        body="Where ``x == y`` each input gets half of the gradient (as in PyTorch, JAX "
        "and HIPS autograd). NaN propagates.",
    ),
    "numpy.minimum": Doc(
        body="Where ``x == y`` each input gets half of the gradient (as in PyTorch, JAX "
        "and HIPS autograd). NaN propagates.",
    ),
    "special.polygamma": Doc(
        body="The order ``n`` (``x`` here) is an integer >= 0; the function is "
        "differentiable in its argument (``y``) only: the gradient in ``n`` is NaN.",
        example="""
            x = tg.tensor([0.5, 1.5], requires_grad=True)
            y = special.polygamma(1, x)
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    # --- reductions ------------------------------------------------------------------------
    "numpy.sum": Doc(
        summary="Sum of the elements over the given axes.",
        params={"dtype": ("data-type", "The dtype the elements are summed in (cast first).")},
        example=_reduction("sum"),
        more_raises=[("ValueError", "If ``where`` does not broadcast to the input's shape.")],
    ),
    "numpy.mean": Doc(
        summary="Arithmetic mean over the given axes.",
        params={"dtype": ("data-type", "The dtype the elements are summed in (cast first).")},
        example=_reduction("mean"),
    ),
    "numpy.prod": Doc(
        params={"dtype": ("data-type", "The dtype the elements are multiplied in (cast first).")},
        example="""
            x = tg.tensor([[1.0, 4.0, 2.0], [3.0, 0.0, 6.0]], requires_grad=True)
            tnp.prod(x, axis=1)
            y = tnp.prod(x, axis=0)
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "numpy.max": Doc(
        example="""
            x = tg.tensor([[1.0, 6.0, 2.0], [3.0, 0.5, 6.0]], requires_grad=True)
            tnp.max(x, axis=0)
            y = tnp.max(x)
            y
            y.backward()
            x.grad
            """,
        more_raises=[
            (
                "ValueError",
                "If the reduction is over no elements and no ``initial`` is given, "
                "or ``where`` is given without ``initial``.",
            ),
        ],
    ),
    "numpy.min": Doc(
        example=_reduction("min"),
        more_raises=[
            (
                "ValueError",
                "If the reduction is over no elements and no ``initial`` is given, "
                "or ``where`` is given without ``initial``.",
            ),
        ],
    ),
    "numpy.amax": Doc(
        example=_reduction("amax"),
        more_raises=[("ValueError", "If the reduction is over no elements, as :func:`max`.")],
    ),
    "numpy.amin": Doc(
        example=_reduction("amin"),
        more_raises=[("ValueError", "If the reduction is over no elements, as :func:`min`.")],
    ),
    "numpy.argmax": Doc(
        params={"axis": ("None or int", "The axis; None: the index into the flattened input.")},
        returns="Tensor\nAn int64 tensor of indices (a constant: not differentiable).",
        example="""
            x = tg.tensor([[1.0, 4.0, 2.0], [3.0, 0.5, 6.0]], requires_grad=True)
            tnp.argmax(x)
            tnp.argmax(x, axis=1)
            """,
    ),
    "numpy.argmin": Doc(
        params={"axis": ("None or int", "The axis; None: the index into the flattened input.")},
        returns="Tensor\nAn int64 tensor of indices (a constant: not differentiable).",
        example="""
            x = tg.tensor([[1.0, 4.0, 2.0], [3.0, 0.5, 6.0]], requires_grad=True)
            tnp.argmin(x)
            tnp.argmin(x, axis=0, keepdims=True)
            """,
    ),
    "numpy.cumsum": Doc(
        params={
            "axis": ("None or int", "The axis to accumulate along; None: the flattened input."),
            "dtype": ("data-type", "The dtype to accumulate in (cast first)."),
        },
        example="""
            x = tg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
            y = tnp.cumsum(x, axis=1)
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "numpy.cumprod": Doc(
        params={
            "axis": ("None or int", "The axis to accumulate along; None: the flattened input."),
            "dtype": ("data-type", "The dtype to accumulate in (cast first)."),
        },
        example="""
            x = tg.tensor([2.0, 0.0, 3.0], requires_grad=True)
            y = tnp.cumprod(x)
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "numpy.var": Doc(
        summary="Variance over the given axes.",
        params={"dtype": ("data-type", "A float dtype to compute in.")},
        more_raises=[("TypeError", "If ``ddof`` is not a number.")],
        example=_reduction("var", "tnp.var(x, ddof=1)"),
    ),
    "numpy.std": Doc(
        summary="Standard deviation over the given axes.",
        params={"dtype": ("data-type", "A float dtype to compute in.")},
        more_raises=[("TypeError", "If ``ddof`` is not a number.")],
        example=_reduction("std"),
    ),
    "numpy.average": Doc(
        params={
            "axis": ("None or int or tuple of ints", "Axis or axes to average over; None: all."),
            "weights": (
                "Tensor or array_like",
                "Weights: of a's shape, or 1-D along a single ``axis``; None: all 1. "
                "Differentiable too.",
            ),
            "returned": ("bool", "Also return the sum of the weights."),
        },
        returns="Tensor or tuple of Tensor\nThe average; with ``returned``, the pair "
        "``(average, sum of weights)``.",
        more_raises=[
            ("ZeroDivisionError", "If the weights sum to zero."),
            ("ValueError", "If the weights' shape does not fit ``a`` and ``axis``."),
            ("TypeError", "If 1-D weights are given without an axis for a 2-D or larger ``a``."),
        ],
        example="""
            x = tg.tensor([1.0, 2.0, 4.0], requires_grad=True)
            w = tg.tensor([3.0, 1.0, 0.0], requires_grad=True)
            y = tnp.average(x, weights=w)
            y
            y.backward()
            x.grad
            w.grad
            """,
    ),
    "numpy.median": Doc(example=_reduction("median")),
    "numpy.ptp": Doc(example=_reduction("ptp")),
    "numpy.quantile": Doc(
        params={
            "q": ("float or array_like of float", "Quantiles to compute, in [0, 1]."),
            "method": ("str", "Only ``'linear'`` (NumPy's default) is supported."),
        },
        more_raises=[
            ("ValueError", "If ``q`` is outside [0, 1]."),
            ("TypeError", "If ``method`` is not ``'linear'``."),
        ],
        example="""
            x = tg.tensor([4.0, 1.0, 3.0, 2.0], requires_grad=True)
            y = tnp.quantile(x, 0.25)
            y
            y.backward()
            x.grad
            tnp.quantile(x, [0.0, 0.5, 1.0])
            """,
    ),
    "numpy.percentile": Doc(
        params={
            "q": ("float or array_like of float", "Percentiles to compute, in [0, 100]."),
            "method": ("str", "Only ``'linear'`` (NumPy's default) is supported."),
        },
        more_raises=[
            ("ValueError", "If ``q`` is outside [0, 100]."),
            ("TypeError", "If ``method`` is not ``'linear'``."),
        ],
        example="""
            x = tg.tensor([4.0, 1.0, 3.0, 2.0], requires_grad=True)
            y = tnp.percentile(x, 50)
            y
            y.backward()
            x.grad
            """,
    ),
    "numpy.nansum": Doc(
        example="""
            x = tg.tensor([1.0, np.nan, 3.0], requires_grad=True)
            y = tnp.nansum(x)
            y
            y.backward()
            x.grad
            """,
    ),
    "numpy.nanmean": Doc(
        example="""
            x = tg.tensor([1.0, np.nan, 3.0], requires_grad=True)
            y = tnp.nanmean(x)
            y
            y.backward()
            x.grad
            """,
    ),
    "numpy.nanmax": Doc(
        example="""
            x = tg.tensor([1.0, np.nan, 3.0], requires_grad=True)
            y = tnp.nanmax(x)
            y
            y.backward()
            x.grad
            """,
    ),
    "numpy.nanmin": Doc(
        example="""
            x = tg.tensor([1.0, np.nan, 3.0], requires_grad=True)
            y = tnp.nanmin(x)
            y
            y.backward()
            x.grad
            """,
    ),
    "numpy.nanprod": Doc(
        example="""
            x = tg.tensor([2.0, np.nan, 3.0], requires_grad=True)
            y = tnp.nanprod(x)
            y
            y.backward()
            x.grad
            """,
    ),
    "numpy.nanvar": Doc(
        more_raises=[("TypeError", "If ``ddof`` is not a number.")],
        example="""
            x = tg.tensor([1.0, np.nan, 3.0], requires_grad=True)
            y = tnp.nanvar(x)
            y
            y.backward()
            x.grad
            """,
    ),
    "numpy.nanstd": Doc(
        more_raises=[("TypeError", "If ``ddof`` is not a number.")],
        example="""
            x = tg.tensor([1.0, np.nan, 3.0], requires_grad=True)
            y = tnp.nanstd(x)
            y
            y.backward()
            x.grad
            """,
    ),
    "numpy.nancumsum": Doc(
        params={
            "axis": ("None or int", "The axis to accumulate along; None: the flattened input.")
        },
        example="""
            x = tg.tensor([1.0, np.nan, 3.0], requires_grad=True)
            y = tnp.nancumsum(x)
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "numpy.nancumprod": Doc(
        params={
            "axis": ("None or int", "The axis to accumulate along; None: the flattened input.")
        },
        example="""
            x = tg.tensor([2.0, np.nan, 3.0], requires_grad=True)
            y = tnp.nancumprod(x)
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "numpy.cov": Doc(
        params={
            "m": (
                T,
                "Variables in rows (columns with ``rowvar=False``), observations in "
                "the other axis.",
            ),
            "y": (T, "More variables, stacked under those of ``m``."),
            "rowvar": ("bool", "Whether each row is a variable (True) or each column."),
            "bias": ("bool", "Normalize by N (True) rather than N - 1."),
            "ddof": ("None or int", "Normalize by ``N - ddof``; overrides ``bias``."),
            "fweights": ("None", "Frequency weights: not supported (must be None)."),
            "aweights": ("None", "Observation weights: not supported (must be None)."),
            "dtype": ("data-type", "A float dtype to compute in."),
        },
        raises=[("TypeError", "If ``fweights`` or ``aweights`` is given.")],
        example="""
            x = tg.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.5]], requires_grad=True)
            c = tnp.cov(x)
            c
            c[0, 1].backward()
            x.grad
            """,
    ),
    "numpy.corrcoef": Doc(
        params={
            "x": (T, "Variables in rows (columns with ``rowvar=False``)."),
            "y": (T, "More variables, stacked under those of ``x``."),
            "rowvar": ("bool", "Whether each row is a variable (True) or each column."),
            "dtype": ("data-type", "A float dtype to compute in."),
        },
        raises=[("ValueError", "If ``x`` and ``y`` have different numbers of observations.")],
        example="""
            x = tg.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.5]], requires_grad=True)
            r = tnp.corrcoef(x)
            r
            r[0, 1].backward()
            x.grad
            """,
    ),
    # --- scipy.special's array functions ---------------------------------------------------
    "special.betainc": Doc(
        summary="Regularized incomplete beta function ``I_x(a, b)``, elementwise.",
        params={
            "a": (T, "First shape parameter, > 0."),
            "b": (T, "Second shape parameter, > 0."),
            "x": (T, "Upper limit of the integral, in [0, 1]; a, b and x broadcast."),
        },
        raises=[
            ("ValueError", "If the shapes of ``a``, ``b`` and ``x`` do not broadcast together.")
        ],
        example="""
            a = tg.tensor([1.0, 2.0], requires_grad=True)
            x = tg.tensor([0.5, 0.5], requires_grad=True)
            y = special.betainc(a, 3.0, x)
            y
            tnp.sum(y).backward()
            a.grad
            x.grad
            """,
    ),
    "special.logsumexp": Doc(
        summary="Logarithm of the sum of exponentials, computed without overflow.",
        params={
            "a": (T, "Input values."),
            "b": (
                T,
                "Scale factors of the exponentials (broadcast against ``a``); differentiable.",
            ),
        },
        example="""
            x = tg.tensor([[0.0, 1.0, 2.0], [1000.0, 1000.0, 1000.0]], requires_grad=True)
            y = special.logsumexp(x, axis=1)
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "special.softmax": Doc(
        summary="Softmax: ``exp(x) / sum(exp(x))`` along an axis.",
        params={
            "axis": ("None or int or tuple of ints", "Axes to normalize over; None: all elements.")
        },
        example="""
            x = tg.tensor([0.0, 1.0, 2.0], requires_grad=True)
            p = special.softmax(x)
            p
            p[0].backward()
            x.grad
            """,
    ),
    "special.log_softmax": Doc(
        summary="Logarithm of the softmax: ``x - logsumexp(x)`` along an axis.",
        params={
            "axis": ("None or int or tuple of ints", "Axes to normalize over; None: all elements.")
        },
        example="""
            x = tg.tensor([0.0, 1.0, 2.0], requires_grad=True)
            y = special.log_softmax(x)
            y
            y[0].backward()
            x.grad
            """,
    ),
    "special.multigammaln": Doc(
        summary="Logarithm of the multivariate gamma function, elementwise.",
        params={
            "a": (T, "Arguments (> (d - 1) / 2; NaN elsewhere)."),
            "d": ("int", "The dimension."),
        },
        raises=[
            ("ValueError", "If ``d`` is not a whole number (``1.5``)."),
            ("TypeError", "If ``d`` is a whole number of another type than int (``2.0``)."),
        ],
        example="""
            a = tg.tensor([2.0, 3.5], requires_grad=True)
            y = special.multigammaln(a, 2)
            y
            tnp.sum(y).backward()
            a.grad
            """,
    ),
}

SPECS.update(SHAPE)
SPECS.update(OTHER)
SPECS.update(LINALG)


def _method(code: str) -> Doc:
    return Doc(
        example=f"x = tg.tensor([[1.0, 4.0, 2.0], [3.0, 0.5, 6.0]], requires_grad=True)\n{code}"
    )


_SAME = "Tensor\nThe tensor itself (a real tensor is its own conjugate)."

# Tensor methods: examples, and what differs from the function's docstring (the unary
# rows' methods get their example from a template)
METHODS: dict[str, Doc] = {
    "sum": _method("x.sum()\nx.sum(axis=0)"),
    "mean": _method("x.mean(axis=1)"),
    "prod": _method("x.prod(axis=1)"),
    "max": _method("x.max()\nx.max(axis=1, keepdims=True)"),
    "min": _method("x.min(axis=0)"),
    "var": _method("x.var(axis=1)"),
    "std": _method("x.std(axis=1, ddof=1)"),
    "cumsum": _method("x.cumsum(axis=1)"),
    "cumprod": _method("x.cumprod(axis=1)"),
    "argmax": _method("x.argmax()\nx.argmax(axis=1)"),
    "argmin": _method("x.argmin(axis=1)"),
    "ravel": _method("x.ravel()"),
    "squeeze": Doc(example="x = tg.tensor([[1.0, 2.0]], requires_grad=True)\nx.squeeze()"),
    "swapaxes": _method("x.swapaxes(0, 1)"),
    "dot": _method("x.dot(tg.tensor([1.0, 0.0, -1.0]))"),
    "clip": _method("x.clip(1.0, 3.0)"),
    "round": Doc(example="x = tg.tensor([0.125, 2.5, -1.25], requires_grad=True)\nx.round(1)"),
    "astype": _method("x.astype(np.float32)"),
    "repeat": _method("x.repeat(2, axis=0)"),
    "take": _method("x.take([0, 5])"),
    "diagonal": _method("x.diagonal()"),
    "trace": _method("x.trace()"),
    "reshape": Doc(
        summary="The tensor with a new shape (C order; no copy is made).",
        body="``t.reshape(2, 3)`` and ``t.reshape((2, 3))`` are "
        "``tapegrad.numpy.reshape(t, (2, 3))``.",
        params={
            "*shape": (
                "int or tuple of ints",
                "The new shape, as a tuple or as "
                "separate ints; one dimension may be -1 (inferred).",
            )
        },
        example=_method("x.reshape(3, 2)\nx.reshape(-1)").example,
    ),
    "transpose": Doc(
        summary="The tensor with its axes permuted (reversed by default).",
        body="``t.transpose(1, 0)`` and ``t.transpose((1, 0))`` are "
        "``tapegrad.numpy.transpose(t, (1, 0))``; ``t.T`` is ``t.transpose()``.",
        params={
            "*axes": (
                "int or tuple of ints",
                "The permutation, as a tuple or as separate ints; none: reverse the axes.",
            )
        },
        example=_method("x.transpose()\nx.T.shape").example,
    ),
    "flatten": Doc(
        summary="A copy of the tensor, flattened to 1-D (C order).",
        body="Unlike :meth:`ravel`, never a view: writes to it leave the tensor alone, as "
        "NumPy's ``flatten``. Recorded: the gradient flows back to the tensor.",
        returns="Tensor\nThe values in a 1-D tensor.",
        raises=[],
        see=("tapegrad.numpy.ravel : The same values as a view.",),
        example=_method("x.flatten()").example,
    ),
    "copy": Doc(
        summary="A copy of the tensor (a recorded op: the gradient flows back to it).",
        body="Writes to the copy leave the tensor alone, as NumPy's ``copy``.",
        returns="Tensor\nThe copy.",
        raises=[],
        see=("tapegrad.numpy.array : A copy of a tensor, or a tensor from data.",),
        example=_method("y = x.copy()\ny[0, 0] = 10.0\nx[0, 0]").example,
    ),
    "conj": Doc(
        summary="Complex conjugate: a real tensor is its own.",
        body="``t.conj()`` is ``t`` itself (``tapegrad.numpy.conj`` returns a copy).",
        see=("tapegrad.numpy.conj : A copy of the tensor.",),
        returns=_SAME,
        raises=[],
        example=_method("x.conj() is x").example,
    ),
    "conjugate": Doc(
        summary="Complex conjugate: a real tensor is its own.",
        body="``t.conjugate()`` is ``t`` itself (``tapegrad.numpy.conjugate`` returns a copy).",
        see=("tapegrad.numpy.conjugate : A copy of the tensor.",),
        returns=_SAME,
        raises=[],
        example=_method("x.conjugate() is x").example,
    ),
}
