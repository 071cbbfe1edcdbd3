"""What one test learned about its target besides pass/fail: ``Outcome``, owned by the ``Target``.

The plug-in gives the target a fresh ``Outcome`` before each of its tests
(``pytest_runtest_setup``) and reads it when the test's report is made; ``runner.run`` and
``runner.record_label`` write to the outcome of the target they are given. There is no
module-level state: an in-process pytester run has its own targets, hence its own outcomes.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Outcome:
    """One test's bookkeeping for one target.

    ``labels``: named outcomes the check recorded (e.g. ``convention:bottom_right``), in order;
    ``unsupported``: (reason, config text) of each configuration passed over as unsupported;
    ``checked``: how many configurations were checked (passed or failed);
    ``reached``: how many configurations ``runner.run`` was given (drawn and not filtered out);
    ``excluded``: (reason, config text) of each one a declared dtype or size ruled out before the
    check (not counted in the cell: the target said so up front; a property with nothing else
    reached is reported unsupported, not Hypothesis' Unsatisfiable)."""

    labels: list[str] = field(default_factory=list)
    unsupported: list[tuple[str, str]] = field(default_factory=list)
    checked: int = 0
    reached: int = 0
    excluded: list[tuple[str, str]] = field(default_factory=list)

    def only_declarations_rejected(self) -> bool:
        """Whether every configuration that reached the check was ruled out by what the target
        declares or does not support, and at least one was (so a property that drew nothing else
        is unsupported; one whose rejections have another cause stays Hypothesis' error)."""
        rejected = len(self.unsupported) + len(self.excluded)
        return self.checked == 0 and rejected > 0 and self.reached <= rejected

    def unsupported_summary(self) -> str | None:
        """What this test passed over, for the table: the most frequent reason and its first
        configuration, e.g. ``undeclared: ... (e.g. config AttnConfig(...))`` (a declared reason alone);
        None when nothing was."""
        passed_over = self.unsupported or self.excluded
        if not passed_over:
            return None
        reasons = [r for r, _ in passed_over]
        top = max(dict.fromkeys(reasons), key=reasons.count)
        first = next(c for r, c in passed_over if r == top)
        return f"{top} (e.g. config {first})" if top.startswith("undeclared") else top

    def unsupported_note(self) -> tuple[str, str] | None:
        """(cell note, full note) when configurations were passed over as unsupported: the cell
        says how many and of which kind, the full note (terminal summary, table detail) why."""
        n = len(self.unsupported)
        if not n:
            return None
        why = self.unsupported_summary()
        kind = ("NotImplementedError" if why.startswith("undeclared") else
                "interpreter" if why.startswith("interpreter") else "declared")
        count = f"{n} of {n + self.checked} configs unsupported"
        return f"{count} ({kind})", f"{count} ({why})"
