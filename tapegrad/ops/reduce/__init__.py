"""The reduction family: rows (``rows``), node kernels (``kernels``), front end (``front``)
and recorded rules (``rules``) of sums, products, extrema, means, cumulative sums and
products.

The package imports nothing: its modules sit in different layers (kernels below the
rows, front ends and rules above Tensor); ``tapegrad.ops`` imports the rows.
"""
