"""The pytest plug-in (entry point ``pytest11``): ``pytest suites --impl TARGET``.

- options under one group, ``harness``;
- every test that takes a ``target`` argument is parametrized over the targets;
- ``@pytest.mark.needs("name")`` skips a test (reason names the attribute) when
  the target lacks it, and fails it when the target cannot provide it;
- ``pytest_report_header`` prints what is under test;
- at the end, a conformance table (property x target) is printed and, with
  ``--conformance-report DIR``, written as CSV, Markdown and JSON; with two or more targets, a
  consistency section (``harness.verdicts.consistency``) follows it, and ``--require-consistent`` fails
  the session when the targets disagree.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings

from harness import runner
from harness.basics import heap, options, scope, shards, versions
from harness.spec import configs, tolerance
from harness.boundary import guard, provided
from harness.verdicts import session_rows, xfails
from harness.verdicts.consistency import consistency_check
from harness.spec.conventions import measured_of, parse_cli
from harness.boundary.loader import Target, load_target
from harness.boundary.target_import import BrokenTarget, Missing
from harness.verdicts.outcome import Outcome
from harness.verdicts.session_rows import NOT_LOADED, ResultsSink, conformance_summary

_COMMON = dict(deadline=None, print_blob=False,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                                      HealthCheck.differing_executors])
#: harness-ci: derandomized, small; harness-dev: random, same size; harness-thorough: 10x the
#: examples. Namespaced: a plain "ci" would replace Hypothesis' own "ci" profile (which it loads by
#: itself when $CI is set) in every session where the harness is installed.
#: ci skips Hypothesis' explain phase (it replays each failure ~100 times under tracing), and
#: reports one failure: looking for more, Hypothesis stops 10 s (wall clock) after the first, so
#: which failures a busy machine reported differed from an idle one's
settings.register_profile("harness-ci", max_examples=30, derandomize=True, report_multiple_bugs=False,
                          phases=[p for p in Phase if p is not Phase.explain], **_COMMON)
settings.register_profile("harness-dev", max_examples=30, **_COMMON)
settings.register_profile("harness-thorough", max_examples=300, **_COMMON)

_TARGETS_KEY = pytest.StashKey[list]()
_RESULTS_KEY = pytest.StashKey[list]()
_HARNESS_KEY = pytest.StashKey[bool]()
_CONSISTENCY_KEY = pytest.StashKey[list]()
#: an item's protocol name that the target defines but cannot serve (``BrokenTarget``: a wrong signature)
_BROKEN_KEY = pytest.StashKey[str]()
#: the target's ``limit.spent`` when a test's set-up began (its calls' seconds are the difference)
_SPENT_KEY = pytest.StashKey[float]()
_XFAILS_KEY = pytest.StashKey[list]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness", "transformer building-block conformance")
    group.addoption("--impl", action="append", default=None, metavar="TARGET",
                    help="module path (pkg.mod) or .py file to test; repeatable. "
                         "Default: $HARNESS_IMPL (comma-separated) or 'reference'.")
    group.addoption("--convention", action="append", default=None, metavar="KEY=VALUE",
                    help="declare a convention the targets follow, e.g. causal_alignment=bottom_right")
    group.addoption("--impl-timeout", type=float, default=guard.DEFAULT_TIMEOUT, metavar="SECONDS",
                    help="per-call time limit for calls into the target (default %(default)s)")
    group.addoption("--isolation", default="process", choices=["process", "none"],
                    help="process (default): each target runs in its own worker process, so a crash, "
                         "hang or global patch in it cannot reach the harness or another target; "
                         "none: import it into this process (for debugging with pdb)")
    group.addoption("--import-timeout", type=float, default=None, metavar="SECONDS",
                    help="time limit for importing a target in its worker (default 120)")
    group.addoption("--xfails", default=None, metavar="FILE",
                    help="a file of properties known to fail (PROPERTY [TARGET]  # why): reported XFAIL, "
                         "the run passes; a failure not listed fails it (default: $HARNESS_XFAILS)")
    group.addoption("--conformance-report", default=None, metavar="DIR",
                    help="write the conformance table (CSV, Markdown, JSON) into DIR")
    group.addoption("--device", default="cpu", metavar="DEVICE",
                    help="device for the suites' tensors: cpu, cuda, or auto (default cpu)")
    group.addoption("--triton-interpret", action="store_true", default=False,
                    help="run Triton kernels under Triton's interpreter (TRITON_INTERPRET=1) even on a GPU; "
                         "on a CPU device they always are")
    group.addoption("--hide-skipped", action="store_const", const=True, default=None, dest="hide_skipped",
                    help="leave the rows where every target was skipped out of the terminal's conformance "
                         "table (default: when they are most of the rows); the written CSV/MD/JSON keep them")
    group.addoption("--show-skipped", action="store_const", const=False, dest="hide_skipped",
                    help="show every row in the terminal's conformance table")
    group.addoption("--require-consistent", action="store_true", default=False,
                    help="with several --impl targets (backends of one library): fail the session when "
                         "they measure different conventions or the differential checks "
                         "(suites/consistency/) find different outputs; without it they are reported")
    group.addoption("--shard", type=options.shard, default=None, metavar="K/N",
                    help="run the K-th of N parts of the collected properties (a CI matrix job)")
    group.addoption("--torch-threads", type=int, default=None, metavar="N",
                    help="torch CPU threads (default 1 for conformance runs: the suites' tensors are "
                         "tiny and thread hand-off dominates; benchmark runs keep torch's default)")


def target_specs(config: pytest.Config) -> list[str]:
    specs = config.getoption("impl") or []
    if not specs and os.environ.get("HARNESS_IMPL"):
        specs = [s.strip() for s in os.environ["HARNESS_IMPL"].split(",") if s.strip()]
    return specs or [options.DEFAULT_TARGET]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    return scope.ignore_benchmarks(collection_path, config)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "uses(*features): HARNESS_UNSUPPORTED features a test cannot "
                                       "do without; reported unsupported when the target declares one")
    config.addinivalue_line("markers", "needs(name): the protocol name a test calls; "
                                       "skipped when the target lacks it")
    config.stash[_HARNESS_KEY] = harness = scope.is_harness_session(config)
    config.stash[_RESULTS_KEY] = rows = []
    config.stash[_CONSISTENCY_KEY] = differential = []
    config.pluginmanager.register(ResultsSink(rows, differential), _SINK_NAME)
    if not harness:
        return
    if not config.getoption("hypothesis_profile", None):
        settings.load_profile("harness-ci" if os.environ.get("CI") else "harness-dev")
    _set_threads(config)
    path = config.getoption("xfails") or os.environ.get("HARNESS_XFAILS")
    try:
        config.stash[_XFAILS_KEY] = xfails.load(path) if path else []
    except xfails.XfailsError as exc:
        raise pytest.UsageError(str(exc)) from None
    configs.add_source(options.SUITES)  # the configuration types, before a target's HARNESS_SIZES is read
    if config.getoption("shard"):
        config.pluginmanager.register(shards.Shard(config.getoption("shard")), "harness-shard")
    targets(config)


def _set_threads(config: pytest.Config) -> None:
    import torch
    threads = config.getoption("torch_threads")
    benchmarking = config.getoption("benchmark_enable", False) or config.getoption("benchmark_only", False)
    if threads is None and not benchmarking:
        threads = 1
    if threads:
        torch.set_num_threads(threads)


def targets(config: pytest.Config):
    """The targets under test, loaded on first use."""
    if _TARGETS_KEY not in config.stash:
        conventions = parse_cli(config.getoption("convention"))
        device = resolve_device(config)
        iso = config.getoption("isolation", "process")
        threads = config.getoption("torch_threads") or 1
        config.stash[_TARGETS_KEY] = [
            load_target(s, cli_conventions=conventions, device=device, isolation=iso,
                        timeout=config.getoption("impl_timeout"), import_timeout=config.getoption("import_timeout"),
                        threads=threads, triton_interpret=config.getoption("triton_interpret", False))
            for s in target_specs(config)]
    return config.stash[_TARGETS_KEY]


#: the skip reason of every test of a target that does not load (its cause is printed once)


def not_loaded_reason(target) -> str:
    return f"target {target.spec!r} {NOT_LOADED} (the cause is printed once, under 'targets that do not load')"


def pytest_collection_finish(session: pytest.Session) -> None:
    heap.settle()  # (under `harness check` only: harness.basics.heap)


def pytest_unconfigure(config: pytest.Config) -> None:
    for t in config.stash.get(_TARGETS_KEY, []):
        t.close()


def pytest_report_header(config: pytest.Config) -> list[str]:
    if not config.stash.get(_HARNESS_KEY, False):
        return []
    import torch
    from harness import __version__
    lines = [f"harness {__version__}: torch {torch.__version__}, device {resolve_device(config)}, "
             f"hypothesis profile {settings._current_profile}"]
    for t in targets(config):
        if t.load_error:
            lines.append(f"target {t.spec}: DOES NOT LOAD: {t.load_error.splitlines()[0]}")
        else:
            where = "its own worker process" if t.isolated else "this process (--isolation none)"
            lines.append(f"target {t.spec}: {t.file}{versions.label(t)}, in {where}; "
                         f"defines: {', '.join(t.available()) or 'no protocol names'}")
            for name, source in t.info.ignored.items():
                lines.append(f"  ignored: {provided.ignored_line(name, source)}")
            if t.info.interpreted:
                from harness.boundary import interpret
                lines.append(f"  {interpret.HEADER}: tiles {t.info.tiles or interpret.DEFAULT_TILES} "
                             f"(lengths fitted to them), {interpret.tier()} tier, at most {interpret.budget()} "
                             f"checks per property, "
                             f"per-call limit {t.limit.seconds:g} s")
                lines.append(f"  {interpret.interpreter_line(t.info)}")
            elif t.info.jit:
                lines.append(f"  compiled Triton (each configuration JIT-compiled on its first call): "
                             f"per-call limit {t.limit.seconds:g} s")
                lines.append(f"  {interpret.interpreter_line(t.info)}")
            if t.dtypes:
                lines.append(f"  declared dtypes: {', '.join(t.dtypes)}")
            if t.sizes:
                lines.append("  declared sizes: " + ", ".join(f"{k} in {v!r}" for k, v in t.sizes.items()))
            if t.conventions:
                lines.append(f"  declared conventions: {t.conventions}")
            if t.info.unsupported:
                lines.append(f"  declared unsupported: {', '.join(sorted(t.info.unsupported))}")
    return lines


def resolve_device(config: pytest.Config) -> str:
    import torch
    dev = config.getoption("device")
    if dev == "auto":
        dev = "cuda" if torch.cuda.is_available() else "cpu"
    return xdist_device(dev, os.environ.get("PYTEST_XDIST_WORKER"), torch.cuda.device_count())


def xdist_device(dev: str, worker: str | None, n_gpus: int) -> str:
    """Under pytest-xdist with several GPUs, worker gwN gets cuda:(N mod #GPUs): one worker
    per device rather than every worker on cuda:0."""
    if dev == "cuda" and worker and worker.startswith("gw") and n_gpus > 1:
        return f"cuda:{int(worker[2:]) % n_gpus}"
    return dev


@pytest.fixture(scope="session")
def device(pytestconfig: pytest.Config) -> str:
    return resolve_device(pytestconfig)


@pytest.fixture(scope="session")
def loaded_targets(pytestconfig: pytest.Config) -> list:
    """Every target of the session that loaded, in ``--impl`` order (the differential checks
    of ``suites/consistency/`` hold them to each other)."""
    return [t for t in targets(pytestconfig) if t.load_error is None]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # only the conformance suites (a module that names its properties' PROPERTY_PREFIX, or a test
    # marked `needs`) are parametrized over the targets; a self-test's own `target` argument is left alone
    is_suite = hasattr(metafunc.module, "PROPERTY_PREFIX") or metafunc.definition.get_closest_marker("needs")
    if "target" in metafunc.fixturenames and is_suite:
        ts = targets(metafunc.config)
        metafunc.parametrize("target", ts, ids=[t.id for t in ts])


def _target_of(item: pytest.Item):
    callspec = getattr(item, "callspec", None)
    target = callspec.params.get("target") if callspec else None
    return target if isinstance(target, Target) else None  # (another plugin's "target" parameter)


def pytest_runtest_setup(item: pytest.Item) -> None:
    target = _target_of(item)
    if target is None:
        return
    target.outcome = Outcome()  # this test's labels and configurations passed over
    item.stash[_SPENT_KEY] = target.limit.spent  # (the seconds in target calls before this test)
    if target.worker is not None:
        target.worker.output_report()  # a fresh output budget per test
    if target.load_error is not None:
        raise runner.NotLoadedSkip(not_loaded_reason(target))
    for mark in item.iter_markers("uses"):  # features a property cannot be checked without
        try:
            runner.require_features(target, *mark.args)
        except runner.Unsupported as exc:
            runner.skip_unsupported(str(exc))
    for mark in item.iter_markers("needs"):
        for name in mark.args:
            try:
                target.lookup(name)
            except Missing as exc:
                pytest.skip(str(exc))
            except BrokenTarget as exc:  # (failed in the call phase: a failure of the property, not a
                item.stash[_BROKEN_KEY] = str(exc)  # set-up error; and raised outside this except, once)
                return


def property_of(item: pytest.Item) -> str:
    name = getattr(item, "originalname", item.name).removeprefix("test_")
    return runner.qualified_property(item.module.__name__, name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """A property none of whose configurations the target supports is reported unsupported,
    not as Hypothesis' "Unable to satisfy assumptions" error; a differential check whose targets
    disagree is xfailed (reported in the consistency section) unless --require-consistent."""
    from hypothesis.errors import Unsatisfiable
    broken = item.stash.get(_BROKEN_KEY, None)
    if broken is not None:  # a protocol name with a signature the protocol cannot call (docs/protocol.md)
        pytest.fail(broken, pytrace=False)
    if _target_of(item) is not None:
        tolerance.observe()  # the comparisons of this call: the row's error column (_call_facts)
    try:
        return (yield)
    except Unsatisfiable:
        target = _target_of(item)
        if target is None or not target.outcome.only_declarations_rejected():
            raise  # (rejected for another reason too: genuinely unsatisfiable, reported)
        runner.skip_unsupported(target.outcome.unsupported_summary())
    except Exception as exc:  # (an AssertionError, or Hypothesis' group of them)
        from harness.verdicts.consistency import disagreement_of
        why = disagreement_of(exc) if consistency_check(item) is not None else None
        if why is None:
            raise
        # a differential check found the targets' outputs different: reported in the consistency
        # section; a failure only with --require-consistent
        item.user_properties.append(("harness_consistency_disagree", why))
        if item.config.getoption("require_consistent"):
            raise
        pytest.xfail(f"targets disagree (reported; --require-consistent fails it): {why}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    report = yield
    check = consistency_check(item)
    if check is not None:
        report.user_properties.append(("harness_consistency", check))
    target = _target_of(item)
    if target is not None and target.worker is not None and report.when == "call":
        withheld = target.worker.output_report()
        if withheld:
            report.sections.append(("harness: target output", withheld))
    if target is not None and "benchmark" not in getattr(item, "fixturenames", ()):
        # (pytest-benchmark timings are benchmarks, not properties: not in the conformance table)
        facts = {"property": property_of(item), "target": target.id}
        if report.skipped and call.excinfo is not None:  # the skip's kind, as data (harness.verdicts.verdict)
            if isinstance(call.excinfo.value, runner.UnsupportedSkip):
                facts["skip_kind"] = "unsupported"
            elif isinstance(call.excinfo.value, runner.NotLoadedSkip):
                facts["skip_kind"] = "not_loaded"
        if report.when == "call":
            facts.update(_call_facts(item, call, report, target))
        row = session_rows.row_of(report, facts)  # the verdict, decided once (harness.verdicts.verdict.decide)
        if row is not None:
            report.user_properties.append((session_rows.ROW_KEY, json.dumps(row)))  # (JSON: junit XML shows it)
    return report


def _call_facts(item: pytest.Item, call, report, target) -> dict:
    """What the call phase learned besides pass/fail (times, a ``PropertyFailure``'s fields, the named
    convention, the configurations passed over, an ``--xfails`` line's effect), as data: no text parsed."""
    in_target = target.limit.spent - item.stash.get(_SPENT_KEY, target.limit.spent)
    facts = {"seconds": round(report.duration, 4), "target_seconds": round(in_target, 4)}
    error = tolerance.error_summary(tolerance.observed(), failed=report.failed)
    if error:  # per dtype: the closest to the edge, in ULPs of the output scale
        facts["error"] = error
    failure = runner.property_failure(call.excinfo.value if call.excinfo else None)
    if failure is not None and report.failed:
        facts.update(failure_kind=failure.kind, failure_message=failure.message, repro=failure.repro)
        if failure.measured:  # a convention mismatch: what the code follows
            facts["convention"] = failure.measured
    labels = target.outcome.labels
    if labels and report.passed:
        facts["label"], measured = labels[-1], measured_of(labels[-1])
        if measured:
            facts["convention"] = measured
    note = target.outcome.unsupported_note()
    if note and not report.skipped:
        facts["unsupported"], facts["unsupported_detail"] = note
    entries = item.config.stash.get(_XFAILS_KEY, [])
    if entries:
        facts.update(xfails.apply(xfails.find(entries, property_of(item), target.spec, target.id), report))
    return facts


#: the name the results sink of a session is registered under (one per config)
_SINK_NAME = "harness-conformance-rows"


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    from harness.verdicts.conformance_table import write_conformance
    broken = [t for t in config.stash.get(_TARGETS_KEY, []) if t.load_error]
    if broken:
        terminalreporter.write_sep("=", "targets that do not load")
        for t in broken:
            terminalreporter.write_line(f"target {t.spec!r}: {t.load_error}", red=True)
    rows = config.stash.get(_RESULTS_KEY, [])
    if rows:
        conformance_summary(terminalreporter, config, rows)
    if config.stash.get(_XFAILS_KEY, None):
        xfails.write_summary(terminalreporter, config.stash[_XFAILS_KEY], rows)
    section = consistency_data(config)
    if section is not None and (rows or section[1]):
        from harness.verdicts.consistency import write_terminal
        write_terminal(terminalreporter, *section, require=config.getoption("require_consistent"))
    out = config.getoption("conformance_report")
    if out and (rows or (section and section[1])):
        paths = write_conformance(rows, out, targets=targets(config), consistency=section)
        terminalreporter.write_line(f"conformance report: {', '.join(str(p) for p in paths)}")


def consistency_data(config: pytest.Config) -> tuple[list[dict], list[dict]] | None:
    """(conformance rows, differential rows) when two or more targets loaded, else None."""
    loaded = [t for t in config.stash.get(_TARGETS_KEY, []) if t.load_error is None]
    if len(loaded) < 2:
        return None
    return config.stash.get(_RESULTS_KEY, []), config.stash.get(_CONSISTENCY_KEY, [])


def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    if any(t.load_error for t in session.config.stash.get(_TARGETS_KEY, [])) and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED  # a target that does not load is not a pass
    section = consistency_data(session.config)
    if section is not None and session.config.getoption("require_consistent") and session.exitstatus == 0:
        from harness.verdicts.consistency import disagreements
        if disagreements(*section):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # the backends disagree
    sys.stdout.flush()
