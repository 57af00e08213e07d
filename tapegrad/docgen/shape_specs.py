"""What is written per function of ``tapegrad.numpy`` that rearranges, joins, splits,
selects or combines tensors (the shape, indexing and product rows)."""

from __future__ import annotations

from .kinds import Doc

T = "Tensor or array_like"
_SPLIT_RETURNS = (
    "list of Tensor\nThe parts, views of ``ary`` as NumPy's (each recorded: its gradient "
    "flows back to ``ary``)."
)
_PIECES = (
    "list of Tensor\nThe parts, each recorded (its gradient flows back to ``ary``); "
    "unlike NumPy's, copies rather than views."
)

SHAPE: dict[str, Doc] = {
    "numpy.reshape": Doc(
        params={
            "x": (T, "Input tensor."),
            "*shape": (
                "int or tuple of ints",
                "The new shape, as a tuple or as separate ints; one dimension may be -1 "
                "(inferred).",
            ),
        },
        raises=[("ValueError", "If the new shape has another number of elements.")],
        example="""
            x = tg.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], requires_grad=True)
            y = tnp.reshape(x, (2, 3))
            y
            tnp.sum(y[0] * 10.0).backward()
            x.grad
            """,
    ),
    "numpy.transpose": Doc(
        params={"x": (T, "Input tensor.")},
        raises=[("ValueError", "If ``axes`` is not a permutation of the axes.")],
        example="""
            x = tg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
            y = tnp.transpose(x)
            y
            tnp.sum(y[0]).backward()
            x.grad
            """,
    ),
    "numpy.ravel": Doc(
        params={"order": ("{'C'}", "Only C order is supported.")},
        raises=[("NotImplementedError", "If ``order`` is not ``'C'``.")],
        example="""
            x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
            y = tnp.ravel(x)
            y
            y[1].backward()
            x.grad
            """,
    ),
    "numpy.squeeze": Doc(
        params={"axis": ("None or int or tuple of ints", "Axes to remove; None: all of length 1.")},
        more_raises=[("ValueError", "If an axis given has a length other than 1.")],
        example="""
            x = tg.tensor([[[1.0], [2.0]]], requires_grad=True)
            tnp.squeeze(x)
            tnp.squeeze(x, axis=2).shape
            """,
    ),
    "numpy.expand_dims": Doc(
        params={"axis": ("int or tuple of ints", "Positions of the new axes in the result.")},
        example="""
            x = tg.tensor([1.0, 2.0], requires_grad=True)
            tnp.expand_dims(x, 0)
            tnp.expand_dims(x, (0, 2)).shape
            """,
    ),
    "numpy.swapaxes": Doc(
        raises=[("numpy.exceptions.AxisError", "If an axis is out of range (a ValueError).")],
        example="""
            x = tg.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
            tnp.swapaxes(x, 0, 1)
            """,
    ),
    "numpy.moveaxis": Doc(
        raises=[
            ("numpy.exceptions.AxisError", "If an axis is out of range (a ValueError)."),
            ("ValueError", "If ``source`` and ``destination`` differ in length, or repeat."),
        ],
        example="""
            x = tg.tensor(np.zeros((3, 4, 5)), requires_grad=True)
            tnp.moveaxis(x, 0, -1).shape
            tnp.moveaxis(x, [0, 1], [-1, -2]).shape
            """,
    ),
    "numpy.rollaxis": Doc(
        params={
            "axis": ("int", "The axis to move."),
            "start": ("int", "It is moved to before this position."),
        },
        raises=[("numpy.exceptions.AxisError", "If ``axis`` or ``start`` is out of range.")],
        example="""
            x = tg.tensor(np.zeros((3, 4, 5)), requires_grad=True)
            tnp.rollaxis(x, 2).shape
            tnp.rollaxis(x, 1, 3).shape
            """,
    ),
    "numpy.broadcast_to": Doc(
        params={"shape": ("int or tuple of ints", "The shape to broadcast to.")},
        raises=[("ValueError", "If ``array`` does not broadcast to ``shape``.")],
        example="""
            x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
            y = tnp.broadcast_to(x, (2, 3))
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "numpy.atleast_1d": Doc(
        params={"*arys": (T, "One or more inputs.")},
        returns="Tensor or tuple of Tensor\nEach input with at least one dimension; a "
        "tuple for several inputs.",
        example="""
            x = tg.tensor(2.0, requires_grad=True)
            tnp.atleast_1d(x)
            tnp.atleast_1d(x, tg.tensor([1.0, 2.0]))
            """,
    ),
    "numpy.atleast_2d": Doc(
        params={"*arys": (T, "One or more inputs.")},
        returns="Tensor or tuple of Tensor\nEach input with at least two dimensions; a "
        "tuple for several inputs.",
        example="""
            x = tg.tensor([1.0, 2.0], requires_grad=True)
            tnp.atleast_2d(x)
            """,
    ),
    "numpy.atleast_3d": Doc(
        params={"*arys": (T, "One or more inputs.")},
        returns="Tensor or tuple of Tensor\nEach input with at least three dimensions "
        "(a 1-D input of length N becomes (1, N, 1)); a tuple for several inputs.",
        example="""
            x = tg.tensor([1.0, 2.0], requires_grad=True)
            tnp.atleast_3d(x).shape
            """,
    ),
    "numpy.concatenate": Doc(
        params={
            "axis": ("None or int", "The axis to join along; None: flatten the inputs first."),
            "dtype": ("data-type", "The dtype of the result (the inputs are cast to it)."),
        },
        more_raises=[
            ("ValueError", "If no array is given, or the shapes differ off the axis."),
        ],
        example="""
            x = tg.tensor([[1.0, 2.0]], requires_grad=True)
            y = tg.tensor([[3.0, 4.0], [5.0, 6.0]], requires_grad=True)
            z = tnp.concatenate([x, y])
            z
            tnp.sum(z[1:]).backward()
            x.grad
            y.grad
            """,
    ),
    "numpy.stack": Doc(
        params={"axis": ("int", "Position of the new axis in the result.")},
        more_raises=[("ValueError", "If no array is given, or their shapes differ.")],
        example="""
            x = tg.tensor([1.0, 2.0], requires_grad=True)
            y = tg.tensor([3.0, 4.0], requires_grad=True)
            tnp.stack([x, y])
            tnp.stack([x, y], axis=1)
            """,
    ),
    "numpy.vstack": Doc(
        raises=[
            (
                "ValueError",
                "If the shapes differ off the first axis (after 1-D inputs become rows).",
            )
        ],
        example="""
            x = tg.tensor([1.0, 2.0], requires_grad=True)
            tnp.vstack([x, [3.0, 4.0]])
            """,
    ),
    "numpy.hstack": Doc(
        raises=[
            (
                "ValueError",
                "If the inputs' numbers of dimensions or their shapes off the joined axis differ.",
            )
        ],
        example="""
            x = tg.tensor([1.0, 2.0], requires_grad=True)
            tnp.hstack([x, [3.0]])
            """,
    ),
    "numpy.dstack": Doc(
        raises=[("ValueError", "If the shapes differ off the third axis.")],
        example="""
            x = tg.tensor([1.0, 2.0], requires_grad=True)
            tnp.dstack([x, [3.0, 4.0]])
            """,
    ),
    "numpy.column_stack": Doc(
        raises=[("ValueError", "If the columns differ in length.")],
        example="""
            x = tg.tensor([1.0, 2.0], requires_grad=True)
            tnp.column_stack([x, [3.0, 4.0]])
            """,
    ),
    "numpy.append": Doc(
        params={
            "values": (T, "Values to append (flattened when ``axis`` is None)."),
            "axis": ("None or int", "The axis to append along; None: flatten both first."),
        },
        raises=[("ValueError", "If the shapes differ off ``axis``.")],
        example="""
            x = tg.tensor([1.0, 2.0], requires_grad=True)
            tnp.append(x, [3.0, 4.0])
            """,
    ),
    "numpy.split": Doc(
        params={"axis": ("int", "The axis to split along.")},
        returns=_SPLIT_RETURNS,
        raises=[
            ("ValueError", "If an integer number of sections does not divide the length."),
            ("IndexError", "If ``axis`` is out of range (NumPy's error)."),
        ],
        example="""
            x = tg.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
            a, b = tnp.split(x, 2)
            a, b
            first, middle, last = tnp.split(x, [1, 3])
            middle
            """,
    ),
    "numpy.array_split": Doc(
        params={"axis": ("int", "The axis to split along.")},
        returns=_SPLIT_RETURNS,
        raises=[
            ("ValueError", "If the number of sections is not positive."),
            ("IndexError", "If ``axis`` is out of range (NumPy's error)."),
        ],
        example="""
            x = tg.tensor([1.0, 2.0, 3.0, 4.0, 5.0], requires_grad=True)
            tnp.array_split(x, 2)
            """,
    ),
    "numpy.vsplit": Doc(
        returns=_PIECES,
        raises=[
            (
                "ValueError",
                "If ``ary`` has fewer than 2 dimensions, or an integer "
                "number of sections does not divide the length.",
            )
        ],
        example="""
            x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
            tnp.vsplit(x, 2)
            """,
    ),
    "numpy.hsplit": Doc(
        returns=_PIECES,
        raises=[
            (
                "ValueError",
                "If ``ary`` is 0-d, or an integer number of sections does not divide the length.",
            )
        ],
        example="""
            x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
            tnp.hsplit(x, 2)
            """,
    ),
    "numpy.dsplit": Doc(
        returns=_PIECES,
        raises=[
            (
                "ValueError",
                "If ``ary`` has fewer than 3 dimensions, or an integer "
                "number of sections does not divide the length.",
            )
        ],
        example="""
            x = tg.tensor(np.arange(4.0).reshape(1, 1, 4), requires_grad=True)
            tnp.dsplit(x, 2)
            """,
    ),
    "numpy.tile": Doc(
        raises=[("ValueError", "If a repetition count is negative.")],
        example="""
            x = tg.tensor([1.0, 2.0], requires_grad=True)
            y = tnp.tile(x, (2, 2))
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "numpy.repeat": Doc(
        params={"axis": ("None or int", "The axis to repeat along; None: the flattened input.")},
        more_raises=[
            (
                "ValueError",
                "If ``repeats`` does not broadcast to the length along "
                "the axis, or holds a negative count.",
            )
        ],
        example="""
            x = tg.tensor([1.0, 2.0], requires_grad=True)
            y = tnp.repeat(x, [3, 1])
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "numpy.flip": Doc(
        example="""
            x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
            tnp.flip(x)
            tnp.flip(x, axis=1)
            """,
    ),
    "numpy.flipud": Doc(
        raises=[("ValueError", "If ``m`` is 0-d.")],
        example="""
            x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
            tnp.flipud(x)
            """,
    ),
    "numpy.fliplr": Doc(
        raises=[("ValueError", "If ``m`` has fewer than 2 dimensions.")],
        example="""
            x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
            tnp.fliplr(x)
            """,
    ),
    "numpy.rot90": Doc(
        params={
            "k": ("int", "Number of quarter turns (negative: the other way)."),
            "axes": ("tuple of 2 ints", "The plane of the rotation."),
        },
        raises=[("ValueError", "If ``axes`` are not two different axes of ``m``.")],
        example="""
            x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
            tnp.rot90(x)
            """,
    ),
    "numpy.roll": Doc(
        params={
            "axis": (
                "None or int or tuple of ints",
                "Axes to roll along; None: the flattened input (the shape is kept).",
            )
        },
        example="""
            x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
            y = tnp.roll(x, 1)
            y
            y[0].backward()
            x.grad
            """,
    ),
    "numpy.pad": Doc(
        params={
            "pad_width": (
                "int or sequence",
                "Numbers of values padded before and after each axis: NumPy's forms "
                "(``n``, ``(before, after)``, one pair per axis).",
            ),
            "mode": ("{'constant'}", "Only ``'constant'`` is supported."),
            "constant_values": ("scalar", "The value padded with."),
        },
        raises=[
            (
                "NotImplementedError",
                "If ``mode`` is not ``'constant'`` or ``constant_values`` is not a scalar.",
            ),
            ("ValueError", "If ``pad_width`` does not fit the number of axes."),
        ],
        example="""
            x = tg.tensor([1.0, 2.0], requires_grad=True)
            y = tnp.pad(x, (1, 2), constant_values=9.0)
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "numpy.take": Doc(
        params={
            "axis": ("None or int", "The axis to take along; None: the flattened input."),
            "mode": (
                "{'raise', 'wrap', 'clip'}",
                "How out-of-range indices are treated, as NumPy's.",
            ),
        },
        more_raises=[("IndexError", "If an index is out of range (``mode='raise'``).")],
        example="""
            x = tg.tensor([10.0, 20.0, 30.0], requires_grad=True)
            y = tnp.take(x, [0, 2, 2])
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "numpy.take_along_axis": Doc(
        params={
            "indices": (
                "array_like of int",
                "Indices with ``arr``'s number of dimensions "
                "(as argsort or argmax with keepdims give).",
            ),
            "axis": ("int", "The axis to take along."),
        },
        raises=[
            ("IndexError", "If ``indices`` is not an integer array or an index is out of range.")
        ],
        example="""
            x = tg.tensor([[3.0, 1.0, 2.0], [0.5, 6.0, 4.0]], requires_grad=True)
            i = tnp.argsort(x, axis=1)
            tnp.take_along_axis(x, i, axis=1)
            """,
    ),
    "numpy.getitem": Doc(
        params={"x": (T, "Input tensor.")},
        library="",
        notes="``t[key]`` calls it. It has no NumPy function of its name: without a tensor "
        "argument it indexes the array as given.",
        raises=[("IndexError", "If an index is out of range or is not a valid index.")],
        example="""
            x = tg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
            y = tnp.getitem(x, (slice(None), [0, 0, 2]))
            y
            tnp.sum(y).backward()
            x.grad
            x[x > 2.5]
            """,
    ),
    "numpy.setitem": Doc(
        params={
            "x": ("Tensor", "The tensor written to (not a leaf that requires grad)."),
            "value": (T, "Values, broadcast to the selection and cast to x's dtype."),
        },
        library="",
        notes="``t[key] = value`` calls it. It has no NumPy function of its name.",
        raises=[
            ("RuntimeError", "If ``x`` is a leaf that requires grad (while grad mode is on)."),
            ("ValueError", "If ``value`` does not broadcast to the selection."),
            ("IndexError", "If an index is out of range or is not a valid index."),
        ],
        example="""
            w = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
            x = w * 1.0
            tnp.setitem(x, 0, 10.0)
            x
            tnp.sum(x).backward()
            w.grad
            """,
    ),
    "numpy.diagonal": Doc(
        raises=[("ValueError", "If ``a`` has fewer than 2 dimensions, or the axes are the same.")],
        example="""
            x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
            y = tnp.diagonal(x)
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "numpy.diag": Doc(
        params={
            "v": (
                T,
                "A matrix (its diagonal is taken) or a vector (the diagonal of the matrix made).",
            )
        },
        raises=[("ValueError", "If ``v`` is neither 1-D nor 2-D.")],
        example="""
            x = tg.tensor([1.0, 2.0], requires_grad=True)
            tnp.diag(x)
            tnp.diag(tnp.diag(x), k=0)
            """,
    ),
    "numpy.trace": Doc(
        raises=[("ValueError", "If ``a`` has fewer than 2 dimensions.")],
        example="""
            x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
            y = tnp.trace(x)
            y
            y.backward()
            x.grad
            """,
    ),
    "numpy.tril": Doc(
        example="""
            x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
            y = tnp.tril(x)
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "numpy.triu": Doc(
        example="""
            x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
            tnp.triu(x, k=1)
            """,
    ),
    "numpy.where": Doc(
        summary="Elements of ``x`` where ``condition`` holds, else of ``y``.",
        params={
            "condition": (
                "array_like of bool or Tensor",
                "Where True, take ``x``, else ``y`` (not differentiable).",
            ),
            "x": (T, "Values where ``condition`` holds."),
            "y": (T, "Values elsewhere; condition, x and y broadcast together."),
        },
        returns="Tensor or tuple of Tensor\nThe elements chosen, of the broadcast shape; "
        "``where(condition)`` alone gives the indices of its true elements, as "
        ":func:`nonzero`.",
        raises=[
            (
                "ValueError",
                "If only one of ``x`` and ``y`` is given, or the shapes do not broadcast together.",
            ),
        ],
        example="""
            x = tg.tensor([-1.0, 2.0, -3.0], requires_grad=True)
            y = tnp.where(x > 0, x, 0.5 * x)
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "numpy.select": Doc(
        params={
            "condlist": ("list of array_like of bool", "Conditions, tried in order."),
            "choicelist": ("list of Tensor or array_like", "The value for each condition."),
            "default": ("scalar or Tensor", "The value where no condition holds."),
        },
        raises=[("ValueError", "If the lists differ in length, or are empty.")],
        example="""
            x = tg.tensor([-2.0, 0.5, 3.0], requires_grad=True)
            y = tnp.select([x < 0, x < 1], [-x, x * x], default=1.0)
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "numpy.choose": Doc(
        params={
            "a": (
                "array_like of int",
                "For each element, the index of its choice (not differentiable).",
            ),
            "choices": (
                "sequence of Tensor or array_like",
                "The arrays chosen from; they broadcast with ``a``.",
            ),
            "mode": ("{'raise', 'wrap', 'clip'}", "How indices out of range are treated."),
        },
        more_raises=[("ValueError", "If an index is out of range (``mode='raise'``).")],
        example="""
            x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
            tnp.choose([0, 1, 0], [x, 10.0 * x])
            """,
    ),
    "numpy.compress": Doc(
        params={
            "condition": ("1-D array_like of bool", "Which slices to keep."),
            "axis": ("None or int", "The axis; None: the flattened input."),
        },
        example="""
            x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
            tnp.compress([False, True], x, axis=0)
            """,
    ),
    "numpy.extract": Doc(
        params={
            "condition": ("array_like of bool", "Where to take elements (not differentiable).")
        },
        example="""
            x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
            tnp.extract(x > 1.5, x)
            """,
    ),
    "numpy.clip": Doc(
        params={
            "a_min": (
                "None or scalar or Tensor",
                "Lower bound (None: none); differentiable where it is taken.",
            ),
            "a_max": ("None or scalar or Tensor", "Upper bound (None: none)."),
        },
        example="""
            x = tg.tensor([-1.0, 0.5, 2.0], requires_grad=True)
            y = tnp.clip(x, 0.0, 1.0)
            y
            tnp.sum(y).backward()
            x.grad
            """,
    ),
    "numpy.sort": Doc(
        params={
            "axis": ("None or int", "The axis; None: the flattened input."),
            "order": ("None", "Field order of structured arrays: not supported."),
        },
        more_raises=[("TypeError", "If ``order`` is given.")],
        example="""
            x = tg.tensor([3.0, 1.0, 2.0], requires_grad=True)
            y = tnp.sort(x)
            y
            y[0].backward()
            x.grad
            """,
    ),
    "numpy.partition": Doc(
        summary="Partially sorted: the k-th element in its sorted place.",
        params={
            "kth": ("int or sequence of int", "Element(s) put in their sorted place."),
            "axis": ("None or int", "The axis; None: the flattened input."),
            "kind": ("str", "NumPy's selection algorithm."),
            "order": ("None", "Field order of structured arrays: not supported."),
        },
        more_raises=[
            ("TypeError", "If ``order`` is given."),
            ("ValueError", "If ``kth`` is out of range."),
        ],
        example="""
            x = tg.tensor([3.0, 1.0, 4.0, 2.0], requires_grad=True)
            y = tnp.partition(x, 1)
            y[1]
            """,
    ),
    # products
    "numpy.matmul": Doc(
        params={"x": (T, "First operand."), "y": (T, "Second operand.")},
        raises=[
            (
                "ValueError",
                "If an operand is 0-d, or the inner dimensions (or batch shapes) do not match.",
            )
        ],
        example="""
            a = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
            v = tg.tensor([1.0, -1.0], requires_grad=True)
            y = tnp.matmul(a, v)
            y
            tnp.sum(y).backward()
            a.grad
            v.grad
            """,
    ),
    "numpy.dot": Doc(
        more_raises=[("ValueError", "If the summed dimensions differ.")],
        example="""
            a = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
            y = tnp.dot(a, a)
            y
            y.backward()
            a.grad
            """,
    ),
    "numpy.vdot": Doc(
        raises=[("ValueError", "If the inputs have different numbers of elements.")],
        example="""
            a = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
            tnp.vdot(a, a)
            """,
    ),
    "numpy.inner": Doc(
        raises=[("ValueError", "If the last dimensions differ.")],
        example="""
            a = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
            tnp.inner(a, tg.tensor([1.0, 10.0]))
            """,
    ),
    "numpy.outer": Doc(
        example="""
            a = tg.tensor([1.0, 2.0], requires_grad=True)
            y = tnp.outer(a, [1.0, 10.0, 100.0])
            y
            tnp.sum(y).backward()
            a.grad
            """,
    ),
    "numpy.tensordot": Doc(
        params={
            "axes": (
                "int or pair of sequences",
                "N: the last N axes of ``a`` with the "
                "first N of ``b``; or the two lists of axes to sum over.",
            )
        },
        raises=[("ValueError", "If the summed dimensions differ.")],
        example="""
            a = tg.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
            tnp.tensordot(a, a, axes=([1], [1]))
            """,
    ),
    "numpy.einsum": Doc(
        params={
            "subscripts": (
                "str",
                "NumPy's subscripts (``'ij,jk->ik'``; ``...`` and the "
                "implicit output too), or the first operand of the interleaved "
                "form.",
            ),
            "*operands": (
                "Tensor or array_like",
                "The operands (in the interleaved form, alternating with their sublists).",
            ),
            "optimize": (
                "bool or str",
                "Accepted for NumPy's signature; the contraction order is always left to right.",
            ),
        },
        raises=[("ValueError", "If the subscripts do not match the operands' shapes.")],
        example="""
            a = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
            b = tg.tensor([[0.5, 0.0], [1.0, 2.0]], requires_grad=True)
            y = tnp.einsum("ij,jk->ik", a, b)
            y
            tnp.einsum("ii", a)
            tnp.sum(y).backward()
            a.grad
            """,
    ),
    "numpy.kron": Doc(
        example="""
            a = tg.tensor([1.0, 2.0], requires_grad=True)
            tnp.kron(a, tg.tensor([1.0, 10.0]))
            """,
    ),
    "numpy.cross": Doc(
        params={
            "axisa": ("int", "Must be -1: vectors along the last axis only."),
            "axisb": ("int", "Must be -1."),
            "axisc": ("int", "Must be -1."),
            "axis": ("None", "Must be None."),
        },
        raises=[
            ("TypeError", "If an axis argument is given."),
            ("ValueError", "If the vectors do not have 2 or 3 components, or an input is 0-d."),
        ],
        example="""
            a = tg.tensor([1.0, 0.0, 0.0], requires_grad=True)
            y = tnp.cross(a, [0.0, 1.0, 0.0])
            y
            y[2].backward()
            a.grad
            """,
    ),
    "numpy.convolve": Doc(
        params={
            "mode": (
                "{'full', 'same', 'valid'}",
                "The part of the full convolution returned, as NumPy's.",
            )
        },
        raises=[("ValueError", "If an input is empty or not 1-D, or ``mode`` is unknown.")],
        example="""
            a = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
            y = tnp.convolve(a, [0.0, 1.0, 0.5])
            y
            tnp.sum(y).backward()
            a.grad
            """,
    ),
    "numpy.correlate": Doc(
        params={
            "mode": (
                "{'valid', 'same', 'full'}",
                "The part of the full correlation returned, as NumPy's.",
            )
        },
        raises=[("ValueError", "If an input is empty or not 1-D, or ``mode`` is unknown.")],
        example="""
            a = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
            tnp.correlate(a, [0.0, 1.0, 0.5], mode="full")
            """,
    ),
}
