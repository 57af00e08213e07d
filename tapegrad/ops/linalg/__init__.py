"""The linear-algebra family: rows (``rows``), node kernels (``kernels``), front ends
(``front``: numpy.linalg; ``scipy_front``: scipy.linalg; ``convolution``) and recorded
rules (``rules``).

The package imports nothing: its modules sit in different layers (kernels below the
rows, front ends and rules above Tensor); ``tapegrad.ops`` imports the rows.
"""
