"""``env.json``: what the numbers were measured on (notes/RESULTS_SCHEMA.md).

``peak_tflops_measured`` is measured, never looked up: the best of many large
square matmuls (1024^3 on CPU, 8192^3 on CUDA) per dtype on the benchmark's device and thread count, timed with the
harness timer. It is the denominator of every ``frac_of_peak``. (float32 on CUDA runs
with the process's TF32 setting, recorded as ``cuda_matmul_tf32``.)
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path

import torch

from harness import __version__
from harness.bench.timer import time_fn

ROOT = Path(__file__).resolve().parents[2]


def git_commit(root: Path = ROOT) -> str | None:
    """HEAD's commit, with ``-dirty`` when the tree has uncommitted changes; None outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10)
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def measure_peak_tflops(device: str = "cpu", dtypes=("float32", "bfloat16"), size: int | None = None,
                        max_run_s: float = 1.0) -> dict[str, float | None]:
    """Achieved TFLOP/s of an n x n x n matmul (2 n^3 FLOPs) per dtype; None if unsupported."""
    dev = torch.device(device)
    n = size or (8192 if dev.type == "cuda" else 1024)
    out: dict[str, float | None] = {}
    for name in dtypes:
        dtype = getattr(torch, name)
        try:
            a = torch.randn(n, n, device=dev).to(dtype)
            b = torch.randn(n, n, device=dev).to(dtype)
            t = time_fn(lambda: torch.mm(a, b), dev, min_block_s=0.02, min_run_s=0.2,
                        min_blocks=3, max_run_s=max_run_s, rep_ms=200.0, flush=False)
            out[name] = 2 * n**3 / t.min_s / 1e12  # best sample: the attainable peak
        except (RuntimeError, TypeError) as exc:  # dtype unsupported on this device
            out[name] = None
            print(f"peak TFLOP/s for {name} not measured: {exc}", file=sys.stderr)
        finally:
            a = b = None  # noqa: F841
    return out


def nvml_driver() -> str | None:
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            v = pynvml.nvmlSystemGetDriverVersion()
            return v.decode() if isinstance(v, bytes) else str(v)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no NVML, no driver
        return None


def collect(device: str = "cpu", argv: list[str] | None = None, peak: dict | None = None,
            extra: dict | None = None) -> dict:
    """The env.json object (schema keys first, then harness extras)."""
    dev = torch.device(device)
    cuda = dev.type == "cuda"
    env = {
        "harness_version": __version__,
        "git_commit": git_commit(),
        "time_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda if cuda else None,
        "device_name": torch.cuda.get_device_name(dev) if cuda else cpu_name(),
        "driver": nvml_driver() if cuda else None,
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "peak_tflops_measured": peak if peak is not None else measure_peak_tflops(device),
        "argv": list(sys.argv if argv is None else argv),
        # extras (not in the schema's list, harmless to readers)
        "device": str(dev) if not cuda else f"cuda:{dev.index or 0}",
        "torch_num_threads": torch.get_num_threads(),
        "cuda_matmul_tf32": bool(torch.backends.cuda.matmul.allow_tf32) if cuda else None,
        # other processes' load when the run started: > cpu_count means timings are contended
        "loadavg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }
    if cuda:
        env.update(cuda_details(dev))
    try:
        import transformers
        env["transformers"] = transformers.__version__
    except ImportError:
        env["transformers"] = None
    env.update(extra or {})
    return env


def cuda_details(dev: torch.device) -> dict:
    """What else decides GPU numbers: memory (where OOM starts), capability, cuDNN,
    triton (the self-check's reference timer), the SDPA backends this build allows."""
    out: dict = {}
    for key, get in (
        ("gpu_total_memory_bytes", lambda: torch.cuda.get_device_properties(dev).total_memory),
        ("gpu_capability", lambda: ".".join(map(str, torch.cuda.get_device_capability(dev)))),
        ("gpu_count", torch.cuda.device_count),
        ("cudnn", torch.backends.cudnn.version),
        ("cuda_matmul_fp32_precision", lambda: torch.backends.cuda.matmul.fp32_precision),
        ("sdpa_backends_enabled", lambda: {
            "flash": torch.backends.cuda.flash_sdp_enabled(),
            "efficient": torch.backends.cuda.mem_efficient_sdp_enabled(),
            "cudnn": torch.backends.cuda.cudnn_sdp_enabled(),
            "math": torch.backends.cuda.math_sdp_enabled()}),
        ("triton", lambda: __import__("triton").__version__),
    ):
        try:
            out[key] = get()
        except Exception:  # noqa: BLE001 - informational only
            out[key] = None
    return out


def write(run_dir: Path, env: dict) -> Path:
    path = Path(run_dir) / "env.json"
    path.write_text(json.dumps(env, indent=2, sort_keys=False) + "\n")
    return path
