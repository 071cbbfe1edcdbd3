"""``python -m harness run``: the main job's stages, their arguments and the exit status.

The stages themselves (check, bench, report) have their own tests; here each stage is recorded
instead of run, so the plumbing is checked in milliseconds. One real end-to-end run at the tiny
profile is in ``test_tiny_main_job_end_to_end``.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import harness.commands.run as run_command
from harness.cli import main as cli
from tests.planted_support import HANG_LIMIT_S

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def stages(monkeypatch):
    """Calls of the stage commands made by ``run``: [(command, argv)]; each returns ``codes[command]``."""
    calls, codes = [], {}

    def fake(argv):
        calls.append((argv[0], argv))
        if argv[0] == "check":  # as the real stage does: its report marks a conformance run that finished
            report = Path(argv[argv.index("--report") + 1])
            report.mkdir(parents=True, exist_ok=True)
            (report / "conformance.json").write_text("{}")
        return codes.get(argv[0] if argv[0] != "bench" or "finetune" not in argv else "finetune", 0)

    monkeypatch.setattr(run_command, "stage", fake)
    return calls, codes


def _opt(argv, flag):
    return argv[argv.index(flag) + 1]


def test_main_job_stages_and_folders(stages, tmp_path):
    calls, _ = stages
    out = tmp_path / "job"
    assert cli(["run", "--impl", "mypkg", "--out", str(out)]) == 0
    assert [c for c, _ in calls] == ["check", "bench", "bench", "report"]
    check, bench, finetune, report = (argv for _, argv in calls)
    assert _opt(check, "--report") == f"{out}/conformance" and _opt(check, "--impl") == "mypkg"
    assert _opt(bench, "--suite") == "scaling,receptive_field,kv_cache" and _opt(bench, "--out") == str(out)
    # the full CPU fine-tune profile (reference model + majority floor) into its own run folder
    assert _opt(finetune, "--suite") == "finetune" and _opt(finetune, "--profile") == "cpu"
    assert _opt(finetune, "--out") == f"{out}/finetune"
    assert _opt(finetune, "--cases") == "majority_class,reference"
    assert report[1] == str(out) and "--html" in report and "--baseline" not in report


def test_swaps_baseline_and_no_finetune(stages, tmp_path):
    calls, _ = stages
    out = tmp_path / "job"
    assert cli(["run", "--out", str(out), "--finetune-swaps", "--baseline", "cpu-reference",
                "--profile", "tiny"]) == 0
    finetune, report = calls[2][1], calls[3][1]
    assert _opt(finetune, "--cases") == "majority_class,reference,swap.sdpa,swap.layernorm"
    assert _opt(finetune, "--profile") == "tiny" and _opt(report, "--baseline") == "cpu-reference"
    # an earlier job's results are not overwritten silently: refused before any stage runs
    (out / "finetune").mkdir(parents=True)
    (out / "finetune" / "results.jsonl").write_text(json.dumps({"suite": "finetune", "case": "x"}) + "\n")
    calls.clear()
    assert cli(["run", "--out", str(out), "--no-finetune"]) == 2 and calls == []
    # --no-finetune --overwrite: no stage, and the earlier fine-tune rows are not left for the report
    assert cli(["run", "--out", str(out), "--no-finetune", "--overwrite"]) == 0
    assert [c for c, _ in calls] == ["check", "bench", "report"]
    assert "--overwrite" in calls[1][1] and not (out / "finetune").exists()


def test_resume_and_gate_options_reach_their_stages(stages, tmp_path):
    calls, _ = stages
    out = tmp_path / "job"
    assert cli(["run", "--out", str(out), "--resume", "--baseline", "cpu-reference", "--gate-cases", "target",
                "--allow-missing"]) == 0
    check, bench, finetune, report = (argv for _, argv in calls)
    assert "--resume" in bench and "--resume" in finetune and "--resume" not in check
    assert "--cases=target" in report and "--allow-missing" in report and "--strict" not in report
    calls.clear()
    assert cli(["run", "--out", str(out), "--resume", "--baseline", "cpu-reference", "--strict"]) == 0
    assert "--strict" in calls[3][1] and not any("--strict" in argv for _, argv in calls[:3])
    calls.clear()
    assert cli(["run", "--out", str(out), "--gate-cases", "all"]) == 0  # no baseline: nothing to gate
    assert not any(a.startswith("--cases") for a in calls[3][1])


@pytest.mark.parametrize("failing", ["check", "bench", "finetune", "report"])
def test_any_failing_stage_fails_the_job_but_all_stages_run(stages, tmp_path, failing, capsys):
    calls, codes = stages
    codes[failing] = 1
    assert cli(["run", "--out", str(tmp_path / "job")]) == 1
    assert len(calls) == 4
    assert "exit 1" in capsys.readouterr().out.split("summary:")[1]


def test_a_failed_acceptance_check_is_not_summarized_as_ok(stages, tmp_path, capsys):
    """A bench stage exits 0 with a failed acceptance check (bench fails only with --strict): the
    summary names the check instead of "benchmarks ok" (issue 41: "[FAIL] kv cache bytes == formula"
    was followed by "benchmarks ok"). The exit status is unchanged."""
    out = tmp_path / "job"
    out.mkdir()
    (out / "checks.json").write_text(json.dumps([
        {"name": "kv cache bytes == formula", "passed": False, "detail": "mha kv=4: 1 B != 2 B"},
        {"name": "rolling cache capped at the window", "passed": True, "detail": ""},
        {"name": "scaling exponent of lstm", "passed": None, "detail": "no fit"}]))
    assert cli(["run", "--out", str(out), "--no-finetune"]) == 0
    text = capsys.readouterr().out
    summary = text.split("summary:")[1]
    assert "benchmarks ok" not in summary and "FAILED 1 acceptance check(s) (kv cache bytes == formula)" in summary
    assert "conformance ok" in summary and "report ok" in summary
    assert "acceptance check(s) FAILED: kv cache bytes == formula" in text.split("summary:")[0]


def test_conformance_exit_0_without_its_report_fails_the_job(monkeypatch, tmp_path, capsys):
    """A check stage that ends 0 without writing conformance.json (a target that os._exit(0)s in a
    run with --isolation none) is counted as failed, not as "conformance ok"."""
    monkeypatch.setattr(run_command, "stage", lambda argv: 0)
    assert cli(["run", "--out", str(tmp_path / "job"), "--no-finetune"]) == 1
    assert "wrote no conformance report" in capsys.readouterr().out


def test_tiny_main_job_end_to_end(tmp_path):
    """The README's main job at the tiny profile: every stage really runs, every artefact exists,
    and the report holds the kernel benchmarks and the fine-tune side by side. A subprocess, as a
    user runs it (in-process, the suites this test session already imported keep its settings).
    The conformance stage runs the ``agreement`` properties of every family (``run -k``): the whole
    suite set on ``reference`` is the planted tests' control run (``test_correct_targets_pass*``), and
    here it was CI's longest test (13 min of a 53-min run under load)."""
    pytest.importorskip("seaborn")
    out = tmp_path / "job"
    proc = subprocess.run([sys.executable, "-m", "harness", "run", "--impl", "reference", "--out", str(out),
                           "--profile", "tiny", "-k", "agreement"], cwd=ROOT, capture_output=True, text=True, timeout=HANG_LIMIT_S)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "summary: conformance ok, benchmarks ok, finetune ok, report ok" in proc.stdout
    assert (out / "conformance" / "conformance.csv").is_file()
    checked = (out / "conformance" / "conformance.csv").read_text()
    assert "attention.agreement" in checked and "varlen.agreement" in checked, checked[:2000]
    suites = {json.loads(line)["suite"] for line in (out / "results.jsonl").read_text().splitlines()}
    assert suites == {"scaling", "receptive_field", "kv_cache"}
    ft = [json.loads(line) for line in (out / "finetune" / "results.jsonl").read_text().splitlines()]
    assert {r["case"] for r in ft} == {"majority_class", "reference"}
    html = (out / "report" / "report.html").read_text()
    assert "finetune" in html and "kv_cache" in html
    points = (out / "report" / "results.csv").read_text()
    assert "finetune" in points and "scaling" in points


