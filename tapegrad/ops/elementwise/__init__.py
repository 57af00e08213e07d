"""The elementwise family: scalar formulas and their rows (``core``: NumPy's operators and the
functions most models use; ``ufuncs``: the rest of NumPy's elementwise functions), the
kernels that lift formulas to tensors (``kernels``, ``binary_kernels``), the front end
(``front``) and the recorded rules (``rules``).

The package imports nothing: its modules sit in different layers (kernels below the
rows, front ends and rules above Tensor); ``tapegrad.ops`` imports the rows.
"""
