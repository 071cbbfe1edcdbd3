"""Report building (conformance tables, benchmark tables and plots) and stored baselines."""
