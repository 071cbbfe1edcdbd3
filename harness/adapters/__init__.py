"""Adapters: real libraries exposed under the harness protocol, so the suites hold them to it.

Each adapter is a target module (``--impl harness.adapters.<name>``) that declares the
conventions the library follows in ``HARNESS_CONVENTIONS``. An adapter whose library is
not installed raises ImportError on import; the suites then report the target as not loading.
"""
