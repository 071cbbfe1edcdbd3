"""The target's process and the boundary to it: importing the target (``target_import``, ``provided``,
``interpret`` and the Triton interpreter's fixes and probe), its worker (``worker``, ``isolation``,
``wire``, ``handles``, ``pending``, ``progress``) or the in-process backend (``in_process``), the call
rules (``guard``), harness code run next to the target's objects (``target_ops``, ``module_tensors``) and
the ``Target`` a suite is given (``loader``)."""
