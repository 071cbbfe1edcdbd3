"""The Triton reference kernels (``reference/triton/``) through EVERY suite under Triton's
interpreter (issue 22): each kernel module is run as a user's Triton file is, ``--impl MODULE`` on a
CPU device with no flag (the worker sets ``TRITON_INTERPRET=1``), over the whole ``suites/`` folder
(as ``harness check`` runs it: the benchmarks left out), on the derandomized ci profile fitted to the
interpreter (``harness.boundary.interpret``). A suite applies when the module provides its protocol names;
the others' cells are "skipped (... has no attribute ...)". Asserted: no property fails or errs,
every property that passed checked at least one configuration (``CheckedCounts``), every applicable
family has such a property, and every cell that did not run says why in words this test knows (not
provided, declared unsupported, needs a second target).

Two tiers (``harness.boundary.interpret``'s ``$HARNESS_INTERPRET_TIER``):

- **smoke, in CI (the default)**: every property checks ONE configuration, its first explicit
  tile-boundary example, on the kernel's own boundary lengths (up to ``2T + 1``: an online softmax
  needs a second full key block) and at most 4 query heads, one sequence
  per state machine, gradcheck in its fast mode. Measured with ``tests/test_planted_triton.py``
  (notes/MEASUREMENTS.md, "Triton suites in CI"): 140 s of CPU in all; 242-288 s of wall with
  ``-n 2`` on the 2-core machine at load 6-10 (other sessions); at load 2-4, ~70-140 s (estimated
  from the CPU time, not measured).
- **full, opt-in (``$HARNESS_TRITON_SUITES=1``)**: the interpreter's full profile (lengths up to
  ``2T + 1``, 16 heads, full gradcheck, the profile's state machine sequences capped like the
  checks) with ``FULL_CHECKS`` checks per property: 25 min with ``-n 2`` on the busy machine.

The planted Triton bugs are caught in CI by ``tests/test_planted_triton.py``. Without triton (and
liger-kernel, for its part) these skip with the install command, except under
``$HARNESS_REQUIRE_TRITON`` or ``$HARNESS_REQUIRE_OPTIONAL`` (``optional_libs``, tests/conftest.py).
The parts below are split so that ``-n 2`` spreads them.
"""
from __future__ import annotations

import json

import pytest
from planted_support import SUITES, run_suite

from triton_tiers import opted_in, use_tier

from harness.verdicts import sweep_table
from harness.boundary.interpret import HEADER

#: the deeper tier is opt-in ($HARNESS_TRITON_SUITES=1): 25 min with -n 2 at load 10
TIER = "full" if opted_in() else "smoke"

pytestmark = pytest.mark.optional_libs("triton")

#: checks per property in the full tier (``$HARNESS_INTERPRET_CHECKS``), the explicit tile-boundary
#: examples first; ``python -m harness sweep`` runs these kernels on the interpreter's own profile
FULL_CHECKS = 3
FA = "reference.triton.flash_attention"
#: (module, pytest -k expression or None, the property families that must run in that part)
PARTS = [
    (FA, "not grad and not history", {"attention", "sliding_window"}),
    (FA, "grad or history", {"attention_grad", "window_grad", "history"}),
    ("reference.triton.kvcache", None, {"kvcache", "history"}),
    ("reference.triton.norms", None, {"layernorm", "rmsnorm", "norm_grad"}),  # no history: classes
    ("reference.triton.rope", None, {"rope", "rope_module", "position_grad", "history"}),
    ("reference.triton.rope_interleaved", None, {"rope", "rope_module", "position_grad", "history"}),
    # liger-kernel's Triton RoPE as Hugging Face calls it (its other layout is a known bug, not run here)
    pytest.param("harness.adapters.liger_positions_hf_layout", None, {"rope", "position_grad", "history"},
                 marks=pytest.mark.optional_libs("liger_kernel")),
]

#: why a cell may not have run: the module does not provide the suite's name, it declares the
#: feature unsupported, or the property compares two targets
NOT_RUN_REASONS = ("has no attribute", "declared", "provides no", "needs", "not provided", "second target",
                   "two targets", "consistency")


class CheckedCounts:
    """A plug-in of the in-process session: per property, how many configurations ``runner.run``
    checked (the target's ``outcome.checked`` after the test's call), so that a cell reading
    "pass" is known to have checked one configuration, not to have passed every example over."""

    def __init__(self):
        self.checked: dict[str, int] = {}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        yield
        target = getattr(item, "funcargs", {}).get("target")
        family = getattr(getattr(item, "module", None), "PROPERTY_PREFIX", None)
        if call.when == "call" and target is not None and family:
            prop = f"{family}.{item.originalname.removeprefix('test_')}"
            self.checked[prop] = self.checked.get(prop, 0) + getattr(target.outcome, "checked", 0)


def _ids(part) -> str:
    module, k, _ = getattr(part, "values", part)  # (a pytest.param's values)
    return module.rsplit(".", 1)[1] + (f"[{k}]" if k else "")


@pytest.mark.parametrize("module,k,families", PARTS, ids=[_ids(p) for p in PARTS])
def test_triton_kernel_passes_every_applicable_suite(pytester, tmp_path, monkeypatch, module, k, families):
    """One part, in the tier this run selects (smoke in CI; ``$HARNESS_TRITON_SUITES=1``: full)."""
    use_tier(monkeypatch, TIER, None if TIER == "smoke" else FULL_CHECKS)
    report = tmp_path / "report"
    counts = CheckedCounts()
    result = run_suite(pytester, [SUITES], [module], k, "--ignore", str(SUITES / "benchmarks"),
                       "--conformance-report", str(report), "-rfE", plugins=[counts])
    out = result.stdout.str()
    assert HEADER in out, f"{module} was not run interpreted:\n{out[-3000:]}"
    cells = [c for c in json.loads((report / "conformance.json").read_text())["results"] if c["target"] == module]
    kinds = {c["property"]: sweep_table.kind_of(c) for c in cells}
    alarms = [f"{c['property']}: {c['result']} {c.get('detail', '')[:300]} {c.get('repro', '')}"
              for c in cells if kinds[c["property"]] in sweep_table.ALARM_KINDS]
    assert not alarms, "a correct Triton kernel failed:\n" + "\n".join(alarms) + "\n" + out[-3000:]
    assert result.parseoutcomes().get("failed", 0) == 0, out[-3000:]
    ran = {p.split(".", 1)[0] for p, kind in kinds.items() if kind in sweep_table.RAN_KINDS}
    assert families <= ran, f"{module}: no property of {sorted(families - ran)} checked a configuration"
    unexplained = [f"{c['property']}: {c['result']}" for c in cells
                   if kinds[c["property"]] not in sweep_table.RAN_KINDS
                   and not any(r in c["result"] for r in NOT_RUN_REASONS)]
    assert not unexplained, f"{module}: cells that did not run, for a reason this test does not know:\n" + \
        "\n".join(unexplained)
    unchecked = sorted(p for p, kind in kinds.items() if kind in sweep_table.RAN_KINDS and not counts.checked.get(p))
    assert not unchecked, f"{module}: cells that passed without checking a configuration: {unchecked}"
