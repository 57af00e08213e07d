"""What is written per function of ``tapegrad.numpy`` outside the shape rows: rounding
and division composites, calculus and interpolation, complex parts, and the functions
that make constants or new tensors (``zeros``, ``arange``, ``argsort``, ``array``...)."""

from __future__ import annotations

from .kinds import Doc

T = "Tensor or array_like"
_CONST = (
    "NumPy's result when no argument is a tensor (the usual call); when one is, a "
    "constant tensor (not differentiable) of NumPy's result on the values."
)
_REFUSE_GRAD = (
    "TypeError",
    "If an argument is a tensor that requires grad (while grad mode is on): the result "
    "would not depend on it differentiably. Pass ``.detach()`` if that is intended.",
)
_NEGATIVE = ("ValueError", "If a dimension is negative (NumPy's error).")
_RAGGED = ("ValueError", "If a nested sequence is ragged (NumPy's error).")
_BROADCAST = ("ValueError", "If the operands do not broadcast together (NumPy's error).")
_AXIS = ("numpy.exceptions.AxisError", "If ``axis`` is out of range (NumPy's error).")


def _constant(summary: str, example: str, params: dict | None = None, **kw) -> Doc:
    """A function computed by NumPy on the values (a constant result)."""
    return Doc(
        summary=summary,
        body=kw.pop("body", ""),
        params=params or {},
        returns=kw.pop("returns", f"ndarray or Tensor\n{_CONST}"),
        raises=kw.pop("raises"),
        example=example,
        **kw,
    )


_UFUNC_KW = {
    "out": (
        "None or ndarray",
        "NumPy's ``out=`` (the values are written there; the result is then that array).",
    ),
    "where": ("array_like of bool", "NumPy's ``where=``."),
    "casting": ("str", "NumPy's casting rule."),
    "order": ("str", "NumPy's memory layout of the result."),
    "dtype": ("data-type", "NumPy's result dtype."),
    "subok": ("bool", "NumPy's ``subok``."),
    "signature": ("None or tuple", "NumPy's loop selection."),
    "x1": (T, "First operand."),
    "x2": (T, "Second operand; broadcasts against ``x1``."),
}
_CREATE_KW = {
    "device": ("None or 'cpu'", "NumPy's device argument (the CPU)."),
    "like": ("None", "NumPy's ``like=``."),
    "order": ("{'C', 'F'}", "NumPy's memory layout (a tensor is C-ordered)."),
    "dtype": ("data-type", "The dtype of the result (NumPy's default: float64)."),
}
_LIKE_KW = {
    **_CREATE_KW,
    "a": (T, "The tensor or array whose shape and dtype are used (its values are not read)."),
    "prototype": (
        T,
        "The tensor or array whose shape and dtype are used (its values are not read).",
    ),
    "order": ("str", "NumPy's memory layout."),
    "subok": ("bool", "NumPy's ``subok``."),
    "shape": ("None or int or tuple of ints", "Overrides the shape."),
    "dtype": ("data-type", "Overrides the dtype."),
}

