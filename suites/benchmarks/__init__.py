"""pytest-benchmark versions of the ``harness bench`` suites (skipped unless requested)."""
