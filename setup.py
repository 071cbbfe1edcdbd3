"""The wheel's package map (the rest of the metadata is in pyproject.toml).

The repository keeps ``suites/``, ``reference/`` and ``reports/`` at its top level; the
distribution installs them as ``harness.suites``, ``harness.reference`` and ``harness.reports``
(``harness/basics/layout.py``), so an installed harness claims no generic top-level package name in a
user's environment. The documentation pages travel inside it too (``harness/docs``), so the
README's links and ``python -m harness docs`` work from a wheel.
"""
from setuptools import find_packages, setup

MAPPED = ("suites", "reference", "reports")

packages = find_packages(include=["harness", "harness.*"])
for top in MAPPED:
    packages += [f"harness.{p}" for p in find_packages(include=[top, f"{top}.*"])]

packages.append("harness.docs")  # data: the pages, no code

setup(
    packages=packages,
    package_dir={f"harness.{top}": top for top in MAPPED} | {"harness.docs": "docs"},
    # docs/ is data, not code: an implicit package holding only the pages
    package_data={"harness.reports": ["baselines/**/*"], "harness.docs": ["*.md"]},
    # the GPU run's device logs (pip freeze, junit XML) and its rendered report are a record of that
    # run, kept in the repository; a baseline is its run folders (results, env, the conformance table)
    exclude_package_data={"harness.reports": ["baselines/*/device/*", "baselines/*/device/**/*",
                                               "baselines/*/report/*", "baselines/*/report/**/*"]},
)
