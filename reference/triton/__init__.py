"""Reference kernels in Triton: tiled, as a GPU kernel author writes them (``--impl reference.triton``).

Each module is one component, readable, with its shapes in the docstring; on a GPU they compile,
on a CPU the harness runs them under Triton's interpreter (``harness.boundary.interpret``). They import
nothing from ``harness``.
"""
