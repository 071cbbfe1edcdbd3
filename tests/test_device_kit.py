"""The GPU-run kit (notes/GPU_RUN.md), the parts that need no packages: the HARNESS_FINETUNE_*
overrides of harness.bench.models.finetune_data and scripts/device/gpu_baseline.sh (it parses, and
its dry run plans the stages in priority order within the deadline). The packing of the model and
corpus and the rehearsed run are in ``test_device_packing.py``.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from harness.bench.models import finetune_data as fd
from tests.device_kit_support import ORDER, stages

REPO = Path(__file__).resolve().parents[1]
DEVICE = REPO / "scripts" / "device"
SCRIPT = DEVICE / "gpu_baseline.sh"


# ------------------------------------------------------------------ overrides (no packages needed)

def test_model_dir_override_missing_folder_raises(monkeypatch, tmp_path):
    monkeypatch.setenv(fd.MODEL_DIR_ENV, str(tmp_path / "nope"))
    with pytest.raises(fd.DataUnavailable, match=r"HARNESS_FINETUNE_MODEL_DIR=.*nope.*is not a folder"):
        fd.model_path()


def test_model_dir_override_names_every_missing_file(monkeypatch, tmp_path):
    (tmp_path / "config.json").write_text("{}")
    monkeypatch.setenv(fd.MODEL_DIR_ENV, str(tmp_path))
    with pytest.raises(fd.DataUnavailable) as info:
        fd.model_path()
    msg = str(info.value)
    assert "HARNESS_FINETUNE_MODEL_DIR" in msg and "model.safetensors" in msg
    assert "tokenizer.json or vocab.txt" in msg and "config.json" not in msg.split("lacks")[1]
    with pytest.raises(fd.DataUnavailable, match="HARNESS_FINETUNE_MODEL_DIR"):
        fd.load_tokenizer()  # never falls back to the package


def test_model_dir_override_is_used(monkeypatch, tmp_path):
    for name in ("config.json", "model.safetensors", "vocab.txt"):
        (tmp_path / name).write_text("x")
    monkeypatch.setenv(fd.MODEL_DIR_ENV, str(tmp_path))
    assert fd.model_path() == tmp_path


def test_corpus_override_missing_file_and_folder_raise(monkeypatch, tmp_path):
    monkeypatch.setenv(fd.CORPUS_ENV, str(tmp_path / "missing.csv.bz2"))
    with pytest.raises(fd.DataUnavailable, match=r"HARNESS_FINETUNE_CORPUS=.*missing\.csv\.bz2.*does not exist"):
        fd.corpus_path()
    monkeypatch.setenv(fd.CORPUS_ENV, str(tmp_path))
    with pytest.raises(fd.DataUnavailable, match="has no rotten_tomatoes_corpus_full.csv.bz2"):
        fd.load_reviews()


def test_corpus_override_file_or_folder(monkeypatch, tmp_path):
    f = tmp_path / "rotten_tomatoes_corpus_full.csv.bz2"
    f.write_bytes(b"")
    for value in (f, tmp_path):
        monkeypatch.setenv(fd.CORPUS_ENV, str(value))
        assert fd.corpus_path() == f


def test_weights_note_sources(monkeypatch, tmp_path):
    monkeypatch.delenv(fd.WEIGHTS_NOTE_ENV, raising=False)
    monkeypatch.delenv(fd.MODEL_DIR_ENV, raising=False)
    assert fd.weights_note() is None and fd.weights_params() == {}
    monkeypatch.setenv(fd.MODEL_DIR_ENV, str(tmp_path))
    assert fd.weights_note() == {"weights": "override", "model_dir": str(tmp_path)}
    (tmp_path / fd.WEIGHTS_NOTE_FILE).write_text(json.dumps({"weights": "fp16_rounded_copy", "x": 1}))
    assert fd.weights_note()["x"] == 1 and fd.weights_params() == {"weights": "fp16_rounded_copy"}
    monkeypatch.setenv(fd.WEIGHTS_NOTE_ENV, '{"weights": "from_env"}')
    assert fd.weights_params() == {"weights": "from_env"}
    monkeypatch.setenv(fd.WEIGHTS_NOTE_ENV, "plain words")
    assert fd.weights_note() == {"note": "plain words"}


def test_shell_script_parses():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


DEADLINE_S, RESERVE_S, PREAMBLE_S = 560, 15, 15


def _dry_run(tmp_path, **env) -> tuple[subprocess.CompletedProcess, Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    out = tmp_path / "out"
    full = dict(os.environ, HARNESS_DRY_RUN="1", OUT=str(out), HARNESS_RUN_DIR=str(tmp_path / "run"),
                HARNESS_DEVICE_ASSETS=str(tmp_path / "none"), **env)
    for var in [v for v in full if v.startswith("HARNESS_") and v not in env]:
        if var not in ("HARNESS_DRY_RUN", "HARNESS_RUN_DIR", "HARNESS_DEVICE_ASSETS", "HARNESS_LIBS"):
            full.pop(var)
    proc = subprocess.run(["bash", str(SCRIPT)], cwd=tmp_path, env=full, capture_output=True, text=True, timeout=60)
    return proc, out


def test_dry_run_plans_the_stages_in_priority_order_within_the_deadline(tmp_path):
    """HARNESS_DRY_RUN=1 runs no stage: it prints each one's command at its whole budget (the worst
    case). The plan of the first H200 run (2026-12-04) lost the scaling sweep to receptive_field
    and kv_cache in one bench stage and ran conformance serially; now scaling runs alone first, the
    Triton rows right after it, both conformance stages with -n 8 before the fine-tune, and in the
    worst case every stage up to finetune gets its whole own budget before the deadline."""
    proc, out = _dry_run(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    st = stages(out)
    assert list(st) == ORDER
    first = ORDER[:5]
    assert all(st[k]["status"] == "dry run" and st[k]["seconds"] == st[k]["budget_s"] for k in first), st
    assert {k: st[k]["budget_s"] for k in first} == {"bench_scaling": 145, "triton_bench": 75, "conformance": 75,
                                                     "triton_conformance": 85, "finetune": 150}
    worst = PREAMBLE_S + sum(st[k]["seconds"] for k in first)
    assert worst <= DEADLINE_S - RESERVE_S, worst
    assert json.loads((out / "stages.json").read_text())["elapsed_s"] <= DEADLINE_S - RESERVE_S
    # the low-priority stages live on rollover: nothing is left for them in the worst case
    assert st["finetune_swap"]["status"] == st["bench_checks"]["status"] == "skipped: deadline"
    scaling, checks = st["bench_scaling"]["command"], st["bench_checks"]["command"]
    assert "--suite scaling " in scaling and "--time-budget-s 110" in scaling and "--resume" not in scaling
    assert "--suite timer_selfcheck,receptive_field,kv_cache " in checks
    assert f"--out {tmp_path / 'run' / 'bench'} " in scaling and f"--out {tmp_path / 'run' / 'bench'} " in checks
    assert "--resume" in checks  # into the scaling stage's folder, keeping its rows
    assert "--time-budget-s 40 " in st["triton_bench"]["command"]
    assert st["conformance"]["command"].endswith("conformance-junit.xml -n 8")
    tcheck = st["triton_conformance"]["command"]
    for module in ("flash_attention", "kvcache", "norms", "rope", "rope_interleaved"):
        assert f"--impl reference.triton.{module} " in tcheck
    assert "--device cuda" in tcheck and "triton_bench/conformance" in tcheck and tcheck.endswith(" -n 8")
    assert not (tmp_path / "run" / "bench").exists()  # nothing ran


def test_dry_run_knobs(tmp_path):
    """HARNESS_STAGES picks (never reorders) the new stage names, "bench" still means both bench
    halves, an unknown name is refused; HARNESS_BUDGET_<STAGE> and HARNESS_CHECK_ARGS override;
    with rollover off a subset ends early."""
    proc, out = _dry_run(tmp_path / "a", HARNESS_STAGES="conformance,bench", HARNESS_BUDGET_BENCH_CHECKS="200",
                         HARNESS_BUDGET_CONFORMANCE="30", HARNESS_CHECK_ARGS="", HARNESS_TRITON_ARGS="-n 2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    st = stages(out)
    assert list(st) == ["bench_scaling", "conformance", "bench_checks"]
    assert st["conformance"]["budget_s"] == 30 and st["bench_checks"]["budget_s"] == 200
    assert st["conformance"]["command"].endswith("conformance-junit.xml")  # no xdist
    assert "--time-budget-s 165 " in st["bench_checks"]["command"]
    proc, out = _dry_run(tmp_path / "b", HARNESS_STAGES="triton_conformance", HARNESS_TRITON_ARGS="-n 2")
    assert stages(out)["triton_conformance"]["command"].endswith(" -n 2")
    proc, _ = _dry_run(tmp_path / "c", HARNESS_STAGES="bench_scaling,triton")
    assert proc.returncode == 2 and "unknown stage 'triton'" in proc.stderr
    proc, _ = _dry_run(tmp_path / "d", HARNESS_BUDGET_BENCH="300")
    assert proc.returncode == 0 and "HARNESS_BUDGET_BENCH is no longer read" in proc.stderr
