"""What the planted-bug tests share: run a suite in-process against targets, read the
conformance report, and map a suite test to its property name."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITES = ROOT / "suites"


def suite_file(suite) -> Path:
    """A suite by its file name (``"test_rope.py"``), in whichever family folder it sits
    (``suites/positions/``), or a path given as it is."""
    path = Path(suite)
    if path.is_absolute() or len(path.parts) > 1:
        return path
    found = sorted(SUITES.rglob(path.name))
    if len(found) != 1:
        raise LookupError(f"{len(found)} suite files named {path.name} under {SUITES}")
    return found[0]


def nodes(**tests: str) -> list[str]:
    """Suite test node ids, ``file_stem="test_a test_b"`` -> ``/abs/suites/.../file.py::test_a``, ...:
    exactly those tests (``-k test_rmsnorm`` would also select every test of ``test_rmsnorm.py``)."""
    return [f"{suite_file(stem + '.py')}::{name}" for stem, names in tests.items() for name in names.split()]


def suite_source(suite) -> str:
    return suite_file(suite).read_text()


def suite_tests(suite) -> list[str]:
    """The test functions a suite file defines."""
    return re.findall(r"^def (test_\w+)\(", suite_source(suite), re.M)


def property_of(suite, test: str) -> str:
    """``prefix.name`` of a suite's ``test_name`` (its ``PROPERTY_PREFIX``): the conformance table's row."""
    prefix = re.search(r'^PROPERTY_PREFIX = "([^"]+)"', suite_source(suite), re.M).group(1)
    return f"{prefix}.{test.removeprefix('test_')}"


def run_suite(pytester, suite_files, impls, k=None, *extra, plugins=()):
    """Run suite files (names under suites/ or paths) in-process under the ci profile (``plugins``:
    objects registered as pytest plug-ins in that session)."""
    args = [str(suite_file(f)) for f in suite_files]
    for impl in impls:
        args += ["--impl", str(impl)]
    if k:
        args += ["-k", k]
    return pytester.runpytest_inprocess(*args, "-p", "no:cacheprovider", "--hypothesis-profile", "harness-ci",
                                        *extra, plugins=list(plugins))


def conformance(result_dir: Path) -> dict[tuple[str, str], str]:
    """(property, target) -> cell of a ``--conformance-report`` folder."""
    data = json.loads((result_dir / "conformance.json").read_text())
    return {(r["property"], r["target"]): r["result"] for r in data["results"]}


def assert_caught(pytester, suite, bug: Path, test: str, messages=()) -> str:
    """Running ``test`` of ``suite`` against the planted ``bug`` fails, the failure names the
    property, carries a repro line naming the target, and says each of ``messages``."""
    result = run_suite(pytester, [suite], [bug], test)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    prop = property_of(suite, test)
    assert f"[{prop}]" in out, f"the failure does not name the property [{prop}]:\n{out[-3000:]}"
    repro = out.split("repro:", 1)
    assert len(repro) == 2 and "--impl" in repro[1], "no repro line"
    name = bug.name if isinstance(bug, Path) else str(bug)  # a planted file, or a target module's name
    assert name in repro[1].splitlines()[0], "the repro does not name the target"
    for fragment in messages:
        assert fragment in out, f"{bug.name}: expected {fragment!r} in the failure:\n{out[-3000:]}"
    return out


def shrunk_calls(out: str) -> list:
    """The call sequence in the configuration of a state machine failure's repro line."""
    config = shlex.split(out.split("repro:", 1)[1].splitlines()[0])[-1]
    return json.loads(config)["calls"]


def assert_call_program(out: str) -> list:
    """A state machine's failure as the harness prints it: the repro line's configuration holds
    the shrunk call sequence, and the failure names that sequence's last call as the one that
    went wrong (``call n of n``). Returns the calls. Hypothesis' own report is not read: its
    wording is a third party's and changes between releases ("Falsifying example" up to 6.15x,
    "Failing test case: <state machine>" in 6.170)."""
    calls = shrunk_calls(out)
    n = len(calls)
    assert n and f"call {n} of {n}:" in out, f"the failure names no call {n} of {n}:\n{out[-3000:]}"
    return calls


def assert_declared_passes(pytester, report: Path, suite, planted: Path, tests, labels: dict) -> None:
    """A target that declares its convention passes ``tests``, with the named ``labels``."""
    result = run_suite(pytester, [suite], [planted], " or ".join(tests), "--conformance-report", str(report))
    result.assert_outcomes(passed=len(tests))
    cells = conformance(report)
    for prop, label in labels.items():
        assert cells[(prop, str(planted))] == label


#: the wall-clock limit of a self-test's subprocess: a guard against a hang, never a speed
#: requirement (a property of the code under test is never judged by it). On this project's
#: 2-core machine at load 10 the tiny main job alone took over 600 s, the earlier limit.
HANG_LIMIT_S = 2400


def source_target(tmp_path, name: str, source: str, isolation: str, timeout: float = 60):
    """A target loaded from ``source`` written to ``tmp_path/name.py`` (a fixture yields it and
    closes it: ``yield from source_target(...)``)."""
    from harness.boundary.loader import load_target
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    target = load_target(str(path), isolation=isolation, timeout=timeout)
    yield target
    target.close()


def release_target(module: str, folder: str, package: str, version: str) -> str:
    """The target module ``module`` over the side-by-side release ``package==version`` in
    ``$HARNESS_LIBS/folder`` (``harness.adapters.releases``; checked without importing it here):
    skipped with the install command when absent, failed instead under ``$HARNESS_REQUIRE_RELEASES``
    (CI installs every release, so a check it skips proves nothing)."""
    import os

    import pytest

    from harness.adapters.releases import missing
    why = missing(folder, package, version)
    if why and os.environ.get("HARNESS_REQUIRE_RELEASES"):
        pytest.fail(f"required here ($HARNESS_REQUIRE_RELEASES): {why}")
    if why:
        pytest.skip(why)
    return module


def history_of(out: str) -> list:
    """The calls of the failure's repro line (a history property's configuration)."""
    config = shlex.split(out.split("repro:", 1)[1].splitlines()[0])[-1]
    return json.loads(config)["calls"]
