"""The composite family: more of NumPy as rows written in other ops, with no kernels of
their own (``rows``), and their front ends by what they do (``rearrange``,
``statistics``, ``nan_reductions``, ``calculus``, ``products``,
``elementwise_composites``).

The package imports nothing: its modules sit in different layers (kernels below the
rows, front ends and rules above Tensor); ``tapegrad.ops`` imports the rows.
"""
