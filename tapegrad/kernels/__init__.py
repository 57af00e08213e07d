"""Compiled kernels: pure array functions plus the adapters that read them off the tape."""
