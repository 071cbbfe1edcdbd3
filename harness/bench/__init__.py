"""``harness bench``: benchmarks of a target on a pluggable set of reference models.

Suites (one module each, ``points(ctx) -> list[Point]`` and ``summary(ctx, rows) -> list[Check]``;
the registry of their names and modules is ``harness.bench.suites``), among them:
  scaling          time / memory / FLOP/s vs sequence length, log-log exponent fits
  receptive_field  which inputs reach the last token through L sliding-window layers
  kv_cache         KV-cache bytes of MHA / GQA / MQA / rolling-window decoders
  packing          tokens/s of packed documents (attention_varlen) against the same padded (opt-in)
  timer_selfcheck  the harness timer against torch.utils.benchmark / triton do_bench
  finetune         BERT fine-tuning accuracy with the target's SDPA / LayerNorm swapped in
  conformance_time the wall time of the conformance suites against the target

The run folder's layout is notes/RESULTS_SCHEMA.md.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class Check:
    """One acceptance check a suite reports at the end (printed; ``--strict`` fails on it)."""
    name: str
    passed: bool | None   # None: could not be evaluated (missing points)
    detail: str

    def line(self) -> str:
        mark = {True: "PASS", False: "FAIL", None: "n/a "}[self.passed]
        return f"  [{mark}] {self.name}: {self.detail}"


def uncompared(rows: list[dict], label: Callable[[dict], str] | None = None) -> str:
    """What a check could not compare, and why: ``"; not compared: paged (skipped: <reason>)"`` for
    each row that is not ok, grouped by reason ("" when every row is ok). A skipped point is left out
    of the comparison, never counted as a mismatch; a point that failed (``error``, ``oom``, ``nan``)
    fails the check (``failed_points``)."""
    label = label or (lambda r: r["case"])
    groups: dict[str, list[str]] = {}
    for r in rows:
        if r["status"] != "ok":
            why = f"{r['status']}: {r.get('reason') or 'no reason recorded'}"
            groups.setdefault(why, []).append(label(r))
    return "".join(f"; not compared: {', '.join(dict.fromkeys(names))} ({why})" for why, names in groups.items())


def failed_points(rows: list[dict]) -> list[dict]:
    """The rows that ran and failed (``runfolder.BAD_STATUSES``): they fail a check that needs them."""
    from harness.verdicts.runfolder import BAD_STATUSES
    return [r for r in rows if r["status"] in BAD_STATUSES]


@dataclass
class Context:
    """What every suite needs: the target, where to run, the sizes, the store."""
    target: Any                 # harness.boundary.loader.Target
    impl: str
    device: str
    profile: Any                # harness.bench.profiles.Profile
    store: Any                  # harness.bench.store.ResultStore
    peak_tflops: dict = field(default_factory=dict)
    cases: tuple[str, ...] | None = None   # only these cases (None: all)
    threads: int | None = None  # the user's --threads (None: each suite's default)
    state: dict = field(default_factory=dict)
    #: write a point now (``PointRunner.record``), for a suite that measures points together and
    #: finishes them one by one (the CPU scaling sweep); None: rows are written point by point
    record: Callable[[Any], dict] | None = None

    def wants(self, case: str) -> bool:
        return self.cases is None or case in self.cases

    def on_target(self, fn: Callable, *args, **kwargs):
        """``fn(*args, **kwargs)`` next to the target's code: in its worker process, under the
        per-call limit, when it is isolated (``harness.bench.on_target``); here, unbounded, with
        ``--isolation none`` (the debugging mode)."""
        if getattr(self.target, "worker", None) is None:
            return fn(*args, **kwargs)
        from harness.runner import on_target
        return on_target(self.target, fn, *args, **kwargs)

    def component(self, name: str):
        """The target's protocol name ``name``, or None when it lacks it (or fails to load)."""
        from harness.boundary.target_import import BrokenTarget, Missing
        try:
            return self.target.lookup(name)
        except (Missing, BrokenTarget):
            return None

    def require(self, name: str):
        """The target's ``name``; raises ``Skip`` when it lacks it, ``RuntimeError`` when it is broken."""
        from harness.bench.points import Skip
        from harness.boundary.target_import import BrokenTarget, Missing
        try:
            return self.target.lookup(name)
        except Missing as exc:
            raise Skip(str(exc)) from None
        except BrokenTarget as exc:  # one line: the row's reason keeps the first line only
            raise RuntimeError(" ".join(str(exc).split())) from None


def begin_run(store, target, impl: str, device: str, profile, suites, *, peak: dict | None = None,
              cases=None, threads: int | None = None, state: dict | None = None, extra: dict | None = None
              ) -> Context:
    """How every bench run starts (``harness bench`` and ``harness.bench.finetune_run``): the run
    folder's env.json (machine, versions, ``profile``, ``impl``, ``suites`` and ``extra``), then the
    ``Context`` the suites measure with. ``profile`` is a ``harness.bench.profiles.Profile``."""
    from harness.bench import env

    peak = peak or {}
    env.write(store.dir, env.collect(device, argv=sys.argv, peak=peak,
                                     extra={"profile": profile.name, "impl": impl, "suites": list(suites),
                                            **(extra or {})}))
    return Context(target=target, impl=impl, device=device, profile=profile, store=store, peak_tflops=peak,
                   cases=tuple(cases) if cases else None, threads=threads,
                   state={} if state is None else state)


class TargetNotLoaded(Exception):
    """The target does not load, so nothing is measured; the message says why and what to do."""


def open_target(impl: str, device: str, suites, *, isolation: str = "none", timeout: float | None = None,
                import_timeout: float | None = None, threads: int | None = None,
                cli_conventions: dict[str, str] | None = None, keep_memory: bool = False):
    """Load ``impl`` as every bench run measures it (``harness bench`` and
    ``harness.bench.finetune_run``): the suites' modules preloaded in the worker's forkserver (never
    under a call's limit), the configuration types a ``HARNESS_SIZES`` may name, the target loaded,
    and its worker set up with the run's process-wide settings (``on_target.prepare_process``).
    Raises ``TargetNotLoaded`` when it does not load: a benchmark of a target that did not run would
    only label other code's numbers with its name."""
    from harness.basics import options
    from harness.spec import configs
    from harness.bench import suites as registry
    from harness.boundary.loader import load_target

    if isolation == "process":
        from harness.boundary import isolation as worker_isolation
        worker_isolation.preload(["harness.bench.on_target"] + [registry.MODULES[s] for s in suites])
    configs.add_source(options.SUITES)
    target = load_target(impl, cli_conventions=cli_conventions, device=device, isolation=isolation,
                         timeout=timeout, import_timeout=import_timeout, threads=threads)
    if target.load_error:
        target.close()
        cause = " ".join(target.load_error.split())
        raise TargetNotLoaded(
            f"the target {impl!r} does not load ({cause}), so nothing was measured: a benchmark of a target "
            f"that did not run would only label other code's numbers with its name. Fix the target (its "
            f"import must succeed: python -c 'import ...' or the file's own error above) and run again.")
    if target.worker is not None:  # the worker measures the target's points: same settings
        from harness.bench.on_target import prepare_process
        target.worker.set_up(prepare_process, device, keep_memory, list(suites))
    return target
