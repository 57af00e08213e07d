"""The shape family: rows (``rows``), node kernels (``kernels``), front end (``front``) and
recorded rules (``rules``) of reshapes, transposes, indexing, concatenation, casts and
``where``.

The package imports nothing: its modules sit in different layers (kernels below the
rows, front ends and rules above Tensor); ``tapegrad.ops`` imports the rows.
"""
