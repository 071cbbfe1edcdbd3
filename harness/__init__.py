"""Conformance and benchmark harness for transformer building blocks."""
__version__ = "0.1.0"


def _map_checkout_folders() -> None:
    """In a checkout that is not installed (or installed with a tool that does not map packages),
    make ``harness.suites``, ``harness.reference`` and ``harness.reports`` the repository's
    top-level folders, as the wheel and the editable install do (``harness.layout``)."""
    import importlib.abc
    import importlib.util
    import sys

    from harness import layout

    if layout.INSTALLED:
        return

    class CheckoutFolders(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path=None, target=None):
            head, _, name = fullname.partition(".")
            if head != "harness" or name not in layout.MAPPED:
                return None
            folder = layout.folder(name)
            return importlib.util.spec_from_file_location(
                fullname, folder / "__init__.py", submodule_search_locations=[str(folder)])

    if not any(type(f).__name__ == "CheckoutFolders" for f in sys.meta_path):
        sys.meta_path.append(CheckoutFolders())


_map_checkout_folders()
