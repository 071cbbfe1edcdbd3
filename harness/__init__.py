"""Conformance and benchmark harness for transformer building blocks."""
__version__ = "0.1.0"
