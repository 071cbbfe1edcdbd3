"""The user's own test package, named like the harness's suites folder on purpose."""