def test_shared_options_have_one_default():
    """--impl, --isolation and the timeouts come from harness.basics.options in every command."""
    from harness.basics import options
    from harness.boundary import guard, isolation
    from harness.cli import build_parser
    assert guard.DEFAULT_TIMEOUT == options.CALL_TIMEOUT_S
    assert isolation.DEFAULT_IMPORT_TIMEOUT == options.IMPORT_TIMEOUT_S and options.DEFAULT_TARGET == "reference"
    parse = build_parser().parse_args
    assert parse(["bench", "--out", "x"]).impl == options.DEFAULT_TARGET
    assert parse(["bench", "--out", "x"]).import_timeout == options.IMPORT_TIMEOUT_S
    for argv in (["check"], ["run"]):
        args = parse(argv)
        assert args.impl is None and options.targets(args) == [options.DEFAULT_TARGET]
    for argv in (["check"], ["bench", "--out", "x"], ["repro", "c", "--impl", "t", "--config", "{}"]):
        assert parse(argv).isolation == options.DEFAULT_ISOLATION
    assert parse(["check", "--impl", "a", "--impl", "b"]).impl == ["a", "b"]


def test_echoed_stage_commands_can_be_pasted(stages, tmp_path, capsys):
    """Each stage's echoed command is quoted (shlex.join): ``-k "agreement or relative"`` and an
    --out with a space come back as the argv the stage ran, so the line can be pasted into a shell."""
    import shlex
    calls, _ = stages
    out = tmp_path / "my job"
    assert cli(["run", "--out", str(out), "-k", "agreement or relative"]) == 0
    echoed = [line.split(": ", 1)[1] for line in capsys.readouterr().out.splitlines()
              if line.startswith("=== ") and " finished in " not in line]
    assert [shlex.split(line) for line in echoed] == [["python", "-m", "harness", *argv] for _, argv in calls]
    assert "'agreement or relative'" in echoed[0]


def test_fan_out_echoes_a_merge_command_that_can_be_pasted(monkeypatch, tmp_path, capsys):
    """``bench --devices``: the report command it prints for the workers' folders is quoted."""
    import shlex

    from harness.bench import devices

    class Done:
        def __init__(self, cmd):
            self.cmd = cmd

        def wait(self):
            return 0
    monkeypatch.setattr(devices.subprocess, "Popen", Done)
    out = tmp_path / "bench run"
    assert devices.launch([], ["a", "b"], ["cpu", "cpu"], str(out)) == 0
    line = capsys.readouterr().err.split("merge them with: ", 1)[1].strip()
    assert shlex.split(line) == ["python", "-m", "harness", "report", str(out / "worker0_cpu"),
                                 str(out / "worker1_cpu")]
