"""Unpack the GPU run's ``gpu-run.tar.gz`` (scripts/device/gpu_baseline.sh) into a baseline folder
and build its report locally (notes/GPU_RUN.md).

    python scripts/device/unpack_baseline.py PATH/gpu-run.tar.gz [--dest reports/baselines/gpu-h200]
                                             [--no-report] [--no-plots]

Into DEST, as they are in the tarball:

    bench/          run folder (results.jsonl, env.json, fits.json, receptive_field_grad*.csv) with
                    conformance/ inside it (conformance.csv/.md/.json: where `harness report` reads it);
                    two stages write it: bench_scaling (the scaling rows), then bench_checks
                    (timer_selfcheck, receptive_field, kv_cache, with --resume); env.json is then
                    bench_checks', bench_scaling's is device/logs/bench_scaling.env.json
    finetune/       run folder: majority_class, reference
    finetune_swap/  run folder: the finetune rows it was seeded with + swap.sdpa, swap.layernorm
    triton_bench/   run folder: the Triton flash attention's scaling rows (target.sdpa and
                    target.sliding_window of reference.triton.flash_attention, compiled) with
                    conformance/ inside it: every suite against reference/triton's kernels
    device/         stages.json, logs/ (preamble.log: nvidia-smi and versions; one log per stage;
                    conformance-junit.xml, triton-conformance-junit.xml, bench_scaling.env.json),
                    device_manifest.json (the packed weights' provenance)

A run folder in the tarball replaces the one of the same name in DEST; the others in DEST stay
(a rerun of one stage brings back only that stage's folder). Folders without result rows (a
stage that did not get to write one) are not copied. Then

    python -m harness report DEST/bench DEST/finetune_swap [DEST/finetune] --out DEST/report --html

``finetune`` is left out of the report when ``finetune_swap`` holds every one of its points (it was
seeded with them), so the stock model's rows are not listed twice. Exit status: the report's
(0 ok, 2 input error), 2 for an unreadable tarball.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUN_FOLDERS = ("bench", "finetune", "finetune_swap", "triton_bench")
DEVICE_FILES = ("stages.json", "device_manifest.json", "logs")


def _safe_extract(tar: tarfile.TarFile, dest: Path) -> None:
    for m in tar.getmembers():
        name = Path(m.name)
        if name.is_absolute() or ".." in name.parts or not (m.isfile() or m.isdir()):
            raise SystemExit(f"unpack_baseline: refusing tarball member {m.name!r}")
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, filter="data")
    else:  # pragma: no cover - Python < 3.11.4; members were checked above
        tar.extractall(dest)


def _keys(folder: Path) -> set[str]:
    path = folder / "results.jsonl"
    keys = set()
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                keys.add(json.loads(line)["key"])
            except (ValueError, KeyError, TypeError):
                continue
    return keys


def unpack(tarball: Path, dest: Path) -> list[str]:
    """Copy the run folders and the device files into ``dest``; returns the run folders copied."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            with tarfile.open(tarball, "r:gz") as tar:
                _safe_extract(tar, Path(tmp))
        except (OSError, tarfile.TarError) as exc:
            raise SystemExit(f"unpack_baseline: cannot read {tarball}: {exc}") from None
        roots = [p for p in Path(tmp).iterdir() if p.is_dir()]
        if len(roots) != 1:
            raise SystemExit(f"unpack_baseline: {tarball}: expected one top folder (gpu-run/), "
                             f"found {[p.name for p in roots]}")
        root = roots[0]
        dest.mkdir(parents=True, exist_ok=True)
        copied = []
        for name in RUN_FOLDERS:
            src = root / name
            if not src.is_dir():
                continue
            if not (src / "results.jsonl").is_file() or not (src / "results.jsonl").stat().st_size:
                if (src / "conformance").is_dir():
                    print(f"unpack_baseline: {name}/ has no result rows, only conformance/: copied for the record")
                else:
                    print(f"unpack_baseline: {name}/ has no result rows: not copied")
                    continue
            if (dest / name).exists():
                shutil.rmtree(dest / name)
            shutil.copytree(src, dest / name)
            copied.append(name)
        device = dest / "device"
        for name in DEVICE_FILES:
            src = root / name
            if not src.exists():
                continue
            device.mkdir(exist_ok=True)
            target = device / name
            if target.is_dir():
                shutil.rmtree(target)
            (shutil.copytree if src.is_dir() else shutil.copy2)(src, target)
    return copied


def report_folders(dest: Path) -> list[Path]:
    """The run folders to report on: bench, finetune_swap, triton_bench, and finetune unless it is
    contained."""
    have = [dest / n for n in RUN_FOLDERS if (dest / n / "results.jsonl").is_file() and _keys(dest / n)]
    names = {p.name for p in have}
    if {"finetune", "finetune_swap"} <= names and _keys(dest / "finetune") <= _keys(dest / "finetune_swap"):
        print("unpack_baseline: finetune_swap holds all of finetune's points (it was seeded with them): "
              "the report reads finetune_swap only")
        have = [p for p in have if p.name != "finetune"]
    return have


def summarize_stages(dest: Path) -> None:
    path = dest / "device" / "stages.json"
    if not path.is_file():
        return
    try:
        data = json.loads(path.read_text())
    except ValueError as exc:
        print(f"unpack_baseline: {path}: unreadable ({exc})")
        return
    print(f"stages ({'rehearsal' if data.get('rehearse') else 'device'} run, {data.get('elapsed_s')} s):")
    for s in data.get("stages", []):
        flag = " TIMED OUT" if s.get("timed_out") else ""
        print(f"  {s['stage']:<14} {s['status']:<18} exit {s['exit_code']}, {s['seconds']} s "
              f"(budget {s['budget_s']} s){flag}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("tarball", type=Path, help="gpu-run.tar.gz as returned in the device tool's files")
    p.add_argument("--dest", type=Path, default=REPO / "reports" / "baselines" / "gpu-h200",
                   help="baseline folder (default: reports/baselines/gpu-h200)")
    p.add_argument("--no-report", action="store_true", help="only unpack")
    p.add_argument("--no-plots", action="store_true", help="report without PNG plots (faster)")
    args = p.parse_args(argv)
    if not args.tarball.is_file():
        print(f"unpack_baseline: {args.tarball} does not exist", file=sys.stderr)
        return 2
    copied = unpack(args.tarball, args.dest)
    print(f"unpack_baseline: {args.tarball} -> {args.dest}: {', '.join(copied) or 'no run folder'}")
    summarize_stages(args.dest)
    if args.no_report:
        return 0
    folders = report_folders(args.dest)
    if not folders:
        print("unpack_baseline: no run folder with result rows: no report", file=sys.stderr)
        return 2
    cmd = [sys.executable, "-m", "harness", "report", *map(str, folders), "--out", str(args.dest / "report"),
           "--html", *(["--no-plots"] if args.no_plots else [])]
    print("unpack_baseline: " + " ".join(cmd), flush=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    return subprocess.run(cmd, cwd=REPO, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
