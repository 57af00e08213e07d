"""The special-function family (scipy.special): scalar formulas and algorithms
(``gamma``: erf, gamma, beta, normal distribution functions; ``bessel``: modified
Bessel functions; ``incomplete``: incomplete gamma and beta), rows (``rows``), front
end (``front``) and recorded rules (``rules``).

The package imports nothing: its modules sit in different layers (kernels below the
rows, front ends and rules above Tensor); ``tapegrad.ops`` imports the rows.
"""
