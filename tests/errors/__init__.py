"""Errors and the edges of the graph: bad input to single ops and to composite
functions, consistent types at the edges, and every way out of the graph recording or
raising."""
