"""Root conftest: make the harness plug-in available in a checkout that was not
``pip install``-ed. When the package is installed, its ``pytest11`` entry point
(named ``harness.plugin``) registered it already and this line is a no-op."""
pytest_plugins = ["harness.plugin", "pytester"]