OTHER: dict[str, Doc] = {
    # --- rounding, division, signs ---------------------------------------------------------
    "numpy.round": Doc(
        summary="Round to the given number of decimals, half to even.",
        returns="Tensor\nThe rounded values (gradient 0: a piecewise-constant function).",
        example="""
            x = tg.tensor([0.125, 2.5, -1.25], requires_grad=True)
            tnp.round(x, 1)
            y = tnp.round(x)
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "numpy.around": Doc(
        summary="Round to the given number of decimals, half to even.",
        returns="Tensor\nThe rounded values (gradient 0: a piecewise-constant function).",
        example="""
            x = tg.tensor([0.125, 2.5, -1.25], requires_grad=True)
            tnp.around(x, 1)
            """,
    ),
    "numpy.float_power": Doc(
        summary="First input raised to the second, elementwise, computed in float64.",
        returns="Tensor\nFloat64 powers; they require grad when an input does.",
        more_raises=[("ValueError", "If the inputs' shapes do not broadcast together.")],
        example="""
            x = tg.tensor([1.5, 2.0], requires_grad=True)
            y = tnp.float_power(x, 2)
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "numpy.floor_divide": Doc(
        summary="Largest integer not above ``x1 / x2``, elementwise (Python's ``//``).",
        returns="Tensor\nThe quotients, of the inputs' broadcast shape; their gradient is 0.",
        more_raises=[("ValueError", "If the inputs' shapes do not broadcast together.")],
        example="""
            x = tg.tensor([7.0, -7.0, 1.0], requires_grad=True)
            y = tnp.floor_divide(x, [2.0, 2.0, 0.1])
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "numpy.divmod": Doc(
        summary="Quotient and remainder of division, elementwise (Python's ``divmod``).",
        returns="quotient : Tensor\n``floor_divide(x1, x2)`` (gradient 0).\n\n"
        "remainder : Tensor\n``remainder(x1, x2)``, with the sign of ``x2``.",
        raises=[("ValueError", "If the inputs' shapes do not broadcast together.")],
        example="""
            x = tg.tensor([7.0, -7.0], requires_grad=True)
            q, r = tnp.divmod(x, 2.0)
            q, r
            tnp.sum(r).backward()
            x.grad
            """,
    ),
    "numpy.fmod": Doc(
        summary="Remainder of division with the sign of the dividend (C's ``fmod``).",
        raises=[("ValueError", "If the inputs' shapes do not broadcast together.")],
        example="""
            x = tg.tensor([7.0, -7.0], requires_grad=True)
            y = tnp.fmod(x, 2.0)
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "numpy.copysign": Doc(
        summary="Magnitude of ``x1`` with the sign of ``x2``, elementwise.",
        raises=[("ValueError", "If the inputs' shapes do not broadcast together.")],
        example="""
            x = tg.tensor([1.0, -2.0, 3.0], requires_grad=True)
            y = tnp.copysign(x, [-1.0, 1.0, -0.0])
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "numpy.positive": Doc(
        summary="Numerical positive, elementwise: ``+x``, a copy.",
        example="""
            x = tg.tensor([1.0, -2.0], requires_grad=True)
            tnp.positive(x)
            """,
    ),
    "numpy.sinc": Doc(
        summary="Normalized sinc function ``sin(pi x) / (pi x)``, elementwise.",
        example="""
            x = tg.tensor([0.25, 0.5, 1.5], requires_grad=True)
            y = tnp.sinc(x)
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "numpy.deg2rad": Doc(
        example="""
            x = tg.tensor([90.0, 180.0], requires_grad=True)
            tnp.deg2rad(x)
            """,
    ),
    "numpy.radians": Doc(
        example="""
            x = tg.tensor([90.0, 180.0], requires_grad=True)
            tnp.radians(x)
            """,
    ),
    "numpy.rad2deg": Doc(
        example="""
            x = tg.tensor([np.pi / 2, np.pi], requires_grad=True)
            tnp.rad2deg(x)
            """,
    ),
    "numpy.degrees": Doc(
        example="""
            x = tg.tensor([np.pi / 2, np.pi], requires_grad=True)
            tnp.degrees(x)
            """,
    ),
    # --- complex parts of real tensors -------------------------------------------------------
    "numpy.real": Doc(
        summary="Real part: a real input itself.",
        example="""
            x = tg.tensor([1.0, -2.0], requires_grad=True)
            tnp.real(x)
            """,
    ),
    "numpy.imag": Doc(
        summary="Imaginary part of a real input: zeros.",
        example="""
            x = tg.tensor([1.0, -2.0], requires_grad=True)
            tnp.imag(x)
            """,
    ),
    "numpy.conj": Doc(
        example="""
            x = tg.tensor([1.0, -2.0], requires_grad=True)
            tnp.conj(x)
            """,
    ),
    "numpy.conjugate": Doc(
        example="""
            x = tg.tensor([1.0, -2.0], requires_grad=True)
            tnp.conjugate(x)
            """,
    ),
    "numpy.angle": Doc(
        summary="Argument (angle) of a real input: pi where it is negative, 0 elsewhere.",
        params={
            "z": (T, "Input values."),
            "deg": ("bool", "In degrees (180) rather than radians (pi)."),
        },
        example="""
            x = tg.tensor([1.0, -2.0], requires_grad=True)
            tnp.angle(x)
            tnp.angle(x, deg=True)
            """,
    ),
    "numpy.real_if_close": Doc(
        params={"tol": ("float", "NumPy's tolerance (a real input is returned as it is).")},
        example="""
            x = tg.tensor([1.0, -2.0], requires_grad=True)
            tnp.real_if_close(x)
            """,
    ),
    # --- calculus, interpolation, polynomials ---------------------------------------------------
    "numpy.diff": Doc(
        params={
            "n": ("int", "How many times to take differences."),
            "axis": ("int", "The axis to take differences along."),
        },
        more_raises=[("ValueError", "If ``n`` is negative.")],
        example="""
            x = tg.tensor([1.0, 4.0, 9.0, 16.0], requires_grad=True)
            y = tnp.diff(x)
            y
            tnp.diff(x, n=2)
            tnp.sum(y * y).backward()
            x.grad
            """,
    ),
    "numpy.gradient": Doc(
        params={
            "f": (T, "Samples of a function on a regular grid."),
            "*varargs": ("scalar", "Spacings: none (1), one for all axes, or one per axis."),
            "axis": ("None or int or tuple of ints", "Axes to differentiate along; None: all."),
            "edge_order": ("{1}", "Only first-order differences at the edges are supported."),
        },
        returns="Tensor or tuple of Tensor\nThe derivative along each axis (one tensor "
        "for one axis).",
        raises=[
            ("TypeError", "If ``edge_order`` is not 1."),
            ("ValueError", "If an axis repeats, or a length is below 2."),
            ("numpy.exceptions.AxisError", "If an axis is out of range."),
        ],
        example="""
            x = tg.tensor([1.0, 4.0, 9.0, 16.0], requires_grad=True)
            tnp.gradient(x)
            tnp.gradient(x, 0.5)
            """,
    ),
    "numpy.trapezoid": Doc(
        params={
            "y": (T, "Samples of the integrand."),
            "x": (T, "Sample points (differentiable); None: spacing ``dx``."),
            "dx": ("scalar or array_like", "Spacing of the samples when ``x`` is None."),
            "axis": ("int", "The axis to integrate along."),
        },
        raises=[
            ("ValueError", "If ``x`` or ``dx`` does not fit the samples."),
            ("TypeError", "If ``dx`` is neither a number nor an array."),
        ],
        example="""
            y = tg.tensor([0.0, 1.0, 4.0], requires_grad=True)
            area = tnp.trapezoid(y, dx=0.5)
            area
            area.backward()
            y.grad
            """,
    ),
    "scipy.integrate.cumulative_trapezoid": Doc(
        summary="Running integral of samples by the trapezoidal rule.",
        params={
            "y": (T, "Samples of the integrand."),
            "x": (
                T,
                "Sample points (differentiable): 1-D along ``axis``, or of y's shape; "
                "None: spacing ``dx``.",
            ),
            "dx": ("float", "Spacing of the samples when ``x`` is None."),
            "axis": ("int", "The axis to integrate along."),
            "initial": (
                "None or 0",
                "0 prepends a zero (the result keeps y's length); None "
                "gives one value fewer than samples.",
            ),
        },
        raises=[
            (
                "ValueError",
                "If ``x`` does not fit the samples, ``initial`` is neither None "
                "nor 0, or there is no sample along the axis.",
            ),
        ],
        example="""
            y = tg.tensor([0.0, 1.0, 4.0, 9.0], requires_grad=True)
            c = integrate.cumulative_trapezoid(y, dx=0.5, initial=0)
            c
            tnp.sum(c).backward()
            y.grad
            """,
    ),
    "numpy.interp": Doc(
        params={
            "x": (T, "Points to evaluate at."),
            "xp": (T, "Increasing sample points (differentiable)."),
            "fp": (T, "Values at ``xp`` (differentiable)."),
            "left": ("scalar or Tensor", "Value below ``xp[0]``; None: ``fp[0]``."),
            "right": ("scalar or Tensor", "Value above ``xp[-1]``; None: ``fp[-1]``."),
            "period": ("None", "Periodic interpolation: not supported."),
        },
        raises=[
            ("TypeError", "If ``period`` is given."),
            ("ValueError", "If ``xp`` and ``fp`` are not 1-D of the same length."),
        ],
        example="""
            fp = tg.tensor([0.0, 10.0, 20.0], requires_grad=True)
            y = tnp.interp([0.5, 1.25], [0.0, 1.0, 2.0], fp)
            y
            tnp.sum(y).backward()
            fp.grad
            """,
    ),
    "numpy.polyval": Doc(
        summary="Evaluate a polynomial at points (Horner's rule).",
        params={"p": (T, "Coefficients, highest power first."), "x": (T, "The points.")},
        example="""
            p = tg.tensor([1.0, 0.0, -2.0], requires_grad=True)
            y = tnp.polyval(p, 3.0)
            y
            y.backward()
            p.grad
            """,
    ),
    "numpy.vander": Doc(
        params={
            "x": (T, "1-D input."),
            "N": ("None or int", "Number of columns; None: ``len(x)``."),
            "increasing": ("bool", "Powers increasing from the left (True) or decreasing."),
        },
        raises=[("ValueError", "If ``x`` is not 1-D, or ``N`` is negative.")],
        example="""
            x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
            tnp.vander(x, 3)
            """,
    ),
    "numpy.nan_to_num": Doc(
        summary="Replace NaN and infinities by finite numbers.",
        params={
            "copy": ("bool", "Accepted for NumPy's signature; the result is a new tensor."),
            "nan": ("float", "The value NaN becomes."),
            "posinf": (
                "None or float",
                "The value +inf becomes; None: the largest finite number of the dtype.",
            ),
            "neginf": (
                "None or float",
                "The value -inf becomes; None: the most negative finite number.",
            ),
        },
        example="""
            x = tg.tensor([1.0, np.nan, np.inf], requires_grad=True)
            y = tnp.nan_to_num(x, posinf=5.0)
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "numpy.astype": Doc(
        params={"x": (T, "Input tensor."), "dtype": ("data-type", "The dtype to convert to.")},
        raises=[
            (
                "TypeError",
                "If ``dtype`` is not one tapegrad holds (float64, float32, integers, bool).",
            )
        ],
        example="""
            x = tg.tensor([1.5, -2.0], requires_grad=True)
            tnp.astype(x, np.float32)
            tnp.astype(x, np.int64)
            """,
    ),
    # --- constants ----------------------------------------------------------------------
    "numpy.zeros": _constant(
        "An array of zeros of the given shape.",
        "tnp.zeros((2, 3))",
        {**_CREATE_KW, "shape": ("int or tuple of ints", "The shape.")},
        more_raises=[_REFUSE_GRAD],
        raises=[_NEGATIVE],
    ),
    "numpy.ones": _constant(
        "An array of ones of the given shape.",
        "tnp.ones(3)",
        {**_CREATE_KW, "shape": ("int or tuple of ints", "The shape.")},
        more_raises=[_REFUSE_GRAD],
        raises=[_NEGATIVE],
    ),
    "numpy.empty": _constant(
        "An array of the given shape; its values are arbitrary.",
        "tnp.empty((2, 0))",
        {**_CREATE_KW, "shape": ("int or tuple of ints", "The shape.")},
        more_raises=[_REFUSE_GRAD],
        raises=[_NEGATIVE],
    ),
    "numpy.arange": _constant(
        "Evenly spaced values within an interval, as NumPy's ``arange``.",
        "tnp.arange(4)\ntnp.arange(0.0, 1.0, 0.25)",
        {
            **_CREATE_KW,
            "start_or_stop": ("number", "The end (alone) or the start (with ``stop``)."),
            "stop": ("number", "The end (excluded)."),
            "step": ("number", "The spacing."),
            "dtype": ("data-type", "The dtype of the result; None: inferred."),
        },
        more_raises=[_REFUSE_GRAD],
        raises=[("ZeroDivisionError", "If ``step`` is 0 (NumPy's error).")],
    ),
    "numpy.eye": _constant(
        "A 2-D array with ones on a diagonal and zeros elsewhere.",
        "tnp.eye(2, 3, k=1)",
        {
            **_CREATE_KW,
            "N": ("int", "Number of rows."),
            "M": ("None or int", "Number of columns; None: N."),
            "k": ("int", "The diagonal: 0 the main one, positive above."),
        },
        more_raises=[_REFUSE_GRAD],
        raises=[_NEGATIVE],
    ),
    "numpy.identity": _constant(
        "The identity matrix.",
        "tnp.identity(2)",
        {**_CREATE_KW, "n": ("int", "Number of rows and columns.")},
        more_raises=[_REFUSE_GRAD],
        raises=[_NEGATIVE],
    ),
    "numpy.tri": _constant(
        "A matrix with ones at and below a diagonal, zeros elsewhere.",
        "tnp.tri(3)",
        {
            **_CREATE_KW,
            "N": ("int", "Number of rows."),
            "M": ("None or int", "Number of columns; None: N."),
            "k": ("int", "The diagonal: 0 the main one, positive above."),
        },
        more_raises=[_REFUSE_GRAD],
        raises=[("TypeError", "If ``N`` or ``M`` is not a number (NumPy's error).")],
    ),
    "numpy.zeros_like": _constant(
        "Zeros with the shape and dtype of the input.",
        "x = tg.tensor([[1.0, 2.0]], requires_grad=True)\ntnp.zeros_like(x)",
        _LIKE_KW,
        raises=[_NEGATIVE],
    ),
    "numpy.ones_like": _constant(
        "Ones with the shape and dtype of the input.",
        "x = tg.tensor([[1.0, 2.0]], requires_grad=True)\ntnp.ones_like(x)",
        _LIKE_KW,
        raises=[_NEGATIVE],
    ),
    "numpy.empty_like": _constant(
        "An array with the shape and dtype of the input; its values are arbitrary.",
        "x = tg.tensor([[1.0, 2.0]], requires_grad=True)\ntnp.empty_like(x).shape",
        _LIKE_KW,
        raises=[_NEGATIVE],
    ),
    "numpy.shape": _constant(
        "The shape of the input.",
        "x = tg.tensor([[1.0, 2.0]], requires_grad=True)\ntnp.shape(x)",
        {"a": (T, "Input.")},
        returns="tuple of int\nThe shape.",
        raises=[_RAGGED],
    ),
    "numpy.ndim": _constant(
        "The number of dimensions of the input.",
        "x = tg.tensor([[1.0, 2.0]], requires_grad=True)\ntnp.ndim(x)",
        {"a": (T, "Input.")},
        returns="int\nThe number of dimensions.",
        raises=[_RAGGED],
    ),
    "numpy.size": _constant(
        "The number of elements of the input (along an axis).",
        "x = tg.tensor([[1.0, 2.0]], requires_grad=True)\ntnp.size(x)\ntnp.size(x, 1)",
        {"a": (T, "Input."), "axis": ("None or int", "An axis; None: all elements.")},
        returns="int\nThe number of elements.",
        raises=[_AXIS],
    ),
    "numpy.logical_and": _constant(
        "Truth value of ``x1 and x2``, elementwise.",
        "x = tg.tensor([1.0, 0.0, 2.0])\ntnp.logical_and(x > 0, x < 2)",
        _UFUNC_KW,
        raises=[_BROADCAST],
    ),
    "numpy.logical_or": _constant(
        "Truth value of ``x1 or x2``, elementwise.",
        "x = tg.tensor([1.0, 0.0, 2.0])\ntnp.logical_or(x < 0.5, x > 1.5)",
        _UFUNC_KW,
        raises=[_BROADCAST],
    ),
    "numpy.logical_xor": _constant(
        "Truth value of ``x1 xor x2``, elementwise.",
        "x = tg.tensor([1.0, 0.0, 2.0])\ntnp.logical_xor(x > 0.5, x > 1.5)",
        _UFUNC_KW,
        raises=[_BROADCAST],
    ),
    "numpy.logical_not": _constant(
        "Truth value of ``not x``, elementwise.",
        "x = tg.tensor([1.0, 0.0, 2.0])\ntnp.logical_not(x)",
        {**_UFUNC_KW, "x": (T, "Input values.")},
        raises=[("TypeError", "If NumPy's ``logical_not`` refuses the input or keywords.")],
    ),
    "numpy.argsort": _constant(
        "Indices that sort the input along an axis.",
        "x = tg.tensor([3.0, 1.0, 2.0], requires_grad=True)\ntnp.argsort(x)",
        {
            "axis": ("None or int", "The axis; None: the flattened input."),
            "kind": ("None or str", "NumPy's sorting algorithm."),
            "order": ("None or str or list of str", "NumPy's field order (structured arrays)."),
            "stable": ("None or bool", "Whether equal elements keep their order."),
        },
        returns="Tensor\nAn int64 tensor of indices (a constant: not differentiable).",
        raises=[_AXIS],
    ),
    "numpy.nonzero": _constant(
        "Indices of the elements that are not zero.",
        "x = tg.tensor([[0.0, 1.0], [2.0, 0.0]])\ntnp.nonzero(x)",
        returns="tuple of Tensor\nOne int64 tensor of indices per axis (constants).",
        raises=[("ValueError", "If the input is 0-d (NumPy's error).")],
    ),
    "numpy.count_nonzero": _constant(
        "Number of elements that are not zero (along axes).",
        "x = tg.tensor([[0.0, 1.0], [2.0, 3.0]])\ntnp.count_nonzero(x)\n"
        "tnp.count_nonzero(x, axis=0)",
        {"axis": ("None or int or tuple of ints", "Axes to count along; None: all.")},
        returns="Tensor\nInteger counts (a constant).",
        raises=[_AXIS],
    ),
    "numpy.all": _constant(
        "Whether all elements (along axes) are true.",
        "x = tg.tensor([[0.0, 1.0], [2.0, 3.0]])\ntnp.all(x > 0)\ntnp.all(x > 0, axis=1)",
        {
            "out": ("None or ndarray", "NumPy's ``out=``."),
            "where": ("array_like of bool", "NumPy's ``where=``."),
        },
        returns="Tensor\nA bool tensor (a constant).",
        raises=[_AXIS],
    ),
    "numpy.any": _constant(
        "Whether any element (along axes) is true.",
        "x = tg.tensor([[0.0, 1.0], [2.0, 3.0]])\ntnp.any(x > 2)\ntnp.any(x > 2, axis=1)",
        {
            "out": ("None or ndarray", "NumPy's ``out=``."),
            "where": ("array_like of bool", "NumPy's ``where=``."),
        },
        returns="Tensor\nA bool tensor (a constant).",
        raises=[_AXIS],
    ),
    "numpy.searchsorted": _constant(
        "Indices where elements should be inserted to keep an array sorted.",
        "x = tg.tensor([1.0, 2.0, 3.0])\ntnp.searchsorted(x, [0.5, 2.0, 9.0])",
        {
            "a": (T, "Sorted 1-D input."),
            "v": (T, "Values to insert."),
            "side": ("{'left', 'right'}", "Which of equal places is given."),
            "sorter": ("None or array_like of int", "Indices that sort ``a``."),
        },
        returns="Tensor\nInt64 indices (a constant).",
        raises=[("ValueError", "If ``side`` is not 'left' or 'right' (NumPy's error).")],
    ),
    "numpy.digitize": _constant(
        "Indices of the bins each value falls in.",
        "x = tg.tensor([0.5, 1.5, 3.5])\ntnp.digitize(x, [1.0, 2.0, 3.0])",
        {
            "x": (T, "Values."),
            "bins": ("array_like", "Monotonic bin edges."),
            "right": ("bool", "Whether the bins include their right edge."),
        },
        returns="Tensor\nInt64 bin indices (a constant).",
        raises=[("ValueError", "If ``bins`` is not monotonic (NumPy's error).")],
    ),
    "numpy.isnan": Doc(
        summary="Whether each element is NaN.",
        params={
            "x": (T, "Input values."),
            "**kwargs": (
                "",
                "NumPy's ufunc keywords (``where=``, ``dtype=``...): "
                "then NumPy's ``isnan`` on the values.",
            ),
        },
        returns="Tensor\nA bool tensor (not differentiable); for a float tensor without "
        "keywords, recorded as a comparison (a compiled program recomputes it).",
        raises=[("TypeError", "If NumPy's ``isnan`` refuses the input's dtype or keywords.")],
        example="""
            x = tg.tensor([1.0, np.nan, np.inf], requires_grad=True)
            tnp.isnan(x)
            """,
    ),
    "numpy.isinf": Doc(
        summary="Whether each element is positive or negative infinity.",
        params={
            "x": (T, "Input values."),
            "**kwargs": (
                "",
                "NumPy's ufunc keywords (``where=``, ``dtype=``...): "
                "then NumPy's ``isinf`` on the values.",
            ),
        },
        returns="Tensor\nA bool tensor (not differentiable); for a float tensor without "
        "keywords, recorded as a comparison (a compiled program recomputes it).",
        raises=[("TypeError", "If NumPy's ``isinf`` refuses the input's dtype or keywords.")],
        example="""
            x = tg.tensor([1.0, np.nan, -np.inf], requires_grad=True)
            tnp.isinf(x)
            """,
    ),
    "numpy.isfinite": Doc(
        summary="Whether each element is finite (not infinity and not NaN).",
        params={
            "x": (T, "Input values."),
            "**kwargs": (
                "",
                "NumPy's ufunc keywords (``where=``, ``dtype=``...): "
                "then NumPy's ``isfinite`` on the values.",
            ),
        },
        returns="Tensor\nA bool tensor (not differentiable); for a float tensor without "
        "keywords, recorded as a comparison (a compiled program recomputes it).",
        raises=[("TypeError", "If NumPy's ``isfinite`` refuses the input's dtype or keywords.")],
        example="""
            x = tg.tensor([1.0, np.nan, -np.inf], requires_grad=True)
            tnp.isfinite(x)
            """,
    ),
    # --- new tensors from values ------------------------------------------------------------
    "numpy.array": Doc(
        summary="A tensor from data, keeping any tensors in it in the graph.",
        params={
            "object": (
                "Tensor or array_like",
                "Data: a tensor, nested lists or tuples (which may hold tensors), an array.",
            ),
            "dtype": ("data-type", "The dtype of the result; None: inferred."),
            "copy": (
                "bool or None",
                "Whether a tensor given is copied (a recorded op); "
                "False or None: the tensor itself.",
            ),
        },
        raises=[
            (
                "TypeError",
                "If the data have a dtype tapegrad cannot hold (complex, string, object).",
            ),
            ("ValueError", "If the tensors held have different shapes."),
        ],
        example="""
            x = tg.tensor(2.0, requires_grad=True)
            y = tnp.array([x, 3.0 * x, 1.0])
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "numpy.asarray": Doc(
        summary="A tensor from data; a tensor is returned as it is.",
        params={"dtype": ("data-type", "The dtype of the result; None: inferred.")},
        raises=[
            (
                "TypeError",
                "If the data have a dtype tapegrad cannot hold (complex, string, object).",
            ),
        ],
        example="""
            x = tg.tensor([1.0, 2.0], requires_grad=True)
            tnp.asarray(x) is x
            tnp.asarray([x[0], x[1] * 2.0])
            """,
    ),
    "numpy.full": Doc(
        summary="A new tensor of the given shape filled with a value.",
        params={
            "shape": ("int or tuple of ints", "The shape."),
            "fill_value": ("scalar or Tensor", "The value; a tensor is differentiable."),
            "dtype": ("data-type", "The dtype of the result; None: the value's."),
        },
        raises=[("ValueError", "If a tensor ``fill_value`` does not broadcast to ``shape``.")],
        example="""
            v = tg.tensor(0.5, requires_grad=True)
            y = tnp.full((2, 2), v)
            y
            tnp.sum(y).backward()
            v.grad
            """,
    ),
    "numpy.full_like": Doc(
        summary="A tensor filled with a value, with the shape and dtype of the input.",
        params={
            "a": (
                T,
                "The tensor or array whose shape and dtype are used (its values are not read).",
            ),
            "fill_value": ("scalar or Tensor", "The value; a tensor is differentiable."),
            "dtype": ("data-type", "Overrides the dtype."),
            "shape": ("None or int or tuple of ints", "Overrides the shape."),
        },
        raises=[("ValueError", "If a tensor ``fill_value`` does not broadcast to the shape.")],
        example="""
            x = tg.tensor([1.0, 2.0, 3.0])
            tnp.full_like(x, 7.0)
            """,
    ),
    "numpy.linspace": Doc(
        summary="Evenly spaced numbers over an interval, differentiable in its ends.",
        params={
            "start": ("scalar or Tensor or array_like", "The first value."),
            "stop": (
                "scalar or Tensor or array_like",
                "The last value (unless ``endpoint`` is False).",
            ),
            "num": ("int", "Number of values."),
            "endpoint": ("bool", "Whether ``stop`` is the last value."),
            "retstep": ("bool", "Also return the spacing."),
            "dtype": ("data-type", "The dtype of the result."),
            "axis": ("int", "Axis of the values in the result (for array ends)."),
        },
        returns="samples : Tensor\nThe values.\n\nstep : Tensor or float\nThe spacing, "
        "only with ``retstep``.",
        raises=[("ValueError", "If ``num`` is negative.")],
        example="""
            a = tg.tensor(1.0, requires_grad=True)
            y = tnp.linspace(0.0, a, 5)
            y
            tnp.sum(y).backward()
            a.grad
            """,
    ),
    "numpy.logspace": Doc(
        summary="Numbers spaced evenly on a log scale, differentiable in its ends and base.",
        params={
            "start": ("scalar or Tensor", "``base ** start`` is the first value."),
            "stop": (
                "scalar or Tensor",
                "``base ** stop`` is the last value (unless ``endpoint`` is False).",
            ),
            "num": ("int", "Number of values."),
            "endpoint": ("bool", "Whether ``base ** stop`` is the last value."),
            "base": ("scalar or Tensor", "The base of the log scale."),
            "dtype": ("data-type", "The dtype of the result."),
            "axis": ("int", "Axis of the values in the result (for array ends)."),
        },
        raises=[("ValueError", "If ``num`` is negative.")],
        example="""
            b = tg.tensor(2.0, requires_grad=True)
            y = tnp.logspace(0.0, 3.0, 4, base=b)
            y
            tnp.sum(y).backward()
            b.grad
            """,
    ),
    "numpy.meshgrid": Doc(
        summary="Coordinate matrices from coordinate vectors.",
        params={
            "*xi": (T, "1-D coordinate vectors (differentiable)."),
            "copy": ("bool", "Accepted for NumPy's signature; the results are new tensors."),
            "sparse": ("bool", "Return broadcastable arrays with length-1 axes."),
            "indexing": (
                "{'xy', 'ij'}",
                "Cartesian (``'xy'``, NumPy's default) or matrix indexing.",
            ),
        },
        returns="list of Tensor\nOne grid per input.",
        raises=[("ValueError", "If ``indexing`` is not ``'xy'`` or ``'ij'``.")],
        example="""
            x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
            gx, gy = tnp.meshgrid(x, [0.0, 1.0])
            gx
            gy
            """,
    ),
}
