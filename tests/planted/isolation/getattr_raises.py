"""Hostile target: a module ``__getattr__`` that raises something other than AttributeError (a
lazy-import shim gone wrong). In-process it gave INTERNALERROR and took ``reference`` down too."""


def __getattr__(name):
    raise RuntimeError(f"lazy import of {name} failed")
